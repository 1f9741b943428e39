//! The hide store: oversized tool outputs kept on disk, per tenant, content-addressed,
//! immutable once written, paged and searched off disk.
//!
//! Owns one directory, and one process owns it at a time:
//!
//! ```text
//! DIR/            0700, owned by the daemon's uid (refused otherwise)
//!   lock          flock(LOCK_EX) held for as long as a Store is open; a second open is refused
//!   index.sqlite3 0600, WAL: ID, tenant, kind, source, size, sha256, meta, created time
//!   tmp/          content being written (temp file, fsync) before it is renamed in
//!   objects/<tenant key>/.tenant  the tenant's name (the key is a hash of it)
//!   objects/<tenant key>/<id>     0600, one file per hide, never rewritten
//!   damaged/      an index that was damaged at open, set aside (made when needed)
//!   lost/         files found in objects/ that are not provably a hide (made when needed)
//! ```
//!
//! A put writes and fsyncs a temp file, then under the writer's mutex picks the ID, renames
//! the file into place, fsyncs the directory and only then commits the index row. So every
//! listed hide has its whole content on disk, whatever point a crash stops at. A delete
//! commits first and unlinks after, before it releases the mutex: unlinked later, the file
//! could already be a new put's of the same content, renamed into the same place.
//!
//! The files are the truth and the index is rebuilt from them when it has to be. Opening
//! drops rows whose file is missing or of the wrong size, and lists again every hide whose
//! file is whole but which no row names: a put that a crash stopped between its rename and
//! its commit, or an index deleted, damaged (it is set aside into `damaged/` first) or
//! missing its last commits. A file is listed again only when it provably is its tenant's
//! hide (`sweep.rs`); its ID and bytes are kept, its labels and meta are not. Anything else in
//! `objects/` is moved to `lost/`, never deleted. A delete (an eviction, an expiry) records
//! itself in the index's `deleted` table in its own transaction, and the record goes once its
//! file is unlinked; a file whose record remains (a crash, or an unlink that failed) is
//! unlinked by the next open, never listed again. So nothing acknowledged is lost with the
//! index, and nothing deleted comes back while it stands.
//!
//! Every connection uses SQLite's `unix-excl` VFS: the WAL's index is in heap memory, not a
//! memory-mapped `-shm` file, and no file is mapped, so a file the kernel will not write (a
//! disk gone read-only, an immutable file) is an I/O error answered as one, never a SIGBUS.
//! Mutations are serialised by one writer connection; reads (lookups, pages, lists, usage) run
//! on reader connections of their own, which WAL serves while a mutation commits, so no read
//! waits for a writer and none holds one up. What a tenant holds is a counter kept by
//! triggers (`index.rs`), never a sum over its hides.
//!
//! A put in progress reserves its declared size against its tenant's quota until it ends, so
//! stalled uploads hold at most the quota in `tmp/`; opening removes every temp file (the
//! previous owner is gone).
//!
//! Tenants share nothing: IDs are unique per tenant, every lookup names the tenant, and an ID
//! of another tenant's hide reads exactly like an ID that does not exist.
//!
//! Not guaranteed: the lock is an advisory flock, so a process that writes DIR without taking
//! it (or a user editing files by hand) can still damage it; a read then fails with an I/O
//! error rather than returning bytes of another length, but same-length edits are not detected
//! on read (the sha256 is in the index for whoever wants to check; opening checks it for every
//! file it lists again). Durability is what fsync gives: a disk or filesystem that
//! acknowledges an fsync it has not done can lose acknowledged hides in a power cut.
//!
//! This crate does no networking and never interprets a hide's content. `lib.rs` is the façade
//! (the types and [`Store`]'s operations); `dir.rs` keeps the directory private, `index.rs`
//! holds the schema, the queries and the index's opening, `writing.rs` a put in progress,
//! `sweep.rs` what opening mends, `id.rs` the IDs and `page.rs` paging and search.

mod dir;
pub mod id;
mod index;
pub mod json_page;
mod layouts;
pub mod page;
mod sweep;
mod writing;

use dir::{check_private_dir, private_file, private_subdir};
use index::{find_content, listed, lookup, make_room, row_entry, usage, usage_of_all, with_meta};
pub use layouts::{CACHE_BYTES, CACHE_ENTRIES};
pub use sweep::{RECOVERED_KIND, Sweep};
use writing::Reservation;
pub use writing::Writing;

use page::{Layout, SearchOptions};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Longest `kind` or `source` string.
pub const MAX_LABEL_BYTES: usize = 256;
/// Most meta pairs on one hide.
pub const MAX_META_PAIRS: usize = 64;
/// Longest meta key or value.
pub const MAX_META_BYTES: usize = 1024;
/// Most hides one tenant may keep, whatever their size: each costs an index row and an inode
/// beyond its bytes. Past it the oldest is evicted, or the put refused (`on_full`).
pub const MAX_HIDES_PER_TENANT: u64 = 10_000;
/// Idle reader connections kept open for the next read.
const READERS_KEPT: usize = 8;

