//! `jqjaild`: the daemon. The same executable also serves as its own worker.

use std::process::ExitCode;

#[global_allocator]
static ALLOC: jqjail_worker::WorkerAlloc = jqjail_worker::WorkerAlloc;

fn main() -> ExitCode {
    jqjail_worker::run_if_worker();
    jqjail_supervisor::main_with_args(std::env::args_os())
}
