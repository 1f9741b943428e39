//! Defence in depth beyond rlimits and seccomp: new namespaces and an empty, read-only root.
//! Each part is switchable; the supervisor turns off, and logs, any part this host refuses
//! (`jqjail_supervisor::pool::negotiate_isolation`).
//!
//! - `user`: for a daemon that is not root, a new user namespace whose root maps to the
//!   daemon's own uid: what lets an unprivileged process enter the namespaces below. A root
//!   daemon needs none: its worker enters them with root's own privileges, then changes to a
//!   uid of its own in one `setresuid` (`crate::confine`). Entering a user namespace as root
//!   would need the worker, by then an unprivileged uid, to be dumpable while it writes its own
//!   uid map, and for that window any process of that uid could ptrace it.
//! - `ipc_uts`: new IPC and UTS namespaces (no System V IPC or hostname shared with the host).
//! - `net`: a new network namespace with no interfaces (seccomp already forbids `socket`).
//! - `empty_root`: a new mount namespace, an empty tmpfs mounted read-only over `/tmp` there,
//!   made its root by `pivot_root`, and the host's root detached: no mount of the host is left
//!   in the namespace (`chroot` into it where the host refuses `pivot_root`). The zygote of a
//!   root daemon makes such a root once for itself where the host allows all of it
//!   ([`enter_zygote_root`]); each worker it forks then needs only a new mount namespace, a
//!   copy of the zygote's, in which nothing but that read-only tmpfs is within reach (and no
//!   other mount is left, unless the daemon runs in a chroot of its own).
//!
//! Never a PID namespace: a worker that were PID 1 of one would ignore its own SIGABRT and
//! SIGXCPU.

use jqjail_protocol::worker::Isolation;
use std::ffi::CStr;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// The directory the empty root is mounted over (inside the worker's, or the zygote's, own
/// mount namespace).
const ROOT_MOUNT_POINT: &CStr = c"/tmp";

/// A part of the isolation this host refused.
#[derive(Debug, thiserror::Error)]
#[error("isolation {part}: {source}")]
pub struct Refused {
    /// Which part (see [`Isolation::NAMES`]).
    pub part: &'static str,
    /// Why.
    pub source: io::Error,
}

fn fail(part: &'static str) -> impl FnOnce(io::Error) -> Refused {
    move |source| Refused { part, source }
}

fn check(rc: libc::c_int, part: &'static str) -> Result<(), Refused> {
    if rc == 0 {
        Ok(())
    } else {
        Err(fail(part)(io::Error::last_os_error()))
    }
}

fn unshare(flags: libc::c_int, part: &'static str) -> Result<(), Refused> {
    // SAFETY: unshare takes flags only; the process is single-threaded.
    check(unsafe { libc::unshare(flags) }, part)
}

/// Applies the enabled parts, in the order that makes each possible. Returns whether the
/// worker is now in its own user namespace (where it is root, with no power outside it).
pub fn isolate(parts: Isolation) -> Result<bool, Refused> {
    // SAFETY: geteuid cannot fail.
    let user_namespace = parts.user && unsafe { libc::geteuid() } != 0;
    if user_namespace {
        enter_user_namespace()?;
    }
    if parts.ipc_uts {
        unshare(libc::CLONE_NEWIPC | libc::CLONE_NEWUTS, "ipc_uts")?;
    }
    if parts.net {
        unshare(libc::CLONE_NEWNET, "net")?;
    }
    if parts.empty_root {
        if !user_namespace && FORKED_EMPTY_ROOT.load(Ordering::Relaxed) {
            // The zygote's namespace holds only the empty root: the worker's own is a copy of
            // that one mount, with nothing of the host's to copy, detach or tear down.
            unshare(libc::CLONE_NEWNS, "empty_root")?;
        } else {
            enter_empty_root()?;
        }
    }
    Ok(user_namespace)
}

/// Whether the zygote that forked this process had entered an empty root of its own
/// ([`enter_zygote_root`]); inherited with its memory.
static FORKED_EMPTY_ROOT: AtomicBool = AtomicBool::new(false);

