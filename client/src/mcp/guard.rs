//! A bound on one incoming JSON-RPC message that still answers it.
//!
//! rmcp drops a line over its maximum without a word, so a client that sent one waits for ever
//! for its answer. [`Guard`] sits between stdin and rmcp: a line within the bound passes
//! unchanged; a longer one is cut short (rmcp ignores the unparsable rest), skipped to its end,
//! and replaced by a small `tools/call` of [`TOO_LARGE_TOOL`] with the same `id` (read from
//! the line's first [`HEAD_BYTES`]), which the server answers with an `INPUT_TOO_LARGE` tool
//! error at once. A line whose head names no `id` and `tools/call` method cannot be answered
//! (nothing says to whom); it is dropped, and said so on stderr.
//!
//! A line nested deeper than [`MAX_DEPTH`] is treated the same way, cut where it passes the
//! depth: rmcp's JSON parser stops at 128 levels and drops the message without a word (issue
//! 34: a message 200 levels deep left its client waiting for ever). Its stand-in call names
//! the depth.
//!
//! So is a line whose values would cost more than [`MAX_VALUE_BYTES`] to hold. rmcp reads a
//! message three times over, all three alive at once: serde's buffered `Content` tree (the
//! message is an untagged enum), a copy of it for a flattened field, and the
//! `serde_json::Value`. A small value costs hundreds of bytes there: 40 MB of `{"a":1}` took
//! 6.6 GiB (issue 34), 2 MB of `[[1],[1],…]` 321 MiB. The guard charges each value as it
//! passes ([`OBJECT_COST`], [`ARRAY_COST`], [`VALUE_COST`]), and a string with an escape in it
//! (which each tree then holds a decoded copy of) [`OWNED_STRING_COST`] and
//! [`STRING_BYTE_COST`] a byte; a string with none is borrowed from the line by the two
//! `Content` trees and copied once into the `Value`. So one message costs at most twice its
//! bytes plus [`MAX_VALUE_BYTES`], about 5 × the message bound. A document belongs in `input`
//! as one string: 20 MiB of JSON escaped costs 60 MiB.

use super::inflight::{Inflight, TRACKED};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The tool name of the stand-in call for a message over the bound.
pub(crate) const TOO_LARGE_TOOL: &str = "jqjail_message_too_large";

/// Bytes of a line kept to find its `id` and `method`.
pub(crate) const HEAD_BYTES: usize = 4096;

/// Bytes read from the inner reader at a time.
const CHUNK: usize = 64 * 1024;

/// The deepest nesting of arrays and objects a message may have (rmcp's parser, serde_json,
/// refuses past 128).
pub(crate) const MAX_DEPTH: usize = 100;

/// The most a line's values may cost to hold parsed, beyond the line itself: room for the
/// largest input (20 MiB) escaped as a string, at [`STRING_BYTE_COST`], and more.
pub(crate) const MAX_VALUE_BYTES: usize = 128 << 20;

/// What an object costs parsed: two `Content` vectors of 4 members (256 bytes each) and a
/// `Value` B-tree leaf of 11 (632 bytes), with the allocator's share.
pub(crate) const OBJECT_COST: usize = 1280;

/// What an array costs parsed: three vectors of 4 slots (128 bytes each), with the
/// allocator's share (measured: 427 bytes a `[` nested 90 deep).
pub(crate) const ARRAY_COST: usize = 448;

/// What any other value (or an object's member) costs parsed: its 32-byte slot in each of the
/// three trees, doubled for the vectors' growth (measured: 600 bytes a `[1],`).
pub(crate) const VALUE_COST: usize = 192;

/// What a string with an escape in it costs beyond its bytes: a heap copy in each tree, and
/// the allocator's share (measured: 347 bytes a `"\n",`).
pub(crate) const OWNED_STRING_COST: usize = 160;

/// What each byte of a string with an escape in it costs: a decoded copy in each tree.
pub(crate) const STRING_BYTE_COST: usize = 3;

/// Why a line was cut before its end.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Past the byte bound.
    Long,
    /// Nested this deep.
    Deep(usize),
    /// Its values past [`MAX_VALUE_BYTES`].
    Costly,
}

