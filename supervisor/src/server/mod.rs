//! The socket server: accepts connections, speaks the protocol, hands runs to the pool, and
//! drains on shutdown. It never parses a filter or an input document: inputs go to a worker
//! as the bytes they arrived as (architecture invariant).

use crate::cgroup::CgroupParent;
use crate::config::Config;
use crate::pool::{Pool, PoolConfig, negotiate_isolation};
use crate::spawn::{Launcher, Program};
use crate::tenant::Admission;
use jqjail_protocol::worker::StartupArgs;
use std::future::Future;
use std::sync::Arc;
use tokio::net::UnixListener;

mod connection;
mod frames;
mod handlers;
mod listener;
mod metrics;
mod reply;
mod shared;
pub mod store;

use shared::Shared;
pub use shared::{EXPIRE_EVERY, Reload, SERVER_NAME, TAIL_STALL};

pub use metrics::READ_FOR as METRICS_HEAD_DEADLINE;

use listener::{listen, spawn_expiry, spawn_reload};

/// Serves `listener` until `shutdown` completes (or, with `idle_exit` set, until no client has
/// been connected for that long), then stops accepting, lets in-flight requests finish within
/// the drain timeout. Idle workers die with the pool: each is killed and reaped when its handle
/// is dropped, and by its parent-death signal should the daemon die first.
pub async fn serve(
    listener: UnixListener,
    cfg: Config,
    program: Program,
    store: Arc<store::StoreSlot>,
    shutdown: impl Future<Output = ()>,
    reload: Option<Reload>,
) -> std::io::Result<()> {
    let startup = StartupArgs {
        parent_pid: std::process::id(),
        heap_bytes: cfg.limits.max_heap_bytes,
        cpu_seconds: cfg.cpu_seconds,
        max_input_bytes: cfg.limits.max_input_bytes,
        max_filter_bytes: cfg.limits.max_filter_bytes,
        isolation: cfg.isolation,
        uid: cfg.worker_uids.first,
        // Each refill decides for its own worker (`pool.rs::refill`).
        warm_up: true,
    };
    let launcher = Launcher::new(cfg.worker_start, cfg.code_pages, program, cfg.worker_uids);
    let startup = negotiate_isolation(&launcher, startup).await;
    let cgroup = match cfg.cgroup_limit() {
        0 => None,
        limit => match CgroupParent::create(limit) {
            Ok(parent) => {
                tracing::info!(
                    limit_bytes = limit,
                    "each worker gets its own memory cgroup"
                );
                Some(Arc::new(parent))
            }
            Err(why) => {
                tracing::warn!(reason = %why, "per-worker memory cgroups unavailable; RLIMIT_DATA alone bounds the heap");
                None
            }
        },
    };
    // Bound before the daemon says it is ready. A listener that cannot be bound is logged as
    // an error and left out: metrics are not worth the service (a failed start would restart
    // the unit in a loop, and every tenant would lose it).
    let metrics = match &cfg.metrics.listen {
        Some(at) => match metrics::bind(at, cfg.metrics.socket_mode) {
            Ok(bound) => {
                tracing::info!(listen = %bound.describe(), "metrics listener serving GET /metrics");
                Some(bound)
            }
            Err(e) => {
                tracing::error!(error = %e, "metrics listener not started");
                None
            }
        },
        None => None,
    };
    tracing::info!(
        workers = %launcher.describe(),
        limits = ?cfg.limits,
        stack_bytes = cfg.stack_bytes,
        cpu_seconds = cfg.cpu_seconds,
        prestart = cfg.prestart,
        max_concurrent = cfg.max_concurrent,
        "jqjaild ready"
    );
    crate::systemd::notify("READY=1");
    let pool = Pool::start(PoolConfig {
        launcher,
        startup,
        prestart: cfg.prestart,
        max_concurrent: cfg.max_concurrent,
        cgroup: cgroup.clone(),
    });
    let shared = Arc::new(Shared {
        policy: std::sync::RwLock::new(cfg.clone()),
        stats: crate::stats::Stats::default(),
        admission: Admission::new(&cfg),
        failed_run_log: Default::default(),
        cfg,
        pool,
        cgroup_bytes: cgroup.as_ref().map_or(0, |c| c.limit_bytes()),
        store,
        bulk: crate::bulk::Bulk::start(),
        expire_now: tokio::sync::Notify::new(),
    });
    if let Some(bound) = metrics
        && let Err(e) = metrics::spawn(bound, shared.clone())
    {
        tracing::error!(error = %e, "metrics listener not started");
    }
    spawn_expiry(&shared);
    if let Some(reload) = reload {
        spawn_reload(&shared, reload);
    }
    listen(listener, shared, shutdown).await;
    Ok(())
}