/// For the zygote of a root daemon, before it forks the first worker that asks for an empty
/// root: enters one itself, as a worker would (a mount namespace of its own whose root is the
/// empty read-only tmpfs, made so by `pivot_root`, the host's tree detached: its only mount,
/// unless the daemon runs in a chroot of its own), and marks its forks as starting there.
/// Each worker still enters a new mount namespace of its own, but copying it copies one mount
/// instead of the host's tree, and nothing is mounted, pivoted or detached at every start
/// (about a sixth less CPU per small request: BENCHMARKS.md).
///
/// Only the whole of it counts. Where any step fails, `pivot_root` included (a host where a
/// worker would chroot instead), the zygote goes back to the mount namespace, root and
/// working directory it had, so it holds no copy of the host's tree for its life, and each
/// worker does it all itself, as an exec'd one does, reporting a refusal as before. The way
/// back is tried first, before anything changes: a host that refuses it leaves the zygote
/// where it was, and the empty root to its workers.
///
/// Nothing the zygote or a worker does before its confinement may read the host's files
/// afterwards: the zygote reads its heap baseline from a descriptor opened before
/// (`crate::zygote`).
pub(crate) fn enter_zygote_root() -> Result<(), Stranded> {
    let refused = |e| Stranded::Refused(fail("empty_root")(e));
    let place = Place::here().map_err(refused)?;
    // Into the namespace it is in, and back to its root and working directory: where a step
    // is refused here, nothing has changed but what a refused step cannot change.
    place.go_back().map_err(|back| match back {
        GoBack::Refused(e) => refused(e),
        GoBack::Lost(e) => Stranded::Lost(e),
    })?;
    unshare(libc::CLONE_NEWNS, "empty_root").map_err(Stranded::Refused)?;
    let made = make_empty_root().and_then(|()| {
        if pivot_and_detach() {
            Ok(())
        } else {
            Err(fail("empty_root")(io::Error::other(format!(
                "pivot_root or the detach of the host's root refused: {}",
                io::Error::last_os_error()
            ))))
        }
    });
    if let Err(refused) = made {
        // The way back worked a moment ago; if it fails now, the zygote is not where it was.
        return Err(match place.go_back() {
            Ok(()) => Stranded::Refused(refused),
            Err(GoBack::Refused(e) | GoBack::Lost(e)) => Stranded::Lost(e),
        });
    }
    // pivot_root(".", ".") left the working directory at the new root; this only makes sure.
    // SAFETY: chdir with a NUL-terminated constant string.
    if unsafe { libc::chdir(c"/".as_ptr()) } != 0 {
        // In the empty root but not marked so: its forks must not come from here.
        return Err(Stranded::Lost(io::Error::last_os_error()));
    }
    FORKED_EMPTY_ROOT.store(true, Ordering::Relaxed);
    Ok(())
}

/// Why the zygote has no empty root of its own.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stranded {
    /// A step was refused; the zygote is where it was.
    #[error("{0}")]
    Refused(Refused),
    /// The zygote is not where it was (its namespace, root or working directory moved, out of
    /// a chroot perhaps) and cannot go back: it must not fork again.
    #[error("the zygote cannot return to its mount namespace, root and working directory: {0}")]
    Lost(io::Error),
}

/// Why [`Place::go_back`] did not.
enum GoBack {
    /// `setns` was refused: nothing moved.
    Refused(io::Error),
    /// The namespace was entered, which moved the root and working directory to its root,
    /// and they could not be chosen again.
    Lost(io::Error),
}

/// A process's mount namespace, root and working directory, held open to return to.
struct Place {
    namespace: std::fs::File,
    root: std::fs::File,
    working: std::fs::File,
}

impl Place {
    fn here() -> io::Result<Place> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = |path: &str| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(path)
        };
        Ok(Place {
            namespace: std::fs::File::open("/proc/self/ns/mnt")?,
            root: dir("/")?,
            working: dir(".")?,
        })
    }

    /// Back to this place. Entering a mount namespace moves the root and working directory
    /// to the namespace's root: a daemon started in a chroot would have its zygote leave it.
    /// So the root is chosen again wherever it is not the very same mount and directory as
    /// before (the same directory reached through another mount, as in a chroot into a bind
    /// of `/`, is not), then the working directory.
    fn go_back(&self) -> Result<(), GoBack> {
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a descriptor this value owns; the zygote holds CAP_SYS_ADMIN and
        // CAP_SYS_CHROOT, and is single-threaded.
        if unsafe { libc::setns(self.namespace.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
            return Err(GoBack::Refused(io::Error::last_os_error()));
        }
        let was = mount_and_inode(self.root.as_raw_fd(), c"");
        let now = mount_and_inode(libc::AT_FDCWD, c"/");
        let lost = || GoBack::Lost(io::Error::last_os_error());
        // SAFETY: fchdir and chroot on descriptors this value owns, or with a NUL-terminated
        // constant string.
        unsafe {
            if !matches!((was, now), (Some(a), Some(b)) if a == b)
                && (libc::fchdir(self.root.as_raw_fd()) != 0 || libc::chroot(c".".as_ptr()) != 0)
            {
                return Err(lost());
            }
            if libc::fchdir(self.working.as_raw_fd()) != 0 {
                return Err(lost());
            }
        }
        Ok(())
    }
}

