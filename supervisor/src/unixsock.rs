//! Unix sockets bound without following anything another user controls.
//!
//! A socket's directory is opened once (`O_DIRECTORY | O_NOFOLLOW`) and checked on that open
//! descriptor: it must be owned by this uid or root, and no one else may write to it (a
//! world-writable directory with the sticky bit, such as `/tmp`, is accepted for the main
//! socket only, where no other user can rename or remove this daemon's entries). Everything
//! after that happens relative to the descriptor, never to the path again: a stale socket is
//! found and removed with `fstatat`/`unlinkat`, and the new one is bound on a thread of its
//! own whose working directory is that descriptor (`unshare(CLONE_FS)`, `fchdir`).
//!
//! The mode is set on the socket before it is bound (`fchmod` on the unbound socket, with that
//! thread's own umask at 0, so it is exact), so the file is created with it and nothing is
//! ever `chmod`ed by name afterwards. A `chmod` by name follows symbolic links: a user who can
//! swap a directory entry between the bind and the chmod made a root daemon chmod a file of
//! their choosing (issue 34, attack 7).
//!
//! Where `unshare` is refused (Docker's and Kubernetes' default seccomp profiles refuse it
//! whatever its flags), the bind goes through `/proc/self/fd/DIR/NAME` instead, and a mode the
//! process's umask narrowed is set with `fchmodat` relative to the checked directory: no other
//! user can change its entries (nor, in a sticky one, rename or remove this daemon's), so the
//! name is still the socket just bound.
//!
//! A stale socket is told from a live one by a non-blocking connect: a listener whose backlog
//! another user filled counts as live (refused), never as a connect to wait on for ever.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;

/// Whose directories a socket may be bound in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Owned by this uid or root and writable by its owner only.
    Private,
    /// As `Private`, or world-writable with the sticky bit (`/tmp`).
    PrivateOrSticky,
}

/// Binds a listening socket at `path` with exactly `mode`, replacing a stale socket there (one
/// that refuses connections) but never a live one, nor anything that is not a socket.
pub fn bind(path: &Path, mode: u32, rule: Dir) -> io::Result<UnixListener> {
    let shown = path.display();
    let fail = |kind: io::ErrorKind, why: String| io::Error::new(kind, format!("{shown}: {why}"));
    let name = match path.file_name() {
        Some(n) if n != ".." => n,
        _ => return Err(fail(io::ErrorKind::InvalidInput, "not a file name".into())),
    };
    let name = CString::new(name.as_bytes())
        .map_err(|_| fail(io::ErrorKind::InvalidInput, "a NUL byte in the name".into()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(parent)
        .map_err(|e| fail(e.kind(), format!("opening its directory: {e}")))?;
    check_dir(&dir, rule).map_err(|why| {
        fail(
            io::ErrorKind::PermissionDenied,
            format!("its directory {}: {why}", parent.display()),
        )
    })?;
    let dir_fd = dir.as_raw_fd();
    // The rest on a thread with a working directory and umask of its own, so that the bind is
    // relative to the checked directory and the mode is exactly `mode`.
    let name_for_thread = name.clone();
    let bound = std::thread::scope(|s| {
        s.spawn(move || bind_in(dir_fd, &name_for_thread, mode, true))
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the binding thread panicked")))
    });
    bound.map_err(|e| fail(e.kind(), e.to_string()))
}

/// Refuses a directory another user could change entries of.
fn check_dir(dir: &File, rule: Dir) -> Result<(), String> {
    let meta = dir.metadata().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "owned by uid {}, not this uid ({me}) or root",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    let others_write = mode & 0o022 != 0;
    let sticky = mode & 0o1000 != 0;
    if !others_write || (rule == Dir::PrivateOrSticky && sticky) {
        Ok(())
    } else {
        Err(format!(
            "writable by others (mode {mode:04o}); another user could swap its entries"
        ))
    }
}

/// On its own thread: leaves the process's shared working directory and umask, enters the
/// checked directory, removes a stale socket named `name` there, and binds a new one.
fn bind_in(dir_fd: i32, name: &CString, mode: u32, try_own_fs: bool) -> io::Result<UnixListener> {
    // SAFETY: unshare affects only this thread's file-system context.
    let own_fs = try_own_fs && unsafe { libc::unshare(libc::CLONE_FS) } == 0;
    // The name the socket is bound and connected at: relative to this thread's working
    // directory, or through the directory's descriptor where the thread has none of its own.
    let at = if own_fs {
        // SAFETY: the working directory and umask changed here are this thread's alone.
        unsafe {
            if libc::fchdir(dir_fd) != 0 {
                return Err(io::Error::last_os_error());
            }
            libc::umask(0);
        }
        name.clone()
    } else {
        let mut via = format!("/proc/self/fd/{dir_fd}/").into_bytes();
        via.extend_from_slice(name.as_bytes());
        CString::new(via).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
    };
    remove_stale(dir_fd, name, &at)?;
    // SAFETY: socket returns a new descriptor or -1; it is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let addr = sockaddr(&at)?;
    // SAFETY: `sock` is a socket; `addr` is a valid sockaddr_un of the given length.
    unsafe {
        if libc::fchmod(sock.as_raw_fd(), mode as libc::mode_t) != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::bind(sock.as_raw_fd(), (&raw const addr).cast(), len) != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("binding: {e}")));
        }
        if libc::listen(sock.as_raw_fd(), libc::SOMAXCONN) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Without a umask of its own, the process's may have narrowed the mode.
        if !own_fs && libc::fchmodat(dir_fd, name.as_ptr(), mode as libc::mode_t, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(UnixListener::from(sock))
}

/// Removes a socket named `name` in the directory that refuses connections (left by a daemon
/// that is gone). A live socket, or anything that is not a socket, is an error.
fn remove_stale(dir_fd: i32, name: &CString, at: &CString) -> io::Result<()> {
    // SAFETY: an all-zero stat is a valid value for fstatat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, and a stat to fill.
    if unsafe { libc::fstatat(dir_fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        };
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "something that is not a socket is there; it is not replaced",
        ));
    }
    match connect_now(at) {
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
            // SAFETY: valid descriptor and NUL-terminated name.
            if unsafe { libc::unlinkat(dir_fd, name.as_ptr(), 0) } != 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!("removing the stale socket: {e}"),
                ));
            }
            Ok(())
        }
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another daemon is already listening there",
        )),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("a socket is there that cannot be told stale ({e}); it is not replaced"),
        )),
    }
}

