// Go's net/http as its users write it: http.Get, whose default transport reads HTTPS_PROXY,
// and crypto/tls, which reads SSL_CERT_FILE. It retries a 429 once its delay-seconds
// Retry-After has passed.
//
// Usage: client URL. Prints the body; exits 1 if still throttled or on an error.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	for attempt := 0; attempt < 3; attempt++ {
		response, err := http.Get(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(response.Body)
		response.Body.Close()
		if response.StatusCode != http.StatusTooManyRequests {
			fmt.Println(string(body))
			return
		}
		seconds, err := strconv.Atoi(strings.TrimSpace(response.Header.Get("Retry-After")))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		time.Sleep(time.Duration(seconds) * time.Second)
	}
	os.Exit(1)
}
