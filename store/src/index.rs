//! The index: its opening (and setting aside when damaged), the SQLite schema and the queries
//! every store operation is made of. Every query here runs inside a transaction the caller
//! holds: a write transaction on the writer connection (`Store::mutate*`), or a read
//! transaction on one of its reader connections (`Store::read`), which in WAL mode never
//! waits for a writer.
//!
//! What a tenant holds is a counter, not a query over its hides: the `usage` table, kept by
//! triggers in the same transaction as every insert and delete of a hide, and rebuilt from
//! the hides at every open. Each hide's charge against its quota is computed once, when it is stored (`charged`). So `hide_usage`, a put's quota
//! check and the metrics' totals each read one row, whatever the tenant holds; eviction reads
//! the oldest hides only until enough are found.

use crate::dir::{private_file, private_subdir};
use crate::id;
use crate::{Entry, NewHide, OnFull, Result, Retention, StoreError, Usage, now_ms};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The index's file in the store's directory (SQLite keeps `-wal` beside it).
const INDEX: &str = "index.sqlite3";

/// The SQLite VFS of every connection: the unix VFS with a process-wide exclusive lock on the
/// index and the WAL's index in heap memory instead of a memory-mapped `-shm` file. So no
/// file of the store is ever mapped (with `mmap_size` 0): a file the kernel will not write
/// (a disk that went read-only, an immutable file) is an I/O error to answer, never a
/// SIGBUS that kills the daemon. The price is that one process owns a store, which the
/// store's flock already says.
const VFS: &str = "unix-excl";

/// A connection to the index of the store at `root`.
pub(crate) fn connect(root: &Path, flags: OpenFlags) -> Result<Connection> {
    let db = Connection::open_with_flags_and_vfs(root.join(INDEX), flags, VFS)?;
    db.pragma_update(None, "mmap_size", 0)?;
    Ok(db)
}

/// The index file's device and inode.
pub(crate) fn identity(root: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(root.join(INDEX))?;
    Ok((meta.dev(), meta.ino()))
}

/// The writer connection, with the schema made or migrated and the counters rebuilt. A
/// damaged index (not a database, corrupt pages, a failed quick check) is moved aside, with
/// its WAL, into `damaged/`, and a new one is made, which the sweep then fills from the
/// hides' files; so is a WAL whose database is gone, which SQLite would otherwise replay into
/// the new one. Returns where the old index went.
pub(crate) fn open_or_set_aside(root: &Path) -> Result<(Connection, Option<PathBuf>)> {
    let mut set_aside = None;
    if !root.join(INDEX).exists() && root.join(format!("{INDEX}-wal")).exists() {
        set_aside = Some(set_aside_index(root)?);
    }
    match open_writer(root) {
        Err(StoreError::Damaged(_)) => {
            let to = set_aside_index(root)?;
            Ok((open_writer(root)?, Some(to)))
        }
        opened => Ok((opened?, set_aside)),
    }
}

fn open_writer(root: &Path) -> Result<Connection> {
    drop(private_file(&root.join(INDEX))?); // created 0600 before SQLite opens it
    let mut db = connect(
        root,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.busy_timeout(Duration::from_secs(30))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "FULL")?;
    db.pragma_update(None, "foreign_keys", "ON")?;
    let check: String = db.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(StoreError::Damaged(format!("quick_check: {check}")));
    }
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    add_charged(&tx)?;
    tx.execute_batch(USAGE)?;
    tx.commit()?;
    Ok(db)
}

/// Moves the index and its WAL into `damaged/index-<ms>.sqlite3*`, for an operator to look
/// at; returns the index's new path.
fn set_aside_index(root: &Path) -> Result<PathBuf> {
    let damaged = root.join("damaged");
    private_subdir(&damaged)?;
    let stem = format!("index-{}.sqlite3", now_ms());
    for suffix in ["", "-wal", "-shm"] {
        let from = root.join(format!("{INDEX}{suffix}"));
        if from.exists() {
            std::fs::rename(from, damaged.join(format!("{stem}{suffix}")))?;
        }
    }
    File::open(root)?.sync_all()?;
    Ok(damaged.join(stem))
}

/// Lists a hide whose content is in place: its row, its meta, and (by trigger) its tenant's
/// counters. Returns the row's `seq`.
pub(crate) fn insert(
    db: &Connection,
    id: &str,
    hide: &NewHide<'_>,
    created_ms: u64,
) -> Result<i64> {
    let charged = charge(hide.size, hide.kind, hide.source, hide.meta);
    db.execute(
        "INSERT INTO hides
           (tenant, id, source_key, sha256, kind, source, size, created_ms, charged)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            hide.tenant,
            id,
            id::sanitize_source(hide.source),
            hide.sha256,
            hide.kind,
            hide.source,
            hide.size as i64,
            created_ms as i64,
            charged as i64
        ],
    )?;
    let seq = db.last_insert_rowid();
    for (pos, (k, v)) in hide.meta.iter().enumerate() {
        db.execute(
            "INSERT INTO meta (seq, pos, key, value) VALUES (?1, ?2, ?3, ?4)",
            params![seq, pos as i64, k, v],
        )?;
    }
    Ok(seq)
}

