//! The jqjail client library: connect to a `jqjaild` socket, run filters, get typed errors.
//! Blocking ([`Client`]) and async ([`AsyncClient`], tokio) flavours speak the same bincode
//! encoding of the protocol.
//!
//! The library never starts a daemon; the `jqjail` command line does that ([`cli`], feature
//! `cli`), because only a binary that can host the daemon can start one.

mod asynchronous;
mod blocking;
#[cfg(feature = "cli")]
pub mod cli;
pub mod paths;
pub mod tools;

pub use asynchronous::AsyncClient;
pub use blocking::Client;
pub use jqjail_protocol::{
    Cost, ErrorCode, ErrorReply, Lang, LimitOverrides, Limits, RunReply, StatsReply,
};

use jqjail_protocol::{CodecError, FrameError, Hello, HelloReply, PROTOCOL_VERSION, Response};
use std::path::PathBuf;

/// The client name sent in the handshake.
pub const CLIENT_NAME: &str = concat!("jqjail-client/", env!("CARGO_PKG_VERSION"));

/// Largest response frame the client accepts: the server's output cap is far below it, and
/// an error message is small. Checked before allocating (STYLE §6).
pub const MAX_RESPONSE_FRAME_BYTES: u64 = 64 * 1024 * 1024;

/// Anything that can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon answers at this path.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The connection failed mid-exchange.
    #[error("connection to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    /// The daemon sent something this client does not understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The daemon answered with an error: the request was understood and failed.
    #[error("{0}")]
    Server(Box<ErrorReply>),
}

impl ClientError {
    /// The stable code of a server error, `None` for connection and protocol failures.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(e) => Some(e.code),
            _ => None,
        }
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Io(io) => ClientError::Io(io),
            FrameError::Closed => ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )),
            other => ClientError::Protocol(other.to_string()),
        }
    }
}

impl From<CodecError> for ClientError {
    fn from(e: CodecError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

/// Per-request options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Limits tighter than the server's.
    pub limits: LimitOverrides,
    /// The filter's language (jq by default).
    pub lang: Lang,
}

fn hello() -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        client: CLIENT_NAME.to_string(),
    }
}

/// What a client knows of the server before the handshake completes.
fn no_server_yet() -> HelloReply {
    HelloReply {
        protocol: 0,
        server: String::new(),
        limits: Limits::default(),
    }
}

fn expect_hello(response: Response) -> Result<HelloReply, ClientError> {
    match response {
        Response::Hello(reply) => Ok(reply),
        Response::Error(e) => Err(ClientError::Server(Box::new(e))),
        other => Err(ClientError::Protocol(format!(
            "expected hello, got {other:?}"
        ))),
    }
}

fn expect_stats(response: Response) -> Result<StatsReply, ClientError> {
    match response {
        Response::Stats(reply) => Ok(reply),
        Response::Error(e) => Err(ClientError::Server(Box::new(e))),
        other => Err(ClientError::Protocol(format!(
            "expected stats, got {other:?}"
        ))),
    }
}

fn expect_run(response: Response) -> Result<RunReply, ClientError> {
    match response {
        Response::Run(reply) => Ok(reply),
        Response::Error(e) => Err(ClientError::Server(Box::new(e))),
        other => Err(ClientError::Protocol(format!(
            "expected a run result, got {other:?}"
        ))),
    }
}
