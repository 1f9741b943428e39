//! The service manager's side channels: socket activation (`LISTEN_FDS`) and readiness and
//! liveness notifications (`NOTIFY_SOCKET`: READY=1, WATCHDOG=1, STOPPING=1). Both are
//! optional; without a service manager the daemon binds its own socket and notifies no one.

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::time::Duration;

/// The first fd systemd passes.
const LISTEN_FDS_START: RawFd = 3;

/// Whether the service manager passed sockets to this process (`LISTEN_PID` is its pid): a
/// `LISTEN_*` inherited from a parent that was activated is not this process's.
pub fn socket_activated() -> bool {
    std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|p| p == std::process::id())
}

/// The listening socket systemd passed, if this process is its intended receiver.
pub fn listener_from_env() -> std::io::Result<Option<UnixListener>> {
    let for_us = socket_activated();
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse::<i32>().ok())
        .unwrap_or(0);
    if !for_us || count < 1 {
        return Ok(None);
    }
    if count > 1 {
        return Err(std::io::Error::other(format!(
            "systemd passed {count} sockets; jqjaild listens on exactly one"
        )));
    }
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat on fd 3 only writes its status into the local buffer.
    if unsafe { libc::fstat(LISTEN_FDS_START, stat.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so the buffer is initialised.
    if unsafe { stat.assume_init() }.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(std::io::Error::other("LISTEN_FDS fd 3 is not a socket"));
    }
    // SAFETY: systemd handed fd 3 to this process (LISTEN_PID matched) and nothing else owns
    // it; CLOEXEC keeps it out of workers.
    let listener = unsafe {
        libc::fcntl(LISTEN_FDS_START, libc::F_SETFD, libc::FD_CLOEXEC);
        UnixListener::from_raw_fd(LISTEN_FDS_START)
    };
    listener.set_nonblocking(true)?;
    Ok(Some(listener))
}

/// Sends one notification to the service manager, if there is one. Never fails the daemon.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
    if let Err(e) = sent {
        tracing::warn!(error = %e, state, "cannot notify the service manager");
    }
}

/// How often to send WATCHDOG=1: half the period the service manager asked for, if it asked
/// this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok()?.parse::<u64>().ok()?;
    let for_us = std::env::var("WATCHDOG_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        .is_none_or(|p| p == std::process::id());
    (for_us && usec > 0).then(|| Duration::from_micros(usec / 2))
}
