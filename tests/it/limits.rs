//! The limits (README, "Limits") through the real daemon, each at the limit and just over it.

use crate::util::{Daemon, before, expect_code};
use jqjail_client::{ClientError, ErrorCode, LimitOverrides, RunOptions};
use jqjail_supervisor::Config;
use std::time::{Duration, Instant};

fn with_timeout(ms: u64) -> RunOptions {
    RunOptions {
        limits: LimitOverrides {
            timeout_ms: Some(ms),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn default_deadline_stops_an_endless_filter() {
    let d = Daemon::start();
    let deadline = d.deadline();
    let start = Instant::now();
    let msg = d.err("def f: f; f", "null", ErrorCode::Timeout);
    let took = start.elapsed();
    assert!(msg.contains("5,000 ms"), "{msg}");
    assert!(took >= deadline, "{took:?}");
    before(
        took,
        2 * deadline,
        "the deadline was reported, but a second one passed before the answer",
    );
    assert_eq!(d.ok(".", "1"), "1");
}

#[test]
fn per_request_deadline_and_the_daemon_keeps_serving() {
    let d = Daemon::start();
    let mut c = d.client();
    let daemons = d.deadline();
    for filter in ["def f: f; f", "last(repeat(.))", "last(range(1e18))"] {
        let start = Instant::now();
        let msg = expect_code(
            c.run(filter, b"null", &with_timeout(300)),
            ErrorCode::Timeout,
        );
        let took = start.elapsed();
        assert!(msg.contains("300 ms"), "{msg}");
        assert!(took >= Duration::from_millis(300), "{filter}: {took:?}");
        before(
            took,
            daemons,
            &format!("{filter}: the daemon's deadline, not the request's, stopped it"),
        );
        // The same connection is still usable.
        assert_eq!(c.run(".", b"7", &Default::default()).unwrap().output, "7");
    }
}

#[test]
fn overrides_may_only_lower_limits() {
    let d = Daemon::start_with(&["--timeout-ms", "1000"], &[]);
    let mut c = d.client();
    assert_eq!(c.limits().timeout_ms, 1000);
    let msg = expect_code(
        c.run(".", b"1", &with_timeout(1001)),
        ErrorCode::InvalidRequest,
    );
    assert!(msg.contains("above the server's 1000"), "{msg}");
    // The server's own (lowered) default applies without an override.
    let start = Instant::now();
    expect_code(
        c.run("def f: f; f", b"1", &Default::default()),
        ErrorCode::Timeout,
    );
    // The lowered 1,000 ms deadline, not the default one the flag replaced.
    before(
        start.elapsed(),
        Duration::from_millis(Config::default().limits.timeout_ms),
        "the default deadline applied, not the lowered one",
    );
}

/// A JSON string input of exactly `len` bytes.
fn string_input(len: usize) -> Vec<u8> {
    let mut v = vec![b'a'; len];
    v[0] = b'"';
    v[len - 1] = b'"';
    v
}

#[test]
fn input_cap_at_limit_and_limit_plus_one() {
    let d = Daemon::start();
    let max = 20 * 1024 * 1024;
    let mut c = d.client();
    let reply = c
        .run("length", &string_input(max), &Default::default())
        .unwrap();
    assert_eq!(reply.output, (max - 2).to_string());

    let start = Instant::now();
    let err = c
        .run("length", &string_input(max + 1), &Default::default())
        .unwrap_err();
    match err {
        ClientError::Server(e) => {
            assert_eq!(e.code, ErrorCode::InputTooLarge);
            assert_eq!(e.limit, Some(max as u64));
            assert_eq!(e.actual, Some(max as u64 + 1));
            assert!(
                e.message
                    .contains("20,971,521 bytes, over the 20,971,520-byte limit"),
                "{}",
                e.message
            );
            // Refused before any worker saw it: no worker cost was recorded.
            assert_eq!(e.cost, None);
        }
        other => panic!("{other}"),
    }
    // No worker cost proves it was refused before evaluation; the bound only says it did not
    // wait for a deadline.
    before(
        start.elapsed(),
        d.deadline(),
        "the refusal waited for the deadline",
    );
    assert_eq!(c.run(".", b"1", &Default::default()).unwrap().output, "1");
}

#[test]
fn output_cap_is_exact_and_stops_early() {
    let d = Daemon::start();
    // `"a" * n` is a string of n bytes, n + 2 with its quotes.
    let exact = d.ok(r#""a" * 99998"#, "null");
    assert_eq!(exact.len(), 100_000);
    let msg = d.err(r#""a" * 99999"#, "null", ErrorCode::OutputTooLarge);
    assert!(msg.contains("100,000-byte limit"), "{msg}");
    // Array framing counts: 3 values of 33,332 bytes plus 2 commas and 2 brackets is 100,000.
    let framed = d.ok(r#"("a" * 33330) | ., ., ."#, "null");
    assert_eq!(framed.len(), 100_000);
    d.err(
        r#"("a" * 33331) | ., ., ."#,
        "null",
        ErrorCode::OutputTooLarge,
    );
    // An endless stream is stopped at the cap, not at the deadline (which would have answered
    // TIMEOUT, not this code: the code is the real check).
    for filter in ["range(1e9)", "repeat(1)"] {
        let start = Instant::now();
        d.err(filter, "null", ErrorCode::OutputTooLarge);
        before(
            start.elapsed(),
            d.deadline(),
            &format!("{filter} ran to the deadline"),
        );
    }
    // A per-request lower cap.
    let mut c = d.client();
    let low = RunOptions {
        limits: LimitOverrides {
            max_output_bytes: Some(10),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(c.run(".", b"[1,2,3,4]", &low).unwrap().output, "[1,2,3,4]");
    expect_code(c.run(".", b"[1,2,3,4,5]", &low), ErrorCode::OutputTooLarge);
}

#[test]
fn input_nesting_at_limit_and_over() {
    let d = Daemon::start();
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(d.ok("[paths] | length", &nest(1000)), "999");
    let msg = d.err(".", &nest(1001), ErrorCode::InputTooDeep);
    assert!(msg.contains("1,000-level limit"), "{msg}");
    let msg = d.err(".", &nest(100_000), ErrorCode::InputTooDeep);
    assert!(msg.contains("more than 1,000 levels"), "{msg}");
    // Objects count the same as arrays.
    let obj = format!("{}1{}", "{\"a\":".repeat(1001), "}".repeat(1001));
    d.err(".", &obj, ErrorCode::InputTooDeep);
}

#[test]
fn filter_length_at_limit_and_over() {
    let d = Daemon::start();
    let max = 64 * 1024;
    // `.` followed by spaces: a valid filter of exactly `len` bytes.
    let filter = |len: usize| format!(".{}", " ".repeat(len - 1));
    assert_eq!(d.ok(&filter(max), "3"), "3");
    let msg = d.err(&filter(max + 1), "3", ErrorCode::FilterTooLong);
    assert!(
        msg.contains("65,537 bytes, over the 65,536-byte limit"),
        "{msg}"
    );
}

#[test]
fn a_heap_filled_in_small_pieces_stops_at_the_limit_not_past_it() {
    // A chain of small arrays, so the heap grows in small steps up to the limit (one huge
    // array would fail at its first doubling that does not fit, far below it).
    for heap_mib in [96u64, 256] {
        let heap = heap_mib << 20;
        // A deadline far past the filter's time, so that only the heap can stop it: in a
        // debug build on a loaded machine, 256 MiB in small steps can take seconds.
        let d = Daemon::start_with(
            &[
                "--max-heap-bytes",
                &heap.to_string(),
                "--timeout-ms",
                "20000",
            ],
            &[],
        );
        let chain = r#"reduce range(1e9) as $i (null; [., "\($i)"]) | length"#;
        let err = d.run(chain, "null").unwrap_err();
        let ClientError::Server(e) = err else {
            panic!("{err}")
        };
        assert_eq!(e.code, ErrorCode::MemoryLimit, "{}", e.message);
        let peak = e.cost.unwrap().peak_rss_bytes;
        // Never past the limit (resident memory also holds the executable's pages and the
        // stack, hence the margin above), and not far below it.
        assert!(
            (heap - (16 << 20)..=heap + (24 << 20)).contains(&peak),
            "{heap_mib} MiB heap limit, peak RSS {peak}: {}\n{}",
            e.message,
            d.log()
        );
    }
}

#[test]
fn the_parse_arenas_unused_reservation_never_brings_memory_limit_forward() {
    // A 10 MiB string of escapes: the worker reserves about three times the input for the
    // parse arena (32 MiB) but uses almost none of it, since the decoded string (10 MiB of
    // capacity) comes from malloc. Input, reservation and string together (52 MiB) are over
    // a 40 MiB heap; what is actually used (about 22 MiB) is well under it. The reservation
    // gives way when malloc fails, so the answer is the length, not MEMORY_LIMIT.
    let pairs = 5 << 20;
    let mut input = Vec::with_capacity(2 * pairs + 2);
    input.push(b'"');
    input.extend(b"\\n".repeat(pairs));
    input.push(b'"');
    let d = Daemon::start_with(&["--max-heap-bytes", &(40u64 << 20).to_string()], &[]);
    let reply = d.client().run("length", &input, &Default::default());
    match reply {
        Ok(r) => assert_eq!(r.output, pairs.to_string()),
        Err(e) => panic!("{e}\n{}", d.log()),
    }
}

#[test]
fn memory_limit_is_kernel_enforced_and_explained() {
    // A deadline far past the filter's time (about 0.3 s in a release build), so that only the
    // heap can stop it even in a debug build on a loaded machine.
    let d = Daemon::start_with(&["--timeout-ms", "20000"], &[]);
    let start = Instant::now();
    let err = d.run("[range(1e9)]", "null").unwrap_err();
    let took = start.elapsed();
    match err {
        ClientError::Server(e) => {
            assert_eq!(e.code, ErrorCode::MemoryLimit, "{}", e.message);
            assert!(e.message.contains("256.0 MiB heap limit"), "{}", e.message);
            let cost = e.cost.unwrap();
            assert!(
                cost.peak_rss_bytes <= 256 * 1024 * 1024 + 16 * 1024 * 1024,
                "{cost:?}"
            );
        }
        other => panic!("{other}"),
    }
    before(took, d.deadline(), "the heap grew until the deadline");
    assert_eq!(d.ok(".", "1"), "1");
}

#[test]
fn deep_recursion_is_a_stack_limit() {
    let d = Daemon::start();
    for filter in ["def f: [f]; f", "def f: 1 + f; f"] {
        let msg = d.err(filter, "null", ErrorCode::StackLimit);
        assert!(msg.contains("stack"), "{msg}");
    }
    assert_eq!(d.ok(".", "1"), "1");
}

#[test]
fn cpu_limit_fires_before_a_longer_deadline() {
    // One CPU-second against a twenty-second wall clock (a loaded machine may give the worker
    // a small share of a core): the kernel's SIGXCPU comes first and the worker's handler
    // turns it into a clean exit that the daemon explains.
    let d = Daemon::start_with(&["--cpu-seconds", "1", "--timeout-ms", "20000"], &[]);
    let start = Instant::now();
    let err = d.run("def f: f; f", "null").unwrap_err();
    let took = start.elapsed();
    match err {
        ClientError::Server(e) => {
            assert_eq!(e.code, ErrorCode::CpuLimit, "{}", e.message);
            assert!(e.message.contains("1 s CPU-time limit"), "{}", e.message);
            // The kernel's and rusage's CPU clocks differ under load; the code is the check.
            assert!(e.cost.unwrap().cpu_us > 0);
        }
        other => panic!("{other}"),
    }
    // Before the wall clock, which would have answered TIMEOUT instead.
    before(
        took,
        d.deadline(),
        "the wall clock, not the CPU limit, stopped it",
    );
    assert_eq!(d.ok(".", "1"), "1");
}

#[test]
fn large_inputs_stream_through_the_daemon_and_refusals_keep_frames_in_step() {
    let d = Daemon::start();
    let mut c = d.client();
    let big = string_input(20 << 20);
    for _ in 0..3 {
        assert_eq!(
            c.run("length", &big, &RunOptions::default())
                .unwrap()
                .output,
            format!("{}", (20 << 20) - 2)
        );
    }
    // Three 20 MiB inputs went through; the daemon never held one whole.
    let peak = crate::util::peak_rss(d.pid());
    assert!(peak < 16 << 20, "daemon peak RSS {peak} bytes");
    // Answers that come before the input is all read leave the connection usable.
    let e = c.run("{", &big, &RunOptions::default()).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::CompileError));
    let over = string_input((20 << 20) + 1);
    let e = c.run(".", &over, &RunOptions::default()).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InputTooLarge));
    let opts = RunOptions {
        limits: LimitOverrides {
            max_depth: Some(0),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = c.run(".", &big, &opts).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidRequest));
    assert_eq!(
        c.run("1+1", b"null", &RunOptions::default())
            .unwrap()
            .output,
        "2"
    );
}

/// A streamed input reaches its worker byte for byte and in order, however its client writes
/// it: in one write through the client, or in pieces of odd sizes with pauses between them, the
/// first in the same write as its frame (so that part of it comes out of the daemon's read
/// buffer and the rest straight off the socket), with the next request's frame in the same
/// write as its last piece (which the relay must leave for the connection).
#[test]
fn a_streamed_input_reaches_its_worker_byte_for_byte_however_it_is_written() {
    use std::io::Write;
    let d = Daemon::start();
    let n = 700_000;
    let input = format!(
        "[{}]",
        (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    )
    .into_bytes();
    assert!(input.len() > 4 << 20);
    let filter = ". == [range(length)] and length == 700000";
    let reply = d
        .client()
        .run(filter, &input, &RunOptions::default())
        .unwrap();
    assert_eq!(reply.output, "true");

    let frame = crate::util::run_frame(filter, input.len() as u64);
    let mut s = crate::util::raw_bincode(&d);
    let next = crate::util::run_frame("1+1", 4);
    let mut first = (frame.len() as u32).to_le_bytes().to_vec();
    first.extend_from_slice(&frame);
    let mut at = 3000;
    first.extend_from_slice(&input[..at]);
    s.write_all(&first).unwrap();
    for (i, piece) in [1, 7, 4093, 65_537, 300_001, 1_048_573, 9]
        .iter()
        .cycle()
        .enumerate()
    {
        let end = (at + piece).min(input.len());
        if end == input.len() {
            let mut last = input[at..].to_vec();
            last.extend_from_slice(&(next.len() as u32).to_le_bytes());
            last.extend_from_slice(&next);
            last.extend_from_slice(b"null");
            s.write_all(&last).unwrap();
            break;
        }
        s.write_all(&input[at..end]).unwrap();
        at = end;
        if i % 5 == 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for want in ["true", "2"] {
        match crate::util::read_response(&mut s) {
            jqjail_protocol::Response::Run(r) => assert_eq!(r.output.as_bytes(), want.as_bytes()),
            other => panic!("expected {want}, got {other:?}"),
        }
    }
}

#[test]
fn a_client_that_stalls_inside_a_streamed_input_is_cut_off() {
    let (d, _config) = crate::util::with_frame_timeout(300);
    // Announce a 10 MiB input, send 1 MiB of it, and stall. The workers alive then include
    // the one receiving it: the daemon reads an input only into a worker, and 1 MiB does not
    // fit in the sockets' default buffers. Taken before the request, the list could miss it:
    // a worker still starting, not yet named, may be the first to become ready. Taken only
    // while it stalls, the list could miss it too, on a machine too loaded to take it within
    // the 300 ms: so both.
    let before = d.workers();
    let frame = crate::util::run_frame("length", 10 << 20);
    let stalled =
        crate::util::assert_cut_off_when_stalled_after(&d, &frame, 1 << 20, || d.workers());
    // The worker that was receiving it is gone; others are unaffected.
    assert!(crate::util::wait_until(Duration::from_secs(5), || {
        let now = d.workers();
        before.iter().chain(&stalled).any(|pid| !now.contains(pid))
    }));
    assert_eq!(d.ok(".", "1"), "1");
}
