//! holdoff-reqwest's `HoldoffMiddleware` with `Policy::default()` and a 30 s timeout, as its
//! README shows.
//!
//! Usage: holdoff-reqwest METHOD URL. Exits 0 on a 2xx, 1 otherwise.
use holdoff_reqwest::HoldoffMiddleware;
use holdoff_reqwest::holdoff::Policy;
use std::time::Duration;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(HoldoffMiddleware::new(Policy::default()).timeout(Duration::from_secs(30)))
        .build();
    let method: reqwest::Method = args[1].parse().expect("GET or POST");
    let post = method == reqwest::Method::POST;
    let mut request = client.request(method, &args[2]);
    if post {
        request = request.body("{}");
    }
    match request.send().await {
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
