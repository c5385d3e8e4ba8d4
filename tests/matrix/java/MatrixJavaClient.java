// java.net.http.HttpClient with the hand loop its users write: up to 3 retries of a 429 or
// 503, each after Retry-After read as seconds with Integer.parseInt, or after 1 s when the
// header is missing or not a number. The proxy comes from JAVA_TOOL_OPTIONS (holdoff run).
//
// Usage: java -cp DIR MatrixJavaClient METHOD URL. Exits 0 on a 2xx, 1 otherwise.

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public final class MatrixJavaClient {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        HttpRequest.BodyPublisher body = args[0].equals("POST")
                ? HttpRequest.BodyPublishers.ofString("{}")
                : HttpRequest.BodyPublishers.noBody();
        HttpRequest request = HttpRequest.newBuilder(URI.create(args[1]))
                .method(args[0], body)
                .build();
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        for (int retry = 0; retry < 3 && (response.statusCode() == 429 || response.statusCode() == 503); retry++) {
            long seconds;
            try {
                seconds = Integer.parseInt(response.headers().firstValue("Retry-After").orElse("1"));
            } catch (NumberFormatException e) {
                seconds = 1;
            }
            Thread.sleep(seconds * 1000);
            response = client.send(request, HttpResponse.BodyHandlers.ofString());
        }
        System.exit(response.statusCode() / 100 == 2 ? 0 : 1);
    }
}
