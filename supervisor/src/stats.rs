//! Counters for `jqjail stats`: outcomes, per-tenant totals and recent latency. Holds no
//! request content: codes, tenant names and durations only.

use jqjail_protocol::{ErrorCode, Latency, StatsReply, TenantStats};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

/// How many recent requests the latency percentiles cover.
pub const LATENCY_WINDOW: usize = 1024;

/// The daemon's counters.
pub struct Stats {
    started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    outcomes: BTreeMap<&'static str, u64>,
    tenants: HashMap<String, (u64, u64)>,
    recent_us: VecDeque<u64>,
}

/// Gauges sampled at the moment of a snapshot.
#[derive(Debug, Clone, Copy, Default)]
pub struct Now {
    /// Evaluations running.
    pub running: u64,
    /// Requests waiting for a slot.
    pub waiting: u64,
    /// Open connections.
    pub connections: u64,
    /// Workers started so far.
    pub workers_started: u64,
    /// Workers that failed to start.
    pub worker_start_failures: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }
}

impl Stats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one answered request.
    pub fn record(&self, tenant: &str, error: Option<ErrorCode>, wall_us: u64) {
        let mut inner = self.lock();
        *inner
            .outcomes
            .entry(error.map_or("OK", ErrorCode::as_str))
            .or_default() += 1;
        let row = inner.tenants.entry(tenant.to_string()).or_default();
        row.0 += 1;
        row.1 += u64::from(error.is_some());
        if inner.recent_us.len() == LATENCY_WINDOW {
            inner.recent_us.pop_front();
        }
        inner.recent_us.push_back(wall_us);
    }

    /// A snapshot. `viewer` is the asking tenant, `None` for an administrator (all rows).
    pub fn snapshot(&self, viewer: Option<&str>, now: Now) -> StatsReply {
        let inner = self.lock();
        let mut sorted: Vec<u64> = inner.recent_us.iter().copied().collect();
        sorted.sort_unstable();
        let pick = |q: f64| {
            if sorted.is_empty() {
                0
            } else {
                sorted[((sorted.len() - 1) as f64 * q).round() as usize]
            }
        };
        let mut tenants: Vec<TenantStats> = inner
            .tenants
            .iter()
            .filter(|(name, _)| viewer.is_none_or(|v| v == name.as_str()))
            .map(|(name, (requests, errors))| TenantStats {
                name: name.clone(),
                requests: *requests,
                errors: *errors,
            })
            .collect();
        tenants.sort_by(|a, b| a.name.cmp(&b.name));
        StatsReply {
            uptime_ms: self.started.elapsed().as_millis() as u64,
            outcomes: inner
                .outcomes
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            latency: Latency {
                count: sorted.len() as u64,
                p50_us: pick(0.5),
                p90_us: pick(0.9),
                p99_us: pick(0.99),
            },
            running: now.running,
            waiting: now.waiting,
            connections: now.connections,
            workers_started: now.workers_started,
            worker_start_failures: now.worker_start_failures,
            tenants,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outcomes_tenants_and_latency() {
        let s = Stats::default();
        for i in 0..10 {
            s.record("a", None, i * 100);
        }
        s.record("b", Some(ErrorCode::Timeout), 5000);
        let all = s.snapshot(None, Now::default());
        assert_eq!(all.outcomes, vec![("OK".into(), 10), ("TIMEOUT".into(), 1)]);
        assert_eq!(all.tenants.len(), 2);
        assert_eq!(all.latency.count, 11);
        assert_eq!(all.latency.p50_us, 500);
        assert_eq!(all.latency.p99_us, 5000);
        let own = s.snapshot(Some("b"), Now::default());
        assert_eq!(
            own.tenants,
            vec![TenantStats {
                name: "b".into(),
                requests: 1,
                errors: 1
            }]
        );
    }
}
