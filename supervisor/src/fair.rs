//! Fair dispatch of evaluation slots across tenants.
//!
//! A request holds a [`Slot`] while its worker runs. At most `global_max` slots are out at
//! once, and at most a tenant's own `max_concurrent` of them go to one tenant, and never all
//! of them when there are two or more: one is always left for another tenant. Waiting
//! requests queue per tenant (at most its `max_queue`; beyond that `OVERLOADED` at once), and
//! a freed slot goes to the next tenant in round-robin order that has a waiter and room, so a
//! tenant with 200 queued requests delays another tenant's single request by at most one
//! round of dispatch, not by 200 request-times.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::oneshot;

/// A tenant's share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Slots this tenant may hold at once.
    pub max_concurrent: usize,
    /// Requests of this tenant that may wait for a slot.
    pub max_queue: usize,
}

/// Why a slot was not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The tenant's queue is full.
    QueueFull {
        /// Requests already waiting.
        waiting: usize,
        /// The tenant's queue limit.
        limit: usize,
    },
    /// The deadline passed while waiting.
    Deadline,
    /// The scheduler is closed (shutting down).
    Closed,
}

struct Waiter {
    id: u64,
    grant: oneshot::Sender<()>,
}

struct Tenant {
    running: usize,
    share: Share,
    waiters: VecDeque<Waiter>,
}

struct State {
    running: usize,
    tenants: HashMap<Arc<str>, Tenant>,
    /// Tenants with waiters, in round-robin order.
    ring: VecDeque<Arc<str>>,
    next_id: u64,
    closed: bool,
}

/// The scheduler.
pub struct Scheduler {
    global_max: usize,
    state: Mutex<State>,
}

/// A granted slot; dropping it frees the slot for the next tenant in turn.
pub struct Slot {
    scheduler: Arc<Scheduler>,
    tenant: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.scheduler.release(&self.tenant);
    }
}

