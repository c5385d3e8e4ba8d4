//! The one counting allocator, for tests that measure the heap rather than estimate it:
//! install [`Counting`] as the test binary's global allocator, then read [`live`] (the bytes a
//! structure holds, process-wide) before and after, or [`count`] the allocations a call makes
//! on its own thread.
//!
//! ```ignore
//! use holdoff_testkit::heap::{self, Counting};
//!
//! #[global_allocator]
//! static ALLOCATOR: Counting = Counting;
//!
//! let before = heap::live();
//! let held = vec![0u8; 1 << 20];
//! assert!(heap::live() - before >= 1 << 20);
//!
//! let (_, allocations) = heap::count(|| "already a str".len());
//! assert_eq!(allocations, 0);
//! ```
#![allow(unsafe_code)] // A global allocator is `unsafe impl`; it only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forwards to [`System`], counting the bytes live and each thread's allocations.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const` initialisation: reading it never allocates, so the allocator may touch it.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The bytes allocated and not yet freed, through [`Counting`], by the whole process.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Runs `f` and returns its result with the number of heap allocations (reallocations
/// included) it made on this thread, through [`Counting`]: the test harness's other threads,
/// and tests running in parallel, never show up in it.
pub fn count<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    let after = ALLOCATIONS.with(Cell::get);
    (out, after - before)
}

fn bump() {
    // `try_with`: during thread teardown the slot may already be gone; such allocations
    // happen outside any measurement.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call forwards to `System` with the same arguments; the counters only add
// and subtract the sizes they are given, and touch a thread-local `Cell`.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
