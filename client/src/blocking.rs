//! The blocking client.

use crate::{
    Answer, Args, Call, ClientError, HideEnds, HideEndsRequest, HidePage, HidePageRequest,
    MAX_RESPONSE_FRAME_BYTES, RunOptions, RunReply, Source, calls, decode_response, fill, max_tail,
    no_server_yet, only_output,
};
use jqjail_protocol::frame::read_frame;
use jqjail_protocol::{
    HelloReply, HideContent, HideCut, HideEntry, HideListReply, HidePutReply, HideSearchReply,
    HideSearchRequest, HideUsageReply, Limits, Response, StatsReply,
};
use std::collections::BTreeMap;
use std::io::Read;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A connection to a daemon. One request at a time; open several for concurrency.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    server: HelloReply,
    socket: std::path::PathBuf,
    hello: Hello,
}

/// Where a connection's handshake stands (see `Client::connect_pipelined`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hello {
    /// Still to be sent, in the first call's write.
    Unsent,
    /// Sent; its answer is still to be read, before the first call's.
    Unread,
    /// Answered: `server` holds the server's reply.
    Done,
}

impl Client {
    /// Connects to the daemon every jqjail client would pick (PROTOCOL.md, "Finding the
    /// socket"): `$JQJAIL_SOCKET`, else the system service, else the user's private daemon,
    /// which is started (`jqjaild` beside this program, on `$PATH`, or `$JQJAIL_DAEMON`) when
    /// none answers. See [`crate::discover`].
    pub fn connect_default() -> Result<Client, ClientError> {
        crate::discover::connect(None, crate::discover::Handshake::Awaited, &mut |_| {})
            .map_err(|e| ClientError::Unavailable(e.0))
    }

