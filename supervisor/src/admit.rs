//! Admission's parts: connection slots counted per uid and in all, [`Turns`] of anything
//! scarce per key and in all, and a log [`Throttle`]. Which budgets the daemon keeps, and the
//! rule they keep, is [`crate::tenant`]'s.
//!
//! - Connection slots: at most `max_connections` in all, and at most
//!   `max_connections_per_uid` for any one uid, decided from the uid the kernel reports for
//!   the socket (SO_PEERCRED) before a byte of the peer's is read.
//! - Refusals are logged at most once a second, with a count of the ones not logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connection slots, in all and per uid.
#[derive(Debug)]
pub struct Slots {
    max_total: usize,
    max_per_uid: usize,
    total: AtomicUsize,
    per_uid: Mutex<HashMap<u32, usize>>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// All `max_connections` are taken.
    Total(usize),
    /// The peer's uid holds `max_connections_per_uid` already.
    Uid(usize),
    /// The kernel could not say who the peer is.
    NoCredentials,
}

/// One admitted connection's slot; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    uid: u32,
}

impl Slots {
    /// Slots for at most `max_total` connections, `max_per_uid` of any one uid.
    pub fn new(max_total: usize, max_per_uid: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max_total,
            max_per_uid,
            total: AtomicUsize::new(0),
            per_uid: Mutex::default(),
        })
    }

    /// Takes a slot for a connection of `uid`.
    pub fn take(self: &Arc<Self>, uid: u32) -> Result<Slot, Full> {
        let mut per_uid = self.per_uid.lock().unwrap_or_else(|e| e.into_inner());
        if self.total.load(Ordering::SeqCst) >= self.max_total {
            return Err(Full::Total(self.max_total));
        }
        let held = per_uid.entry(uid).or_insert(0);
        if *held >= self.max_per_uid {
            return Err(Full::Uid(self.max_per_uid));
        }
        *held += 1;
        self.total.fetch_add(1, Ordering::SeqCst);
        Ok(Slot {
            slots: self.clone(),
            uid,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut per_uid = self.slots.per_uid.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = per_uid.get_mut(&self.uid) {
            *held -= 1;
            if *held == 0 {
                per_uid.remove(&self.uid);
            }
        }
        self.slots.total.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Turns of something scarce: at most `each` per key (a uid, a tenant) and `total` over all
/// keys, and no key ever all of them: there are at least two in all, and `each` is at most
/// `total - 1`, so one key cannot starve the others, on a machine of any size. A key's semaphore is made on first use and forgotten when no
/// turn of it is held.
#[derive(Debug)]
pub struct Turns<K> {
    each: usize,
    total_turns: usize,
    total: Arc<Semaphore>,
    map: Mutex<HashMap<K, Arc<Semaphore>>>,
}

/// Which limit a [`Turns::try_take`] reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// The key holds all the turns it may.
    Key,
    /// All turns are taken, by other keys.
    Total,
}

/// Turns held, of one key and of the total; given back when dropped.
#[derive(Debug)]
pub struct Turn {
    _key: OwnedSemaphorePermit,
    _total: OwnedSemaphorePermit,
}

impl<K: std::hash::Hash + Eq + Clone> Turns<K> {
    /// `each` turns per key and `total` in all, raised to at least two in all, and `each` cut
    /// to at most `total - 1` (and at least one).
    pub fn new(each: usize, total: usize) -> Turns<K> {
        let total = total.max(2);
        let each = each.clamp(1, total - 1);
        Turns {
            each,
            total_turns: total,
            total: Arc::new(Semaphore::new(total)),
            map: Mutex::default(),
        }
    }

    fn semaphore(&self, key: &K) -> Arc<Semaphore> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        // A held turn keeps a reference to its semaphore: keys with none are forgotten, so the
        // map does not grow with every uid seen.
        map.retain(|_, s| Arc::strong_count(s) > 1);
        map.entry(key.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.each)))
            .clone()
    }

    /// A turn for `key` now, or which limit is reached: the key's own, or the total.
    pub fn try_take(&self, key: &K) -> Result<Turn, Exhausted> {
        let key = self
            .semaphore(key)
            .try_acquire_owned()
            .map_err(|_| Exhausted::Key)?;
        let total = self
            .total
            .clone()
            .try_acquire_owned()
            .map_err(|_| Exhausted::Total)?;
        Ok(Turn {
            _key: key,
            _total: total,
        })
    }

    /// A turn for `key`: refused at once when the key holds all its own, else waited for in
    /// the total's queue until `by`.
    pub async fn take_own_now(&self, key: &K, by: Instant) -> Result<Turn, Exhausted> {
        let key = self
            .semaphore(key)
            .try_acquire_owned()
            .map_err(|_| Exhausted::Key)?;
        let total = tokio::time::timeout_at(by.into(), self.total.clone().acquire_owned())
            .await
            .map_err(|_| Exhausted::Total)?
            .expect("never closed");
        Ok(Turn {
            _key: key,
            _total: total,
        })
    }

    /// `n` turns for `key` now, or which limit is reached.
    pub fn try_take_many(&self, key: &K, n: u32) -> Result<Turn, Exhausted> {
        let key = self
            .semaphore(key)
            .try_acquire_many_owned(n)
            .map_err(|_| Exhausted::Key)?;
        let total = self
            .total
            .clone()
            .try_acquire_many_owned(n)
            .map_err(|_| Exhausted::Total)?;
        Ok(Turn {
            _key: key,
            _total: total,
        })
    }

    /// How many turns there are in all.
    pub fn total(&self) -> usize {
        self.total_turns
    }

    /// How many turns are held now, over every key.
    pub fn in_use(&self) -> usize {
        self.total_turns - self.total.available_permits()
    }

    /// Waits for a turn for `key`.
    pub async fn take(&self, key: &K) -> Turn {
        self.take_many(key, 1).await
    }

    /// Waits for `n` turns for `key` at once, the key's first, then the total's (the same
    /// order for every caller, so no two wait on each other). `n` must be at most
    /// [`Turns::each`] and the total, or it waits for ever.
    pub async fn take_many(&self, key: &K, n: u32) -> Turn {
        let key = self.semaphore(key).acquire_many_owned(n).await;
        let total = self.total.clone().acquire_many_owned(n).await;
        Turn {
            _key: key.expect("never closed"),
            _total: total.expect("never closed"),
        }
    }

    /// How many turns each key has.
    pub fn each(&self) -> usize {
        self.each
    }
}

