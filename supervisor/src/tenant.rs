//! Tenant admission: the one place every cost a request can make the supervisor pay is taken
//! before it is spent, per uid (or per tenant) and in all.
//!
//! **The rule.** No single uid (or tenant) can hold more than its share of any resource, and
//! at least one unit of every resource stays free for the others, whatever the machine's size:
//! every [`Turns`] has at least two units in all and gives one key at most all but one of them.
//!
//! | resource | unit | per key | in all |
//! |---|---|---|---|
//! | connections | a connection | `max_connections_per_uid` | `max_connections` |
//! | memory for requests held whole (frames as they are read, decoded requests, tails read whole) | KiB | [`memory_per_uid`] | 4 × that |
//! | runs whose input is arriving (each holds a worker, not an evaluation slot) | a run | `max_uploads_per_tenant`, at most half of all | half the evaluation slots, at least 2 |
//! | evaluation slots | a worker running | the tenant's `max_concurrent`, at most all but one | `max_concurrent` (fair queue: [`crate::fair`]) |
//! | decoding a frame over 64 KiB (transient memory, up to ~20 × its size) | a decode | — | [`LARGE_DECODES`] |
//! | large answers (a whole hide, a page, a list page) | an answer | 1 per uid | [`LARGE_ANSWERS`] |
//! | supervisor CPU (a JSON page, a whole put's hashing over [`SMALL_PUT`], each chunk of a streamed put's) | a call | 1 per uid | [`SUPERVISOR_CPU`] |
//! | searches over a hide, each on a bulk thread at nice +10 ([`crate::bulk`]) | a search | 1 per uid | [`SEARCHES`] |
//! | reads of the hide store (a lookup, a page, a list, a search's opening of its hide, `hide_usage`) | a call | 1 per uid | [`STORE_READS`] |
//! | writes to the hide store (a put's start, its commit, a delete) | a call | 1 per uid | [`STORE_WRITES`] |
//! | a worker's reply too large for its request's own output limit (an output to be kept as a hide, up to the input limit), read and held until it is stored | a reply | 1 per uid | [`LARGE_OUTPUTS`] |
//!
//! Every call into the store runs on a blocking thread only once it holds its turn, so at most
//! [`STORE_READS`] + [`STORE_WRITES`] threads ever block in the store, whatever the number of
//! requests waiting (they wait as tasks, one per uid at the head of the queue, so a uid's
//! flood delays another uid's call by at most one call of each uid that is waiting). Reads and
//! writes have turns of their own: reads do not take the store's write lock (`jqjail_store`),
//! so writes queued behind a slow one never hold up a read. Bulk work is done outside both:
//! writing and fsyncing a put's content is in CPU turns (a streamed put) or in the
//! large-output turn (a kept output). Turns are taken in one order (large answer, CPU, search,
//! store), and a store turn is never held while another turn is waited for.
//!
//! The connection slots are taken at accept ([`crate::admit::Slots`]); the rest through the
//! methods below, each of which answers a refusal as an [`ErrorReply`] that names the limit.

use crate::admit::{Exhausted, Slots, Throttle, Turn, Turns};
use crate::config::Config;
use jqjail_protocol::frame::max_request_frame_bytes;
use jqjail_protocol::limits::grouped;
use jqjail_protocol::{ErrorCode, ErrorReply, Request};
use std::sync::Arc;
use std::time::Instant;

/// Large answers being built or written at once, over every uid.
pub const LARGE_ANSWERS: usize = 4;

/// Calls that spend the supervisor's own CPU (a JSON page, a whole put's hashing) at once,
/// over every uid. Each runs on a thread of its own; with two, a flood of one uid's calls
/// takes at most one CPU from the workers (and its searches, [`SEARCHES`], a share of another
/// at a lower priority), and another uid's call still gets the other turn.
pub const SUPERVISOR_CPU: usize = 2;

