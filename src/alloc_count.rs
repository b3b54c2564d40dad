//! Test-only global allocator that counts, per thread, the allocations made and
//! the bytes they asked for, so unit tests can measure what one step of the data
//! path costs (see the "life of an event" in `docs/threads.md`). Per-thread
//! counters keep parallel tests from seeing each other's allocations.
// Needs unsafe for a GlobalAlloc; each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static BYTES: Cell<usize> = const { Cell::new(0) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = BYTES.try_with(|b| b.set(b.get() + bytes));
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is passed on to the system allocator unchanged; counting
// touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A reallocation counts as a fresh allocation of the new size (an upper
        // bound on what it costs).
        count(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the (allocations, bytes) it made on this
/// thread.
pub(crate) fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let (c0, b0) = (COUNT.with(Cell::get), BYTES.with(Cell::get));
    let out = f();
    (out, COUNT.with(Cell::get) - c0, BYTES.with(Cell::get) - b0)
}
