//! Large blocks in a worker are advised into transparent huge pages by jqjail's allocator
//! (`jqjail_worker::alloc::advise_huge_pages`), whatever glibc decided at its start. This test
//! process has no `GLIBC_TUNABLES`, so glibc advises nothing: it stands for the half of all
//! workers in which glibc 2.35–2.37 misread the THP mode. A process of its own, because the
//! advice, once asked for, holds for the rest of the process.

use jqjail_worker::WorkerAlloc;
use jqjail_worker::alloc::advise_huge_pages;

// The workspace's one loud skip (stderr, `$JQJAIL_SKIP_LOG`, a failure under
// `JQJAIL_TEST_STRICT=1`).
#[path = "../../tests/it/skip.rs"]
#[allow(dead_code, unreachable_pub)]
mod skip;

#[global_allocator]
static ALLOC: WorkerAlloc = WorkerAlloc;

/// The mapping that holds `at`: its address range and its `VmFlags`.
fn mapping_of(at: usize) -> (std::ops::Range<usize>, String) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut found = None;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = head.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            found = (lo..hi).contains(&at).then_some(lo..hi);
        } else if let (Some(range), Some(flags)) = (&found, line.strip_prefix("VmFlags:")) {
            return (range.clone(), flags.trim().to_string());
        }
    }
    panic!("no mapping holds {at:#x}")
}

fn advised(flags: &str) -> bool {
    flags.split_whitespace().any(|f| f == "hg")
}

#[test]
fn large_blocks_are_advised_into_huge_pages_whatever_glibc_decided() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        // A kernel built without transparent huge pages refuses the advice, and has nothing
        // for it to ask for.
        skip::skip(
            "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)",
        );
        return;
    }
    // Before the advice is asked for, a large block is as glibc left it: with no tunable, not
    // advised.
    let before = vec![0u8; 8 << 20];
    let (_, flags) = mapping_of(before.as_ptr() as usize + (4 << 20));
    if std::env::var_os("GLIBC_TUNABLES").is_none() {
        assert!(!advised(&flags), "glibc advised it itself: {flags}");
    }

    advise_huge_pages();
    let input = vec![0u8; 20 << 20];
    let middle = input.as_ptr() as usize + (10 << 20);
    let (range, flags) = mapping_of(middle);
    assert!(advised(&flags), "a 20 MiB block is not advised: {flags}");
    // The whole block is one mapping, so that growing it can still move it with mremap.
    let block = input.as_ptr() as usize..input.as_ptr() as usize + input.len();
    assert!(
        range.start <= block.start && block.end <= range.end,
        "the advice split the block's mapping: {range:x?} for {block:x?}"
    );

    // A block that grows past a huge page is advised too, and stays one mapping.
    let mut output: Vec<u8> = Vec::with_capacity(1 << 20);
    output.resize(48 << 20, 1);
    let (range, flags) = mapping_of(output.as_ptr() as usize + (24 << 20));
    assert!(
        advised(&flags),
        "a grown 48 MiB block is not advised: {flags}"
    );
    let block = output.as_ptr() as usize..output.as_ptr() as usize + output.len();
    assert!(range.start <= block.start && block.end <= range.end);

    // A block taken uninitialised (`alloc`, not `alloc_zeroed`) is advised too.
    let spare: Vec<u8> = Vec::with_capacity(4 << 20);
    let (range, flags) = mapping_of(spare.as_ptr() as usize + (2 << 20));
    assert!(advised(&flags), "a 4 MiB capacity is not advised: {flags}");
    let block = spare.as_ptr() as usize..spare.as_ptr() as usize + spare.capacity();
    assert!(range.start <= block.start && block.end <= range.end);

    // Small blocks are left alone.
    let small = vec![0u8; 64 << 10];
    let (_, flags) = mapping_of(small.as_ptr() as usize);
    assert!(!advised(&flags), "a 64 KiB block was advised: {flags}");
    drop((before, input, output, spare, small));
}