/// One stored hide's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `<sanitized-source>-<hex>`.
    pub id: String,
    /// What produced it (e.g. `tool_output`), free-form.
    pub kind: String,
    /// Where it came from (e.g. the tool's name), as given.
    pub source: String,
    /// Bytes of content.
    pub size: u64,
    /// sha256 of the content, hex.
    pub sha256: String,
    /// Caller-chosen key/value pairs, in the order given.
    pub meta: Vec<(String, String)>,
    /// When it was first stored, milliseconds since the Unix epoch.
    pub created_ms: u64,
}

/// The result of a put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    /// The stored hide (the existing one when the same content was already there).
    pub entry: Entry,
    /// False when this tenant already had this content from this source.
    pub created: bool,
    /// IDs removed to make room (oldest first), or because they passed the age limit.
    pub evicted: Vec<String>,
}

/// What happens when a put would take a tenant past its quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFull {
    /// Delete the tenant's oldest hides until the new one fits.
    #[default]
    EvictOldest,
    /// Refuse the put with [`StoreError::QuotaExceeded`].
    Refuse,
}

/// A tenant's retention policy, applied on every put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Bytes of hides the tenant may hold.
    pub quota_bytes: u64,
    /// Hides older than this are deleted on the tenant's next put.
    pub max_age: Option<Duration>,
    /// Evict or refuse when full.
    pub on_full: OnFull,
}

/// One page of a hide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The hide.
    pub hide_id: String,
    /// 1-based page number.
    pub page: u64,
    /// Pages at this page size.
    pub total_pages: u64,
    /// Byte offset of the page in the hide.
    pub offset: u64,
    /// Size of the whole hide.
    pub size: u64,
    /// The page's bytes (never a split UTF-8 character).
    pub content: Vec<u8>,
}

/// Where to open a hide in JSON pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageAt {
    /// 1-based page number.
    Number(u64),
    /// The page holding the first byte of the value at this path.
    Path(json_page::Path),
    /// The page holding this byte.
    Offset(u64),
}

/// A page of a hide in JSON pages ([`json_page`]), or in byte pages where the hide is not one
/// JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paged {
    /// The page.
    pub cut: Cut,
    /// Where the page is in the document; or why the hide has byte pages.
    pub json: std::result::Result<json_page::JsonPage, json_page::NotJson>,
}

/// One search match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    /// The page its first byte is on.
    pub page: u64,
    /// Byte offset in the hide.
    pub offset: u64,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// Every match, ascending (empty: not found).
    pub matches: Vec<Match>,
    /// More matches exist than the bound let through.
    pub truncated: bool,
    /// Pages at the page size searched with.
    pub total_pages: u64,
}

/// Bytes and hides a tenant holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Hides.
    pub entries: u64,
    /// Bytes counted against the quota: each hide's content, labels and meta.
    pub bytes: u64,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No hide with this ID for this tenant (another tenant's hide reads the same).
    #[error("no hide with id `{0}`")]
    NotFound(String),
    /// The page is not in `1..=total_pages`.
    #[error(
        "page {page} is out of range: hide `{id}` has {total} page(s) of at most {page_size} bytes"
    )]
    PageOutOfRange {
        /// The hide.
        id: String,
        /// The page asked for.
        page: u64,
        /// Pages there are.
        total: u64,
        /// At this page size.
        page_size: u64,
    },
    /// The put does not fit the tenant's quota and the policy is to refuse.
    #[error(
        "a hide of {size} bytes does not fit the {quota}-byte hide quota ({used} bytes in use)"
    )]
    QuotaExceeded {
        /// The quota.
        quota: u64,
        /// Bytes in use.
        used: u64,
        /// The new hide's size.
        size: u64,
    },
    /// An argument is out of range (page size, query, labels, meta).
    #[error("{0}")]
    Invalid(String),
    /// A JSON hide has no value at the path a page was asked for by.
    #[error("hide `{id}` has no value at {path}")]
    NoValueAt {
        /// The hide.
        id: String,
        /// The path, as [`json_page::render`] shows it.
        path: String,
    },
    /// The tenant already keeps [`MAX_HIDES_PER_TENANT`] hides and the policy refuses.
    #[error("the tenant keeps {max} hides, the most it may; delete some first")]
    TooManyHides {
        /// The limit.
        max: u64,
    },
    /// The tenant's puts in progress already hold so much of its quota that this one's
    /// declared size does not fit.
    #[error(
        "hide puts in progress hold {pending} bytes of the {quota}-byte hide quota; this put's {size} bytes do not fit until they finish"
    )]
    UploadsOverQuota {
        /// The tenant's quota.
        quota: u64,
        /// Bytes reserved by its puts in progress.
        pending: u64,
        /// The refused put's size.
        size: u64,
    },
    /// The store directory is not safe to use.
    #[error("hide store {path}: {why}")]
    Unsafe {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Another process (or another `Store` in this one) has the directory open.
    #[error(
        "hide store {path} is in use by another process (its lock file is held); one daemon owns a store"
    )]
    InUse {
        /// The directory.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error("hide store I/O: {0}")]
    Io(#[from] io::Error),
    /// The index failed.
    #[error("hide store index: {0}")]
    Index(rusqlite::Error),
    /// The index is damaged (SQLite found corrupt pages, or the file is not a database). The
    /// store's next open sets it aside and rebuilds the index from the hides' files.
    #[error(
        "hide store index is damaged ({0}); restart the daemon: it sets the damaged index aside and rebuilds it from the hides' files"
    )]
    Damaged(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
        match e.sqlite_error_code() {
            Some(DatabaseCorrupt | NotADatabase) => StoreError::Damaged(e.to_string()),
            _ => StoreError::Index(e),
        }
    }
}

