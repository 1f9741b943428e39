//! The supervisor's side of the worker zygote (`jqjail_worker::zygote`): a single-threaded
//! process exec'd once, which forks each worker as the supervisor's own child. The supervisor
//! never forks itself (it is multithreaded); it asks the zygote over a SOCK_SEQPACKET socket,
//! sending the startup arguments with the worker's two descriptors attached, and gets the
//! pid back. From then on the worker is an ordinary [`Child`].
//!
//! A zygote that stops answering is killed and replaced on the next request; a fork the
//! zygote reports as failed leaves it in service. One that answers `lost` (it could not go
//! back from a failed entry into its empty root; it then exits
//! [`jqjail_protocol::worker::EXIT_ZYGOTE_LOST`]) is replaced at once, within the same
//! request, by one that leaves the empty root to each worker, as are all after it for the
//! daemon's life: on that host every zygote that tried would be lost at its first request for
//! an empty root, and no worker would ever start.

use crate::spawn::{Child, Program, WorkerFds, exec};
use jqjail_protocol::worker::{StartupArgs, ZYGOTE_ARG, ZYGOTE_FILE_CODE, ZYGOTE_LEAVES_ROOT};
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, recv, sendmsg, socketpair,
};
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How long the zygote may take to answer a fork request before it is replaced.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts workers through a zygote, starting (and restarting) the zygote as needed.
#[derive(Debug)]
pub struct Zygote {
    program: Program,
    code_pages: crate::config::CodePages,
    running: tokio::sync::Mutex<Option<Running>>,
    /// A zygote answered `lost`: the next ones leave the empty root to workers.
    leave_root: AtomicBool,
}

#[derive(Debug)]
struct Running {
    /// The zygote process; dropping it kills and reaps it.
    child: Child,
    /// The supervisor's end of the control socket (non-blocking).
    control: AsyncFd<OwnedFd>,
    /// A request was sent and its answer not yet read. Still set when the next request
    /// comes, the previous one was abandoned (its future dropped), and the answer waiting on
    /// the socket is not the next request's: the zygote is replaced first.
    pending: bool,
}

impl Zygote {
    /// A zygote of `program` keeping its code as `code_pages` says, started on the first
    /// request.
    pub fn new(program: Program, code_pages: crate::config::CodePages) -> Zygote {
        Zygote {
            program,
            code_pages,
            running: tokio::sync::Mutex::new(None),
            leave_root: AtomicBool::new(false),
        }
    }

    /// The program the zygote runs, for logs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Starts one worker with `startup`. Returns the child and the supervisor's end of its
    /// socketpair, exactly as [`crate::spawn::spawn`] does.
    pub async fn fork(&self, startup: &StartupArgs) -> io::Result<(Child, UnixStream)> {
        let mut running = self.running.lock().await;
        if let Some(abandoned) = running.take_if(|zygote| zygote.pending) {
            tracing::warn!(
                pid = abandoned.child.pid(),
                "a request to the worker zygote was abandoned before its answer; replacing it"
            );
        }
        loop {
            let leave_root = self.leave_root.load(Ordering::Relaxed);
            let zygote = match running.as_mut() {
                Some(zygote) => zygote,
                None => running.insert(Running::start(&self.program, leave_root, self.code_pages)?),
            };
            let fds = WorkerFds::new()?;
            return match zygote.request(startup, &fds).await {
                Ok(Answer::Forked(pid)) => fds.adopt(pid),
                Ok(Answer::Failed(why)) => {
                    Err(io::Error::other(format!("the zygote cannot fork: {why}")))
                }
                Ok(Answer::Lost(why)) if !leave_root => {
                    // Dropping it kills and reaps it (it is exiting anyway). Once only: the
                    // next zygote is started not to try, and serves this request.
                    let pid = running.take().map(|gone| gone.child.pid());
                    self.leave_root.store(true, Ordering::Relaxed);
                    tracing::warn!(
                        pid,
                        reason = %why,
                        "worker zygote could not go back from a failed entry into its empty root; its replacements leave the empty root to each worker"
                    );
                    continue;
                }
                Ok(Answer::Lost(why)) => {
                    // Told not to try, it cannot be lost; a zygote that says so is broken.
                    *running = None;
                    Err(io::Error::other(format!(
                        "the zygote, told to leave the empty root to workers, says it is lost: {why}"
                    )))
                }
                Err(broken) => {
                    let pid = zygote.child.pid();
                    // Dropping it kills and reaps it; the next request starts a new one.
                    *running = None;
                    tracing::warn!(pid, error = %broken, "worker zygote stopped answering; replacing it");
                    Err(io::Error::other(format!("the zygote failed: {broken}")))
                }
            };
        }
    }
}

