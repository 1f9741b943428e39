//! The worker pool: workers are started ahead of demand, each serves exactly one job and then
//! exits, and the pool refills behind them. Start-up cost stays off the request path as long
//! as the pool keeps up.
//!
//! Architecture invariant: a worker process is used for one job only. No heap, CPU budget or
//! data from one request (or tenant) can reach another through a worker.
//!
//! The pool's background work is kept out of the way of answers. A worker's exit (its address
//! space and namespaces torn down) and a new worker's start (fork, confinement, warm-up) cost
//! about 0.3 and 0.7 ms of CPU. Done while an answer is on its way, they take the CPU its
//! client is woken on: on two cores that added up to 0.6 ms to a small request. So an answered
//! worker waits, blocked on its socket, for [`LINGER`] before it is let go; and while another
//! worker is ready, a refill waits for the pool to be [`Quiet`] (no worker busy or lingering),
//! at most [`MAX_SETTLE`]. With no worker ready it starts at once, and in a pool run dry under
//! load (the last worker taken within [`DRY_IDLE`] of its ready or by a job that found none
//! ready, jobs waiting or running) without its warm-up ([`warm_up_for`]): it would get a job
//! as soon as it is ready, and under four clients the warm-up was a fifth of the machine's
//! CPU (BENCHMARKS.md, the profile of the small requests).

pub use crate::arriving::Arriving;
use crate::cgroup::CgroupParent;
use crate::config::TenantOf;
use crate::explain::{Context, explain};
use crate::fair::{Refused, Scheduler};
use crate::spawn::{Child, Exit, Launcher};
use jqjail_protocol::frame::FrameError;
use jqjail_protocol::frame::tokio_io::{read_body, read_frame, read_len, write_parts};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::worker::{
    Job, MAX_READY_FRAME_BYTES, Outcome, Reply, Started, StartupArgs, WORKER_ERRORS,
    max_reply_frame_bytes,
};
use jqjail_protocol::{Encoding, ErrorCode, ErrorReply};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{Mutex, Notify, mpsc};
use tokio::time::timeout_at;

/// How long a new worker may take to report ready before it is killed.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a worker may take to exit after it has replied before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long an answered worker is kept, blocked reading its socket, before the socket is closed
/// and it exits: long enough for a small answer to reach its client and the client to act on
/// it before the exit's work competes for the CPU.
pub const LINGER: Duration = Duration::from_millis(1);
/// The longest a refill waits for the pool to be quiet while another worker is ready.
pub const MAX_SETTLE: Duration = Duration::from_millis(5);
/// A worker taken less than this after it was ready shows a pool run dry: its warm-up (about
/// 0.2 ms of CPU, more of wall time on a busy machine) would have been on its job's path.
pub const DRY_IDLE: Duration = Duration::from_millis(1);

/// The pool's settings.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// How each worker is started.
    pub launcher: Launcher,
    /// What every worker is started with.
    pub startup: StartupArgs,
    /// Workers kept started and ready.
    pub prestart: usize,
    /// Jobs running at once.
    pub max_concurrent: usize,
    /// Where each worker gets its own memory cgroup, if the host allows.
    pub cgroup: Option<Arc<CgroupParent>>,
}

/// A started, confined worker waiting for its one job.
struct Worker {
    child: Child,
    sock: UnixStream,
    /// When it said it was ready.
    ready_at: Instant,
}

/// What the refills watch: workers ready, workers busy (given a job and not yet let go), jobs
/// waiting for a worker, and whether the pool ran dry at the last take (the worker had been
/// ready for less than [`DRY_IDLE`], or the job found none ready).
#[derive(Default)]
struct Quiet {
    ready: AtomicUsize,
    busy: AtomicUsize,
    waiting: AtomicUsize,
    dry: AtomicBool,
    changed: Notify,
}

impl Quiet {
    /// Returns when a new worker should start: at once while no worker is ready, else once no
    /// worker is busy, or after `longest`.
    async fn settle(&self, longest: Duration) {
        let until = tokio::time::Instant::now() + longest;
        loop {
            // Registered before the check, so that a change between the two is not missed.
            let changed = self.changed.notified();
            if self.ready.load(Ordering::Acquire) == 0 || self.busy.load(Ordering::Acquire) == 0 {
                return;
            }
            if timeout_at(until, changed).await.is_err() {
                return;
            }
        }
    }

    fn took(self: &Arc<Self>) -> Busy {
        // Busy before no longer ready, so that a refill never sees the job in neither.
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.ready.fetch_sub(1, Ordering::AcqRel);
        self.changed.notify_waiters();
        Busy(self.clone())
    }
}

