//! The process's allocator, and giving freed memory back while the server is idle.
//!
//! mimalloc keeps one heap per thread. A block freed by another thread than the one that
//! allocated it (a connection accepted on one runtime worker and torn down on the other)
//! goes onto its page's cross-thread list, and the page is only reclaimed — and its memory
//! returned to the system — when the owning thread next allocates from it or collects. A
//! worker that goes idle after a load never does either, so after 20 000 connections close
//! the memory they used stayed resident. Each runtime worker therefore collects its heap
//! when it parks, at most once per [`COLLECT_INTERVAL`].
//!
//! A worker that parks within that interval of its last collection skips it and *owes*
//! one. A worker that keeps waking collects at a later park; one that nothing wakes again
//! (the load just ended) would keep the memory freed into its heap.
//! [`settle_owed_collections`] runs beside the server: every [`SETTLE_PERIOD`] it looks for
//! a worker that has owed a collection since before the last period — so it has not
//! parked since — and then wakes the workers with a few empty tasks, so that it parks
//! again, later than the interval, and collects. At rest nothing is owed and the task
//! only ticks.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// mimalloc: glibc's malloc serialises on arena locks under many small allocations across
/// threads (seen in profiles of the GET path); mimalloc's thread-local heaps do not.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

/// Largest alignment every mimalloc block of at least that size has (`MI_MAX_ALIGN_SIZE`,
/// `sizeof(max_align_t)`): mimalloc places every block of 16 bytes or more at a multiple
/// of 16 (it asserts so in `_mi_page_malloc_zero`), and every block at a multiple of the
/// word size.
const PLAIN_ALIGN: usize = 16;

