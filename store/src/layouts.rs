//! A bounded cache of JSON page indexes ([`JsonIndex`]), so that paging a large JSON hide costs
//! a page's work, not a layout of the whole hide, from the second page on.
//!
//! An index is kept by tenant, by the hide's sha256 (an ID names other content once its hide
//! is deleted and the ID is given again) and by page size. What content is not JSON is kept
//! too (a few bytes), so a hide of text is not read whole again for each page.
//!
//! The cache holds at most [`CACHE_BYTES`] and [`CACHE_ENTRIES`] in all, and a tenant at most
//! a quarter of each: an index over a tenant's share is not kept. A tenant's new index first
//! displaces that tenant's least recently used ones, then anyone's. So a tenant cannot grow the
//! daemon past the bound; several tenants can displace each other's indexes, which costs a
//! rebuild (a read of the hide and about 10 ns a byte), never a wrong page.

use crate::json_page::{JsonIndex, NotJson};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bytes of indexes kept, in all.
pub const CACHE_BYTES: usize = 32 << 20;
/// Indexes kept, in all.
pub const CACHE_ENTRIES: usize = 1024;

/// One hide's layout at one page size: its JSON pages, or why it has none.
pub(crate) type Laid = Result<JsonIndex, NotJson>;

type Key = (String, String, u64);

struct Kept {
    laid: Arc<Laid>,
    bytes: usize,
    used: u64,
}

#[derive(Default)]
struct Inner {
    kept: HashMap<Key, Kept>,
    bytes: usize,
    clock: u64,
}

/// The cache (see the module).
#[derive(Default)]
pub(crate) struct Layouts {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Layouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Layouts")
            .field("entries", &inner.kept.len())
            .field("bytes", &inner.bytes)
            .finish()
    }
}

fn cost(laid: &Laid) -> usize {
    std::mem::size_of::<Kept>()
        + match laid {
            Ok(index) => index.heap_bytes(),
            Err(_) => 0,
        }
}

impl Layouts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The cache holds no invariant a panic can break halfway.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The layout of `tenant`'s hide with `sha256` at `page_size`, if kept.
    pub(crate) fn get(&self, tenant: &str, sha256: &str, page_size: u64) -> Option<Arc<Laid>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let key = (tenant.to_string(), sha256.to_string(), page_size);
        let kept = inner.kept.get_mut(&key)?;
        kept.used = now;
        Some(kept.laid.clone())
    }

    /// Keeps `laid` (unless it is over a tenant's share), displacing what it must.
    pub(crate) fn put(&self, tenant: &str, sha256: &str, page_size: u64, laid: Arc<Laid>) {
        let bytes = cost(&laid);
        if bytes > CACHE_BYTES / 4 {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        let key = (tenant.to_string(), sha256.to_string(), page_size);
        if let Some(old) = inner.kept.remove(&key) {
            inner.bytes -= old.bytes;
        }
        // The tenant's own first, then anyone's.
        loop {
            let (mine, mine_bytes) = inner
                .kept
                .iter()
                .filter(|(k, _)| k.0 == tenant)
                .fold((0, 0), |(n, b), (_, v)| (n + 1, b + v.bytes));
            let over_share = mine + 1 > CACHE_ENTRIES / 4 || mine_bytes + bytes > CACHE_BYTES / 4;
            let over_all =
                inner.kept.len() + 1 > CACHE_ENTRIES || inner.bytes + bytes > CACHE_BYTES;
            if !over_share && !over_all {
                break;
            }
            let oldest = inner
                .kept
                .iter()
                .filter(|(k, _)| !over_share || k.0 == tenant)
                .min_by_key(|(_, v)| v.used)
                .map(|(k, _)| k.clone());
            match oldest.and_then(|k| inner.kept.remove(&k)) {
                Some(gone) => inner.bytes -= gone.bytes,
                None => return,
            }
        }
        inner.bytes += bytes;
        inner.kept.insert(key, Kept { laid, bytes, used });
    }

    /// Forgets every layout of a tenant's hide (deleted).
    pub(crate) fn forget(&self, tenant: &str, sha256: &str) {
        let mut inner = self.lock();
        let mut freed = 0;
        inner.kept.retain(|k, v| {
            let keep = !(k.0 == tenant && k.1 == sha256);
            if !keep {
                freed += v.bytes;
            }
            keep
        });
        inner.bytes -= freed;
    }

    /// Indexes kept and their bytes.
    #[cfg(test)]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.kept.len(), inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(n: usize) -> Arc<Laid> {
        let doc = format!("[{}1]", "1,".repeat(n));
        Arc::new(JsonIndex::new(doc.as_bytes(), 64))
    }

    #[test]
    fn a_tenant_displaces_its_own_before_anyone_elses() {
        let cache = Layouts::default();
        cache.put("victim", "v", 64, index(10));
        for i in 0..CACHE_ENTRIES {
            cache.put("flood", &i.to_string(), 64, index(10));
        }
        assert!(
            cache.get("victim", "v", 64).is_some(),
            "the victim's index was displaced"
        );
        let (entries, bytes) = cache.usage();
        assert!(entries <= CACHE_ENTRIES / 4 + 1, "{entries} entries");
        assert!(bytes <= CACHE_BYTES);
    }

    #[test]
    fn the_cache_stays_within_its_bytes_whoever_fills_it() {
        let cache = Layouts::default();
        // About 2.6 MiB each: 64-byte pages of 10 MiB.
        let big = index(5 << 20);
        for tenant in 0..16 {
            for hide in 0..4 {
                cache.put(&tenant.to_string(), &hide.to_string(), 64, big.clone());
                assert!(cache.usage().1 <= CACHE_BYTES, "{:?}", cache.usage());
            }
        }
        assert!(cache.usage().0 >= 8, "{:?}", cache.usage());
    }

    #[test]
    fn forgetting_a_hide_frees_its_layouts() {
        let cache = Layouts::default();
        cache.put("t", "h", 64, index(100));
        cache.put("t", "h", 128, index(100));
        cache.put("t", "other", 64, index(100));
        cache.forget("t", "h");
        assert!(cache.get("t", "h", 64).is_none() && cache.get("t", "h", 128).is_none());
        assert!(cache.get("t", "other", 64).is_some());
        assert_eq!(cache.usage().0, 1);
    }
}
