//! The store's directory: created and checked private (0700, owned by this uid), its
//! subdirectories and files made private, never through a symbolic link.

use crate::{Result, StoreError};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub(crate) fn check_private_dir(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    let unsafe_dir = |why: String| StoreError::Unsafe {
        path: path.to_owned(),
        why,
    };
    if !meta.is_dir() {
        return Err(unsafe_dir("not a directory".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid {
        return Err(unsafe_dir(format!(
            "owned by uid {}, not by this process's uid {euid}",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(unsafe_dir(format!(
            "mode is {mode:o}; group and others must have no access (0700)"
        )));
    }
    Ok(())
}

/// Makes sure `path` is a private directory (not a symlink); returns whether it was created.
pub(crate) fn private_subdir(path: &Path) -> Result<bool> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            check_private_dir(path)?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn private_file(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let mode = file.metadata()?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(StoreError::Unsafe {
            path: path.to_owned(),
            why: format!("mode is {mode:o}; group and others must have no access (0600)"),
        });
    }
    Ok(file)
}
