//! The global allocator of every jqjail binary. In a worker (and the zygote) it is mimalloc,
//! and an allocation failure (the heap rlimit) ends the process at once with
//! [`EXIT_MEMORY`], which the supervisor reports as `MEMORY_LIMIT`; Rust's default would print
//! and abort, which under seccomp becomes an unexplained SIGSYS. Anywhere else (the
//! supervisor, the CLI) it is the system allocator, unchanged.
//!
//! mimalloc for workers: a worker's heap is always new, and mimalloc builds a parsed 20 MiB
//! document in it about a quarter faster than glibc's malloc (BENCHMARKS.md). The system
//! allocator for the rest: the daemon is long-lived and multithreaded, and its memory is
//! measured and bounded with glibc's malloc (it returns freed memory; mimalloc as configured
//! for workers never does).
//!
//! The choice is made once, at the process's first allocation, before anything could have
//! been allocated by the other: mimalloc if the environment carries [`WORKER_ENV`] (which
//! the supervisor gives the zygote and exec'd workers, and nothing else), else the system
//! allocator. Forked workers inherit the zygote's choice with its memory.

use jqjail_protocol::worker::{EXIT_MEMORY, WORKER_ENV};
use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Makes allocation failure exit with [`EXIT_MEMORY`] from now on, in this process.
pub fn exit_on_allocation_failure() {
    IN_WORKER.store(true, Ordering::SeqCst);
}

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

/// The allocator this process uses; never changes once decided.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Whether this process allocates with mimalloc (see the module documentation).
#[inline]
pub fn uses_mimalloc() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        SYSTEM => false,
        MIMALLOC => true,
        _ => decide(),
    }
}

#[cold]
fn decide() -> bool {
    let (key, _) = WORKER_ENV[0];
    let mut name = [0u8; 64];
    name[..key.len()].copy_from_slice(key.as_bytes());
    // SAFETY: getenv reads the environment and allocates nothing; `name` is NUL-terminated
    // (the key is far shorter than the buffer). Nothing sets the environment before the first
    // allocation, and two threads deciding at once read the same answer.
    let on = !unsafe { libc::getenv(name.as_ptr().cast()) }.is_null();
    CHOICE.store(if on { MIMALLOC } else { SYSTEM }, Ordering::Relaxed);
    on
}

/// The allocator wrapper; install it with `#[global_allocator]` in each binary.
pub struct WorkerAlloc;

#[cold]
fn out_of_memory() -> *mut u8 {
    if IN_WORKER.load(Ordering::Relaxed) {
        // SAFETY: _exit is async-signal-safe, allocates nothing and never returns; the worker
        // holds no state that must be flushed (its reply was not written yet, and the
        // supervisor explains the exit status).
        unsafe { libc::_exit(EXIT_MEMORY) }
    }
    std::ptr::null_mut()
}

// SAFETY: every method forwards to the process's one allocator (`MiMalloc` or `System`, fixed
// before the first allocation, so a pointer is always freed by the allocator that made it)
// with the caller's arguments unchanged; the GlobalAlloc contract holds exactly as for that
// allocator. The only addition is what happens after it has reported failure with null.
unsafe impl GlobalAlloc for WorkerAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe {
            if uses_mimalloc() {
                MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        };
        if p.is_null() { out_of_memory() } else { p }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe {
            if uses_mimalloc() {
                MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        };
        if p.is_null() { out_of_memory() } else { p }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from this allocator, i.e. from the one the
        // process uses.
        unsafe {
            if uses_mimalloc() {
                MiMalloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr` came from the process's allocator with `layout`.
        let p = unsafe {
            if uses_mimalloc() {
                MiMalloc.realloc(ptr, layout, new_size)
            } else {
                System.realloc(ptr, layout, new_size)
            }
        };
        if p.is_null() { out_of_memory() } else { p }
    }
}
