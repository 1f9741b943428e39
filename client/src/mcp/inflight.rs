//! A bound on the large requests `jqjail mcp` holds at once.
//!
//! rmcp reads every line as it comes and starts a task for each request, which holds the
//! parsed message while the call waits its turn (the daemon connection is one at a time). A
//! client that sends large calls without waiting for answers made it hold them all: sixteen of
//! 546 KB, each parsed to about 120 MiB, took 567 MiB, and 25 of 2 MB took 3.1 GiB (issue 34,
//! the second attacker).
//!
//! The guard charges each request over [`TRACKED`] bytes (its line and its parsed cost) to an
//! [`Inflight`] by its `id`, and reads no further line while more than [`MAX_INFLIGHT`] is
//! charged. The handler of that call claims the charge when it starts ([`Inflight::claim`]) and
//! the charge goes when the [`Claim`] is dropped, after the call's work is done (a cancelled
//! call's blocking work still holds its arguments, so its claim goes with that work, not with
//! the cancellation). A charge no handler claims within [`CLAIM_WITHIN`] goes by itself: rmcp
//! drops a message it cannot parse, or answers it without a handler, and a session must never
//! wait for ever on one. So what the server holds is [`MAX_INFLIGHT`] and one message, however
//! many are sent; small requests are never held back.
//!
//! Known limit: a request whose `id` is not within the guard's first 4 KiB of its line, or is
//! not a number or a string, is not charged.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// What the large requests passed and not yet done may cost in all, before the next line is
/// read.
pub(crate) const MAX_INFLIGHT: usize = 64 << 20;

/// Requests that cost less than this are not charged: they never wait.
pub(crate) const TRACKED: usize = 1 << 20;

/// A charge no handler has claimed this long after its line passed is let go (rmcp parses and
/// dispatches a message of the largest size in well under a second).
pub(crate) const CLAIM_WITHIN: Duration = Duration::from_secs(10);

/// The charges of the large requests passed to rmcp and not yet done.
#[derive(Debug, Default)]
pub(crate) struct Inflight(Mutex<Held>);

#[derive(Debug, Default)]
struct Held {
    bytes: usize,
    /// Each id's charges (a client may reuse an id), oldest first.
    by_id: HashMap<String, Vec<Charge>>,
    /// The guard, waiting for room.
    waker: Option<Waker>,
    serial: u64,
}

#[derive(Debug)]
struct Charge {
    serial: u64,
    cost: usize,
    /// When its line passed, while no handler has claimed it.
    unclaimed_since: Option<Instant>,
}

/// A handler's hold on its request's charge: given back when dropped.
#[derive(Debug)]
pub(crate) struct Claim {
    inflight: Arc<Inflight>,
    key: String,
    serial: Option<u64>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(serial) = self.serial {
            self.inflight.release(&self.key, serial);
        }
    }
}

impl Inflight {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Charges `cost` to the request with raw `id` (as written), if it is one a handler can
    /// name.
    pub(crate) fn charge(&self, id: &[u8], cost: usize) {
        let Some(key) = key(id) else { return };
        let mut held = self.held();
        held.serial += 1;
        let serial = held.serial;
        held.bytes += cost;
        held.by_id.entry(key).or_default().push(Charge {
            serial,
            cost,
            unclaimed_since: Some(Instant::now()),
        });
    }

    /// The handler of the request with `id` (as rmcp read it) takes over its charge, if one
    /// is waiting.
    pub(crate) fn claim(self: &Arc<Self>, id: &rmcp::model::RequestId) -> Claim {
        let key = match id {
            rmcp::model::NumberOrString::Number(n) => format!("n{n}"),
            rmcp::model::NumberOrString::String(s) => format!("s{s}"),
        };
        let serial = {
            let mut held = self.held();
            held.by_id.get_mut(&key).and_then(|charges| {
                let charge = charges.iter_mut().find(|c| c.unclaimed_since.is_some())?;
                charge.unclaimed_since = None;
                Some(charge.serial)
            })
        };
        Claim {
            inflight: self.clone(),
            key,
            serial,
        }
    }

