//! A counting allocator, for tests that measure the heap a structure holds rather than
//! estimate it: install [`Counting`] as the test binary's global allocator, then read
//! [`live`] before and after.
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
//! ```
#![allow(unsafe_code)] // A global allocator is `unsafe impl`; it only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forwards to [`System`], counting the bytes live.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The bytes allocated and not yet freed, through [`Counting`], by the whole process.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

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
