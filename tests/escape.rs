//! Escape probes: this binary re-executes itself as a worker, applies exactly the
//! worker's start-up (`jqjail_worker::serve::start`: rlimits, privileges, the seccomp
//! allowlist), and then attempts one forbidden operation, named by the job it receives. Every
//! probe runs twice: in a worker exec'd as above, and in one forked by the zygote as the
//! daemon's are by default (`jqjail_worker::zygote::run_with`, then `serve::start_with`). The
//! runner — the unconfined parent — expects every probe to be killed by SIGSYS. One control
//! probe makes an allowed call and must survive, so the harness itself is shown to detect a
//! probe that gets through.
//!
//! Runs under `cargo test` (harness = false) and prints `N passed, N failed`.

use jqjail_protocol::frame::tokio_io::{read_frame, write_frame_parts};
use jqjail_protocol::worker::{
    Job, MAX_READY_FRAME_BYTES, Reply, Started, StartupArgs, WORKER_ARG, WorkerError, ZYGOTE_ARG,
};
use jqjail_protocol::{Encoding, ErrorCode};
use jqjail_supervisor::config::WorkerStart;
use jqjail_supervisor::spawn::{Launcher, Program};
use jqjail_worker::Engine;
use std::ffi::CString;
use std::fs::File;
use std::process::ExitCode;
use std::time::Duration;

#[global_allocator]
static ALLOC: jqjail_worker::WorkerAlloc = jqjail_worker::WorkerAlloc;

/// (probe, what it must do): `true` → die by SIGSYS; `false` → survive (the control).
const PROBES: &[(&str, bool)] = &[
    ("open", true),
    ("openat", true),
    ("socket", true),
    ("connect", true),
    ("execve", true),
    ("fork", true),
    ("clone", true),
    ("clone3", true),
    ("ptrace", true),
    ("kill-supervisor", true),
    ("prctl", true),
    ("seccomp", true),
    ("unshare", true),
    ("mount", true),
    ("mmap-exec", true),
    ("mprotect-exec", true),
    ("setrlimit", true),
    ("io_uring_setup", true),
    ("memfd_create", true),
    ("ioctl-tiocsti", true),
    ("read-stdin", true),
    ("write-stdout", true),
    ("tgkill-other", true),
    ("tgkill-self-sigkill", true),
    ("getrandom", true),
    ("rt_sigaction", true),
    ("bpf", true),
    ("perf_event_open", true),
    ("userfaultfd", true),
    ("process_vm_readv", true),
    ("chroot", true),
    ("setuid-root", true),
    ("keyctl", true),
    ("madvise-dontneed", true),
    ("control-getpid", false),
    ("control-madvise-hugepage", false),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(WORKER_ARG) => probe_child(&args[2..]),
        Some(ZYGOTE_ARG) => {
            let code = jqjail_worker::zygote::run_with(&args[2..], forked_probe);
            // SAFETY: _exit never returns.
            unsafe { libc::_exit(code) }
        }
        _ => {}
    }
    runner()
}

// ---------------------------------------------------------------- the confined child

fn probe_child(args: &[String]) -> ! {
    let startup = StartupArgs::parse(args).expect("startup args");
    match jqjail_worker::serve::start(&startup) {
        Ok((_engine, sock)) => probe(sock, &startup),
        // SAFETY: _exit never returns.
        Err(code) => unsafe { libc::_exit(code) },
    }
}

/// The life of a probe forked by the zygote.
fn forked_probe(engine: &Engine, startup: &StartupArgs) -> i32 {
    match jqjail_worker::serve::start_with(engine, startup) {
        Ok(sock) => probe(sock, startup),
        Err(code) => code,
    }
}

