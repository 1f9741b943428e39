//! A connection: the handshake, then per request its control frame (budgeted from its first
//! byte, decoded, budgeted at its decoded size), its tail (read whole or streamed), the
//! handler's answer and `send`, which writes the frame and then the tail.

use super::handlers::{self, args_problem, filter_too_long, input_too_large};
use super::{SERVER_NAME, Shared, TAIL_STALL};

use crate::admit::Turn;
use crate::arriving::Arriving;
use crate::config::TenantOf;
use crate::pace::due;
use crate::tenant::{Held, READ_WHOLE_TAIL};
use jqjail_protocol::frame::prefix;
use jqjail_protocol::frame::tokio_io::{write_frame, write_parts};
use jqjail_protocol::frame::{PREFIX_BYTES, max_request_frame_bytes};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::{
    Encoding, ErrorCode, ErrorReply, HelloReply, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, Request,
    Response, Tail,
};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::watch;
/// Largest first frame: a hello, a few dozen bytes in practice. A peer cannot make the daemon
/// hold more than this before the handshake.
pub(super) const MAX_HELLO_FRAME_BYTES: u64 = 4096;

/// How long a refused peer has to send the first bytes that show its encoding.
pub(crate) const REFUSAL_PEEK: Duration = Duration::from_secs(1);

/// The encoding of a refused peer's first frame, from at most its first five bytes (the length
/// prefix and the body's first byte), waiting at most [`REFUSAL_PEEK`]; bincode if they do not
/// come.
pub(crate) async fn peek_encoding<R: AsyncRead + Unpin>(rd: &mut R) -> Encoding {
    body_encoding(rd, PREFIX_BYTES).await
}

/// The encoding a frame's body's first byte tells, read after the `prefix_unread` bytes of
/// its length prefix not yet read, waiting at most [`REFUSAL_PEEK`]; bincode if they do not
/// come.
async fn body_encoding<R: AsyncRead + Unpin>(rd: &mut R, prefix_unread: usize) -> Encoding {
    let mut first = [0u8; PREFIX_BYTES + 1];
    let wanted = &mut first[..prefix_unread + 1];
    match tokio::time::timeout(REFUSAL_PEEK, rd.read_exact(wanted)).await {
        Ok(Ok(_)) => Encoding::detect(&wanted[prefix_unread..]),
        _ => Encoding::Bincode,
    }
}

