//! `jqjail mcp` driven by an MCP client jqjail did not write: the official MCP Python SDK
//! (PyPI `mcp`), through `tests/mcp/official_client.py`, against a real daemon. Skipped, with
//! the reason, where that SDK is not installed; .ci/run installs it and names its Python in
//! `JQJAIL_TEST_PYTHON`.

use crate::util::{CLI, Daemon, repo_file, skip_unreachable as skip};
use std::process::Command;

/// The Python that has the MCP SDK: `JQJAIL_TEST_PYTHON`, which must have it (a CI that names
/// one and lacks the SDK fails rather than skips), else `python3` if it has it.
fn python_with_mcp() -> Option<String> {
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
            .is_some_and(|id| id.starts_with("readtextfile-")),
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
