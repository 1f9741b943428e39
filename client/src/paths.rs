//! Where daemons listen by default.

use std::path::{Path, PathBuf};

/// The system service's socket (see `systemd/jqjail.socket`).
pub const SYSTEM_SOCKET: &str = "/run/jqjail/jqjail.sock";

/// Environment variable naming the socket to use instead of the defaults.
pub const SOCKET_ENV: &str = "JQJAIL_SOCKET";

/// The directory of the user's private daemon: the first of `$XDG_RUNTIME_DIR/jqjail`,
/// `<temp dir>/jqjail-<uid>` and `${XDG_CACHE_HOME:-$HOME/.cache}/jqjail` that is usable: a
/// directory of the user's own, not a symbolic link, closed to others (mode 0700), or one that
/// does not exist yet. In a shared temp dir another user can create `jqjail-<uid>` first; it
/// is then skipped, not trusted, and `skipped` says what to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateDir {
    /// The directory chosen.
    pub path: PathBuf,
    /// Why each candidate before it was passed over.
    pub skipped: Vec<String>,
}

impl PrivateDir {
    /// Picks the directory.
    pub fn find() -> PrivateDir {
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let mut candidates = Vec::new();
        if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            if dir.is_dir() {
                candidates.push(dir.join("jqjail"));
            }
        }
        candidates.push(std::env::temp_dir().join(format!("jqjail-{uid}")));
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
        if let Some(cache) = cache {
            candidates.push(cache.join("jqjail"));
        }
        let mut skipped = Vec::new();
        for path in &candidates {
            match unusable(path, uid) {
                None => {
                    return PrivateDir {
                        path: path.clone(),
                        skipped,
                    };
                }
                Some(why) => skipped.push(why),
            }
        }
        // None is usable: the last one is named, and refused when the CLI prepares it.
        PrivateDir {
            path: candidates
                .pop()
                .expect("the temp dir is always a candidate"),
            skipped,
        }
    }

    /// The private daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.path.join("jqjail.sock")
    }

    /// The private daemon's hide store.
    pub fn store(&self) -> PathBuf {
        self.path.join("store")
    }
}

/// Why `path` cannot be the private directory of `uid`, or `None` if it can (it is one, or
/// nothing is there yet).
pub fn unusable(path: &Path, uid: u32) -> Option<String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("{}: {e}", path.display())),
    };
    let mode = meta.permissions().mode() & 0o7777;
    if !meta.is_dir() {
        Some(format!(
            "{} is not a directory; not using it",
            path.display()
        ))
    } else if meta.uid() != uid {
        Some(format!(
            "{} belongs to uid {}, not to you (uid {uid}); not using it (root can remove it)",
            path.display(),
            meta.uid()
        ))
    } else if mode & 0o077 != 0 {
        Some(format!(
            "{} is open to other users (mode {mode:04o}); not using it (`chmod 700` it, or remove it)",
            path.display()
        ))
    } else {
        None
    }
}
