//! A million open windows fit in well under 256 MB: the heap the judge holds is counted by a
//! counting allocator, not estimated.
#![allow(unsafe_code)] // A global allocator is `unsafe impl`; it only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdoff::clock::SystemClock;
use holdoff_proxy::judge::{Judge, KeyMode, KeyParts};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the same arguments; the counter only adds
// and subtracts the sizes it is given.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_million_open_windows_fit_in_256_megabytes() {
    const WINDOWS: usize = 1_000_000;
    let t0 = SystemClock.now();
    let mut url = String::with_capacity(64);
    let before = LIVE.load(Ordering::Relaxed);
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
    let held = LIVE.load(Ordering::Relaxed) - before;
    assert_eq!(judge.open_windows(), WINDOWS);
    println!(
        "{WINDOWS} open windows hold {:.1} MB ({} bytes per window)",
        held as f64 / 1e6,
        held / WINDOWS
    );
    assert!(held < 256 * 1024 * 1024, "{held} bytes");
}
