//! `jqjail mcp` driven by an MCP client jqjail did not write: the official MCP Python SDK
//! (PyPI `mcp`), through `tests/mcp/official_client.py`, against a real daemon. Skipped, with
//! the reason, where that SDK is not installed; .ci/run installs it and names its Python in
//! `JQJAIL_TEST_PYTHON`.

use crate::util::{CLI, Daemon, repo_file, skip_unreachable as skip};
use std::process::Command;

/// The Python that has the MCP SDK: `JQJAIL_TEST_PYTHON`, which must have it (a CI that names
/// one and lacks the SDK fails rather than skips), else `python3` if it has it.
pub(crate) fn python_with_mcp() -> Option<String> {
    let named = std::env::var("JQJAIL_TEST_PYTHON").ok();
    let python = named.clone().unwrap_or_else(|| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import mcp.client.stdio"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || named.is_none(),
        "JQJAIL_TEST_PYTHON={python} has no MCP SDK (`import mcp.client.stdio` failed)"
    );
    ok.then_some(python)
}

/// Runs `tests/mcp/SCRIPT` with `interpreter` (a Python with the MCP SDK, or node), the CLI,
/// the daemon's socket and `extra`; fails with the script's output unless it succeeds;
/// returns its stdout (a JSON summary).
fn run_script(interpreter: &str, script: &str, d: &Daemon, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(interpreter)
        .arg(repo_file(&format!("tests/mcp/{script}")))
        .arg(CLI)
        .arg(&d.socket)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The summary is printed for the closing notes (protocol versions, sizes).
    eprintln!("{script}: {stdout}");
    serde_json::from_str(stdout.trim()).unwrap()
}

#[test]
fn the_official_python_sdk_lists_calls_pages_and_gets_tool_errors() {
    let Some(python) = python_with_mcp() else {
        skip(
            "the MCP Python SDK is not installed (pip install mcp==2.3.0, and name that Python \
             in JQJAIL_TEST_PYTHON; .ci/run does both where PyPI is reachable)",
        );
        return;
    };
    let d = Daemon::start();
    let summary = run_script(&python, "official_client.py", &d, &[]);
    assert_eq!(summary["server"], "jqjail");
    // The daemon counted the work: the MCP server is only a client of it.
    let stats = d.client().stats().unwrap();
    let count = |code: &str| stats.outcome(code);
    assert!(count("OK") >= 10, "{:?}", stats.outcomes);
    assert_eq!(count("MEMORY_LIMIT"), 1, "{:?}", stats.outcomes);
}

/// Issue 37: the session's hides are MCP resources. The official Python SDK, on both revisions
/// it negotiates, lists the templates, follows the `resource_link` a kept result carries, is
/// told the list changed (as a notification, or through `subscriptions/listen`), pages the
/// list (102 hides) and reads pages by URI; bad URIs are errors. (Before, the server offered
/// no resources.)
#[test]
fn the_official_python_sdk_lists_reads_and_follows_links_to_hides() {
    let Some(python) = python_with_mcp() else {
        skip("the MCP Python SDK is not installed (see the first test here)");
        return;
    };
    let d = Daemon::start();
    let summary = run_script(&python, "resources_client.py", &d, &[]);
    assert_eq!(summary["legacy"]["listed"], 102, "{summary}");
    assert_eq!(
        summary["modern"]["protocol_version"], "2026-07-28",
        "{summary}"
    );
}

/// The filesystem MCP server from npm (`@modelcontextprotocol/server-filesystem`), if
/// installed: `JQJAIL_TEST_MCP_FILESYSTEM` names its executable (.ci/run installs it).
/// A name that is no file fails rather than skips.
fn filesystem_server() -> Option<String> {
    let path = std::env::var("JQJAIL_TEST_MCP_FILESYSTEM").ok()?;
    assert!(
        std::path::Path::new(&path).is_file(),
        "JQJAIL_TEST_MCP_FILESYSTEM={path} is not a file"
    );
    Some(path)
}

