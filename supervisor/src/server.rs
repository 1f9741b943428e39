//! The socket server: accepts connections, speaks the protocol, hands runs to the pool, and
//! drains on shutdown. It never parses a filter or an input document: inputs go to a worker
//! as the bytes they arrived as (architecture invariant).

use crate::admit::Turn;
use crate::arriving::Arriving;
use crate::cgroup::CgroupParent;
use crate::config::{Config, TenantOf};
use crate::explain::Context;
use crate::pool::{JobInput, Pool, PoolConfig, SlotWhen, negotiate_isolation};
use crate::spawn::{Launcher, Program};
use crate::tenant::{Admission, Costs, Held, READ_WHOLE_TAIL};
use jqjail_protocol::frame::prefix;
use jqjail_protocol::frame::tokio_io::{write_frame, write_parts};
use jqjail_protocol::frame::{PREFIX_BYTES, max_request_frame_bytes};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::worker::{Job, StartupArgs};
use jqjail_protocol::{
    Cost, Encoding, ErrorCode, ErrorReply, HelloReply, HiddenReply, Input, MIN_PROTOCOL_VERSION,
    OnOversize, PROTOCOL_VERSION, Request, Response, RunReply, Tail,
};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The server name sent in the handshake.
pub const SERVER_NAME: &str = concat!("jqjaild/", env!("CARGO_PKG_VERSION"));

/// How often hides past the age limit are swept (besides on every put).
pub const EXPIRE_EVERY: Duration = Duration::from_secs(600);

/// Re-reads the configuration (on SIGHUP); an error keeps the running configuration.
pub type Reload = Box<dyn Fn() -> Result<Config, String> + Send + Sync>;

struct Shared {
    cfg: Config,
    /// The tenant policy in force: `cfg`'s, replaced on reload.
    policy: std::sync::RwLock<Config>,
    stats: crate::stats::Stats,
    pool: Pool,
    /// Every budget a request's cost is taken from before it is spent.
    admission: Admission,
    /// A tenant can fail runs at will: logged at most once a second.
    failed_run_log: crate::admit::Throttle,
    /// The per-worker cgroup limit in force (0: none).
    cgroup_bytes: u64,
    /// The hide store, when the daemon has one.
    store: Option<Arc<jqjail_store::Store>>,
    /// Wakes the hide-expiry sweep (after a reload, so a new age limit applies at once).
    expire_now: tokio::sync::Notify,
}

/// Serves `listener` until `shutdown` completes (or, with `idle_exit` set, until no client has
/// been connected for that long), then stops accepting, lets in-flight requests finish within
/// the drain timeout. Idle workers die with the pool: each is killed and reaped when its handle
/// is dropped, and by its parent-death signal should the daemon die first.
pub async fn serve(
    listener: UnixListener,
    cfg: Config,
    program: Program,
    store: Option<Arc<jqjail_store::Store>>,
    shutdown: impl Future<Output = ()>,
    reload: Option<Reload>,
) -> std::io::Result<()> {
    let startup = StartupArgs {
        parent_pid: std::process::id(),
        heap_bytes: cfg.limits.max_heap_bytes,
        cpu_seconds: cfg.cpu_seconds,
        max_input_bytes: cfg.limits.max_input_bytes,
        max_filter_bytes: cfg.limits.max_filter_bytes,
        isolation: cfg.isolation,
        uid: cfg.worker_uids.first,
    };
    let launcher = Launcher::new(cfg.worker_start, program, cfg.worker_uids);
    let startup = negotiate_isolation(&launcher, startup).await;
    let cgroup = match cfg.cgroup_limit() {
        0 => None,
        limit => match CgroupParent::create(limit) {
            Ok(parent) => {
                tracing::info!(
                    limit_bytes = limit,
                    "each worker gets its own memory cgroup"
                );
                Some(Arc::new(parent))
            }
            Err(why) => {
                tracing::warn!(reason = %why, "per-worker memory cgroups unavailable; RLIMIT_DATA alone bounds the heap");
                None
            }
        },
    };
    tracing::info!(
        workers = %launcher.describe(),
        limits = ?cfg.limits,
        stack_bytes = cfg.stack_bytes,
        cpu_seconds = cfg.cpu_seconds,
        prestart = cfg.prestart,
        max_concurrent = cfg.max_concurrent,
        "jqjaild ready"
    );
    crate::systemd::notify("READY=1");
    let pool = Pool::start(PoolConfig {
        launcher,
        startup,
        prestart: cfg.prestart,
        max_concurrent: cfg.max_concurrent,
        cgroup: cgroup.clone(),
    });
    let shared = Arc::new(Shared {
        policy: std::sync::RwLock::new(cfg.clone()),
        stats: crate::stats::Stats::default(),
        admission: Admission::new(&cfg),
        failed_run_log: Default::default(),
        cfg,
        pool,
        cgroup_bytes: cgroup.as_ref().map_or(0, |c| c.limit_bytes()),
        store,
        expire_now: tokio::sync::Notify::new(),
    });
    spawn_expiry(&shared);
    if let Some(reload) = reload {
        spawn_reload(&shared, reload);
    }
    listen(listener, shared, shutdown).await;
    Ok(())
}

