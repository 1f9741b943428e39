//! The worker: evaluates exactly one filter over one input under kernel-enforced limits,
//! answers on fd 3, and exits. It never touches the hide store, the supervisor's socket or
//! any file; after its start-up it cannot (STYLE §9, ARCHITECTURE.md).
//!
//! The worker is not a binary of its own: every jqjail executable that can host the
//! supervisor calls [`run_if_worker`] first, and the supervisor re-executes its own binary,
//! once as the zygote ([`jqjail_protocol::worker::ZYGOTE_ARG`], which forks the workers:
//! `zygote`) or for each worker ([`jqjail_protocol::worker::WORKER_ARG`]). So the worker is
//! always the exact code the supervisor was built with, found without a `PATH` lookup.

pub mod alloc;
pub mod confine;
pub mod engine;
pub mod isolate;
pub mod json;
pub mod output;
pub mod path;
pub mod seccomp;
pub mod serve;
pub mod value;
pub mod zygote;

pub use alloc::WorkerAlloc;
pub use bytes::Bytes;
pub use engine::{Engine, EvalError};
pub use serve::{evaluate, evaluate_with, run_if_worker};
