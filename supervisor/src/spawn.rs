//! Starting, signalling and reaping worker processes. The only module of the supervisor that
//! creates processes; it never forks: `posix_spawn` (glibc: `clone(CLONE_VM|CLONE_VFORK)` +
//! exec) is safe from a multithreaded tokio process.
//!
//! A worker is spawned with an environment of one glibc tunable ([`WORKER_TUNABLES`], read
//! before `main`; the worker then empties its environment), stdin and stdout on `/dev/null`, stderr a
//! pipe the supervisor reads after the exit, fd 3 one end of a socketpair, every signal at its
//! default disposition and an empty signal mask. Each child gets a pidfd at once, so it is
//! waited for and signalled without pid-reuse races.

use jqjail_protocol::worker::{StartupArgs, WORKER_ARG, WORKER_FD};
use nix::fcntl::OFlag;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
use nix::sys::signal::SigSet;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// The worker's whole environment at exec: malloc uses transparent huge pages for large heaps.
pub const WORKER_TUNABLES: &str = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1";

/// Bytes of a worker's stderr kept for error reports: the tail.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// A started worker, not yet reaped.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    pidfd: AsyncFd<OwnedFd>,
    stderr: OwnedFd,
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

/// Starts one worker. Returns the child and the supervisor's end of its socketpair.
pub fn spawn(
    program: &Program,
    startup: &StartupArgs,
) -> io::Result<(Child, std::os::unix::net::UnixStream)> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(errno)?;
    let (err_read, err_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(errno)?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;

    let mut actions = PosixSpawnFileActions::init().map_err(errno)?;
    actions.add_dup2(null.as_raw_fd(), 0).map_err(errno)?;
    actions.add_dup2(null.as_raw_fd(), 1).map_err(errno)?;
    actions.add_dup2(err_write.as_raw_fd(), 2).map_err(errno)?;
    actions
        .add_dup2(theirs.as_raw_fd(), WORKER_FD)
        .map_err(errno)?;

    let mut attr = PosixSpawnAttr::init().map_err(errno)?;
    attr.set_sigmask(&SigSet::empty()).map_err(errno)?;
    // The Rust runtime ignores SIGPIPE and ignored signals survive exec: reset them all.
    attr.set_sigdefault(&SigSet::all()).map_err(errno)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )
    .map_err(errno)?;

    let mut argv = vec![
        program.path.clone(),
        CString::new(WORKER_ARG).expect("no NUL"),
    ];
    for arg in startup.to_args() {
        argv.push(CString::new(arg).expect("numbers contain no NUL"));
    }
    // The one variable a worker gets: glibc reads it while loading, before `main`, and the
    // worker then clears its environment. It makes malloc ask for transparent huge pages
    // for heap areas of 2 MiB and more (madvise MADV_HUGEPAGE, in the allowlist for that
    // alone), which takes a third off parsing a 20 MiB input; small requests never grow the
    // heap that far. Without THP in the kernel the madvise fails and glibc carries on.
    let envp = [CString::new(WORKER_TUNABLES).expect("no NUL in the tunables")];
    let pid = posix_spawn(program.path.as_c_str(), &actions, &attr, &argv, &envp)
        .map_err(errno)?
        .as_raw();
    drop((theirs, err_write, null));

    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is shared.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        // Without a pidfd the child can still be killed and reaped by pid: it is ours and
        // unreaped, so the pid cannot have been reused.
        // SAFETY: kill and waitpid on our own unreaped child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(e);
    }
    // SAFETY: `raw` is a fresh pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    nix::fcntl::fcntl(&err_read, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(errno)?;
    // SAFETY: `pidfd` is an owned, valid descriptor that the AsyncFd takes ownership of; it is
    // neither replaced nor closed while registered.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
        .map_err(|e| io::Error::other(e.to_string()))?;
    let child = Child {
        pid,
        pidfd,
        stderr: err_read,
        reaped: false,
        cgroup: None,
    };
    let ours = std::os::unix::net::UnixStream::from(ours);
    ours.set_nonblocking(true)?;
    Ok((child, ours))
}

impl Child {
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
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // The pipe holds at most 64 KiB (its capacity) and the writer is gone, so this loop
        // ends at EOF or EAGAIN.
        while let Ok(n) = nix::unistd::read(&self.stderr, &mut buf) {
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