#[test]
fn the_wrapper_keeps_a_real_upstream_servers_large_result_as_a_hide() {
    let Some(python) = python_with_mcp() else {
        skip("the MCP Python SDK is not installed (see the first test here)");
        return;
    };
    let Some(fs_server) = filesystem_server() else {
        skip(
            "@modelcontextprotocol/server-filesystem is not installed (npm install it and name \
             its executable in JQJAIL_TEST_MCP_FILESYSTEM; .ci/run does both where npm is \
             reachable)",
        );
        return;
    };
    let d = Daemon::start();
    let summary = run_script(&python, "wrapper_client.py", &d, &[&fs_server]);
    assert!(
        summary["hide_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("upstream-")),
        "{summary}"
    );
}

/// A hostile upstream puts about 2 MB in each place of a result (an error's text, a
/// resource, structured content, an image, a JSON-RPC error message): none of it reaches the
/// client past the threshold; the large ones are kept as hides. (Before, all five got through
/// whole.) Its log message and tool-list notification reach the client.
#[test]
fn the_wrapper_keeps_every_large_upstream_result_out_of_the_context() {
    let Some(python) = python_with_mcp() else {
        skip("the MCP Python SDK is not installed (see the first test here)");
        return;
    };
    let d = Daemon::start();
    // Bytes that reached the client, per hostile result.
    let sizes = run_script(&python, "hostile_wrapper_client.py", &d, &[]);
    assert_eq!(sizes.as_object().map(|s| s.len()), Some(8), "{sizes}");
}

/// Issue 25, attack 4: with `--hide-over 1000`, page 1 (always 16 KiB) carried 15,025 bytes
/// of a hostile upstream's result; a `jq` of `.body` returned 90,000 bytes; 2 MB in `_meta`
/// passed untouched; a `jq` call of about 16 MB or more was never answered (rmcp dropped the
/// line). Now, for N in 64, 1000 and 16384, no reply carries more than N bytes of upstream or
/// filter output; a 20 MiB input is answered and a larger one refused at once.
#[test]
fn no_reply_carries_more_than_the_threshold_and_every_call_is_answered() {
    let Some(python) = python_with_mcp() else {
        skip("the MCP Python SDK is not installed (see the first test here)");
        return;
    };
    let d = Daemon::start();
    let report = run_script(&python, "threshold_client.py", &d, &[]);
    for n in ["64", "1000", "16384"] {
        let worst = report[n].as_u64().unwrap();
        assert!(worst <= n.parse().unwrap(), "{report}");
    }
}

/// The official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`), if installed:
/// `JQJAIL_TEST_MCP_TS_SDK` names the package's directory (.ci/run installs it). A name that
/// is no directory fails rather than skips.
#[test]
fn the_official_typescript_sdk_lists_calls_and_pages() {
    let Ok(sdk) = std::env::var("JQJAIL_TEST_MCP_TS_SDK") else {
        skip(
            "the MCP TypeScript SDK is not installed (npm install @modelcontextprotocol/sdk, and \
             name its directory in JQJAIL_TEST_MCP_TS_SDK; .ci/run does both where npm is \
             reachable)",
        );
        return;
    };
    assert!(
        std::path::Path::new(&sdk).join("package.json").is_file(),
        "JQJAIL_TEST_MCP_TS_SDK={sdk} is not an installed package"
    );
    let d = Daemon::start();
    let summary = run_script("node", "official_ts_client.mjs", &d, &[&sdk]);
    assert_eq!(summary["server"], "jqjail");
    let stats = d.client().stats().unwrap();
    assert_eq!(stats.outcome("MEMORY_LIMIT"), 1, "{:?}", stats.outcomes);
}

/// One JSON-RPC exchange with a `jqjail-mcp` child by hand, as a hostile client would: the
/// messages are ours to shape, so no SDK stands in between.
struct RawMcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl RawMcp {
    /// `jqjail-mcp --socket S EXTRA…`, initialized.
    fn start(d: &Daemon, extra: &[&str]) -> RawMcp {
        use std::process::Stdio;
        let mut child = Command::new(crate::util::MCP)
            .arg("--socket")
            .arg(&d.socket)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut mcp = RawMcp {
            child,
            stdin,
            stdout,
        };
        mcp.send(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
        assert_eq!(mcp.answer()["id"], 0);
        mcp.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        mcp
    }

    fn send(&mut self, line: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn answer(&mut self) -> serde_json::Value {
        use std::io::BufRead;
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:.300}"))
    }

    /// The text of the tool result answering `id`, and whether it is an error.
    fn tool_answer(&mut self, id: u64) -> (String, bool) {
        let answer = self.answer();
        assert_eq!(answer["id"], id, "{answer:.300}");
        let result = &answer["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        (text.to_string(), result["isError"] == true)
    }

    fn peak_rss(&self) -> u64 {
        crate::util::peak_rss(self.child.id() as i32)
    }
}

impl Drop for RawMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 34: a 42 MB message within the byte bound, made of many small values, drove
/// `jqjail mcp` to 3.9 GiB (rmcp builds a serde_json value of it before any handler sees it,
/// hundreds of bytes per small object). Now a message of more values than any call needs is
/// answered with a clear error before it is built, and one large string (the real use: a
/// document as `input`) costs a small multiple of its size.
#[test]
fn a_large_message_costs_a_small_multiple_of_its_size() {
    let d = Daemon::start();
    let mut mcp = RawMcp::start(&d, &[]);
    let base = mcp.peak_rss();
    // About 40 MB of `{"a":1}`: 5 million objects, under the 41 MiB message bound.
    let values = 5_000_000;
    let mut line = Vec::with_capacity(values * 8 + 200);
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"jq","arguments":{"filter":".","input":"1","pad":["#);
    for i in 0..values {
        if i > 0 {
            line.push(b',');
        }
        line.extend_from_slice(br#"{"a":1}"#);
    }
    line.extend_from_slice(b"]}}}");
    let size = line.len() as u64;
    mcp.send(&line);
    let (text, failed) = mcp.tool_answer(1);
    let peak = mcp.peak_rss();
    eprintln!(
        "a {size}-byte message of {values} small values: peak RSS {} MiB (from {} MiB)",
        peak >> 20,
        base >> 20
    );
    assert!(
        peak <= base + 2 * size,
        "peak RSS {peak} for a {size}-byte message"
    );
    assert!(failed, "{text:.300}");
    assert!(text.starts_with("INVALID_REQUEST: "), "{text:.300}");
    assert!(text.contains("values"), "{text:.300}");

    // The next attacker's: 2 MB of arrays nested 90 deep, each holding one (445 bytes parsed
    // per `[`, where the first charges counted 64): 440 MiB passed as within the bound.
    let nested = format!("{}1{}", "[".repeat(90), "]".repeat(90));
    let pad = format!("[{}]", vec![nested; 11_498].join(","));
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"jq","arguments":{{"filter":".","input":"1","pad":{pad}}}}}}}"#
    );
    mcp.send(call.as_bytes());
    let (text, failed) = mcp.tool_answer(3);
    let peak = mcp.peak_rss();
    eprintln!(
        "a {}-byte message of arrays nested 90 deep: peak RSS {} MiB",
        call.len(),
        peak >> 20
    );
    assert!(failed && text.contains("values"), "{text:.300}");
    assert!(peak <= base + (160 << 20), "peak RSS {peak}");

    // A document of 20 MiB as one string, the largest input the daemon takes, made of the
    // characters JSON escapes (a string of 10 million `"`: 40 MB as a message): answered, at
    // a small multiple of the message.
    let doc = format!("\"{}\"", "\\\"".repeat(10_000_000));
    let call = serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"jq","arguments":{"filter":"length","input":doc}}});
    let call = call.to_string();
    mcp.send(call.as_bytes());
    let (text, failed) = mcp.tool_answer(2);
    assert!(!failed, "{text:.300}");
    let peak = mcp.peak_rss();
    eprintln!(
        "a {}-byte call with a {}-byte input: peak RSS {} MiB",
        call.len(),
        doc.len(),
        peak >> 20
    );
    assert!(
        peak <= base + 5 * call.len() as u64,
        "peak RSS {peak} for a {}-byte call",
        call.len()
    );
}

