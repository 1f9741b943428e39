//! Defence in depth beyond rlimits and seccomp: new namespaces and an empty, read-only root.
//! Each part is switchable; the supervisor turns off, and logs, any part this host refuses
//! (`jqjail_supervisor::pool::negotiate_isolation`).
//!
//! - `user`: a new user namespace. As root the worker first becomes `nobody`, so the
//!   namespace's root maps to `nobody` outside; otherwise to the daemon's own uid.
//! - `ipc_uts`: new IPC and UTS namespaces (no System V IPC or hostname shared with the host).
//! - `net`: a new network namespace with no interfaces (seccomp already forbids `socket`).
//! - `empty_root`: a new mount namespace, an empty tmpfs mounted read-only over `/tmp` there,
//!   and `chroot` into it: no file of the host is reachable by path.
//!
//! Never a PID namespace: a worker that were PID 1 of one would ignore its own SIGABRT and
//! SIGXCPU (research/feasibility.md §6).

use crate::confine::{ConfineError, NOBODY};
use jqjail_protocol::worker::Isolation;
use std::ffi::CStr;
use std::io;

/// The directory the empty root is mounted over (inside the worker's own mount namespace).
const ROOT_MOUNT_POINT: &CStr = c"/tmp";

fn fail(part: &'static str) -> impl FnOnce(io::Error) -> ConfineError {
    move |source| ConfineError::Isolation { part, source }
}

fn check(rc: libc::c_int, part: &'static str) -> Result<(), ConfineError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(fail(part)(io::Error::last_os_error()))
    }
}

fn unshare(flags: libc::c_int, part: &'static str) -> Result<(), ConfineError> {
    // SAFETY: unshare takes flags only; the process is single-threaded.
    check(unsafe { libc::unshare(flags) }, part)
}

/// Applies the enabled parts, in the order that makes each possible. Returns whether the
/// worker is now in its own user namespace (where it is root, with no power outside it).
pub fn isolate(parts: Isolation) -> Result<bool, ConfineError> {
    if parts.user {
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
    Ok(parts.user)
}

fn enter_user_namespace() -> Result<(), ConfineError> {
    // SAFETY: plain credential queries and changes on the calling, single-threaded process.
    unsafe {
        if libc::geteuid() == 0 {
            check(libc::setgroups(0, std::ptr::null()), "user")?;
            check(libc::setresgid(NOBODY, NOBODY, NOBODY), "user")?;
            check(libc::setresuid(NOBODY, NOBODY, NOBODY), "user")?;
            // The uid change made /proc/self root-owned; the maps below must be writable.
            check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0), "user")?;
        }
    }
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

fn enter_empty_root() -> Result<(), ConfineError> {
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
        check(libc::chroot(c".".as_ptr()), "empty_root")?;
        check(libc::chdir(c"/".as_ptr()), "empty_root")?;
    }
    Ok(())
}
