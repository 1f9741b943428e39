//! Supervisor ↔ worker messages, always bincode, on the worker's fd 3 (a Unix socketpair).
//!
//! The exchange, once per worker:
//! 1. worker → supervisor: a frame holding [`Ready`], after its confinement is in place;
//! 2. supervisor → worker: a frame holding a [`Job`], then exactly `Job::input_bytes` raw
//!    input bytes (not framed, not copied into the job);
//! 3. worker → supervisor: a frame holding a [`Reply`]; then the worker exits.
//!
//! The worker dies instead of replying in the cases below; the supervisor explains those from
//! the exit status.

use crate::error::ErrorCode;
use serde::{Deserialize, Serialize};

/// The worker's inherited fd for the socketpair.
pub const WORKER_FD: i32 = 3;

/// argv\[1\] that makes a jqjail executable act as a worker.
pub const WORKER_ARG: &str = "--jqjail-worker";

/// argv\[1\] that makes a jqjail executable act as the worker zygote: a single-threaded
/// process, exec'd once, that forks workers on request (`jqjail_worker::zygote`). It takes
/// `parent=PID`, then optionally [`ZYGOTE_LEAVES_ROOT`] and [`ZYGOTE_FILE_CODE`] in that
/// order, and its control socket (SOCK_SEQPACKET) on fd 3.
pub const ZYGOTE_ARG: &str = "--jqjail-zygote";

/// The zygote's optional last argument: it does not make an empty root of its own, and each
/// worker it forks makes its own (given after a zygote answered `lost`, [`EXIT_ZYGOTE_LOST`]).
pub const ZYGOTE_LEAVES_ROOT: &str = "root=workers";

/// The zygote's optional last argument: it leaves its machine code in the executable's file
/// pages rather than move it into transparent huge pages (`jqjail_worker::text`), so that a
/// profiler can name it (`--code-pages file`).
pub const ZYGOTE_FILE_CODE: &str = "code=file";

/// Exit status of a worker whose allocation failed (the heap limit).
pub const EXIT_MEMORY: i32 = 42;
/// Exit status of a worker that received SIGXCPU (the CPU-time limit).
pub const EXIT_CPU: i32 = 43;
/// Exit status of a worker whose set-up failed before it was ready; stderr says why.
pub const EXIT_SETUP: i32 = 44;
/// Exit status of a zygote that, failing to enter its empty root, could not go back to its
/// mount namespace, root and working directory (out of a chroot, say); it answers `lost WHY`
/// first. No later zygote of the same daemon tries: they are started with
/// [`ZYGOTE_LEAVES_ROOT`].
pub const EXIT_ZYGOTE_LOST: i32 = 45;

/// Largest [`Job`] frame: the filter plus room for the other fields.
pub const fn max_job_frame_bytes(max_filter_bytes: u64) -> u64 {
    // The job carries what the request's frame carried: the filter and its arguments.
    crate::frame::max_request_frame_bytes(max_filter_bytes) + 4096
}

/// Largest [`Reply`] frame: the output plus room for an error message.
pub const fn max_reply_frame_bytes(max_output_bytes: u64) -> u64 {
    max_output_bytes + 64 * 1024
}

/// Largest [`Started`] frame.
pub const MAX_READY_FRAME_BYTES: u64 = 4096;

/// The first message a worker sends on its socket: ready for its job, or why its set-up
/// stopped (the supervisor turns off an isolation part the host refuses by its
/// [`SetupFailure::isolation_part`], never by the text of a message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Started {
    /// Confined, under its allowlist, waiting for its job.
    Ready(Ready),
    /// A set-up step failed; the worker exits without reading a job.
    Failed(SetupFailure),
}

/// The worker is confined and waiting for its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// Its process id, as it sees it.
    pub pid: u32,
}

/// A set-up step that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupFailure {
    /// The step, as the worker's start-up recipe names it (e.g. `"prctl(PR_SET_DUMPABLE)"`).
    pub step: String,
    /// The isolation part the host refused (one of [`Isolation::NAMES`]), if that is what
    /// failed.
    pub isolation_part: Option<String>,
    /// The OS error number, where there is one.
    pub errno: Option<i32>,
    /// The whole message, for logs (at most [`MAX_SETUP_MESSAGE_BYTES`]).
    pub message: String,
}

/// Longest [`SetupFailure::message`] a worker sends.
pub const MAX_SETUP_MESSAGE_BYTES: usize = 1024;

