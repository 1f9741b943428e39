//! `jqjail`: the command line. The same executable also serves as the daemon
//! (`jqjail daemon …`, used for the private daemon) and as its worker, so a single
//! `cargo run --bin jqjail` build has everything it needs.

use std::process::ExitCode;

#[global_allocator]
static ALLOC: jqjail_worker::WorkerAlloc = jqjail_worker::WorkerAlloc;

fn main() -> ExitCode {
    jqjail_worker::run_if_worker();
    let mut args: Vec<_> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == jqjail_client::cli::DAEMON_SUBCOMMAND)
    {
        args.remove(1);
        return jqjail_supervisor::main_with_args(args);
    }
    jqjail_client::cli::main_with_args(args)
}