/// Whether a worker whose start begins now should run its warm-up: yes while another worker
/// is ready, while the pool did not run dry at the last take (`dry` false: that worker had
/// waited in it for [`DRY_IDLE`] or longer, for a job that found it ready), or while the
/// daemon has no job at all (none waiting for a worker, none on one). A pool run dry under
/// load hands each worker a job about as soon as it is ready, so its warm-up would be on that
/// job's path: about 0.2 ms of CPU that saves the job only part of it, since the warm-up's
/// filter touches more than a small job does. The price: the workers started cold just before
/// the load stops, at most one a refill task, serve later requests cold (about 0.1 ms more
/// each), whichever tenant's load it was.
fn warm_up_for(ready: usize, dry: bool, waiting: usize, busy: usize) -> bool {
    ready > 0 || !dry || waiting + busy == 0
}

/// A job waiting for a worker; counted while its wait lasts, however it ends.
struct Waiting<'a>(&'a Quiet);

impl<'a> Waiting<'a> {
    fn new(quiet: &'a Quiet) -> Self {
        quiet.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(quiet)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One worker given a job; dropped when it is let go (or found dead).
struct Busy(Arc<Quiet>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }
}

/// Worker counters for `jqjail stats`.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Workers started and ready.
    pub started: AtomicU64,
    /// Workers that failed to start.
    pub failed_starts: AtomicU64,
    /// Workers being started now.
    pub starting: AtomicU64,
    /// Starts finished (ready or failed) of workers told to run their warm-up.
    pub warm_starts: AtomicU64,
    /// Starts finished (ready or failed) of workers told to skip it, in a pool run dry under
    /// load ([`warm_up_for`]).
    pub cold_starts: AtomicU64,
}

/// A job's input: bytes in hand, or bytes still arriving, passed on to the worker as they
/// arrive.
pub enum JobInput<'a, 'b> {
    /// All of it, in memory.
    Bytes(&'a [u8]),
    /// Still arriving (the caller keeps the tail, to skip what the job did not take).
    Stream(&'a mut Arriving<'b>),
}

impl JobInput<'_, '_> {
    /// Total input bytes.
    pub fn len(&self) -> u64 {
        match self {
            JobInput::Bytes(b) => b.len() as u64,
            JobInput::Stream(a) => a.len(),
        }
    }

    /// Whether there are no input bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the stream not yet read (0 for bytes in hand).
    pub fn unread(&self) -> u64 {
        match self {
            JobInput::Bytes(_) => 0,
            JobInput::Stream(a) => a.unread(),
        }
    }

    /// For a stream that has not all come: why, in the words of a missed arrival deadline.
    fn late(&self) -> Option<String> {
        match self {
            JobInput::Stream(a) if a.unread() > 0 => Some(a.too_late()),
            _ => None,
        }
    }

    /// Whether the job can still be given to another worker: nothing of a stream was read.
    fn replayable(&self) -> bool {
        match self {
            JobInput::Bytes(_) => true,
            JobInput::Stream(a) => !a.started(),
        }
    }
}

/// Why sending a job's input to a worker stopped.
enum SendError {
    /// The worker's side failed (it died).
    Worker(std::io::Error),
    /// The stream the input comes from failed or ended early.
    Source(String),
}

/// Writes the job frame to the worker, then the input's `input_bytes` raw bytes as they
/// arrive; with `hold_last`, but for a stream's last byte: that is returned, to be written
/// once the job has an evaluation slot (the worker cannot start evaluating without it).
async fn send_job(
    sock: &mut UnixStream,
    header: &[u8],
    input: &mut JobInput<'_, '_>,
    hold_last: bool,
) -> Result<Option<u8>, SendError> {
    let prefix = jqjail_protocol::frame::prefix(header.len())
        .map_err(|e| SendError::Source(e.to_string()))?;
    match input {
        // A small job in one write: the worker is woken once.
        JobInput::Bytes(bytes) => write_parts(sock, &[&prefix, header, bytes])
            .await
            .map_err(SendError::Worker)?,
        JobInput::Stream(arriving) => {
            write_parts(sock, &[&prefix, header])
                .await
                .map_err(SendError::Worker)?;
            let mut buf = arriving.buffer(crate::arriving::PUMP_CHUNK);
            loop {
                let n = arriving
                    .read_some(&mut buf)
                    .await
                    .map_err(SendError::Source)?;
                if n == 0 {
                    break;
                }
                if hold_last && arriving.unread() == 0 {
                    sock.write_all(&buf[..n - 1])
                        .await
                        .map_err(SendError::Worker)?;
                    sock.flush().await.map_err(SendError::Worker)?;
                    return Ok(Some(buf[n - 1]));
                }
                sock.write_all(&buf[..n]).await.map_err(SendError::Worker)?;
            }
        }
    }
    sock.flush().await.map_err(SendError::Worker)?;
    Ok(None)
}

/// When a job takes its evaluation slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotWhen {
    /// Before its worker: every job but a client's upload.
    Before,
    /// Once a client's upload has come but for its last byte (the worker holds it meanwhile,
    /// in one of the tenant's upload turns).
    AfterUpload,
}