/// A log line that is written at most once a second; the lines held back meanwhile are
/// counted and reported with the next one.
#[derive(Debug)]
pub struct Throttle {
    start: Instant,
    /// Milliseconds since `start` of the last line written, plus one (0: never).
    last_ms: AtomicU64,
    held_back: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
        }
    }
}

impl Throttle {
    /// `Some(lines held back since the last one)` if a line may be written now.
    pub fn allow(&self) -> Option<u64> {
        let now = self.start.elapsed().as_millis() as u64 + 1;
        let last = self.last_ms.load(Ordering::Relaxed);
        if last != 0 && now < last + 1000 {
            self.held_back.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        match self
            .last_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Some(self.held_back.swap(0, Ordering::Relaxed)),
            Err(_) => {
                self.held_back.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_uid_cannot_take_every_slot() {
        let slots = Slots::new(4, 2);
        let a1 = slots.take(7).unwrap();
        let _a2 = slots.take(7).unwrap();
        assert_eq!(slots.take(7).unwrap_err(), Full::Uid(2));
        let _b1 = slots.take(8).unwrap();
        let _b2 = slots.take(8).unwrap();
        assert_eq!(slots.take(9).unwrap_err(), Full::Total(4));
        drop(a1);
        assert_eq!(slots.open(), 3);
        let _a3 = slots.take(7).unwrap();
    }

    #[test]
    fn turns_are_per_key_and_in_all_and_given_back() {
        let turns = Turns::new(1, 2);
        let a = turns.try_take(&1u32).unwrap();
        assert_eq!(turns.try_take(&1).unwrap_err(), Exhausted::Key);
        let b = turns.try_take(&2).unwrap();
        assert_eq!(turns.try_take(&3).unwrap_err(), Exhausted::Total);
        drop((a, b));
        assert!(turns.try_take(&1).is_ok());
        // Unused keys are forgotten.
        assert!(turns.map.lock().unwrap().len() <= 1);
    }

    #[test]
    fn no_key_holds_every_turn() {
        // Configured with as many turns per key as in all, a key still leaves one for others.
        let turns = Turns::new(2, 2);
        assert_eq!(turns.each(), 1);
        let _a = turns.try_take(&1u32).unwrap();
        assert_eq!(turns.try_take(&1).unwrap_err(), Exhausted::Key);
        let _b = turns.try_take(&2).unwrap();
        // Asked for one turn in all, there are two: a key still leaves one for the others.
        let one = Turns::<u32>::new(3, 1);
        assert_eq!((one.each(), one.total()), (1, 2));
        let _c = one.try_take(&1).unwrap();
        assert!(one.try_take(&2).is_ok());
    }

    #[test]
    fn a_throttled_line_is_written_once_a_second() {
        let t = Throttle::default();
        assert_eq!(t.allow(), Some(0));
        assert_eq!(t.allow(), None);
        assert_eq!(t.allow(), None);
        assert_eq!(t.held_back.load(Ordering::Relaxed), 2);
    }
}