/// Shorthand.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What a finished put stores: the hide's labels and its content's hash and size.
pub(crate) struct NewHide<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) source: &'a str,
    pub(crate) sha256: &'a str,
    pub(crate) size: u64,
    pub(crate) meta: &'a [(String, String)],
}

/// An open store. Cheap to share behind an `Arc`; every method blocks (file and SQLite I/O),
/// so async callers run them on a blocking thread.
///
/// Mutations are serialised: one writer connection behind a mutex, held for one short
/// transaction (no query in it reads more rows than it changes, but for
/// the sha256 collision walk). Reads never take them: each runs in a read transaction on a
/// reader connection of its own, which SQLite's WAL mode serves beside a writer. One process
/// owns the directory while a `Store` is open (its flock).
pub struct Store {
    root: PathBuf,
    /// The directory's `lock`, flocked for as long as the store is open: one process owns a
    /// store (a second open, by any process, is refused with [`StoreError::InUse`]).
    _owned: File,
    /// The index file's device and inode when it was opened: a mutation or a new reader
    /// first checks that the path still names it (see [`Store::check_index`]).
    index_file: (u64, u64),
    inner: Mutex<Inner>,
    /// Reader connections not in use (at most [`READERS_KEPT`] are kept).
    readers: Mutex<Vec<Connection>>,
    /// Bytes reserved by each tenant's puts in progress (their temp files).
    pending: Mutex<std::collections::HashMap<String, u64>>,
    /// What opening found and mended.
    opened: Sweep,
    /// Hides deleted by retention on a put since opening.
    evicted_by_retention: AtomicU64,
    /// Hides deleted by [`Store::expire`] since opening.
    evicted_by_expiry: AtomicU64,
    /// JSON page indexes of recently paged hides.
    layouts: layouts::Layouts,
}

/// A read-only view of the whole store (see [`Store::observer`]); used from one thread.
pub struct Observer {
    db: Connection,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

impl Observer {
    /// What every tenant holds together.
    pub fn totals(&self) -> Result<Usage> {
        usage_of_all(&self.db)
    }
}

/// Hides deleted since the store was opened, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evicted {
    /// By a put: the tenant's quota was full (`on_full = "evict"`), or they had passed the age
    /// limit.
    pub retention: u64,
    /// By the periodic sweep of hides past the age limit.
    pub expiry: u64,
}

struct Inner {
    db: Connection,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("root", &self.root).finish()
    }
}