/// A zygote's answer to a fork request.
enum Answer {
    /// `ok PID`: the worker is forked.
    Forked(libc::pid_t),
    /// `err WHY`: the fork failed; the zygote serves on.
    Failed(String),
    /// `lost WHY`: the zygote could not go back from a failed entry into its empty root, and
    /// exits [`jqjail_protocol::worker::EXIT_ZYGOTE_LOST`] without forking.
    Lost(String),
}

impl Running {
    fn start(
        program: &Program,
        leave_root: bool,
        code_pages: crate::config::CodePages,
    ) -> io::Result<Running> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        // Only the supervisor's end is non-blocking; the zygote waits for requests.
        nix::fcntl::fcntl(
            &ours,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(io::Error::from)?;
        let mut args = vec![
            ZYGOTE_ARG.to_string(),
            format!("parent={}", std::process::id()),
        ];
        if leave_root {
            args.push(ZYGOTE_LEAVES_ROOT.to_string());
        }
        if code_pages == crate::config::CodePages::File {
            args.push(ZYGOTE_FILE_CODE.to_string());
        }
        let pid = exec(program, &args, &theirs, None)?;
        drop(theirs);
        let child = Child::adopt(pid, None)?;
        // SAFETY: `ours` is an owned, valid descriptor that the AsyncFd takes ownership of; it
        // is neither replaced nor closed while registered.
        let control = unsafe {
            AsyncFd::register_with_interest(ours, Interest::READABLE | Interest::WRITABLE)
        }?;
        tracing::info!(pid, "worker zygote started");
        Ok(Running {
            child,
            control,
            pending: false,
        })
    }

    /// One request and its answer. The error means the zygote is broken (the socket failed,
    /// closed or went silent, or the answer is not one of the three).
    async fn request(&mut self, startup: &StartupArgs, fds: &WorkerFds) -> io::Result<Answer> {
        self.pending = true;
        let text = startup.to_args().join("\n");
        let attached = [fds.theirs.as_raw_fd(), fds.err_write.as_raw_fd()];
        let cmsgs = [ControlMessage::ScmRights(&attached)];
        let iov = [IoSlice::new(text.as_bytes())];
        self.control
            .async_io(Interest::WRITABLE, |fd| {
                sendmsg::<()>(fd.as_raw_fd(), &iov, &cmsgs, MsgFlags::MSG_NOSIGNAL, None)
                    .map_err(io::Error::from)
            })
            .await?;
        let mut buf = [0u8; 1024];
        let answer = tokio::time::timeout(
            ANSWER_TIMEOUT,
            self.control.async_io(Interest::READABLE, |fd| {
                recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(io::Error::from)
            }),
        )
        .await
        .map_err(|_| {
            io::Error::other(format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()))
        })??;
        if answer == 0 {
            return Err(io::Error::other("the zygote closed its socket"));
        }
        self.pending = false;
        let answer = String::from_utf8_lossy(&buf[..answer]);
        if let Some(why) = answer.strip_prefix("err ") {
            return Ok(Answer::Failed(why.to_string()));
        }
        if let Some(why) = answer.strip_prefix("lost ") {
            return Ok(Answer::Lost(why.to_string()));
        }
        answer
            .strip_prefix("ok ")
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
            .filter(|pid| *pid > 0)
            .map(Answer::Forked)
            .ok_or_else(|| io::Error::other(format!("the zygote answered `{answer}`")))
    }
}