/// The tables. `deleted` remembers, in the same transaction (by trigger), every hide whose row
/// goes until its file is unlinked too: a delete answered done whose unlink then failed, or
/// that a crash cut short, is finished by the next open instead of its file being listed
/// again.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS hides (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    source_key TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    source     TEXT NOT NULL,
    size       INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    charged    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (tenant, id)
);
CREATE INDEX IF NOT EXISTS hides_content ON hides (tenant, source_key, sha256);
CREATE INDEX IF NOT EXISTS hides_age ON hides (tenant, created_ms);
CREATE TABLE IF NOT EXISTS meta (
    seq   INTEGER NOT NULL REFERENCES hides (seq) ON DELETE CASCADE,
    pos   INTEGER NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (seq, pos)
);
CREATE TABLE IF NOT EXISTS deleted (
    tenant TEXT NOT NULL,
    id     TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS deleted_add AFTER DELETE ON hides BEGIN
    INSERT OR IGNORE INTO deleted (tenant, id) VALUES (OLD.tenant, OLD.id);
END;
CREATE TRIGGER IF NOT EXISTS deleted_undone AFTER INSERT ON hides BEGIN
    DELETE FROM deleted WHERE tenant = NEW.tenant AND id = NEW.id;
END;
";

/// The counters of what each tenant holds, rebuilt from the hides (run at every open, after
/// [`SCHEMA`] and [`add_charged`], in the same transaction), and the triggers that keep them.
pub(crate) const USAGE: &str = "
DROP TABLE IF EXISTS usage;
CREATE TABLE usage (
    tenant  TEXT PRIMARY KEY,
    entries INTEGER NOT NULL,
    bytes   INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO usage (tenant, entries, bytes)
    SELECT tenant, COUNT(*), SUM(charged) FROM hides GROUP BY tenant;
DROP TRIGGER IF EXISTS usage_add;
DROP TRIGGER IF EXISTS usage_remove;
CREATE TRIGGER usage_add AFTER INSERT ON hides BEGIN
    INSERT OR IGNORE INTO usage (tenant, entries, bytes) VALUES (NEW.tenant, 0, 0);
    UPDATE usage SET entries = entries + 1, bytes = bytes + NEW.charged
        WHERE tenant = NEW.tenant;
END;
CREATE TRIGGER usage_remove AFTER DELETE ON hides BEGIN
    UPDATE usage SET entries = entries - 1, bytes = bytes - OLD.charged
        WHERE tenant = OLD.tenant;
    DELETE FROM usage WHERE tenant = OLD.tenant AND entries <= 0;
END;
";

/// An index made before hides kept their charge gets the column, and every hide stored
/// without one (by a build from before it, which leaves the default 0) gets its charge,
/// computed from its content's size, labels and meta.
pub(crate) fn add_charged(db: &Connection) -> Result<()> {
    let has: bool = db
        .prepare("SELECT 1 FROM pragma_table_info('hides') WHERE name = 'charged'")?
        .exists([])?;
    if !has {
        db.execute_batch("ALTER TABLE hides ADD COLUMN charged INTEGER NOT NULL DEFAULT 0")?;
    }
    db.execute_batch(&format!(
        "UPDATE hides SET charged = {CHARGE} WHERE charged = 0"
    ))?;
    Ok(())
}

/// What a hide costs against its tenant's quota, in SQL over a `hides` row: its content and
/// its labels and meta, byte for byte (a hide of empty content with large meta is not free).
/// Used once, to fill `charged` in an index made before it; [`charge`] is the same in Rust.
const CHARGE: &str = "size + length(CAST(kind AS BLOB)) + length(CAST(source AS BLOB)) \
    + COALESCE((SELECT SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))) \
    FROM meta WHERE meta.seq = hides.seq), 0)";

/// The same charge for a hide about to be stored.
pub(crate) fn charge(size: u64, kind: &str, source: &str, meta: &[(String, String)]) -> u64 {
    let labels = kind.len() + source.len();
    let meta: usize = meta.iter().map(|(k, v)| k.len() + v.len()).sum();
    size + (labels + meta) as u64
}

/// Whether an index row names `id` of `tenant`.
pub(crate) fn listed(db: &Connection, tenant: &str, id: &str) -> Result<bool> {
    Ok(db
        .query_row(
            "SELECT 1 FROM hides WHERE tenant = ?1 AND id = ?2",
            params![tenant, id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Deletes hides past the age limit, then (by policy) the oldest until a hide charged `size`
/// fits, in bytes and in count (at most [`crate::MAX_HIDES_PER_TENANT`]). Returns the IDs whose
/// rows were deleted; their files are unlinked after the commit.
pub(crate) fn make_room(
    db: &Connection,
    tenant: &str,
    size: u64,
    retention: &Retention,
) -> Result<Vec<String>> {
    let mut victims = Vec::new();
    if let Some(age) = retention.max_age {
        let cutoff = now_ms().saturating_sub(age.as_millis() as u64) as i64;
        let mut stmt = db.prepare_cached(
            "DELETE FROM hides WHERE tenant = ?1 AND created_ms < ?2 RETURNING id",
        )?;
        let expired = stmt
            .query_map(params![tenant, cutoff], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        victims.extend(expired);
    }
    let Usage {
        bytes: mut used,
        entries: mut count,
    } = usage(db, tenant)?;
    let max = crate::MAX_HIDES_PER_TENANT;
    let fits = |used: u64, count: u64| used + size <= retention.quota_bytes && count < max;
    if fits(used, count) {
        return Ok(victims);
    }
    if retention.on_full == OnFull::Refuse {
        if count >= max {
            return Err(StoreError::TooManyHides { max });
        }
        return Err(StoreError::QuotaExceeded {
            quota: retention.quota_bytes,
            used,
            size,
        });
    }
    // The oldest, read only until enough are found, then deleted.
    let in_use = used;
    let mut oldest = Vec::new();
    {
        let mut stmt = db.prepare_cached(
            "SELECT id, charged FROM hides WHERE tenant = ?1 ORDER BY created_ms ASC, seq ASC",
        )?;
        let mut rows = stmt.query(params![tenant])?;
        while !fits(used, count) {
            let Some(row) = rows.next()? else { break };
            let bytes = row.get::<_, i64>(1)? as u64;
            oldest.push(row.get::<_, String>(0)?);
            used = used.saturating_sub(bytes);
            count = count.saturating_sub(1);
        }
    }
    // Every hide would go and it still would not fit (its labels and meta count too): keep
    // them all and refuse.
    if !fits(used, count) {
        return Err(StoreError::QuotaExceeded {
            quota: retention.quota_bytes,
            used: in_use,
            size,
        });
    }
    for id in oldest {
        db.execute(
            "DELETE FROM hides WHERE tenant = ?1 AND id = ?2",
            params![tenant, id],
        )?;
        victims.push(id);
    }
    Ok(victims)
}

/// What every tenant holds together.
pub(crate) fn usage_of_all(db: &Connection) -> Result<Usage> {
    let (entries, bytes): (i64, i64) = db.query_row(
        "SELECT COALESCE(SUM(entries), 0), COALESCE(SUM(bytes), 0) FROM usage",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Usage {
        entries: entries as u64,
        bytes: bytes as u64,
    })
}

/// What `tenant` holds: one row of the counters.
pub(crate) fn usage(db: &Connection, tenant: &str) -> Result<Usage> {
    let (entries, bytes): (i64, i64) = db
        .prepare_cached("SELECT entries, bytes FROM usage WHERE tenant = ?1")?
        .query_row(params![tenant], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or((0, 0));
    Ok(Usage {
        entries: entries.max(0) as u64,
        bytes: bytes.max(0) as u64,
    })
}

pub(crate) fn row_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Entry)> {
    Ok((
        r.get(0)?,
        Entry {
            id: r.get(1)?,
            kind: r.get(2)?,
            source: r.get(3)?,
            size: r.get::<_, i64>(4)? as u64,
            sha256: r.get(5)?,
            meta: Vec::new(),
            created_ms: r.get::<_, i64>(6)? as u64,
        },
    ))
}

pub(crate) fn with_meta(db: &Connection, seq: i64, mut entry: Entry) -> Result<Entry> {
    let mut stmt = db.prepare_cached("SELECT key, value FROM meta WHERE seq = ?1 ORDER BY pos")?;
    entry.meta = stmt
        .query_map(params![seq], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(entry)
}

pub(crate) fn lookup(db: &Connection, tenant: &str, id: &str) -> Result<Entry> {
    if !id::is_well_formed(id) {
        return Err(StoreError::NotFound(id.to_string()));
    }
    let mut stmt = db.prepare_cached(
        "SELECT seq, id, kind, source, size, sha256, created_ms FROM hides
         WHERE tenant = ?1 AND id = ?2",
    )?;
    let (seq, entry) = stmt
        .query_row(params![tenant, id], row_entry)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
    with_meta(db, seq, entry)
}

pub(crate) fn find_content(
    db: &Connection,
    tenant: &str,
    source_key: &str,
    sha: &str,
) -> Result<Option<Entry>> {
    let mut stmt = db.prepare_cached(
        "SELECT seq, id, kind, source, size, sha256, created_ms FROM hides
         WHERE tenant = ?1 AND source_key = ?2 AND sha256 = ?3",
    )?;
    match stmt
        .query_row(params![tenant, source_key, sha], row_entry)
        .optional()?
    {
        Some((seq, entry)) => Ok(Some(with_meta(db, seq, entry)?)),
        None => Ok(None),
    }
}