/// Searches over a hide at once, over every uid, each on one of as many bulk threads at a
/// nice value 10 above the daemon's ([`crate::bulk`]). A budget apart from the CPU and store
/// turns (a search takes a store read turn only to open its hide): a search slowed by
/// anything at the daemon's own priority holds none of the turns the daemon's other calls wait
/// for.
pub const SEARCHES: usize = 2;

/// Reads of the hide store at once, over every uid: each blocks a thread for its index and
/// file I/O, so this bounds the daemon's threads as well as the store's queue.
pub const STORE_READS: usize = 4;

/// Writes to the hide store at once, over every uid (its index has one writer at a time).
pub const STORE_WRITES: usize = 2;

/// What a call into the hide store does, for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreCall {
    /// Reads the index or a hide's file.
    Read,
    /// Changes the index (a put's start or commit, a delete).
    Write,
}

/// Worker replies larger than their request's own output limit (outputs to be kept as hides,
/// up to the input limit each) read and held at once, over every uid. Each holds up to about
/// twice its size while it is decoded, so these bound what kept outputs can make the daemon
/// hold to about 8 × the input limit (160 MiB by default), however many runs ask for it.
pub const LARGE_OUTPUTS: usize = 4;

/// Frames over 64 KiB decoded at once, over every uid: decoding allocates up to about twenty
/// times a frame's size (a frame of many short arguments) before the request's own size can be
/// budgeted, so the transient is bounded by this, not by the runtime's thread count.
pub const LARGE_DECODES: usize = 2;

/// A request's tail up to this size is read whole before the request is served, so no worker
/// waits for it; a longer one is passed on as it arrives, in one of the tenant's upload turns.
pub const READ_WHOLE_TAIL: u64 = 256 * 1024;

/// A put of at most this many bytes is hashed in its store turn, with no CPU turn: its
/// hashing costs less than a wait for one.
pub const SMALL_PUT: u64 = 16 * 1024;

/// The memory one uid may hold in requests read whole: at least 4 MiB, and at least two
/// maximal requests (a frame of the largest filter and a tail read whole).
pub fn memory_per_uid(max_filter_bytes: u64) -> u64 {
    let one = max_request_frame_bytes(max_filter_bytes) + READ_WHOLE_TAIL;
    (4 << 20).max(2 * one)
}

/// What a request costs besides its evaluation, decided by its kind alone. The match is
/// exhaustive: a new request kind does not compile until its costs are stated here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// Its answer can be as large as a hide: built and written in a large-answer turn.
    pub large_answer: bool,
    /// It spends the supervisor's CPU in proportion to a hide's size.
    pub supervisor_cpu: bool,
    /// It is a search: the supervisor's CPU in proportion to a hide's size, at a lower
    /// priority, in a search turn.
    pub search: bool,
    /// It calls into the hide store (a turn held until its handler returns; a streamed put
    /// and a run take theirs for each call they make, `put_streamed` and `run_input`).
    pub store: Option<StoreCall>,
}

impl Costs {
    /// No cost besides the evaluation.
    pub const NONE: Costs = Costs {
        large_answer: false,
        supervisor_cpu: false,
        search: false,
        store: None,
    };

