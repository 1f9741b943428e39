//! `stats`: the daemon's counters, every tenant's for an administrator, its own for a tenant.

use super::super::Shared;
use super::super::connection::{Reply, Session};
use crate::config::TenantOf;
use jqjail_protocol::Response;
use std::sync::atomic::Ordering;

pub(crate) fn handle(session: &Session, tenant: &TenantOf, shared: &Shared) -> Reply {
    let (running, waiting) = shared.pool.load();
    let now = crate::stats::Now {
        running: running as u64,
        waiting: waiting as u64,
        connections: shared.admission.slots.open() as u64,
        workers_started: shared.pool.stats.started.load(Ordering::Relaxed),
        worker_start_failures: shared.pool.stats.failed_starts.load(Ordering::Relaxed),
    };
    // Administrators see every tenant's row; a tenant only its own.
    let view = (!session.admin()).then_some(&*tenant.name);
    Response::Stats(shared.stats.snapshot(view, now)).into()
}