/// The listener: accepts connections (each admitted by its uid), exits after the idle-exit
/// period when configured, and on `shutdown` stops accepting and drains: in-flight requests get
/// the drain timeout, then the rest are aborted and the pool closed.
async fn listen(listener: UnixListener, shared: Arc<Shared>, shutdown: impl Future<Output = ()>) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    let mut idle_since = Instant::now();
    loop {
        let idle_tick = tokio::time::sleep(Duration::from_millis(250));
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _addr)) => {
                    // The peer's uid is known before any of its bytes is read; a peer whose
                    // credentials cannot be learned is not admitted at all.
                    let admitted = match stream.peer_cred() {
                        Ok(cred) => shared.admission.slots.take(cred.uid()).map(|slot| (cred, slot)).map_err(|full| (Some(cred.uid()), full)),
                        Err(_) => Err((None, crate::admit::Full::NoCredentials)),
                    };
                    match admitted {
                        Ok((cred, slot)) => {
                            let shared = shared.clone();
                            let stop = stop_rx.clone();
                            let session = Session { uid: cred.uid(), gid: cred.gid() };
                            tasks.spawn(async move {
                                connection(stream, session, &shared, stop).await;
                                drop(slot);
                            });
                        }
                        Err((uid, full)) => {
                            if let Some(held_back) = shared.admission.full_log.allow() {
                                tracing::warn!(uid, ?full, held_back, "connection limit reached; closing new connections");
                            }
                            drop(stream);
                        }
                    }
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::error!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = idle_tick => {
                if shared.admission.slots.open() > 0 {
                    idle_since = Instant::now();
                } else if shared.cfg.idle_exit.is_some_and(|d| idle_since.elapsed() >= d) {
                    tracing::info!("no client for the idle-exit period; exiting");
                    break;
                }
            }
        }
    }
    drop(listener);
    crate::systemd::notify("STOPPING=1");
    let in_flight = tasks.len();
    tracing::info!(
        connections = in_flight,
        "shutting down: draining in-flight requests"
    );
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(shared.cfg.drain_timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            remaining = tasks.len(),
            "drain timeout passed; aborting remaining connections"
        );
        tasks.shutdown().await;
    }
    shared.pool.close();
}

/// The hide-expiry sweep. The age limit also applies on every put; this sweep (at start,
/// every [`EXPIRE_EVERY`] and after a reload) catches tenants that stopped putting, so their
/// old hides do not stay on disk for ever.
fn spawn_expiry(shared: &Arc<Shared>) {
    if let Some(store) = shared.store.clone() {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EXPIRE_EVERY);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shared.expire_now.notified() => {}
                }
                let max_age = shared
                    .policy
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .hides
                    .max_age;
                let Some(max_age) = max_age else { continue };
                let store = store.clone();
                match tokio::task::spawn_blocking(move || store.expire(max_age)).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!(expired = n, "hides past the age limit deleted"),
                    Ok(Err(e)) => tracing::error!(error = %e, "hide expiry failed"),
                    Err(e) => tracing::error!(error = %e, "hide expiry task failed"),
                }
            }
        });
    }
}

/// SIGHUP: rereads the configuration and applies its tenant policy to new and open
/// connections; a configuration that does not load keeps the running one.
fn spawn_reload(shared: &Arc<Shared>, reload: Reload) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hup.recv().await.is_some() {
            match reload() {
                Ok(cfg) => {
                    let tenants = cfg.tenants.rules.len();
                    *shared.policy.write().unwrap_or_else(|e| e.into_inner()) = cfg;
                    shared.expire_now.notify_one();
                    tracing::info!(
                        tenant_rules = tenants,
                        "SIGHUP: tenant configuration reloaded"
                    );
                }
                Err(why) => {
                    tracing::error!(reason = %why, "SIGHUP: configuration not reloaded; keeping the running one")
                }
            }
        }
    });
}

/// Largest first frame: a hello, a few dozen bytes in practice. A peer cannot make the daemon
/// hold more than this before the handshake.
pub const MAX_HELLO_FRAME_BYTES: u64 = 4096;

/// How long a refused peer has to send the first bytes that show its encoding.
const REFUSAL_PEEK: Duration = Duration::from_secs(1);

/// The encoding of a refused peer's first frame, from at most its first five bytes (the length
/// prefix and the body's first byte), waiting at most [`REFUSAL_PEEK`]; bincode if they do not
/// come.
async fn peek_encoding<R: AsyncRead + Unpin>(rd: &mut R) -> Encoding {
    let mut first = [0u8; PREFIX_BYTES + 1];
    match tokio::time::timeout(REFUSAL_PEEK, rd.read_exact(&mut first)).await {
        Ok(Ok(_)) => Encoding::detect(&first[PREFIX_BYTES..]),
        _ => Encoding::Bincode,
    }
}

