//! The blocking client.

use crate::{
    ClientError, MAX_RESPONSE_FRAME_BYTES, RunOptions, expect_hello, expect_run, expect_stats,
    hello, no_server_yet,
};
use jqjail_protocol::codec::bincode_run_header;
use jqjail_protocol::frame::{prefix, read_frame, write_frame};
use jqjail_protocol::{Encoding, HelloReply, Limits, Request, Response, RunReply, StatsReply};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A connection to a daemon. One request at a time; open several for concurrency.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    server: HelloReply,
}

impl Client {
    /// Connects and performs the handshake.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
        let mut client = Client {
            stream,
            server: no_server_yet(),
        };
        client.server = expect_hello(client.exchange(&Request::Hello(hello()))?)?;
        Ok(client)
    }

    /// The server's limits, from the handshake.
    pub fn limits(&self) -> &Limits {
        &self.server.limits
    }

    /// The server's name and version.
    pub fn server(&self) -> &str {
        &self.server.server
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
        expect_stats(self.exchange(&Request::Stats)?)
    }

    /// Runs a jq filter over JSON text.
    pub fn run(
        &mut self,
        filter: &str,
        input: &[u8],
        options: &RunOptions,
    ) -> Result<RunReply, ClientError> {
        // The input is sent from the caller's buffer, after the encoded rest of the request.
        let header = bincode_run_header(filter, options.lang, options.limits, input.len())?;
        let prefix = prefix(header.len() + input.len())?;
        self.stream.write_all(&prefix)?;
        self.stream.write_all(&header)?;
        self.stream.write_all(input)?;
        self.stream.flush()?;
        expect_run(self.read_response()?)
    }

    fn exchange(&mut self, request: &Request<'_>) -> Result<Response, ClientError> {
        let body = Encoding::Bincode.encode(request)?;
        write_frame(&mut self.stream, &body)?;
        self.read_response()
    }

    fn read_response(&mut self) -> Result<Response, ClientError> {
        let frame = read_frame(&mut self.stream, MAX_RESPONSE_FRAME_BYTES)?;
        Ok(Encoding::Bincode.decode(&frame)?)
    }
}
