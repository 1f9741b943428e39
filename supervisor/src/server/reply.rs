//! What a handler answers and how it is written: [`Reply`] (a response, a hide's file to
//! stream as its tail, the turns held until it is written), [`send`] at the minimum pace, and
//! the [`Session`] a request comes in.

use super::shared::Shared;
use crate::admit::Turn;
use crate::config::TenantOf;
use crate::pace::due;
use jqjail_protocol::frame::prefix;
use jqjail_protocol::frame::tokio_io::{write_frame, write_parts};
use jqjail_protocol::{Encoding, ErrorCode, ErrorReply, Response};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

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