/// Why a connection's read loop ended.
enum End {
    Closed,
    Idle,
    Stopped,
    /// A frame's announced length, and the maximum it is over.
    TooLarge(u64, u64),
    /// A frame whose bytes could not be budgeted within the frame timeout: answered, then
    /// closed (its body was not read).
    Refused(Box<ErrorReply>),
    Broken(String),
}

/// One control frame, read whole.
struct Frame {
    body: Vec<u8>,
    /// By when the frame's tail, if it has one, must have come (the frame timeout from its
    /// first byte).
    arrive_by: Instant,
    /// The memory the body holds, from the uid's budget: taken before the body is allocated,
    /// and grown to the decoded request's (and a tail read whole) before the request is kept.
    held: Held,
}

/// Reads one control frame: waits up to `idle` for its first byte (or for `stop`), then up to
/// `frame_timeout` for the rest. The length is checked against `max`, and taken from the uid's
/// memory budget, before the body is allocated.
async fn next_frame<R: AsyncRead + Unpin>(
    rd: &mut R,
    shared: &Shared,
    uid: u32,
    stop: &mut watch::Receiver<bool>,
    idle: Duration,
    max: u64,
) -> Result<Frame, End> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let first = tokio::select! {
        biased;
        _ = stop.wait_for(|s| *s) => return Err(End::Stopped),
        r = tokio::time::timeout(idle, rd.read(&mut prefix[..1])) => r,
    };
    match first {
        Err(_) => return Err(End::Idle),
        Ok(Ok(0)) => return Err(End::Closed),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(End::Broken(e.to_string())),
    }
    let arrive_by = Instant::now() + shared.cfg.frame_timeout;
    let late = || {
        End::Broken(format!(
            "frame not completed within {} ms",
            shared.cfg.frame_timeout.as_millis()
        ))
    };
    match tokio::time::timeout_at(arrive_by.into(), rd.read_exact(&mut prefix[1..])).await {
        Err(_) => return Err(late()),
        Ok(Err(e)) => return Err(End::Broken(e.to_string())),
        Ok(Ok(_)) => {}
    }
    let len = u64::from(u32::from_le_bytes(prefix));
    if len > max {
        return Err(End::TooLarge(len, max));
    }
    // Every request frame's bytes are budgeted from the first: many small frames are as much
    // memory as a few large ones. A frame that cannot be budgeted by its deadline is answered,
    // unread, and its connection closed. (A hello is not: at most 4 KiB, once per connection,
    // it is bounded by the connection slots, and never waits behind the uid's requests.)
    let mut held = Held::default();
    if max > MAX_HELLO_FRAME_BYTES
        && let Err(e) = shared
            .admission
            .memory(uid, &mut held, len, arrive_by)
            .await
    {
        return Err(End::Refused(e));
    }
    let mut body = vec![0u8; len as usize];
    match tokio::time::timeout_at(arrive_by.into(), rd.read_exact(&mut body)).await {
        Err(_) => Err(late()),
        Ok(Err(e)) => Err(End::Broken(e.to_string())),
        Ok(Ok(_)) => Ok(Frame {
            body,
            arrive_by,
            held,
        }),
    }
}

/// What a handler answers: a response whose tail, if it has one, is in it, or (for a whole
/// hide) is read from the hide's file as it is written, never held whole.
pub(crate) struct Reply {
    pub(crate) response: Response,
    pub(crate) file: Option<std::fs::File>,
    /// The turns this reply holds until it is written.
    turns: Vec<Turn>,
}

impl From<Response> for Reply {
    fn from(response: Response) -> Self {
        Reply {
            response,
            file: None,
            turns: Vec::new(),
        }
    }
}

fn error(e: ErrorReply) -> Reply {
    Reply::from(Response::Error(e))
}

