//! `stats`: the daemon's counters, every tenant's for an administrator, its own for a tenant.

use super::super::reply::{Reply, Session};
use super::super::shared::Shared;
use crate::config::TenantOf;
use jqjail_protocol::Response;

pub(crate) fn handle(session: &Session, tenant: &TenantOf, shared: &Shared) -> Reply {
    let now = shared.now();
    // Administrators see every tenant's row; a tenant only its own.
    let view = (!session.admin()).then_some(&*tenant.name);
    Response::Stats(shared.stats.snapshot(view, now)).into()
}
