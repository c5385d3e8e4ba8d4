//! A million open windows fit in well under 256 MB: the heap the judge holds is counted by a
//! counting allocator, not estimated.

use std::fmt::Write as _;
use std::time::Duration;

use holdoff::clock::SystemClock;
use holdoff_proxy::judge::{Judge, KeyMode, KeyParts};
use holdoff_testkit::heap::{self, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_million_open_windows_fit_in_256_megabytes() {
    const WINDOWS: usize = 1_000_000;
    let t0 = SystemClock.now();
    let mut url = String::with_capacity(64);
    let before = heap::live();
    let judge = Judge::new(KeyMode::default(), t0);
    for i in 0..WINDOWS {
        url.clear();
        let _ = write!(url, "https://api.example/v1/items/{i}");
        let key = judge.key(&KeyParts {
            client: "127.0.0.1",
            method: "GET",
            url: &url,
            origin: "https://api.example:443",
            header: None,
        });
        judge.open(key, t0, t0 + Duration::from_secs(30));
    }
    let held = heap::live() - before;
    assert_eq!(judge.open_windows(), WINDOWS);
    println!(
        "{WINDOWS} open windows hold {:.1} MB ({} bytes per window)",
        held as f64 / 1e6,
        held / WINDOWS
    );
    assert!(held < 256 * 1024 * 1024, "{held} bytes");
}