/// Wraps a reader of newline-delimited JSON-RPC messages, bounding each to `max` bytes.
pub(crate) struct Guard<R> {
    inner: R,
    max: usize,
    /// Whether the lines are an upstream server's answers, not a client's requests.
    upstream: bool,
    /// Where large requests are charged until answered (a client's side only).
    inflight: Option<std::sync::Arc<Inflight>>,
    /// Bytes of the current line seen (passed on, or skipped).
    line: usize,
    /// The current line's first bytes.
    head: Vec<u8>,
    /// Whether the current line is over the bound (its rest is skipped).
    skipping: bool,
    /// The current line's nesting as it passes: inside a string, after a backslash in one,
    /// its depth now, what its values cost so far, and why it was cut (if it was).
    in_string: bool,
    escaped: bool,
    /// The current string's bytes so far, and whether it has an escape (is decoded to a copy).
    string_len: usize,
    string_owned: bool,
    depth: usize,
    cost: usize,
    cut: Option<Cut>,
    /// Bytes ready for the reader, from `at`.
    out: Vec<u8>,
    at: usize,
    scratch: Vec<u8>,
    /// Bytes read past a line's end while `inflight` was full: taken once it has room.
    held_back: Vec<u8>,
    /// While `inflight` is full of charges no handler claimed: when the first expires.
    retry: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<R> Guard<R> {
    /// Bounds a client's requests: a cut `tools/call` becomes a call of [`TOO_LARGE_TOOL`].
    pub(crate) fn new(inner: R, max: usize) -> Guard<R> {
        Guard {
            inner,
            max,
            upstream: false,
            inflight: None,
            line: 0,
            head: Vec::new(),
            skipping: false,
            in_string: false,
            escaped: false,
            string_len: 0,
            string_owned: false,
            depth: 0,
            cost: 0,
            cut: None,
            out: Vec::new(),
            at: 0,
            scratch: vec![0; CHUNK],
            held_back: Vec::new(),
            retry: None,
        }
    }

    /// Bounds an upstream server's answers: a cut answer becomes a JSON-RPC error for its
    /// `id`, which the wrapper reports as `UPSTREAM_ERROR`.
    pub(crate) fn upstream(inner: R, max: usize) -> Guard<R> {
        Guard {
            upstream: true,
            ..Guard::new(inner, max)
        }
    }

    /// Charges each large request passed to `inflight`, and reads no further line while it is
    /// full ([`super::inflight`]).
    pub(crate) fn with_inflight(self, inflight: std::sync::Arc<Inflight>) -> Guard<R> {
        Guard {
            inflight: Some(inflight),
            ..self
        }
    }

    /// A line passed whole: a large request is charged until its handler is done.
    fn passed(&self) {
        let Some(inflight) = &self.inflight else {
            return;
        };
        let cost = self.line + self.cost;
        if cost >= TRACKED
            && let (Some(id), Some(_)) = id_and_method(&self.head)
        {
            inflight.charge(id.as_bytes(), cost);
        }
    }

    /// Passes `bytes` (just read) through the bound into `out`.
    fn take(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            // A line ended and the requests passed hold too much: the rest waits.
            if self.line == 0 && self.inflight.as_ref().is_some_and(|i| i.is_full()) {
                self.held_back.extend_from_slice(rest);
                return;
            }
            let (segment, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            rest = &rest[segment.len() + usize::from(newline)..];
            if self.head.len() < HEAD_BYTES {
                let n = segment.len().min(HEAD_BYTES - self.head.len());
                self.head.extend_from_slice(&segment[..n]);
            }
            if !self.skipping {
                let room = self.max - self.line;
                let walked = self.walk(&segment[..segment.len().min(room)]);
                if let Some((at, why)) = walked {
                    // Too deep or too costly for the parser: cut there, as a line over the
                    // bound is.
                    self.out.extend_from_slice(&segment[..at]);
                    self.out.extend_from_slice(b"!\n");
                    self.skipping = true;
                    self.cut = Some(why);
                } else if segment.len() <= room {
                    self.out.extend_from_slice(segment);
                } else {
                    // Over the bound: what rmcp has is cut short here, and the rest skipped.
                    // A byte that no JSON text ends with is put last, so that a cut line is
                    // never read as a message of its own (a call padded with spaces).
                    self.out.extend_from_slice(&segment[..room]);
                    self.out.extend_from_slice(b"!\n");
                    self.skipping = true;
                    self.cut = Some(Cut::Long);
                }
            }
            self.line += segment.len();
            if newline {
                match self.skipping {
                    true => self.stand_in(),
                    false => {
                        self.out.push(b'\n');
                        self.passed();
                    }
                }
                self.line = 0;
                self.head.clear();
                self.skipping = false;
                self.in_string = false;
                self.escaped = false;
                self.string_len = 0;
                self.string_owned = false;
                self.depth = 0;
                self.cost = 0;
                self.cut = None;
            }
        }
    }

    /// Follows the nesting and the values' cost through `bytes` of the current line; the
    /// index of the byte that takes it past [`MAX_DEPTH`] or [`MAX_VALUE_BYTES`], and which,
    /// if one does.
    fn walk(&mut self, bytes: &[u8]) -> Option<(usize, Cut)> {
        for (i, &b) in bytes.iter().enumerate() {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => {
                        self.escaped = false;
                        self.string_len += 1;
                        self.cost += STRING_BYTE_COST;
                    }
                    (false, b'\\') => {
                        self.escaped = true;
                        if !self.string_owned {
                            // From here it is decoded: its bytes so far are copied too.
                            self.string_owned = true;
                            self.cost += OWNED_STRING_COST + STRING_BYTE_COST * self.string_len;
                        }
                    }
                    (false, b'"') => self.in_string = false,
                    _ => {
                        self.string_len += 1;
                        if self.string_owned {
                            self.cost += STRING_BYTE_COST;
                        }
                    }
                }
            } else {
                // Every value but the line's first follows a `[`, a `,` or a `:`; an object
                // or an array costs its vectors besides.
                self.cost += match b {
                    b'{' => OBJECT_COST,
                    b'[' => ARRAY_COST,
                    b',' | b':' => VALUE_COST,
                    _ => 0,
                };
                match b {
                    b'"' => {
                        self.in_string = true;
                        self.string_len = 0;
                        self.string_owned = false;
                    }
                    b'[' | b'{' => {
                        self.depth += 1;
                        if self.depth > MAX_DEPTH {
                            return Some((i, Cut::Deep(self.depth)));
                        }
                    }
                    b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                    _ => {}
                }
            }
            if self.cost > MAX_VALUE_BYTES {
                return Some((i, Cut::Costly));
            }
        }
        None
    }

    /// The stand-in for a line over the bound, too deep or too costly, if it can be answered.
    fn stand_in(&mut self) {
        let (id, method) = id_and_method(&self.head);
        if self.upstream {
            return self.upstream_stand_in(id, method.is_some());
        }
        match (id, method.as_deref()) {
            (Some(id), Some("tools/call")) => {
                let (depth, costly) = match self.cut {
                    Some(Cut::Deep(depth)) => (depth, false),
                    Some(Cut::Costly) => (0, true),
                    Some(Cut::Long) | None => (0, false),
                };
                let call = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{TOO_LARGE_TOOL}","arguments":{{"bytes":{},"limit":{},"depth":{depth},"costly":{costly}}}}}}}"#,
                    self.line, self.max,
                );
                self.out.extend_from_slice(call.as_bytes());
                self.out.push(b'\n');
            }
            _ => eprintln!(
                "jqjail mcp: a message of {} bytes, over the {}-byte limit, nested over {MAX_DEPTH} levels deep or of values costing over {MAX_VALUE_BYTES} bytes, was dropped: its first {HEAD_BYTES} bytes name no id of a tools/call to answer",
                self.line, self.max
            ),
        }
    }
}

