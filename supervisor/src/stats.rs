//! Counters for `jqjail stats` and the metrics listener: outcomes, languages, per-tenant
//! totals, latency (recent percentiles and a histogram since start) and connections refused.
//! Holds no request content: codes, tenant names and durations only.

use jqjail_protocol::{ErrorCode, Lang, Latency, StatsReply, TenantStats};
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

/// Upper bounds of the run-duration histogram's buckets, seconds.
pub const DURATION_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default)]
struct Inner {
    outcomes: BTreeMap<&'static str, u64>,
    languages: BTreeMap<&'static str, u64>,
    tenants: HashMap<String, (u64, u64)>,
    recent_us: VecDeque<u64>,
    /// Runs at most each bucket's bound (not cumulative), and the sum of every duration.
    buckets: [u64; DURATION_BUCKETS.len()],
    sum_us: u64,
    count: u64,
    refused: BTreeMap<&'static str, u64>,
}

/// What the metrics listener reads besides a [`StatsReply`]: counters kept since start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Runs by language (`jq`, `path`, `shape`).
    pub languages: Vec<(&'static str, u64)>,
    /// The run-duration histogram: (bound in seconds, runs at most that long, cumulative).
    pub buckets: Vec<(f64, u64)>,
    /// Runs in the histogram (its `+Inf` bucket).
    pub count: u64,
    /// The sum of every run's duration, seconds.
    pub sum_seconds: f64,
    /// Connections closed unread, by the limit they met.
    pub refused: Vec<(&'static str, u64)>,
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

    /// Records one answered run.
    pub fn record(&self, tenant: &str, lang: Lang, error: Option<ErrorCode>, wall_us: u64) {
        let mut inner = self.lock();
        *inner
            .outcomes
            .entry(error.map_or("OK", ErrorCode::as_str))
            .or_default() += 1;
        *inner.languages.entry(language(lang)).or_default() += 1;
        let seconds = wall_us as f64 / 1e6;
        if let Some(i) = DURATION_BUCKETS.iter().position(|&le| seconds <= le) {
            inner.buckets[i] += 1;
        }
        inner.sum_us += wall_us;
        inner.count += 1;
        let row = inner.tenants.entry(tenant.to_string()).or_default();
        row.0 += 1;
        row.1 += u64::from(error.is_some());
        if inner.recent_us.len() == LATENCY_WINDOW {
            inner.recent_us.pop_front();
        }
        inner.recent_us.push_back(wall_us);
    }

    /// Records a connection closed unread because it met `limit`.
    pub fn refused(&self, limit: &'static str) {
        *self.lock().refused.entry(limit).or_default() += 1;
    }

    /// The counters kept since start that a [`StatsReply`] does not carry.
    pub fn totals(&self) -> Totals {
        let inner = self.lock();
        let mut below = 0;
        Totals {
            languages: inner.languages.iter().map(|(k, v)| (*k, *v)).collect(),
            buckets: DURATION_BUCKETS
                .iter()
                .zip(inner.buckets)
                .map(|(&le, n)| {
                    below += n;
                    (le, below)
                })
                .collect(),
            count: inner.count,
            sum_seconds: inner.sum_us as f64 / 1e6,
            refused: inner.refused.iter().map(|(k, v)| (*k, *v)).collect(),
        }
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

/// A language's name in metrics.
fn language(lang: Lang) -> &'static str {
    match lang {
        Lang::Jq => "jq",
        Lang::Path => "path",
        Lang::Shape => "shape",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outcomes_tenants_and_latency() {
        let s = Stats::default();
        for i in 0..10 {
            s.record("a", Lang::Jq, None, i * 100);
        }
        s.record("b", Lang::Path, Some(ErrorCode::Timeout), 5000);
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
        let totals = s.totals();
        assert_eq!(totals.languages, vec![("jq", 10), ("path", 1)]);
        assert_eq!(totals.count, 11);
        // 0..=900 µs are at most 1 ms; 5 ms is in the 5 ms bucket; the buckets are cumulative.
        assert_eq!(totals.buckets[0], (0.001, 10));
        assert_eq!(totals.buckets[1], (0.0025, 10));
        assert_eq!(totals.buckets[2], (0.005, 11));
        assert_eq!(totals.buckets.last(), Some(&(10.0, 11)));
        assert!((totals.sum_seconds - 0.0095).abs() < 1e-9);
    }

    #[test]
    fn a_run_longer_than_every_bucket_is_counted_only_at_infinity() {
        let s = Stats::default();
        s.record("a", Lang::Jq, None, 60_000_000);
        let totals = s.totals();
        assert_eq!(totals.buckets.last(), Some(&(10.0, 0)));
        assert_eq!(totals.count, 1);
    }
}