/// Reads the job, attempts the probe it names, and reports if still alive.
fn probe(mut sock: File, startup: &StartupArgs) -> ! {
    let (job, _input) = match jqjail_worker::serve::read_job(&mut sock, startup) {
        Ok(j) => j,
        // SAFETY: _exit never returns.
        Err(_) => unsafe { libc::_exit(3) },
    };
    let outcome = attempt(&job.filter, startup.parent_pid as i32);
    // Still alive: say so.
    let reply = Reply {
        outcome: jqjail_protocol::worker::Outcome::Error(WorkerError {
            code: ErrorCode::Internal,
            message: format!("survived: {outcome}"),
            limit: None,
            actual: None,
        }),
        cpu_us: 0,
        peak_rss_bytes: 0,
    };
    if let Ok(body) = Encoding::Bincode.encode(&reply) {
        let _ = jqjail_protocol::frame::write_frame(&mut sock, &body);
    }
    // SAFETY: _exit never returns.
    unsafe { libc::_exit(0) }
}

/// Performs the probe's system call with plausible arguments; returns its result.
fn attempt(probe: &str, parent: i32) -> String {
    let path = CString::new("/etc/passwd").unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: each call passes pointers to live locals or null, with matching lengths; if the
    // sandbox lets one through, it acts only on this disposable child process (or reports).
    let ret: i64 = unsafe {
        match probe {
            "open" => libc::syscall(libc::SYS_open, path.as_ptr(), libc::O_RDONLY),
            "openat" => libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY,
            ),
            "socket" => libc::syscall(libc::SYS_socket, libc::AF_UNIX, libc::SOCK_STREAM, 0),
            p if p.starts_with("connect:") => {
                let mut addr: libc::sockaddr_un = std::mem::zeroed();
                addr.sun_family = libc::AF_UNIX as u16;
                for (dst, src) in addr.sun_path.iter_mut().zip(p["connect:".len()..].bytes()) {
                    *dst = src as libc::c_char;
                }
                libc::syscall(
                    libc::SYS_connect,
                    3,
                    &addr as *const libc::sockaddr_un,
                    std::mem::size_of::<libc::sockaddr_un>(),
                )
            }
            "execve" => {
                let sh = CString::new("/bin/sh").unwrap();
                let argv = [sh.as_ptr(), std::ptr::null()];
                let envp: [*const libc::c_char; 1] = [std::ptr::null()];
                libc::syscall(libc::SYS_execve, sh.as_ptr(), argv.as_ptr(), envp.as_ptr())
            }
            "fork" => libc::syscall(libc::SYS_fork),
            "clone" => libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0),
            "clone3" => {
                let args = [0u64; 11];
                libc::syscall(
                    libc::SYS_clone3,
                    args.as_ptr(),
                    std::mem::size_of_val(&args),
                )
            }
            "ptrace" => libc::syscall(libc::SYS_ptrace, libc::PTRACE_ATTACH, parent, 0, 0),
            // kill is not on the allowlist at all: the signal number does not matter to the
            // filter, and 0 keeps the runner safe should the sandbox fail.
            "kill-supervisor" => libc::syscall(libc::SYS_kill, parent, 0),
            "prctl" => libc::syscall(libc::SYS_prctl, libc::PR_SET_DUMPABLE, 1, 0, 0, 0),
            "seccomp" => libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_STRICT, 0, 0),
            "unshare" => libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER),
            "mount" => {
                let (src, dst, fs) = (c"none", c"/tmp", c"tmpfs");
                libc::syscall(
                    libc::SYS_mount,
                    src.as_ptr(),
                    dst.as_ptr(),
                    fs.as_ptr(),
                    0,
                    0,
                )
            }
            "mmap-exec" => libc::syscall(
                libc::SYS_mmap,
                0,
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ),
            "mprotect-exec" => {
                let page = libc::syscall(
                    libc::SYS_mmap,
                    0,
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                libc::syscall(
                    libc::SYS_mprotect,
                    page,
                    4096,
                    libc::PROT_READ | libc::PROT_EXEC,
                )
            }
            "madvise-dontneed" | "control-madvise-hugepage" => {
                let page = libc::syscall(
                    libc::SYS_mmap,
                    0,
                    1 << 21,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                let advice = if probe == "madvise-dontneed" {
                    libc::MADV_DONTNEED
                } else {
                    libc::MADV_HUGEPAGE
                };
                libc::syscall(libc::SYS_madvise, page, 1 << 21, advice)
            }
            "setrlimit" => {
                let lim = libc::rlimit {
                    rlim_cur: 1024,
                    rlim_max: 1024,
                };
                libc::syscall(libc::SYS_prlimit64, 0, libc::RLIMIT_NOFILE, &lim, 0)
            }
            "io_uring_setup" => {
                let params = [0u8; 120];
                libc::syscall(libc::SYS_io_uring_setup, 1, params.as_ptr())
            }
            "memfd_create" => libc::syscall(libc::SYS_memfd_create, c"x".as_ptr(), 0),
            "ioctl-tiocsti" => {
                let c = b'x';
                libc::syscall(libc::SYS_ioctl, 2, libc::TIOCSTI, &c)
            }
            "read-stdin" => libc::syscall(libc::SYS_read, 0, buf.as_mut_ptr(), buf.len()),
            "write-stdout" => libc::syscall(libc::SYS_write, 1, buf.as_ptr(), 1),
            "tgkill-other" => libc::syscall(libc::SYS_tgkill, parent, parent, 0),
            "tgkill-self-sigkill" => {
                let me = libc::getpid();
                libc::syscall(libc::SYS_tgkill, me, me, libc::SIGKILL)
            }
            "getrandom" => libc::syscall(libc::SYS_getrandom, buf.as_mut_ptr(), buf.len(), 0),
            "rt_sigaction" => {
                let act: libc::sigaction = std::mem::zeroed();
                libc::syscall(libc::SYS_rt_sigaction, libc::SIGUSR1, &act, 0, 8)
            }
            "bpf" => libc::syscall(libc::SYS_bpf, 0, 0, 0),
            "perf_event_open" => libc::syscall(libc::SYS_perf_event_open, 0, 0, -1, -1, 0),
            "userfaultfd" => libc::syscall(libc::SYS_userfaultfd, 0),
            "process_vm_readv" => libc::syscall(libc::SYS_process_vm_readv, parent, 0, 0, 0, 0, 0),
            "chroot" => libc::syscall(libc::SYS_chroot, c"/tmp".as_ptr()),
            "setuid-root" => libc::syscall(libc::SYS_setuid, 0),
            "keyctl" => libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0),
            "control-getpid" => libc::syscall(libc::SYS_getpid),
            other => return format!("unknown probe {other}"),
        }
    };
    let errno = std::io::Error::last_os_error();
    format!("{probe} returned {ret} ({errno})")
}

