//! A worker's life: confine, get ready, take one job, answer, exit.

use crate::confine::confine;
use crate::engine::{Engine, EvalError};
use crate::json::ScanError;
use crate::value::{self, Refusal};
use bytes::Bytes;
use jqjail_protocol::frame::{read_frame, write_frame};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::worker::{
    EXIT_SETUP, Job, Outcome, Ready, Reply, StartupArgs, WORKER_ARG, WORKER_FD, WorkerError,
    ZYGOTE_ARG, max_job_frame_bytes,
};
use jqjail_protocol::{Encoding, ErrorCode, Lang};
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;

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
            Ok(startup) => serve(&startup),
            Err(why) => {
                eprintln!("jqjail worker: {why}");
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

/// [`start`] with the engine already built (a worker forked by the zygote): confinement, then
/// [`arm`]. Returns fd 3, the job socket.
pub fn start_with(engine: &Engine, startup: &StartupArgs) -> Result<File, i32> {
    if let Err(why) = confine(startup) {
        eprintln!("jqjail worker: confinement failed: {why}");
        return Err(EXIT_SETUP);
    }
    arm(engine)
}

/// The steps after confinement, with the engine built: std's per-thread hash keys (which
/// would otherwise need getrandom the first time a filter builds a HashMap, e.g. in regex
/// functions), the seccomp allowlist, the warm-up job, and the ready message on fd 3.
fn arm(engine: &Engine) -> Result<File, i32> {
    let _ = std::collections::hash_map::RandomState::new();
    if let Err(why) = crate::seccomp::install() {
        eprintln!("jqjail worker: installing the seccomp allowlist failed: {why}");
        return Err(EXIT_SETUP);
    }
    warm_up(engine);
    // A File, not a UnixStream: std's socket I/O uses send/recv (sendto/recvfrom), which the
    // allowlist does not contain; a File uses plain read/write.
    // SAFETY: fd 3 was checked to be a socket by `confine` and nothing else owns it.
    let mut sock = unsafe { File::from_raw_fd(WORKER_FD) };
    let ready = Ready {
        pid: std::process::id(),
    };
    let sent = Encoding::Bincode
        .encode(&ready)
        .map_err(|e| e.to_string())
        .and_then(|body| write_frame(&mut sock, &body).map_err(|e| e.to_string()));
    if let Err(why) = sent {
        eprintln!("jqjail worker: cannot announce readiness: {why}");
        return Err(EXIT_SETUP);
    }
    Ok(sock)
}

/// Runs a small job before the real one, under the allowlist: the compiler, the input scan
/// and parser, the evaluator and the writer fault in their code and heap pages now, while the
/// worker waits in the pool, instead of on the request's path (about a third of a small
/// request's round trip). Nothing of it reaches the job: jaq has no global state, and the
/// warm-up's values are dropped or, like every parsed input, leaked.
pub(crate) fn warm_up(engine: &Engine) {
    let job = Job {
        filter: ".[0] | {id, title: (.title | ascii_downcase), n: (.labels | length)}".into(),
        lang: Lang::Jq,
        input_bytes: 0,
        max_depth: 16,
        max_output_bytes: 4096,
    };
    let input =
        Bytes::from_static(br#"[{"id":1,"title":"Warm Up","labels":["a","b"],"body":"x\u00e9"}]"#);
    let _ = evaluate(engine, &job, &input);
}

/// The life of an exec'd worker: the engine first (as [`start`] builds it), then as forked.
fn serve(startup: &StartupArgs) -> i32 {
    serve_forked(&Engine::new(), startup)
}

/// The life of a worker forked by the zygote, from its confinement to its exit status.
pub(crate) fn serve_forked(engine: &Engine, startup: &StartupArgs) -> i32 {
    match start_with(engine, startup) {
        Ok(sock) => serve_job(engine, sock, startup),
        Err(code) => code,
    }
}

/// Reads the one job from `sock`, evaluates it and replies; returns the exit status.
fn serve_job(engine: &Engine, mut sock: File, startup: &StartupArgs) -> i32 {
    let outcome = match read_job(&mut sock, startup) {
        Ok((job, input)) => match evaluate(engine, &job, &input) {
            Ok(output) => Outcome::Output(output),
            Err(e) => Outcome::Error(WorkerError {
                code: e.code,
                message: e.message,
                limit: e.limit,
                actual: e.actual,
            }),
        },
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
            Ok(()) => 0,
            Err(e) => {
                eprintln!("jqjail worker: cannot send reply: {e}");
                EXIT_SETUP
            }
        },
        Err(e) => {
            eprintln!("jqjail worker: cannot encode reply: {e}");
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

/// Compiles, checks the input, parses it and runs the filter: the whole evaluation of one job.
/// Public so that tests and the benchmark evaluate in-process exactly as a worker does.
///
/// The parsed input shares `input`'s bytes (see [`crate::value`]).
///
/// The parsed input is deliberately never freed: a worker exits right after replying, and
/// freeing a parsed 20 MiB document costs about 300 ms with glibc malloc
/// (research/perf-baselines.md). A long-lived caller leaks each input's parsed form.
pub fn evaluate(engine: &Engine, job: &Job, input: &Bytes) -> Result<String, EvalError> {
    evaluate_with(engine, job, input, std::mem::forget)
}

/// [`evaluate`], handing the parsed input to `keep` instead of leaking it: the benchmark
/// frees it after its timer stops, so that its floor neither pays for the free nor grows.
pub fn evaluate_with(
    engine: &Engine,
    job: &Job,
    input: &Bytes,
    keep: impl FnOnce(jaq_json::Val),
) -> Result<String, EvalError> {
    match job.lang {
        Lang::Jq => {
            let filter = engine.compile(&job.filter)?;
            let value = parse_input(input, job.max_depth)?;
            // The run gets a reference-counted handle; the original keeps the document alive
            // past the end of the run, so that nothing frees it.
            let result = engine.run(&filter, value.clone(), job.max_output_bytes);
            keep(value);
            result
        }
        Lang::Path => {
            let query = crate::path::parse(&job.filter)?;
            let value = parse_input(input, job.max_depth.min(crate::path::MAX_INPUT_DEPTH))?;
            let answer = crate::path::evaluate(&query, &value);
            keep(value);
            let answer = answer?;
            crate::engine::render(answer, job.max_output_bytes)
        }
    }
}

/// Checks the input strictly (UTF-8, RFC 8259, depth) and parses it into a jaq value.
fn parse_input(input: &Bytes, max_depth: u32) -> Result<jaq_json::Val, EvalError> {
    let parsed = crate::alloc::with_parse_arena(input.len(), || value::parse(input, max_depth));
    parsed.map_err(|refusal| match refusal {
        Refusal::Scan(e) => {
            let (code, limit, actual) = match e {
                ScanError::TooDeep { limit, .. } => (
                    ErrorCode::InputTooDeep,
                    Some(u64::from(limit)),
                    Some(u64::from(limit) + 1),
                ),
                _ => (ErrorCode::InvalidJson, None, None),
            };
            EvalError {
                code,
                message: e.describe(input),
                limit,
                actual,
            }
        }
        Refusal::Jaq(e) => EvalError {
            code: ErrorCode::InvalidJson,
            message: format!("input is not valid JSON: {e}"),
            limit: None,
            actual: None,
        },
    })
}