/// Sends one response: its frame, then its tail. A response the client does not take within
/// the frame timeout ends the connection (`false`), so an answer nobody reads holds its
/// memory and its file no longer than that.
async fn send<W: AsyncWrite + Unpin>(
    wr: &mut W,
    enc: Encoding,
    reply: Reply,
    shared: &Shared,
) -> bool {
    let Reply {
        response,
        file,
        turns: _turns,
    } = reply;
    // Every field is text or a number, so encoding cannot fail in practice; if it did, the
    // request still gets one answer, and the stream stays in step (no tail follows it).
    let (body, response, file) = match enc.encode(&response) {
        Ok(body) => (body, response, file),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode a response");
            let e = Response::Error(ErrorReply::new(
                ErrorCode::Internal,
                format!("the answer could not be encoded: {e}"),
            ));
            match enc.encode(&e) {
                Ok(body) => (body, e, None),
                Err(_) => return false,
            }
        }
    };
    let tail = response.tail();
    let write = async {
        match (tail, file) {
            // A tail in memory goes with its frame (small ones in one write).
            (Some(tail), None) => {
                write_parts(wr, &[&prefix(body.len())?, &body, tail.as_bytes()]).await?
            }
            (None, _) => write_frame(wr, &body).await?,
            (Some(tail), Some(file)) => {
                write_frame(wr, &body).await?;
                let mut from = tokio::fs::File::from_std(file).take(tail.len());
                let copied = tokio::io::copy(&mut from, wr).await?;
                if copied != tail.len() {
                    // The stream cannot be resynchronised: the client sees the connection end
                    // inside the tail, never wrong bytes.
                    return Err(std::io::Error::other(format!(
                        "hide file ended after {copied} of {} bytes",
                        tail.len()
                    )));
                }
            }
        }
        wr.flush().await
    };
    match tokio::time::timeout(shared.cfg.frame_timeout, write).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "an answer could not be written; connection dropped");
            false
        }
        Err(_) => {
            tracing::debug!(
                bytes = body.len() as u64 + tail.map_or(0, |t| t.len()),
                "an answer was not taken within the frame timeout; connection dropped"
            );
            false
        }
    }
}

/// One admitted connection. `session` is the peer as the kernel reported it at accept;
/// nothing the client sends can change it.
async fn connection(
    stream: UnixStream,
    session: Session,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) {
    let (mut rd, mut wr) = stream.into_split();
    if let Err(why) = session.tenant(shared) {
        // Refused before its first frame is read: only enough of it to answer in its encoding.
        if let Some(held_back) = shared.admission.refused_log.allow() {
            tracing::warn!(reason = %why, held_back, "connection refused");
        }
        let enc = peek_encoding(&mut rd).await;
        send(
            &mut wr,
            enc,
            error(ErrorReply::new(ErrorCode::PermissionDenied, why)),
            shared,
        )
        .await;
        return;
    }
    let Some(enc) = handshake(&mut rd, &mut wr, &session, shared, &mut stop).await else {
        return;
    };
    let max_frame = max_request_frame_bytes(shared.cfg.limits.max_filter_bytes);
    loop {
        let frame = match next_frame(
            &mut rd,
            shared,
            session.uid,
            &mut stop,
            shared.cfg.idle_timeout,
            max_frame,
        )
        .await
        {
            Ok(frame) => frame,
            Err(end) => return finish(&mut wr, enc, shared, end).await,
        };
        let Frame {
            body,
            arrive_by,
            mut held,
        } = frame;
        let decode = |body: &[u8]| match enc.decode::<Request<'static>>(body) {
            Ok(request) => Ok(request),
            // Whether a tail follows is unknown, so the stream cannot be kept in step.
            Err(e) => Err(Box::new(ErrorReply::new(
                ErrorCode::ProtocolError,
                format!("cannot decode request: {e}; the connection is closed"),
            ))),
        };
        let decoding = shared.admission.decoding(body.len()).await;
        let request = decode(&body);
        drop(decoding);
        let request = match request {
            Ok(request) => request,
            Err(e) => {
                send(&mut wr, enc, error(*e), shared).await;
                return;
            }
        };
        let tail_len = request.tail().map_or(0, Tail::len);
        // The request is kept only once the memory it holds decoded (a frame of many short
        // arguments is many times its wire size), and its tail if read whole, is budgeted.
        // When the budget is spent now, the decoded request is let go while the frame's bytes
        // wait for it, and decoded again.
        let need = request.held_bytes()
            + match tail_len <= READ_WHOLE_TAIL {
                true => tail_len,
                false => 0,
            };
        let kept = match shared.admission.try_memory(session.uid, &mut held, need) {
            Ok(true) => Ok(request),
            Ok(false) => {
                drop(request);
                match shared
                    .admission
                    .memory(session.uid, &mut held, need, arrive_by)
                    .await
                {
                    Ok(()) => {
                        let decoding = shared.admission.decoding(body.len()).await;
                        let again = decode(&body);
                        drop(decoding);
                        match again {
                            Ok(request) => Ok(request),
                            Err(e) => {
                                send(&mut wr, enc, error(*e), shared).await;
                                return;
                            }
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        drop(body);
        // A head that is refused whatever its tail holds (its memory, a tail over the input
        // limit, a filter or labels over theirs) is answered at once, before its tail, which
        // is then skipped within the frame timeout so that the connection stays in step (or
        // is closed, if it never comes).
        let refused = match &kept {
            Err(e) => Some((**e).clone()),
            Ok(request) if tail_len > 0 => check_head(request, tail_len, &shared.cfg.limits),
            Ok(_) => None,
        };
        if let Some(refused) = refused {
            if let (Ok(Request::Run(_)), Ok(tenant)) = (&kept, session.tenant(shared)) {
                shared.stats.record(&tenant.name, Some(refused.code), 0);
            }
            drop((kept, held));
            if !send(&mut wr, enc, error(refused), shared).await {
                return;
            }
            let mut tail = Arriving::new(&mut rd, tail_len, arrive_by).stalls_after(TAIL_STALL);
            match tail.skip_rest().await {
                Ok(()) => continue,
                Err(why) => {
                    tracing::debug!(reason = %why, "connection dropped");
                    return;
                }
            }
        }
        let Ok(request) = kept else {
            unreachable!("a request not kept is refused above")
        };
        let (reply, in_step) = if tail_len > 0 {
            let mut tail = Arriving::new(&mut rd, tail_len, arrive_by).stalls_after(TAIL_STALL);
            let reply = with_tail(request, &mut tail, &session, shared).await;
            // The answer may come before the whole tail did (a refusal, a worker's death):
            // the rest is skipped so that the next frame is read in step.
            let skipped = tail.skip_rest().await;
            (reply, skipped)
        } else {
            (without_tail(request, &session, shared).await, Ok(()))
        };
        let sent = send(&mut wr, enc, reply, shared).await;
        drop(held);
        if !sent {
            return;
        }
        if let Err(why) = in_step {
            tracing::debug!(reason = %why, "connection dropped");
            return;
        }
    }
}

/// The handshake: the first frame fixes the encoding and must be a small hello of a version
/// this server speaks. Returns the encoding, or `None` once the connection is to end.
async fn handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    rd: &mut R,
    wr: &mut W,
    session: &Session,
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
) -> Option<Encoding> {
    let first = match next_frame(
        rd,
        shared,
        session.uid,
        stop,
        shared.cfg.frame_timeout,
        MAX_HELLO_FRAME_BYTES,
    )
    .await
    {
        Ok(frame) => frame.body,
        Err(end) => {
            finish(wr, Encoding::Bincode, shared, end).await;
            return None;
        }
    };
    let enc = Encoding::detect(&first);
    let refusal = match enc.decode::<Request<'_>>(&first) {
        Ok(Request::Hello(hello)) if hello.protocol >= MIN_PROTOCOL_VERSION => {
            let reply = Response::Hello(HelloReply {
                protocol: hello.protocol.min(PROTOCOL_VERSION),
                server: SERVER_NAME.to_string(),
                limits: shared.cfg.limits,
            });
            return send(wr, enc, reply.into(), shared).await.then_some(enc);
        }
        Ok(Request::Hello(hello)) => ErrorReply::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "client speaks protocol {}, this server speaks {MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}",
                hello.protocol
            ),
        ),
        Ok(_) => ErrorReply::new(ErrorCode::ProtocolError, "the first message must be hello"),
        Err(e) => ErrorReply::new(
            ErrorCode::ProtocolError,
            format!("cannot decode hello: {e}"),
        ),
    };
    send(wr, enc, error(refusal), shared).await;
    None
}

