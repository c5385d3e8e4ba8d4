// hashicorp/go-retryablehttp with its defaults, as its README shows: retryablehttp.NewClient()
// (RetryMax 4, RetryWaitMin 1 s, RetryWaitMax 30 s, DefaultRetryPolicy, DefaultBackoff, which
// reads Retry-After on 429 and 503). Its transport is net/http's, which reads HTTP_PROXY but
// never proxies loopback: the script calls the upstream by the machine's name.
//
// Usage: retryablehttp METHOD URL. Exits 0 on a 2xx, 1 otherwise.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-retryablehttp"
)

func main() {
	client := retryablehttp.NewClient()
	client.Logger = nil
	var body interface{}
	if os.Args[1] == "POST" {
		body = strings.NewReader("{}")
	}
	request, err := retryablehttp.NewRequest(os.Args[1], os.Args[2], body)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	response, err := client.Do(request)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	response.Body.Close()
	if response.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "status", response.Status)
		os.Exit(1)
	}
}