impl<R> Guard<R> {
    /// The stand-in for an upstream answer cut short: an error for its `id`. A request or a
    /// notification from upstream cut short is dropped (its sender waits on its own timeout).
    fn upstream_stand_in(&mut self, id: Option<String>, request: bool) {
        let why = match self.cut {
            Some(Cut::Deep(_)) => format!("nested over {MAX_DEPTH} levels deep"),
            Some(Cut::Costly) => format!(
                "of values that would take over {} MiB of memory to read",
                MAX_VALUE_BYTES >> 20
            ),
            Some(Cut::Long) | None => format!(
                "over the {}-byte limit of one message",
                jqjail_protocol::limits::grouped(self.max as u64)
            ),
        };
        match (id, request) {
            (Some(id), false) => {
                let message = format!(
                    "its answer was {} bytes, {why}; jqjail mcp did not read it",
                    jqjail_protocol::limits::grouped(self.line as u64)
                );
                let error = serde_json::json!({"code": -32603, "message": message});
                let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#);
                self.out.extend_from_slice(line.as_bytes());
                self.out.push(b'\n');
            }
            _ => eprintln!(
                "jqjail mcp: a message of {} bytes from the upstream server, {why}, was dropped: it is not an answer with an id",
                self.line
            ),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Guard<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.at);
                buf.put_slice(&this.out[this.at..this.at + n]);
                this.at += n;
                if this.at == this.out.len() {
                    this.out.clear();
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            // At a line's start, while the requests passed hold too much, wait for their
            // handlers to finish (or, for charges none claimed, for them to expire).
            if this.line == 0
                && let Some(inflight) = &this.inflight
                && let Some(until) = inflight.wait(cx)
            {
                if let Some(at) = until {
                    let mut sleep = Box::pin(tokio::time::sleep_until(at.into()));
                    if sleep.as_mut().poll(cx).is_ready() {
                        continue;
                    }
                    this.retry = Some(sleep);
                }
                return Poll::Pending;
            }
            this.retry = None;
            if !this.held_back.is_empty() {
                let bytes = std::mem::take(&mut this.held_back);
                this.take(&bytes);
                continue;
            }
            let mut scratch = std::mem::take(&mut this.scratch);
            let mut read = ReadBuf::new(&mut scratch);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let filled = read.filled().len();
            let result = match polled {
                Poll::Ready(Ok(())) if filled == 0 => Some(Poll::Ready(Ok(()))),
                Poll::Ready(Ok(())) => {
                    let bytes = scratch[..filled].to_vec();
                    this.take(&bytes);
                    None
                }
                other => Some(other),
            };
            this.scratch = scratch;
            if let Some(result) = result {
                return result;
            }
        }
    }
}

