//! The CLI against jq 1.6 (Debian's `jq`): a table of invocations (flags × filters × inputs)
//! run through both, stdout and exit status compared. The documented differences (README,
//! "Differences from jq") are kept out of the table: number spelling, limits, sandboxed
//! builtins. Skipped, with the reason, where `jq` is not installed; .ci/run installs it.

use crate::util::{CLI, Daemon};
use std::process::{Command, Stdio};

const INPUTS: &[(&str, &str)] = &[
    (
        "doc",
        r#"{"b":[1,{"x":"é","y":null}],"a":"two words","c":{"z":true,"d":[]},"n":-7}"#,
    ),
    ("list", r#"[3,1,2,{"k":"v"},"s",false,null]"#),
    ("text", r#""line one\nline \"two\"""#),
    ("values", "1 [2] {\"three\":3}"),
];

const FILTERS: &[&str] = &[
    ".",
    ".[]?",
    ".a, .n",
    "keys",
    "[.[]?] | length",
    "..|numbers",
    "to_entries",
    "select(.a) | .a",
    "empty",
    "null",
    "false",
    "$ARGS.named | keys",
    "[$x, $j]",
];

const FLAGS: &[&[&str]] = &[
    &[],
    &["-c"],
    &["-r"],
    &["-j"],
    &["-a"],
    &["-S"],
    &["--tab"],
    &["--indent", "4"],
    &["--indent", "0"],
    &["-e"],
    &["-s", "-c"],
    &["-n"],
    &["-r", "-a"],
    &["-S", "-c", "-e"],
];

fn run(
    program: &str,
    socket: Option<&std::path::Path>,
    args: &[&str],
    input: &str,
) -> (String, Option<i32>) {
    let mut c = Command::new(program);
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(socket) = socket {
        c.env("JQJAIL_SOCKET", socket);
    }
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

#[test]
fn the_cli_prints_and_exits_as_jq_does() {
    let jq_version = Command::new("jq").arg("--version").output();
    let Ok(version) = jq_version else {
        eprintln!("skipped: jq is not installed (Debian package `jq`; .ci/run installs it)");
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let d = Daemon::start();
    let mut compared = 0;
    let mut jq_crashed = 0;
    let mut differences = Vec::new();
    for (name, input) in INPUTS {
        for filter in FILTERS {
            for flags in FLAGS {
                // jq runs the filter once per input value; jqjail takes one value (or -s).
                if *name == "values" && !flags.contains(&"-s") && !flags.contains(&"-n") {
                    continue;
                }
                let mut args: Vec<&str> =
                    vec!["--arg", "x", "é\"1", "--argjson", "j", "[1,{\"k\":2}]"];
                args.extend_from_slice(flags);
                args.push(filter);
                let theirs = run("jq", None, &args, input);
                if theirs.1.is_none() {
                    // jq 1.6 itself crashed (it does on some `-r -a` outputs): nothing to match.
                    jq_crashed += 1;
                    continue;
                }
                let ours = run(CLI, Some(&d.socket), &args, input);
                compared += 1;
                // A success (or `-e`'s 1 and 4) must match exactly. On an error both must
                // fail after the same outputs; the status is jqjail's own class (README).
                let with_e = flags.contains(&"-e");
                let same = match theirs.1 {
                    Some(0) => theirs == ours,
                    Some(1 | 4) if with_e => theirs == ours,
                    _ => theirs.0 == ours.0 && ours.1 != Some(0),
                };
                if !same {
                    differences.push(format!(
                        "{name} {args:?}:\n  jq:     {:?} {:?}\n  jqjail: {:?} {:?}",
                        theirs.1, theirs.0, ours.1, ours.0
                    ));
                }
            }
        }
    }
    eprintln!("{compared} invocations compared with {version} ({jq_crashed} where jq crashed)");
    assert!(
        differences.is_empty(),
        "{} differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
