//! Turning a worker's death into an answer: every exit status and signal maps to a stable
//! code and a message that names the limit.

use crate::spawn::Exit;
use jqjail_protocol::limits::grouped;
use jqjail_protocol::worker::{EXIT_CPU, EXIT_MEMORY, EXIT_SETUP};
use jqjail_protocol::{ErrorCode, ErrorReply};

/// What the supervisor knew when the worker ended without an answer.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// The supervisor killed it because the wall-clock deadline passed.
    pub killed_for_timeout: bool,
    /// It was stopped (SIGSTOP from outside jqjail) when the deadline passed.
    pub stopped_from_outside: bool,
    /// The deadline, for the message.
    pub timeout_ms: u64,
    /// The heap allowance, for the message.
    pub heap_bytes: u64,
    /// The CPU-time limit in seconds, for the message.
    pub cpu_seconds: u64,
    /// The per-worker memory cgroup limit (0: none), for the message.
    pub cgroup_bytes: u64,
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// The error for a worker that ended without a reply.
pub fn explain(exit: &Exit, ctx: &Context) -> ErrorReply {
    let stderr = exit.stderr_tail.as_str();
    let with_stderr = |mut e: ErrorReply| {
        if !stderr.is_empty() {
            e.detail = Some(stderr.to_string());
        }
        e
    };
    if ctx.killed_for_timeout {
        let ms = grouped(ctx.timeout_ms);
        let message = if ctx.stopped_from_outside {
            format!(
                "the worker was stopped by a signal from outside jqjail (SIGSTOP or a debugger) and could not finish within the {ms} ms wall-clock limit; it was killed and replaced, and the filter may succeed if run again"
            )
        } else {
            format!(
                "filter ran past the {ms} ms wall-clock limit and was stopped; narrow the input or simplify the filter"
            )
        };
        return ErrorReply::new(ErrorCode::Timeout, message)
            .with_limit(ctx.timeout_ms, ctx.timeout_ms);
    }
    if exit.oom_killed {
        return ErrorReply::new(
            ErrorCode::MemoryLimit,
            format!(
                "filter used more memory than the worker's {} memory cgroup allows and was killed by the kernel (peak resident memory {})",
                mib(ctx.cgroup_bytes),
                mib(exit.peak_rss_bytes)
            ),
        )
        .with_limit(ctx.cgroup_bytes, exit.peak_rss_bytes);
    }
    if stderr.contains("has overflowed its stack") {
        return ErrorReply::new(
            ErrorCode::StackLimit,
            "filter recursed deeper than the worker's stack allows (stack overflow); look for unbounded recursion such as `def f: [f]; f`",
        );
    }
    match exit.status {
        Ok(EXIT_MEMORY) => ErrorReply::new(
            ErrorCode::MemoryLimit,
            format!(
                "filter needed more than the {} heap limit (peak resident memory {}); narrow the input or avoid building large values",
                mib(ctx.heap_bytes),
                mib(exit.peak_rss_bytes)
            ),
        )
        .with_limit(ctx.heap_bytes, exit.peak_rss_bytes),
        Ok(EXIT_CPU) | Err(libc::SIGXCPU) => ErrorReply::new(
            ErrorCode::CpuLimit,
            format!(
                "filter used up the {} s CPU-time limit (used {} ms)",
                ctx.cpu_seconds,
                grouped(exit.cpu.as_millis() as u64)
            ),
        )
        .with_limit(ctx.cpu_seconds * 1000, exit.cpu.as_millis() as u64),
        Ok(EXIT_SETUP) => with_stderr(ErrorReply::new(
            ErrorCode::Internal,
            format!("worker could not set itself up: {}", first_line(stderr)),
        )),
        Err(libc::SIGSYS) => {
            let call = match exit.seccomp_syscall {
                Some(nr) => match jqjail_protocol::syscalls::syscall_name(nr) {
                    Some(name) => format!("`{name}` (number {nr})"),
                    None => format!("number {nr}"),
                },
                None => "a system call (the kernel log that names it is not readable)".into(),
            };
            with_stderr(ErrorReply::new(
                ErrorCode::SandboxViolation,
                format!(
                    "worker attempted {call}, which its seccomp allowlist forbids, and was killed (SIGSYS)"
                ),
            ))
        }
        Err(libc::SIGKILL) if exit.cpu.as_secs() > ctx.cpu_seconds => ErrorReply::new(
            ErrorCode::CpuLimit,
            format!(
                "filter passed the {} s CPU-time hard limit and was killed by the kernel",
                ctx.cpu_seconds
            ),
        )
        .with_limit(ctx.cpu_seconds * 1000, exit.cpu.as_millis() as u64),
        Err(sig) => with_stderr(ErrorReply::new(
            ErrorCode::WorkerCrashed,
            format!(
                "worker was killed by {} without answering{}",
                signal_name(sig),
                if sig == libc::SIGKILL {
                    " (not by jqjail's limits: another process or the kernel's OOM killer)"
                } else {
                    ""
                }
            ),
        )),
        Ok(code) => with_stderr(ErrorReply::new(
            ErrorCode::WorkerCrashed,
            format!(
                "worker exited with status {code} without answering{}",
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!(": {}", first_line(stderr))
                }
            ),
        )),
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn exit(status: Result<i32, i32>, stderr: &str) -> Exit {
        Exit {
            status,
            cpu: Duration::from_millis(10),
            peak_rss_bytes: 300 << 20,
            stderr_tail: stderr.into(),
            seccomp_syscall: None,
            oom_killed: false,
        }
    }

    const CTX: Context = Context {
        killed_for_timeout: false,
        stopped_from_outside: false,
        timeout_ms: 5000,
        heap_bytes: 256 << 20,
        cpu_seconds: 6,
        cgroup_bytes: 400 << 20,
    };

    #[test]
    fn each_death_has_its_code() {
        let cases = [
            (exit(Ok(EXIT_MEMORY), ""), ErrorCode::MemoryLimit),
            (exit(Ok(EXIT_CPU), ""), ErrorCode::CpuLimit),
            (exit(Err(libc::SIGXCPU), ""), ErrorCode::CpuLimit),
            (exit(Err(libc::SIGSYS), ""), ErrorCode::SandboxViolation),
            (
                exit(Err(libc::SIGABRT), "thread 'main' has overflowed its stack"),
                ErrorCode::StackLimit,
            ),
            (exit(Err(libc::SIGSEGV), ""), ErrorCode::WorkerCrashed),
            (exit(Ok(101), "panicked at x"), ErrorCode::WorkerCrashed),
            (exit(Ok(EXIT_SETUP), "bad"), ErrorCode::Internal),
        ];
        for (exit, code) in cases {
            assert_eq!(explain(&exit, &CTX).code, code, "{exit:?}");
        }
        let timed_out = Context {
            killed_for_timeout: true,
            ..CTX
        };
        assert_eq!(
            explain(&exit(Err(9), ""), &timed_out).code,
            ErrorCode::Timeout
        );
    }

    #[test]
    fn sandbox_violations_name_the_syscall_when_known() {
        let mut e = exit(Err(libc::SIGSYS), "");
        e.seccomp_syscall = Some(libc::SYS_openat);
        let msg = explain(&e, &CTX).message;
        assert!(msg.contains("`openat` (number 257)"), "{msg}");
        e.seccomp_syscall = None;
        assert!(explain(&e, &CTX).message.contains("not readable"));
    }

    #[test]
    fn a_cgroup_oom_kill_is_a_memory_limit() {
        let mut e = exit(Err(libc::SIGKILL), "");
        e.oom_killed = true;
        let reply = explain(&e, &CTX);
        assert_eq!(reply.code, ErrorCode::MemoryLimit);
        assert!(
            reply.message.contains("400.0 MiB memory cgroup"),
            "{}",
            reply.message
        );
    }

    #[test]
    fn memory_message_names_the_limit() {
        let e = explain(&exit(Ok(EXIT_MEMORY), ""), &CTX);
        assert!(e.message.contains("256.0 MiB heap limit"), "{}", e.message);
        assert_eq!(e.limit, Some(256 << 20));
    }
}