/// What a worker's reply may cost before it is read: a reply too large to hold `above` bytes of
/// output (an output to be kept as a hide, up to the input limit) is read only once a
/// large-output turn of the payer's is taken, and the turn is held by the caller until the
/// output is stored. Without it, outputs read whole piled up in memory while they waited for
/// the store (issue 34: 2.3 GB from one uid, and the daemon OOM-killed).
pub struct OutputGate<'a> {
    /// Replies that can hold this much output are read at once.
    pub above: u64,
    /// Whose turn a larger reply waits for: the daemon's budgets and a uid.
    pub payer: (&'a crate::tenant::Admission, u32),
    /// The turn, once taken.
    pub held: Option<crate::admit::Turn>,
}

/// Why a worker's reply was not read.
enum ReplyError {
    Frame(FrameError),
    /// No large-output turn came before the deadline.
    NoTurn(Box<ErrorReply>),
}

/// Reads a worker's reply frame of at most `max` bytes, taking `gate`'s turn first when the
/// frame is larger than one that holds the gate's output size.
async fn read_reply(
    sock: &mut UnixStream,
    max: u64,
    gate: Option<&mut OutputGate<'_>>,
    by: Instant,
) -> Result<Vec<u8>, ReplyError> {
    let len = read_len(sock, max).await.map_err(ReplyError::Frame)?;
    if let Some(gate) = gate
        && len as u64 > max_reply_frame_bytes(gate.above)
    {
        let (admission, uid) = gate.payer;
        let turn = admission
            .large_output(uid, len as u64, by)
            .await
            .map_err(ReplyError::NoTurn)?;
        gate.held = Some(turn);
    }
    read_body(sock, len).await.map_err(ReplyError::Frame)
}

/// A worker's reply decoded, its frame freed.
fn decode_reply(frame: Vec<u8>) -> Result<Reply, jqjail_protocol::CodecError> {
    Encoding::Bincode.decode::<Reply>(&frame)
}

/// The result of one job: the worker's answer and what it cost.
#[derive(Debug)]
pub struct JobResult {
    /// The output text, or the error.
    pub result: Result<String, ErrorReply>,
    /// Worker CPU time: its own report with a reply, the kernel's after a death.
    pub cpu: Duration,
    /// Worker peak RSS, measured the same way.
    pub peak_rss_bytes: u64,
}

/// The pool. Dropping it stops the refill and kills the idle workers.
pub struct Pool {
    cfg: PoolConfig,
    ready: Mutex<mpsc::Receiver<Worker>>,
    quiet: Arc<Quiet>,
    slots: Arc<Scheduler>,
    last_start_error: Arc<std::sync::Mutex<Option<String>>>,
    /// Counters.
    pub stats: Arc<PoolStats>,
}

