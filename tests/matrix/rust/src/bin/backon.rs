//! backon's documented pattern: `.retry(ExponentialBuilder::default())` around a reqwest call,
//! a `when` that retries 429 and 503, and `adjust` reading `Retry-After` as delay-seconds, as
//! backon's docs show for `adjust` (the server's hint replaces the backoff's delay).
//!
//! Usage: backon METHOD URL. Exits 0 on a 2xx, 1 otherwise.
use backon::{ExponentialBuilder, Retryable};
use std::time::Duration;

#[derive(Debug)]
struct Throttled {
    retry_after: Option<Duration>,
}

async fn send(
    client: &reqwest::Client,
    method: &reqwest::Method,
    url: &str,
) -> Result<(), Result<Throttled, String>> {
    let mut request = client.request(method.clone(), url);
    if method == reqwest::Method::POST {
        request = request.body("{}");
    }
    let response = request
        .send()
        .await
        .map_err(|error| Err(error.to_string()))?;
    let status = response.status().as_u16();
    if status == 429 || status == 503 {
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        return Err(Ok(Throttled { retry_after }));
    }
    if !response.status().is_success() {
        return Err(Err(format!("status {status}")));
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let method: reqwest::Method = args[1].parse().expect("GET or POST");
    let client = reqwest::Client::new();
    let result = (|| send(&client, &method, &args[2]))
        .retry(ExponentialBuilder::default())
        .when(|error| error.is_ok())
        .adjust(|error, delay| match error {
            Ok(Throttled {
                retry_after: Some(after),
            }) => Some(*after),
            _ => delay,
        })
        .await;
    if let Err(error) = result {
        eprintln!("{error:?}");
        std::process::exit(1);
    }
}
