//! The pace a peer must keep while it holds something scarce: a slowloris defence.
//!
//! A request's memory is taken from its uid's budget at its frame's length prefix, a streamed
//! upload holds one of the daemon's few upload turns (and a worker), and a large answer one of
//! its few large-answer turns, for as long as their bytes take to move. With only the frame
//! timeout (30 s) to bound that, a few uids together held every unit of a budget with bytes
//! that never came or were never read (issue 34: four uids sending length prefixes alone took
//! all request memory; two uids trickling a byte every 4 s took both upload turns; four uids
//! not reading 20 MiB answers took every large-answer turn).
//!
//! So bytes must move at [`MIN_RATE`] on average once [`GRACE`] has passed, counted over the
//! time the daemon spends waiting for the peer (never the time it spends on other work, such as
//! waiting for a worker or a turn of its own). A peer that falls behind loses what it holds:
//! its frame or tail is answered `PROTOCOL_ERROR` and its connection closed, or its answer is
//! cut off. On a local socket a client that has its bytes moves them at hundreds of MiB/s.

use std::time::{Duration, Instant};

/// Time every transfer gets before its pace counts.
pub const GRACE: Duration = Duration::from_secs(2);

/// The slowest average a transfer may keep after [`GRACE`], in bytes per second.
pub const MIN_RATE: u64 = 256 * 1024;

/// How long a transfer of `bytes` may have taken by the time all of them moved.
pub fn allowance(bytes: u64) -> Duration {
    GRACE + Duration::from_micros(bytes.saturating_mul(1_000_000) / MIN_RATE)
}

/// By when `bytes` must have moved, if they started at `start`, and never later than `cap`.
pub fn due(start: Instant, bytes: u64, cap: Instant) -> Instant {
    (start + allowance(bytes)).min(cap)
}

/// The rule, in words, for messages.
pub fn rule() -> String {
    format!(
        "{} KiB/s on average after the first {} s",
        MIN_RATE / 1024,
        GRACE.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_grows_with_the_bytes_from_the_grace() {
        assert_eq!(allowance(0), GRACE);
        assert_eq!(allowance(MIN_RATE), GRACE + Duration::from_secs(1));
        let now = Instant::now();
        assert_eq!(
            due(now, 1 << 30, now + Duration::from_secs(30)),
            now + Duration::from_secs(30)
        );
    }
}