/// The mount, device and inode of `path` relative to `dir` (of `dir` itself when `path` is
/// empty); `None` where the kernel does not say which mount.
fn mount_and_inode(dir: libc::c_int, path: &CStr) -> Option<(u64, u32, u32, u64)> {
    let flags = if path.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        0
    };
    // SAFETY: statx writes one `struct statx` into a value this frame owns; the path is
    // NUL-terminated.
    let stx = unsafe {
        let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
        let wanted = libc::STATX_INO | libc::STATX_MNT_ID;
        if libc::statx(dir, path.as_ptr(), flags, wanted, stx.as_mut_ptr()) != 0 {
            return None;
        }
        stx.assume_init()
    };
    (stx.stx_mask & libc::STATX_MNT_ID != 0).then_some((
        stx.stx_mnt_id,
        stx.stx_dev_major,
        stx.stx_dev_minor,
        stx.stx_ino,
    ))
}

/// For a daemon that is not root. Writing its own uid map needs the worker dumpable (it is,
/// as the daemon's child; `/proc/self` is its own then); it stops being so right after. Only
/// processes of the daemon's own uid could attach meanwhile: under the systemd unit that is
/// a dynamic uid no other process has, and for a private daemon the user whose data it is.
fn enter_user_namespace() -> Result<(), Refused> {
    check(
        // SAFETY: PR_SET_DUMPABLE takes a flag and touches no memory.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) },
        "user",
    )?;
    // SAFETY: credential queries cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    unshare(libc::CLONE_NEWUSER, "user")?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(fail("user"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("0 {uid} 1"))?;
    write("gid_map", format!("0 {gid} 1"))?;
    // SAFETY: PR_SET_DUMPABLE takes a flag; not dumpable means no ptrace by same-uid processes.
    check(
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) },
        "user",
    )
}

fn enter_empty_root() -> Result<(), Refused> {
    unshare(libc::CLONE_NEWNS, "empty_root")?;
    make_empty_root()?;
    // The empty tmpfs becomes the namespace's root, and the host's root is detached: no mount
    // of the host is left in the namespace, not even one a chroot escape could reach. Where
    // the host refuses either step (a root that is not a mount point, as in an initramfs; a
    // container's seccomp profile), a chroot into it (the working directory either way) as
    // before.
    // SAFETY: chroot and chdir with NUL-terminated constant strings; they change only this
    // process's root and working directory.
    unsafe {
        if !pivot_and_detach() {
            check(libc::chroot(c".".as_ptr()), "empty_root")?;
        }
        check(libc::chdir(c"/".as_ptr()), "empty_root")
    }
}

/// In a new mount namespace: makes every mount private, mounts the empty read-only tmpfs over
/// [`ROOT_MOUNT_POINT`] and makes it the working directory.
fn make_empty_root() -> Result<(), Refused> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: mount and chdir with NUL-terminated constant strings or null pointers where the
    // kernel allows them; they change only this process's own mount namespace.
    unsafe {
        // Nothing this namespace mounts may propagate back to the host.
        check(
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
            "empty_root",
        )?;
        check(
            libc::mount(
                c"jqjail-empty".as_ptr(),
                ROOT_MOUNT_POINT.as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                c"size=4k,nr_inodes=2,mode=0555".as_ptr().cast(),
            ),
            "empty_root",
        )?;
        check(
            libc::mount(
                std::ptr::null(),
                ROOT_MOUNT_POINT.as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                std::ptr::null(),
            ),
            "empty_root",
        )?;
        check(libc::chdir(ROOT_MOUNT_POINT.as_ptr()), "empty_root")
    }
}

/// From inside the empty root ([`make_empty_root`]): makes it the namespace's root with
/// `pivot_root(".", ".")`, which stacks the host's root on it, and detaches that. False where
/// the host refuses either step (errno says why).
fn pivot_and_detach() -> bool {
    // SAFETY: pivot_root and umount2 with NUL-terminated constant strings; they change only
    // this process's own mount namespace.
    unsafe {
        libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) == 0
            && libc::umount2(c".".as_ptr(), libc::MNT_DETACH) == 0
    }
}
