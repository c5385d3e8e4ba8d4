// java.net.http.HttpClient as its users write it, with no proxy, SSLContext or trust settings
// of its own: under `holdoff run` it reaches the proxy and trusts the throwaway CA through
// JAVA_TOOL_OPTIONS alone. It retries a 429 once its delay-seconds Retry-After has passed.
//
// Usage: java -cp DIR HoldoffJavaClient URL. Prints the body; exits 1 if still throttled.

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public final class HoldoffJavaClient {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        HttpRequest request = HttpRequest.newBuilder(URI.create(args[0])).GET().build();
        for (int attempt = 0; attempt < 3; attempt++) {
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 429) {
                System.out.println(response.body());
                return;
            }
            long seconds = Long.parseLong(response.headers().firstValue("retry-after").orElseThrow().trim());
            Thread.sleep(seconds * 1000);
        }
        System.exit(1);
    }
}