/// A streamed tail from a client that sends no byte for this long is cut off: an upload
/// holds an evaluation slot and a worker only while it is actually arriving.
const TAIL_STALL: Duration = Duration::from_secs(5);

/// What can be refused of a request with a tail of `tail_len` bytes before the tail is read:
/// a tail over the input limit, a filter over its limit, a put's labels over the store's. So
/// an oversized head is never held while its tail trickles in, and a put is not written to
/// disk only to be refused.
fn check_head(
    request: &Request<'_>,
    tail_len: u64,
    limits: &jqjail_protocol::Limits,
) -> Option<ErrorReply> {
    if tail_len > limits.max_input_bytes {
        let e = input_too_large(tail_len, limits.max_input_bytes);
        return Some(match request {
            Request::HidePut(_) => ErrorReply {
                message: format!(
                    "hide content is {} bytes, over the {}-byte input limit (a hide is a filter's input)",
                    grouped(tail_len),
                    grouped(limits.max_input_bytes)
                ),
                ..e
            },
            _ => e,
        });
    }
    match request {
        Request::Run(run) if run.filter.len() as u64 > limits.max_filter_bytes => Some(
            filter_too_long(run.filter.len() as u64, limits.max_filter_bytes),
        ),
        Request::Run(run) => args_problem(run.lang, &run.args),
        Request::HidePut(put) => {
            let meta: Vec<(String, String)> = put
                .meta
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            jqjail_store::check_labels(&put.kind, &put.source, &meta)
                .err()
                .map(|e| ErrorReply::new(ErrorCode::InvalidRequest, e.to_string()))
        }
        _ => None,
    }
}

