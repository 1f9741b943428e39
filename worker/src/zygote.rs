//! The zygote: a small, single-threaded process, exec'd once by the supervisor, that forks
//! workers on request. A forked worker skips what an exec'd one pays for at every start
//! (exec, the dynamic loader, glibc's CPU-feature probing, parsing the jaq prelude) and still
//! applies the whole confinement of `crate::confine` and the allowlist itself, as a fresh
//! process that serves one job.
//!
//! The exchange on the control socket (fd 3, SOCK_SEQPACKET, so each message arrives whole):
//! 1. supervisor → zygote: the worker's startup arguments ([`StartupArgs::to_args`], one per
//!    line), with two descriptors attached (SCM_RIGHTS): the worker's end of its socketpair
//!    and the write end of its stderr pipe;
//! 2. zygote → supervisor: `ok PID`, or `err WHY` when the fork failed, or `lost WHY` when
//!    the zygote could not go back from a failed entry into its empty root (it then exits
//!    `EXIT_ZYGOTE_LOST`, and forks nothing).
//!
//! The zygote forks with `CLONE_PARENT`, so each worker is the supervisor's own child: the
//! supervisor waits for it, reads its resource usage and signals it exactly as it does an
//! exec'd worker, and the worker's parent check and parent-death signal refer to the
//! supervisor. The zygote has no children, and exits when the supervisor closes the socket.
//!
//! What a worker inherits from the zygote: its memory (the parsed prelude and the workers'
//! seccomp program, into which each writes its own pid, and nothing from any request; the
//! zygote never sees a job; its machine code, moved into huge pages by `crate::text`), its
//! address-space layout (the same for every worker, where exec would draw a new one), and
//! its descriptors, which the worker closes before it runs anything
//! (`confine::keep_only_fd3`).

use crate::confine::{clear_environment, die_with_parent, keep_only_fd3, name_process};
use crate::engine::Engine;
use crate::text::Moved;
use jqjail_protocol::worker::{
    EXIT_SETUP, EXIT_ZYGOTE_LOST, StartupArgs, WORKER_FD, ZYGOTE_FILE_CODE, ZYGOTE_LEAVES_ROOT,
};
use nix::sys::socket::{MsgFlags, send};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The zygote's process name (`/proc/PID/comm`).
pub const ZYGOTE_NAME: &std::ffi::CStr = c"jqjail-zygote";

/// Largest request: the startup arguments, a few dozen bytes in practice.
const MAX_REQUEST_BYTES: usize = 1024;

/// Largest answer: `ok PID`, or `err WHY` with WHY cut to fit.
const MAX_ANSWER_BYTES: usize = 1024;

/// What a forked child does once it holds its descriptors (stderr on 2, the job socket on 3):
/// its whole life, ending in its exit status.
pub type Life = fn(&Engine, &StartupArgs) -> i32;

/// The zygote's life; returns its exit status. `args` is `["parent=PID"]`, then optionally
/// [`ZYGOTE_LEAVES_ROOT`] and [`ZYGOTE_FILE_CODE`], in that order.
pub fn run(args: &[String]) -> i32 {
    run_with(args, crate::serve::serve_forked)
}

