//! Where daemons listen by default.

use std::path::PathBuf;

/// The system service's socket (see `systemd/jqjail.socket`).
pub const SYSTEM_SOCKET: &str = "/run/jqjail/jqjail.sock";

/// Environment variable naming the socket to use instead of the defaults.
pub const SOCKET_ENV: &str = "JQJAIL_SOCKET";

/// The directory of the user's private daemon: `$XDG_RUNTIME_DIR/jqjail`, or
/// `<temp dir>/jqjail-<uid>` where there is no runtime directory. It must be the user's own
/// and mode 0700; the CLI checks that before trusting it.
pub fn private_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() && std::path::Path::new(&dir).is_dir() => {
            PathBuf::from(dir).join("jqjail")
        }
        _ => {
            // SAFETY: getuid cannot fail and touches no memory.
            let uid = unsafe { libc::getuid() };
            std::env::temp_dir().join(format!("jqjail-{uid}"))
        }
    }
}

/// The private daemon's socket.
pub fn private_socket() -> PathBuf {
    private_dir().join("jqjail.sock")
}

/// The private daemon's hide store.
pub fn private_store() -> PathBuf {
    private_dir().join("store")
}
