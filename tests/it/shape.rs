//! Shape summaries through the daemon: computed by a confined worker for an inline input or a
//! hide, bounded whatever the input, refused with a clear error when misused.

use crate::util::{CLI, Daemon, expect_code, repo_file};
use jqjail_client::{ClientError, ErrorCode, Source};
use std::process::Command;

#[test]
fn a_shape_of_an_input_and_of_a_hide_is_the_same_bounded_skeleton() {
    let d = Daemon::start();
    let mut c = d.client();
    let issues = std::fs::read(repo_file("examples/issues.json")).unwrap();
    let inline = c.shape(Source::Inline(&issues)).unwrap().output;
    let shape: serde_json::Value = serde_json::from_str(&inline).unwrap();
    assert_eq!(shape["type"], "array");
    assert_eq!(shape["items"]["type"], "object");
    assert_eq!(
        shape["items"]["keys"]["user"]["keys"]["login"]["type"],
        "string"
    );
    assert!(inline.len() <= 4096);

    let id = c
        .hide_put("tool", "test", &issues, &Default::default())
        .unwrap()
        .entry
        .id;
    assert_eq!(c.shape(Source::Hide(&id)).unwrap().output, inline);

    // A large, wide document still gives at most 4 KiB.
    let mut wide = String::from("[");
    for i in 0..20_000 {
        if i > 0 {
            wide.push(',');
        }
        wide.push_str(&format!(
            r#"{{"k{}":{i},"common":"{}"}}"#,
            i % 3000,
            "x".repeat(50)
        ));
    }
    wide.push(']');
    let reply = c.shape(Source::Inline(wide.as_bytes())).unwrap();
    assert!(reply.output.len() <= 4096, "{}", reply.output.len());
    assert!(
        reply.output.contains(r#""common":{"type":"string""#),
        "{}",
        reply.output
    );

    // Not JSON, or no such hide: the usual errors.
    expect_code(c.shape(Source::Inline(b"{oops")), ErrorCode::InvalidJson);
    expect_code(c.shape(Source::Hide("test-00000000")), ErrorCode::NotFound);
}

#[test]
fn a_shape_request_takes_no_filter_and_no_arguments() {
    let d = Daemon::start();
    let mut c = d.client();
    let options = jqjail_client::RunOptions {
        lang: jqjail_client::Lang::Shape,
        ..Default::default()
    };
    expect_code(c.run(".", b"[1]", &options), ErrorCode::InvalidRequest);
    let args = jqjail_client::Args {
        positional: vec!["1".into()],
        ..Default::default()
    };
    let err = c
        .run_with_args("", Source::Inline(b"[1]"), &options, &args)
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Server(ref e) if e.code == ErrorCode::InvalidRequest && e.message.contains("no arguments")),
        "{err}"
    );
}

#[test]
fn the_cli_prints_a_shape_of_a_file_stdin_or_a_hide() {
    let d = Daemon::start();
    let file = repo_file("examples/issues.json");
    let out = Command::new(CLI)
        .args(["shape", "-c", file.to_str().unwrap(), "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut c = d.client();
    let issues = std::fs::read(&file).unwrap();
    assert_eq!(
        text.trim_end(),
        c.shape(Source::Inline(&issues)).unwrap().output
    );
    let pretty = Command::new(CLI)
        .args(["--socket", d.socket.to_str().unwrap(), "shape"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&pretty.stdout).starts_with("{\n  \"type\": \"array\""));
}

/// 26 distinct keys nested 4 deep are 456,976 positions in 2.85 MB: the summary tracks at most
/// 20,000 of them, so it stays within the worker's memory. (It tracked all: MEMORY_LIMIT at a
/// 273 MiB peak.)
#[test]
fn a_document_of_many_distinct_nested_keys_has_a_bounded_shape() {
    fn level(depth: usize, out: &mut String) {
        if depth == 0 {
            out.push('1');
            return;
        }
        out.push('{');
        for (i, key) in ('a'..='z').enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("\"{key}{depth}\":"));
            level(depth - 1, out);
        }
        out.push('}');
    }
    let mut doc = String::new();
    level(4, &mut doc);
    assert!(doc.len() > 2_500_000, "{}", doc.len());
    let d = Daemon::start();
    let shape = d
        .client()
        .shape(Source::Inline(doc.as_bytes()))
        .unwrap()
        .output;
    assert!(shape.len() <= 4096, "{}", shape.len());
    assert!(
        shape.starts_with(r#"{"type":"object","keys":{"a4":"#),
        "{shape}"
    );
}
