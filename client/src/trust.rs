//! Whom a client talks to. Before a byte of a request leaves, the client asks the kernel who
//! is listening on the socket it connected to (SO_PEERCRED: the uid of the process that called
//! `listen`) and refuses a daemon that is not the user itself, root, or a uid named in
//! [`DAEMON_UIDS_ENV`]. A socket another user planted where the client looks — in a shared
//! `/tmp`, say — is refused before it can read the filter, the input or a hide's content.

use crate::ClientError;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Environment variable with more uids to trust as the daemon, comma-separated: for a system
/// service that listens on its own socket as a uid of its own (`DynamicUser=` without socket
/// activation). Under socket activation systemd (root) listens, so none is needed.
pub const DAEMON_UIDS_ENV: &str = "JQJAIL_DAEMON_UIDS";

/// The uids this process accepts as its daemon: its own, root's, and those of
/// [`DAEMON_UIDS_ENV`] (entries that are not numbers are an error, not ignored).
pub fn trusted_uids() -> Result<Vec<u32>, ClientError> {
    // SAFETY: getuid cannot fail and touches no memory.
    let mut uids = vec![unsafe { libc::getuid() }, 0];
    if let Some(extra) = std::env::var_os(DAEMON_UIDS_ENV) {
        let text = extra.to_string_lossy();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            uids.push(part.parse().map_err(|_| {
                ClientError::Protocol(format!(
                    "${DAEMON_UIDS_ENV} holds `{part}`, which is not a uid"
                ))
            })?);
        }
    }
    Ok(uids)
}

/// The uid of the process listening on the other end of `socket`.
pub fn peer_uid(socket: &impl AsRawFd) -> std::io::Result<u32> {
    peer_credentials(socket).map(|cred| cred.uid)
}

/// The credentials (pid, uid, gid) of the process on the other end of `socket`, as the kernel
/// recorded them when it called `listen` or `connect`.
pub fn peer_credentials(socket: &impl AsRawFd) -> std::io::Result<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED writes at most `len` bytes, one `ucred`, into the struct we own.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred)
}

/// Refuses the connection unless its peer is trusted.
pub(crate) fn check_peer(socket: &impl AsRawFd, path: &Path) -> Result<(), ClientError> {
    let uid = peer_uid(socket)?;
    let trusted = trusted_uids()?;
    if trusted.contains(&uid) {
        return Ok(());
    }
    Err(ClientError::Untrusted {
        path: path.to_owned(),
        uid,
        trusted,
    })
}
