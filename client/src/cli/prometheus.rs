//! `jqjail stats --format prometheus`: the daemon's counters in the Prometheus text exposition
//! format (version 0.0.4), for node_exporter's textfile collector or any scraper of files.

use jqjail_protocol::StatsReply;
use std::fmt::Write as _;

/// The exposition of `stats`, as read from the daemon at `socket`.
pub(super) fn exposition(stats: &StatsReply, socket: &str) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let socket_label = format!("{{socket=\"{}\"}}", escape(socket));
    let one = |v: u64| vec![(socket_label.clone(), v as f64)];
    family(
        "jqjail_up",
        "gauge",
        "Whether the daemon answered (1); a file without it means no answer.",
        &one(1),
    );
    family(
        "jqjail_uptime_seconds",
        "gauge",
        "Time since the daemon started.",
        &[(socket_label.clone(), stats.uptime_ms as f64 / 1e3)],
    );
    let outcomes: Vec<(String, f64)> = stats
        .outcomes
        .iter()
        .map(|(code, n)| {
            (
                format!(
                    "{{socket=\"{}\",outcome=\"{}\"}}",
                    escape(socket),
                    escape(code)
                ),
                *n as f64,
            )
        })
        .collect();
    family(
        "jqjail_runs_total",
        "counter",
        "Runs answered, by outcome: OK or the error code (refusals before evaluation included).",
        &outcomes,
    );
    let quantiles: Vec<(String, f64)> = [
        ("50", stats.latency.p50_us),
        ("90", stats.latency.p90_us),
        ("99", stats.latency.p99_us),
    ]
    .iter()
    .map(|(q, us)| {
        (
            format!("{{socket=\"{}\",percentile=\"{q}\"}}", escape(socket)),
            *us as f64 / 1e6,
        )
    })
    .collect();
    family(
        "jqjail_recent_run_duration_seconds",
        "gauge",
        "Wall time of the daemon's last runs (up to 1,024), at a percentile (not a summary: the daemon keeps no sum).",
        &quantiles,
    );
    family(
        "jqjail_recent_runs",
        "gauge",
        "How many runs the recent durations are taken over.",
        &one(stats.latency.count),
    );
    family(
        "jqjail_running",
        "gauge",
        "Evaluations running now.",
        &one(stats.running),
    );
    family(
        "jqjail_waiting",
        "gauge",
        "Requests waiting for an evaluation slot now.",
        &one(stats.waiting),
    );
    family(
        "jqjail_connections",
        "gauge",
        "Open connections (the one asking included).",
        &one(stats.connections),
    );
    family(
        "jqjail_workers_started_total",
        "counter",
        "Workers started since the daemon started.",
        &one(stats.workers_started),
    );
    family(
        "jqjail_worker_start_failures_total",
        "counter",
        "Workers that could not be started.",
        &one(stats.worker_start_failures),
    );
    let tenant = |f: fn(&jqjail_protocol::TenantStats) -> u64| -> Vec<(String, f64)> {
        stats
            .tenants
            .iter()
            .map(|t| {
                (
                    format!(
                        "{{socket=\"{}\",tenant=\"{}\"}}",
                        escape(socket),
                        escape(&t.name)
                    ),
                    f(t) as f64,
                )
            })
            .collect()
    };
    family(
        "jqjail_tenant_runs_total",
        "counter",
        "Runs of each tenant the asker may see (all of them for root and the daemon's uid).",
        &tenant(|t| t.requests),
    );
    family(
        "jqjail_tenant_run_errors_total",
        "counter",
        "Runs of each tenant the asker may see that were answered with an error.",
        &tenant(|t| t.errors),
    );
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
