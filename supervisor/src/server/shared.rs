//! What every part of the request path shares: [`Shared`] (the configuration, the policy in
//! force, the counters, the pool, the budgets, the store) and the server's constants. It
//! imports nothing of `server/` but the store's slot, so no file there imports a file that
//! imports it back.

use super::store;
use crate::config::Config;
use crate::pool::Pool;
use crate::tenant::Admission;
use std::sync::Arc;
use std::time::Duration;

/// The server name sent in the handshake.
pub const SERVER_NAME: &str = concat!("jqjaild/", env!("CARGO_PKG_VERSION"));

/// A streamed tail from a client that sends no byte for this long is cut off: an upload
/// holds a worker (and an upload turn) only while it is actually arriving.
pub const TAIL_STALL: Duration = Duration::from_secs(5);

/// How often hides past the age limit are swept (besides on every put).
pub const EXPIRE_EVERY: Duration = Duration::from_secs(600);

/// Re-reads the configuration (on SIGHUP); an error keeps the running configuration.
pub type Reload = Box<dyn Fn() -> Result<Config, String> + Send + Sync>;

pub(super) struct Shared {
    pub(super) cfg: Config,
    /// The tenant policy in force: `cfg`'s, replaced on reload.
    pub(super) policy: std::sync::RwLock<Config>,
    pub(super) stats: crate::stats::Stats,
    pub(super) pool: Pool,
    /// Every budget a request's cost is taken from before it is spent.
    pub(super) admission: Admission,
    /// A tenant can fail runs at will: logged at most once a second.
    pub(super) failed_run_log: crate::admit::Throttle,
    /// The per-worker cgroup limit in force (0: none).
    pub(super) cgroup_bytes: u64,
    /// The hide store, or why the daemon has none.
    pub(super) store: Arc<store::StoreSlot>,
    /// The threads that run searches, nicer than the rest of the daemon (`bulk.rs`).
    pub(super) bulk: crate::bulk::Bulk,
    /// Wakes the hide-expiry sweep (after a reload, so a new age limit applies at once).
    pub(super) expire_now: tokio::sync::Notify,
}

impl Shared {
    /// The gauges of this moment, for a stats snapshot.
    pub(super) fn now(&self) -> crate::stats::Now {
        use std::sync::atomic::Ordering;
        let (running, waiting) = self.pool.load();
        crate::stats::Now {
            running: running as u64,
            waiting: waiting as u64,
            connections: self.admission.slots.open() as u64,
            workers_started: self.pool.stats.started.load(Ordering::Relaxed),
            worker_start_failures: self.pool.stats.failed_starts.load(Ordering::Relaxed),
        }
    }
}
