//! jq's own test corpus (`tests/conformance`) against jqjail: on the cases jq 1.6 passes
//! (`conformance/jq16_passes.txt`), jqjail gives jq's answer at least as often as the floors
//! below and never a different one but for the differences README lists; and every case
//! gives the same answer through the daemon as in-process.

use crate::util::Daemon;
use jqjail_client::{ClientError, RunOptions};
use jqjail_protocol::worker::Job;
use jqjail_worker::{Bytes, Engine, evaluate};
use serde_json::Value;
use std::path::PathBuf;

struct Case {
    line: usize,
    filter: String,
    input: String,
    expected: Vec<String>,
}

fn corpus_dir() -> Option<PathBuf> {
    let dir = crate::util::repo_file("tests/conformance");
    dir.is_dir().then_some(dir)
}

/// Parses jq's test format: program, input, expected outputs, separated by blank lines;
/// `#` lines are comments; `%%FAIL` groups (compile errors) are skipped.
fn parse(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("%%FAIL") {
            while lines.next_if(|(_, l)| !l.trim().is_empty()).is_some() {}
            continue;
        }
        let Some((_, input)) = lines.next() else {
            break;
        };
        let mut expected = Vec::new();
        while let Some((_, l)) = lines.next_if(|(_, l)| !l.trim().is_empty()) {
            expected.push(l.to_string());
        }
        cases.push(Case {
            line: n + 1,
            filter: line.to_string(),
            input: input.to_string(),
            expected,
        });
    }
    cases
}

/// JSON values compared as jq compares them: numbers by value.
fn normalise(v: Value) -> Value {
    match v {
        Value::Number(n) => serde_json::Number::from_f64(n.as_f64().unwrap_or(f64::NAN))
            .map_or(Value::Null, Value::Number),
        Value::Array(a) => Value::Array(a.into_iter().map(normalise).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, normalise(v))).collect()),
        other => other,
    }
}

/// The answer as a comparable string: output text (one value per line), or the error code.
fn in_process(engine: &Engine, case: &Case) -> Result<String, String> {
    let job = Job {
        filter: case.filter.clone(),
        lang: jqjail_protocol::Lang::Jq,
        input_bytes: case.input.len() as u64,
        max_depth: 1000,
        max_output_bytes: 100_000,
        args: Default::default(),
        outputs: jqjail_protocol::Outputs::Lines,
        inputs: Default::default(),
    };
    evaluate(engine, &job, &Bytes::copy_from_slice(case.input.as_bytes()))
        .map_err(|e| format!("{}: {}", e.code, e.message))
}

/// Evaluates every case in-process on a thread with a worker-sized stack (the test harness's
/// 2 MiB threads are smaller than a worker's 64 MiB).
fn all_in_process(cases: &[Case]) -> Vec<Result<String, String>> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(s, || {
                let engine = Engine::new();
                cases.iter().map(|c| in_process(&engine, c)).collect()
            })
            .unwrap()
            .join()
            .unwrap()
    })
}

/// Output lines as normalised JSON values, or `None` where one is not JSON.
fn values(text: &str) -> Option<Vec<Value>> {
    text.lines()
        .map(|l| serde_json::from_str(l).ok().map(normalise))
        .collect()
}

/// How jqjail's answer to a case compares with jq's expected output.
#[derive(Debug, PartialEq)]
enum Verdict {
    Same,
    Error,
    Different,
}

fn verdict(case: &Case, ours: &Result<String, String>) -> Verdict {
    let want: Option<Vec<Value>> = case
        .expected
        .iter()
        .map(|l| serde_json::from_str(l).ok().map(normalise))
        .collect();
    match ours {
        Err(_) => Verdict::Error,
        Ok(text) if values(text).is_some() && values(text) == want => Verdict::Same,
        Ok(_) => Verdict::Different,
    }
}

