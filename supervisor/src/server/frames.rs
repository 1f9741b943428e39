//! Reading a connection's frames: the first bytes that tell a refused peer's encoding, and
//! each control frame, budgeted from its first byte before its body is allocated; and the end
//! of a connection, said to the client where it still listens.

use super::reply::{error, send};
use super::shared::Shared;
use crate::tenant::Held;
use jqjail_protocol::frame::PREFIX_BYTES;
use jqjail_protocol::limits::grouped;
use jqjail_protocol::{Encoding, ErrorCode, ErrorReply};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::watch;

/// Largest first frame: a hello, a few dozen bytes in practice. A peer cannot make the daemon
/// hold more than this, and the connection's read buffer (`connection::READ_BUFFER_BYTES`),
/// before the handshake.
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
pub(crate) async fn body_encoding<R: AsyncRead + Unpin>(
    rd: &mut R,
    prefix_unread: usize,
) -> Encoding {
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
    pub(crate) body: Vec<u8>,
    /// By when the frame's tail, if it has one, must have come (the frame timeout from its
    /// first byte).
    pub(crate) arrive_by: Instant,
    /// The memory the body holds, from the uid's budget: taken before the body is allocated,
    /// and grown to the decoded request's (and a tail read whole) before the request is kept.
    pub(crate) held: Held,
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
