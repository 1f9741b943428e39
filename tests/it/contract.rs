//! The run contract (README, PROTOCOL.md): output shapes, quoting, errors, strict JSON, exact integers.

use crate::util::Daemon;
use jqjail_client::ErrorCode;

#[test]
fn output_shapes() {
    let d = Daemon::start();
    // One output: that value.
    assert_eq!(d.ok(".a", r#"{"a":{"b":[1,2]}}"#), r#"{"b":[1,2]}"#);
    // Several: an array of them.
    assert_eq!(
        d.ok(".[] | .id", r#"[{"id":1},{"id":2},{"id":3}]"#),
        "[1,2,3]"
    );
    // One output that is itself an array stays one value.
    assert_eq!(d.ok(".", "[1,2]"), "[1,2]");
    // None: null.
    assert_eq!(d.ok("empty", "{}"), "null");
    assert_eq!(d.ok(".[] | select(. > 10)", "[1,2]"), "null");
}

#[test]
fn strings_come_back_quoted() {
    let d = Daemon::start();
    assert_eq!(
        d.ok(".name", r#"{"name":"jq \"jail\"\n"}"#),
        r#""jq \"jail\"\n""#
    );
    assert_eq!(d.ok(r#""é日本""#, "null"), r#""é日本""#);
    assert_eq!(d.ok(".[]", r#"["a","b"]"#), r#"["a","b"]"#);
}

#[test]
fn compile_errors_name_the_position() {
    let d = Daemon::start();
    let msg = d.err(".a | nosuch", "{}", ErrorCode::CompileError);
    assert!(msg.contains("undefined filter `nosuch`"), "{msg}");
    assert!(msg.contains("line 1, column 6"), "{msg}");
    let msg = d.err("[1,", "{}", ErrorCode::CompileError);
    assert!(msg.contains("end of the filter"), "{msg}");
}

#[test]
fn runtime_errors_carry_the_message() {
    let d = Daemon::start();
    let msg = d.err(r#"error("custom failure")"#, "{}", ErrorCode::RuntimeError);
    assert_eq!(msg, "filter error: custom failure");
    let msg = d.err(".a.b", r#"{"a":5}"#, ErrorCode::RuntimeError);
    assert_eq!(msg, r#"filter error: Cannot index number with string "b""#);
    // An error after some outputs fails the whole request: no partial answers.
    d.err(r#"1, error("late")"#, "null", ErrorCode::RuntimeError);
}

#[test]
fn big_integers_round_trip_exactly() {
    let d = Daemon::start();
    assert_eq!(d.ok(".", "12345678901234567890"), "12345678901234567890");
    assert_eq!(
        d.ok(".id", r#"{"id":123456789012345678901234567890}"#),
        "123456789012345678901234567890"
    );
    assert_eq!(d.ok(".[1]", "[0, 9007199254740993]"), "9007199254740993");
    // Arithmetic is jq's, in doubles past 2^53; a decimal literal is the double it denotes,
    // printed as jq prints it.
    assert_eq!(d.ok(". + 0", "9007199254740993"), "9007199254740992");
    assert_eq!(d.ok(".", "1.50"), "1.5");
    assert_eq!(d.ok("10 / 2", "null"), "5");
}

/// The output stays strict JSON: NaN and the infinities are normalised as jq normalises them
/// (`null`, the largest doubles), object keys must be strings, and jaq's byte strings cannot
/// be made.
#[test]
fn nan_and_infinity_print_as_jq_prints_them() {
    let d = Daemon::start();
    for input in ["NaN", "Infinity", "-Infinity", "[NaN]"] {
        d.err(".", input, ErrorCode::InvalidJson);
    }
    for (filter, jq) in [
        ("nan", "null"),
        ("infinite", "1.7976931348623157e+308"),
        ("-infinite", "-1.7976931348623157e+308"),
        ("[1, nan]", "[1,null]"),
        ("{a: nan}", r#"{"a":null}"#),
        ("[nan] | tojson", r#""[null]""#),
    ] {
        assert_eq!(d.ok(filter, "null"), jq, "{filter}");
    }
    let msg = d.err("{(1): 2}", "null", ErrorCode::RuntimeError);
    assert!(msg.contains("Cannot use number (1) as object key"), "{msg}");
    d.err(r#""ab" | tobytes"#, "null", ErrorCode::CompileError);
}

#[test]
fn invalid_input_is_refused_with_position() {
    let d = Daemon::start();
    let msg = d.err(".", "{\"a\":1,}", ErrorCode::InvalidJson);
    assert!(msg.contains("line 1, column 8"), "{msg}");
    d.err(".", "", ErrorCode::InvalidJson);
    d.err(".", "1 2", ErrorCode::InvalidJson);
    d.err(".", "# comment\n1", ErrorCode::InvalidJson);
    let bad_utf8 = d
        .client()
        .run(".", b"\"\xff\"", &Default::default())
        .unwrap_err();
    assert_eq!(bad_utf8.code(), Some(ErrorCode::InvalidJson));
}

#[test]
fn every_answer_carries_its_cost() {
    let d = Daemon::start();
    let reply = d.run(".[0]", "[1,2,3]").unwrap();
    assert_eq!(reply.output, "1");
    assert_eq!(reply.cost.output_bytes, 1);
    assert_eq!(reply.cost.input_bytes, 7);
    assert!(reply.cost.wall_us > 0);
    assert!(reply.cost.peak_rss_bytes > 0, "{:?}", reply.cost);
    let err = d.run("error(1)", "null").unwrap_err();
    match err {
        jqjail_client::ClientError::Server(e) => {
            let cost = e.cost.expect("errors from a worker carry a cost");
            assert!(cost.peak_rss_bytes > 0);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn logs_carry_no_request_data() {
    let d = Daemon::start_with(&[], &[("JQJAIL_LOG", "debug")]);
    let marker = "zq7-private-marker";
    d.ok(
        &format!(r#"[., "{marker}-filter"]"#),
        &format!(r#""{marker}-input""#),
    );
    d.err(
        &format!(r#"error("{marker}-error")"#),
        "null",
        ErrorCode::RuntimeError,
    );
    d.err(
        &format!("{marker}_undefined"),
        "null",
        ErrorCode::CompileError,
    );
    d.err(".", &format!("[\"{marker}\""), ErrorCode::InvalidJson);
    // Logged before each answer, but read from the daemon's stderr on a thread of the test's.
    assert!(
        crate::util::wait_until(std::time::Duration::from_secs(5), || d
            .log()
            .contains("run failed")),
        "the log records outcomes:\n{}",
        d.log()
    );
    let log = d.log();
    assert!(
        !log.contains(marker),
        "request data leaked into the log:\n{log}"
    );
}

#[test]
fn the_async_client_runs_and_types_its_errors() {
    let d = Daemon::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = jqjail_client::AsyncClient::connect(&d.socket)
            .await
            .unwrap();
        assert_eq!(c.limits().max_output_bytes, 100_000);
        let reply = c
            .run(".a", br#"{"a":[1,2]}"#, &Default::default())
            .await
            .unwrap();
        assert_eq!(reply.output, "[1,2]");
        let err = c.run(".[", b"null", &Default::default()).await.unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::CompileError));
        // Several async clients at once, each with its own answer.
        let mut tasks = Vec::new();
        for i in 0..8u32 {
            let socket = d.socket.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = jqjail_client::AsyncClient::connect(&socket).await.unwrap();
                let out = c
                    .run(". * 3", i.to_string().as_bytes(), &Default::default())
                    .await
                    .unwrap();
                (i, out.output)
            }));
        }
        for t in tasks {
            let (i, out) = t.await.unwrap();
            assert_eq!(out, (i * 3).to_string());
        }
    });
    let err = jqjail_client::Client::connect(d.dir.path().join("missing.sock")).unwrap_err();
    assert_eq!(err.code(), None);
    assert!(err.to_string().starts_with("cannot connect to"), "{err}");
}