/// The raw `id` (a number or a string, as written) and the `method` of a JSON-RPC message,
/// from its first bytes: its top-level members are scanned in order, skipping values, until
/// the bytes end.
pub(crate) fn id_and_method(head: &[u8]) -> (Option<String>, Option<String>) {
    // A byte-order mark is skipped, as rmcp skips it (a cut line that began with one went
    // unanswered).
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut s = Scanner { b: head, i: 0 };
    let (mut id, mut method) = (None, None);
    s.ws();
    if !s.eat(b'{') {
        return (None, None);
    }
    loop {
        s.ws();
        let Some(key) = s.string() else { break };
        s.ws();
        if !s.eat(b':') {
            break;
        }
        s.ws();
        let start = s.i;
        if !s.value() {
            break;
        }
        let raw = &head[start..s.i];
        match key.as_str() {
            // Only an id that is a JSON number or string is put back into the stand-in.
            "id" if serde_json::from_slice::<Value>(raw)
                .is_ok_and(|v| v.is_number() || v.is_string()) =>
            {
                id = std::str::from_utf8(raw).ok().map(str::to_string)
            }
            "method" => {
                method = serde_json::from_slice::<String>(raw).ok();
            }
            _ => {}
        }
        if id.is_some() && method.is_some() {
            break;
        }
        s.ws();
        if !s.eat(b',') {
            break;
        }
    }
    (id, method)
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        let ate = self.b.get(self.i) == Some(&c);
        self.i += usize::from(ate);
        ate
    }

    /// Skips a string; `false` if it does not end within the bytes.
    fn skip_string(&mut self) -> bool {
        if !self.eat(b'"') {
            return false;
        }
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'\\' => self.i += 1,
                b'"' => return true,
                _ => {}
            }
        }
        false
    }

    fn string(&mut self) -> Option<String> {
        let start = self.i;
        self.skip_string()
            .then(|| serde_json::from_slice(&self.b[start..self.i]).ok())
            .flatten()
    }

    /// Skips one value; `false` if it does not end within the bytes.
    fn value(&mut self) -> bool {
        match self.b.get(self.i) {
            Some(b'"') => self.skip_string(),
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(&c) = self.b.get(self.i) {
                    match c {
                        b'"' => {
                            if !self.skip_string() {
                                return false;
                            }
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return true;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                false
            }
            Some(_) => {
                let start = self.i;
                while self
                    .b
                    .get(self.i)
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
                {
                    self.i += 1;
                }
                // A number or word cut by the end of the bytes is not known whole.
                self.i > start && self.i < self.b.len()
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let head = b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\"";
        assert_eq!(
            id_and_method(head),
            (Some("4".to_string()), Some("tools/call".to_string()))
        );
    }

    #[test]
    fn the_id_and_method_are_read_from_the_head() {
        let (id, m) = id_and_method(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"input":"xx"#,
        );
        assert_eq!(
            (id.as_deref(), m.as_deref()),
            (Some("7"), Some("tools/call"))
        );
        // After the params, with an `id` inside them that is not the message's.
        let (id, m) =
            id_and_method(br#"{"method":"tools/call","params":{"id":1,"x":"}"},"id":"a\"b"}"#);
        assert_eq!(
            (id.as_deref(), m.as_deref()),
            (Some(r#""a\"b""#), Some("tools/call"))
        );
        // Cut before the id: unknown.
        let (id, _) = id_and_method(br#"{"method":"tools/call","params":{"input":"xxxx"#);
        assert_eq!(id, None);
        let (id, _) = id_and_method(br#"{"id":12"#);
        assert_eq!(id, None, "a number cut by the end is not known");
        let (id, _) = id_and_method(br#"{"id":12x,"method":"tools/call"}"#);
        assert_eq!(id, None, "an id that is not JSON is not answered to");
    }

    #[tokio::test]
    async fn a_line_over_the_bound_becomes_a_stand_in_call_with_its_id() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"jq","arguments":{{"input":"{}"}}}}}}"#,
            "x".repeat(300_000)
        );
        let text = format!("{{\"a\":1}}\n{big}\n{{\"b\":2}}\n");
        let mut out = String::new();
        Guard::new(text.as_bytes(), 1000)
            .read_to_string(&mut out)
            .await
            .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{:?}", &out[..200]);
        assert_eq!(lines[0], r#"{"a":1}"#);
        assert_eq!(lines[1].len(), 1001);
        assert!(lines[1].ends_with('!'));
        let call: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(call["id"], 3);
        assert_eq!(call["params"]["name"], TOO_LARGE_TOOL);
        assert_eq!(call["params"]["arguments"]["bytes"], big.len());
        assert_eq!(lines[3], r#"{"b":2}"#);
    }

    /// Issue 34: a message nested 200 levels deep was dropped by rmcp's parser without a
    /// word, and its client waited for ever. It is now cut and answered like one too large.
    #[tokio::test]
    async fn a_line_too_deep_becomes_a_stand_in_call_with_its_id() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{{"name":"jq","arguments":{{"input":"[\"{{[\"","filter":{}1{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let fine = format!("[{}1{}]", "[".repeat(90), "]".repeat(90));
        let text = format!("{fine}\n{deep}\n");
        let mut out = String::new();
        Guard::new(text.as_bytes(), 1 << 20)
            .read_to_string(&mut out)
            .await
            .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], fine, "a line within the depth passes unchanged");
        assert!(lines[1].ends_with('!'));
        let call: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(call["id"], "d");
        assert_eq!(call["params"]["name"], TOO_LARGE_TOOL);
        assert_eq!(call["params"]["arguments"]["depth"], MAX_DEPTH + 1);
    }
    /// Issue 34: 40 MB of small objects took `jqjail mcp` to 6.6 GiB as rmcp parsed them.
    /// A line is cut where its values' cost passes the bound, and answered; a long string
    /// costs nothing but its bytes.
    #[tokio::test]
    async fn a_line_of_too_many_values_becomes_a_stand_in_call_with_its_id() {
        let objects = MAX_VALUE_BYTES / (OBJECT_COST + 2 * VALUE_COST) + 10;
        let wide = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"jq","arguments":{{"pad":[{}]}}}}}}"#,
            vec![r#"{"a":1}"#; objects].join(",")
        );
        // A string with no escape is borrowed from the line: free at any length (charged as
        // a decoded one, this would be over the bound). One with an escape is charged.
        let n = MAX_VALUE_BYTES / STRING_BYTE_COST + (1 << 20);
        let long = format!(r#"{{"input":"{}"}}"#, "x".repeat(n));
        let escaped = format!(
            r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"name":"jq","arguments":{{"input":"\n{}"}}}}}}"#,
            "x".repeat(n)
        );
        let text = format!("{wide}\n{long}\n{escaped}\n");
        let mut out = String::new();
        Guard::new(text.as_bytes(), usize::MAX / 2)
            .read_to_string(&mut out)
            .await
            .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].ends_with('!') && lines[0].len() < wide.len());
        let call: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(call["id"], 7);
        assert_eq!(call["params"]["arguments"]["costly"], true);
        assert_eq!(call["params"]["arguments"]["bytes"], wide.len());
        assert_eq!(lines[2], long, "a long string with no escape passes whole");
        assert!(lines[3].ends_with('!') && lines[3].len() < escaped.len());
        let call: serde_json::Value = serde_json::from_str(lines[4]).unwrap();
        assert_eq!(call["id"], 8);
        assert_eq!(call["params"]["arguments"]["costly"], true);
    }
}