    /// Connects and performs the handshake.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        let mut client = Client::connect_pipelined(path)?;
        client.handshake().map_err(|e| match e {
            ClientError::Handshake(inner) => *inner,
            other => other,
        })?;
        Ok(client)
    }

    /// Connects; the handshake goes out in the same write as the first call, and its answer
    /// is read with that call's: one round trip and one wakeup of the daemon fewer for a
    /// process that makes one call (the CLI). Until that call or [`Client::handshake`],
    /// `limits` and `server` are not the server's.
    pub(crate) fn connect_pipelined(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
        // The peer is checked before a byte is sent, as by `connect`.
        crate::trust::check_peer(&stream, path)?;
        Ok(Client {
            stream,
            server: no_server_yet(),
            socket: path.to_owned(),
            hello: Hello::Unsent,
        })
    }

    /// Completes a pipelined handshake (a no-op for a client from `connect`); the server's
    /// limits.
    pub(crate) fn handshake(&mut self) -> Result<&Limits, ClientError> {
        let sent = if self.hello == Hello::Unsent {
            self.write(&[])
        } else {
            Ok(())
        };
        if self.hello == Hello::Unread {
            self.hello = Hello::Done;
            // Read even if the write failed: a refusal explains a write to a closed connection.
            self.server = self
                .read_response()
                .and_then(|response| calls::hello().expect.answer(response))
                .map_err(|e| ClientError::Handshake(Box::new(e)))?;
        }
        sent?;
        Ok(&self.server.limits)
    }

    /// The server's limits, from the handshake.
    pub fn limits(&self) -> &Limits {
        &self.server.limits
    }

    /// The server's name and version.
    pub fn server(&self) -> &str {
        &self.server.server
    }

    /// The socket path this client connected to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The uid of the process listening on the socket, as the kernel reports it.
    pub fn daemon_uid(&self) -> Result<u32, ClientError> {
        Ok(crate::trust::peer_uid(&self.stream)?)
    }

    /// Sets a timeout on each socket read and write (none by default; the server keeps its own
    /// deadline and always answers).
    pub fn set_io_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.stream.set_read_timeout(timeout)?;
        self.stream.set_write_timeout(timeout)?;
        Ok(())
    }

    /// The daemon's counters (its totals, and this tenant's own row).
    pub fn stats(&mut self) -> Result<StatsReply, ClientError> {
        self.call(calls::stats())
    }

    /// Runs a filter over JSON text. Output over the limit is an `OUTPUT_TOO_LARGE` error
    /// (use [`Client::run_answer`] with `on_oversize: Hide` to have it kept as a hide).
    pub fn run(
        &mut self,
        filter: &str,
        input: &[u8],
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        only_output(self.run_answer(filter, Source::Inline(input), options)?)
    }

    /// Runs a filter over a hide of this tenant, read by the daemon off its disk.
    pub fn run_hide(
        &mut self,
        filter: &str,
        hide_id: &str,
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        only_output(self.run_answer(filter, Source::Hide(hide_id), options)?)
    }

    /// Runs a filter over either kind of input; with `options.on_oversize` set to `Hide`, an
    /// oversized output comes back as [`Answer::Hidden`].
    pub fn run_answer(
        &mut self,
        filter: &str,
        source: Source<'_>,
        options: &RunOptions,
    ) -> Result<Answer, ClientError> {
        self.call(calls::run(filter, source, options, &Args::default()))
    }

    /// The shape summary of an input or a hide (PROTOCOL.md, "shape"): a skeleton of at most 4 KiB of
    /// JSON text, computed by a confined worker.
    pub fn shape(&mut self, source: Source<'_>) -> Result<RunReply, ClientError> {
        only_output(self.call(calls::shape(source))?)
    }

    /// Runs a filter with arguments bound in it: `$name` for each named value and `$ARGS`.
    /// Each value is a JSON text (`"\"a string\""`, `42`), parsed by the worker as strictly
    /// as an input, so a value is only ever data: text that looks like jq stays a string.
    pub fn run_with_args(
        &mut self,
        filter: &str,
        source: Source<'_>,
        options: &RunOptions,
        args: &Args,
    ) -> Result<Answer, ClientError> {
        self.call(calls::run(filter, source, options, args))
    }

    /// Stores `content` as a hide of this tenant.
    pub fn hide_put(
        &mut self,
        kind: &str,
        source: &str,
        content: &[u8],
        meta: &BTreeMap<String, String>,
    ) -> Result<HidePutReply, ClientError> {
        self.call(calls::put(kind, source, content, meta))
    }

    /// A hide's metadata and bytes.
    pub fn hide_get(&mut self, id: &str) -> Result<HideContent, ClientError> {
        self.call(calls::get(id))
    }

    /// One page (1-based) of a hide; `page_size` defaults to 16,384 bytes.
    pub fn hide_cut(
        &mut self,
        id: &str,
        page: u64,
        page_size: Option<u64>,
        hint: bool,
    ) -> Result<HideCut, ClientError> {
        self.call(calls::cut(id, page, page_size, hint))
    }

    /// One page of a hide by number or by a path in it, in JSON pages (pages that end
    /// between values and name their paths; the default) or byte pages (protocol 3).
    pub fn hide_page(&mut self, request: HidePageRequest) -> Result<HidePage, ClientError> {
        self.call(calls::page(request))
    }

    /// A hide's beginning and end together, each half the page size, and what lies between
    /// (protocol 4): the first answer a model reads of an oversized output.
    pub fn hide_ends(&mut self, request: HideEndsRequest) -> Result<Box<HideEnds>, ClientError> {
        let ends = self.call(calls::ends(request))?;
        crate::check_ends(&ends).map_err(ClientError::Protocol)?;
        Ok(ends)
    }

    /// Every occurrence of a string in a hide (empty matches: not found).
    pub fn hide_search(
        &mut self,
        request: HideSearchRequest,
    ) -> Result<HideSearchReply, ClientError> {
        self.call(calls::search(request))
    }

    /// All of this tenant's hides, newest first (every page of them).
    pub fn hide_list(&mut self) -> Result<Vec<HideEntry>, ClientError> {
        let mut all = Vec::new();
        let mut offset = Some(0);
        while let Some(at) = offset {
            let page = self.hide_list_page(at, None)?;
            offset = crate::next_page(at, &page, all.len() + page.entries.len())?;
            all.extend(page.entries);
        }
        Ok(all)
    }

    /// One page of this tenant's hides, newest first, from `offset`; `limit` defaults to 100.
    pub fn hide_list_page(
        &mut self,
        offset: u64,
        limit: Option<u32>,
    ) -> Result<HideListReply, ClientError> {
        self.call(calls::list(offset, limit))
    }

    /// Deletes a hide; returns what it was.
    pub fn hide_delete(&mut self, id: &str) -> Result<HideEntry, ClientError> {
        self.call(calls::delete(id))
    }

    /// What this tenant holds and may hold.
    pub fn hide_usage(&mut self) -> Result<HideUsageReply, ClientError> {
        self.call(calls::usage())
    }

    fn call<T>(&mut self, call: Call<'_, T>) -> Result<T, ClientError> {
        let sent = self.send(&call);
        // A pipelined handshake's answer comes first; a refusal there also explains a send
        // that failed because the server closed the connection.
        self.handshake()?;
        sent?;
        call.expect.answer(self.read_response()?)
    }

    /// Writes a request: the frame, then the tail straight from the caller's buffer.
    fn send<T>(&mut self, call: &Call<'_, T>) -> Result<(), ClientError> {
        let (frame, tail) = call.encode()?;
        self.write(&[&frame, tail])
    }

    /// Writes `parts`, after the handshake if it is still unsent (small parts go out in one
    /// write: `write_parts`).
    fn write(&mut self, parts: &[&[u8]]) -> Result<(), ClientError> {
        let hello = if self.hello == Hello::Unsent {
            self.hello = Hello::Unread;
            Some(calls::hello().encode()?.0)
        } else {
            None
        };
        let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        all.extend(hello.as_deref());
        all.extend_from_slice(parts);
        jqjail_protocol::frame::write_parts(&mut self.stream, &all)?;
        self.stream.flush()?;
        Ok(())
    }

    fn read_response(&mut self) -> Result<Response, ClientError> {
        let frame = read_frame(&mut self.stream, MAX_RESPONSE_FRAME_BYTES)?;
        let (response, len) = decode_response(&frame, max_tail(&self.server.limits))?;
        let mut tail = Vec::with_capacity(len.min(crate::TAIL_FIRST_CHUNK) as usize);
        (&mut self.stream).take(len).read_to_end(&mut tail)?;
        if tail.len() as u64 != len {
            return Err(ClientError::Protocol(format!(
                "the daemon's answer ended {} bytes into a {len}-byte tail",
                tail.len()
            )));
        }
        Ok(fill(response, tail))
    }
}