/// Cases of the corpus where jq 1.6's answer is an error message caught by `try … catch .`
/// and jqjail's message differs in wording. Each is listed in README "Differences from jq".
const DIFFERENT_MESSAGES: &[(&str, &str)] = &[
    // jaq's path-expression errors: "invalid path expression with input …", without jq's
    // "near attempt to …" context.
    ("jq.test", "try path(.a | map(select(.b == 0))) catch ."),
    (
        "jq.test",
        "try path(.a | map(select(.b == 0)) | .[0]) catch .",
    ),
    (
        "jq.test",
        "try path(.a | map(select(.b == 0)) | .c) catch .",
    ),
    (
        "jq.test",
        "try path(.a | map(select(.b == 0)) | .[]) catch .",
    ),
    ("jq.test", "try ((map(select(.a == 1))[].b) = 10) catch ."),
    ("jq.test", "try ((map(select(.a == 1))[].a) |= .+1) catch ."),
    ("jq.test", "try (def x: reverse; x=10) catch ."),
];

/// The cases jq 1.6 passes, as (file, line of the program).
fn jq16_passes() -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(crate::util::repo_file(
        "tests/it/conformance/jq16_passes.txt",
    ))
    .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (file, line) = l.split_once(' ').unwrap();
            (file.to_string(), line.parse().unwrap())
        })
        .collect()
}

#[test]
fn jqs_test_corpus_gets_jqs_answers_and_the_daemon_agrees() {
    let Some(dir) = corpus_dir() else {
        panic!("tests/conformance is missing from this checkout");
    };
    let passes = jq16_passes();
    let d = Daemon::start();
    let mut client = d.client();
    // The floors: the cases jq 1.6 passes where jqjail gives jq's answer (360 of 368 and
    // 216 of 216 when they were set; gojq 0.12: 332 and 215). bench/corpus-cli.py counts
    // the same through each tool's command line.
    for (file, floor, total) in [("jq.test", 360, 368), ("man.test", 216, 216)] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let cases = parse(&text);
        let locals = all_in_process(&cases);
        let (mut same, mut errors, mut agree, mut limited) = (0, 0, 0, 0);
        let mut wrong = Vec::new();
        let mut disagreements = Vec::new();
        let mut considered = 0;
        for (case, local) in cases.iter().zip(&locals) {
            if passes.contains(&(file.to_string(), case.line)) {
                considered += 1;
                match verdict(case, local) {
                    Verdict::Same => same += 1,
                    Verdict::Error => errors += 1,
                    Verdict::Different
                        if DIFFERENT_MESSAGES.contains(&(file, case.filter.as_str())) => {}
                    Verdict::Different => wrong.push(format!(
                        "{file}:{} `{}` on {}: jq {:?}, jqjail {local:?}",
                        case.line, case.filter, case.input, case.expected
                    )),
                }
            }
            let options = RunOptions {
                outputs: jqjail_protocol::Outputs::Lines,
                ..RunOptions::default()
            };
            let remote = match client.run(&case.filter, case.input.as_bytes(), &options) {
                Ok(reply) => Ok(reply.output),
                Err(ClientError::Server(e)) => Err(format!("{}: {}", e.code, e.message)),
                Err(e) => panic!("{file}:{}: transport failure: {e}", case.line),
            };
            // Only a worker has a heap, stack and time limit: where the daemon stops a case
            // that in-process evaluation finished, the difference is the sandbox, not a bug.
            let worker_limit = remote.as_ref().is_err_and(|e| {
                ["MEMORY_LIMIT", "STACK_LIMIT", "TIMEOUT", "CPU_LIMIT"]
                    .iter()
                    .any(|c| e.starts_with(c))
            });
            if &remote == local {
                agree += 1;
            } else if worker_limit {
                limited += 1;
            } else {
                disagreements.push(format!(
                    "{file}:{} `{}`: in-process {local:?}, daemon {remote:?}",
                    case.line, case.filter
                ));
            }
        }
        eprintln!(
            "{file}: of the {considered} cases jq 1.6 passes, jqjail gives jq's answer on {same}, an error on {errors}; the daemon agrees with in-process on {agree} of {}, stops {limited} at a worker limit",
            cases.len()
        );
        assert_eq!(
            considered, total,
            "{file}: jq16_passes.txt does not match the corpus"
        );
        assert!(
            same >= floor,
            "{file}: jqjail gives jq's answer on {same} cases, fewer than the {floor} it did"
        );
        assert!(
            wrong.is_empty(),
            "silently different answers:\n{}",
            wrong.join("\n")
        );
        assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    }
}
