//! What opening the store mends: leftovers of crashed puts and deletes, and rows whose file is
//! gone.

use crate::index::listed;
use crate::{Result, STALE_TMP, Store, tenant_key};
use rusqlite::params;
use std::io;
use std::time::Duration;

/// What a sweep of the store found and mended: the crash leftovers it removed, and the index
/// rows whose files were missing or damaged (which it deleted, so that a listed hide always
/// reads back whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Temp files of puts whose process is gone (or older than [`STALE_TMP`]).
    pub temp_files: usize,
    /// Object files no index row names.
    pub orphan_files: usize,
    /// `(tenant, id)` of rows dropped because their file was missing or of the wrong size.
    pub broken_rows: Vec<(String, String)>,
}

impl Store {
    /// Under the lock: removes temp files whose put's process is gone, object files no index
    /// row names, and rows whose file is missing or not of their size (a store damaged by
    /// hand, or by the unlink race of earlier versions); says what it did.
    pub(crate) fn sweep(&self) -> Result<Sweep> {
        let root = self.root.clone();
        self.mutate(|db| {
            let mut sweep = Sweep::default();
            for entry in std::fs::read_dir(root.join("tmp"))? {
                let entry = entry?;
                if abandoned_temp(&entry)? {
                    let _ = std::fs::remove_file(entry.path());
                    sweep.temp_files += 1;
                }
            }
            // The tenants are read under the lock too: a list read before it misses a tenant
            // whose first hide another process commits meanwhile, and that hide's file would
            // be taken for an orphan.
            let tenants: Vec<String> = db
                .prepare("SELECT DISTINCT tenant FROM hides")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for tenant in &tenants {
                let rows: Vec<(String, u64)> = db
                    .prepare("SELECT id, size FROM hides WHERE tenant = ?1")?
                    .query_map(params![tenant], |r| {
                        Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
                    })?
                    .collect::<Result<_, _>>()?;
                let dir = self.tenant_dir_path(tenant);
                for (id, size) in rows {
                    let whole = std::fs::symlink_metadata(dir.join(&id))
                        .is_ok_and(|m| m.is_file() && m.len() == size);
                    if !whole {
                        db.execute(
                            "DELETE FROM hides WHERE tenant = ?1 AND id = ?2",
                            params![tenant, id],
                        )?;
                        sweep.broken_rows.push((tenant.clone(), id));
                    }
                }
            }
            let by_key: std::collections::HashMap<String, String> =
                tenants.into_iter().map(|t| (tenant_key(&t), t)).collect();
            for dir in std::fs::read_dir(root.join("objects"))? {
                let dir = dir?;
                let key = dir.file_name().to_string_lossy().into_owned();
                let tenant = by_key.get(&key);
                for file in std::fs::read_dir(dir.path())? {
                    let file = file?;
                    let id = file.file_name().to_string_lossy().into_owned();
                    let named = match tenant {
                        Some(t) => listed(db, t, &id)?,
                        None => false,
                    };
                    if !named {
                        let _ = std::fs::remove_file(file.path());
                        sweep.orphan_files += 1;
                    }
                }
            }
            Ok(sweep)
        })
    }
}

/// Whether a temp file's put is over: its name starts with the pid of the process that
/// writes it (`begin_put`), and that process is gone, or the file is older than
/// [`STALE_TMP`]. A live process's upload in progress, in a store shared by several, is left
/// alone.
fn abandoned_temp(entry: &std::fs::DirEntry) -> Result<bool> {
    let name = entry.file_name();
    let writer = name
        .to_str()
        .and_then(|n| n.split('-').next())
        .and_then(|pid| pid.parse::<libc::pid_t>().ok());
    let gone = match writer {
        Some(pid) if pid > 0 => {
            // SAFETY: kill with signal 0 only checks that the process exists.
            let absent = unsafe { libc::kill(pid, 0) } != 0;
            absent && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        }
        _ => true,
    };
    let age = entry
        .metadata()?
        .modified()?
        .elapsed()
        .unwrap_or(Duration::ZERO);
    Ok(gone || age > STALE_TMP)
}