impl Scheduler {
    /// A scheduler with `global_max` slots.
    pub fn new(global_max: usize) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            global_max: global_max.max(1),
            state: Mutex::new(State {
                running: 0,
                tenants: HashMap::new(),
                ring: VecDeque::new(),
                next_id: 0,
                closed: false,
            }),
        })
    }

    /// The slots a tenant of `share` may hold at once: its own limit, at least one, and at most
    /// all but one of the daemon's when it has two or more.
    fn cap(&self, share: Share) -> usize {
        let most = match self.global_max {
            0 | 1 => 1,
            n => n - 1,
        };
        share.max_concurrent.clamp(1, most)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counters half-updated in a way
        // that matters more than refusing service; keep serving with the data as it is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a slot for `tenant` until `deadline`.
    pub async fn acquire(
        self: &Arc<Self>,
        tenant: &Arc<str>,
        share: Share,
        deadline: Instant,
    ) -> Result<Slot, Refused> {
        let (id, granted) = {
            let mut st = self.lock();
            if st.closed {
                return Err(Refused::Closed);
            }
            let global_room = st.running < self.global_max;
            let t = st.tenants.entry(tenant.clone()).or_insert(Tenant {
                running: 0,
                share,
                waiters: VecDeque::new(),
            });
            t.share = share;
            if global_room && t.running < self.cap(share) && t.waiters.is_empty() {
                t.running += 1;
                st.running += 1;
                return Ok(Slot {
                    scheduler: self.clone(),
                    tenant: tenant.clone(),
                });
            }
            if t.waiters.len() >= share.max_queue {
                return Err(Refused::QueueFull {
                    waiting: t.waiters.len(),
                    limit: share.max_queue,
                });
            }
            let (tx, rx) = oneshot::channel();
            let first = t.waiters.is_empty();
            let id = st.next_id;
            st.next_id += 1;
            let t = st.tenants.get_mut(tenant).expect("inserted above");
            t.waiters.push_back(Waiter { id, grant: tx });
            if first {
                st.ring.push_back(tenant.clone());
            }
            (id, rx)
        };
        let slot = Slot {
            scheduler: self.clone(),
            tenant: tenant.clone(),
        };
        match tokio::time::timeout_at(deadline.into(), granted).await {
            Ok(Ok(())) => Ok(slot),
            Ok(Err(_)) => {
                // The sender was dropped without a grant: the scheduler closed.
                std::mem::forget(slot);
                Err(Refused::Closed)
            }
            Err(_) => {
                let mut st = self.lock();
                let removed = st.tenants.get_mut(tenant).and_then(|t| {
                    let at = t.waiters.iter().position(|w| w.id == id)?;
                    t.waiters.remove(at)
                });
                drop(st);
                if removed.is_some() {
                    // Never granted: nothing to release.
                    std::mem::forget(slot);
                }
                // Otherwise the grant raced the deadline: dropping `slot` frees it again.
                Err(Refused::Deadline)
            }
        }
    }

    fn release(&self, tenant: &Arc<str>) {
        let mut st = self.lock();
        st.running = st.running.saturating_sub(1);
        if let Some(t) = st.tenants.get_mut(tenant) {
            t.running = t.running.saturating_sub(1);
        }
        self.dispatch(&mut st);
        // Forget tenants with nothing running or waiting, so the map does not grow with
        // every uid ever seen.
        if st
            .tenants
            .get(tenant)
            .is_some_and(|t| t.running == 0 && t.waiters.is_empty())
        {
            st.tenants.remove(tenant);
        }
    }

    /// Hands free slots to waiting tenants, round-robin.
    fn dispatch(&self, st: &mut State) {
        let mut skipped = 0;
        while st.running < self.global_max && skipped < st.ring.len() {
            let Some(name) = st.ring.pop_front() else {
                break;
            };
            let Some(t) = st.tenants.get_mut(&name) else {
                continue;
            };
            if t.running >= self.cap(t.share) {
                st.ring.push_back(name);
                skipped += 1;
                continue;
            }
            let mut granted = false;
            while let Some(w) = t.waiters.pop_front() {
                if w.grant.send(()).is_ok() {
                    granted = true;
                    break;
                }
            }
            if granted {
                t.running += 1;
                st.running += 1;
                skipped = 0;
            }
            if !t.waiters.is_empty() {
                st.ring.push_back(name);
            }
        }
    }

    /// Refuses new requests and wakes every waiter with `Closed`.
    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        for t in st.tenants.values_mut() {
            t.waiters.clear();
        }
        st.ring.clear();
    }

    /// (running, waiting) totals, for stats.
    pub fn load(&self) -> (usize, usize) {
        let st = self.lock();
        let waiting = st.tenants.values().map(|t| t.waiters.len()).sum();
        (st.running, waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SHARE: Share = Share {
        max_concurrent: 1,
        max_queue: 100,
    };

    fn later(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_flooding_tenant_does_not_starve_another() {
        let s = Scheduler::new(1);
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        let first = s.acquire(&a, SHARE, later(1000)).await.unwrap();
        // Tenant a queues ten more, then b queues one.
        let mut waits = Vec::new();
        for _ in 0..10 {
            let (s, a) = (s.clone(), a.clone());
            waits.push(tokio::spawn(async move {
                s.acquire(&a, SHARE, later(5000))
                    .await
                    .map(|slot| ("a", slot))
            }));
            tokio::task::yield_now().await;
        }
        let (s2, b2) = (s.clone(), b.clone());
        let b_wait = tokio::spawn(async move { s2.acquire(&b2, SHARE, later(5000)).await });
        tokio::task::yield_now().await;
        // Free the slot: the round-robin gives one to a's first waiter... then b is next.
        drop(first);
        let a1 = waits.remove(0).await.unwrap().unwrap();
        drop(a1);
        let b_slot = tokio::time::timeout(Duration::from_secs(1), b_wait)
            .await
            .expect("b is served after at most one of a's requests")
            .unwrap()
            .unwrap();
        drop(b_slot);
        for w in waits {
            drop(w.await.unwrap().unwrap());
        }
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_full_queue_is_refused_at_once_and_recovers() {
        let s = Scheduler::new(1);
        let a: Arc<str> = "a".into();
        let share = Share {
            max_concurrent: 1,
            max_queue: 1,
        };
        let held = s.acquire(&a, share, later(1000)).await.unwrap();
        let (s2, a2) = (s.clone(), a.clone());
        let queued = tokio::spawn(async move { s2.acquire(&a2, share, later(5000)).await });
        tokio::task::yield_now().await;
        assert_eq!(
            s.acquire(&a, share, later(1000)).await.err(),
            Some(Refused::QueueFull {
                waiting: 1,
                limit: 1
            })
        );
        drop(held);
        drop(queued.await.unwrap().unwrap());
        drop(s.acquire(&a, share, later(1000)).await.unwrap());
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_waiter_past_its_deadline_leaves_no_trace() {
        let s = Scheduler::new(1);
        let a: Arc<str> = "a".into();
        let held = s.acquire(&a, SHARE, later(1000)).await.unwrap();
        assert_eq!(
            s.acquire(&a, SHARE, later(20)).await.err(),
            Some(Refused::Deadline)
        );
        assert_eq!(s.load(), (1, 0));
        drop(held);
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_tenant_allowed_every_slot_still_leaves_one() {
        let s = Scheduler::new(2);
        let all = Share {
            max_concurrent: 2,
            max_queue: 10,
        };
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let a1 = s.acquire(&a, all, later(1000)).await.unwrap();
        assert_eq!(
            s.acquire(&a, all, later(20)).await.err(),
            Some(Refused::Deadline)
        );
        let b1 = s.acquire(&b, all, later(20)).await.unwrap();
        drop((a1, b1));
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test]
    async fn per_tenant_concurrency_leaves_room_for_others() {
        let s = Scheduler::new(4);
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        let a1 = s.acquire(&a, SHARE, later(1000)).await.unwrap();
        // a is at its share of 1, so its next request waits even with global room...
        assert_eq!(
            s.acquire(&a, SHARE, later(20)).await.err(),
            Some(Refused::Deadline)
        );
        // ...while b gets a slot at once.
        let b1 = s.acquire(&b, SHARE, later(20)).await.unwrap();
        drop((a1, b1));
        assert_eq!(s.load(), (0, 0));
    }
}
