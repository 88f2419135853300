//! A global allocator that counts, per thread, the bytes live, their peak, and the largest
//! single allocation since the last [`reset`]: the harness checks both against a bound for
//! every input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// A request above this is refused, after naming the input that made it: the process then
/// aborts (Rust's allocation failure), and the name is what is left to replay it.
const HARD_CAP: usize = 1 << 30;

static CURRENT_NAME: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CURRENT_LEN: AtomicUsize = AtomicUsize::new(0);
static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);

/// Notes the target and seed of the input about to run.
pub fn set_current(target: &'static str, seed: u64) {
    CURRENT_NAME.store(target.as_ptr().cast_mut(), Ordering::Relaxed);
    CURRENT_LEN.store(target.len(), Ordering::Relaxed);
    CURRENT_SEED.store(seed, Ordering::Relaxed);
}

fn refuse(size: usize) {
    let (ptr, len) = (
        CURRENT_NAME.load(Ordering::Relaxed),
        CURRENT_LEN.load(Ordering::Relaxed),
    );
    let name = if ptr.is_null() {
        "?"
    } else {
        // SAFETY: `ptr` and `len` were taken from one `&'static str` in `set_current`.
        std::str::from_utf8(unsafe { std::slice::from_raw_parts(ptr, len) }).unwrap_or("?")
    };
    let seed = CURRENT_SEED.load(Ordering::Relaxed);
    // Formatting to stderr does not allocate.
    eprintln!(
        "FAIL {name} seed {seed:#x}: asked for an allocation of {size} bytes; the process \
         aborts now\n  replay: scripts/fuzz.sh --replay {name}:{seed:#x}"
    );
}

/// The system allocator, counted.
pub struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn grew(size: usize) {
    // `try_with`: a thread's last frees run after its thread-locals are gone.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + size;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

fn shrank(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(size)));
}

// SAFETY: every call is passed on to `System` unchanged; the counting touches only
// thread-locals with constant initialisers (no allocation, no reentrancy).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > HARD_CAP {
            refuse(layout.size());
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > HARD_CAP {
            refuse(layout.size());
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > HARD_CAP {
            refuse(new_size);
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrank(layout.size());
            grew(new_size);
        }
        p
    }
}

/// What one input cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// The most bytes live at once, above what was live at the reset.
    pub peak: usize,
    /// The largest single allocation (or reallocation's new size).
    pub largest: usize,
}

/// Starts measuring: returns the bytes live now, the base of [`usage`].
pub fn reset() -> usize {
    let live = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(live));
    LARGEST.with(|l| l.set(0));
    live
}

/// What was used since [`reset`] returned `base`.
pub fn usage(base: usize) -> Usage {
    Usage {
        peak: PEAK.with(Cell::get).saturating_sub(base),
        largest: LARGEST.with(Cell::get),
    }
}
