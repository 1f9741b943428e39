//! Named and positional arguments: values bound in a filter as `$name` and `$ARGS`,
//! through the real daemon, and the CLI's `--arg`, `--argjson`, `--rawfile`, `--slurpfile`.
//! A value is only ever data: text that looks like jq stays a string.

use crate::util::Daemon;
use jqjail_client::{Answer, Args, ClientError, ErrorCode, RunOptions, Source};
use std::process::Command;

fn run(d: &Daemon, filter: &str, args: &Args) -> Result<String, ClientError> {
    let opts = RunOptions::default();
    match d
        .client()
        .run_with_args(filter, Source::Inline(b"{\"a\":1}"), &opts, args)?
    {
        Answer::Output(reply) => Ok(reply.output),
        Answer::Hidden(_) => panic!("not asked for"),
    }
}

fn named(pairs: &[(&str, &str)]) -> Args {
    Args {
        named: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        positional: Vec::new(),
    }
}

#[test]
fn arguments_are_bound_as_variables_and_in_args() {
    let d = Daemon::start();
    let args = Args {
        positional: vec!["1".into(), r#""two""#.into()],
        ..named(&[
            ("x", r#""hi""#),
            ("n", "12345678901234567890"),
            ("o", r#"{"k":[1]}"#),
        ])
    };
    assert_eq!(
        run(&d, "[$x, $n, $o.k[0], .a]", &args).unwrap(),
        r#"["hi",12345678901234567890,1,1]"#
    );
    assert_eq!(
        run(&d, "$ARGS", &args).unwrap(),
        // In the order given, as jq lists them.
        r#"{"positional":[1,"two"],"named":{"x":"hi","n":12345678901234567890,"o":{"k":[1]}}}"#
    );
    // Without arguments, $ARGS is there and empty, as in jq.
    assert_eq!(
        run(&d, "$ARGS", &Args::default()).unwrap(),
        r#"{"positional":[],"named":{}}"#
    );
}

#[test]
fn a_value_that_looks_like_jq_stays_a_string() {
    let d = Daemon::start();
    let sneaky = r#"x"), (input_filename), halt_error("pwned"#;
    let args = named(&[("q", &serde_json::Value::String(sneaky.into()).to_string())]);
    assert_eq!(
        run(&d, "$q", &args).unwrap(),
        serde_json::Value::String(sneaky.into()).to_string()
    );
    assert_eq!(
        run(&d, ".a | tostring + $q | length", &args).unwrap(),
        (1 + sneaky.len()).to_string()
    );
    // A value is one JSON text, nothing else: not filter code, not two values.
    for bad in ["halt_error(\"x\")", "1 2", "{", "$__loc__", ""] {
        let e = run(&d, "$v", &named(&[("v", bad)])).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::InvalidJson), "{bad:?}: {e}");
        assert!(e.to_string().contains("argument `$v`"), "{e}");
    }
}

#[test]
fn bad_names_and_path_queries_are_refused_clearly() {
    let d = Daemon::start();
    for bad in ["", "1x", "a-b", "ENV", "ARGS", "__loc__", &"x".repeat(65)] {
        let e = run(&d, "1", &named(&[(bad, "1")])).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::InvalidRequest), "{bad:?}");
    }
    let opts = RunOptions {
        lang: jqjail_client::Lang::Path,
        ..Default::default()
    };
    let e = d
        .client()
        .run_with_args(
            "a",
            Source::Inline(b"{\"a\":1}"),
            &opts,
            &named(&[("x", "1")]),
        )
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidRequest));
    assert!(
        e.to_string().contains("path language has no variables"),
        "{e}"
    );
    // An undefined variable is a compile error naming it, as without arguments.
    let e = run(&d, "$y", &named(&[("x", "1")])).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::CompileError));
}

#[test]
fn the_cli_reads_argument_files_itself_and_passes_values() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    let raw = dir.path().join("raw.txt");
    let slurp = dir.path().join("values.json");
    std::fs::write(&input, r#"{"a":1}"#).unwrap();
    std::fs::write(&raw, "line \"1\"\n").unwrap();
    std::fs::write(&slurp, "1 {\"big\":12345678901234567890}\n[2]").unwrap();
    let out = Command::new(crate::util::CLI)
        .env("JQJAIL_SOCKET", &d.socket)
        .args(["-c", "--arg", "s", "$ENV", "--argjson", "j", "[1,2]"])
        .arg("--rawfile")
        .arg("r")
        .arg(&raw)
        .arg("--slurpfile")
        .arg("v")
        .arg(&slurp)
        .arg("[$s, $j, $r, $v, .a]")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"["$ENV",[1,2],"line \"1\"\n",[1,{"big":12345678901234567890},[2]],1]"#
    );
    let out = Command::new(crate::util::CLI)
        .env("JQJAIL_SOCKET", &d.socket)
        .args(["--argjson", "j", "{nope", "$j"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--argjson j: not one JSON value"));
}

/// Review findings: arguments were bounded by the worker's job frame (filter + 4 KiB) and by
/// a bincode claim limit of one times the body, so a 70 KB value or 3,000 short arguments
/// failed with PROTOCOL_ERROR; the CLI checked values with a parser limited to 128 levels and
/// f64 numbers.
#[test]
fn large_and_many_arguments_are_taken_up_to_the_frame() {
    let d = Daemon::start();
    let big = format!("\"{}\"", "x".repeat(70_000));
    assert_eq!(
        run(&d, "$v | length", &named(&[("v", &big)])).unwrap(),
        "70000"
    );
    let many = Args {
        named: (0..3000).map(|i| (format!("a{i}"), "1".into())).collect(),
        positional: vec!["1".into(); 10_000],
    };
    assert_eq!(
        run(
            &d,
            "[($ARGS.named | length), ($ARGS.positional | length), $a2999]",
            &many
        )
        .unwrap(),
        "[3000,10000,1]"
    );
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("deep.json");
    std::fs::write(&deep, format!("{}{}", "[".repeat(200), "]".repeat(200))).unwrap();
    for args in [
        vec!["-s", "-c", "length", deep.to_str().unwrap()],
        vec!["-n", "-c", "--argjson", "x", "1e400", "$x"],
        vec![
            "-n",
            "-c",
            "--slurpfile",
            "x",
            deep.to_str().unwrap(),
            "$x | length",
        ],
    ] {
        let out = Command::new(crate::util::CLI)
            .env("JQJAIL_SOCKET", &d.socket)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
