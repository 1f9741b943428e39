//! What opening the store mends: leftovers of puts a crash cut short, rows whose file is
//! gone, and hides whose file is whole but which the index does not list (a put cut short
//! between its rename and its commit, or an index lost, damaged, or missing its last
//! commits). Those are listed again from their files; nothing in `objects/` is ever deleted
//! here, and nothing that is not provably a tenant's hide is listed.
//!
//! A file is provably `tenant`'s hide `id` when it is a regular file in a tenant directory
//! whose `.tenant` file names a tenant that hashes to the directory's name, `id` is an ID, and
//! the file's sha256 begins with the ID's hash. Anything else found in `objects/` is moved to
//! `lost/` for an operator.

use crate::index::{insert, listed};
use crate::{NewHide, Result, Store, id, tenant_key};
use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// The file in each tenant's directory that names its tenant (the directory's name is a hash).
pub(crate) const TENANT_FILE: &str = ".tenant";
/// The longest tenant name a `.tenant` file is read for.
const MAX_TENANT_BYTES: u64 = 4096;
/// The kind given to a hide listed again from its file (its own kind was in the index).
pub const RECOVERED_KIND: &str = "recovered";

/// What a sweep of the store found and mended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Temp files of puts that a crash or a kill cut short, removed.
    pub temp_files: usize,
    /// `(tenant, id)` of whole hides no index row named, listed again. Their content and ID
    /// are what they were; their kind is [`RECOVERED_KIND`], their source the ID's, their
    /// meta is lost and their time is the file's.
    pub adopted: Vec<(String, String)>,
    /// Files of hides whose delete was committed but whose unlink failed or was cut short,
    /// unlinked now.
    pub deletes_finished: usize,
    /// Files in `objects/` that are not provably a tenant's hide, moved into `lost/`.
    pub quarantined: Vec<PathBuf>,
    /// `(tenant, id)` of rows dropped because their file was missing or of the wrong size.
    pub broken_rows: Vec<(String, String)>,
    /// Where a damaged index was moved before a new one was made (`damaged/`).
    pub index_set_aside: Option<PathBuf>,
}

impl Store {
    /// Removes temp files, drops rows whose file is missing or not of their size, names every
    /// tenant's directory, then lists again every whole hide no row names and moves what is
    /// not a hide to `lost/`; says what it did. The store's process owns the directory, so
    /// nothing else is writing meanwhile.
    pub(crate) fn sweep(&self) -> Result<Sweep> {
        let root = self.root.clone();
        self.mutate(|db| {
            let mut sweep = Sweep::default();
            for entry in std::fs::read_dir(root.join("tmp"))? {
                let entry = entry?;
                if entry.file_type()?.is_file() {
                    std::fs::remove_file(entry.path())?;
                    sweep.temp_files += 1;
                } else {
                    // No put makes anything else there: an operator's, set aside.
                    let name = format!("tmp_{}", entry.file_name().to_string_lossy());
                    sweep
                        .quarantined
                        .push(quarantine(&root, &entry.path(), &name)?);
                }
            }
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
                // A store from before tenant directories were named gets their names now,
                // while its index still knows them.
                if dir.is_dir() && named_tenant(&dir).as_deref() != Some(tenant.as_str()) {
                    name_tenant_dir(&dir, tenant)?;
                }
            }
            for dir in std::fs::read_dir(root.join("objects"))? {
                let dir = dir?;
                let key = dir.file_name().to_string_lossy().into_owned();
                if !dir.file_type()?.is_dir() {
                    sweep
                        .quarantined
                        .push(quarantine(&root, &dir.path(), &key)?);
                    continue;
                }
                let tenant = named_tenant(&dir.path()).filter(|t| tenant_key(t) == key);
                for file in std::fs::read_dir(dir.path())? {
                    let file = file?;
                    let name = file.file_name().to_string_lossy().into_owned();
                    if name == TENANT_FILE {
                        continue;
                    }
                    if let Some(t) = &tenant {
                        if listed(db, t, &name)? {
                            continue;
                        }
                        if deleted(db, t, &name)? {
                            // A delete whose unlink failed or a crash cut short: finished.
                            std::fs::remove_file(file.path())?;
                            sweep.deletes_finished += 1;
                            continue;
                        }
                        if adopt(db, t, &file)? {
                            sweep.adopted.push((t.clone(), name));
                            continue;
                        }
                    }
                    let to = format!("{key}/{name}");
                    sweep
                        .quarantined
                        .push(quarantine(&root, &file.path(), &to)?);
                }
            }
            // Every delete still pending is finished now (its file gone, or never listed).
            db.execute("DELETE FROM deleted", [])?;
            Ok(sweep)
        })
    }
}

/// Whether a delete of `tenant`'s `id` was committed and its file not yet unlinked.
fn deleted(db: &Connection, tenant: &str, id: &str) -> Result<bool> {
    Ok(db
        .prepare_cached("SELECT 1 FROM deleted WHERE tenant = ?1 AND id = ?2")?
        .exists(params![tenant, id])?)
}

/// Lists `file` as `tenant`'s hide when it provably is one (see the module's comment);
/// returns whether it did.
fn adopt(db: &Connection, tenant: &str, file: &std::fs::DirEntry) -> Result<bool> {
    let id = file.file_name().to_string_lossy().into_owned();
    let Some((source_key, hash)) = id.rsplit_once('-') else {
        return Ok(false);
    };
    let meta = std::fs::symlink_metadata(file.path())?;
    if !id::is_well_formed(&id) || !meta.is_file() {
        return Ok(false);
    }
    let sha256 = sha256_of(&file.path())?;
    if !sha256.starts_with(hash) {
        return Ok(false);
    }
    let created_ms = meta
        .modified()?
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let hide = NewHide {
        tenant,
        kind: RECOVERED_KIND,
        source: source_key,
        sha256: &sha256,
        size: meta.len(),
        meta: &[],
    };
    insert(db, &id, &hide, created_ms)?;
    Ok(true)
}

fn sha256_of(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Ok(crate::hex(&hasher.finalize()))
}

/// The tenant a directory's `.tenant` file names, if it has a readable one.
fn named_tenant(dir: &Path) -> Option<String> {
    let path = dir.join(TENANT_FILE);
    // Anything but a small regular file of UTF-8 names no tenant: the directory's unlisted
    // files are then set aside, never listed under a guess.
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
    else {
        return None;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut name = Vec::new();
    if file
        .take(MAX_TENANT_BYTES + 1)
        .read_to_end(&mut name)
        .is_err()
        || name.len() as u64 > MAX_TENANT_BYTES
    {
        return None;
    }
    String::from_utf8(name).ok()
}

/// Writes `dir`'s `.tenant` file (through a temp file renamed into place) and fsyncs it and
/// the directory, so that a tenant's hides can be told from their files alone.
pub(crate) fn name_tenant_dir(dir: &Path, tenant: &str) -> Result<()> {
    let tmp = dir.join(format!("{TENANT_FILE}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    file.write_all(tenant.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(TENANT_FILE))?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Moves `path` to `lost/<to>` (made unique), never deleting it; returns where it went.
fn quarantine(root: &Path, path: &Path, to: &str) -> Result<PathBuf> {
    let lost = root.join("lost");
    crate::dir::private_subdir(&lost)?;
    let mut dest = lost.join(to.replace('/', "_"));
    let mut n = 1;
    while dest.exists() {
        dest = lost.join(format!("{}.{n}", to.replace('/', "_")));
        n += 1;
    }
    std::fs::rename(path, &dest)?;
    File::open(&lost)?.sync_all()?;
    Ok(dest)
}
