//! The async (tokio) client.

use crate::{
    Answer, Args, Call, ClientError, HideEnds, HideEndsRequest, HidePage, HidePageRequest,
    MAX_RESPONSE_FRAME_BYTES, RunOptions, RunReply, Source, calls, decode_response, fill, max_tail,
    no_server_yet, only_output,
};
use jqjail_protocol::frame::tokio_io::read_frame;
use jqjail_protocol::{
    HelloReply, HideContent, HideCut, HideEntry, HideListReply, HidePutReply, HideSearchReply,
    HideSearchRequest, HideUsageReply, Limits, Response, StatsReply,
};
use std::collections::BTreeMap;
use std::path::Path;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// An async connection to a daemon. One request at a time; open several for concurrency.
#[derive(Debug)]
pub struct AsyncClient {
    stream: UnixStream,
    server: HelloReply,
}

impl AsyncClient {
    /// Connects and performs the handshake.
    pub async fn connect(path: impl AsRef<Path>) -> Result<AsyncClient, ClientError> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.to_owned(),
                source,
            })?;
        crate::trust::check_peer(&stream, path)?;
        let mut client = AsyncClient {
            stream,
            server: no_server_yet(),
        };
        client.server = client.call(calls::hello()).await?;
        Ok(client)
    }

    /// The server's limits, from the handshake.
    pub fn limits(&self) -> &Limits {
        &self.server.limits
    }

    /// The daemon's counters (its totals, and this tenant's own row).
    pub async fn stats(&mut self) -> Result<StatsReply, ClientError> {
        self.call(calls::stats()).await
    }

    /// Runs a filter over JSON text (see [`crate::Client::run`]).
    pub async fn run(
        &mut self,
        filter: &str,
        input: &[u8],
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        only_output(
            self.run_answer(filter, Source::Inline(input), options)
                .await?,
        )
    }

    /// Runs a filter over a hide of this tenant, read by the daemon off its disk.
    pub async fn run_hide(
        &mut self,
        filter: &str,
        hide_id: &str,
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        only_output(
            self.run_answer(filter, Source::Hide(hide_id), options)
                .await?,
        )
    }

    /// Runs a filter over either kind of input (see [`crate::Client::run_answer`]).
    pub async fn run_answer(
        &mut self,
        filter: &str,
        source: Source<'_>,
        options: &RunOptions,
    ) -> Result<Answer, ClientError> {
        self.call(calls::run(filter, source, options, &Args::default()))
            .await
    }

    /// The shape summary of an input or a hide (see [`crate::Client::shape`]).
    pub async fn shape(&mut self, source: Source<'_>) -> Result<RunReply, ClientError> {
        crate::only_output(self.call(calls::shape(source)).await?)
    }

    /// Runs a filter with arguments bound in it: `$name` for each named value and `$ARGS`.
    /// Each value is a JSON text (`"\"a string\""`, `42`), parsed by the worker as strictly
    /// as an input, so a value is only ever data: text that looks like jq stays a string.
    pub async fn run_with_args(
        &mut self,
        filter: &str,
        source: Source<'_>,
        options: &RunOptions,
        args: &Args,
    ) -> Result<Answer, ClientError> {
        self.call(calls::run(filter, source, options, args)).await
    }

    /// Stores `content` as a hide of this tenant.
    pub async fn hide_put(
        &mut self,
        kind: &str,
        source: &str,
        content: &[u8],
        meta: &BTreeMap<String, String>,
    ) -> Result<HidePutReply, ClientError> {
        self.call(calls::put(kind, source, content, meta)).await
    }

    /// A hide's metadata and bytes.
    pub async fn hide_get(&mut self, id: &str) -> Result<HideContent, ClientError> {
        self.call(calls::get(id)).await
    }

    /// One page (1-based) of a hide; `page_size` defaults to 16,384 bytes.
    pub async fn hide_cut(
        &mut self,
        id: &str,
        page: u64,
        page_size: Option<u64>,
        hint: bool,
    ) -> Result<HideCut, ClientError> {
        self.call(calls::cut(id, page, page_size, hint)).await
    }

    /// One page of a hide by number or by a path in it, in JSON pages (pages that end
    /// between values and name their paths; the default) or byte pages (protocol 3).
    pub async fn hide_page(&mut self, request: HidePageRequest) -> Result<HidePage, ClientError> {
        self.call(calls::page(request)).await
    }

    /// A hide's beginning and end together, each half the page size, and what lies between
    /// (protocol 4): the first answer a model reads of an oversized output.
    pub async fn hide_ends(
        &mut self,
        request: HideEndsRequest,
    ) -> Result<Box<HideEnds>, ClientError> {
        let ends = self.call(calls::ends(request)).await?;
        crate::check_ends(&ends).map_err(ClientError::Protocol)?;
        Ok(ends)
    }

    /// Every occurrence of a string in a hide (empty matches: not found).
    pub async fn hide_search(
        &mut self,
        request: HideSearchRequest,
    ) -> Result<HideSearchReply, ClientError> {
        self.call(calls::search(request)).await
    }

    /// All of this tenant's hides, newest first (every page of them).
    pub async fn hide_list(&mut self) -> Result<Vec<HideEntry>, ClientError> {
        let mut all = Vec::new();
        let mut offset = Some(0);
        while let Some(at) = offset {
            let page = self.hide_list_page(at, None).await?;
            offset = crate::next_page(at, &page, all.len() + page.entries.len())?;
            all.extend(page.entries);
        }
        Ok(all)
    }

    /// One page of this tenant's hides, newest first, from `offset`; `limit` defaults to 100.
    pub async fn hide_list_page(
        &mut self,
        offset: u64,
        limit: Option<u32>,
    ) -> Result<HideListReply, ClientError> {
        self.call(calls::list(offset, limit)).await
    }

    /// Deletes a hide; returns what it was.
    pub async fn hide_delete(&mut self, id: &str) -> Result<HideEntry, ClientError> {
        self.call(calls::delete(id)).await
    }

    /// What this tenant holds and may hold.
    pub async fn hide_usage(&mut self) -> Result<HideUsageReply, ClientError> {
        self.call(calls::usage()).await
    }

    async fn call<T>(&mut self, call: Call<'_, T>) -> Result<T, ClientError> {
        // The frame, then the tail straight from the caller's buffer.
        let (frame, tail) = call.encode()?;
        jqjail_protocol::frame::tokio_io::write_parts(&mut self.stream, &[&frame, tail]).await?;
        self.stream.flush().await?;
        call.expect.answer(self.read_response().await?)
    }

    async fn read_response(&mut self) -> Result<Response, ClientError> {
        let frame = read_frame(&mut self.stream, MAX_RESPONSE_FRAME_BYTES).await?;
        let (response, len) = decode_response(&frame, max_tail(&self.server.limits))?;
        let mut tail = Vec::with_capacity(len.min(crate::TAIL_FIRST_CHUNK) as usize);
        (&mut self.stream).take(len).read_to_end(&mut tail).await?;
        if tail.len() as u64 != len {
            return Err(ClientError::Protocol(format!(
                "the daemon's answer ended {} bytes into a {len}-byte tail",
                tail.len()
            )));
        }
        Ok(fill(response, tail))
    }
}