/// Serves a request that has a tail (a run with inline input, a put), reading the tail as
/// it goes: a small one whole first (its memory was budgeted with its head), a large one
/// passed on as it arrives.
async fn with_tail(
    mut request: Request<'_>,
    tail: &mut Arriving<'_>,
    session: &Session,
    shared: &Shared,
) -> Reply {
    let tenant = match session.tenant(shared) {
        Ok(tenant) => tenant,
        Err(why) => return error(ErrorReply::new(ErrorCode::PermissionDenied, why)),
    };
    if tail.len() <= READ_WHOLE_TAIL {
        let bytes = match tail.read_all().await {
            Ok(bytes) => bytes,
            Err(why) => return error(ErrorReply::new(ErrorCode::ProtocolError, why)),
        };
        if let Some(slot) = request.tail_mut() {
            // Cannot fail: `read_all` read exactly the declared length.
            let _ = slot.fill(bytes);
        }
        return answer(request, session, &tenant, shared).await;
    }
    match request {
        Request::Run(run) => {
            // The run takes a worker while its input arrives (and an evaluation slot only
            // once all but its last byte came): a tenant has only so many such turns, so its
            // stalled uploads cannot hold every worker the daemon will start.
            let _turn = match shared.admission.upload(&tenant.name) {
                Ok(turn) => turn,
                Err(e) => return error(*e),
            };
            let (parts, _pending) = RunParts::of(run);
            run_and_record(
                parts,
                Source::Input(JobInput::Stream(tail)),
                shared,
                &tenant,
            )
            .await
            .into()
        }
        Request::HidePut(put) => {
            crate::hides::put_streamed(
                put,
                tail,
                shared.store.as_deref(),
                &tenant,
                (&shared.admission, session.uid),
            )
        }
        .await
        .into(),
        _ => error(ErrorReply::new(
            ErrorCode::Internal,
            "a request kind without a tail had one",
        )),
    }
}

/// Serves a request without a tail.
async fn without_tail(request: Request<'_>, session: &Session, shared: &Shared) -> Reply {
    match session.tenant(shared) {
        Ok(tenant) => answer(request, session, &tenant, shared).await,
        Err(why) => error(ErrorReply::new(ErrorCode::PermissionDenied, why)),
    }
}

/// Who is on a connection, as the kernel reported it at accept.
struct Session {
    uid: u32,
    gid: u32,
}

impl Session {
    /// The peer's tenant under the policy in force now: consulted on every request, so a
    /// reload applies to open connections.
    fn tenant(&self, shared: &Shared) -> Result<TenantOf, String> {
        let uid = self.uid;
        shared
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tenant_of(uid, self.gid)
            .ok_or_else(|| format!("uid {uid} is not a tenant of this daemon"))
    }

    /// Root and the daemon's own uid see every tenant's statistics.
    fn admin(&self) -> bool {
        // SAFETY: geteuid cannot fail.
        self.uid == 0 || self.uid == unsafe { libc::geteuid() }
    }
}

/// Answers one request of a tenant, its tail (if any) in hand: one handler per kind of
/// request. The turns its kind costs ([`Costs`]: a large answer, the supervisor's CPU) are
/// taken first, waiting at most the frame timeout, and held until the answer is written.
async fn answer(
    request: Request<'_>,
    session: &Session,
    tenant: &TenantOf,
    shared: &Shared,
) -> Reply {
    let by = Instant::now() + shared.cfg.frame_timeout;
    let taken = match shared
        .admission
        .turns(session.uid, Costs::of(&request), by)
        .await
    {
        Ok(taken) => taken,
        Err(e) => return error(*e),
    };
    let mut reply = answer_kind(request, session, tenant, shared).await;
    // The CPU turn goes once the work is done: a client that does not read its answer holds
    // only the large-answer turn, and the memory, until the write times out.
    drop(taken.supervisor_cpu);
    reply.turns.extend(taken.large_answer);
    reply
}

async fn answer_kind(
    request: Request<'_>,
    session: &Session,
    tenant: &TenantOf,
    shared: &Shared,
) -> Reply {
    match request {
        Request::Run(run) => {
            let (parts, input) = RunParts::of(run);
            let source = match &input {
                Input::Inline(text) | Input::Values { values: text, .. } => {
                    Source::Input(JobInput::Bytes(text.as_bytes()))
                }
                Input::Hide(id) => Source::Hide(id),
            };
            run_and_record(parts, source, shared, tenant).await.into()
        }
        Request::Stats => {
            let (running, waiting) = shared.pool.load();
            let now = crate::stats::Now {
                running: running as u64,
                waiting: waiting as u64,
                connections: shared.admission.slots.open() as u64,
                workers_started: shared.pool.stats.started.load(Ordering::Relaxed),
                worker_start_failures: shared.pool.stats.failed_starts.load(Ordering::Relaxed),
            };
            // Administrators see every tenant's row; a tenant only its own.
            let view = (!session.admin()).then_some(&*tenant.name);
            Response::Stats(shared.stats.snapshot(view, now)).into()
        }
        Request::Hello(_) => error(ErrorReply::new(
            ErrorCode::ProtocolError,
            "hello was already exchanged on this connection",
        )),
        request => crate::hides::handle(request, shared.store.as_deref(), tenant),
    }
}