impl Pool {
    /// Starts the refill tasks; workers begin starting at once.
    pub fn start(cfg: PoolConfig) -> Pool {
        let (tx, rx) = mpsc::channel(cfg.prestart.max(1));
        let last_start_error = Arc::new(std::sync::Mutex::new(None));
        let stats = Arc::new(PoolStats::default());
        let quiet = Arc::new(Quiet::default());
        // One refiller for each worker kept ready, up to two a core: under load the pool is
        // empty, and every slot is a start under way. A start is mostly waiting (on the
        // zygote, on the kernel's namespace and seccomp set-up), so starts overlap; with two,
        // the refills, not the CPU, bounded throughput (a quarter of two cores idle at 1,300
        // requests/s; BENCHMARKS.md, issue 38). Not more: a start is CPU too (about 0.5 ms of
        // a worker's and the zygote's), and no tenant's slot pays for it.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        for _ in 0..cfg.prestart.clamp(1, 2 * cores) {
            let tx = tx.clone();
            let launcher = cfg.launcher.clone();
            let startup = cfg.startup;
            let last = last_start_error.clone();
            let stats = stats.clone();
            let cgroup = cfg.cgroup.clone();
            let quiet = quiet.clone();
            tokio::spawn(refill(tx, launcher, startup, cgroup, last, stats, quiet));
        }
        Pool {
            slots: Scheduler::new(cfg.max_concurrent),
            cfg,
            ready: Mutex::new(rx),
            quiet,
            last_start_error,
            stats,
        }
    }

    /// Runs one job on a fresh worker before `deadline`. Time spent waiting for a streamed
    /// input to arrive does not count against the deadline. `slot`: when the job takes its
    /// evaluation slot. `gate`: what a reply too large for the request's own output limit
    /// waits for.
    #[allow(clippy::too_many_arguments)]
    pub async fn execute(
        &self,
        job: &Job,
        input: &mut JobInput<'_, '_>,
        deadline: Instant,
        ctx: Context,
        tenant: &TenantOf,
        slot: SlotWhen,
        mut gate: Option<&mut OutputGate<'_>>,
    ) -> JobResult {
        let fail = |e: ErrorReply| JobResult {
            result: Err(e),
            cpu: Duration::ZERO,
            peak_rss_bytes: 0,
        };
        // A slot, fairly shared among tenants; refused at once past the tenant's queue bound.
        // A client's upload takes its slot only once all but its last byte has come, so that
        // a slow upload holds a worker (in one of its tenant's upload turns) but never a slot;
        // every other job takes it before its worker.
        let _slot = match slot {
            SlotWhen::Before => match self.slot(tenant, deadline, &ctx).await {
                Ok(slot) => Some(slot),
                Err(e) => return fail(e),
            },
            SlotWhen::AfterUpload => None,
        };
        // A worker that died while idle fails at the job's first byte and is replaced by the
        // next. Every idle worker may be dead (killed from outside), so allow one attempt more
        // than the pool holds: the last one is a freshly started worker.
        let max_attempts = self.cfg.prestart + 1;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let worker = match self.acquire(deadline, &ctx).await {
                Ok(w) => w,
                Err(e) => return fail(e),
            };
            let busy = self.quiet.took();
            let later = _slot.is_none().then_some((self, tenant));
            let gate = gate.as_deref_mut();
            match run_on(worker, busy, job, input, deadline, ctx, later, gate).await {
                Attempt::Done(outcome) => return outcome,
                Attempt::DeadBeforeJob(exit) if attempts < max_attempts && input.replayable() => {
                    tracing::warn!(?exit, "idle worker was dead; retrying on another");
                }
                Attempt::DeadBeforeJob(exit) => {
                    return JobResult {
                        result: Err(explain(&exit, &ctx)),
                        cpu: exit.cpu,
                        peak_rss_bytes: exit.peak_rss_bytes,
                    };
                }
            }
        }
    }

    /// An evaluation slot for `tenant`, waiting until `deadline`.
    async fn slot(
        &self,
        tenant: &TenantOf,
        deadline: Instant,
        ctx: &Context,
    ) -> Result<crate::fair::Slot, ErrorReply> {
        match self
            .slots
            .acquire(&tenant.name, tenant.share, deadline)
            .await
        {
            Ok(slot) => Ok(slot),
            Err(Refused::QueueFull { waiting, limit }) => Err(ErrorReply::new(
                ErrorCode::Overloaded,
                format!(
                    "{} of your requests are already waiting, the per-tenant queue limit is {}; retry in about {} ms",
                    grouped(waiting as u64),
                    grouped(limit as u64),
                    grouped(retry_hint_ms(waiting, tenant.share.max_concurrent))
                ),
            )
            .with_limit(limit as u64, waiting as u64 + 1)),
            Err(Refused::Closed) => Err(ErrorReply::new(
                ErrorCode::ShuttingDown,
                "the server is shutting down",
            )),
            Err(Refused::Deadline) => Err(ErrorReply::new(
                ErrorCode::Overloaded,
                format!(
                    "no evaluation slot became free within the {} ms deadline ({} run at once); retry in a moment",
                    grouped(ctx.timeout_ms),
                    self.cfg.max_concurrent
                ),
            )),
        }
    }

    async fn acquire(&self, deadline: Instant, ctx: &Context) -> Result<Worker, ErrorReply> {
        // No worker ready as the wait begins: whichever one this job gets, it gets it as soon
        // as it is ready (or as soon as another job leaves it), so the pool ran dry.
        let waited = self.quiet.ready.load(Ordering::Acquire) == 0;
        let waiting = Waiting::new(&self.quiet);
        let got = timeout_at(deadline.into(), async {
            self.ready.lock().await.recv().await
        })
        .await;
        drop(waiting);
        match got {
            Ok(Some(w)) => {
                let dry = waited || w.ready_at.elapsed() < DRY_IDLE;
                self.quiet.dry.store(dry, Ordering::Release);
                Ok(w)
            }
            Ok(None) => Err(ErrorReply::new(
                ErrorCode::ShuttingDown,
                "the server is shutting down",
            )),
            Err(_) => {
                let last = self
                    .last_start_error
                    .lock()
                    .map(|l| l.clone())
                    .unwrap_or(None);
                Err(match last {
                    Some(why) => ErrorReply::new(
                        ErrorCode::Internal,
                        format!("no worker could be started within the deadline: {why}"),
                    ),
                    None => ErrorReply::new(
                        ErrorCode::Overloaded,
                        format!(
                            "no worker became ready within the {} ms deadline; retry in a moment",
                            grouped(ctx.timeout_ms)
                        ),
                    ),
                })
            }
        }
    }

    /// (running, waiting) evaluations now.
    pub fn load(&self) -> (usize, usize) {
        self.slots.load()
    }

    /// Workers started and waiting for a job, and workers given one and not yet let go.
    pub fn workers(&self) -> (usize, usize) {
        (
            self.quiet.ready.load(Ordering::Acquire),
            self.quiet.busy.load(Ordering::Acquire),
        )
    }

    /// Closes the pool to new jobs: waiting and future `execute` calls answer `SHUTTING_DOWN`.
    pub fn close(&self) {
        self.slots.close();
    }
}

