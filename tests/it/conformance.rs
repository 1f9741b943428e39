//! Differential test against jq's own test corpus (`shared/conformance`): every case gives the
//! same answer through the daemon as the same engine gives in-process, and the cases where
//! the in-process answer matches jq's expected output are counted.

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
    let dir = crate::util::repo_file("../shared/conformance");
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

fn expected_answer(case: &Case) -> Option<Value> {
    let values: Option<Vec<Value>> = case
        .expected
        .iter()
        .map(|l| serde_json::from_str(l).ok().map(normalise))
        .collect();
    let mut values = values?;
    Some(match values.len() {
        0 => Value::Null,
        1 => values.pop().unwrap(),
        _ => Value::Array(values),
    })
}

/// The answer as a comparable string: output text, or the error code.
fn in_process(engine: &Engine, case: &Case) -> Result<String, String> {
    let job = Job {
        filter: case.filter.clone(),
        lang: jqjail_protocol::Lang::Jq,
        input_bytes: case.input.len() as u64,
        max_depth: 1000,
        max_output_bytes: 100_000,
        args: Default::default(),
        outputs: Default::default(),
    };
    evaluate(engine, &job, &Bytes::copy_from_slice(case.input.as_bytes()))
        .map_err(|e| e.code.to_string())
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

#[test]
fn daemon_agrees_with_in_process_jaq_on_jqs_test_corpus() {
    let Some(dir) = corpus_dir() else {
        eprintln!("skipped: ../shared/conformance is not beside this checkout");
        return;
    };
    let d = Daemon::start();
    let mut client = d.client();
    // How many cases of each file match jq's own expected output in-process today (jaq differs
    // from jq in documented ways, and some cases use what the sandbox removes): a floor, so a
    // change that makes jqjail less like jq fails here instead of going unnoticed.
    for (file, floor) in [("jq.test", 355), ("man.test", 207)] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let cases = parse(&text);
        let (mut passes_jq, mut agree, mut limited) = (0, 0, 0);
        let mut disagreements = Vec::new();
        let locals = all_in_process(&cases);
        for (case, local) in cases.iter().zip(locals) {
            let passed = matches!(
                (&local, expected_answer(case)),
                (Ok(out), Some(want)) if serde_json::from_str(out).ok().map(normalise).as_ref() == Some(&want)
            );
            if passed {
                passes_jq += 1;
            }
            let remote =
                match client.run(&case.filter, case.input.as_bytes(), &RunOptions::default()) {
                    Ok(reply) => Ok(reply.output),
                    Err(ClientError::Server(e)) => Err(e.code.to_string()),
                    Err(e) => panic!("{file}:{}: transport failure: {e}", case.line),
                };
            // Only a worker has a heap, stack and time limit: where the daemon stops a case
            // that in-process evaluation finished, the difference is the sandbox, not a bug.
            let worker_limit = matches!(
                remote.as_ref().map_err(String::as_str),
                Err("MEMORY_LIMIT" | "STACK_LIMIT" | "TIMEOUT" | "CPU_LIMIT")
            );
            if remote == local {
                agree += 1;
            } else if worker_limit && !passed {
                limited += 1;
            } else {
                disagreements.push(format!(
                    "{file}:{} `{}`: in-process {local:?}, daemon {remote:?}",
                    case.line, case.filter
                ));
            }
        }
        eprintln!(
            "{file}: {} cases; {passes_jq} match jq's expected output in-process; the daemon agrees with in-process on {agree}, stops {limited} at a worker limit",
            cases.len()
        );
        assert!(cases.len() > 100, "{file}: the corpus did not parse");
        assert!(
            passes_jq >= floor,
            "{file}: {passes_jq} cases match jq's expected output, fewer than the {floor} that did"
        );
        assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    }
}