/// Why a connection's read loop ended.
pub(crate) enum End {
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
pub(crate) struct Frame {
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
pub(crate) async fn next_frame<R: AsyncRead + Unpin>(
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
    // Its memory is held from here: the body must come at the pace (`pace.rs`).
    let body_by = crate::pace::due(Instant::now(), len, arrive_by);
    let mut body = vec![0u8; len as usize];
    match tokio::time::timeout_at(body_by.into(), rd.read_exact(&mut body)).await {
        Err(_) if body_by < arrive_by => Err(End::Broken(format!(
            "a frame of {len} bytes did not come at the minimum pace ({})",
            crate::pace::rule()
        ))),
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
    pub(crate) turns: Vec<Turn>,
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

pub(crate) fn error(e: ErrorReply) -> Reply {
    Reply::from(Response::Error(e))
}

/// Sends one response: its frame, then its tail. A response the client does not take at the
/// minimum pace (`pace.rs`), or within the frame timeout in all, ends the connection
/// (`false`), so an answer nobody reads holds its memory, its file and its turn no longer
/// than that.
pub(crate) async fn send<W: AsyncWrite + Unpin>(
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
    // The answer must be taken at the pace (`pace.rs`), and within the frame timeout in all.
    let start = Instant::now();
    let cap = start + shared.cfg.frame_timeout;
    let write = async {
        let late = || std::io::Error::from(std::io::ErrorKind::TimedOut);
        match (tail, file) {
            // A tail in memory goes with its frame (small ones in one write).
            (Some(tail), None) => {
                let all = body.len() as u64 + tail.len();
                let parts = [&prefix(body.len())?[..], &body, tail.as_bytes()];
                tokio::time::timeout_at(due(start, all, cap).into(), write_parts(wr, &parts))
                    .await
                    .map_err(|_| late())??
            }
            (None, _) => tokio::time::timeout_at(
                due(start, body.len() as u64, cap).into(),
                write_frame(wr, &body),
            )
            .await
            .map_err(|_| late())??,
            (Some(tail), Some(file)) => {
                tokio::time::timeout_at(
                    due(start, body.len() as u64, cap).into(),
                    write_frame(wr, &body),
                )
                .await
                .map_err(|_| late())??;
                // A whole hide, a chunk at a time, each taken within what the pace has left
                // (only the time spent waiting for the client to take it counts, not the
                // file's reads).
                let mut from = tokio::fs::File::from_std(file).take(tail.len());
                let mut buf = vec![0u8; 64 * 1024];
                let mut copied = 0u64;
                let mut pace = crate::pace::Pace::default();
                loop {
                    let n = from.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    let now = Instant::now();
                    let by = (now + pace.allowed()).min(cap);
                    tokio::time::timeout_at(by.into(), wr.write_all(&buf[..n]))
                        .await
                        .map_err(|_| late())??;
                    pace.moved(n as u64, now.elapsed());
                    copied += n as u64;
                }
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
        tokio::time::timeout_at(cap.into(), wr.flush())
            .await
            .map_err(|_| late())?
    };
    match write.await.map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut => None,
        _ => Some(e),
    }) {
        Ok(()) => true,
        Err(Some(e)) => {
            tracing::debug!(error = %e, "an answer could not be written; connection dropped");
            false
        }
        Err(None) => {
            tracing::debug!(
                bytes = body.len() as u64 + tail.map_or(0, |t| t.len()),
                "an answer was not taken at the minimum pace or within the frame timeout; connection dropped"
            );
            false
        }
    }
}

/// One admitted connection. `session` is the peer as the kernel reported it at accept;
/// nothing the client sends can change it.
pub(crate) async fn connection(
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
            if let (Ok(Request::Run(run)), Ok(tenant)) = (&kept, session.tenant(shared)) {
                shared
                    .stats
                    .record(&tenant.name, run.lang, Some(refused.code), 0);
            }
            drop((kept, held));
            if !send(&mut wr, enc, error(refused), shared).await {
                return;
            }
            let mut tail = Arriving::new(&mut rd, tail_len, arrive_by).from_a_peer(TAIL_STALL);
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
            let mut tail = Arriving::new(&mut rd, tail_len, arrive_by).from_a_peer(TAIL_STALL);
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
pub(crate) async fn handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
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
            // An oversized hello is answered in the encoding its body's first byte tells, when
            // that byte comes within a second: a JSON-only client never needs bincode.
            let enc = match end {
                End::TooLarge(..) => body_encoding(rd, 0).await,
                _ => Encoding::Bincode,
            };
            finish(wr, enc, shared, end).await;
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

/// What can be refused of a request with a tail of `tail_len` bytes before the tail is read:
/// a tail over the input limit, a filter over its limit, a put's labels over the store's. So
/// an oversized head is never held while its tail trickles in, and a put is not written to
/// disk only to be refused.
pub(crate) fn check_head(
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
        // Every kind named: a new one is a compile error here until its head's checks are.
        Request::Hello(_)
        | Request::Stats
        | Request::HideGet(_)
        | Request::HideCut(_)
        | Request::HideSearch(_)
        | Request::HideList(_)
        | Request::HideDelete(_)
        | Request::HideUsage => None,
    }
}

/// Serves a request that has a tail (a run with inline input, a put), reading the tail as
/// it goes: a small one whole first (its memory was budgeted with its head), a large one
/// passed on as it arrives.
pub(crate) async fn with_tail(
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
        return handlers::answer(request, session, &tenant, shared).await;
    }
    handlers::streamed(request, tail, session, &tenant, shared).await
}

/// Serves a request without a tail.
pub(crate) async fn without_tail(
    request: Request<'_>,
    session: &Session,
    shared: &Shared,
) -> Reply {
    match session.tenant(shared) {
        Ok(tenant) => handlers::answer(request, session, &tenant, shared).await,
        Err(why) => error(ErrorReply::new(ErrorCode::PermissionDenied, why)),
    }
}

/// Who is on a connection, as the kernel reported it at accept.
pub(crate) struct Session {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Session {
    /// The peer's tenant under the policy in force now: consulted on every request, so a
    /// reload applies to open connections.
    pub(crate) fn tenant(&self, shared: &Shared) -> Result<TenantOf, String> {
        let uid = self.uid;
        shared
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tenant_of(uid, self.gid)
            .ok_or_else(|| format!("uid {uid} is not a tenant of this daemon"))
    }

    /// Root and the daemon's own uid see every tenant's statistics.
    pub(crate) fn admin(&self) -> bool {
        // SAFETY: geteuid cannot fail.
        self.uid == 0 || self.uid == unsafe { libc::geteuid() }
    }
}

/// Ends a connection, telling the client why where it is still listening.
pub(crate) async fn finish<W: AsyncWrite + Unpin>(
    wr: &mut W,
    enc: Encoding,
    shared: &Shared,
    end: End,
) {
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
