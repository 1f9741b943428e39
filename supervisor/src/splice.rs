//! A client's streamed input passed on to its worker through a pipe, by `splice(2)`, rather
//! than read into the daemon's memory and written out again. The kernel moves references to
//! the pages the client's write filled: from the client's socket into the pipe, and from the
//! pipe into the worker's socket. The daemon's two copies of every byte (4.6 ms of its CPU for
//! a 20 MiB input) are gone; the bytes a worker reads are the same bytes in the same order.
//!
//! Only the relay's mechanism changes. What bounds it does not: the tail's length, its pace,
//! its stall and arrival deadlines are [`crate::arriving::Arriving`]'s, checked for each splice
//! as for each read. A relay that cannot have a pipe (no descriptors left) copies as before.

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use std::os::fd::{AsFd, OwnedFd};
use tokio::io::Interest;
use tokio::net::UnixStream;

/// What a relay's pipe is asked to hold: as much as a copying relay read at a time
/// ([`crate::arriving::PUMP_CHUNK`]). Not granted (the daemon's user is over the kernel's
/// `pipe-user-pages-soft`), the pipe keeps its default size, and the relay takes more, smaller
/// steps.
pub const PIPE_BYTES: usize = crate::arriving::PUMP_CHUNK;

/// A pipe between one client's socket and one worker's, and how many bytes it holds. It is
/// drained before anything more is spliced into it, so a splice into it never waits for room.
pub struct Pipe {
    rd: OwnedFd,
    wr: OwnedFd,
    /// Bytes in it: spliced in from the client, not yet out to the worker.
    held: usize,
    /// What one splice into it takes at most.
    room: usize,
}

impl Pipe {
    /// A new pipe, non-blocking at both ends; `None` when one cannot be had or this kernel
    /// cannot splice between Unix sockets (the relay then copies).
    pub fn new() -> Option<Pipe> {
        if !*WORKS.get_or_init(works) {
            return None;
        }
        Pipe::open()
    }

    fn open() -> Option<Pipe> {
        let (rd, wr) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).ok()?;
        // F_SETPIPE_SZ answers the size granted (a page count rounded up to a power of two).
        let room = match fcntl(&wr, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES as i32)) {
            Ok(granted) if granted > 0 => granted as usize,
            _ => 16 * 4096,
        };
        Some(Pipe {
            rd,
            wr,
            held: 0,
            room,
        })
    }

    /// Moves up to `max` bytes (and no more than the pipe holds) that have come on `from` into
    /// the pipe, waiting until some have: the count, 0 at the end of the stream.
    pub async fn fill(&mut self, from: &UnixStream, max: usize) -> std::io::Result<usize> {
        debug_assert_eq!(self.held, 0, "a pipe is drained before it is filled");
        let want = max.min(self.room);
        if want == 0 {
            return Ok(0);
        }
        let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
        let n = from
            .async_io(Interest::READABLE, || {
                splice(from.as_fd(), None, self.wr.as_fd(), None, want, flags).map_err(io_error)
            })
            .await?;
        self.held = n;
        Ok(n)
    }

    /// Moves everything the pipe holds into `to`, waiting for room in it as a write would.
    pub async fn drain(&mut self, to: &UnixStream) -> std::io::Result<()> {
        let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
        while self.held > 0 {
            let n = to
                .async_io(Interest::WRITABLE, || {
                    splice(self.rd.as_fd(), None, to.as_fd(), None, self.held, flags)
                        .map_err(io_error)
                })
                .await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
            }
            self.held -= n;
        }
        Ok(())
    }
}

/// Whether splicing from a Unix socket into a pipe and on into another works here, tried once.
static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Tries it: a few bytes from one socket pair through a pipe into another. A kernel or a
/// seccomp filter that refuses it fails here, once, rather than in a client's request.
fn works() -> bool {
    use std::io::{Read, Write};
    let tried = || -> std::io::Result<bool> {
        let (mut client, from) = std::os::unix::net::UnixStream::pair()?;
        let (to, mut worker) = std::os::unix::net::UnixStream::pair()?;
        let pipe = Pipe::open().ok_or(std::io::ErrorKind::Other)?;
        client.write_all(b"jqjail")?;
        let flags = SpliceFFlags::SPLICE_F_NONBLOCK;
        let n = splice(&from, None, &pipe.wr, None, 6, flags)?;
        let m = splice(&pipe.rd, None, &to, None, n, flags)?;
        let mut got = [0u8; 6];
        worker.read_exact(&mut got[..m])?;
        Ok(n == 6 && m == 6 && &got == b"jqjail")
    };
    match tried() {
        Ok(true) => true,
        outcome => {
            tracing::info!(
                ?outcome,
                "splice between Unix sockets does not work here; clients' inputs are copied to workers"
            );
            false
        }
    }
}

/// `EAGAIN` must reach tokio as `WouldBlock`, which `From<Errno>` gives.
fn io_error(e: Errno) -> std::io::Error {
    std::io::Error::from(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes written to one socket come out of the other whole and in order, through the
    /// pipe, in steps smaller than the pipe, the way a relay takes them.
    #[tokio::test]
    async fn a_relay_through_the_pipe_keeps_every_byte_in_order() {
        let (mut client, from) = UnixStream::pair().unwrap();
        let (to, mut worker) = UnixStream::pair().unwrap();
        let sent: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let writing = {
            let sent = sent.clone();
            tokio::spawn(async move { client.write_all(&sent).await.unwrap() })
        };
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            worker.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut pipe = Pipe::new().unwrap();
        let mut left = sent.len();
        while left > 0 {
            let n = pipe.fill(&from, left.min(100_003)).await.unwrap();
            assert!(n > 0, "the stream ended with {left} bytes to come");
            pipe.drain(&to).await.unwrap();
            left -= n;
        }
        drop(to);
        writing.await.unwrap();
        assert!(reading.await.unwrap() == sent, "bytes lost or reordered");
    }

    /// Linux splices from a Unix socket into a pipe and on into another socket, so the daemon
    /// relays by splice (were this to fail, the relay would copy, and this test says so).
    #[test]
    fn this_kernel_splices_between_unix_sockets() {
        assert!(works());
    }

    /// A closed client is the stream's end, and a closed worker an error, not a hang.
    #[tokio::test]
    async fn the_ends_are_reported() {
        let (client, from) = UnixStream::pair().unwrap();
        drop(client);
        let mut pipe = Pipe::new().unwrap();
        assert_eq!(pipe.fill(&from, 10).await.unwrap(), 0);

        let (mut client, from) = UnixStream::pair().unwrap();
        let (to, worker) = UnixStream::pair().unwrap();
        client.write_all(b"abc").await.unwrap();
        assert_eq!(pipe.fill(&from, 10).await.unwrap(), 3);
        drop(worker);
        assert!(pipe.drain(&to).await.is_err());
    }
}