/// [`run`], with each forked child living `life`. Public so that the escape probes can run
/// their probes in workers forked exactly as the daemon's are.
pub fn run_with(args: &[String], life: Life) -> i32 {
    let Some((parent, leaves_root, file_code)) = zygote_args(args) else {
        crate::say!(
            "jqjail zygote: expected parent=PID, then optionally {ZYGOTE_LEAVES_ROOT} and {ZYGOTE_FILE_CODE} in that order; got {args:?}"
        );
        return EXIT_SETUP;
    };
    let set_up = keep_only_fd3().and_then(|()| {
        clear_environment();
        die_with_parent(parent)?;
        name_process(ZYGOTE_NAME)?;
        least_privilege()?;
        // What every fork's bounding set holds, so that a worker drops only that.
        crate::confine::record_forked_bounding_set()
    });
    if let Err(why) = set_up {
        crate::say!("jqjail zygote: {why}");
        return EXIT_SETUP;
    }
    // Everything a worker would otherwise build at every start: parsed once, shared
    // copy-on-write by every fork.
    let engine = Engine::new();
    let _ = std::collections::hash_map::RandomState::new();
    // One evaluation here as well (every worker still runs its own after its confinement):
    // the CPU feature checks behind the string search and std's SIMD paths run once and are
    // inherited. Each check is a `cpuid`, which traps to the hypervisor in a VM; measured in
    // the workers' throughput profile at about 4 % of their CPU when each fork ran them anew.
    crate::enter::warm_up(&engine);
    // Still single-threaded, and before the allowlist (which has no mremap): the code a fork
    // shares in a few page-table entries instead of faulting in and tearing down.
    if !file_code && let Moved::No(why) = crate::text::move_code_to_huge_pages() {
        crate::say!("jqjail zygote: the code stays in the executable's pages: {why}");
    }
    // The workers' allowlist, built once; each worker writes its pid into a copy.
    if let Err(why) = crate::seccomp::prepare() {
        crate::say!("jqjail zygote: building the workers' seccomp allowlist failed: {why}");
        return EXIT_SETUP;
    }
    // Last: the zygote's own allowlist, which its children inherit until they install theirs.
    if let Err(why) = crate::seccomp::install_zygote() {
        crate::say!("jqjail zygote: installing its seccomp allowlist failed: {why}");
        return EXIT_SETUP;
    }
    // Opened while /proc is in reach: once in its empty root, the zygote reads its heap
    // baseline only through this.
    let mut baseline = Baseline {
        status: std::fs::File::open("/proc/self/status")
            .inspect_err(|e| {
                crate::say!(
                    "jqjail zygote: cannot open /proc/self/status ({e}); each worker reads its own heap baseline and enters its own empty root"
                )
            })
            .ok(),
        known: None,
    };
    let mut root = if leaves_root {
        Root::Left
    } else {
        Root::NotTried
    };
    // The loop allocates nothing on its way to a fork and back (the request and the answer in
    // buffers on the stack, its lines parsed as they come): a page it writes while the fork's
    // child still shares it is copied at that write (a copy-on-write fault). With malloc and
    // free here (the heap, the allocator's state in libc, errno) that was 12–13 pages a fork;
    // now its stack and the lock `mallinfo2` takes (`Baseline`) are 4.
    let mut buf = [0u8; MAX_REQUEST_BYTES];
    loop {
        let (text, fds) = match receive(WORKER_FD, &mut buf) {
            Ok(Some(request)) => request,
            // The supervisor closed the socket: it is stopping, or has replaced this zygote.
            Ok(None) => return 0,
            Err(why) => {
                crate::say!("jqjail zygote: {why}");
                return EXIT_SETUP;
            }
        };
        let reply = match &fds {
            [Some(sock), Some(stderr)] => {
                match StartupArgs::parse(text.lines()) {
                    Ok(startup) => match prepare_fork(&mut root, &mut baseline, &startup) {
                        Ok(()) => fork_worker(&engine, &startup, sock, stderr, life),
                        Err(Replace::Because(why)) => {
                            // No answer: the supervisor finds the socket closed, replaces this
                            // zygote, and the new one serves the next request.
                            crate::say!("jqjail zygote: {why}; exiting to be replaced");
                            return EXIT_SETUP;
                        }
                        Err(Replace::Lost(why)) => {
                            // Said, so that its replacement does not try, and serves this
                            // request.
                            crate::say!("jqjail zygote: {why}; exiting to be replaced");
                            let lost = format!("lost {why}");
                            let _ = send(WORKER_FD, lost.as_bytes(), MsgFlags::empty());
                            return EXIT_ZYGOTE_LOST;
                        }
                    },
                    Err(why) => Err(why),
                }
            }
            _ => Err(format!(
                "a request carries the worker's socket and stderr, 2 descriptors, not {}",
                fds.iter().flatten().count()
            )),
        };
        // The worker has its copies; the zygote keeps none (the next worker must not inherit
        // this one's socket, even though it would close it).
        drop(fds);
        let mut answer = [0u8; MAX_ANSWER_BYTES];
        let mut space = &mut answer[..];
        // A write past the buffer's end only shortens a failure's reason: `ok PID` fits.
        let _ = match reply {
            Ok(pid) => write!(space, "ok {pid}"),
            Err(why) => write!(space, "err {why}"),
        };
        let len = MAX_ANSWER_BYTES - space.len();
        if let Err(e) = send(WORKER_FD, &answer[..len], MsgFlags::empty()) {
            crate::say!("jqjail zygote: cannot reply: {e}");
            return EXIT_SETUP;
        }
    }
}

