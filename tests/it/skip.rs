//! Skipping a test loudly: the one implementation, shared by the end-to-end tests and, through
//! `#[path]`, the benchmark's smoke test.

/// Says that a test skipped and why: on the real stderr (the harness hides `eprintln!` of a
/// passing test, which would let a skip pass unseen), and as a line of `$JQJAIL_SKIP_LOG` when
/// it is set, which `.ci/run` counts and prints. Under `JQJAIL_TEST_STRICT=1` (CI, which runs as
/// root with every tool it installs) a skip fails the test instead: a missing tool there is a
/// broken CI, not a reason to pass.
pub fn skip(why: &str) {
    record_skip(why);
    assert!(
        std::env::var_os("JQJAIL_TEST_STRICT").is_none_or(|v| v != "1"),
        "this test would skip, but JQJAIL_TEST_STRICT=1 says everything it needs is here: {why}"
    );
}

/// A skip that strict runs allow too: what the test needs comes from a package registry
/// (PyPI, npm) that `.ci/run` could not reach, which it says when it tries.
pub fn skip_unreachable(why: &str) {
    record_skip(why);
}

fn record_skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
    if let Some(log) = std::env::var_os("JQJAIL_SKIP_LOG") {
        let line = format!("{}\n", why.replace('\n', " "));
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}
