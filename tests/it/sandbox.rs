//! The language sandbox: nothing of the host reaches a filter.

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

/// One input value: `input` and `inputs` find nothing more, as in jq, and never read the
/// worker's stdin or a file.
#[test]
fn input_and_inputs_see_nothing_more() {
    let d = Daemon::start();
    assert_eq!(d.ok("[inputs]", "1"), "[]");
    assert_eq!(d.ok("[., inputs]", "1"), "[1]");
    let msg = d.err("input", "1", ErrorCode::RuntimeError);
    assert!(msg.ends_with("break"), "{msg}");
    assert_eq!(d.ok("input_filename", "1"), "null");
}

/// A run over a stream of values: `input` and `inputs` read the request's own values, with
/// `.` null (jq's `-n`) or once per value they left unread; each value is parsed as strictly
/// as an input, and the path language takes no stream.
#[test]
fn input_and_inputs_read_the_requests_values() {
    use jqjail_client::{ClientError, RunOptions, Source};
    let d = Daemon::start();
    let mut client = d.client();
    let mut run = |filter: &str, values: &str, null_input: bool, options: &RunOptions| {
        let source = Source::Values {
            values: values.as_bytes(),
            null_input,
        };
        client.run_with_args(filter, source, options, &Default::default())
    };
    let output = |r: Result<jqjail_client::Answer, ClientError>| match r {
        Ok(jqjail_client::Answer::Output(reply)) => reply.output,
        other => panic!("{other:?}"),
    };
    let lines = RunOptions {
        outputs: jqjail_client::Outputs::Lines,
        ..RunOptions::default()
    };
    let plain = RunOptions::default();
    assert_eq!(
        output(run(
            "reduce inputs as $x (0; . + $x)",
            "1 2 3",
            true,
            &plain
        )),
        "6"
    );
    assert_eq!(
        output(run("[., input]", "1 2 3 4", false, &lines)),
        "[1,2]\n[3,4]\n"
    );
    assert_eq!(output(run("[inputs]", "", true, &plain)), "[]");
    assert_eq!(output(run(".", "1 [2]", false, &lines)), "1\n[2]\n");
    match run("[inputs]", "1 {\"a\":} 3", true, &plain) {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::InvalidJson);
            assert!(e.message.starts_with("input value 2: "), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    let path = RunOptions {
        lang: jqjail_client::Lang::Path,
        ..RunOptions::default()
    };
    match run("[0]", "[1]", false, &path) {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::InvalidRequest),
        other => panic!("{other:?}"),
    }
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
