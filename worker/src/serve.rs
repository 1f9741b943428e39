//! A worker's life: confine, get ready, take one job, answer, exit.

use crate::engine::Engine;
use crate::evaluate::evaluate;
use bytes::Bytes;
use jqjail_protocol::frame::{read_frame, write_frame};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::worker::{
    EXIT_SETUP, Job, Outcome, Reply, StartupArgs, WorkerError, max_job_frame_bytes,
};
use jqjail_protocol::{Encoding, ErrorCode};
use std::fs::File;
use std::io::Read;

/// Prepares the engine, confines the process, installs the seccomp allowlist and announces
/// readiness: everything an exec'd worker does before its job. On failure, returns the exit
/// status. Public so that the escape probes apply exactly this sequence.
pub fn start(startup: &StartupArgs) -> Result<(Engine, File), i32> {
    // The jaq prelude is parsed first, like the zygote does before it forks: the heap baseline
    // that RLIMIT_DATA is set above then includes it in both kinds of worker.
    let engine = Engine::new();
    let sock = start_with(&engine, startup)?;
    Ok((engine, sock))
}

/// [`start`] with the engine already built (a worker forked by the zygote): the whole
/// start-up recipe of `crate::enter`. Returns fd 3, the job socket; on failure, the failure has
/// been reported to the supervisor (and to stderr) and the exit status is returned.
pub fn start_with(engine: &Engine, startup: &StartupArgs) -> Result<File, i32> {
    crate::enter::enter(engine, startup).map_err(|failure| {
        crate::say!("jqjail worker: {}", failure.message);
        crate::enter::report(&failure);
        EXIT_SETUP
    })
}

/// The life of an exec'd worker: the engine first (as [`start`] builds it), then as forked.
pub(crate) fn serve(startup: &StartupArgs) -> i32 {
    serve_forked(&Engine::new(), startup)
}

/// The life of a worker forked by the zygote, from its confinement to its exit status.
pub(crate) fn serve_forked(engine: &Engine, startup: &StartupArgs) -> i32 {
    // Before confinement: the hook is set with the kernel's whole interface still there.
    keep_panics_quiet();
    match start_with(engine, startup) {
        Ok(sock) => serve_job(engine, sock, startup),
        Err(code) => code,
    }
}

/// Reads the one job from `sock`, evaluates it and replies; returns the exit status.
fn serve_job(engine: &Engine, mut sock: File, startup: &StartupArgs) -> i32 {
    let outcome = match read_job(&mut sock, startup) {
        Ok((job, input)) => {
            let evaluated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                evaluate(engine, &job, &input)
            }));
            match evaluated {
                Ok(Ok(output)) => Outcome::Output(output),
                Ok(Err(e)) => Outcome::Error(WorkerError {
                    code: e.code,
                    message: e.message,
                    limit: e.limit,
                    actual: e.actual,
                }),
                Err(_) if let Some(forged) = claimed(&last_panic()) => Outcome::Error(forged),
                Err(_) => Outcome::Error(WorkerError {
                    code: ErrorCode::WorkerCrashed,
                    message: format!(
                        "jqjail's filter engine failed on this filter: an internal error of jqjail, not a fault of the filter or a breach of the sandbox (please report it with the filter): {}",
                        last_panic()
                    ),
                    limit: None,
                    actual: None,
                }),
            }
        }
        Err(e) => Outcome::Error(e),
    };
    let (cpu_us, peak_rss_bytes) = own_usage();
    let reply = Reply {
        outcome,
        cpu_us,
        peak_rss_bytes,
    };
    match Encoding::Bincode.encode(&reply) {
        Ok(body) => match write_frame(&mut sock, &body) {
            Ok(()) => {
                #[cfg(debug_assertions)]
                if STAY.load(std::sync::atomic::Ordering::Relaxed) {
                    loop {
                        std::hint::spin_loop();
                    }
                }
                // Exit only once the supervisor closes the socket: the exit's work then comes
                // after the answer is on its way (`pool::LINGER` in the supervisor).
                let mut byte = [0u8; 1];
                while matches!(sock.read(&mut byte), Ok(1)) {}
                0
            }
            Err(e) => {
                crate::say!("jqjail worker: cannot send reply: {e}");
                EXIT_SETUP
            }
        },
        Err(e) => {
            crate::say!("jqjail worker: cannot encode reply: {e}");
            EXIT_SETUP
        }
    }
}

