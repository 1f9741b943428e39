//! The Prometheus text exposition format (version 0.0.4) of the daemon's counters: one writer
//! for `jqjail stats --format prometheus` (a [`StatsReply`] read over the socket) and for the
//! daemon's own metrics listener (the same families and more), so the two never name or
//! describe a metric differently.

use crate::StatsReply;
use std::fmt::Write as _;

/// The `Content-Type` of an exposition served over HTTP.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// An exposition being written: families in order, each with its `HELP` and `TYPE` lines, every
/// sample carrying the base labels first.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
    base: String,
}

/// One sample: its extra labels (name, value), and its value.
pub type Sample<'a> = (Vec<(&'a str, &'a str)>, f64);

impl Exposition {
    /// An exposition whose every sample carries `base` (name, value) labels.
    pub fn new(base: &[(&str, &str)]) -> Exposition {
        Exposition {
            out: String::new(),
            base: pairs(base),
        }
    }

    /// A family: `kind` is `counter` or `gauge`; samples without extra labels have none.
    pub fn family<'a>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = Sample<'a>>,
    ) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            self.sample(name, &labels, value);
        }
        self
    }

    /// A family of one sample with no label of its own.
    pub fn scalar(&mut self, name: &str, kind: &str, help: &str, value: f64) -> &mut Self {
        self.family(name, kind, help, [(Vec::new(), value)])
    }

    /// A histogram: `buckets` are (upper bound, observations at most that bound, cumulative),
    /// ending with the total count at `+Inf`, which it adds; `sum` is of every observation.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        buckets: &[(f64, u64)],
        count: u64,
        sum: f64,
    ) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} histogram");
        let bucket = format!("{name}_bucket");
        for (le, n) in buckets {
            let le = le.to_string();
            self.sample(&bucket, &[("le", &le)], *n as f64);
        }
        self.sample(&bucket, &[("le", "+Inf")], count as f64);
        self.sample(&format!("{name}_sum"), &[], sum);
        self.sample(&format!("{name}_count"), &[], count as f64);
        self
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let extra = pairs(labels);
        let joined = match (self.base.is_empty(), extra.is_empty()) {
            (true, true) => String::new(),
            (false, true) => format!("{{{}}}", self.base),
            (true, false) => format!("{{{extra}}}"),
            (false, false) => format!("{{{},{extra}}}", self.base),
        };
        let _ = writeln!(self.out, "{name}{joined} {value}");
    }

    /// The families of a stats reply. `tenants`: with a family per tenant counter, labelled
    /// by tenant name (off where the operator does not want tenant names in metrics).
    pub fn stats(&mut self, stats: &StatsReply, tenants: bool) -> &mut Self {
        let latency = [
            ("50", stats.latency.p50_us),
            ("90", stats.latency.p90_us),
            ("99", stats.latency.p99_us),
        ];
        self.scalar(
            "jqjail_uptime_seconds",
            "gauge",
            "Time since the daemon started.",
            stats.uptime_ms as f64 / 1e3,
        )
        .family(
            "jqjail_runs_total",
            "counter",
            "Runs answered, by outcome: OK or the error code (refusals before evaluation included).",
            labelled("outcome", stats.outcomes.iter().map(|(c, n)| (c.as_str(), *n))),
        )
        .family(
            "jqjail_recent_run_duration_seconds",
            "gauge",
            "Wall time of the daemon's last runs (up to 1,024), at a percentile.",
            latency
                .iter()
                .map(|(p, us)| (vec![("percentile", *p)], *us as f64 / 1e6)),
        )
        .scalar(
            "jqjail_recent_runs",
            "gauge",
            "How many runs the recent durations are taken over.",
            stats.latency.count as f64,
        )
        .scalar(
            "jqjail_running",
            "gauge",
            "Evaluations running now.",
            stats.running as f64,
        )
        .scalar(
            "jqjail_waiting",
            "gauge",
            "Requests waiting for an evaluation slot now.",
            stats.waiting as f64,
        )
        .scalar(
            "jqjail_connections",
            "gauge",
            "Open connections (a `jqjail stats` asking included).",
            stats.connections as f64,
        )
        .scalar(
            "jqjail_workers_started_total",
            "counter",
            "Workers started since the daemon started.",
            stats.workers_started as f64,
        )
        .scalar(
            "jqjail_worker_start_failures_total",
            "counter",
            "Workers that could not be started.",
            stats.worker_start_failures as f64,
        );
        if tenants {
            self.family(
                "jqjail_tenant_runs_total",
                "counter",
                "Runs of each tenant the asker may see.",
                labelled(
                    "tenant",
                    stats.tenants.iter().map(|t| (t.name.as_str(), t.requests)),
                ),
            )
            .family(
                "jqjail_tenant_run_errors_total",
                "counter",
                "Runs of each tenant the asker may see that were answered with an error.",
                labelled(
                    "tenant",
                    stats.tenants.iter().map(|t| (t.name.as_str(), t.errors)),
                ),
            );
        }
        self
    }

    /// The text written.
    pub fn finish(self) -> String {
        self.out
    }
}

/// Samples of one label: `name` = each value's key.
pub fn labelled<'a>(
    name: &'a str,
    values: impl IntoIterator<Item = (&'a str, u64)> + 'a,
) -> impl Iterator<Item = Sample<'a>> + 'a {
    values
        .into_iter()
        .map(move |(v, n)| (vec![(name, v)], n as f64))
}

fn pairs(labels: &[(&str, &str)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label value as the exposition format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_base_labels_come_first() {
        let mut e = Exposition::new(&[("socket", "/a\"b")]);
        e.family(
            "x_total",
            "counter",
            "X.",
            labelled("tenant", [("t\n1", 2)]),
        );
        e.histogram("d_seconds", "D.", &[(0.5, 1)], 3, 2.5);
        let text = e.finish();
        assert!(
            text.contains("x_total{socket=\"/a\\\"b\",tenant=\"t\\n1\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_bucket{socket=\"/a\\\"b\",le=\"0.5\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_bucket{socket=\"/a\\\"b\",le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_sum{socket=\"/a\\\"b\"} 2.5\n"),
            "{text}"
        );
        assert!(
            Exposition::new(&[])
                .scalar("up", "gauge", "U.", 1.0)
                .out
                .ends_with("\nup 1\n")
        );
    }
}