/// One evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// The filter text.
    pub filter: String,
    /// Its language.
    pub lang: crate::Lang,
    /// Length of the raw input that follows the frame.
    pub input_bytes: u64,
    /// Deepest input nesting accepted.
    pub max_depth: u32,
    /// Largest output text.
    pub max_output_bytes: u64,
    /// Values bound in the filter (`$name`, `$ARGS`), as JSON texts the worker parses.
    pub args: crate::message::Args,
    /// The form of the answer text.
    pub outputs: crate::message::Outputs,
    /// What the input bytes are: one value, or a stream of values for `input` and `inputs`.
    pub inputs: Inputs,
}

/// What a job's input bytes are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Inputs {
    /// Exactly one JSON value, the filter's input.
    #[default]
    One,
    /// Zero or more JSON values that `input` and `inputs` read; with `null_input` the filter
    /// runs once on `null`, else once per value they have not read.
    Values {
        /// jq's `-n`.
        null_input: bool,
    },
}

/// The worker's answer, with what it cost so far. The supervisor answers its client from
/// this and reaps the worker afterwards, off the request's path; the usage is the worker's own
/// `getrusage(RUSAGE_SELF)` just before replying.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The output or the error.
    pub outcome: Outcome,
    /// User + system CPU time, microseconds.
    pub cpu_us: u64,
    /// Peak resident set size, bytes.
    pub peak_rss_bytes: u64,
}

/// What the evaluation came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The output text.
    Output(String),
    /// An error found by the worker.
    Error(WorkerError),
}

/// The codes a worker's own error may carry: its job's input, filter, evaluation and output,
/// and its own failures. The supervisor answers a reply with any other code (a limit the
/// kernel enforces, an admission or store refusal, a breach of the sandbox) as
/// `WORKER_CRASHED`: a worker may run an attacker's code, and those codes are the
/// supervisor's to give.
pub const WORKER_ERRORS: [ErrorCode; 16] = [
    ErrorCode::InputTooLarge,
    ErrorCode::InputTooDeep,
    ErrorCode::OutputTooLarge,
    ErrorCode::InvalidJson,
    ErrorCode::CompileError,
    ErrorCode::RuntimeError,
    ErrorCode::NonJsonOutput,
    ErrorCode::WorkerCrashed,
    ErrorCode::ProtocolError,
    ErrorCode::InvalidRequest,
    ErrorCode::Internal,
    ErrorCode::MissingProperty,
    ErrorCode::TypeMismatch,
    ErrorCode::IndexOutOfBounds,
    ErrorCode::InvalidQuery,
    ErrorCode::ProjectionTooLarge,
];

/// An error found by the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerError {
    /// Stable code.
    pub code: ErrorCode,
    /// Message naming the limit and the value where there is one.
    pub message: String,
    /// The limit hit, if any.
    pub limit: Option<u64>,
    /// The value that hit it, if known.
    pub actual: Option<u64>,
}

/// What a worker needs to know before its job arrives, passed as `key=value` arguments after
/// [`WORKER_ARG`] (the environment is empty by design).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupArgs {
    /// The supervisor's pid: the worker exits if its parent is already another process.
    pub parent_pid: u32,
    /// Heap allowance above the worker's baseline (RLIMIT_DATA).
    pub heap_bytes: u64,
    /// CPU-time soft limit in seconds (RLIMIT_CPU; the hard limit is one more).
    pub cpu_seconds: u64,
    /// Largest input the worker accepts.
    pub max_input_bytes: u64,
    /// Longest filter the worker accepts.
    pub max_filter_bytes: u64,
    /// Which namespaces and root isolation to apply, as [`Isolation`] bits.
    pub isolation: Isolation,
    /// The uid and gid a worker started as root takes, in one `setresuid`: a uid no other
    /// process on the host has (the supervisor draws it from its configured range).
    pub uid: u32,
    /// Whether the worker runs its warm-up job before it says it is ready. The warm-up moves
    /// the first-touch page faults of a job off the request's path, while the worker waits in
    /// the pool; a worker that a job will take as soon as it is ready (a pool run dry under
    /// load) gains nothing from it but extra CPU (the job faults in what it needs itself).
    pub warm_up: bool,
}

/// Defence-in-depth isolation a worker applies at start-up, beyond rlimits and seccomp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Isolation {
    /// A new user namespace (the worker is root only inside it, mapped to an unprivileged uid).
    pub user: bool,
    /// New IPC and UTS namespaces.
    pub ipc_uts: bool,
    /// A new, empty network namespace.
    pub net: bool,
    /// A new mount namespace whose root is an empty, read-only tmpfs.
    pub empty_root: bool,
}