/// Issue 34: an upstream server's answer passes the same bound as a client's message. One of
/// 40 MB of small objects, and one of 50 MB, are each a clear `UPSTREAM_ERROR` at a small
/// cost (rmcp read any line whole and built a value of it); the session goes on.
#[test]
fn a_large_upstream_answer_costs_a_small_multiple_of_the_bound() {
    if !crate::util::installed("python3") {
        crate::util::skip("python3 is not installed, to run tests/mcp/hostile_upstream.py");
        return;
    }
    let d = Daemon::start();
    let upstream = repo_file("tests/mcp/hostile_upstream.py");
    let mut mcp = RawMcp::start(
        &d,
        &["--upstream", "--", "python3", upstream.to_str().unwrap()],
    );
    mcp.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert_eq!(mcp.answer()["id"], 1);
    let base = mcp.peak_rss();
    for (id, tool, why) in [(2, "wide", "values"), (3, "long", "byte limit")] {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        );
        mcp.send(call.as_bytes());
        let (text, failed) = mcp.tool_answer(id);
        let peak = mcp.peak_rss();
        eprintln!(
            "{tool}: peak RSS {} MiB (from {} MiB): {text:.200}",
            peak >> 20,
            base >> 20
        );
        assert!(failed, "{text:.300}");
        assert!(text.starts_with("UPSTREAM_ERROR: "), "{text:.300}");
        assert!(text.contains(why), "{text:.300}");
        assert!(peak <= base + (160 << 20), "peak RSS {peak}");
    }
    mcp.send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"small","arguments":{}}}"#);
    let (text, failed) = mcp.tool_answer(4);
    assert!(!failed && text.contains("ok"), "{text}");
}

