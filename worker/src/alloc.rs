//! The worker's global allocator: the system allocator, with three changes that apply only in
//! a worker (the same binary also hosts the supervisor and the CLI, where it changes nothing;
//! the benchmark's in-process columns ask for the second):
//!
//! - An allocation failure (the heap rlimit) ends the process at once with [`EXIT_MEMORY`],
//!   which the supervisor reports as `MEMORY_LIMIT`. Rust's default would print and abort,
//!   which under seccomp becomes an unexplained SIGSYS.
//! - Every block of at least 2 MiB is advised into transparent huge pages
//!   ([`advise_huge_pages`]), which glibc's own tunable fails to do in some processes (here
//!   about half).
//! - While the job's input is parsed ([`with_parse_arena`]), small allocations are bumped
//!   from one fresh region instead of going through malloc. The parsed input lives until
//!   the worker exits, so nothing in it is ever freed one by one: the region has no chunk
//!   headers, no free lists and no rounding, which saves malloc's time and about a fifth of
//!   the memory (so of the fresh pages the kernel must fault in and zero).

use jqjail_protocol::worker::EXIT_MEMORY;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Makes allocation failure exit with [`EXIT_MEMORY`] from now on, in this process, and lets
/// [`with_parse_arena`] take its region.
pub fn exit_on_allocation_failure() {
    IN_WORKER.store(true, Ordering::SeqCst);
}

/// Set by [`advise_huge_pages`].
static HUGE_ADVICE: AtomicBool = AtomicBool::new(false);

/// From now on, in this process, every block of at least a huge page that malloc hands out is
/// advised into transparent huge pages (`MADV_HUGEPAGE`): a worker's input buffer, a growing
/// output, a large array. A 20 MiB block then faults in about ten huge pages, plus 4 KiB pages
/// at its two unaligned ends, instead of 5,120 small ones.
///
/// glibc's `glibc.malloc.hugetlb=1` (in the workers' environment, `spawn::WORKER_TUNABLES`)
/// means to do this, and so it does where it works. But glibc 2.35 to 2.37 (Debian 12 has
/// 2.36) decide whether THP is in `madvise` mode by `strcmp` on the contents of
/// `/sys/kernel/mm/transparent_hugepage/enabled` read into a buffer they never terminate:
/// the comparison reads one stale stack byte, which depends on the process's stack layout, and
/// where it is not zero malloc advises nothing (here in about half of all starts). A zygote
/// started so gave all its workers 4 KiB pages; here that cost a 20 MiB request 4,600 more
/// page faults and about 4 ms. Only large blocks are taken over: where glibc misread, the
/// heap that small blocks come from still has 4 KiB pages (a worker parses into the arena,
/// which is advised; measured, small and 1 MiB requests took the same time either way).
pub fn advise_huge_pages() {
    HUGE_ADVICE.store(true, Ordering::SeqCst);
}

/// Advises the pages of `block` (from malloc, `size` bytes asked for) into huge pages, if it is
/// large enough and [`advise_huge_pages`] was called. The range is the whole of the pages the
/// block's usable size spans, as glibc's own advice takes them: for a block malloc mapped by
/// itself (not an over-aligned one), exactly its mapping, which so stays one mapping that
/// `realloc` can still move with `mremap`.
fn advised(block: *mut u8, size: usize) -> *mut u8 {
    if block.is_null() || size < HUGE_PAGE || !HUGE_ADVICE.load(Ordering::Relaxed) {
        return block;
    }
    // SAFETY: `block` is a live block from malloc (`System` on glibc).
    let usable = unsafe { libc::malloc_usable_size(block.cast()) };
    // SAFETY: sysconf reads a value the loader recorded; it cannot fail for _SC_PAGESIZE.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let start = (block as usize) / page * page;
    let end = (block as usize + usable).next_multiple_of(page);
    // SAFETY: advice only, on pages of this process's own live block (and, at a heap block's
    // two ends, on the rest of the pages it shares with its neighbours); huge pages are only a
    // speed-up, so a refusal changes nothing.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    block
}

/// The allocator wrapper; install it with `#[global_allocator]` in each binary.
pub struct WorkerAlloc;

