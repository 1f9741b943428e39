//! `jqjail-mcp`: the MCP server (`jqjail mcp` runs it). A binary of its own so that the MCP SDK
//! and the tokio runtime it needs do not slow every `jqjail` command's start.

use std::process::ExitCode;

fn main() -> ExitCode {
    jqjail_client::mcp::main_with_args(std::env::args_os())
}