    /// The costs of `request`.
    pub fn of(request: &Request<'_>) -> Costs {
        use StoreCall::{Read, Write};
        let (large_answer, supervisor_cpu, store) = match request {
            Request::Hello(_) | Request::Stats => (false, false, None),
            Request::HideUsage => (false, false, Some(Read)),
            Request::HideDelete(_) => (false, false, Some(Write)),
            // A run's CPU is its worker's, in an evaluation slot. Its calls into the store
            // (opening a hide as its input, keeping its output) take a store turn each, and a
            // kept output a large-output turn, when they happen, not for the whole run.
            Request::Run(_) => (false, false, None),
            Request::HideGet(_) | Request::HideCut(_) | Request::HideList(_) => {
                (true, false, Some(Read))
            }
            // A search scans the whole hide, on a bulk thread (`bulk.rs`), in a turn of its
            // own (below); its handler takes a store read turn for the hide's opening only,
            // so a scan slowed at the bulk threads' priority holds no store turn.
            Request::HideSearch(_) => (false, false, None),
            // A JSON page is described by reading from its mark (64 KiB or more) and, the
            // first time a hide is paged at a page size, by laying out the whole hide.
            // Head and tail: four pages at half the page size (one layout the first time).
            Request::HidePage(_) | Request::HideEnds(_) => (true, true, Some(Read)),
            // A put read whole is hashed and written at once. (A streamed put takes a turn for
            // each chunk as it arrives: `put_streamed`.) A small put's hashing (tens of
            // microseconds) is done in its store turn: waiting for a CPU turn behind other
            // uids' calls cost it more than the work (issue 34).
            Request::HidePut(put) => {
                let whole = put.content.len() <= READ_WHOLE_TAIL;
                let small = put.content.len() <= SMALL_PUT;
                (false, whole && !small, whole.then_some(Write))
            }
        };
        Costs {
            large_answer,
            supervisor_cpu,
            search: matches!(request, Request::HideSearch(_)),
            store,
        }
    }
}

/// Every admission budget of the daemon.
#[derive(Debug)]
pub struct Admission {
    /// Connection slots, in all and per uid.
    pub slots: Arc<Slots>,
    /// KiB of requests held whole, per uid and in all.
    memory: Turns<u32>,
    /// Runs whose input is arriving, per tenant and in all.
    uploads: Turns<Arc<str>>,
    /// Large answers, per uid and in all.
    large_answers: Turns<u32>,
    /// Supervisor CPU, per uid and in all.
    cpu: Turns<u32>,
    /// Searches, per uid and in all.
    searches: Turns<u32>,
    /// Reads of the hide store, per uid and in all.
    store_reads: Turns<u32>,
    /// Writes to the hide store, per uid and in all.
    store_writes: Turns<u32>,
    /// Large worker replies read and held, per uid and in all.
    large_outputs: Turns<u32>,
    /// Decodes of large frames.
    decodes: tokio::sync::Semaphore,
    /// Log throttles for what a flooding peer can make happen at will.
    pub refused_log: Throttle,
    /// Likewise, for connections over a limit.
    pub full_log: Throttle,
}

/// The turns a request took for its [`Costs`].
#[derive(Debug, Default)]
pub struct Taken {
    /// Held until the answer is written.
    pub large_answer: Option<Turn>,
    /// Held while the supervisor works, given back before the answer is written.
    pub supervisor_cpu: Option<Turn>,
    /// Held while a search runs, likewise.
    pub search: Option<Turn>,
    /// Held while the handler calls into the store, likewise.
    pub store: Option<Turn>,
}

/// Memory held for one request: given back when dropped (once its answer is written).
#[derive(Debug, Default)]
pub struct Held {
    turns: Vec<Turn>,
    kib: u64,
}

impl Held {
    fn add(&mut self, turn: Turn, kib: u64) {
        self.turns.push(turn);
        self.kib += kib;
    }
}

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

impl Admission {
    /// The budgets for `cfg`.
    pub fn new(cfg: &Config) -> Admission {
        let memory = kib(memory_per_uid(cfg.limits.max_filter_bytes)) as usize;
        let uploads = (cfg.max_concurrent / 2).max(2);
        Admission {
            slots: Slots::new(cfg.max_connections, cfg.max_connections_per_uid),
            memory: Turns::new(memory, 4 * memory),
            uploads: Turns::new(cfg.max_uploads_per_tenant.min(uploads / 2), uploads),
            large_answers: Turns::new(1, LARGE_ANSWERS),
            cpu: Turns::new(1, SUPERVISOR_CPU),
            searches: Turns::new(1, SEARCHES),
            store_reads: Turns::new(1, STORE_READS),
            store_writes: Turns::new(1, STORE_WRITES),
            large_outputs: Turns::new(1, LARGE_OUTPUTS),
            decodes: tokio::sync::Semaphore::new(LARGE_DECODES),
            refused_log: Throttle::default(),
            full_log: Throttle::default(),
        }
    }

