//! Where daemons listen by default.

use std::path::{Path, PathBuf};

/// The system service's socket (see `systemd/jqjail.socket`).
pub const SYSTEM_SOCKET: &str = "/run/jqjail/jqjail.sock";

/// Environment variable naming the socket to use instead of the defaults.
pub const SOCKET_ENV: &str = "JQJAIL_SOCKET";

/// The directory of the user's private daemon: the first of `$XDG_RUNTIME_DIR/jqjail`,
/// `<temp dir>/jqjail-<uid>` and `${XDG_CACHE_HOME:-$HOME/.cache}/jqjail` that is usable: a
/// directory of the user's own, not a symbolic link, closed to others (mode 0700), or one that
/// does not exist yet and can be made. In a shared temp dir another user can create
/// `jqjail-<uid>` first; it is then skipped, not trusted, and `skipped` says what to remove.
///
/// When none is usable (a service account with no runtime dir and no writable home, whose
/// `jqjail-<uid>` another user planted), the directory is `<temp dir>/jqjail-<uid>-XXXXXX`:
/// one the user made before (found by its owner, which no other user can forge), or a new one
/// with a random name (`mkdtemp`, which no other user can take first). `skipped` says where.
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
        // Absolute paths only: a relative one (an empty or relative $TMPDIR, say) would put the
        // directory in whatever directory the program runs in.
        let absolute = |d: std::ffi::OsString| Some(PathBuf::from(d)).filter(|p| p.is_absolute());
        if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").and_then(absolute)
            && dir.is_dir()
        {
            candidates.push(dir.join("jqjail"));
        }
        let temp = temp_dir();
        candidates.push(temp.join(format!("jqjail-{uid}")));
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .and_then(absolute)
            .or_else(|| {
                std::env::var_os("HOME")
                    .and_then(absolute)
                    .map(|h| h.join(".cache"))
            });
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
        match own_temp_dir(&temp, uid) {
            Ok(path) => {
                skipped.push(format!(
                    "using {} instead, a directory of yours that no other user can take first",
                    path.display()
                ));
                PrivateDir { path, skipped }
            }
            // Nothing is usable: the last one is named, and refused when the CLI prepares it.
            Err(why) => {
                skipped.push(why);
                PrivateDir {
                    path: candidates
                        .pop()
                        .expect("the temp dir is always a candidate"),
                    skipped,
                }
            }
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

/// `$TMPDIR` when it is an absolute path, else `/tmp` (PROTOCOL.md, "Finding the socket").
/// Not `std::env::temp_dir`, which takes an empty or relative `$TMPDIR` as it is.
pub fn temp_dir() -> PathBuf {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// `<temp>/jqjail-<uid>-XXXXXX` of `uid`: the first usable one already there (its owner is
/// `uid`, which only `uid` or root can make so), or a new one made with `mkdtemp`.
fn own_temp_dir(temp: &Path, uid: u32) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let prefix = format!("jqjail-{uid}-");
    // The first by name of the user's own (others' entries, however many, are passed over).
    let first = || -> Result<Option<PathBuf>, String> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(temp)
            .map_err(|e| format!("{}: {e}", temp.display()))?
            .flatten()
            .filter(|e| e.file_name().as_bytes().starts_with(prefix.as_bytes()))
            .map(|e| e.path())
            .filter(|p| p.exists() && unusable(p, uid).is_none())
            .collect();
        found.sort();
        Ok(found.into_iter().next())
    };
    if let Some(path) = first()? {
        return Ok(path);
    }
    let template = temp.join(format!("{prefix}XXXXXX"));
    let mut template = std::ffi::CString::new(template.as_os_str().as_bytes())
        .map_err(|_| "the temp dir's name holds a NUL byte".to_string())?
        .into_bytes_with_nul();
    // SAFETY: a NUL-terminated, writable template ending in XXXXXX, as mkdtemp requires.
    if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
        return Err(format!(
            "making a directory in {}: {}",
            temp.display(),
            std::io::Error::last_os_error()
        ));
    }
    template.pop();
    let made = PathBuf::from(std::ffi::OsStr::from_bytes(&template));
    // Two commands that made one each at once both take the first by name, so they find
    // one daemon; the other directory, still empty, goes.
    let chosen = first()?.unwrap_or_else(|| made.clone());
    if chosen != made {
        let _ = std::fs::remove_dir(&made);
    }
    Ok(chosen)
}

/// Why `path` cannot be the private directory of `uid`, or `None` if it can (it is one, or
/// nothing is there yet and it can be made).
pub fn unusable(path: &Path, uid: u32) -> Option<String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return cannot_make(path),
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

/// Why `path`, which does not exist, cannot be made by this process (its nearest existing
/// ancestor is not a directory it may write in), or `None`.
fn cannot_make(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let parent = path.ancestors().skip(1).find(|a| a.exists())?;
    let c = std::ffi::CString::new(parent.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path; access reads nothing else.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0 && parent.is_dir() {
        None
    } else {
        Some(format!(
            "{} cannot be made: {} is not a directory you may write in; not using it",
            path.display(),
            parent.display()
        ))
    }
}
