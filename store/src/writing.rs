//! A put in progress: its temp file, its hash, and the quota it holds until it ends.

use crate::index::find_content;
use crate::{Put, Result, Retention, Store, StoreError, check_labels, hex, id};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// Bytes of a tenant's quota held by one put in progress, from [`Store::begin_put`] until
/// the put is dropped (finished or abandoned).
pub(crate) struct Reservation<'s> {
    pub(crate) store: &'s Store,
    pub(crate) tenant: String,
    pub(crate) size: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut pending = self.store.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = pending.get_mut(&self.tenant) {
            *held = held.saturating_sub(self.size);
            if *held == 0 {
                pending.remove(&self.tenant);
            }
        }
    }
}

/// A put in progress: its content goes to a temp file and into the hash as it arrives, so a
/// large hide is never held in memory. Dropped unfinished, it removes its temp file.
///
/// Its declared size is reserved against the tenant's quota from the start: the uploads a
/// tenant has in progress hold at most its quota on disk outside the index, however many stall.
pub struct Writing<'s> {
    pub(crate) store: &'s Store,
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    pub(crate) hasher: Sha256,
    pub(crate) written: u64,
    pub(crate) reservation: Reservation<'s>,
    /// Its content is on disk ([`Writing::sync`]).
    pub(crate) synced: bool,
}

impl Writing<'_> {
    /// Appends content; more than the size reserved at [`Store::begin_put`] is refused.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let after = self.written + bytes.len() as u64;
        if after > self.reservation.size {
            return Err(StoreError::Invalid(format!(
                "put content is over the {} bytes it declared",
                self.reservation.size
            )));
        }
        self.file.write_all(bytes)?;
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        self.synced = false;
        Ok(())
    }

    /// Makes the content written so far durable, so that [`Writing::finish`] has only the
    /// index to write (a caller can do this part outside the store's turns).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_all()?;
        self.synced = true;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Makes the content durable and stores it as a hide of the tenant it was begun for (see
    /// [`Store::put`]).
    pub fn finish(
        mut self,
        kind: &str,
        source: &str,
        meta: &[(String, String)],
        retention: &Retention,
    ) -> Result<Put> {
        check_labels(kind, source, meta)?;
        let tenant = self.reservation.tenant.clone();
        let tenant = tenant.as_str();
        if self.written > retention.quota_bytes {
            return Err(StoreError::QuotaExceeded {
                quota: retention.quota_bytes,
                used: self.store.usage(tenant)?.bytes,
                size: self.written,
            });
        }
        let sha256 = hex(&std::mem::take(&mut self.hasher).finalize());
        // The same content from the same source is already there: nothing to make durable
        // (the temp file goes with `self`). `commit` checks again under the writer's mutex.
        let source_key = id::sanitize_source(source);
        let existing = self
            .store
            .read(|db| find_content(db, tenant, &source_key, &sha256))?;
        if let Some(entry) = existing {
            return Ok(Put {
                entry,
                created: false,
                evicted: Vec::new(),
            });
        }
        if !self.synced {
            self.file.sync_all()?;
        }
        let hide = crate::NewHide {
            tenant,
            kind,
            source,
            sha256: &sha256,
            size: self.written,
            meta,
        };
        self.store.commit(&self.path, hide, retention)
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        // Gone already when the put committed (renamed into place); otherwise abandoned.
        // The reservation is given back after this, when the field is dropped.
        let _ = std::fs::remove_file(&self.path);
    }
}
