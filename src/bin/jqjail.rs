//! `jqjail`: the command line. A client only, so that it starts in about the time of
//! `/bin/true`: the daemon, its workers, jaq, SQLite and tokio live in `jqjaild`, which the
//! CLI starts as the user's private daemon when no daemon is running (it looks for `jqjaild`
//! beside this executable first).

use std::process::ExitCode;

fn main() -> ExitCode {
    jqjail_client::cli::main_with_args(std::env::args_os())
}