    /// Adds `bytes` to what `held` holds for `uid`, waiting until `by` while the uid's or the
    /// daemon's budget is spent. Refused at once when `bytes` (with what is held) is more than
    /// a uid may hold at all.
    pub async fn memory(
        &self,
        uid: u32,
        held: &mut Held,
        bytes: u64,
        by: Instant,
    ) -> Result<(), Box<ErrorReply>> {
        let more = self.memory_check(held, bytes)?;
        if more == 0 {
            return Ok(());
        }
        let take = self.memory.take_many(&uid, more as u32);
        match tokio::time::timeout_at(by.into(), take).await {
            Ok(turn) => {
                held.add(turn, more);
                Ok(())
            }
            Err(_) => Err(Box::new(self.memory_busy())),
        }
    }

    /// As [`Admission::memory`], without waiting: `Ok(false)` when the budget is spent now.
    pub fn try_memory(
        &self,
        uid: u32,
        held: &mut Held,
        bytes: u64,
    ) -> Result<bool, Box<ErrorReply>> {
        let more = self.memory_check(held, bytes)?;
        if more == 0 {
            return Ok(true);
        }
        match self.memory.try_take_many(&uid, more as u32) {
            Ok(turn) => {
                held.add(turn, more);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// KiB to take for `held` to cover `bytes`, or the refusal of a request larger than a
    /// uid's whole budget.
    fn memory_check(&self, held: &Held, bytes: u64) -> Result<u64, Box<ErrorReply>> {
        let want = kib(bytes);
        let each = self.memory.each() as u64;
        if want > each {
            return Err(Box::new(ErrorReply::new(
                ErrorCode::InvalidRequest,
                format!(
                    "the request takes {} bytes in memory once decoded (its filter, arguments and a tail read whole), over the {}-byte budget of one uid; pass fewer arguments or send the data as the input",
                    grouped(bytes),
                    grouped(each * 1024)
                ),
            )
            .with_limit(each * 1024, bytes)));
        }
        Ok(want.saturating_sub(held.kib))
    }

    fn memory_busy(&self) -> ErrorReply {
        ErrorReply::new(
            ErrorCode::Overloaded,
            format!(
                "the memory for requests held whole ({} bytes per uid, {} in all) is taken by other requests of this uid or of the daemon; retry shortly",
                grouped(self.memory.each() as u64 * 1024),
                grouped(self.memory.total() as u64 * 1024)
            ),
        )
    }

    /// Each budget's turns held now and in all, for metrics: (name, held, total). The memory
    /// budget's turns are KiB.
    pub fn in_use(&self) -> [(&'static str, u64, u64); 8] {
        fn row<K: std::hash::Hash + Eq + Clone>(
            name: &'static str,
            turns: &Turns<K>,
        ) -> (&'static str, u64, u64) {
            (name, turns.in_use() as u64, turns.total() as u64)
        }
        [
            row("request_memory_kib", &self.memory),
            row("uploads", &self.uploads),
            row("large_answers", &self.large_answers),
            row("supervisor_cpu", &self.cpu),
            row("searches", &self.searches),
            row("store_reads", &self.store_reads),
            row("store_writes", &self.store_writes),
            row("large_outputs", &self.large_outputs),
        ]
    }

    /// A turn to stream a run's input into a worker, for `tenant`: refused at once when the
    /// tenant holds all its turns; else waited for, in turn with other tenants, until `by`
    /// (every upload keeps the pace, `pace.rs`, so turns come free: other tenants that hold
    /// them cannot keep them by trickling).
    pub async fn upload(&self, tenant: &Arc<str>, by: Instant) -> Result<Turn, Box<ErrorReply>> {
        let (each, total) = (self.uploads.each(), self.uploads.total());
        self.uploads.take_own_now(tenant, by).await.map_err(|full| {
            Box::new(match full {
            Exhausted::Key => ErrorReply::new(
                ErrorCode::Overloaded,
                format!(
                    "tenant {tenant} already has {each} runs whose input is arriving, its limit; retry shortly"
                ),
            )
            .with_limit(each as u64, each as u64 + 1),
            Exhausted::Total => ErrorReply::new(
                ErrorCode::Overloaded,
                format!(
                    "all {total} of the daemon's turns for runs whose input is arriving stayed taken by other tenants; retry shortly"
                ),
            )
            .with_limit(total as u64, total as u64 + 1),
            })
        })
    }

    /// A supervisor-CPU turn for `uid`, waiting until `by`.
    pub async fn cpu(&self, uid: u32, by: Instant) -> Result<Turn, Box<ErrorReply>> {
        let costs = Costs {
            supervisor_cpu: true,
            ..Costs::NONE
        };
        let taken = self.turns(uid, costs, by).await?;
        Ok(taken.supervisor_cpu.expect("asked for"))
    }

    /// A turn to call into the hide store for `uid`, waiting until `by`.
    pub async fn store(
        &self,
        uid: u32,
        call: StoreCall,
        by: Instant,
    ) -> Result<Turn, Box<ErrorReply>> {
        let costs = Costs {
            store: Some(call),
            ..Costs::NONE
        };
        let taken = self.turns(uid, costs, by).await?;
        Ok(taken.store.expect("asked for"))
    }

    /// A turn to read and hold a worker's reply of `len` bytes, too large for its request's
    /// own output limit, for `uid`, waiting until `by`.
    pub async fn large_output(
        &self,
        uid: u32,
        len: u64,
        by: Instant,
    ) -> Result<Turn, Box<ErrorReply>> {
        match tokio::time::timeout_at(by.into(), self.large_outputs.take(&uid)).await {
            Ok(turn) => Ok(turn),
            Err(_) => Err(Box::new(ErrorReply::new(
                ErrorCode::Overloaded,
                format!(
                    "the output ({} bytes) is to be kept as a hide, and the daemon's {LARGE_OUTPUTS} turns for outputs that large (one per uid) stayed taken by this uid's other runs or by others' until the deadline; retry shortly",
                    grouped(len)
                ),
            ))),
        }
    }

    /// A turn to decode a frame of `len` bytes, if it is a large one (waits for one).
    pub async fn decoding(&self, len: usize) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match len > 64 * 1024 {
            true => self.decodes.acquire().await.ok(),
            false => None,
        }
    }

    /// The turns `costs` asks for, for `uid`, waiting until `by`.
    pub async fn turns(
        &self,
        uid: u32,
        costs: Costs,
        by: Instant,
    ) -> Result<Taken, Box<ErrorReply>> {
        let mut turns = Taken::default();
        if costs.large_answer {
            let why = || {
                "other large answers (hide_get, hide_cut, hide_list) of this uid or of the daemon are still being written; retry shortly".to_owned()
            };
            turns.large_answer = Some(take_by(&self.large_answers, uid, by, why).await?);
        }
        if costs.supervisor_cpu {
            let why = || {
                format!(
                    "the daemon's {SUPERVISOR_CPU} turns for JSON pages and puts are taken (one per uid), by this uid's other requests or by others'; retry shortly"
                )
            };
            turns.supervisor_cpu = Some(take_by(&self.cpu, uid, by, why).await?);
        }
        if costs.search {
            let why = || {
                format!(
                    "the daemon's {SEARCHES} turns for searches are taken (one per uid), by this uid's other searches or by others'; retry shortly"
                )
            };
            turns.search = Some(take_by(&self.searches, uid, by, why).await?);
        }
        if let Some(call) = costs.store {
            let (turns_of, total, what) = match call {
                StoreCall::Read => (&self.store_reads, STORE_READS, "reads of"),
                StoreCall::Write => (&self.store_writes, STORE_WRITES, "writes to"),
            };
            let why = || {
                format!(
                    "the daemon's {total} turns for {what} the hide store (one per uid) stayed taken by this uid's other requests or by others'; retry shortly"
                )
            };
            turns.store = Some(take_by(turns_of, uid, by, why).await?);
        }
        Ok(turns)
    }
}

/// A unit of `turns` for `uid`, waited for until `by`; past it, `OVERLOADED` saying `why`.
async fn take_by(
    turns: &Turns<u32>,
    uid: u32,
    by: Instant,
    why: impl FnOnce() -> String,
) -> Result<Turn, Box<ErrorReply>> {
    tokio::time::timeout_at(by.into(), turns.take(&uid))
        .await
        .map_err(|_| Box::new(ErrorReply::new(ErrorCode::Overloaded, why())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_budget_leaves_a_unit_for_another_uid_on_any_machine() {
        for max_concurrent in [1, 2, 4, 64] {
            let cfg = Config {
                max_concurrent,
                max_uploads_per_tenant: 64,
                ..Config::default()
            };
            let a = Admission::new(&cfg);
            for (each, total) in [
                (a.memory.each(), a.memory.total()),
                (a.uploads.each(), a.uploads.total()),
                (a.large_answers.each(), a.large_answers.total()),
                (a.cpu.each(), a.cpu.total()),
                (a.searches.each(), a.searches.total()),
                (a.store_reads.each(), a.store_reads.total()),
                (a.store_writes.each(), a.store_writes.total()),
                (a.large_outputs.each(), a.large_outputs.total()),
            ] {
                assert!(total >= 2 && each < total, "{each} of {total}");
            }
        }
    }

    #[test]
    fn costs_follow_the_kind() {
        use jqjail_protocol::{HideRef, HideSearchRequest};
        let search = Request::HideSearch(HideSearchRequest {
            id: "x".into(),
            query: "q".into(),
            ignore_case: true,
            page_size: None,
            max_matches: None,
        });
        // A search takes a search turn, not a CPU turn: it runs on a bulk thread.
        assert!(Costs::of(&search).search && !Costs::of(&search).supervisor_cpu);
        assert!(Costs::of(&Request::HideGet(HideRef { id: "x".into() })).large_answer);
        assert_eq!(Costs::of(&search).store, None);
        assert_eq!(Costs::of(&Request::HideUsage).store, Some(StoreCall::Read));
        assert_eq!(Costs::of(&Request::Stats), Costs::NONE);
        // A small put is hashed in its store turn; a larger one read whole takes a CPU turn
        // too; a streamed one takes its turns as it arrives.
        let put = |len| {
            Costs::of(&Request::HidePut(jqjail_protocol::HidePut {
                kind: "k".into(),
                source: "s".into(),
                content: jqjail_protocol::Tail::pending(len),
                meta: Default::default(),
            }))
        };
        assert!(!put(SMALL_PUT).supervisor_cpu);
        assert_eq!(put(SMALL_PUT).store, Some(StoreCall::Write));
        assert!(put(SMALL_PUT + 1).supervisor_cpu);
        assert_eq!(put(READ_WHOLE_TAIL + 1), Costs::NONE);
    }

    #[tokio::test]
    async fn a_request_over_a_uids_whole_budget_is_refused_at_once() {
        let a = Admission::new(&Config::default());
        let mut held = Held::default();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let e = a.memory(7, &mut held, 1 << 30, far).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert_eq!(e.actual, Some(1 << 30));
        // Up to the budget, the same uid's requests add up; past it they wait, then are refused.
        let each = a.memory.each() as u64 * 1024;
        a.memory(7, &mut held, each, far).await.unwrap();
        let mut second = Held::default();
        assert!(!a.try_memory(7, &mut second, 1024).unwrap());
        // Another uid is not held up.
        assert!(a.try_memory(8, &mut second, 1024).unwrap());
        drop(held);
        assert!(a.try_memory(7, &mut Held::default(), each).unwrap());
    }
}