/// This process's CPU time (µs) and peak RSS (bytes) so far.
fn own_usage() -> (u64, u64) {
    // SAFETY: all-zero bytes are a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one `rusage` into the local we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return (0, 0);
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (
        us(usage.ru_utime) + us(usage.ru_stime),
        usage.ru_maxrss as u64 * 1024,
    )
}

fn protocol_error(message: String) -> WorkerError {
    WorkerError {
        code: ErrorCode::ProtocolError,
        message,
        limit: None,
        actual: None,
    }
}

/// Reads the job frame and exactly its input bytes, checking both lengths first.
pub fn read_job(sock: &mut File, startup: &StartupArgs) -> Result<(Job, Bytes), WorkerError> {
    let frame = read_frame(sock, max_job_frame_bytes(startup.max_filter_bytes))
        .map_err(|e| protocol_error(format!("reading the job: {e}")))?;
    let job: Job = Encoding::Bincode
        .decode(&frame)
        .map_err(|e| protocol_error(format!("decoding the job: {e}")))?;
    if job.input_bytes > startup.max_input_bytes {
        return Err(WorkerError {
            code: ErrorCode::InputTooLarge,
            message: format!(
                "input is {} bytes, over the {}-byte limit",
                grouped(job.input_bytes),
                grouped(startup.max_input_bytes)
            ),
            limit: Some(startup.max_input_bytes),
            actual: Some(job.input_bytes),
        });
    }
    let len = usize::try_from(job.input_bytes)
        .map_err(|_| protocol_error("input length does not fit in memory".into()))?;
    let mut input = vec![0u8; len];
    sock.read_exact(&mut input)
        .map_err(|e| protocol_error(format!("reading {len} input bytes: {e}")))?;
    Ok((job, Bytes::from(input)))
}

/// The message of the last panic, kept by the hook [`keep_panics_quiet`] sets.
static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// A panic hook that keeps the panic's message and location for the reply and does nothing
/// else: the default hook's work (stderr's lock, a backtrace's environment lookup) is not
/// what the seccomp allowlist is for, and a panic is then answered as the engine's bug it is,
/// never taken for a breach of the sandbox.
fn keep_panics_quiet() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = format!("{what}{at}");
        }
    }));
}

/// In debug builds, set by a test's `_jqjail_test_stay`: the worker spins after its answer
/// instead of exiting, as a worker running an attacker's code could.
#[cfg(debug_assertions)]
pub(crate) static STAY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What `_jqjail_test_claim` panics with, before the code it claims.
#[cfg(debug_assertions)]
pub(crate) const CLAIM: &str = "jqjail test claim: ";

/// In debug builds, the error a test's `_jqjail_test_claim` makes this worker answer: any code
/// at all, as a worker running an attacker's code could send. Release builds have none.
fn claimed(panic: &str) -> Option<WorkerError> {
    #[cfg(debug_assertions)]
    if let Some(code) = panic.strip_prefix(CLAIM) {
        // The hook appends where the panic was: the code is the first word.
        let code = code.split_whitespace().next()?.trim_matches('"');
        let code = ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)?;
        return Some(WorkerError {
            code,
            message: format!("a worker claims {code}"),
            limit: None,
            actual: None,
        });
    }
    let _ = panic;
    None
}

fn last_panic() -> String {
    LAST_PANIC.lock().map(|m| m.clone()).unwrap_or_default()
}
