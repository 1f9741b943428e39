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

/// The filesystem MCP server from npm (`@modelcontextprotocol/server-filesystem`), if
/// installed: `JQJAIL_TEST_MCP_FILESYSTEM` names its executable (.ci/run installs it).
fn filesystem_server() -> Option<String> {
    std::env::var("JQJAIL_TEST_MCP_FILESYSTEM")
        .ok()
        .filter(|p| std::path::Path::new(p).is_file())
}

#[test]
fn the_wrapper_keeps_a_real_upstream_servers_large_result_as_a_hide() {
    let Some(python) = python_with_mcp() else {
        eprintln!("skipped: the MCP Python SDK is not installed (see the test above)");
        return;
    };
    let Some(fs_server) = filesystem_server() else {
        eprintln!(
            "skipped: @modelcontextprotocol/server-filesystem is not installed (npm install it \
             and name its executable in JQJAIL_TEST_MCP_FILESYSTEM; .ci/run does both)"
        );
        return;
    };
    let d = Daemon::start();
    let out = Command::new(&python)
        .arg(repo_file("tests/mcp/wrapper_client.py"))
        .arg(CLI)
        .arg(&d.socket)
        .arg(&fs_server)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("official MCP Python SDK through the wrapper: {stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
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
        eprintln!("skipped: the MCP Python SDK is not installed (see the first test here)");
        return;
    };
    let d = Daemon::start();
    let out = Command::new(&python)
        .arg(repo_file("tests/mcp/hostile_wrapper_client.py"))
        .arg(CLI)
        .arg(&d.socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "bytes that reached the client per hostile result: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