/// A rough wait before retrying: the requests ahead, at about a typical request time each,
/// spread over the tenant's concurrent slots.
fn retry_hint_ms(waiting: usize, concurrent: usize) -> u64 {
    const TYPICAL_REQUEST_MS: u64 = 5;
    (waiting as u64 * TYPICAL_REQUEST_MS / concurrent.max(1) as u64).max(TYPICAL_REQUEST_MS)
}

enum Attempt {
    Done(JobResult),
    /// The worker was gone before it took the job; safe to retry elsewhere.
    DeadBeforeJob(Exit),
}

async fn reap(child: &mut Child) -> Exit {
    match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(Ok(exit)) => exit,
        _ => {
            child.kill();
            child.wait().await.unwrap_or_else(|e| Exit {
                status: Ok(-1),
                cpu: Duration::ZERO,
                peak_rss_bytes: 0,
                stderr_tail: format!("could not reap worker: {e}"),
                seccomp_syscall: None,
                oom_killed: false,
            })
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_on(
    mut w: Worker,
    busy: Busy,
    job: &Job,
    input: &mut JobInput<'_, '_>,
    deadline: Instant,
    mut ctx: Context,
    slot_later: Option<(&Pool, &TenantOf)>,
    gate: Option<&mut OutputGate<'_>>,
) -> Attempt {
    let header = match Encoding::Bincode.encode(job) {
        Ok(h) => h,
        Err(e) => {
            return Attempt::Done(JobResult {
                result: Err(ErrorReply::new(
                    ErrorCode::Internal,
                    format!("cannot encode job: {e}"),
                )),
                cpu: Duration::ZERO,
                peak_rss_bytes: 0,
            });
        }
    };
    // A streamed input must arrive by its own deadline (the frame timeout); the time it
    // takes is added to the evaluation's, so that an upload is not counted as evaluation.
    let send_by = match input {
        JobInput::Bytes(_) => deadline,
        JobInput::Stream(arriving) => arriving.arrive_by(),
    };
    let sending = Instant::now();
    let hold_last = slot_later.is_some();
    let sent = timeout_at(
        send_by.into(),
        send_job(&mut w.sock, &header, input, hold_last),
    )
    .await;
    let deadline = match input {
        JobInput::Bytes(_) => deadline,
        JobInput::Stream(_) => deadline + sending.elapsed(),
    };
    // An upload's slot: taken once its input is sent but for the last byte (whatever its
    // length, an empty one too), held until the reply is read.
    let mut _slot = None;
    let sent = match (sent, slot_later) {
        (Ok(Ok(last)), Some((pool, tenant))) => {
            match pool.slot(tenant, deadline, &ctx).await {
                Ok(slot) => _slot = Some(slot),
                Err(e) => {
                    w.child.kill();
                    let exit = reap(&mut w.child).await;
                    return Attempt::Done(JobResult {
                        result: Err(e),
                        cpu: exit.cpu,
                        peak_rss_bytes: 0,
                    });
                }
            }
            let last = async {
                if let Some(last) = last {
                    w.sock.write_all(&[last]).await?;
                }
                w.sock.flush().await
            };
            match timeout_at(deadline.into(), last).await {
                Ok(Ok(())) => Ok(Ok(())),
                Ok(Err(e)) => Ok(Err(SendError::Worker(e))),
                Err(elapsed) => Err(elapsed),
            }
        }
        (Ok(Ok(_)), None) => Ok(Ok(())),
        (Ok(Err(e)), _) => Ok(Err(e)),
        (Err(elapsed), _) => Err(elapsed),
    };
    let reply = match sent {
        Ok(Ok(())) => {
            let max = max_reply_frame_bytes(job.max_output_bytes);
            timeout_at(
                deadline.into(),
                read_reply(&mut w.sock, max, gate, deadline),
            )
            .await
        }
        Ok(Err(SendError::Worker(e))) => {
            tracing::debug!(pid = w.child.pid(), error = %e, "sending job failed");
            let exit = reap(&mut w.child).await;
            return if input.replayable() {
                Attempt::DeadBeforeJob(exit)
            } else {
                Attempt::Done(JobResult {
                    result: Err(explain(&exit, &ctx)),
                    cpu: exit.cpu,
                    peak_rss_bytes: exit.peak_rss_bytes,
                })
            };
        }
        Ok(Err(SendError::Source(why))) => return input_failed(&mut w, why).await,
        Err(elapsed) => match input.late() {
            // The input itself did not come in time: the client's fault, not the filter's.
            Some(why) => return input_failed(&mut w, why).await,
            None => Err(elapsed),
        },
    };
    match reply {
        // The frame goes as soon as it is decoded: a kept output is held once, not twice.
        Ok(Ok(frame)) => match decode_reply(frame) {
            Ok(reply) => {
                // Answer now. The worker waits for its socket to close; it is let go after
                // `LINGER` and reaped off the request's path. It is killed then, not given
                // `EXIT_GRACE`: it has nothing left to do, and one running an attacker's code
                // that stayed would run with no slot or turn counting it.
                let Worker {
                    mut child, sock, ..
                } = w;
                tokio::spawn(async move {
                    tokio::time::sleep(LINGER).await;
                    drop(sock);
                    child.kill();
                    drop(busy);
                    reap(&mut child).await;
                });
                let result = match reply.outcome {
                    // A worker is hostile: one that answers more than its job allows is
                    // treated as broken, not trusted to have capped its output.
                    Outcome::Output(text) if text.len() as u64 > job.max_output_bytes => {
                        Err(ErrorReply::new(
                            ErrorCode::WorkerCrashed,
                            format!(
                                "the worker answered {} bytes, over its job's {}-byte output limit",
                                grouped(text.len() as u64),
                                grouped(job.max_output_bytes)
                            ),
                        ))
                    }
                    Outcome::Output(text) => Ok(text),
                    // Nor trusted to give a code that is the supervisor's (a kernel limit, a
                    // refusal, a breach).
                    Outcome::Error(e) if !WORKER_ERRORS.contains(&e.code) => Err(ErrorReply::new(
                        ErrorCode::WorkerCrashed,
                        format!(
                            "the worker answered the code {}, which only the supervisor gives",
                            e.code
                        ),
                    )),
                    Outcome::Error(e) => Err(ErrorReply {
                        code: e.code,
                        message: e.message,
                        limit: e.limit,
                        actual: e.actual,
                        detail: None,
                        cost: None,
                    }),
                };
                Attempt::Done(JobResult {
                    result,
                    cpu: Duration::from_micros(reply.cpu_us),
                    peak_rss_bytes: reply.peak_rss_bytes,
                })
            }
            Err(e) => {
                w.child.kill();
                let exit = reap(&mut w.child).await;
                Attempt::Done(JobResult {
                    result: Err(ErrorReply::new(
                        ErrorCode::WorkerCrashed,
                        format!("worker sent a malformed reply: {e}"),
                    )),
                    cpu: exit.cpu,
                    peak_rss_bytes: exit.peak_rss_bytes,
                })
            }
        },
        Ok(Err(ReplyError::NoTurn(e))) => {
            w.child.kill();
            let exit = reap(&mut w.child).await;
            Attempt::Done(JobResult {
                result: Err(*e),
                cpu: exit.cpu,
                peak_rss_bytes: exit.peak_rss_bytes,
            })
        }
        Ok(Err(ReplyError::Frame(frame_error))) => {
            // No reply: the worker died (or sent an oversized frame). The exit says why.
            tracing::debug!(pid = w.child.pid(), error = %frame_error, "no reply from worker");
            if matches!(frame_error, FrameError::TooLarge { .. }) {
                w.child.kill();
            }
            let exit = reap(&mut w.child).await;
            Attempt::Done(JobResult {
                result: Err(explain(&exit, &ctx)),
                cpu: exit.cpu,
                peak_rss_bytes: exit.peak_rss_bytes,
            })
        }
        Err(_elapsed) => {
            // Stopped by a signal no part of jqjail sends (SIGSTOP from another process, a
            // debugger): said so, as the filter's own time is not what ran out.
            ctx.stopped_from_outside = process_state(w.child.pid()) == Some('T');
            w.child.kill();
            ctx.killed_for_timeout = true;
            let exit = reap(&mut w.child).await;
            Attempt::Done(JobResult {
                result: Err(explain(&exit, &ctx)),
                cpu: exit.cpu,
                peak_rss_bytes: exit.peak_rss_bytes,
            })
        }
    }
}

/// The job's input stopped coming: the worker that was receiving it is killed, and the
/// answer is `PROTOCOL_ERROR` saying why.
async fn input_failed(w: &mut Worker, why: String) -> Attempt {
    w.child.kill();
    let exit = reap(&mut w.child).await;
    Attempt::Done(JobResult {
        result: Err(ErrorReply::new(ErrorCode::ProtocolError, why)),
        cpu: exit.cpu,
        peak_rss_bytes: exit.peak_rss_bytes,
    })
}

/// Starts one worker with `startup`'s isolation; while a part of it is refused by this host,
/// turns that part off, logs why, and tries again. Logs the isolation workers will run with.
pub async fn negotiate_isolation(launcher: &Launcher, mut startup: StartupArgs) -> StartupArgs {
    loop {
        match start_worker(launcher, &startup, None).await {
            Ok(worker) => {
                drop(worker);
                break;
            }
            Err(StartError {
                refused_part: Some(part),
                message,
            }) => {
                tracing::warn!(part = %part, reason = %message, "worker isolation part unavailable on this host; continuing without it");
                startup.isolation = startup.isolation.without(&part);
            }
            // Not an isolation problem: the pool will report it on every start.
            Err(_) => break,
        }
    }
    let iso = startup.isolation;
    tracing::info!(
        user_namespace = iso.user,
        ipc_uts_namespaces = iso.ipc_uts,
        net_namespace = iso.net,
        empty_root = iso.empty_root,
        "worker isolation (always: rlimits, no capabilities, seccomp allowlist)"
    );
    startup
}

/// Why a worker did not start.
#[derive(Debug)]
struct StartError {
    /// The isolation part the worker reported this host refuses, if that is why.
    refused_part: Option<String>,
    /// The whole story, for the log.
    message: String,
}

impl From<String> for StartError {
    fn from(message: String) -> Self {
        StartError {
            refused_part: None,
            message,
        }
    }
}

async fn start_worker(
    launcher: &Launcher,
    startup: &StartupArgs,
    cgroup: Option<Arc<CgroupParent>>,
) -> Result<Worker, StartError> {
    let (mut child, sock) = launcher
        .launch(startup)
        .await
        .map_err(|e| format!("starting a worker ({}): {e}", launcher.describe()))?;
    if let Some(parent) = cgroup {
        // cgroupfs writes block (the kernel sets up the memory controller): keep them off the
        // runtime's threads.
        let pid = child.pid();
        match tokio::task::spawn_blocking(move || parent.attach(pid)).await {
            Ok(Ok(cg)) => child.set_cgroup(cg),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot put a worker in its memory cgroup"),
            Err(e) => tracing::warn!(error = %e, "cgroup attach task failed"),
        }
    }
    let mut sock =
        UnixStream::from_std(sock).map_err(|e| format!("registering worker socket: {e}"))?;
    let ready =
        tokio::time::timeout(READY_TIMEOUT, read_frame(&mut sock, MAX_READY_FRAME_BYTES)).await;
    let mut refused_part = None;
    let failure = match ready {
        Ok(Ok(frame)) => match Encoding::Bincode.decode::<Started>(&frame) {
            // The process on the socket must be the child this supervisor will wait for,
            // signal and account: a launcher that mixed up two workers is caught here.
            Ok(Started::Ready(ready)) if i64::from(ready.pid) == i64::from(child.pid()) => {
                return Ok(Worker {
                    child,
                    sock,
                    ready_at: Instant::now(),
                });
            }
            Ok(Started::Failed(failed)) => {
                // Only a part this supervisor asked for can be turned off.
                refused_part = failed
                    .isolation_part
                    .filter(|part| startup.isolation.has(part));
                format!(
                    "worker set-up failed at {}: {}",
                    failed.step, failed.message
                )
            }
            Ok(Started::Ready(ready)) => format!(
                "the worker on the socket is pid {}, but the process started is pid {}",
                ready.pid,
                child.pid()
            ),
            Err(e) => format!("worker sent a malformed ready message: {e}"),
        },
        Ok(Err(e)) => format!("worker did not get ready: {e}"),
        Err(_) => format!("worker was not ready within {} s", READY_TIMEOUT.as_secs()),
    };
    child.kill();
    let exit = reap(&mut child).await;
    Err(StartError {
        refused_part,
        message: format!(
            "{failure} (exit {:?}, stderr: {})",
            exit.status, exit.stderr_tail
        ),
    })
}

async fn refill(
    tx: mpsc::Sender<Worker>,
    launcher: Launcher,
    startup: StartupArgs,
    cgroup: Option<Arc<CgroupParent>>,
    last_error: Arc<std::sync::Mutex<Option<String>>>,
    stats: Arc<PoolStats>,
    quiet: Arc<Quiet>,
) {
    let mut backoff = Duration::from_millis(10);
    while let Ok(slot) = tx.reserve().await {
        quiet.settle(MAX_SETTLE).await;
        stats.starting.fetch_add(1, Ordering::Relaxed);
        let startup = StartupArgs {
            warm_up: warm_up_for(
                quiet.ready.load(Ordering::Acquire),
                quiet.dry.load(Ordering::Acquire),
                quiet.waiting.load(Ordering::Acquire),
                quiet.busy.load(Ordering::Acquire),
            ),
            ..startup
        };
        let started = start_worker(&launcher, &startup, cgroup.clone()).await;
        if startup.warm_up {
            stats.warm_starts.fetch_add(1, Ordering::Relaxed);
        } else {
            stats.cold_starts.fetch_add(1, Ordering::Relaxed);
        }
        match started {
            Ok(worker) => {
                // Counted ready before it stops counting as starting, so that no reader sees
                // it in neither.
                quiet.ready.fetch_add(1, Ordering::AcqRel);
                stats.starting.fetch_sub(1, Ordering::Relaxed);
                stats.started.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut last) = last_error.lock() {
                    *last = None;
                }
                backoff = Duration::from_millis(10);
                slot.send(worker);
            }
            Err(StartError { message, .. }) => {
                stats.starting.fetch_sub(1, Ordering::Relaxed);
                stats.failed_starts.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %message, "worker failed to start");
                if let Ok(mut last) = last_error.lock() {
                    *last = Some(message);
                }
                drop(slot);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// A process's state letter from `/proc/PID/stat` (`R`, `S`, `T` for stopped, …).
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything; the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_warmed_up_unless_the_pool_ran_dry_under_load() {
        // (ready, dry, waiting, busy). Another worker ready: warm, however loaded.
        assert!(warm_up_for(1, true, 0, 0));
        assert!(warm_up_for(1, true, 5, 3));
        // The last worker taken had waited in the pool: warm (a single client with pauses,
        // whatever the pool's size).
        assert!(warm_up_for(0, false, 0, 1));
        assert!(warm_up_for(0, false, 2, 1));
        // No job at all: warm, for the next request's round trip.
        assert!(warm_up_for(0, true, 0, 0));
        // Dry, with jobs waiting or running: the next of them takes it as soon as it is ready.
        assert!(!warm_up_for(0, true, 1, 0));
        assert!(!warm_up_for(0, true, 0, 1));
        assert!(!warm_up_for(0, true, 3, 4));
    }

    #[tokio::test]
    async fn a_wait_for_a_worker_is_counted_until_it_ends_even_when_cut_short() {
        let quiet = Quiet::default();
        let (_tx, mut rx) = mpsc::channel::<()>(1);
        let wait = async {
            let _waiting = Waiting::new(&quiet);
            rx.recv().await
        };
        let mut wait = Box::pin(wait);
        assert!(futures_poll_once(wait.as_mut()).await.is_none());
        assert_eq!(quiet.waiting.load(Ordering::Acquire), 1);
        // A deadline that passes drops the wait: the count goes back.
        drop(wait);
        assert_eq!(quiet.waiting.load(Ordering::Acquire), 0);
    }

    /// Polls `fut` once; `Some` if it finished.
    async fn futures_poll_once<F: std::future::Future>(
        fut: std::pin::Pin<&mut F>,
    ) -> Option<F::Output> {
        let mut fut = Some(fut);
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match fut.take().unwrap().poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[tokio::test]
    async fn a_refill_waits_for_quiet_only_while_another_worker_is_ready() {
        let quiet = Arc::new(Quiet::default());
        let long = Duration::from_secs(30);
        // None ready: at once, busy or not.
        quiet.ready.store(1, Ordering::Release);
        let busy = quiet.took();
        let t = Instant::now();
        quiet.settle(long).await;
        assert!(t.elapsed() < long);
        // One ready and one busy: until the busy one is let go.
        quiet.ready.store(1, Ordering::Release);
        let let_go = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(busy);
        });
        let t = Instant::now();
        quiet.settle(long).await;
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert!(t.elapsed() < long);
        assert_eq!(quiet.busy.load(Ordering::Acquire), 0);
        let_go.await.unwrap();
        // One ready, one busy for ever: no longer than the bound.
        let _busy = quiet.took();
        quiet.ready.store(1, Ordering::Release);
        let t = Instant::now();
        quiet.settle(Duration::from_millis(30)).await;
        assert!(t.elapsed() >= Duration::from_millis(30));
        // One ready, none busy: at once.
        drop(_busy);
        let t = Instant::now();
        quiet.settle(long).await;
        assert!(t.elapsed() < long);
    }
}