/// The zygote's arguments: its parent's pid, and whether it leaves the empty root to each
/// worker and its code in file pages; `None` for anything else.
fn zygote_args(args: &[String]) -> Option<(u32, bool, bool)> {
    let (parent, rest) = args.split_first()?;
    let parent = parent.strip_prefix("parent=")?.parse::<u32>().ok()?;
    let mut rest = rest.iter().map(String::as_str).peekable();
    let leaves_root = rest.next_if_eq(&ZYGOTE_LEAVES_ROOT).is_some();
    let file_code = rest.next_if_eq(&ZYGOTE_FILE_CODE).is_some();
    rest.next()
        .is_none()
        .then_some((parent, leaves_root, file_code))
}

/// Whether the zygote is in an empty root of its own (`crate::isolate::enter_zygote_root`).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Root {
    /// No request has asked for an empty root yet.
    NotTried,
    /// It is: each worker's mount namespace is a copy of the zygote's one mount.
    Entered,
    /// Not for this zygote (told so by `root=workers`, not root, no heap baseline, or the
    /// host refused a step, after which the zygote is back where it was): each worker enters
    /// its own, as an exec'd one does, and reports a refusal itself.
    Left,
}

/// Why this zygote cannot fork the worker asked for, and must be replaced by a new one.
enum Replace {
    /// The next zygote may be as this one was; it exits `EXIT_SETUP` without an answer.
    Because(String),
    /// It could not go back from a failed entry into its empty root: it answers `lost` and
    /// exits `EXIT_ZYGOTE_LOST`, and the next zygote must not try (it would be lost too, and
    /// no worker would start).
    Lost(String),
}

/// Before each fork: enters the zygote's empty root at the first request that asks for one,
/// and sets the heap baseline the worker will take.
fn prepare_fork(
    root: &mut Root,
    baseline: &mut Baseline,
    startup: &StartupArgs,
) -> Result<(), Replace> {
    if *root == Root::NotTried && startup.isolation.empty_root {
        *root = enter_root(baseline)?;
    }
    if *root == Root::Entered && !startup.isolation.empty_root {
        // A worker without an empty root (the isolation negotiated down after the first
        // start) would share this zygote's mount namespace: a new zygote forks it instead.
        return Err(Replace::Because(
            "a worker without an empty root was asked for, after this zygote entered its own"
                .to_string(),
        ));
    }
    let forked = baseline.current();
    if *root == Root::Entered && forked.is_none() {
        // A worker could not read its own: /proc is out of its reach too.
        return Err(Replace::Because(
            "the zygote cannot read its heap baseline".to_string(),
        ));
    }
    crate::confine::set_forked_baseline(forked.unwrap_or(0));
    Ok(())
}

/// Enters the zygote's empty root when it can; the first request that asks for one calls
/// this, so that a host refusing it is found by the workers' own start, as before
/// (`jqjail_supervisor::pool::negotiate_isolation`).
fn enter_root(baseline: &mut Baseline) -> Result<Root, Replace> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // Not root: each worker enters a user namespace first, and its empty root in there.
        return Ok(Root::Left);
    }
    if baseline.current().is_none() {
        // Its forks would have to read their own, which they cannot in an empty root.
        return Ok(Root::Left);
    }
    match crate::isolate::enter_zygote_root() {
        Ok(()) => Ok(Root::Entered),
        Err(crate::isolate::Stranded::Refused(why)) => {
            crate::say!("jqjail zygote: {why}; each worker enters its own empty root");
            Ok(Root::Left)
        }
        Err(lost) => Err(Replace::Lost(lost.to_string())),
    }
}