/// Connects to the socket at `at` without waiting: a full backlog is `EAGAIN`, not a wait.
fn connect_now(at: &CString) -> io::Result<()> {
    // SAFETY: socket returns a new descriptor or -1; it is owned from here on.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let addr = sockaddr(at)?;
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: a socket and a valid sockaddr_un of the given length.
    match unsafe { libc::connect(sock.as_raw_fd(), (&raw const addr).cast(), len) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

fn sockaddr(name: &CString) -> io::Result<libc::sockaddr_un> {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a socket name of {} bytes; at most {}",
                bytes.len(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (to, &from) in addr.sun_path.iter_mut().zip(bytes) {
        *to = from as libc::c_char;
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn the_socket_gets_exactly_its_mode_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o600, 0o660, 0o666] {
            let path = dir.path().join(format!("s{mode:o}"));
            let _l = bind(&path, mode, Dir::Private).unwrap();
            assert!(
                std::fs::symlink_metadata(&path)
                    .unwrap()
                    .file_type()
                    .is_socket()
            );
            assert_eq!(mode_of(&path), mode);
        }
    }

    /// Where `unshare` is refused (a container's seccomp profile), the bind goes through the
    /// directory's descriptor and the mode is still exact, whatever the process's umask.
    #[test]
    fn without_a_file_system_context_of_its_own_the_mode_is_still_exact() {
        let dir = tempfile::tempdir().unwrap();
        let fd = File::open(dir.path()).unwrap();
        let name = CString::new("s").unwrap();
        let l = std::thread::scope(|s| {
            s.spawn(|| bind_in(fd.as_raw_fd(), &name, 0o666, false))
                .join()
                .unwrap()
        })
        .unwrap();
        assert_eq!(mode_of(&dir.path().join("s")), 0o666);
        assert!(l.local_addr().unwrap().as_pathname().is_some());
    }

    /// A listener whose backlog another user filled is live, and said so at once: a blocking
    /// connect to it waited for ever, and the daemon never started.
    #[test]
    fn a_socket_with_a_full_backlog_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let squat = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // SAFETY: listen on a socket we own, with a backlog of 0.
        assert_eq!(unsafe { libc::listen(squat.as_raw_fd(), 0) }, 0);
        let mut queued = Vec::new();
        let at = CString::new(path.as_os_str().as_bytes()).unwrap();
        while queued.len() < 64 {
            match connect_now(&at) {
                Ok(()) => queued.push(()),
                Err(_) => break,
            }
        }
        let start = std::time::Instant::now();
        let e = bind(&path, 0o600, Dir::Private).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_live_socket_and_a_file_are_kept_and_a_stale_socket_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let live = bind(&path, 0o600, Dir::Private).unwrap();
        let e = bind(&path, 0o600, Dir::Private).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        drop(live);
        bind(&path, 0o640, Dir::Private).unwrap();
        assert_eq!(mode_of(&path), 0o640);
        let file = dir.path().join("f");
        std::fs::write(&file, "keep").unwrap();
        let e = bind(&file, 0o600, Dir::Private).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }

    #[test]
    fn a_directory_others_can_write_is_refused_unless_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        for rule in [Dir::Private, Dir::PrivateOrSticky] {
            let e = bind(&open.join("s"), 0o600, rule).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        }
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(bind(&open.join("s"), 0o600, Dir::Private).is_err());
        bind(&open.join("s"), 0o600, Dir::PrivateOrSticky).unwrap();
        // The directory itself may not be a symbolic link.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(bind(&link.join("s2"), 0o600, Dir::Private).is_err());
    }

    /// Issue 34, attack 7: a user who controls a directory above the socket's swaps the
    /// socket's directory for a symbolic link the moment the socket appears (inotify tells
    /// them), so that a chmod by name after the bind lands on a file of their choosing. The
    /// old bind-then-chmod made another file mode 0666 in 2 of 40 daemon starts; its window
    /// is the few microseconds between two system calls, which this race does not reliably
    /// win on an idle machine. The bind here has no such window at all: the mode is the
    /// socket's before its name exists. The file must keep its mode, every round.
    #[test]
    fn swapping_the_directory_as_the_socket_appears_never_chmods_another_file() {
        let top = tempfile::tempdir().unwrap();
        let sub = top.path().join("sub");
        let aside = top.path().join("aside");
        let victim_dir = top.path().join("victim");
        std::fs::create_dir(&sub).unwrap();
        std::fs::create_dir(&victim_dir).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        let victim = victim_dir.join("m.sock");
        std::fs::write(&victim, "secret").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        // SAFETY: inotify calls with valid arguments; the descriptor is owned below.
        let ino = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        assert!(ino >= 0);
        // SAFETY: `ino` was just created.
        let ino = unsafe { OwnedFd::from_raw_fd(ino) };
        let watched = CString::new(sub.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid descriptor and path.
        let wd =
            unsafe { libc::inotify_add_watch(ino.as_raw_fd(), watched.as_ptr(), libc::IN_CREATE) };
        assert!(wd >= 0);
        let (swapped_tx, swapped_rx) = std::sync::mpsc::channel();
        let (restore_tx, restore_rx) = std::sync::mpsc::channel::<()>();
        let rounds = 200;
        std::thread::scope(|s| {
            let (ino, sub, aside, victim_dir) = (&ino, &sub, &aside, &victim_dir);
            s.spawn(move || {
                let mut buf = [0u8; 4096];
                for _ in 0..rounds {
                    // SAFETY: reading into a buffer of the size given.
                    let n =
                        unsafe { libc::read(ino.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                    assert!(n > 0);
                    std::fs::rename(sub, aside).unwrap();
                    std::os::unix::fs::symlink(victim_dir, sub).unwrap();
                    swapped_tx.send(()).unwrap();
                    restore_rx.recv().unwrap();
                    std::fs::remove_file(sub).unwrap();
                    std::fs::rename(aside, sub).unwrap();
                    std::fs::remove_file(sub.join("m.sock")).unwrap();
                    swapped_tx.send(()).unwrap();
                }
            });
            for _ in 0..rounds {
                let bound = bind(&sub.join("m.sock"), 0o666, Dir::Private);
                swapped_rx.recv().unwrap();
                assert_eq!(mode_of(&victim), 0o600, "the victim file was chmodded");
                drop(bound.expect("bound before the swap"));
                restore_tx.send(()).unwrap();
                swapped_rx.recv().unwrap();
            }
        });
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
    }
}
