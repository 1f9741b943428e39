//! `jqjail stats --format prometheus`: the daemon's counters in the Prometheus text exposition
//! format (version 0.0.4), for node_exporter's textfile collector or any scraper of files.

use jqjail_protocol::StatsReply;
use std::fmt::Write as _;

/// A metric family: name, type, help text, and its samples (labels, value).
type Family<'a> = (&'a str, &'a str, &'a str, Vec<(String, f64)>);

/// The exposition of `stats`, as read from the daemon at `socket`.
pub(super) fn exposition(stats: &StatsReply, socket: &str) -> String {
    // Every sample carries the socket, and some one more label.
    let labels = |extra: Option<(&str, &str)>| match extra {
        None => format!("{{socket=\"{}\"}}", escape(socket)),
        Some((name, value)) => {
            format!(
                "{{socket=\"{}\",{name}=\"{}\"}}",
                escape(socket),
                escape(value)
            )
        }
    };
    let scalar = |value: f64| vec![(labels(None), value)];
    let families: [Family<'_>; 12] = [
        (
            "jqjail_up",
            "gauge",
            "Whether the daemon answered (1); a file without it means no answer.",
            scalar(1.0),
        ),
        (
            "jqjail_uptime_seconds",
            "gauge",
            "Time since the daemon started.",
            scalar(stats.uptime_ms as f64 / 1e3),
        ),
        (
            "jqjail_runs_total",
            "counter",
            "Runs answered, by outcome: OK or the error code (refusals before evaluation included).",
            stats
                .outcomes
                .iter()
                .map(|(code, n)| (labels(Some(("outcome", code))), *n as f64))
                .collect(),
        ),
        (
            "jqjail_recent_run_duration_seconds",
            "gauge",
            "Wall time of the daemon's last runs (up to 1,024), at a percentile (not a summary: the daemon keeps no sum).",
            [
                ("50", stats.latency.p50_us),
                ("90", stats.latency.p90_us),
                ("99", stats.latency.p99_us),
            ]
            .iter()
            .map(|(p, us)| (labels(Some(("percentile", p))), *us as f64 / 1e6))
            .collect(),
        ),
        (
            "jqjail_recent_runs",
            "gauge",
            "How many runs the recent durations are taken over.",
            scalar(stats.latency.count as f64),
        ),
        (
            "jqjail_running",
            "gauge",
            "Evaluations running now.",
            scalar(stats.running as f64),
        ),
        (
            "jqjail_waiting",
            "gauge",
            "Requests waiting for an evaluation slot now.",
            scalar(stats.waiting as f64),
        ),
        (
            "jqjail_connections",
            "gauge",
            "Open connections (the one asking included).",
            scalar(stats.connections as f64),
        ),
        (
            "jqjail_workers_started_total",
            "counter",
            "Workers started since the daemon started.",
            scalar(stats.workers_started as f64),
        ),
        (
            "jqjail_worker_start_failures_total",
            "counter",
            "Workers that could not be started.",
            scalar(stats.worker_start_failures as f64),
        ),
        (
            "jqjail_tenant_runs_total",
            "counter",
            "Runs of each tenant the asker may see (all of them for root and the daemon's uid).",
            stats
                .tenants
                .iter()
                .map(|t| (labels(Some(("tenant", &t.name))), t.requests as f64))
                .collect(),
        ),
        (
            "jqjail_tenant_run_errors_total",
            "counter",
            "Runs of each tenant the asker may see that were answered with an error.",
            stats
                .tenants
                .iter()
                .map(|t| (labels(Some(("tenant", &t.name))), t.errors as f64))
                .collect(),
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, samples) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    }
    out
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
    use super::escape;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