/// The capabilities a root zygote keeps, because its children need them to confine
/// themselves before they drop every capability (`crate::confine`): CAP_SYS_ADMIN to enter
/// namespaces and mount the empty root, CAP_SYS_CHROOT to enter it, CAP_SETUID and
/// CAP_SETGID to take the worker's uid and gid, CAP_SETPCAP to empty the bounding set.
/// (Numbers from `linux/capability.h`: the libc crate does not define them.)
pub const ZYGOTE_CAPS: [u32; 5] = [
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    8,  // CAP_SETPCAP
    18, // CAP_SYS_CHROOT
    21, // CAP_SYS_ADMIN
];

/// The zygote holds only what its children's set-up needs: no_new_privs (it never execs, and
/// neither do they), and, when root, only [`ZYGOTE_CAPS`] in its bounding, effective and
/// permitted sets and none inheritable or ambient. Its seccomp allowlist
/// (`crate::seccomp::zygote_allowlist`) comes after the warm-up, just before its loop.
fn least_privilege() -> Result<(), crate::confine::ConfineError> {
    let fail = |step: &'static str| {
        move |source: std::io::Error| crate::confine::ConfineError::Sys { step, source }
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes a flag and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(fail("prctl(PR_SET_NO_NEW_PRIVS)")(
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(()); // no capabilities to begin with
    }
    for cap in 0..=63u32 {
        if ZYGOTE_CAPS.contains(&cap) {
            continue;
        }
        // SAFETY: PR_CAPBSET_DROP takes a capability number and touches no memory.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            // EINVAL past the kernel's last capability ends the loop.
            break;
        }
    }
    let mask: u64 = ZYGOTE_CAPS.iter().map(|c| 1u64 << c).sum();
    crate::confine::set_capabilities(mask, mask).map_err(fail("capset"))
}

/// The zygote's data segment size (VmData), which a worker forked now starts with and sets its
/// RLIMIT_DATA above. Reading it from /proc/self/status was a tenth of each worker's start-up
/// CPU (the throughput profile, BENCHMARKS.md); the zygote reads it again only when its heap
/// has moved. The zygote is single-threaded and only malloc maps memory in it, so its data
/// segment changes only with the program break, the main arena's size (which glibc extends by
/// mmap when the break cannot grow) or malloc's mapped chunks: the mark.
struct Baseline {
    /// `/proc/self/status`, opened before the zygote left /proc behind; `None`: not readable.
    status: Option<std::fs::File>,
    known: Option<(u64, HeapMark)>,
}

/// Where the heap stands: the program break, the bytes malloc holds from the system for its
/// arenas, and those in its mapped chunks.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct HeapMark(usize, usize, usize);

impl HeapMark {
    fn now() -> HeapMark {
        // SAFETY: sbrk(0) reads the current break; mallinfo2 reads malloc's counters. Neither
        // changes anything, and the zygote has no other thread.
        let (brk, info) = unsafe { (libc::sbrk(0) as usize, libc::mallinfo2()) };
        HeapMark(brk, info.arena, info.hblkhd)
    }
}

impl Baseline {
    /// VmData now, in bytes; `None` when it cannot be read (each worker then reads its own,
    /// where it still can). The read allocates nothing, so it cannot move the heap it measures.
    fn current(&mut self) -> Option<u64> {
        let status = self.status.as_ref()?;
        let now = HeapMark::now();
        if self.known.is_none_or(|(_, mark)| mark != now) {
            self.known = crate::confine::data_baseline_bytes_at(status)
                .ok()
                .map(|bytes| (bytes, now));
        }
        self.known.map(|(bytes, _)| bytes)
    }
}

/// The descriptors a request carries, in the order attached.
type Fds = [Option<OwnedFd>; 2];

/// Room for one SCM_RIGHTS message of two descriptors, CMSG_SPACE(8) on 64-bit Linux (a unit
/// test checks it): a request with more is cut short (MSG_CTRUNC, the rest closed by the
/// kernel) and refused.
const CONTROL_BYTES: usize = 24;

