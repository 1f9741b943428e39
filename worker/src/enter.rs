//! A worker's start-up as one ordered recipe, from the process it starts as to a confined
//! worker waiting for its job (the firecracker jailer's `Env::run` is the model). Each step
//! narrows what the process can do before the next; a failure stops the recipe and is sent to
//! the supervisor typed ([`SetupFailure`]), never to be told apart by its text.
//!
//! Before this, in the zygote, once for every worker it forks (`crate::zygote::run_with`):
//! descriptors but fd 3 closed, environment emptied, parent-death signal and parent check,
//! process name, least privilege (no_new_privs, five capabilities), the jaq prelude parsed
//! and one evaluation run; as root, at the first request for one, an empty root of its own
//! (`crate::isolate::enter_zygote_root`), a copy of which each worker's mount namespace
//! starts as. An exec'd worker parses the prelude itself first thing
//! (`crate::serve::start`), so its heap baseline matches.
//!
//! Then, in each worker, [`enter`]:
//! 1. the confinement of `crate::confine::confine`, in its own order (not dumpable first;
//!    namespaces and the empty root while still privileged; rlimits after the last file is
//!    opened; privileges dropped in one `setresuid` to the worker's own uid; the parent-death
//!    signal last, since every credential change clears it);
//! 2. std's hash keys made ready: an exec'd worker draws them here, its last use of
//!    `getrandom`, which the allowlist forbids; a forked worker already holds the zygote's
//!    (drawn once per zygote, as ARCHITECTURE.md's guarantees say);
//! 3. the seccomp allowlist (`crate::seccomp::install`, with no_new_privs): from here on
//!    the worker can make only its 17 calls;
//! 4. a warm-up evaluation under the allowlist, so the job's path faults in nothing new and
//!    every call the evaluator makes is shown to be allowed; skipped when the supervisor
//!    says a job will take this worker as soon as it is ready (`StartupArgs::warm_up`),
//!    since it would then only add CPU on that job's path;
//! 5. `Started::Ready` on fd 3. The job is read only after this.

use crate::confine::{ConfineError, confine};
use crate::engine::Engine;
use bytes::Bytes;
use jqjail_protocol::frame::write_frame;
use jqjail_protocol::worker::{
    Job, MAX_SETUP_MESSAGE_BYTES, Ready, SetupFailure, Started, StartupArgs, WORKER_FD,
};
use jqjail_protocol::{Encoding, Lang};
use std::fs::File;
use std::os::fd::FromRawFd;

/// Runs the recipe; returns fd 3, the job socket, of a worker that has announced it is ready.
pub fn enter(engine: &Engine, startup: &StartupArgs) -> Result<File, SetupFailure> {
    // 1.
    confine(startup).map_err(|e| failure_of(&e))?;
    // 2.
    let _ = std::collections::hash_map::RandomState::new();
    // 3.
    crate::seccomp::install().map_err(|e| SetupFailure {
        step: "seccomp allowlist".into(),
        isolation_part: None,
        errno: None,
        message: bounded(format!("installing the seccomp allowlist failed: {e}")),
    })?;
    // 4.
    if startup.warm_up {
        warm_up(engine);
    }
    // 5. A File, not a UnixStream: std's socket I/O uses send/recv (sendto/recvfrom), which
    // the allowlist does not contain; a File uses plain read/write.
    // SAFETY: fd 3 was checked to be a socket by `confine` and nothing else owns it.
    let mut sock = unsafe { File::from_raw_fd(WORKER_FD) };
    let ready = Started::Ready(Ready {
        pid: std::process::id(),
    });
    announce(&mut sock, &ready).map_err(|why| SetupFailure {
        step: "ready message".into(),
        isolation_part: None,
        errno: None,
        message: bounded(format!("cannot announce readiness: {why}")),
    })?;
    Ok(sock)
}

/// Tells the supervisor why set-up failed, on fd 3, where fd 3 is known to be the socket (the
/// failure is not that it is something else); best effort, since the worker exits next.
pub fn report(failure: &SetupFailure) {
    if failure.step == NO_SOCKET_STEP {
        return;
    }
    // SAFETY: fd 3 was checked to be a socket before any step that can fail after it; the
    // worker exits right after this, so nothing else uses it.
    let mut sock = unsafe { File::from_raw_fd(WORKER_FD) };
    let _ = announce(&mut sock, &Started::Failed(failure.clone()));
}

/// The step name of a worker whose fd 3 is not its socket.
const NO_SOCKET_STEP: &str = "fd 3";

fn announce(sock: &mut File, started: &Started) -> Result<(), String> {
    let body = Encoding::Bincode
        .encode(started)
        .map_err(|e| e.to_string())?;
    write_frame(sock, &body).map_err(|e| e.to_string())
}

fn bounded(mut message: String) -> String {
    if message.len() > MAX_SETUP_MESSAGE_BYTES {
        let mut end = MAX_SETUP_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

/// The typed form of a confinement error.
fn failure_of(e: &ConfineError) -> SetupFailure {
    let message = bounded(format!("confinement failed: {e}"));
    match e {
        ConfineError::Isolation { part, source } => SetupFailure {
            step: format!("isolation {part}"),
            isolation_part: Some((*part).to_string()),
            errno: source.raw_os_error(),
            message,
        },
        ConfineError::Sys { step, source } => SetupFailure {
            step: (*step).to_string(),
            isolation_part: None,
            errno: source.raw_os_error(),
            message,
        },
        ConfineError::NoSocket(source) => SetupFailure {
            step: NO_SOCKET_STEP.into(),
            isolation_part: None,
            errno: source.raw_os_error(),
            message,
        },
        ConfineError::Orphaned { .. } => SetupFailure {
            step: "parent check".into(),
            isolation_part: None,
            errno: None,
            message,
        },
    }
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
        args: Default::default(),
        outputs: Default::default(),
        inputs: Default::default(),
    };
    let input =
        Bytes::from_static(br#"[{"id":1,"title":"Warm Up","labels":["a","b"],"body":"x\u00e9"}]"#);
    let _ = crate::evaluate::evaluate(engine, &job, &input);
    // The warm-up's compile took the natives built in the zygote; build the job's now.
    engine.prepare();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_isolation_part_is_reported_by_name_not_by_text() {
        let e = ConfineError::Isolation {
            part: "net",
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        };
        let failure = failure_of(&e);
        assert_eq!(failure.isolation_part.as_deref(), Some("net"));
        assert_eq!(failure.errno, Some(libc::EPERM));
        let e = ConfineError::Sys {
            step: "capset",
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        };
        assert_eq!(failure_of(&e).isolation_part, None);
        assert_eq!(failure_of(&e).step, "capset");
        // A failure crosses the wire whole.
        let started = Started::Failed(failure);
        let body = Encoding::Bincode.encode(&started).unwrap();
        assert_eq!(Encoding::Bincode.decode::<Started>(&body).unwrap(), started);
    }

    #[test]
    fn messages_are_bounded_on_a_character_boundary() {
        let long = "é".repeat(MAX_SETUP_MESSAGE_BYTES);
        let cut = bounded(long);
        assert!(cut.len() <= MAX_SETUP_MESSAGE_BYTES && cut.chars().all(|c| c == 'é'));
    }
}
