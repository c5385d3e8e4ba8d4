//! reqwest-middleware with reqwest-retry's `RetryTransientMiddleware` and an
//! `ExponentialBackoff` of 3 retries, as the reqwest-retry README shows.
//!
//! Usage: reqwest-retry METHOD URL. Exits 0 on a 2xx, 1 otherwise.
use reqwest_middleware::ClientBuilder;
use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let retry_policy = ExponentialBackoff::builder().build_with_max_retries(3);
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryTransientMiddleware::new_with_policy(retry_policy))
        .build();
    let method: reqwest::Method = args[1].parse().expect("GET or POST");
    let post = method == reqwest::Method::POST;
    let mut request = client.request(method, &args[2]);
    if post {
        request = request.body("{}");
    }
    let result = request.send().await;
    match result {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => {
            eprintln!("status {}", response.status());
            std::process::exit(1);
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
}
