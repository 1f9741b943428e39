//! Starting, signalling and reaping worker processes. The only module of the supervisor that
//! creates processes; it never forks: `posix_spawn` (glibc: `clone(CLONE_VM|CLONE_VFORK)` +
//! exec) is safe from a multithreaded tokio process. It runs on one long-lived thread
//! ([`on_spawner_thread`]), because a child's parent-death signal fires when the thread that
//! created it exits. It starts either each worker ([`spawn`]) or the zygote that forks them
//! (`crate::zygote`); [`Launcher`] is the choice.
//!
//! A process is spawned with an environment of one glibc tunable ([`WORKER_TUNABLES`], read
//! before `main`; the process then empties its environment), stdin and stdout on `/dev/null`,
//! stderr a pipe the supervisor reads after the exit (the zygote's is the daemon's own), fd 3
//! one end of a socketpair, every signal at its default disposition and an empty signal mask.
//! Each worker gets a pidfd as soon as its pid is known, so it is waited for and signalled
//! without pid-reuse races.

use jqjail_protocol::worker::{StartupArgs, WORKER_ARG, WORKER_FD};
use nix::fcntl::OFlag;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
use nix::sys::signal::SigSet;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// The worker's whole environment at exec: malloc uses transparent huge pages for large heaps,
/// and grows its heap 16 MiB beyond each request that does not fit. glibc 2.35 to 2.37 misread
/// whether the kernel offers huge pages in some starts (here about half) and then advise
/// nothing; the worker's allocator advises its large blocks itself
/// (`jqjail_worker::alloc::advise_huge_pages`).
pub const WORKER_TUNABLES: &str =
    "GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.top_pad=16777216";

/// Bytes of a worker's stderr kept for error reports: the tail.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// A started worker, not yet reaped.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    pidfd: AsyncFd<OwnedFd>,
    /// The read end of its stderr pipe (none for the zygote, which writes to the daemon's).
    stderr: Option<OwnedFd>,
    reaped: bool,
    cgroup: Option<crate::cgroup::WorkerCgroup>,
}

/// How a worker ended, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// `Ok(status)` for a normal exit, `Err(signal)` for death by a signal.
    pub status: Result<i32, i32>,
    /// User + system CPU time.
    pub cpu: Duration,
    /// Peak resident set size, in bytes.
    pub peak_rss_bytes: u64,
    /// The last bytes the worker wrote to stderr.
    pub stderr_tail: String,
    /// For a SIGSYS death, the system call seccomp killed it for, if the kernel log says.
    pub seccomp_syscall: Option<i64>,
    /// The OOM killer acted in the worker's memory cgroup.
    pub oom_killed: bool,
}

/// The worker program: the absolute path of the running executable, resolved once.
#[derive(Debug, Clone)]
pub struct Program {
    path: CString,
}

impl Program {
    /// The executable this process runs (via `/proc/self/exe`), which also serves as the worker.
    pub fn current_exe() -> io::Result<Program> {
        let path = std::env::current_exe()?;
        Self::at(&path)
    }

    /// A program at an absolute path.
    pub fn at(path: &Path) -> io::Result<Program> {
        if !path.is_absolute() {
            return Err(io::Error::other(format!(
                "worker program {} is not an absolute path",
                path.display()
            )));
        }
        let path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::other("worker path contains a NUL byte"))?;
        Ok(Program { path })
    }

    /// Its path, for logs.
    pub fn display(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }
}

fn errno(e: nix::Error) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// A new worker's descriptors: its end of the job socketpair and the write end of its stderr
/// pipe, with the supervisor's ends of both.
pub(crate) struct WorkerFds {
    ours: OwnedFd,
    pub(crate) theirs: OwnedFd,
    err_read: OwnedFd,
    pub(crate) err_write: OwnedFd,
}

impl WorkerFds {
    pub(crate) fn new() -> io::Result<WorkerFds> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(errno)?;
        let (err_read, err_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(errno)?;
        Ok(WorkerFds {
            ours,
            theirs,
            err_read,
            err_write,
        })
    }

    /// The worker `pid` has been started with copies of `theirs` and `err_write`: closes
    /// the supervisor's copies (so that its exit is seen as end of file) and returns the child
    /// and the supervisor's end of its socketpair.
    pub(crate) fn adopt(self, pid: libc::pid_t) -> io::Result<(Child, UnixStream)> {
        drop((self.theirs, self.err_write));
        let child = Child::adopt(pid, Some(self.err_read))?;
        let ours = UnixStream::from(self.ours);
        ours.set_nonblocking(true)?;
        Ok((child, ours))
    }
}

/// Starts one worker by exec. Returns the child and the supervisor's end of its socketpair.
pub fn spawn(program: &Program, startup: &StartupArgs) -> io::Result<(Child, UnixStream)> {
    let fds = WorkerFds::new()?;
    let mut args = vec![WORKER_ARG.to_string()];
    args.extend(startup.to_args());
    let pid = exec(program, &args, &fds.theirs, Some(&fds.err_write))?;
    fds.adopt(pid)
}

