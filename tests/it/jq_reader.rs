//! `fromjson` and `tonumber` against Debian's jq 1.6 on generated texts: jq's extra literals
//! (`NaN`, `Infinity`, `01`, `.5`), its refusals and their messages (line, column, "at EOF"),
//! structural errors, escapes, control characters, RS and NUL bytes. Every answer must be
//! jq's text; the one allowed difference is an integer beyond 2^53, which jqjail keeps exact.
//! Needs jq (`.ci/run` installs it); skips, saying why, without it.

use crate::util::{Daemon, installed, skip};
use jqjail_client::RunOptions;
use std::io::Write;
use std::process::{Command, Stdio};

/// Pieces of texts: values jq reads, values only jq reads, and broken ones.
const ATOMS: &[&str] = &[
    "1",
    "-1",
    "1.5",
    "1e3",
    "-0",
    "0.1e-2",
    "\"a\"",
    "\"\\u00e9\"",
    "true",
    "false",
    "null",
    "nan",
    "NaN",
    "-NaN",
    "-nan",
    "Infinity",
    "-Infinity",
    "infinity",
    "inf",
    "INF",
    "01",
    "1.",
    ".5",
    "+1",
    "1e",
    "--1",
    "\"\t\"",
    "\"\\x\"",
    "\"\\ud800\"",
    "\"\\udc00\"",
    "\"\\ud800\\u0041\"",
    "\"\\ud83d\\ude00\"",
    "\"\\u12\"",
    "\"\\u12g4\"",
    "tru",
    "nul",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "[1,]",
    "{\"a\":1,}",
    "{\"a\"}",
    "{1:2}",
    "[1 2]",
    "1 2",
    "\"abc",
    "\"\n\"",
    " ",
    "",
    "'a'",
    "[[]]",
    "{\"a\":{\"b\":[1,{}]}}",
    "é",
    "\"\u{1}\"",
    "\"\u{1f}\"",
    "\"\u{1e}\"",
    "\"\u{7f}\"",
    "\u{1e}",
    "\u{1f}",
    "\u{0}",
    "\"\u{0}\"",
    "[1,,2]",
    "{,}",
    "{\"a\":1 \"b\":2}",
    "[}",
    "{\"a\":}",
    "{\"a\"::1}",
    "\n",
    "\r\n",
    "\u{b}",
    "\u{c}",
    "1\u{b}",
    "NaN(12)",
    "0x10",
    "1_0",
    "1e400",
    "-1e400",
    "4.9e-324",
    "1e-400",
    "123456789012345678901234567890",
    "\"\\",
    "\"\\\"",
    "\\",
    "{\"a\":1,\"a\":2}",
    "[\"a\":1]",
    "[1:2]",
    "[:",
    "{\"a\" 1}",
    "\u{feff}1",
    "1é",
];

/// The generated texts: every atom, then joins of two to five, from a fixed seed.
fn texts() -> Vec<String> {
    let mut out: Vec<String> = ATOMS.iter().map(|a| a.to_string()).collect();
    let mut seed: u64 = 0x5eed_1e55;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    for _ in 0..3000 {
        let k = 2 + next(4);
        out.push((0..k).map(|_| ATOMS[next(ATOMS.len())]).collect());
    }
    out.sort();
    out.dedup();
    out
}

/// An answer where jq gives the nearest double of an integer that jqjail keeps exact (one
/// beyond 2^53), as a number or as its text (`tojson`).
fn exact_integer(jq: &serde_json::Value, ours: &serde_json::Value) -> bool {
    use serde_json::Value::{Number, String};
    let (a, b) = match (jq, ours) {
        (Number(a), Number(b)) => (a.to_string(), b.to_string()),
        (String(a), String(b)) => (a.clone(), b.clone()),
        _ => return false,
    };
    let digits = b.strip_prefix('-').unwrap_or(&b);
    let (Ok(x), Ok(y)) = (a.parse::<f64>(), b.parse::<f64>()) else {
        return false;
    };
    digits.len() > 16 && digits.bytes().all(|c| c.is_ascii_digit()) && x == y
}

#[test]
fn fromjson_and_tonumber_read_as_jq_1_6_reads() {
    if !installed("jq") {
        skip("jq is not installed (Debian package `jq`; .ci/run installs it)");
        return;
    }
    let texts = texts();
    let input = serde_json::to_string(&texts).unwrap();
    let d = Daemon::start();
    let mut client = d.client();
    for reader in ["fromjson | tojson", "tonumber"] {
        let filter = format!(".[] | try ({reader}) catch (\"ERR \" + .)");
        let mut jq = Command::new("jq")
            .args(["-c", &filter])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        jq.stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let jq = jq.wait_with_output().unwrap();
        assert!(jq.status.success(), "jq: {jq:?}");
        let theirs: Vec<serde_json::Value> = String::from_utf8(jq.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(theirs.len(), texts.len());
        // In chunks, each answer under the output limit.
        let mut ours = Vec::new();
        for start in (0..texts.len()).step_by(250) {
            let options = RunOptions {
                outputs: jqjail_protocol::Outputs::Lines,
                ..RunOptions::default()
            };
            let chunk = format!(".[{start}:{}] | {filter}", start + 250);
            let reply = client.run(&chunk, input.as_bytes(), &options).unwrap();
            ours.extend(
                reply
                    .output
                    .lines()
                    .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()),
            );
        }
        assert_eq!(ours.len(), texts.len());
        let (mut same, mut exact) = (0, 0);
        let mut wrong = Vec::new();
        for ((text, jq), ours) in texts.iter().zip(&theirs).zip(&ours) {
            if jq == ours {
                same += 1;
            } else if exact_integer(jq, ours) {
                exact += 1;
            } else {
                wrong.push(format!("{text:?}: jq {jq}, jqjail {ours}"));
            }
        }
        eprintln!(
            "{reader}: {same} of {} texts as jq 1.6 reads them, {exact} exact integers",
            texts.len()
        );
        assert!(wrong.is_empty(), "{reader}:\n{}", wrong.join("\n"));
    }
}
