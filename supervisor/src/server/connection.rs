//! A connection: the handshake, then per request its control frame (read by
//! `frames::next_frame`, budgeted from its first byte, decoded here and budgeted at its decoded
//! size), the checks of its head, its tail (read whole or streamed), and the handler's answer,
//! written by `reply::send`. Imports go one way: this module uses `frames`, `reply` and
//! `handlers`; the handlers use `reply`, never this module.

use super::frames::{
    End, Frame, MAX_HELLO_FRAME_BYTES, body_encoding, finish, next_frame, peek_encoding,
};
use super::handlers::{self, check_head};
use super::reply::{Reply, Session, error, send};
use super::shared::{SERVER_NAME, Shared, TAIL_STALL};

use crate::arriving::Arriving;
use crate::config::TenantOf;
use crate::tenant::READ_WHOLE_TAIL;
use jqjail_protocol::frame::max_request_frame_bytes;
use jqjail_protocol::{
    Encoding, ErrorCode, ErrorReply, HelloReply, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, Request,
    Response, Tail,
};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::net::UnixStream;
use tokio::sync::watch;

/// What one read of a connection takes at most: a small request's length prefix, frame and
/// tail come in one system call, where reading them where they lie took four. Allocated per
/// connection and so bounded by the connection slots, as the hello is; a read larger than it
/// (a large tail's chunks) bypasses it once it is empty.
pub(crate) const READ_BUFFER_BYTES: usize = 4096;

/// One admitted connection. `session` is the peer as the kernel reported it at accept;
/// nothing the client sends can change it.
pub(crate) async fn connection(
    stream: UnixStream,
    session: Session,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) {
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(READ_BUFFER_BYTES, rd);
    if let Err(why) = session.tenant(shared) {
        // Refused before its first frame is read: only enough of it to answer in its encoding
        // is taken (at most the read buffer's 4 KiB of what it sent is pulled in).
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
        // The request's tenant, under the policy in force now (a reload applies to open
        // connections), looked up once: every step below is given it.
        let tenant = session.tenant(shared);
        let refused = match (&kept, &tenant) {
            (Err(e), _) => Some((**e).clone()),
            (Ok(_), Err(why)) => Some(ErrorReply::new(ErrorCode::PermissionDenied, why.clone())),
            (Ok(request), Ok(_)) if tail_len > 0 => {
                check_head(request, tail_len, &shared.cfg.limits)
            }
            (Ok(_), Ok(_)) => None,
        };
        if let Some(refused) = refused {
            if let (Ok(Request::Run(run)), Ok(tenant)) = (&kept, &tenant) {
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
        let (Ok(request), Ok(tenant)) = (kept, tenant) else {
            unreachable!("a request not kept, or of no tenant, is refused above")
        };
        let (reply, in_step) = if tail_len > 0 {
            let mut tail = Arriving::new(&mut rd, tail_len, arrive_by).from_a_peer(TAIL_STALL);
            let reply = with_tail(request, &mut tail, &session, &tenant, shared).await;
            // The answer may come before the whole tail did (a refusal, a worker's death):
            // the rest is skipped so that the next frame is read in step.
            let skipped = tail.skip_rest().await;
            (reply, skipped)
        } else {
            let reply = handlers::answer(request, &session, &tenant, shared).await;
            (reply, Ok(()))
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

/// Serves a request that has a tail (a run with inline input, a put), reading the tail as
/// it goes: a small one whole first (its memory was budgeted with its head), a large one
/// passed on as it arrives.
pub(crate) async fn with_tail(
    mut request: Request<'_>,
    tail: &mut Arriving<'_>,
    session: &Session,
    tenant: &TenantOf,
    shared: &Shared,
) -> Reply {
    if tail.len() <= READ_WHOLE_TAIL {
        let bytes = match tail.read_all().await {
            Ok(bytes) => bytes,
            Err(why) => return error(ErrorReply::new(ErrorCode::ProtocolError, why)),
        };
        if let Some(slot) = request.tail_mut() {
            // Cannot fail: `read_all` read exactly the declared length.
            let _ = slot.fill(bytes);
        }
        return handlers::answer(request, session, tenant, shared).await;
    }
    handlers::streamed(request, tail, session, tenant, shared).await
}
