//! A bound on the large requests `jqjail mcp` holds at once.
//!
//! rmcp reads every line as it comes and starts a task for each request, which holds the
//! parsed message while the call waits its turn (the daemon connection is one at a time). A
//! client that sends large calls without waiting for answers made it hold them all: 25 of
//! 2 MB, each parsed to about 125 MB, took 3.1 GiB (issue 34, the second attacker). The guard
//! charges each request over [`TRACKED`] bytes (its line and its parsed cost) to an
//! [`Inflight`] by its `id`, and stops reading at a line's start while more than
//! [`MAX_INFLIGHT`] is charged; [`Answers`], on stdout, gives a charge back when the answer with
//! that `id` is written, and the guard gives it back when the client cancels it. So what the
//! server holds is [`MAX_INFLIGHT`] and one message, however many are sent. Small requests are
//! never held back.

use super::guard::{HEAD_BYTES, id_and_method};
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncWrite;

/// What the large requests passed and not yet answered may cost in all, before the next line
/// is read.
pub(crate) const MAX_INFLIGHT: usize = 64 << 20;

/// Requests that cost less than this are not charged: they never wait.
pub(crate) const TRACKED: usize = 1 << 20;

/// The charges of the large requests passed to rmcp and not yet answered.
#[derive(Debug, Default)]
pub(crate) struct Inflight(Mutex<Held>);

#[derive(Debug, Default)]
struct Held {
    bytes: usize,
    /// Each id's charges (a client may reuse an id), newest last.
    by_id: HashMap<String, Vec<usize>>,
    /// The guard, waiting for room.
    waker: Option<Waker>,
}

impl Inflight {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Charges `cost` to the request with raw `id`, if it is one an answer can name.
    pub(crate) fn charge(&self, id: &[u8], cost: usize) {
        if let Some(key) = key(id) {
            let mut held = self.held();
            held.bytes += cost;
            held.by_id.entry(key).or_default().push(cost);
        }
    }

    /// Gives back a charge of the request with raw `id` (answered or cancelled), and wakes the
    /// guard.
    pub(crate) fn release(&self, id: &[u8]) {
        let Some(key) = key(id) else { return };
        let mut held = self.held();
        let Some(costs) = held.by_id.get_mut(&key) else {
            return;
        };
        let cost = costs.pop().unwrap_or(0);
        if costs.is_empty() {
            held.by_id.remove(&key);
        }
        held.bytes -= cost;
        if let Some(waker) = held.waker.take() {
            waker.wake();
        }
    }

    /// Whether the next line must wait.
    pub(crate) fn is_full(&self) -> bool {
        self.held().bytes > MAX_INFLIGHT
    }

    /// Whether the next line must wait; if so, the guard is woken when a charge goes.
    pub(crate) fn full(&self, cx: &Context<'_>) -> bool {
        let mut held = self.held();
        let full = held.bytes > MAX_INFLIGHT;
        if full {
            held.waker = Some(cx.waker().clone());
        }
        full
    }
}

/// An id as an answer names it: rmcp reads a number as an i64 and writes it back plainly, and
/// a string as itself (escaped its own way). Other ids are not tracked.
fn key(raw: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(raw).ok()? {
        Value::Number(n) => n.as_i64().map(|n| format!("n{n}")),
        Value::String(s) => Some(format!("s{s}")),
        _ => None,
    }
}

/// The `requestId` of a `notifications/cancelled` line that fits in its head.
pub(crate) fn cancelled(line: &[u8]) -> Option<Vec<u8>> {
    let message: Value = serde_json::from_slice(line).ok()?;
    let id = message.get("params")?.get("requestId")?;
    serde_json::to_vec(id).ok()
}

/// stdout, watched for answers: each line written with an `id` and no `method` gives back
/// that request's charge.
pub(crate) struct Answers<W> {
    inner: W,
    inflight: std::sync::Arc<Inflight>,
    /// The first bytes of the line being written.
    head: Vec<u8>,
}

impl<W> Answers<W> {
    pub(crate) fn new(inner: W, inflight: std::sync::Arc<Inflight>) -> Answers<W> {
        Answers {
            inner,
            inflight,
            head: Vec::new(),
        }
    }

    /// Follows `bytes` (just written) for the ends of lines.
    fn saw(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let end = rest.iter().position(|&b| b == b'\n');
            let segment = &rest[..end.unwrap_or(rest.len())];
            if self.head.len() < HEAD_BYTES {
                let n = segment.len().min(HEAD_BYTES - self.head.len());
                self.head.extend_from_slice(&segment[..n]);
            }
            let Some(end) = end else { break };
            if let (Some(id), None) = id_and_method(&self.head) {
                self.inflight.release(id.as_bytes());
            }
            self.head.clear();
            rest = &rest[end + 1..];
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Answers<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.saw(&buf[..n]);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn an_answer_written_gives_back_its_requests_charge() {
        let inflight = Arc::new(Inflight::default());
        inflight.charge(b"7", MAX_INFLIGHT);
        inflight.charge(br#""a\u0062""#, 2);
        let waker = futures_waker();
        let cx = Context::from_waker(&waker);
        assert!(inflight.full(&cx));
        let mut out = Answers::new(Vec::new(), inflight.clone());
        // A request of the server's (an id and a method) gives nothing back; answers do, in
        // pieces and with the id written another way.
        out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",")
            .await
            .unwrap();
        assert!(inflight.full(&cx));
        out.write_all(b"\"id\":7,\"result\":{}}\n{\"id\":\"ab\",\"result\":{}}\n")
            .await
            .unwrap();
        assert!(!inflight.full(&cx));
        assert_eq!(inflight.held().bytes, 0);
        assert!(inflight.held().by_id.is_empty());
        // An answer to nothing charged changes nothing.
        inflight.release(b"9");
        assert_eq!(inflight.held().bytes, 0);
    }

    #[test]
    fn a_cancellation_names_its_request() {
        let line = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x1","reason":"user"}}"#;
        assert_eq!(cancelled(line).as_deref(), Some(&br#""x1""#[..]));
        assert_eq!(cancelled(br#"{"method":"notifications/cancelled"}"#), None);
    }

    fn futures_waker() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        Waker::from(Arc::new(Noop))
    }
}
