//! The worker's global allocator: the system allocator, except that in a worker an allocation
//! failure (the heap rlimit) ends the process at once with [`EXIT_MEMORY`], which the
//! supervisor reports as `MEMORY_LIMIT`. Rust's default would print and abort, which under
//! seccomp becomes an unexplained SIGSYS. Outside a worker (the same binary also hosts the
//! supervisor and the CLI) it changes nothing.

use jqjail_protocol::worker::EXIT_MEMORY;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Makes allocation failure exit with [`EXIT_MEMORY`] from now on, in this process.
pub fn exit_on_allocation_failure() {
    IN_WORKER.store(true, Ordering::SeqCst);
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

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// GlobalAlloc contract holds exactly as for `System`; the only addition is what happens after
// `System` has already reported failure by returning null.
unsafe impl GlobalAlloc for WorkerAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() { out_of_memory() } else { p }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() { out_of_memory() } else { p }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr` came from `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() { out_of_memory() } else { p }
    }
}
