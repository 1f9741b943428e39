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
//!   in the namespace (`chroot` into it where the host refuses `pivot_root`).
//!
//! Never a PID namespace: a worker that were PID 1 of one would ignore its own SIGABRT and
//! SIGXCPU.

use jqjail_protocol::worker::Isolation;
use std::ffi::CStr;
use std::io;

/// The directory the empty root is mounted over (inside the worker's own mount namespace).
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
        enter_empty_root()?;
    }
    Ok(user_namespace)
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
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: mount, chdir and chroot with NUL-terminated constant strings or null pointers
    // where the kernel allows them; they change only this process's own mount namespace.
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
        check(libc::chdir(ROOT_MOUNT_POINT.as_ptr()), "empty_root")?;
        // The empty tmpfs becomes the namespace's root, and the host's root, stacked on it by
        // pivot_root(".", "."), is detached: no mount of the host is left in the namespace,
        // not even one a chroot escape could reach. Where the host refuses either step (a
        // root that is not a mount point, as in an initramfs; a container's seccomp profile),
        // a chroot into it (the working directory either way) as before.
        let detached = libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) == 0
            && libc::umount2(c".".as_ptr(), libc::MNT_DETACH) == 0;
        if !detached {
            check(libc::chroot(c".".as_ptr()), "empty_root")?;
        }
        check(libc::chdir(c"/".as_ptr()), "empty_root")?;
    }
    Ok(())
}