impl Store {
    /// Opens the store at `dir`, creating it (0700) if it does not exist. Refuses a directory
    /// that is not owned by this process's uid or that its group or others can access, and
    /// one that another `Store` has open ([`StoreError::InUse`]). Sets a damaged index aside,
    /// removes what crashed puts left and lists again every whole hide the index does not
    /// name ([`Store::opened`] says what it did).
    pub fn open(dir: &Path) -> Result<Store> {
        if !dir.exists() {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        let root = dir.canonicalize()?;
        check_private_dir(&root)?;
        for sub in ["tmp", "objects"] {
            private_subdir(&root.join(sub))?;
        }
        let lock = private_file(&root.join("lock"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::InUse { path: root });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let (db, set_aside) = index::open_or_set_aside(&root)?;
        let index_file = index::identity(&root)?;
        let mut store = Store {
            root,
            _owned: lock,
            index_file,
            inner: Mutex::new(Inner { db }),
            readers: Mutex::default(),
            pending: Mutex::default(),
            opened: Sweep::default(),
            evicted_by_retention: AtomicU64::new(0),
            evicted_by_expiry: AtomicU64::new(0),
            layouts: layouts::Layouts::default(),
        };
        store.opened = store.sweep()?;
        store.opened.index_set_aside = set_aside;
        Ok(store)
    }

    /// What opening the store found and mended (for the caller's log).
    pub fn opened(&self) -> &Sweep {
        &self.opened
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores `content` for `tenant`. The same content from the same source gives the same
    /// entry back; different content never replaces an existing hide.
    pub fn put(
        &self,
        tenant: &str,
        kind: &str,
        source: &str,
        content: &[u8],
        meta: &[(String, String)],
        retention: &Retention,
    ) -> Result<Put> {
        check_labels(kind, source, meta)?;
        let mut writing = self.begin_put(tenant, content.len() as u64, retention)?;
        writing.write(content)?;
        writing.finish(kind, source, meta, retention)
    }

    /// Starts a put of `size` bytes for `tenant` whose content arrives in pieces
    /// ([`Writing::write`]); nothing is visible until [`Writing::finish`]. Dropping the
    /// `Writing` abandons it and removes its temp file. `size` is reserved against the
    /// tenant's quota until then: a put whose size does not fit beside the tenant's other puts
    /// in progress is refused before a byte is written.
    pub fn begin_put(&self, tenant: &str, size: u64, retention: &Retention) -> Result<Writing<'_>> {
        if size > retention.quota_bytes {
            return Err(StoreError::QuotaExceeded {
                quota: retention.quota_bytes,
                used: self.usage(tenant)?.bytes,
                size,
            });
        }
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let held = pending.get(tenant).copied().unwrap_or(0);
            if held.saturating_add(size) > retention.quota_bytes {
                return Err(StoreError::UploadsOverQuota {
                    quota: retention.quota_bytes,
                    pending: held,
                    size,
                });
            }
            *pending.entry(tenant.to_string()).or_insert(0) += size;
        }
        let reservation = Reservation {
            store: self,
            tenant: tenant.to_string(),
            size,
        };
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "{}-{}-{}",
            std::process::id(),
            now_ms(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let path = self.root.join("tmp").join(name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)?;
        Ok(Writing {
            store: self,
            path,
            file,
            hasher: Sha256::new(),
            written: 0,
            reservation,
            synced: false,
        })
    }

    /// Under the writer's mutex: the same content again, or a new ID, retention, the temp file renamed
    /// into place, the directory fsynced, the row committed; then, still under the mutex, the
    /// evicted files unlinked.
    fn commit(&self, tmp: &Path, hide: NewHide<'_>, retention: &Retention) -> Result<Put> {
        let NewHide {
            tenant,
            kind,
            source,
            sha256,
            size,
            meta,
        } = hide;
        let source_key = id::sanitize_source(source);
        let put = self.mutate_placing(tenant, |db, placed| {
            if let Some(entry) = find_content(db, tenant, &source_key, sha256)? {
                return Ok((
                    Put {
                        entry,
                        created: false,
                        evicted: Vec::new(),
                    },
                    Vec::new(),
                ));
            }
            let charged = index::charge(size, kind, source, meta);
            let victims = make_room(db, tenant, charged, retention)?;
            let mut chosen = None;
            for candidate in id::candidates(&source_key, sha256) {
                let taken: Option<String> = db
                    .query_row(
                        "SELECT sha256 FROM hides WHERE tenant = ?1 AND id = ?2",
                        params![tenant, candidate],
                        |r| r.get(0),
                    )
                    .optional()?;
                // Nor an ID this put's eviction frees: its file is still there until the
                // commit, and a commit that then failed would unlink the new file under the
                // restored row of the old hide.
                if taken.is_none() && !victims.contains(&candidate) {
                    chosen = Some(candidate);
                    break;
                }
            }
            let id = chosen.ok_or_else(|| {
                StoreError::Invalid(format!(
                    "no free id for content {sha256} (a sha256 collision)"
                ))
            })?;
            let dir = self.tenant_dir(tenant)?;
            std::fs::rename(tmp, dir.join(&id))?;
            *placed = Some(dir.join(&id));
            File::open(&dir)?.sync_all()?;
            let created_ms = now_ms();
            index::insert(db, &id, &hide, created_ms)?;
            let entry = Entry {
                id,
                kind: kind.to_string(),
                source: source.to_string(),
                size,
                sha256: sha256.to_string(),
                meta: meta.to_vec(),
                created_ms,
            };
            let evicted = victims.clone();
            Ok((
                Put {
                    entry,
                    created: true,
                    evicted,
                },
                victims,
            ))
        })?;
        self.evicted_by_retention
            .fetch_add(put.evicted.len() as u64, Ordering::Relaxed);
        Ok(put)
    }

    /// A read-only view of every tenant's hides together, for metrics: a connection of its own
    /// to the index, which is in WAL mode, so that reading it never waits for a writer nor
    /// holds one up (and never takes the store's lock).
    pub fn observer(&self) -> Result<Observer> {
        let db = index::connect(
            &self.root,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        db.busy_timeout(Duration::from_millis(100))?;
        Ok(Observer { db })
    }

    /// Hides deleted since the store was opened.
    pub fn evicted(&self) -> Evicted {
        Evicted {
            retention: self.evicted_by_retention.load(Ordering::Relaxed),
            expiry: self.evicted_by_expiry.load(Ordering::Relaxed),
        }
    }

    /// A hide's metadata and whole content.
    pub fn get(&self, tenant: &str, id: &str) -> Result<(Entry, Vec<u8>)> {
        let (entry, file) = self.open_hide(tenant, id)?;
        let content = page::read_range(&file, 0..entry.size)?;
        Ok((entry, content))
    }

    /// A hide's metadata and its file, open for reading (to be read with positioned reads
    /// or streamed; the file is never written again).
    pub fn open_hide(&self, tenant: &str, id: &str) -> Result<(Entry, File)> {
        let entry = self.entry(tenant, id)?;
        let path = self.tenant_dir_path(tenant).join(&entry.id);
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            // Deleted by another process between the lookup and the open.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id.to_string()));
            }
            Err(e) => return Err(e.into()),
        };
        let on_disk = file.metadata()?.len();
        if on_disk != entry.size {
            return Err(StoreError::Io(io::Error::other(format!(
                "hide `{id}` is damaged: {on_disk} bytes on disk, {} in the index",
                entry.size
            ))));
        }
        Ok((entry, file))
    }

    /// One page of a hide, read off disk.
    pub fn cut(&self, tenant: &str, id: &str, page: u64, page_size: u64) -> Result<Cut> {
        self.byte_page(tenant, id, PageAt::Number(page), page_size)
    }

    /// One byte page of a hide, by number or by a byte it holds (a path names no byte page).
    pub fn byte_page(&self, tenant: &str, id: &str, at: PageAt, page_size: u64) -> Result<Cut> {
        check_page_size(page_size)?;
        let (entry, file) = self.open_hide(tenant, id)?;
        byte_cut(entry, &file, at, page_size, |_| {
            "a page by path is a JSON page: ask for JSON pages".into()
        })
    }

    /// One page of a hide in JSON pages, by number or by a path in it; a hide that is not one
    /// JSON value is paged in bytes, as [`Store::cut`] pages it (and has no paths).
    ///
    /// The hide's index at this page size is kept (in a bounded cache): the first page read of a hide
    /// reads it whole (about 10 ns a byte); the next ones read only from the page's mark to its
    /// end. A page by path reads the whole hide once (the last of a key given twice wins).
    pub fn json_page(&self, tenant: &str, id: &str, at: PageAt, page_size: u64) -> Result<Paged> {
        check_page_size(page_size)?;
        let (entry, file) = self.open_hide(tenant, id)?;
        let (laid, mut whole) = self.laid_out(tenant, &entry, &file, page_size)?;
        let index = match &*laid {
            Ok(index) => index,
            Err(not_json) => {
                return Ok(Paged {
                    cut: byte_cut(entry, &file, at, page_size, |id| {
                        format!(
                            "hide `{id}` is not one JSON value ({not_json}): it has byte pages, and no value has a path"
                        )
                    })?,
                    json: Err(not_json.clone()),
                });
            }
        };
        let page = match at {
            PageAt::Number(page) => page,
            PageAt::Offset(offset) => {
                check_offset(&entry, offset)?;
                index.page_of(offset)
            }
            PageAt::Path(path) => {
                let doc = match whole.take() {
                    Some(doc) => doc,
                    None => page::read_range(&file, 0..entry.size)?,
                };
                let offset = json_page::find(&doc, &path).ok_or_else(|| StoreError::NoValueAt {
                    id: entry.id.clone(),
                    path: json_page::render(&path),
                })?;
                whole = Some(doc);
                index.page_of(offset)
            }
        };
        json_cut(&entry, &file, index, whole.as_deref(), page, page_size)
    }

    /// A hide's head and tail: its pages 1, 2, N - 1 and N at `page_size` (those there are,
    /// each once, in that order), JSON pages or, for content that is not one JSON value, byte
    /// pages; from one open file and one layout, so they are pages of one content and cost one
    /// read of the hide when its layout is not kept.
    pub fn json_ends(&self, tenant: &str, id: &str, page_size: u64) -> Result<Vec<Paged>> {
        check_page_size(page_size)?;
        let (entry, file) = self.open_hide(tenant, id)?;
        let (laid, whole) = self.laid_out(tenant, &entry, &file, page_size)?;
        let wanted = |total: u64| {
            let mut pages: Vec<u64> = vec![1, 2, total.saturating_sub(1), total];
            pages.retain(|&n| n >= 1 && n <= total);
            pages.dedup();
            pages
        };
        match &*laid {
            Ok(index) => wanted(index.total_pages())
                .into_iter()
                .map(|n| json_cut(&entry, &file, index, whole.as_deref(), n, page_size))
                .collect(),
            Err(not_json) => {
                let layout = Layout::new(&file, entry.size, page_size)?;
                wanted(layout.total_pages())
                    .into_iter()
                    .map(|n| {
                        let range = layout.page(n).ok_or_else(|| {
                            StoreError::Damaged(format!("hide `{}` lost its page {n}", entry.id))
                        })?;
                        Ok(Paged {
                            cut: Cut {
                                content: page::read_range(&file, range.clone())?,
                                hide_id: entry.id.clone(),
                                page: n,
                                total_pages: layout.total_pages(),
                                offset: range.start,
                                size: entry.size,
                            },
                            json: Err(not_json.clone()),
                        })
                    })
                    .collect()
            }
        }
    }

    /// The hide's JSON layout at `page_size` (or why it has none), kept or made; when made,
    /// also the content it was made of.
    #[allow(clippy::type_complexity)]
    fn laid_out(
        &self,
        tenant: &str,
        entry: &Entry,
        file: &File,
        page_size: u64,
    ) -> Result<(
        std::sync::Arc<std::result::Result<json_page::JsonIndex, json_page::NotJson>>,
        Option<Vec<u8>>,
    )> {
        if let Some(laid) = self.layouts.get(tenant, &entry.sha256, page_size) {
            return Ok((laid, None));
        }
        let doc = page::read_range(file, 0..entry.size)?;
        let laid = std::sync::Arc::new(json_page::JsonIndex::new(&doc, page_size));
        self.layouts
            .put(tenant, &entry.sha256, page_size, laid.clone());
        Ok((laid, Some(doc)))
    }

    /// Every occurrence of `query` in a hide (up to the bound), with its page at `page_size`.
    pub fn search(
        &self,
        tenant: &str,
        id: &str,
        query: &str,
        opts: SearchOptions,
        page_size: u64,
    ) -> Result<Search> {
        let args = SearchArgs::new(query.to_owned(), opts, page_size)?;
        let (entry, file) = self.open_hide(tenant, id)?;
        Self::search_in(&entry, &file, &args)
    }

    /// [`Store::search`] of a hide already opened ([`Store::open_hide`]), with arguments
    /// checked before it was: touches nothing of the store but the open file, so it may run
    /// outside the caller's store turn.
    pub fn search_in(entry: &Entry, file: &File, args: &SearchArgs) -> Result<Search> {
        let layout = Layout::new(file, entry.size, args.page_size)?;
        let found = page::search(file, entry.size, &args.query, args.opts)?;
        Ok(Search {
            matches: found
                .offsets
                .iter()
                .map(|&offset| Match {
                    page: layout.page_of(offset),
                    offset,
                })
                .collect(),
            truncated: found.truncated,
            total_pages: layout.total_pages(),
        })
    }

    /// A tenant's hides, newest first.
    pub fn list(&self, tenant: &str) -> Result<Vec<Entry>> {
        Ok(self.list_page(tenant, 0, u32::MAX, u64::MAX)?.0)
    }

    /// One page of a tenant's hides, newest first: after skipping `offset`, at most `limit`
    /// of them, ending early once their labels and meta pass `label_bytes` (a page holds at
    /// least one). Returns the page and how many hides the tenant has in all.
    pub fn list_page(
        &self,
        tenant: &str,
        offset: u64,
        limit: u32,
        label_bytes: u64,
    ) -> Result<(Vec<Entry>, u64)> {
        self.read(|db| {
            let total = usage(db, tenant)?.entries;
            let mut stmt = db.prepare_cached(
                "SELECT seq, id, kind, source, size, sha256, created_ms FROM hides
             WHERE tenant = ?1 ORDER BY created_ms DESC, seq DESC LIMIT ?2 OFFSET ?3",
            )?;
            let rows = stmt
                .query_map(
                    params![tenant, i64::from(limit), offset.min(i64::MAX as u64) as i64],
                    row_entry,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            let mut page = Vec::new();
            let mut labels = 0u64;
            for (seq, entry) in rows {
                if !page.is_empty() && labels >= label_bytes {
                    break;
                }
                let entry = with_meta(db, seq, entry)?;
                labels += (entry.kind.len() + entry.source.len()) as u64
                    + entry
                        .meta
                        .iter()
                        .map(|(k, v)| (k.len() + v.len()) as u64)
                        .sum::<u64>();
                page.push(entry);
            }
            Ok((page, total))
        })
    }

    /// Deletes a hide; returns what it was.
    pub fn delete(&self, tenant: &str, id: &str) -> Result<Entry> {
        self.mutate_unlinking(tenant, |db| {
            let entry = lookup(db, tenant, id)?;
            db.execute(
                "DELETE FROM hides WHERE tenant = ?1 AND id = ?2",
                params![tenant, id],
            )?;
            let gone = vec![entry.id.clone()];
            Ok((entry, gone))
        })
        .inspect(|entry| self.layouts.forget(tenant, &entry.sha256))
    }

    /// Deletes every tenant's hides older than `max_age` (the age limit also applies on each
    /// put; this catches tenants that stopped putting). Returns how many were deleted.
    pub fn expire(&self, max_age: Duration) -> Result<usize> {
        let cutoff = now_ms().saturating_sub(max_age.as_millis() as u64) as i64;
        let tenants: Vec<String> = self.read(|db| {
            let mut stmt =
                db.prepare_cached("SELECT DISTINCT tenant FROM hides WHERE created_ms < ?1")?;
            Ok(stmt
                .query_map(params![cutoff], |r| r.get(0))?
                .collect::<Result<_, _>>()?)
        })?;
        let mut count = 0;
        for tenant in tenants {
            count += self.mutate_unlinking(&tenant, |db| {
                let mut stmt = db.prepare_cached(
                    "DELETE FROM hides WHERE tenant = ?1 AND created_ms < ?2 RETURNING id",
                )?;
                let ids = stmt
                    .query_map(params![tenant, cutoff], |r| r.get(0))?
                    .collect::<Result<Vec<String>, _>>()?;
                Ok((ids.len(), ids))
            })?;
        }
        self.evicted_by_expiry
            .fetch_add(count as u64, Ordering::Relaxed);
        Ok(count)
    }

    /// What a tenant holds: one row of the index's counters.
    pub fn usage(&self, tenant: &str) -> Result<Usage> {
        self.read(|db| usage(db, tenant))
    }

    /// A hide's metadata.
    pub fn entry(&self, tenant: &str, id: &str) -> Result<Entry> {
        self.read(|db| lookup(db, tenant, id))
    }

    /// Runs `f` in a read transaction on a reader connection: it sees one committed state of
    /// the index, and neither waits for the writer nor holds it up (WAL).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let kept = self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let db = match kept {
            Some(db) => db,
            None => {
                self.check_index()?;
                let db = index::connect(
                    &self.root,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                db.busy_timeout(Duration::from_secs(5))?;
                db
            }
        };
        let out = db
            .unchecked_transaction()
            .map_err(StoreError::from)
            .and_then(|tx| f(&tx));
        // Kept for the next read unless the index itself failed (an unknown ID is an answer,
        // not a reason to open a new connection); the read transaction ended with `tx`.
        if !matches!(out, Err(StoreError::Index(_) | StoreError::Damaged(_))) {
            let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
            if readers.len() < READERS_KEPT {
                readers.push(db);
            }
        }
        out
    }

    /// Refuses to go on when the index's path no longer names the file the store opened (it
    /// was deleted, or replaced): a commit would go to a file no later open reads, or to one
    /// this store did not check. What is listed stays readable through the connections
    /// already open; the next open lists every hide again from its file.
    fn check_index(&self) -> Result<()> {
        match index::identity(&self.root) {
            Ok(now) if now == self.index_file => Ok(()),
            _ => Err(StoreError::Damaged(
                "index.sqlite3 was removed or replaced while the store was open".into(),
            )),
        }
    }

    fn lock_inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` in an immediate transaction on the one writer connection, so that it is the
    /// only mutation (the store's process owns the directory).
    fn mutate<T>(&self, f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        self.mutate_unlinking("", |db| Ok((f(db)?, Vec::new())))
    }

    fn tenant_dir_path(&self, tenant: &str) -> PathBuf {
        self.root.join("objects").join(tenant_key(tenant))
    }

    /// The tenant's directory, made (and named, so that its hides can be told from their
    /// files alone) before its first hide is renamed into it.
    fn tenant_dir(&self, tenant: &str) -> Result<PathBuf> {
        let dir = self.tenant_dir_path(tenant);
        let made = private_subdir(&dir)?;
        if made || !dir.join(sweep::TENANT_FILE).exists() {
            sweep::name_tenant_dir(&dir, tenant)?;
        }
        if made {
            File::open(self.root.join("objects"))?.sync_all()?;
        }
        Ok(dir)
    }

    /// [`Store::mutate`] for a change that deletes some of `tenant`'s rows: `f` returns its
    /// result and the IDs whose rows it deleted. Their files are unlinked after the commit and
    /// before the mutex is released, each only if no row names it again. Unlinked later, a
    /// file could be one that a put of the same content renamed into place meanwhile, and its
    /// listed hide would lose its content.
    fn mutate_unlinking<T>(
        &self,
        tenant: &str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<(T, Vec<String>)>,
    ) -> Result<T> {
        self.mutate_placing(tenant, |db, _| f(db))
    }

    /// [`Store::mutate_unlinking`] for a change that renames a file into place (a put): `f`
    /// says where in `placed`. If the change then does not commit (a full disk fails the
    /// WAL's append), the file is unlinked before the mutex is released: in no row, it would
    /// hold space no tenant can see or free until the next open.
    fn mutate_placing<T>(
        &self,
        tenant: &str,
        f: impl FnOnce(&rusqlite::Transaction<'_>, &mut Option<PathBuf>) -> Result<(T, Vec<String>)>,
    ) -> Result<T> {
        self.check_index()?;
        let mut inner = self.lock_inner();
        let Inner { db } = &mut *inner;
        let mut placed = None;
        let change = || {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let done = f(&tx, &mut placed)?;
            tx.commit()?;
            Ok(done)
        };
        let (out, ids) = match change() {
            Ok(done) => done,
            Err(e) => {
                if let Some(file) = placed {
                    let _ = std::fs::remove_file(file);
                }
                return Err(e);
            }
        };
        if !ids.is_empty() {
            let dir = self.tenant_dir_path(tenant);
            let mut gone = Vec::new();
            for id in &ids {
                if listed(db, tenant, id).unwrap_or(true) {
                    continue;
                }
                match std::fs::remove_file(dir.join(id)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {}
                    _ => gone.push(id),
                }
            }
            if let Ok(d) = File::open(&dir) {
                let _ = d.sync_all();
            }
            // The deletes whose files are gone are done; the rest stay in `deleted` for the
            // next open to finish (a failure here only leaves that work to it).
            if !gone.is_empty()
                && let Ok(tx) = db.transaction()
            {
                for id in gone {
                    let _ = tx.execute(
                        "DELETE FROM deleted WHERE tenant = ?1 AND id = ?2",
                        params![tenant, id],
                    );
                }
                let _ = tx.commit();
            }
        }
        Ok(out)
    }
}

/// Checks a put's kind, source and meta against the store's limits (what a put checks first;
/// public so that a caller can refuse a put before its content arrives).
pub fn check_labels(kind: &str, source: &str, meta: &[(String, String)]) -> Result<()> {
    for (what, text) in [("kind", kind), ("source", source)] {
        if text.len() > MAX_LABEL_BYTES {
            return Err(StoreError::Invalid(format!(
                "{what} is {} bytes, over the {MAX_LABEL_BYTES}-byte limit",
                text.len()
            )));
        }
    }
    if meta.len() > MAX_META_PAIRS {
        // A decoded request keeps one pair past the limit and drops the rest, so the count
        // past the limit is not known here.
        return Err(StoreError::Invalid(format!(
            "more than {MAX_META_PAIRS} meta pairs, the limit"
        )));
    }
    if let Some((k, v)) = meta
        .iter()
        .find(|(k, v)| k.len() > MAX_META_BYTES || v.len() > MAX_META_BYTES)
    {
        return Err(StoreError::Invalid(format!(
            "meta pair of {} and {} bytes; keys and values are limited to {MAX_META_BYTES} bytes",
            k.len(),
            v.len()
        )));
    }
    Ok(())
}

/// Refuses an offset past the end of the hide.
fn check_offset(entry: &Entry, offset: u64) -> Result<()> {
    match offset < entry.size {
        true => Ok(()),
        false => Err(StoreError::Invalid(format!(
            "offset {offset} is past the end of hide `{}` ({} bytes)",
            entry.id, entry.size
        ))),
    }
}

/// The byte page of the hide `entry` (whose file is `file`) at `at`; a path is refused with
/// `no_path(id)`. The hide's byte pages are laid out once.
/// JSON page `page` of a hide laid out as `index`, read from `whole` (the content) when it
/// was read, else from the file.
fn json_cut(
    entry: &Entry,
    file: &File,
    index: &json_page::JsonIndex,
    whole: Option<&[u8]>,
    page: u64,
    page_size: u64,
) -> Result<Paged> {
    let (Some(range), Some(window)) = (index.range(page), index.window(page)) else {
        return Err(StoreError::PageOutOfRange {
            id: entry.id.clone(),
            page,
            total: index.total_pages(),
            page_size,
        });
    };
    let read;
    let bytes = match whole {
        Some(doc) => &doc[window.start as usize..window.end as usize],
        None => {
            read = page::read_range(file, window.clone())?;
            &read[..]
        }
    };
    let described = index.page(page, bytes).ok_or_else(|| {
        StoreError::Damaged(format!(
            "hide `{}` no longer reads as the JSON it was laid out from",
            entry.id
        ))
    })?;
    let content =
        bytes[(range.start - window.start) as usize..(range.end - window.start) as usize].to_vec();
    Ok(Paged {
        cut: Cut {
            hide_id: entry.id.clone(),
            page,
            total_pages: index.total_pages(),
            offset: range.start,
            size: entry.size,
            content,
        },
        json: Ok(described),
    })
}

fn byte_cut(
    entry: Entry,
    file: &File,
    at: PageAt,
    page_size: u64,
    no_path: impl FnOnce(&str) -> String,
) -> Result<Cut> {
    let layout = Layout::new(file, entry.size, page_size)?;
    let page = match at {
        PageAt::Number(page) => page,
        PageAt::Offset(offset) => {
            check_offset(&entry, offset)?;
            layout.page_of(offset)
        }
        PageAt::Path(_) => return Err(StoreError::Invalid(no_path(&entry.id))),
    };
    let range = layout
        .page(page)
        .ok_or_else(|| StoreError::PageOutOfRange {
            id: entry.id.clone(),
            page,
            total: layout.total_pages(),
            page_size,
        })?;
    Ok(Cut {
        content: page::read_range(file, range.clone())?,
        hide_id: entry.id,
        page,
        total_pages: layout.total_pages(),
        offset: range.start,
        size: entry.size,
    })
}

/// A search's arguments, checked ([`SearchArgs::new`]) before any hide is opened: a search
/// is refused for them whether or not its hide exists.
#[derive(Debug, Clone)]
pub struct SearchArgs {
    query: String,
    opts: SearchOptions,
    page_size: u64,
}

impl SearchArgs {
    /// The arguments of a search for `query`, with its pages at `page_size`: refused unless
    /// the query is 1 to `MAX_QUERY_BYTES` bytes, `max_matches` 1 to `MAX_MATCHES` and the page
    /// size allowed.
    pub fn new(query: String, opts: SearchOptions, page_size: u64) -> Result<SearchArgs> {
        check_page_size(page_size)?;
        if query.is_empty() || query.len() > page::MAX_QUERY_BYTES {
            return Err(StoreError::Invalid(format!(
                "search query is {} bytes; it must be 1 to {} bytes",
                query.len(),
                page::MAX_QUERY_BYTES
            )));
        }
        if !(1..=page::MAX_MATCHES).contains(&opts.max_matches) {
            return Err(StoreError::Invalid(format!(
                "max_matches is {}; it must be 1 to {}",
                opts.max_matches,
                page::MAX_MATCHES
            )));
        }
        Ok(SearchArgs {
            query,
            opts,
            page_size,
        })
    }
}

/// Refuses a page size outside `MIN_PAGE_SIZE..=MAX_PAGE_SIZE`.
pub fn check_page_size(page_size: u64) -> Result<()> {
    if (page::MIN_PAGE_SIZE..=page::MAX_PAGE_SIZE).contains(&page_size) {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "page size is {page_size} bytes; it must be {} to {} bytes",
            page::MIN_PAGE_SIZE,
            page::MAX_PAGE_SIZE
        )))
    }
}

/// The directory name of a tenant's objects: a hash, so no tenant name reaches a path.
fn tenant_key(tenant: &str) -> String {
    hex(&Sha256::digest(tenant.as_bytes())[..8])
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
