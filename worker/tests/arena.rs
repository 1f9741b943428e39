//! The parse arena (`jqjail_worker::alloc::with_parse_arena`) in a process of its own, as a
//! worker uses it: once, after `exit_on_allocation_failure`. One test, because a process
//! takes one region in its life.

use jqjail_worker::alloc::{arena_region, exit_on_allocation_failure, with_parse_arena};
use jqjail_worker::{Bytes, WorkerAlloc};

#[global_allocator]
static ALLOC: WorkerAlloc = WorkerAlloc;

/// About `bytes` of JSON with objects, arrays, escapes, non-ASCII text and all kinds of numbers.
fn document(bytes: usize) -> String {
    let mut out = String::from("[");
    let mut i = 0u64;
    while out.len() < bytes {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"id":{i},"big":1{i}00000000000000000000,"f":{i}.25,"t":"line\n{i} \u00e9\ud83d\ude00","tags":["a","b{i}"],"n":null,"ok":true,"id":-{j},"body":"{}"}}"#,
            "lorem ipsum ".repeat(60),
            // Not `-0`, which jqjail reads as jq does (the negative double), not as jaq.
            j = i + 1,
        ));
        i += 1;
    }
    out.push(']');
    out
}

fn maps_has(range: &std::ops::Range<usize>) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let want = format!("{:x}-{:x} ", range.start, range.end);
    maps.lines().any(|l| l.starts_with(&want))
}

#[test]
fn a_parse_in_the_arena_gives_jaqs_value_and_keeps_only_the_memory_it_used() {
    let input = Bytes::from(document(3 << 20));
    // Outside a worker the arena is never taken.
    drop(with_parse_arena(input.len(), || {
        jqjail_worker::value::parse(&input, 1000)
    }));
    assert_eq!(arena_region(), None);

    exit_on_allocation_failure();
    let mut small = Vec::new();
    let parsed = with_parse_arena(input.len(), || {
        small.extend(0u64..4);
        jqjail_worker::value::parse(&input, 1000)
    })
    .expect("valid JSON");
    let region = arena_region().expect("the worker's parse took a region");
    assert!(region.contains(&(small.as_ptr() as usize)));
    // Trimmed at the huge page boundary after the last block: less than the 3 × input
    // reserved, and exactly one mapping of that size.
    let reserved = (input.len() * 3 + (2 << 20)).next_multiple_of(2 << 20);
    assert!(region.len() < reserved, "{} of {reserved}", region.len());
    assert_eq!(region.end % (2 << 20), 0);
    assert!(maps_has(&region), "no mapping {region:x?}");

    // The value is jaq's, variant for variant.
    let jaqs = jaq_json::read::parse_single(&input).expect("valid JSON");
    assert_eq!(format!("{parsed:?}"), format!("{jaqs:?}"));

    // A block from the region grows by moving out of it, contents intact.
    small.extend(4u64..100_000);
    assert!(!region.contains(&(small.as_ptr() as usize)));
    assert!(small.iter().copied().eq(0u64..100_000));

    // Freeing blocks of the region leaves them; a second parse does not take another region.
    drop(parsed);
    let again = with_parse_arena(input.len(), || jqjail_worker::value::parse(&input, 1000));
    assert_eq!(
        format!("{:?}", again.expect("valid JSON")),
        format!("{jaqs:?}")
    );
    assert_eq!(arena_region(), Some(region));
}