impl Isolation {
    /// Everything off.
    pub const NONE: Isolation = Isolation {
        user: false,
        ipc_uts: false,
        net: false,
        empty_root: false,
    };

    /// The names of the parts, as logs and the worker's errors spell them.
    pub const NAMES: [&'static str; 4] = ["user", "ipc_uts", "net", "empty_root"];

    fn to_bits(self) -> u64 {
        [self.user, self.ipc_uts, self.net, self.empty_root]
            .iter()
            .enumerate()
            .map(|(i, on)| u64::from(*on) << i)
            .sum()
    }

    fn from_bits(bits: u64) -> Isolation {
        let on = |i: u32| bits & (1 << i) != 0;
        Isolation {
            user: on(0),
            ipc_uts: on(1),
            net: on(2),
            empty_root: on(3),
        }
    }

    /// This set with the part called `name` turned off.
    pub fn without(self, name: &str) -> Isolation {
        let mut out = self;
        match name {
            "user" => out.user = false,
            "ipc_uts" => out.ipc_uts = false,
            "net" => out.net = false,
            "empty_root" => out.empty_root = false,
            _ => {}
        }
        out
    }

    /// Whether the part called `name` is on.
    pub fn has(self, name: &str) -> bool {
        self.without(name) != self
    }
}

impl StartupArgs {
    const KEYS: [&'static str; 8] = [
        "parent",
        "heap",
        "cpu",
        "input",
        "filter",
        "isolation",
        "uid",
        "warm",
    ];

    /// The arguments that follow [`WORKER_ARG`].
    pub fn to_args(&self) -> Vec<String> {
        let values = [
            u64::from(self.parent_pid),
            self.heap_bytes,
            self.cpu_seconds,
            self.max_input_bytes,
            self.max_filter_bytes,
            self.isolation.to_bits(),
            u64::from(self.uid),
            u64::from(self.warm_up),
        ];
        Self::KEYS
            .iter()
            .zip(values)
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// Parses the arguments that follow [`WORKER_ARG`].
    /// Allocates nothing unless it fails (the zygote parses each request's lines as they
    /// come, `jqjail_worker::zygote`).
    pub fn parse<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Result<StartupArgs, String> {
        let mut values = [None; Self::KEYS.len()];
        for arg in args {
            let arg = arg.as_ref();
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("worker argument `{arg}` is not key=value"))?;
            let slot = Self::KEYS
                .iter()
                .position(|k| *k == key)
                .ok_or_else(|| format!("unknown worker argument `{key}`"))?;
            let value = value
                .parse::<u64>()
                .map_err(|e| format!("worker argument `{arg}`: {e}"))?;
            values[slot] = Some(value);
        }
        let get = |i: usize| {
            values[i].ok_or_else(|| format!("missing worker argument `{}`", Self::KEYS[i]))
        };
        Ok(StartupArgs {
            parent_pid: u32::try_from(get(0)?).map_err(|e| format!("parent pid: {e}"))?,
            heap_bytes: get(1)?,
            cpu_seconds: get(2)?,
            max_input_bytes: get(3)?,
            max_filter_bytes: get(4)?,
            isolation: Isolation::from_bits(get(5)?),
            uid: u32::try_from(get(6)?).map_err(|e| format!("uid: {e}"))?,
            // Absent, as from a daemon older than the key that runs this binary after an
            // upgrade in place: the warm-up, as before the key.
            warm_up: match values[7] {
                None | Some(1) => true,
                Some(0) => false,
                Some(other) => return Err(format!("worker argument `warm={other}`: not 0 or 1")),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_args_round_trip() {
        let args = StartupArgs {
            parent_pid: 7,
            heap_bytes: 1 << 28,
            cpu_seconds: 6,
            max_input_bytes: 20 << 20,
            max_filter_bytes: 65536,
            isolation: Isolation {
                user: true,
                ipc_uts: false,
                net: true,
                empty_root: true,
            },
            uid: 1_889_861_632,
            warm_up: true,
        };
        assert_eq!(StartupArgs::parse(args.to_args()), Ok(args));
        let cold = StartupArgs {
            warm_up: false,
            ..args
        };
        assert_eq!(StartupArgs::parse(cold.to_args()), Ok(cold));
        let mut two = args.to_args();
        *two.last_mut().unwrap() = "warm=2".into();
        assert!(StartupArgs::parse(&two).is_err());
        let mut before = cold.to_args();
        before.pop();
        assert_eq!(StartupArgs::parse(&before), Ok(args));
        assert!(StartupArgs::parse(["parent=1"]).is_err());
        assert!(StartupArgs::parse(["bogus=1"]).is_err());
    }
}