/// Called when `System` has failed: first gives back the arena region's unused tail, if this
/// thread has one open, so that what the region reserved but did not use never makes an
/// allocation fail; `true` if that freed something and the allocation should be tried again.
/// Otherwise, in a worker, ends the process; elsewhere `false` (the caller returns null).
#[cold]
fn out_of_memory_or_retry() -> bool {
    if release_unused_region() {
        return true;
    }
    if IN_WORKER.load(Ordering::Relaxed) {
        // SAFETY: _exit is async-signal-safe, allocates nothing and never returns; the worker
        // holds no state that must be flushed (its reply was not written yet, and the
        // supervisor explains the exit status).
        unsafe { libc::_exit(EXIT_MEMORY) }
    }
    false
}

/// Unmaps the open region's tail past the next huge page boundary and stops bumping there.
fn release_unused_region() -> bool {
    BUMP.try_with(|b| {
        let (next, end) = b.get();
        let keep = next.next_multiple_of(HUGE_PAGE).min(end);
        if next == 0 || keep == end {
            return false;
        }
        // SAFETY: [keep, end) is the part of this thread's region past every block handed
        // out (the bump pointer is below `keep`), and bumping stops at `keep` from now on.
        unsafe { libc::munmap(keep as *mut libc::c_void, end - keep) };
        b.set((next, keep));
        REGION_END.store(keep, Ordering::Relaxed);
        true
    })
    .unwrap_or(false)
}

/// Inputs smaller than this are parsed with malloc: the region would not pay for its mmap.
const ARENA_MIN_INPUT: usize = 64 << 10;
/// Allocations larger than this go to malloc even while the arena is on: the pending stack
/// of the parser and the vector of a long array grow by doubling, and every step would be a
/// dead copy in the region.
const ARENA_MAX_ALLOCATION: usize = 64 << 10;
/// Region granularity: a transparent huge page, so that trimming never splits one.
const HUGE_PAGE: usize = 2 << 20;

/// Set by the first [`with_parse_arena`] that takes a region: a process has at most one, so
/// that `dealloc` and `realloc` recognise its blocks by one address range.
static REGION_TAKEN: AtomicBool = AtomicBool::new(false);
/// The addresses of the one region this process ever bumps from, for `dealloc` and `realloc`
/// to recognise its blocks (which they leave in place). Zero while there is none.
static REGION_START: AtomicUsize = AtomicUsize::new(0);
static REGION_END: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The bump pointer and end of the region, in the thread that took it; 0 and 0 while the
    /// arena is off. Thread-local, so that only that thread ever bumps, and the region is
    /// taken once per process (`REGION_TAKEN`): the arena is sound in any process, though
    /// only a worker (single-threaded) takes one.
    static BUMP: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Runs `parse` with this thread's small allocations bumped from a fresh region sized for
/// an input of `input_len` bytes; afterwards the unused tail of the region is unmapped, so
/// that the heap limit counts only what the parse used. In a worker, once per process, and
/// for inputs of at least 64 KiB; otherwise, or if the region cannot be mapped (the heap
/// limit), `parse` simply runs on malloc. Blocks in the region are never freed: that suits
/// only values that live until the process exits, as a worker's parsed input does. When the
/// region is full, allocation goes on in malloc; and if malloc fails while the region is
/// open, the region's unused tail is unmapped first and the allocation retried, so that the
/// reservation never brings a `MEMORY_LIMIT` forward.
pub fn with_parse_arena<T>(input_len: usize, parse: impl FnOnce() -> T) -> T {
    if !IN_WORKER.load(Ordering::Relaxed)
        || input_len < ARENA_MIN_INPUT
        || REGION_TAKEN.swap(true, Ordering::SeqCst)
    {
        return parse();
    }
    // Room for a value about three times its JSON text (GitHub-issues-like JSON takes about
    // twice), plus a margin; a value that needs more continues in malloc.
    let len = input_len
        .saturating_mul(3)
        .saturating_add(HUGE_PAGE)
        .next_multiple_of(HUGE_PAGE);
    // SAFETY: an anonymous private mapping at an address the kernel chooses touches no
    // existing memory. It is counted against RLIMIT_DATA like the heap; past the limit the
    // call fails and the parse uses malloc.
    let start = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if start == libc::MAP_FAILED {
        return parse();
    }
    // SAFETY: advice on the mapping just made; huge pages are only a speed-up, so a refusal
    // changes nothing.
    unsafe { libc::madvise(start, len, libc::MADV_HUGEPAGE) };
    let start = start as usize;
    REGION_START.store(start, Ordering::Relaxed);
    REGION_END.store(start + len, Ordering::Relaxed);
    BUMP.with(|b| b.set((start, start + len)));
    let value = parse();
    release_unused_region();
    BUMP.with(|b| b.set((0, 0)));
    value
}