    fn release(&self, key: &str, serial: u64) {
        let mut held = self.held();
        let Some(charges) = held.by_id.get_mut(key) else {
            return;
        };
        let Some(at) = charges.iter().position(|c| c.serial == serial) else {
            return;
        };
        let cost = charges.remove(at).cost;
        if charges.is_empty() {
            held.by_id.remove(key);
        }
        held.bytes -= cost;
        if let Some(waker) = held.waker.take() {
            waker.wake();
        }
    }

    /// Lets go of the charges no handler claimed in time; when the next would go, if any.
    fn expire(held: &mut Held) -> Option<Instant> {
        let now = Instant::now();
        let mut freed = 0;
        let mut next: Option<Instant> = None;
        held.by_id.retain(|_, charges| {
            charges.retain(|c| match c.unclaimed_since {
                Some(at) if now >= at + CLAIM_WITHIN => {
                    freed += c.cost;
                    false
                }
                Some(at) => {
                    next = Some(next.map_or(at + CLAIM_WITHIN, |n| n.min(at + CLAIM_WITHIN)));
                    true
                }
                None => true,
            });
            !charges.is_empty()
        });
        held.bytes -= freed;
        next
    }

    /// Whether the next line must wait.
    pub(crate) fn is_full(&self) -> bool {
        let mut held = self.held();
        Inflight::expire(&mut held);
        held.bytes > MAX_INFLIGHT
    }

    /// `None` when the next line may be read; else until when at the latest it must wait (the
    /// next unclaimed charge's expiry, if any), the guard being woken sooner when a charge goes.
    pub(crate) fn wait(&self, cx: &Context<'_>) -> Option<Option<Instant>> {
        let mut held = self.held();
        let next = Inflight::expire(&mut held);
        if held.bytes <= MAX_INFLIGHT {
            return None;
        }
        held.waker = Some(cx.waker().clone());
        Some(next)
    }
}

/// An id as a handler sees it: rmcp reads a number as an i64 (an integral float too) and a
/// string as itself. Other ids are not tracked.
fn key(raw: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(raw).ok()? {
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Some(format!("n{i}")),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e18 => {
                Some(format!("n{}", f as i64))
            }
            _ => None,
        },
        Value::String(s) => Some(format!("s{s}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn noop() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        Waker::from(Arc::new(Noop))
    }

    #[test]
    fn a_claimed_charge_goes_when_its_claim_is_dropped() {
        let inflight = Arc::new(Inflight::default());
        let waker = noop();
        let cx = Context::from_waker(&waker);
        inflight.charge(b"7", MAX_INFLIGHT);
        inflight.charge(br#""a\u0062""#, 2);
        assert!(inflight.wait(&cx).is_some());
        let seven = inflight.claim(&NumberOrString::Number(7));
        let ab = inflight.claim(&NumberOrString::String("ab".into()));
        // A claim of nothing charged holds nothing.
        let none = inflight.claim(&NumberOrString::Number(9));
        drop(none);
        assert!(inflight.is_full());
        drop(seven);
        assert!(!inflight.is_full());
        drop(ab);
        assert_eq!(inflight.held().bytes, 0);
        assert!(inflight.held().by_id.is_empty());
    }

    #[test]
    fn an_unclaimed_charge_expires() {
        let inflight = Arc::new(Inflight::default());
        inflight.charge(b"1.0", MAX_INFLIGHT + 1);
        assert!(inflight.is_full());
        // Aged past the claim window: rmcp never dispatched it.
        for c in inflight.held().by_id.values_mut().flatten() {
            c.unclaimed_since = Some(Instant::now() - CLAIM_WITHIN);
        }
        assert!(!inflight.is_full());
        assert_eq!(inflight.held().bytes, 0);
    }

    #[test]
    fn ids_are_keyed_as_rmcp_reads_them() {
        assert_eq!(key(b"1.0"), key(b"1"));
        assert_eq!(key(br#""x\"""#).as_deref(), Some("sx\""));
        assert_eq!(key(b"null"), None);
        assert_eq!(key(b"1.5"), None);
    }
}
