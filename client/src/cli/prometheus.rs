//! `jqjail stats --format prometheus`: the daemon's counters in the Prometheus text exposition
//! format (version 0.0.4), for node_exporter's textfile collector or any scraper of files. The
//! families are the protocol crate's, the ones the daemon's own listener serves.

use jqjail_protocol::StatsReply;
use jqjail_protocol::exposition::Exposition;

/// The exposition of `stats`, as read from the daemon at `socket`: every sample labelled with
/// the socket, and `jqjail_up` first (a file without it means the daemon did not answer).
pub(super) fn exposition(stats: &StatsReply, socket: &str) -> String {
    let mut e = Exposition::new(&[("socket", socket)]);
    e.scalar(
        "jqjail_up",
        "gauge",
        "Whether the daemon answered (1); a file without it means no answer.",
        1.0,
    )
    .stats(stats, true);
    e.finish()
}