/// Whether this process's heap, the one glibc's malloc grows with `brk`, carries the `hg`
/// (`MADV_HUGEPAGE`) flag in `/proc/self/smaps`: where `glibc.malloc.hugetlb=1` is set, whether
/// glibc read the THP mode right in this process ([`advise_huge_pages`]). False where there is
/// no heap yet or the file cannot be read; for diagnostics and the benchmark.
pub fn heap_advised() -> bool {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return false;
    };
    smaps
        .split_once("[heap]")
        .and_then(|(_, rest)| rest.lines().find(|l| l.starts_with("VmFlags:")))
        .is_some_and(|flags| flags.split_ascii_whitespace().any(|f| f == "hg"))
}

/// The addresses of the arena's region once [`with_parse_arena`] has taken it (trimmed to what
/// the parse used once it has returned); for tests and diagnostics.
pub fn arena_region() -> Option<std::ops::Range<usize>> {
    let start = REGION_START.load(Ordering::Relaxed);
    (start != 0).then(|| start..REGION_END.load(Ordering::Relaxed))
}

/// Bumps `layout` from this thread's region, if the arena is on and the block fits.
fn bump(layout: Layout) -> Option<*mut u8> {
    if layout.size() > ARENA_MAX_ALLOCATION {
        return None;
    }
    BUMP.try_with(|b| {
        let (next, end) = b.get();
        if next == 0 {
            return None;
        }
        let at = next.next_multiple_of(layout.align());
        let after = at.checked_add(layout.size())?;
        (after <= end).then(|| {
            b.set((after, end));
            at as *mut u8
        })
    })
    .ok()
    .flatten()
}

/// Calls `system` (one `System` method) until it succeeds or [`out_of_memory_or_retry`] says
/// there is nothing more to give back; null only outside a worker.
fn from_system(system: impl Fn() -> *mut u8) -> *mut u8 {
    loop {
        let p = system();
        if !p.is_null() || !out_of_memory_or_retry() {
            return p;
        }
    }
}

fn in_region(ptr: *mut u8) -> bool {
    let p = ptr as usize;
    p >= REGION_START.load(Ordering::Relaxed) && p < REGION_END.load(Ordering::Relaxed)
}

// SAFETY: outside the arena every method forwards to `System` with the caller's arguments
// unchanged, so the GlobalAlloc contract holds exactly as for `System`; the only addition
// there is what happens after `System` has reported failure by returning null. A block
// bumped from the region is `layout.size()` bytes at an address aligned to `layout.align()`,
// inside a live mapping that is never unmapped while a block in it exists (only the tail
// past every block is), and never handed out twice (the bump pointer only grows); fresh
// anonymous memory is zero, which makes a bumped block valid for `alloc_zeroed`. Such a
// block is never passed to `System`: `dealloc` leaves it, `realloc` copies out of it.
unsafe impl GlobalAlloc for WorkerAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = bump(layout) {
            return p;
        }
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        advised(
            from_system(|| unsafe { System.alloc(layout) }),
            layout.size(),
        )
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = bump(layout) {
            return p;
        }
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        advised(
            from_system(|| unsafe { System.alloc_zeroed(layout) }),
            layout.size(),
        )
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_region(ptr) {
            return;
        }
        // SAFETY: forwarded unchanged; `ptr` is not in the region, so it came from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if in_region(ptr) {
            // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
            let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: as for `alloc`; `new_size` is non-zero by `realloc`'s contract.
            let new = unsafe { self.alloc(new_layout) };
            if !new.is_null() {
                // SAFETY: the old block is `layout.size()` readable bytes, the new one
                // `new_size` writable bytes, and two live blocks never overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                }
            }
            return new;
        }
        // SAFETY: forwarded unchanged; `ptr` is not in the region, so it came from `System`
        // with `layout`; a failed realloc leaves it as it was, so it may be tried again.
        advised(
            from_system(|| unsafe { System.realloc(ptr, layout, new_size) }),
            new_size,
        )
    }
}
