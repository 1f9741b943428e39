//! The language sandbox of SPEC §3: nothing of the host reaches a filter.

use crate::util::Daemon;
use jqjail_client::ErrorCode;

const SECRET: &str = "hunter2-d41d8cd98f00b204";

#[test]
fn env_and_dollar_env_leak_nothing() {
    let d = Daemon::start_with(
        &[],
        &[("JQJAIL_TEST_SECRET", SECRET), ("HOME", "/root-secret")],
    );
    for filter in [
        "env",
        "$ENV",
        "env.JQJAIL_TEST_SECRET",
        "$ENV.JQJAIL_TEST_SECRET",
        "[env[]]",
        "env | keys",
        "$ENV | tojson",
    ] {
        let out = d.ok(filter, "null");
        assert!(
            !out.contains(SECRET) && !out.contains("root-secret"),
            "{filter} → {out}"
        );
    }
    assert_eq!(d.ok("env", "null"), "{}");
    assert_eq!(d.ok("$ENV", "null"), "{}");
    assert_eq!(d.ok("env.HOME", "null"), "null");
}

#[test]
fn input_and_inputs_see_nothing_more() {
    let d = Daemon::start();
    assert_eq!(d.ok("[inputs]", "1"), "[]");
    assert_eq!(d.ok("[., inputs]", "1"), "[1]");
    let msg = d.err("input", "1", ErrorCode::RuntimeError);
    assert!(msg.contains("input is not available"), "{msg}");
    assert_eq!(d.ok("input_filename", "1"), "null");
}

#[test]
fn modules_and_data_imports_are_refused() {
    let d = Daemon::start();
    for filter in [
        r#"include "/etc/passwd"; ."#,
        r#"import "a" as a; ."#,
        r#"import "a" as $a; $a"#,
        r#"import "/etc/passwd" as $p; $p"#,
        r#"include "x" {search: "/"}; ."#,
    ] {
        let msg = d.err(filter, "null", ErrorCode::CompileError);
        assert!(msg.contains("disabled"), "{filter}: {msg}");
        assert!(!msg.contains("root:"), "{msg}");
    }
}

#[test]
fn local_time_is_utc() {
    let d = Daemon::start();
    assert_eq!(d.ok("0 | localtime | mktime", "null"), "0");
    assert_eq!(
        d.ok(r#"0 | strflocaltime("%Y-%m-%dT%H:%M:%SZ")"#, "null"),
        r#""1970-01-01T00:00:00Z""#
    );
}

#[test]
fn debug_and_stderr_write_nowhere_and_halt_is_clean() {
    let d = Daemon::start();
    assert_eq!(d.ok("debug", "1"), "1");
    assert_eq!(d.ok(r#"debug("msg")"#, "1"), "1");
    assert_eq!(d.ok("stderr", "1"), "1");
    // A flood of debug output costs nothing and changes nothing.
    assert_eq!(d.ok("[range(100000) | debug] | length", "null"), "100000");
    assert_eq!(d.ok("1, 2, halt, 3", "null"), "[1,2]");
    let msg = d.err(
        r#""giving up" | halt_error"#,
        "null",
        ErrorCode::RuntimeError,
    );
    assert_eq!(msg, "halt_error with exit status 5: giving up");
    let msg = d.err(
        r#"{"a":1} | halt_error(3)"#,
        "null",
        ErrorCode::RuntimeError,
    );
    assert_eq!(msg, r#"halt_error with exit status 3: {"a":1}"#);
    // The daemon is still there.
    assert_eq!(d.ok(".", "2"), "2");
}