/// posix_spawn of `program` with `args` after argv\[0\]: fd 3 a copy of `fd3`; fd 2 a copy
/// of `stderr`, or the supervisor's own stderr when `None`; fds 0 and 1 on `/dev/null`.
pub(crate) fn exec(
    program: &Program,
    args: &[String],
    fd3: &OwnedFd,
    stderr: Option<&OwnedFd>,
) -> io::Result<libc::pid_t> {
    let path = program.path.clone();
    let args = args.to_vec();
    // Raw numbers cross to the spawner thread; the descriptors stay open, owned by this caller,
    // which waits for the spawn to finish.
    let (fd3, stderr) = (fd3.as_raw_fd(), stderr.map(AsRawFd::as_raw_fd));
    on_spawner_thread(move || exec_here(&path, &args, fd3, stderr))
}

/// The thread every process the supervisor starts is created on. The kernel sends a child its
/// parent-death signal when the *thread* that created it exits, not the process; tokio's
/// threads come and go (its blocking pool retires idle threads, and `block_in_place` hands a
/// worker thread to that pool), and a zygote's forks have the zygote's creator as their
/// parent. So one thread, which lives as long as the daemon, creates them all.
fn on_spawner_thread<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> T {
    type Job = Box<dyn FnOnce() + Send>;
    static SPAWNER: std::sync::OnceLock<std::sync::mpsc::Sender<Job>> = std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("jqjail-spawner".into())
            .spawn(move || rx.into_iter().for_each(|job| job()))
            .expect("starting the spawner thread");
        tx
    });
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    spawner
        .send(Box::new(move || {
            let _ = tx.send(job());
        }))
        .expect("the spawner thread never exits");
    rx.recv().expect("the spawner thread answers every job")
}

fn exec_here(
    path: &CString,
    args: &[String],
    fd3: RawFd,
    stderr: Option<RawFd>,
) -> io::Result<libc::pid_t> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;

    let mut actions = PosixSpawnFileActions::init().map_err(errno)?;
    actions.add_dup2(null.as_raw_fd(), 0).map_err(errno)?;
    actions.add_dup2(null.as_raw_fd(), 1).map_err(errno)?;
    if let Some(stderr) = stderr {
        actions.add_dup2(stderr, 2).map_err(errno)?;
    }
    actions.add_dup2(fd3, WORKER_FD).map_err(errno)?;

    let mut attr = PosixSpawnAttr::init().map_err(errno)?;
    attr.set_sigmask(&SigSet::empty()).map_err(errno)?;
    // The Rust runtime ignores SIGPIPE and ignored signals survive exec: reset them all.
    attr.set_sigdefault(&SigSet::all()).map_err(errno)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )
    .map_err(errno)?;

    let mut argv = vec![path.clone()];
    for arg in args {
        argv.push(CString::new(arg.as_str()).map_err(|_| io::Error::other("NUL in an argument"))?);
    }
    // The one variable a worker gets: glibc reads it while loading, before `main`, and the
    // worker then clears its environment. Two settings, each measured on a 20 MiB input:
    // - hugetlb=1: malloc asks for transparent huge pages for heap areas of 2 MiB and more
    //   (madvise MADV_HUGEPAGE, in the allowlist for that alone); parsing took a third less.
    //   Without THP in the kernel the madvise fails and glibc carries on.
    // - top_pad=16 MiB (default 128 KiB): the heap grows in steps of at least 16 MiB, not a
    //   brk per 128 KiB, which lets those steps be huge pages: `.[0]` p50 162 -> 128 ms,
    //   daemons alternating (BENCHMARKS.md). Its price: a growth step that would
    //   pass RLIMIT_DATA fails whole, so MEMORY_LIMIT can come up to 16 MiB before the heap
    //   limit (tests/it/limits.rs checks the margin). Small requests never grow the heap.
    // The zygote gets it too, and its forked workers inherit glibc's settings.
    let envp = [CString::new(WORKER_TUNABLES).expect("no NUL in the tunables")];
    let pid = posix_spawn(path.as_c_str(), &actions, &attr, &argv, &envp)
        .map_err(errno)?
        .as_raw();
    Ok(pid)
}