/// Ends a connection, telling the client why where it is still listening.
async fn finish<W: AsyncWrite + Unpin>(wr: &mut W, enc: Encoding, shared: &Shared, end: End) {
    match end {
        End::Closed | End::Idle | End::Stopped => {}
        End::TooLarge(len, max) => {
            let e = ErrorReply::new(
                ErrorCode::FrameTooLarge,
                format!(
                    "frame of {} bytes is over the {}-byte limit; the connection is closed",
                    grouped(len),
                    grouped(max)
                ),
            )
            .with_limit(max, len);
            send(wr, enc, error(e), shared).await;
        }
        End::Refused(e) => {
            let e = ErrorReply {
                message: format!("{}; the connection is closed", e.message),
                ..*e
            };
            send(wr, enc, error(e), shared).await;
        }
        End::Broken(why) => tracing::debug!(reason = %why, "connection dropped"),
    }
}

/// A run request without its input.
struct RunParts {
    filter: String,
    lang: jqjail_protocol::Lang,
    limits: jqjail_protocol::LimitOverrides,
    on_oversize: OnOversize,
    args: jqjail_protocol::Args,
    outputs: jqjail_protocol::Outputs,
    inputs: jqjail_protocol::worker::Inputs,
}

impl RunParts {
    /// The run's parts, and its input apart.
    fn of(run: jqjail_protocol::RunRequest<'_>) -> (RunParts, Input<'_>) {
        let inputs = match run.input {
            Input::Values { null_input, .. } => {
                jqjail_protocol::worker::Inputs::Values { null_input }
            }
            Input::Inline(_) | Input::Hide(_) => jqjail_protocol::worker::Inputs::One,
        };
        let parts = RunParts {
            filter: run.filter,
            lang: run.lang,
            limits: run.limits,
            on_oversize: run.on_oversize,
            args: run.args,
            outputs: run.outputs,
            inputs,
        };
        (parts, run.input)
    }
}

/// Why a run's arguments are refused, if they are: a bad name, or any argument for the path
/// language (it has no variables). Their values are the worker's to parse.
fn args_problem(lang: jqjail_protocol::Lang, args: &jqjail_protocol::Args) -> Option<ErrorReply> {
    if args.is_empty() {
        return None;
    }
    match lang {
        jqjail_protocol::Lang::Jq => {}
        jqjail_protocol::Lang::Path => {
            return Some(ErrorReply::new(
                ErrorCode::InvalidRequest,
                "the path language has no variables; named and positional arguments are for jq filters",
            ));
        }
        jqjail_protocol::Lang::Shape => {
            return Some(ErrorReply::new(
                ErrorCode::InvalidRequest,
                "a shape request takes no arguments",
            ));
        }
    }
    let problem = args
        .named
        .names()
        .find_map(jqjail_protocol::message::arg_name_problem)?;
    Some(ErrorReply::new(ErrorCode::InvalidRequest, problem))
}

/// Where a run's input comes from.
enum Source<'a, 'b> {
    Input(JobInput<'a, 'b>),
    Hide(&'a str),
}

/// Runs and counts the outcome.
async fn run_and_record(
    parts: RunParts,
    source: Source<'_, '_>,
    shared: &Shared,
    tenant: &TenantOf,
) -> Response {
    let start = Instant::now();
    let response = handle_run(parts, source, shared, tenant).await;
    let error = match &response {
        Response::Error(e) => Some(e.code),
        _ => None,
    };
    shared
        .stats
        .record(&tenant.name, error, start.elapsed().as_micros() as u64);
    response
}

fn input_too_large(len: u64, limit: u64) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::InputTooLarge,
        format!(
            "input is {} bytes, over the {}-byte limit; narrow the tool call that produced it",
            grouped(len),
            grouped(limit)
        ),
    )
    .with_limit(limit, len)
}

fn filter_too_long(len: u64, limit: u64) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::FilterTooLong,
        format!(
            "filter is {} bytes, over the {}-byte limit",
            grouped(len),
            grouped(limit)
        ),
    )
    .with_limit(limit, len)
}

async fn handle_run(
    run: RunParts,
    source: Source<'_, '_>,
    shared: &Shared,
    tenant: &TenantOf,
) -> Response {
    let start = Instant::now();
    match source {
        Source::Input(mut input) => {
            // A client's tail still arriving is an upload; bytes in hand are not.
            let slot = match input {
                JobInput::Stream(_) => SlotWhen::AfterUpload,
                JobInput::Bytes(_) => SlotWhen::Before,
            };
            run_input(run, &mut input, slot, shared, tenant, start).await
        }
        // A hide is read off the disk as the worker takes it, like a streamed inline input.
        Source::Hide(id) => match crate::hides::open_input(shared.store.as_deref(), tenant, id) {
            Ok((len, file)) => {
                let mut file = tokio::fs::File::from_std(file);
                let mut arriving = Arriving::new(&mut file, len, start + shared.cfg.frame_timeout);
                let mut input = JobInput::Stream(&mut arriving);
                run_input(run, &mut input, SlotWhen::Before, shared, tenant, start).await
            }
            Err(e) => Response::Error(*e),
        },
    }
}