/// Receives one request on `sock` into `buf`: its text and the descriptors attached. `None`
/// at end of stream. Allocates nothing (the loop's comment says why); the part of `buf` past
/// the request is zeroed, so a fork inherits no earlier request's text.
fn receive(sock: RawFd, buf: &mut [u8; MAX_REQUEST_BYTES]) -> Result<Option<(&str, Fds)>, String> {
    #[repr(C, align(8))]
    struct Space([u8; CONTROL_BYTES]);
    let mut space = Space([0; CONTROL_BYTES]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero bytes are a valid `msghdr` (no name, no buffers yet).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.0.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_BYTES;
    // SAFETY: recvmsg writes at most `iov_len` bytes into `buf` and `msg_controllen` bytes into
    // `space`, both owned by this frame, and updates `msg`.
    let len = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if len < 0 {
        return Err(format!(
            "receiving a request: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut fds: Fds = [None, None];
    let mut extra = 0;
    // SAFETY: `msg` was filled in by recvmsg. The walk reads each header that CMSG_FIRSTHDR
    // and CMSG_NXTHDR find within the control length the kernel set, and no payload past
    // that length, whatever a header's own length says. Each SCM_RIGHTS descriptor was
    // installed by the kernel in this process for this message alone: each is owned here from
    // now on (and closed when dropped, those beyond room too).
    unsafe {
        let control_end = msg.msg_control as usize + msg.msg_controllen;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let payload = ((*cmsg).cmsg_len as usize)
                    .min(control_end - cmsg as usize)
                    .saturating_sub(libc::CMSG_LEN(0) as usize);
                for i in 0..payload / std::mem::size_of::<RawFd>() {
                    let fd = OwnedFd::from_raw_fd(data.add(i).read_unaligned());
                    match fds.iter_mut().find(|slot| slot.is_none()) {
                        Some(slot) => *slot = Some(fd),
                        None => extra += 1,
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let len = len as usize;
    buf[len..].fill(0);
    if len == 0 && fds[0].is_none() {
        return Ok(None);
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 || extra > 0 {
        return Err(format!(
            "a request was truncated (over {MAX_REQUEST_BYTES} bytes or 2 descriptors)"
        ));
    }
    let text =
        std::str::from_utf8(&buf[..len]).map_err(|e| format!("a request is not UTF-8: {e}"))?;
    Ok(Some((text, fds)))
}

/// Forks one worker as the supervisor's child; returns its pid. The child never returns.
fn fork_worker(
    engine: &Engine,
    startup: &StartupArgs,
    sock: &OwnedFd,
    stderr: &OwnedFd,
    life: Life,
) -> Result<i32, String> {
    // A raw clone, not glibc's fork: fork cannot ask for CLONE_PARENT. The zygote is
    // single-threaded and between requests, so no lock is held that the child would inherit
    // locked, and glibc (2.34 and later) signals the calling thread by its real tid, so
    // abort() in the child still raises SIGABRT on itself.
    // SAFETY: clone with a null stack pointer duplicates the calling process like fork; the
    // other arguments (tid pointers, TLS) are unused without the flags that read them.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match pid {
        -1 => Err(format!("clone: {}", std::io::Error::last_os_error())),
        0 => {
            // SAFETY: dup2 onto fds 2 and 3 replaces the zygote's stderr and its control socket
            // in the child only; the originals are closed by the confinement's close_range.
            let moved = unsafe {
                libc::dup2(stderr.as_raw_fd(), 2) == 2
                    && libc::dup2(sock.as_raw_fd(), WORKER_FD) == WORKER_FD
            };
            let code = if moved {
                life(engine, startup)
            } else {
                EXIT_SETUP
            };
            // SAFETY: the child ends here without returning into the zygote's loop or running
            // its destructors.
            unsafe { libc::_exit(code) }
        }
        pid => Ok(pid as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SOCK_SEQPACKET pair, as the zygote's control socket is.
    fn pair() -> (OwnedFd, OwnedFd) {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    fn send_request(to: &OwnedFd, text: &[u8], fds: &[RawFd]) {
        use nix::sys::socket::{ControlMessage, sendmsg};
        let iov = [std::io::IoSlice::new(text)];
        let cmsgs = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsgs };
        sendmsg::<()>(to.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None).unwrap();
    }

    #[test]
    fn the_control_space_holds_two_descriptors_exactly() {
        let two = std::mem::size_of::<RawFd>() as u32 * 2;
        // SAFETY: CMSG_SPACE only computes a size.
        let (two, three) = unsafe { (libc::CMSG_SPACE(two), libc::CMSG_SPACE(two + 4)) };
        assert_eq!(CONTROL_BYTES, two as usize);
        assert!(CONTROL_BYTES < three as usize);
    }

    #[test]
    fn a_request_is_received_whole_with_its_two_descriptors_and_nothing_left_of_the_last() {
        let (ours, theirs) = pair();
        let (a, b) = pair();
        let mut buf = [0xAA; MAX_REQUEST_BYTES];
        send_request(
            &theirs,
            b"parent=1\nheap=2",
            &[a.as_raw_fd(), b.as_raw_fd()],
        );
        let (text, fds) = receive(ours.as_raw_fd(), &mut buf).unwrap().unwrap();
        assert_eq!(text, "parent=1\nheap=2");
        let [Some(x), Some(y)] = &fds else {
            panic!("two descriptors: {fds:?}")
        };
        // New descriptors, open, and close-on-exec.
        for fd in [x, y] {
            assert!(![a.as_raw_fd(), b.as_raw_fd()].contains(&fd.as_raw_fd()));
            // SAFETY: F_GETFD on a descriptor this test owns.
            let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
            assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        }
        assert!(
            buf[16..].iter().all(|&b| b == 0),
            "the rest of the buffer zeroed"
        );
    }

    #[test]
    fn fewer_descriptors_and_an_empty_text_are_told_apart_from_the_end() {
        let (ours, theirs) = pair();
        let (a, _b) = pair();
        let mut buf = [0; MAX_REQUEST_BYTES];
        send_request(&theirs, b"x", &[a.as_raw_fd()]);
        let (_, fds) = receive(ours.as_raw_fd(), &mut buf).unwrap().unwrap();
        assert!(fds[0].is_some() && fds[1].is_none());
        send_request(&theirs, b"", &[a.as_raw_fd(), a.as_raw_fd()]);
        let (text, fds) = receive(ours.as_raw_fd(), &mut buf).unwrap().unwrap();
        assert_eq!((text, fds.iter().flatten().count()), ("", 2));
        send_request(&theirs, b"no descriptors", &[]);
        let (_, fds) = receive(ours.as_raw_fd(), &mut buf).unwrap().unwrap();
        assert!(fds.iter().all(Option::is_none));
        drop(theirs);
        assert!(receive(ours.as_raw_fd(), &mut buf).unwrap().is_none());
    }

    #[test]
    fn a_request_too_long_with_too_many_descriptors_or_not_utf8_is_refused() {
        let (ours, theirs) = pair();
        let (a, _b) = pair();
        let mut buf = [0; MAX_REQUEST_BYTES];
        let fd = a.as_raw_fd();
        send_request(&theirs, b"three", &[fd, fd, fd]);
        let refused = receive(ours.as_raw_fd(), &mut buf).unwrap_err();
        assert!(refused.contains("truncated"), "{refused}");
        send_request(&theirs, &[b'x'; MAX_REQUEST_BYTES + 1], &[fd, fd]);
        let refused = receive(ours.as_raw_fd(), &mut buf).unwrap_err();
        assert!(refused.contains("truncated"), "{refused}");
        send_request(&theirs, b"\xff\xfe", &[fd, fd]);
        let refused = receive(ours.as_raw_fd(), &mut buf).unwrap_err();
        assert!(refused.contains("UTF-8"), "{refused}");
    }

    fn startup(isolation: jqjail_protocol::worker::Isolation) -> StartupArgs {
        StartupArgs {
            parent_pid: 1,
            heap_bytes: 1 << 20,
            cpu_seconds: 1,
            max_input_bytes: 1 << 20,
            max_filter_bytes: 1 << 10,
            isolation,
            uid: 65534,
            warm_up: true,
        }
    }

    #[test]
    fn the_zygote_takes_its_options_once_each_and_in_order() {
        let args = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(zygote_args(&args(&["parent=7"])), Some((7, false, false)));
        assert_eq!(
            zygote_args(&args(&["parent=7", ZYGOTE_LEAVES_ROOT])),
            Some((7, true, false))
        );
        assert_eq!(
            zygote_args(&args(&["parent=7", ZYGOTE_FILE_CODE])),
            Some((7, false, true))
        );
        assert_eq!(
            zygote_args(&args(&["parent=7", ZYGOTE_LEAVES_ROOT, ZYGOTE_FILE_CODE])),
            Some((7, true, true))
        );
        for wrong in [
            &[][..],
            &["7"],
            &["parent=x"],
            &["parent=7", "root=zygote"],
            &["parent=7", ZYGOTE_FILE_CODE, ZYGOTE_LEAVES_ROOT],
            &["parent=7", ZYGOTE_FILE_CODE, ZYGOTE_FILE_CODE],
            &[ZYGOTE_LEAVES_ROOT, "parent=7"],
        ] {
            assert_eq!(zygote_args(&args(wrong)), None, "{wrong:?}");
        }
    }

    /// Once in its own empty root, the zygote forks no worker without one (it would share the
    /// zygote's mount namespace), and none it has no heap baseline for (the worker could not
    /// read its own): it is replaced instead. Before, and when it left the root to the
    /// workers, it forks either kind.
    #[test]
    fn a_zygote_in_its_empty_root_is_replaced_rather_than_fork_a_worker_it_cannot_confine() {
        use jqjail_protocol::worker::Isolation;
        let with = Isolation {
            empty_root: true,
            ..Isolation::NONE
        };
        let no_baseline = || Baseline {
            status: None,
            known: None,
        };
        let mut entered = Root::Entered;
        assert!(prepare_fork(&mut entered, &mut no_baseline(), &startup(Isolation::NONE)).is_err());
        assert!(prepare_fork(&mut entered, &mut no_baseline(), &startup(with)).is_err());
        let mut left = Root::Left;
        assert!(prepare_fork(&mut left, &mut no_baseline(), &startup(Isolation::NONE)).is_ok());
        assert!(prepare_fork(&mut left, &mut no_baseline(), &startup(with)).is_ok());
        // Without a baseline it never enters (the test process is not confined by this).
        let mut untried = Root::NotTried;
        assert!(prepare_fork(&mut untried, &mut no_baseline(), &startup(with)).is_ok());
        assert_eq!(untried, Root::Left);
    }

    /// The zygote has one thread; a test binary has one per running test, and their
    /// allocations move the heap under a read. So the check runs alone, in a child: this test
    /// binary again, with only this test, on one thread.
    #[test]
    fn the_baseline_is_read_again_once_the_heap_moves() {
        const ALONE: &str = "JQJAIL_TEST_ALONE";
        if std::env::var_os(ALONE).is_some() {
            return baseline_follows_the_heap();
        }
        let out = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args([
                "--exact",
                "zygote::tests::the_baseline_is_read_again_once_the_heap_moves",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(ALONE, "1")
            .output()
            .expect("the test binary runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn baseline_follows_the_heap() {
        let mut baseline = Baseline {
            status: std::fs::File::open("/proc/self/status").ok(),
            known: None,
        };
        let first = baseline.current().expect("VmData");
        let (_, mark) = baseline.known.expect("kept");
        // Kept while the heap stands: the mark is where the heap was when it was read.
        assert!(first > 0 && mark.0 > 0);
        // A chunk this large is mapped on its own: the mark moves, and the number with it.
        // (black_box: an optimised build would otherwise leave out the unused allocation.)
        let big = std::hint::black_box(vec![1u8; 64 << 20]);
        let moved = baseline.current().expect("VmData");
        assert!(
            moved >= first + (60 << 20),
            "{moved} after 64 MiB, {first} before"
        );
        drop(big);
        assert!(baseline.current().expect("VmData") < moved);
    }
}