impl Child {
    /// Takes charge of the unreaped child `pid` (ours, so its pid cannot be reused before we
    /// reap it): opens its pidfd, and keeps `stderr`, the read end of its stderr pipe.
    pub(crate) fn adopt(pid: libc::pid_t, stderr: Option<OwnedFd>) -> io::Result<Child> {
        // Whatever fails below, the child is killed and reaped by pid before the error is
        // returned: it is ours and unreaped, so the pid cannot have been reused, and no zombie
        // or stray worker is left behind.
        let abandon = |e: io::Error| {
            // SAFETY: kill and waitpid on our own unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            e
        };
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is
        // shared.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if raw < 0 {
            return Err(abandon(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh pidfd that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        if let Some(stderr) = &stderr {
            nix::fcntl::fcntl(stderr, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
                .map_err(|e| abandon(errno(e)))?;
        }
        // SAFETY: `pidfd` is an owned, valid descriptor that the AsyncFd takes ownership of;
        // it is neither replaced nor closed while registered.
        let pidfd =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
                .map_err(|e| abandon(io::Error::other(e.to_string())))?;
        Ok(Child {
            pid,
            pidfd,
            stderr,
            reaped: false,
            cgroup: None,
        })
    }

    /// The worker's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Puts the worker in its own memory cgroup, released when it is reaped.
    pub fn set_cgroup(&mut self, cgroup: crate::cgroup::WorkerCgroup) {
        self.cgroup = Some(cgroup);
    }

    /// Sends SIGKILL (through the pidfd, so never to a recycled pid). Idempotent.
    pub fn kill(&self) {
        if self.reaped {
            return;
        }
        // SAFETY: pidfd_send_signal with our pidfd, a signal number, no siginfo, no flags.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.get_ref().as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }

    /// Waits for the worker to exit and reaps it, with its resource usage and stderr tail.
    pub async fn wait(&mut self) -> io::Result<Exit> {
        loop {
            if let Some(exit) = self.try_reap()? {
                return Ok(exit);
            }
            let mut guard = self.pidfd.readable().await?;
            guard.clear_ready();
        }
    }

    fn try_reap(&mut self) -> io::Result<Option<Exit>> {
        let mut status = 0;
        // SAFETY: all-zero bytes are a valid `rusage`.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child with valid out-pointers to locals.
        let got = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == 0 {
            return Ok(None);
        }
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        self.reaped = true;
        let status = if libc::WIFSIGNALED(status) {
            Err(libc::WTERMSIG(status))
        } else {
            Ok(libc::WEXITSTATUS(status))
        };
        let oom_killed = self.cgroup.take().is_some_and(|cg| cg.finish());
        let seccomp_syscall = match status {
            Err(libc::SIGSYS) => crate::kmsg::seccomp_syscall(self.pid),
            _ => None,
        };
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        Ok(Some(Exit {
            status,
            cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
            peak_rss_bytes: (usage.ru_maxrss as u64) * 1024,
            stderr_tail: self.stderr_tail(),
            seccomp_syscall,
            oom_killed,
        }))
    }

    /// Whatever the (exited) worker left in its stderr pipe, last bytes only.
    fn stderr_tail(&mut self) -> String {
        let Some(stderr) = &self.stderr else {
            return String::new();
        };
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // The pipe holds at most 64 KiB (its capacity) and the writer is gone, so this loop
        // ends at EOF or EAGAIN.
        while let Ok(n) = nix::unistd::read(stderr, &mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            if all.len() > 4 * STDERR_TAIL_BYTES {
                all.drain(..all.len() - STDERR_TAIL_BYTES);
            }
        }
        let start = all.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&all[start..]).trim().to_string()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // Never leave a worker running or a zombie behind: kill, then reap synchronously
            // (a SIGKILLed process exits promptly).
            self.kill();
            // SAFETY: waitpid on our own unreaped child, no out-pointer.
            unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
        }
        if let Some(cg) = self.cgroup.take() {
            cg.finish();
        }
    }
}

/// How the pool starts each worker, and as which uid.
#[derive(Debug, Clone)]
pub struct Launcher {
    how: How,
    uids: crate::config::UidRange,
    next_uid: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

#[derive(Debug, Clone)]
enum How {
    /// posix_spawn and exec of the program, for every worker.
    Exec(Program),
    /// A fork by the zygote, which was exec'd once (`crate::zygote`).
    Zygote(std::sync::Arc<crate::zygote::Zygote>),
}

impl Launcher {
    /// The launcher `start` names, for `program` (a zygote keeping its code as `code_pages`
    /// says); workers started as root take the uids of `uids` in turn.
    pub fn new(
        start: crate::config::WorkerStart,
        code_pages: crate::config::CodePages,
        program: Program,
        uids: crate::config::UidRange,
    ) -> Launcher {
        let how = match start {
            crate::config::WorkerStart::Exec => How::Exec(program),
            crate::config::WorkerStart::Zygote => How::Zygote(std::sync::Arc::new(
                crate::zygote::Zygote::new(program, code_pages),
            )),
        };
        Launcher {
            how,
            uids,
            next_uid: Default::default(),
        }
    }

    /// Starts one worker. Returns the child and the supervisor's end of its socketpair.
    /// `startup.uid` is replaced by the next uid of the range.
    pub async fn launch(&self, startup: &StartupArgs) -> io::Result<(Child, UnixStream)> {
        let turn = self
            .next_uid
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let startup = StartupArgs {
            uid: self.uids.nth(turn),
            ..*startup
        };
        match &self.how {
            How::Exec(program) => spawn(program, &startup),
            How::Zygote(zygote) => zygote.fork(&startup).await,
        }
    }

    /// What it runs, for logs and errors.
    pub fn describe(&self) -> String {
        match &self.how {
            How::Exec(program) => format!("exec of {}", program.display()),
            How::Zygote(zygote) => format!("zygote of {}", zygote.program().display()),
        }
    }
}
