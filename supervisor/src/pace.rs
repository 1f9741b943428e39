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
//! So bytes must keep moving at [`MIN_RATE`]: a transfer has a [`Pace`], a bucket of time
//! that starts full at [`GRACE`], drains while the daemon waits for the peer, and fills by one
//! second for every [`MIN_RATE`] bytes moved, never past [`GRACE`]. A wait longer than what
//! is in the bucket ends the transfer: its frame or tail is answered `PROTOCOL_ERROR` and its
//! connection closed, or its answer is cut off. Only the time spent waiting for the peer
//! drains it (never the daemon's own work: reading a file, waiting for a worker or a turn),
//! and no credit is banked past [`GRACE`], so a peer that sent a burst cannot then trickle.
//! A transfer that holds something therefore holds it at most [`GRACE`] past the moment its
//! peer stops, and at most `len / MIN_RATE + GRACE` in all. On a local socket a client that
//! has its bytes moves them hundreds of times faster.

use std::time::{Duration, Instant};

/// What a transfer's bucket holds at most: the longest a peer may stall.
pub const GRACE: Duration = Duration::from_secs(3);

/// The slowest pace a transfer may keep, in bytes per second.
pub const MIN_RATE: u64 = 4 << 20;

/// The time `bytes` earn at the minimum pace.
fn earned(bytes: u64) -> Duration {
    Duration::from_micros(bytes.saturating_mul(1_000_000) / MIN_RATE)
}

/// How long a transfer of `bytes` read or written in one go may take: the grace and what the
/// bytes earn.
pub fn allowance(bytes: u64) -> Duration {
    GRACE + earned(bytes)
}

/// By when `bytes` moved in one go must have moved, if they started at `start`, and never
/// later than `cap`.
pub fn due(start: Instant, bytes: u64, cap: Instant) -> Instant {
    (start + allowance(bytes)).min(cap)
}

/// The rule, in words, for messages.
pub fn rule() -> String {
    format!(
        "{} MiB/s, with stalls of at most {} s",
        MIN_RATE >> 20,
        GRACE.as_secs()
    )
}

/// A transfer's bucket of time (see the module's text).
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    left: Duration,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace { left: GRACE }
    }
}

impl Pace {
    /// How long the next wait for the peer may take.
    pub fn allowed(&self) -> Duration {
        self.left
    }

    /// After a wait of `took` in which `bytes` moved.
    pub fn moved(&mut self, bytes: u64, took: Duration) {
        self.left = (self.left.saturating_sub(took) + earned(bytes)).min(GRACE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_grows_with_the_bytes_from_the_grace() {
        assert_eq!(allowance(0), GRACE);
        assert_eq!(allowance(MIN_RATE), GRACE + Duration::from_secs(1));
        let now = Instant::now();
        let cap = now + Duration::from_secs(30);
        assert_eq!(due(now, 1 << 40, cap), cap);
    }

    /// A burst banks nothing past the grace: a trickle after it is cut within the grace.
    #[test]
    fn a_burst_banks_no_credit_for_a_trickle() {
        let mut pace = Pace::default();
        pace.moved(8 << 20, Duration::from_millis(20));
        assert_eq!(pace.allowed(), GRACE);
        // A byte every 1.9 s: the second wait is already past what is left.
        pace.moved(1, Duration::from_millis(1900));
        assert!(pace.allowed() < Duration::from_millis(1200));
        pace.moved(1, Duration::from_millis(1100));
        assert!(pace.allowed() < Duration::from_millis(100));
    }

    /// A peer that keeps the pace keeps its bucket full.
    #[test]
    fn a_peer_at_the_pace_keeps_its_grace() {
        let mut pace = Pace::default();
        for _ in 0..100 {
            pace.moved(MIN_RATE / 10, Duration::from_millis(100));
        }
        assert!(pace.allowed() >= GRACE - Duration::from_millis(1));
    }
}