/// Issue 34, the second attacker: calls sent without waiting for answers were each read and
/// parsed at once, and held while they waited their turn (25 calls of 2 MB, 3.1 GiB). Now
/// the large calls read and not yet answered are bounded (64 MiB of their parsed cost and one
/// message), so sixteen of about 120 MiB each (parsed) are all answered, holding about one.
#[test]
fn pipelined_large_calls_are_held_back_not_all_parsed() {
    let d = Daemon::start_with(&["--timeout-ms", "500"], &[]);
    let mut mcp = RawMcp::start(&d, &[]);
    let base = mcp.peak_rss();
    // 3,000 arrays nested 90 deep: 540 KB, about 120 MiB once parsed.
    let nested = format!("{}1{}", "[".repeat(90), "]".repeat(90));
    let pad = format!("[{}]", vec![nested; 3_000].join(","));
    let calls = 16u64;
    let lines: Vec<String> = (1..=calls)
        .map(|id| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"jq","arguments":{{"filter":"until(false; .)","input":"1","pad":{pad}}}}}}}"#
            )
        })
        .collect();
    // A second handle on the pipe, written from a thread while this one reads the answers.
    let mut stdin = {
        use std::os::fd::AsFd;
        std::fs::File::from(mcp.stdin.as_fd().try_clone_to_owned().unwrap())
    };
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for line in lines {
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin.flush().unwrap();
    });
    let start = std::time::Instant::now();
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..calls {
        let answer = mcp.answer();
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.starts_with("TIMEOUT"), "{answer:.300}");
        answered.insert(answer["id"].as_u64().unwrap());
    }
    writer.join().unwrap();
    let peak = mcp.peak_rss();
    eprintln!(
        "{calls} pipelined calls of {} bytes: all answered in {:.1} s, peak RSS {} MiB (from {} MiB)",
        pad.len(),
        start.elapsed().as_secs_f64(),
        peak >> 20,
        base >> 20
    );
    assert_eq!(answered.len() as u64, calls);
    assert!(peak <= base + (320 << 20), "peak RSS {peak}");
}

