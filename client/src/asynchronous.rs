//! The async (tokio) client.

use crate::{
    ClientError, MAX_RESPONSE_FRAME_BYTES, RunOptions, expect_hello, expect_run, expect_stats,
    hello, no_server_yet,
};
use jqjail_protocol::codec::bincode_run_header;
use jqjail_protocol::frame::tokio_io::{read_frame, write_frame, write_frame_parts};
use jqjail_protocol::{Encoding, HelloReply, Limits, Request, Response, RunReply, StatsReply};
use std::path::Path;
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
        let mut client = AsyncClient {
            stream,
            server: no_server_yet(),
        };
        client.server = expect_hello(client.exchange(&Request::Hello(hello())).await?)?;
        Ok(client)
    }

    /// The server's limits, from the handshake.
    pub fn limits(&self) -> &Limits {
        &self.server.limits
    }

    /// The daemon's counters (its totals, and this tenant's own row).
    pub async fn stats(&mut self) -> Result<StatsReply, ClientError> {
        expect_stats(self.exchange(&Request::Stats).await?)
    }

    /// Runs a jq filter over JSON text.
    pub async fn run(
        &mut self,
        filter: &str,
        input: &[u8],
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        // The input is sent from the caller's buffer, after the encoded rest of the request.
        let header = bincode_run_header(filter, options.lang, options.limits, input.len())?;
        write_frame_parts(&mut self.stream, &[&header, input]).await?;
        expect_run(self.read_response().await?)
    }

    async fn exchange(&mut self, request: &Request<'_>) -> Result<Response, ClientError> {
        let body = Encoding::Bincode.encode(request)?;
        write_frame(&mut self.stream, &body).await?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> Result<Response, ClientError> {
        let frame = read_frame(&mut self.stream, MAX_RESPONSE_FRAME_BYTES).await?;
        Ok(Encoding::Bincode.decode(&frame)?)
    }
}
