//! The worker: evaluates exactly one filter over one input under kernel-enforced limits,
//! answers on fd 3, and exits. It never touches the hide store, the supervisor's socket or
//! any file; after its start-up it cannot (ARCHITECTURE.md).
//!
//! The worker is not a binary of its own: every jqjail executable that can host the
//! supervisor calls [`run_if_worker`] first, and the supervisor re-executes its own binary,
//! once as the zygote ([`jqjail_protocol::worker::ZYGOTE_ARG`], which forks the workers:
//! `zygote`) or for each worker ([`jqjail_protocol::worker::WORKER_ARG`]). So the worker is
//! always the exact code the supervisor was built with, found without a `PATH` lookup.

pub mod alloc;
pub mod confine;
pub mod engine;
pub mod enter;
pub mod evaluate;
pub mod isolate;
pub mod jq;
pub mod json;
pub mod output;
pub mod path;
pub mod say;
pub mod seccomp;
pub mod serve;
pub mod shape;
pub mod text;
pub mod value;
pub mod zygote;

pub use alloc::WorkerAlloc;
pub use bytes::Bytes;
pub use engine::{Engine, EvalError};
pub use evaluate::{evaluate, evaluate_with};

use jqjail_protocol::worker::{EXIT_SETUP, StartupArgs, WORKER_ARG, ZYGOTE_ARG};

/// If this process was started as a worker (argv\[1\] is [`WORKER_ARG`]), serves one job and
/// exits; as the zygote ([`ZYGOTE_ARG`]), forks workers until the supervisor hangs up;
/// otherwise returns at once. Call it first thing in `main` of every binary that can host the
/// supervisor.
pub fn run_if_worker() {
    let mut args = std::env::args_os();
    let role = args.nth(1);
    let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    let code = match role.as_deref().and_then(|r| r.to_str()) {
        Some(WORKER_ARG) => match StartupArgs::parse(&rest) {
            Ok(startup) => serve::serve(&startup),
            Err(why) => {
                crate::say!("jqjail worker: {why}");
                EXIT_SETUP
            }
        },
        Some(ZYGOTE_ARG) => crate::zygote::run(&rest),
        _ => return,
    };
    // SAFETY: _exit ends the process without running destructors: the job's input value may
    // be hundreds of MiB of small allocations whose freeing would only delay the exit.
    unsafe { libc::_exit(code) }
}
