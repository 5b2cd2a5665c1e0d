//! The process's allocator, and giving freed memory back while the server is idle.
//!
//! mimalloc keeps one heap per thread. A block freed by another thread than the one that
//! allocated it (a connection accepted on one runtime worker and torn down on the other)
//! goes onto its page's cross-thread list, and the page is only reclaimed — and its memory
//! returned to the system — when the owning thread next allocates from it or collects. A
//! worker that goes idle after a load never does either, so after 20 000 connections close
//! the memory they used stayed resident. Each runtime worker therefore collects its heap
//! when it parks, at most once per [`COLLECT_INTERVAL`].

use std::cell::Cell;
use std::time::{Duration, Instant};

/// mimalloc: glibc's malloc serialises on arena locks under many small allocations across
/// threads (seen in profiles of the GET path); mimalloc's thread-local heaps do not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Least time between two collections of one worker's heap. A collection walks the
/// thread's pages (well under a millisecond for a heap of hundreds of MiB), so a worker
/// that parks thousands of times a second under load still collects once a second.
const COLLECT_INTERVAL: Duration = Duration::from_secs(1);

thread_local! {
    static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The runtime's `on_thread_park` hook: collects this thread's heap when the last
/// collection is older than [`COLLECT_INTERVAL`].
pub fn on_worker_park() {
    let now = Instant::now();
    let due = LAST_COLLECT.with(|last| match last.get() {
        Some(at) if now.duration_since(at) < COLLECT_INTERVAL => false,
        _ => {
            last.set(Some(now));
            true
        }
    });
    if due {
        // SAFETY: `mi_collect` takes no pointer and has no precondition: it may be called
        // at any time from any thread, and only frees what mimalloc already knows to be
        // free (the calling thread's free lists, pages wholly free, purges that are due).
        // `force = false` keeps mimalloc's purge delay, so a page freed just now is not
        // returned and faulted in again under a steady load.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_collect(false)
        };
    }
}