/// Whether a plain `mi_malloc(size)` block is aligned enough for `align` — the rule the
/// standard library's `System` allocator applies to `malloc` (`align <= MIN_ALIGN &&
/// align <= size`): a block of `size` bytes is at least `size` bytes long, so for
/// `align <= size <= 16` it is word-aligned, and 16-aligned for `size >= 16`.
#[inline]
fn plain_is_enough(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// mimalloc as the global allocator, asking for alignment only when a layout needs more
/// than every block has.
///
/// The `mimalloc` crate's allocator calls `mi_malloc_aligned` for every layout, and
/// mimalloc's aligned entry point takes its fast path only for blocks up to 1 KiB: every
/// larger allocation, even of bytes (alignment 1), went through the generic aligned path
/// and over-allocated by the alignment (callgrind: ~200 instructions more per allocation,
/// a third of the allocations of a gRPC push — the connection's read and write buffers).
/// Plain `mi_malloc` for every layout it satisfies, as `System` does with `malloc`.
struct MiMalloc;

// SAFETY: every method forwards to the mimalloc function that implements the same contract
// for the layout given:
// - `mi_malloc`/`mi_zalloc`/`mi_realloc` are used only when `plain_is_enough` holds, where
//   the block they return is aligned for the layout (see `PLAIN_ALIGN`); for `realloc` it
//   must hold for the old size too, so the block was allocated by the plain functions and
//   has no interior (aligned) pointer;
// - otherwise the `_aligned` variants, which honour any power-of-two alignment (a
//   `Layout`'s alignment always is one);
// - `mi_free` frees blocks of either kind (it finds the block from an aligned pointer);
// - every function returns null on failure, as `GlobalAlloc` requires, and none unwinds.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: see the impl; `layout.size()` is non-zero by `GlobalAlloc`'s contract.
        unsafe {
            allocate(
                layout,
                libmimalloc_sys::mi_malloc,
                libmimalloc_sys::mi_malloc_aligned,
            )
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            allocate(
                layout,
                libmimalloc_sys::mi_zalloc,
                libmimalloc_sys::mi_zalloc_aligned,
            )
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` was returned by one of the allocation functions above.
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // SAFETY: `ptr` is a live block of `layout` from this allocator; the plain
        // `mi_realloc` only for a block the plain functions allocated and a new size they
        // align (see the impl).
        unsafe {
            if plain_is_enough(align, layout.size()) && plain_is_enough(align, new_size) {
                libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast()
            } else {
                libmimalloc_sys::mi_realloc_aligned(ptr.cast(), new_size, align).cast()
            }
        }
    }
}

/// A block for `layout` from `plain` where that aligns it (see [`plain_is_enough`]), else
/// from `aligned`.
///
/// # Safety
/// `plain` and `aligned` are a pair of mimalloc's allocation functions (`mi_malloc` and
/// `mi_malloc_aligned`, or the zeroing pair), and `layout.size()` is not zero.
#[allow(unsafe_code)]
#[inline]
unsafe fn allocate(
    layout: std::alloc::Layout,
    plain: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    // SAFETY: the functions take sizes and a power-of-two alignment, no pointer; they
    // return null or a block of at least `layout.size()` bytes, aligned for `layout` by
    // the choice made here (see `MiMalloc`'s impl).
    unsafe {
        if plain_is_enough(layout.align(), layout.size()) {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

/// Least time between two collections of one worker's heap. A collection walks the
/// thread's pages (well under a millisecond for a heap of hundreds of MiB), so a worker
/// that parks thousands of times a second under load still collects once a second.
const COLLECT_INTERVAL: Duration = Duration::from_secs(1);

/// How often [`settle_owed_collections`] looks for owed collections.
const SETTLE_PERIOD: Duration = Duration::from_secs(2);

/// Workers tracked; a runtime with more (a host of over 64 cores) leaves the rest to their
/// own parks.
const SLOTS: usize = 64;

/// Per worker: when (milliseconds since [`epoch`], plus one) its last park skipped a
/// collection, or 0 when its last park collected.
static OWED_SINCE: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
    static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn millis_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_millis()).unwrap_or(u64::MAX - 1)
}

/// This thread's slot in [`OWED_SINCE`], taken at its first park.
fn slot() -> Option<usize> {
    SLOT.with(|s| {
        if s.get().is_none() {
            let i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
            s.set((i < SLOTS).then_some(i));
        }
        s.get()
    })
}

/// The runtime's `on_thread_park` hook: collects this thread's heap when the last
/// collection is older than [`COLLECT_INTERVAL`], else notes that this thread owes one.
pub fn on_worker_park() {
    let now = Instant::now();
    let due = LAST_COLLECT.with(|last| match last.get() {
        Some(at) if now.duration_since(at) < COLLECT_INTERVAL => false,
        _ => {
            last.set(Some(now));
            true
        }
    });
    if let Some(i) = slot() {
        let owed_since = if due { 0 } else { millis_since_epoch(now) + 1 };
        OWED_SINCE[i].store(owed_since, Ordering::Relaxed);
    }
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

/// Number of workers that have owed a collection for at least `age`: they have not parked
/// since, so nothing but a wake-up will make them collect.
pub fn owing_for(age: Duration) -> usize {
    let now = millis_since_epoch(Instant::now());
    let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
    OWED_SINCE
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .filter(|&since| since != 0 && now.saturating_sub(since - 1) >= age)
        .count()
}

/// Runs for the life of the runtime: when a worker has owed a collection for a whole
/// [`SETTLE_PERIOD`], wakes the `workers` workers so that it parks again and collects.
/// Empty tasks spawned from a worker are stolen by parked ones (the runtime wakes a parked
/// worker when a run queue holds work to steal), which then park again.
pub async fn settle_owed_collections(workers: usize) {
    let mut tick = tokio::time::interval(SETTLE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if owing_for(SETTLE_PERIOD) == 0 {
            continue;
        }
        for _ in 0..workers.max(1) * 2 {
            tokio::spawn(tokio::task::yield_now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout gets a block aligned as it asks, whichever mimalloc function serves it,
    /// and keeps its contents and alignment through reallocations that cross the
    /// plain/aligned boundary either way.
    #[test]
    #[allow(unsafe_code)]
    fn blocks_are_aligned_for_their_layouts() {
        use std::alloc::{GlobalAlloc, Layout};
        let sizes = [
            1usize, 3, 8, 12, 15, 16, 24, 40, 100, 1024, 1025, 4096, 8200, 70_000,
        ];
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for &size in &sizes {
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: non-zero sizes; each block is written and read within its size,
                // reallocated with the layout it has, and freed once.
                unsafe {
                    let z = GLOBAL.alloc_zeroed(layout);
                    assert!(!z.is_null());
                    assert_eq!(z as usize % align, 0, "alloc_zeroed {size} align {align}");
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed");
                    GLOBAL.dealloc(z, layout);
                    for new_size in [1, size / 2 + 1, size * 3, 20_000] {
                        let p = GLOBAL.alloc(layout);
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "alloc {size} align {align}");
                        p.write_bytes(0xa5, size);
                        let q = GLOBAL.realloc(p, layout, new_size);
                        assert!(!q.is_null());
                        assert_eq!(q as usize % align, 0, "realloc {size}->{new_size}, {align}");
                        assert!((0..size.min(new_size)).all(|i| *q.add(i) == 0xa5), "kept");
                        GLOBAL.dealloc(q, Layout::from_size_align(new_size, align).expect("valid"));
                    }
                }
            }
        }
    }

    /// After a burst of work on every worker ends, no worker is left owing a collection:
    /// each one is woken, parks again and collects.
    #[test]
    fn every_worker_collects_after_a_load_ends() {
        const WORKERS: usize = 2;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_all()
            .on_thread_park(on_worker_park)
            .build()
            .expect("a runtime");
        rt.block_on(async {
            tokio::spawn(settle_owed_collections(WORKERS));
            // Work that parks and wakes the workers many times a second: their parks
            // within a second of a collection skip it.
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(1500) {
                let tasks: Vec<_> = (0..8)
                    .map(|i| {
                        tokio::spawn(async move {
                            let v = vec![i as u8; 4096 * (i + 1)];
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            v.len()
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.expect("task");
                }
            }
            // The workers were just busy: some owe a collection now. One that keeps waking
            // (the timer of the sleeps below) collects at its own parks and never owes for
            // long; one that stays parked must be woken to collect. After three settle
            // periods, none may have owed one for two whole periods.
            let quiet = Instant::now();
            while quiet.elapsed() < SETTLE_PERIOD * 3 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let stale = owing_for(SETTLE_PERIOD * 2);
            assert_eq!(
                stale,
                0,
                "{stale} workers have owed a collection for over {:?}",
                SETTLE_PERIOD * 2
            );
        });
    }
}