// ---------------------------------------------------------------- the runner

fn runner() -> ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&target).expect("bind");
    listener.set_nonblocking(true).unwrap();
    let program = Program::current_exe().expect("own executable");
    let startup = StartupArgs {
        parent_pid: std::process::id(),
        heap_bytes: 256 << 20,
        cpu_seconds: 5,
        max_input_bytes: 1 << 20,
        max_filter_bytes: 4096,
        isolation: jqjail_supervisor::config::DEFAULT_ISOLATION,
        uid: jqjail_supervisor::config::DEFAULT_WORKER_UIDS.first,
        warm_up: true,
    };
    let kmsg_readable = std::fs::File::open("/dev/kmsg").is_ok();
    if !kmsg_readable {
        println!("note: /dev/kmsg is not readable here; syscall names are not checked");
    }
    let mut tally = Tally::default();
    // The kernel sends the parent-death signal when the *thread* that created a process exits.
    // A worker (and the zygote) must outlive whichever thread asked for it.
    for start in [WorkerStart::Exec, WorkerStart::Zygote] {
        let launcher = Launcher::new(
            start,
            jqjail_supervisor::config::CodePages::default(),
            program.clone(),
            jqjail_supervisor::config::DEFAULT_WORKER_UIDS,
        );
        // The thread lives until the worker is ready (its parent-death signal is armed),
        // then exits.
        let started = std::thread::scope(|s| {
            s.spawn(|| rt.block_on(start_ready(&launcher, &startup)))
                .join()
                .expect("launching thread")
        });
        std::thread::sleep(Duration::from_millis(200));
        let outcome = match started {
            Ok((child, sock)) => rt.block_on(probe_on(child, sock, "control-getpid")),
            Err(outcome) => outcome,
        };
        tally.check(
            &format!("a worker outlives the thread that started it, {start:?}"),
            matches!(outcome, Outcome::Survived(_)),
            &outcome.describe(),
        );
    }
    // A fork request abandoned before its answer (its future dropped) must not hand its
    // worker to the next request: the next one gets a worker of its own (start_ready checks
    // the pid). A zero timeout abandons the request unless the zygote's answer was already
    // there at the first poll (a thread descheduled between sending and reading lets that
    // happen, as it did once in CI); then the worker is dropped (killed and reaped) and the
    // request tried again.
    {
        let launcher = Launcher::new(
            WorkerStart::Zygote,
            jqjail_supervisor::config::CodePages::default(),
            program.clone(),
            jqjail_supervisor::config::DEFAULT_WORKER_UIDS,
        );
        let abandoned = (0..20).any(|_| {
            rt.block_on(async {
                tokio::time::timeout(Duration::ZERO, launcher.launch(&startup)).await
            })
            .is_err()
        });
        let outcome = rt.block_on(run_probe(&launcher, &startup, "control-getpid"));
        let described = if abandoned {
            outcome.describe()
        } else {
            "no request was abandoned: the answer was there at the first poll, 20 times".into()
        };
        tally.check(
            "a fork request abandoned before its answer",
            abandoned && matches!(outcome, Outcome::Survived(_)),
            &described,
        );
    }
    let launchers = [WorkerStart::Exec, WorkerStart::Zygote].map(|start| {
        (
            start,
            Launcher::new(
                start,
                jqjail_supervisor::config::CodePages::default(),
                program.clone(),
                jqjail_supervisor::config::DEFAULT_WORKER_UIDS,
            ),
        )
    });
    // Each probe in a worker that ran its warm-up and in one that skipped it (as a worker
    // started in a pool run dry under load does): its confinement must not depend on it.
    for (&(probe, must_die), (start, launcher), warm_up) in PROBES.iter().flat_map(|p| {
        launchers
            .iter()
            .flat_map(move |l| [true, false].map(move |warm| (p, l, warm)))
    }) {
        let startup = StartupArgs { warm_up, ..startup };
        let name = if probe == "connect" {
            format!("connect:{}", target.display())
        } else {
            probe.to_string()
        };
        let mut outcome = rt.block_on(run_probe(launcher, &startup, &name));
        // The kernel rate-limits its audit records, so under a burst of kills a record can be
        // missing; try the named-syscall check a few times before noting that.
        if probe == "openat" && kmsg_readable {
            for _ in 0..5 {
                if !matches!(outcome, Outcome::KilledBySigsys(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
                outcome = rt.block_on(run_probe(launcher, &startup, &name));
            }
            if matches!(outcome, Outcome::KilledBySigsys(None)) {
                println!(
                    "note: the kernel log carried no record of the openat kill (rate-limited)"
                );
            }
        }
        let ok = match (&outcome, must_die) {
            // Where the kernel log names the call, it must be the one attempted.
            (Outcome::KilledBySigsys(Some(nr)), true) if probe == "openat" => {
                *nr == libc::SYS_openat
            }
            (Outcome::KilledBySigsys(_), true) => true,
            (Outcome::Survived(_), false) => true,
            _ => false,
        };
        tally.check(
            &format!(
                "probe {probe}, {start:?}{}",
                if warm_up { "" } else { ", no warm-up" }
            ),
            ok,
            &outcome.describe(),
        );
    }
    // The connect probe must not have reached the listener.
    let connected = listener.accept().is_ok();
    tally.check(
        "probe connect reached no listener",
        !connected,
        if connected { "it did" } else { "none" },
    );
    let Tally { passed, failed } = tally;
    println!("\nescape probes: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The runner's checks, counted and printed as they are made.
#[derive(Default)]
struct Tally {
    passed: u32,
    failed: u32,
}

impl Tally {
    fn check(&mut self, what: &str, ok: bool, detail: &str) {
        println!("{what} ... {} ({detail})", if ok { "ok" } else { "FAILED" });
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }
}

#[derive(Debug)]
enum Outcome {
    /// With the syscall number the kernel log gave, where it was readable.
    KilledBySigsys(Option<i64>),
    Survived(String),
    Other(String),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::KilledBySigsys(Some(nr)) => {
                format!("killed by SIGSYS, kernel log: syscall {nr}")
            }
            Outcome::KilledBySigsys(None) => "killed by SIGSYS".into(),
            Outcome::Survived(what) => what.clone(),
            Outcome::Other(what) => format!("unexpected: {what}"),
        }
    }
}

async fn run_probe(launcher: &Launcher, startup: &StartupArgs, probe: &str) -> Outcome {
    match start_ready(launcher, startup).await {
        Ok((child, sock)) => probe_on(child, sock, probe).await,
        Err(outcome) => outcome,
    }
}

type Launched = (jqjail_supervisor::spawn::Child, tokio::net::UnixStream);

/// Starts a worker and waits for its ready message.
async fn start_ready(launcher: &Launcher, startup: &StartupArgs) -> Result<Launched, Outcome> {
    let (mut child, sock) = launcher
        .launch(startup)
        .await
        .map_err(|e| Outcome::Other(format!("spawn: {e}")))?;
    let mut sock = tokio::net::UnixStream::from_std(sock).expect("register socket");
    let ready = read_frame(&mut sock, MAX_READY_FRAME_BYTES)
        .await
        .map_err(|e| e.to_string())
        .and_then(|f| {
            match Encoding::Bincode
                .decode::<Started>(&f)
                .map_err(|e| e.to_string())?
            {
                Started::Ready(ready) => Ok(ready),
                Started::Failed(failed) => Err(format!("set-up failed: {failed:?}")),
            }
        });
    match ready {
        // The process on the socket is the child the launcher handed over.
        Ok(ready) if ready.pid as i32 == child.pid() => Ok((child, sock)),
        Ok(ready) => Err(Outcome::Other(format!(
            "ready from pid {}, but the child started is pid {}",
            ready.pid,
            child.pid()
        ))),
        Err(e) => {
            let exit = child.wait().await;
            Err(Outcome::Other(format!(
                "no ready message: {e}; exit {exit:?}"
            )))
        }
    }
}

/// Sends `probe` to a ready worker and reports what became of it.
async fn probe_on(
    mut child: jqjail_supervisor::spawn::Child,
    mut sock: tokio::net::UnixStream,
    probe: &str,
) -> Outcome {
    let job = Job {
        filter: probe.to_string(),
        lang: jqjail_protocol::Lang::Jq,
        input_bytes: 0,
        max_depth: 10,
        max_output_bytes: 1000,
        args: Default::default(),
        outputs: Default::default(),
        inputs: Default::default(),
    };
    let header = Encoding::Bincode.encode(&job).unwrap();
    let _ = write_frame_parts(&mut sock, &[&header]).await;
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut sock, 65536)).await;
    let exit = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(exit)) => exit,
        other => {
            child.kill();
            return Outcome::Other(format!("did not exit: {other:?}"));
        }
    };
    match (exit.status, reply) {
        (Err(libc::SIGSYS), _) => Outcome::KilledBySigsys(exit.seccomp_syscall),
        (_, Ok(Ok(frame))) => match Encoding::Bincode.decode::<Reply>(&frame) {
            Ok(Reply {
                outcome: jqjail_protocol::worker::Outcome::Error(e),
                ..
            }) => Outcome::Survived(e.message),
            other => Outcome::Other(format!("{other:?}")),
        },
        (status, _) => Outcome::Other(format!("exit {status:?}, stderr {}", exit.stderr_tail)),
    }
}