/// The review of the bound above: a large call that rmcp cannot parse (a lone surrogate, as a
/// document cut inside an emoji gives) is dropped by rmcp with no answer, so its charge was
/// never given back and the session read nothing more, for ever. A charge no handler claims
/// now expires, and the next call is answered.
#[test]
fn a_large_call_rmcp_drops_does_not_stop_the_session() {
    let d = Daemon::start();
    let mut mcp = RawMcp::start(&d, &[]);
    // 24 MB of input after an escape: charged as decoded (about 96 MiB with the line), over
    // the 64 MiB that holds further lines back.
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"jq","arguments":{{"filter":".","input":"\ud83d{}"}}}}}}"#,
        "x".repeat(24_000_000)
    );
    mcp.send(call.as_bytes());
    let start = std::time::Instant::now();
    mcp.send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"jq","arguments":{"filter":".a","input":"{\"a\":5}"}}}"#);
    // A session that never reads again would block this read for ever: the server is killed
    // after 60 s, so the read ends and the test fails instead.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (done, pid) = (done.clone(), mcp.child.id() as i32);
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while std::time::Instant::now() < until {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            // SAFETY: kill with a pid this test started and has not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        })
    };
    let answer = mcp.answer();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    watchdog.join().unwrap();
    eprintln!(
        "the call after a dropped one was answered in {:.1} s: {answer:.200}",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(answer["id"], 2, "{answer:.300}");
    assert_eq!(answer["result"]["content"][0]["text"], "5", "{answer:.300}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
}

/// Issue 37: the `jq` tool's `input` was JSON text only; a model that sent the document as a
/// JSON value (as models often do, and as seed 001's tool takes) got ``INVALID_REQUEST:
/// `input` and `hide_id` are strings``. A value is taken as itself now, by every tool that
/// takes a document; a string is read as JSON text, and one that is not says so.
#[test]
fn the_tools_take_the_document_as_a_json_value_or_its_text() {
    let d = Daemon::start();
    let mut mcp = RawMcp::start(&d, &[]);
    let calls: [(&str, &str, bool); 6] = [
        (
            r#"{"name":"jq","arguments":{"filter":".a[1].b","input":{"a":[1,{"b":"é"}]}}}"#,
            r#""é""#,
            false,
        ),
        (
            r#"{"name":"jq","arguments":{"filter":"length","input":[1,2,3]}}"#,
            "3",
            false,
        ),
        (
            r#"{"name":"jq","arguments":{"filter":".","input":7}}"#,
            "7",
            false,
        ),
        (
            r#"{"name":"json_path","arguments":{"query":"a.b","input":{"a":{"b":true}}}}"#,
            "true",
            false,
        ),
        (
            r#"{"name":"jq","arguments":{"filter":".","input":"\"text\""}}"#,
            r#""text""#,
            false,
        ),
        (
            r#"{"name":"jq","arguments":{"filter":".","input":"plain words"}}"#,
            "INVALID_JSON: ",
            true,
        ),
    ];
    for (id, (params, want, error)) in calls.into_iter().enumerate() {
        let id = id as u64 + 1;
        mcp.send(
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
                .as_bytes(),
        );
        let (text, failed) = mcp.tool_answer(id);
        assert_eq!(failed, error, "{params}: {text}");
        assert!(text.starts_with(want), "{params}: {text}");
        if error {
            assert!(
                text.contains("`input` was a string, which is read as JSON text"),
                "{text}"
            );
        }
    }
    mcp.send(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"json_shape","arguments":{"input":{"k":[1,2]}}}}"#);
    let (shape, failed) = mcp.tool_answer(9);
    assert!(!failed && shape.contains("\"k\""), "{shape}");
}
