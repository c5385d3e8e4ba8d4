// A Java client that honours Retry-After, as its users write one: java.net.http.HttpClient
// in a loop that sleeps until the hint's HTTP-date (or for its delay-seconds). Java reads no
// proxy variables, so the proxy comes from HOLDOFF_PROXY_URL, which `holdoff run` sets.
//
// Usage: java -cp DIR RetryAfterClient URL. Prints "STATUS BODY"; exits 1 if still throttled.

import java.net.InetSocketAddress;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;

public final class RetryAfterClient {
    public static void main(String[] args) throws Exception {
        URI proxy = URI.create(System.getenv("HOLDOFF_PROXY_URL"));
        HttpClient client = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .proxy(ProxySelector.of(new InetSocketAddress(proxy.getHost(), proxy.getPort())))
                .build();
        HttpRequest request = HttpRequest.newBuilder(URI.create(args[0])).GET().build();
        for (int attempt = 0; attempt < 3; attempt++) {
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 429) {
                System.out.println(response.statusCode() + " " + response.body());
                return;
            }
            String hint = response.headers().firstValue("retry-after").orElseThrow().trim();
            Duration wait;
            if (hint.chars().allMatch(Character::isDigit)) {
                wait = Duration.ofSeconds(Long.parseLong(hint));
            } else {
                Instant at = ZonedDateTime.parse(hint, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
                wait = Duration.between(Instant.now(), at);
            }
            if (!wait.isNegative()) {
                // Thread.sleep takes whole milliseconds: round up, never wake before the date.
                Thread.sleep(wait.plusNanos(999_999).toMillis());
            }
        }
        System.exit(1);
    }
}
