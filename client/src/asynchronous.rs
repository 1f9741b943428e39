//! The async (tokio) client.

use crate::{ClientError, MAX_RESPONSE_FRAME_BYTES, RunOptions, hello};
use jqjail_protocol::frame::tokio_io::{read_frame, write_frame};
use jqjail_protocol::{
    Encoding, HelloReply, Input, JsonText, Limits, Request, Response, RunReply, RunRequest,
};
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
            server: HelloReply {
                protocol: 0,
                server: String::new(),
                limits: Limits::default(),
            },
        };
        match client.exchange(&Request::Hello(hello())).await? {
            Response::Hello(reply) => {
                client.server = reply;
                Ok(client)
            }
            Response::Error(e) => Err(ClientError::Server(Box::new(e))),
            other => Err(ClientError::Protocol(format!(
                "expected hello, got {other:?}"
            ))),
        }
    }

    /// The server's limits, from the handshake.
    pub fn limits(&self) -> &Limits {
        &self.server.limits
    }

    /// Runs a jq filter over JSON text.
    pub async fn run(
        &mut self,
        filter: &str,
        input: &[u8],
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        let request = Request::Run(RunRequest {
            filter: filter.to_string(),
            input: Input::Inline(JsonText::from(input)),
            lang: options.lang,
            limits: options.limits,
        });
        match self.exchange(&request).await? {
            Response::Run(reply) => Ok(reply),
            Response::Error(e) => Err(ClientError::Server(Box::new(e))),
            other => Err(ClientError::Protocol(format!(
                "expected a run result, got {other:?}"
            ))),
        }
    }

    async fn exchange(&mut self, request: &Request<'_>) -> Result<Response, ClientError> {
        let body = Encoding::Bincode.encode(request)?;
        write_frame(&mut self.stream, &body).await?;
        let frame = read_frame(&mut self.stream, MAX_RESPONSE_FRAME_BYTES).await?;
        Ok(Encoding::Bincode.decode(&frame)?)
    }
}
