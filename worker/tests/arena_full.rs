//! A parse that needs more than the arena's region (`with_parse_arena` reserves about three
//! times the input) goes on in malloc and still gives jaq's value. A process of its own,
//! because a process takes one region in its life.

use jqjail_worker::alloc::{arena_region, exit_on_allocation_failure, with_parse_arena};
use jqjail_worker::{Bytes, WorkerAlloc};

#[global_allocator]
static ALLOC: WorkerAlloc = WorkerAlloc;

#[test]
fn a_value_larger_than_the_region_continues_in_malloc() {
    // Tiny objects with tiny keys take tens of times their text once parsed.
    let text = format!("[{}{{}}]", r#"{"a":[1,{"b":"c"}]},"#.repeat(100_000));
    let input = Bytes::from(text.into_bytes());
    exit_on_allocation_failure();
    let parsed = with_parse_arena(input.len(), || jqjail_worker::value::parse(&input, 1000));
    let region = arena_region().expect("the parse took a region");
    let reserved = (input.len() * 3 + (2 << 20)).next_multiple_of(2 << 20);
    assert_eq!(
        region.len(),
        reserved,
        "the region filled up, so nothing was trimmed"
    );
    let jaqs = jaq_json::read::parse_single(&input).expect("valid JSON");
    assert_eq!(
        format!("{:?}", parsed.expect("valid JSON")),
        format!("{jaqs:?}")
    );
}