async fn run_input(
    run: RunParts,
    input: &mut JobInput<'_, '_>,
    slot: SlotWhen,
    shared: &Shared,
    tenant: &TenantOf,
    start: Instant,
) -> Response {
    let limits = &shared.cfg.limits;
    // A run with an inline input was checked at its head (`check_head`); one over a hide was
    // not.
    let filter_len = run.filter.len() as u64;
    if filter_len > limits.max_filter_bytes {
        return Response::Error(filter_too_long(filter_len, limits.max_filter_bytes));
    }
    if let Some(refused) = args_problem(run.lang, &run.args) {
        return Response::Error(refused);
    }
    let store = shared.store.as_deref();
    // Output over the limit is kept as a hide (up to the input limit, the size of a hide).
    let keep = match (run.on_oversize, store) {
        (OnOversize::Error, _) => None,
        (OnOversize::Hide, Some(store)) => Some((store, run.filter.clone())),
        (OnOversize::Hide, None) => return Response::Error(crate::hides::unavailable()),
    };
    let input_len = input.len();
    // A hide stored under a larger limit than the one now in force.
    if input_len > limits.max_input_bytes {
        return Response::Error(input_too_large(input_len, limits.max_input_bytes));
    }
    let effective = match limits.tightened(&run.limits) {
        Ok(l) => l,
        Err(e) => {
            return Response::Error(
                ErrorReply::new(ErrorCode::InvalidRequest, e.to_string())
                    .with_limit(e.allowed, e.requested),
            );
        }
    };
    let outputs = run.outputs;
    let job = Job {
        args: run.args,
        outputs,
        inputs: run.inputs,
        filter: run.filter,
        lang: run.lang,
        input_bytes: input_len,
        max_depth: effective.max_depth,
        max_output_bytes: match keep {
            Some(_) => effective.max_output_bytes.max(limits.max_input_bytes),
            None => effective.max_output_bytes,
        },
    };
    let ctx = Context {
        killed_for_timeout: false,
        timeout_ms: effective.timeout_ms,
        heap_bytes: limits.max_heap_bytes,
        cpu_seconds: shared.cfg.cpu_seconds,
        cgroup_bytes: shared.cgroup_bytes,
    };
    let deadline = start + Duration::from_millis(effective.timeout_ms);
    let outcome = shared
        .pool
        .execute(&job, input, deadline, ctx, tenant, slot)
        .await;
    let mut cost = Cost {
        wall_us: start.elapsed().as_micros() as u64,
        cpu_us: outcome.cpu.as_micros() as u64,
        peak_rss_bytes: outcome.peak_rss_bytes,
        input_bytes: input_len,
        output_bytes: 0,
    };
    match outcome.result {
        Ok(output) if output.len() as u64 > effective.max_output_bytes => {
            // The pool refuses a worker's output over the job's limit, which is the request's
            // own limit unless the output is to be kept.
            let Some((store, filter)) = keep else {
                let e = ErrorReply::new(
                    ErrorCode::WorkerCrashed,
                    "the worker answered more than the output limit",
                );
                return Response::Error(e);
            };
            cost.output_bytes = output.len() as u64;
            // A hide is one JSON value: outputs asked for as lines are kept as an array of
            // them (each line is one compact JSON text, which holds no raw newline).
            let kept = match outputs {
                jqjail_protocol::Outputs::Lines => {
                    let body = output.strip_suffix('\n').unwrap_or(&output);
                    format!("[{}]", body.replace('\n', ","))
                }
                jqjail_protocol::Outputs::Collapsed => output,
            };
            match crate::hides::keep_output(store, tenant, &filter, kept.as_bytes()) {
                Ok((entry, first)) => Response::Hidden(HiddenReply { entry, first, cost }),
                Err(mut e) => {
                    e.cost = Some(cost);
                    Response::Error(*e)
                }
            }
        }
        Ok(output) => {
            cost.output_bytes = output.len() as u64;
            tracing::debug!(
                wall_us = cost.wall_us,
                cpu_us = cost.cpu_us,
                input_bytes = input_len,
                output_bytes = cost.output_bytes,
                "run ok"
            );
            Response::Run(RunReply {
                output: output.into(),
                cost,
            })
        }
        Err(mut e) => {
            // A tenant can fail runs at will: logged at info at most once a second.
            match shared.failed_run_log.allow() {
                Some(held_back) => {
                    tracing::info!(tenant = %tenant.name, code = %e.code, wall_us = cost.wall_us, cpu_us = cost.cpu_us, peak_rss_bytes = cost.peak_rss_bytes, held_back, "run failed")
                }
                None => tracing::debug!(tenant = %tenant.name, code = %e.code, "run failed"),
            }
            e.cost = Some(cost);
            Response::Error(e)
        }
    }
}
