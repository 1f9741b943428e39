//! The async (tokio) client.

use crate::{
    ClientError, MAX_RESPONSE_FRAME_BYTES, RunOptions, expect_hello, expect_run, expect_stats,
    hello, no_server_yet, run_request,
};
use jqjail_protocol::frame::tokio_io::{read_frame, write_frame};
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
        let request = run_request(filter, input, options);
        expect_run(self.exchange(&request).await?)
    }

    async fn exchange(&mut self, request: &Request<'_>) -> Result<Response, ClientError> {
        let body = Encoding::Bincode.encode(request)?;
        write_frame(&mut self.stream, &body).await?;
        let frame = read_frame(&mut self.stream, MAX_RESPONSE_FRAME_BYTES).await?;
        Ok(Encoding::Bincode.decode(&frame)?)
    }
}
