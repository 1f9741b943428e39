//! `jqjail mcp` driven by an MCP client jqjail did not write: the official MCP Python SDK
//! (PyPI `mcp`), through `tests/mcp/official_client.py`, against a real daemon. Skipped, with
//! the reason, where that SDK is not installed; .ci/run installs it and names its Python in
//! `JQJAIL_TEST_PYTHON`.

use crate::util::{CLI, Daemon, repo_file};
use std::process::Command;

/// The Python that has the MCP SDK, if any.
fn python_with_mcp() -> Option<String> {
    let python = std::env::var("JQJAIL_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import mcp.client.stdio"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

#[test]
fn the_official_python_sdk_lists_calls_pages_and_gets_tool_errors() {
    let Some(python) = python_with_mcp() else {
        eprintln!(
            "skipped: the MCP Python SDK is not installed (pip install mcp==2.3.0, and name that \
             Python in JQJAIL_TEST_PYTHON; .ci/run does both)"
        );
        return;
    };
    let d = Daemon::start();
    let out = Command::new(&python)
        .arg(repo_file("tests/mcp/official_client.py"))
        .arg(CLI)
        .arg(&d.socket)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The summary names the protocol version negotiated (the closing notes quote it).
    eprintln!("official MCP Python SDK: {stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["server"], "jqjail");
    // The daemon counted the work: the MCP server is only a client of it.
    let stats = d.client().stats().unwrap();
    let count = |code: &str| {
        stats
            .outcomes
            .iter()
            .find(|(c, _)| c == code)
            .map_or(0, |(_, n)| *n)
    };
    assert!(count("OK") >= 10, "{:?}", stats.outcomes);
    assert_eq!(count("MEMORY_LIMIT"), 1, "{:?}", stats.outcomes);
}
