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
    "[inputs]",
    "$ARGS.named | keys",
    // In command-line order, as jq lists them (x before j).
    "$ARGS.named",
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
    // jq 1.6's colours, byte for byte.
    &["-C"],
    &["-C", "-c", "-S"],
    &["-C", "--tab", "-a"],
];

/// Whole command lines, run in a directory holding the files they name: several input
/// files (a value may span two, as jq 1.6 reads them as one stream), `-` among them, and
/// positional arguments.
const COMMAND_LINES: &[&[&str]] = &[
    &["-c", ".", "one.json", "two.json"],
    &["-c", ".", "half1.json", "half2.json"],
    &["-c", "-s", ".", "two.json", "one.json"],
    // `input` and `inputs` read the files' values: with `-n` in one run over `null`, without
    // once per value they left unread (issue 24's `reduce inputs` example).
    &[
        "-n",
        "reduce inputs as $x (0; . + 1)",
        "one.json",
        "two.json",
    ],
    &["-c", "-n", "[inputs]", "two.json", "one.json"],
    &["-c", "-n", "input, [inputs | type]", "two.json", "one.json"],
    &[
        "-c",
        "[., input]",
        "one.json",
        "two.json",
        "one.json",
        "two.json",
    ],
    &["-c", "[inputs]", "two.json", "one.json"],
    &["-c", "-n", "-s", "[inputs]", "two.json", "one.json"],
    &["-c", ".", "one.json", "-", "two.json"],
    &["-c", "-e", ".", "two.json", "falsy.json"],
    &["-c", "-e", ".a | select(. > 5)", "one.json"],
    &[
        "-c",
        "-e",
        ".a | select(. > 5)",
        "one.json",
        "falsy.json",
        "one.json",
    ],
    &[
        "-c",
        "-n",
        "$ARGS",
        "--args",
        "a",
        "b c",
        "--jsonargs",
        "1",
        "{\"x\":[2]}",
    ],
    &["-c", "--args", "[., $ARGS.positional]", "x", "-S", "y"],
    &[
        "-c",
        "-n",
        "$ARGS.positional",
        "--jsonargs",
        "null",
        "--args",
        "null",
    ],
    &["-c", ".a + 1", "one.json", "mixed.json", "two.json"],
    &["-r", ".[]?", "mixed.json"],
    // Every --args and --jsonargs keeps its place, however often given.
    &[
        "-c",
        "-n",
        "$ARGS",
        "--args",
        "a",
        "--jsonargs",
        "1",
        "--args",
        "b",
    ],
    &["-c", "-n", "$ARGS", "--args", "x", "y", "--args", "z"],
    // Named values in command-line order whatever their flag; the first value of a name wins.
    &[
        "-c",
        "-n",
        "$ARGS.named",
        "--slurpfile",
        "e",
        "one.json",
        "--arg",
        "a",
        "1",
        "--argjson",
        "b",
        "2",
        "--arg",
        "a",
        "3",
    ],
    // A value that does not parse ends the stream, after the values before it.
    &["-c", ".", "broken.json"],
    // jq's input and output flags.
    &["-R", ".", "lines.txt"],
    &["-c", "-R", "-s", ".", "lines.txt"],
    &["-c", "-R", "-n", "[inputs | length]", "lines.txt"],
    &["-R", "-r", "ascii_upcase", "lines.txt", "-"],
    &["-c", "-f", "prog.jq", "two.json", "one.json"],
    &["-c", "--from-file", "prog.jq", "mixed.json"],
    &["-c", "--seq", ".", "seq.json"],
    &["--seq", "-r", ".[]?", "seq.json"],
    &["-c", "--stream", ".", "mixed.json"],
    &[
        "-c",
        "--stream",
        "select(length == 2) | .[0] | join(\".\")",
        "two.json",
    ],
    &["-c", "--unbuffered", ".", "one.json"],
    &["-M", ".", "two.json"],
    &["-C", "-c", ".", "mixed.json"],
    // A word is an option only if it starts with `--` or `-` and a letter, as in jq 1.6: a
    // filter, a file or a value may start with `-`.
    &["-c", "-n", "-1, -.5 | floor"],
    &["-c", "-(.a)", "one.json"],
    &[
        "-c",
        "-n",
        "[$x, $y]",
        "--arg",
        "x",
        "-5",
        "--argjson",
        "y",
        "-0.5",
    ],
    &[
        "-c", "-n", "[$x, $y]", "--arg", "x", "-foo", "--arg", "y", "--bar",
    ],
    &["-c", "-.a", "-", "one.json"],
    // No filter: `.`, as jq 1.6 when stdin or stdout is not a terminal.
    &[],
    &["-c"],
];

const FILES: &[(&str, &str)] = &[
    ("one.json", "{\"a\": 1}\n"),
    ("lines.txt", "first line\n\"quoted\" é\n\nlast, no newline"),
    ("prog.jq", "# a comment\n.a? // . | [., type]\n"),
    (
        "seq.json",
        "\u{1e}{\"a\": [1, \"x\"]}\n\u{1e}[true]\n\u{1e}3\n",
    ),
    ("two.json", "2 [3, \"three\"]\n"),
    ("half1.json", "[1, {\"k\":"),
    ("half2.json", " \"v\"}]"),
    ("falsy.json", "null false"),
    ("broken.json", "1 x 2"),
    (
        "mixed.json",
        "{\"a\": 2} {\"a\": \"x\"} [\"s\", \"t\"] {\"a\": 3}",
    ),
];

/// Whether jqjail's (stdout, status) agrees with jq's: a success (or `-e`'s 1 and 4) must match
/// exactly; on an error both must fail after the same outputs, the status being jqjail's own
/// class (README).
fn agree(theirs: &(String, Option<i32>), ours: &(String, Option<i32>), with_e: bool) -> bool {
    match theirs.1 {
        Some(0) => theirs == ours,
        Some(1 | 4) if with_e => theirs == ours,
        _ => theirs.0 == ours.0 && ours.1 != Some(0),
    }
}

fn run(
    program: &str,
    socket: Option<&std::path::Path>,
    args: &[&str],
    input: &str,
) -> (String, Option<i32>) {
    run_in(program, socket, args, input, None)
}

fn run_in(
    program: &str,
    socket: Option<&std::path::Path>,
    args: &[&str],
    input: &str,
    dir: Option<&std::path::Path>,
) -> (String, Option<i32>) {
    let mut c = Command::new(program);
    if let Some(dir) = dir {
        c.current_dir(dir);
    }
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
        assert!(
            std::env::var_os("CI").is_none(),
            "jq is not installed; .ci/run installs it"
        );
        crate::util::skip("jq is not installed (Debian package `jq`; .ci/run installs it)");
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
                if !agree(&theirs, &ours, flags.contains(&"-e")) {
                    differences.push(format!(
                        "{name} {args:?}:\n  jq:     {:?} {:?}\n  jqjail: {:?} {:?}",
                        theirs.1, theirs.0, ours.1, ours.0
                    ));
                }
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in FILES {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    for args in COMMAND_LINES {
        let theirs = run_in("jq", None, args, "[\"stdin\"]", Some(dir.path()));
        let ours = run_in(CLI, Some(&d.socket), args, "[\"stdin\"]", Some(dir.path()));
        compared += 1;
        if !agree(&theirs, &ours, args.contains(&"-e")) {
            differences.push(format!(
                "{args:?}:\n  jq:     {:?} {:?}\n  jqjail: {:?} {:?}",
                theirs.1, theirs.0, ours.1, ours.0
            ));
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
