//! A tail still arriving: the one type that owns where a tail's bytes come from (the
//! client's connection, a hide's file), how many there are, how many were taken, and the
//! deadline by which all of them must have come. Read in pieces and passed on, so that the
//! supervisor never holds a large input or hide whole.

use jqjail_protocol::limits::grouped;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::timeout_at;

/// Bytes read from an arriving tail at a time on its way to a worker.
pub const PUMP_CHUNK: usize = 256 * 1024;

/// `len` bytes still to come from `from`, all by `arrive_by`.
pub struct Arriving<'a> {
    from: &'a mut (dyn AsyncRead + Unpin + Send),
    len: u64,
    consumed: u64,
    arrive_by: Instant,
    /// A read that waits longer than this for its first byte fails (`None`: only the
    /// deadline bounds it).
    stall: Option<Duration>,
    /// The pace its bytes must keep (`pace.rs`), for a tail from a peer.
    pace: Option<crate::pace::Pace>,
    /// Why a read failed: the rest cannot be read after that.
    failed: Option<String>,
}

impl<'a> Arriving<'a> {
    /// A tail of `len` bytes to be read from `from` by `arrive_by`.
    pub fn new(
        from: &'a mut (dyn AsyncRead + Unpin + Send),
        len: u64,
        arrive_by: Instant,
    ) -> Arriving<'a> {
        Arriving {
            from,
            len,
            consumed: 0,
            arrive_by,
            stall: None,
            pace: None,
            failed: None,
        }
    }

    /// The same tail from a peer: cut off when no byte of it comes for `stall`, or when its
    /// bytes fall behind the minimum pace (`pace.rs`) over the time spent waiting for them, so
    /// that a peer that stops or trickles does not keep what the request took.
    pub fn from_a_peer(mut self, stall: Duration) -> Arriving<'a> {
        self.stall = Some(stall);
        self.pace = Some(crate::pace::Pace::default());
        self
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes not yet read.
    pub fn unread(&self) -> u64 {
        self.len - self.consumed
    }

    /// Whether any byte was read yet (a job whose input was partly taken cannot be replayed).
    pub fn started(&self) -> bool {
        self.consumed > 0
    }

    /// By when all of it must have come.
    pub fn arrive_by(&self) -> Instant {
        self.arrive_by
    }

    /// A buffer for [`Arriving::read_some`]: `chunk` bytes, or fewer for a shorter tail.
    pub fn buffer(&self, chunk: usize) -> Vec<u8> {
        vec![0u8; chunk.min(self.len as usize)]
    }

    /// Reads the next piece into `buf`; `Ok(0)` once all of it has come. An early end, a
    /// read error or the arrival deadline is an error naming how much came.
    pub async fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        if self.unread() == 0 {
            return Ok(0);
        }
        let read = self.read_next(buf).await;
        if let Err(why) = &read {
            self.failed = Some(why.clone());
        }
        read
    }

    async fn read_next(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let want = buf.len().min(self.unread() as usize);
        let now = Instant::now();
        let stalled_by = self.stall.map(|s| now + s);
        // The next byte must come within what the pace has left.
        let paced_by = self.pace.map(|p| now + p.allowed());
        let by = [stalled_by, paced_by]
            .into_iter()
            .flatten()
            .fold(self.arrive_by, Instant::min);
        let read = timeout_at(by.into(), self.from.read(&mut buf[..want])).await;
        if let (Some(pace), Ok(Ok(n))) = (&mut self.pace, &read) {
            pace.moved(*n as u64, now.elapsed());
        }
        match read {
            Ok(Ok(n)) if n > 0 => {
                self.consumed += n as u64;
                Ok(n)
            }
            Ok(Ok(_)) => Err(format!("the tail ended early ({})", self.came())),
            Ok(Err(e)) => Err(format!("reading the tail: {e} ({})", self.came())),
            Err(_) if paced_by == Some(by) && by < self.arrive_by => Err(format!(
                "the tail did not come at the minimum pace, {} ({})",
                crate::pace::rule(),
                self.came()
            )),
            Err(_) if by < self.arrive_by => Err(format!(
                "no byte of the tail came for {} s ({})",
                self.stall.unwrap_or_default().as_secs(),
                self.came()
            )),
            Err(_) => Err(self.too_late()),
        }
    }

    /// All of the rest, in memory (for a small tail; the caller bounds `len`).
    pub async fn read_all(&mut self) -> Result<Vec<u8>, String> {
        let mut all = vec![0u8; self.unread() as usize];
        let mut at = 0;
        while at < all.len() {
            at += self.read_some(&mut all[at..]).await?;
        }
        Ok(all)
    }

    /// Reads and discards the rest, so the next frame is read in step (after an answer that
    /// came before the whole tail did: a refusal, a worker's death).
    pub async fn skip_rest(&mut self) -> Result<(), String> {
        if self.unread() == 0 {
            return Ok(());
        }
        let mut buf = vec![0u8; 64 * 1024];
        while self.read_some(&mut buf).await? > 0 {}
        Ok(())
    }

    /// The error for a tail that did not arrive by its deadline.
    pub fn too_late(&self) -> String {
        format!(
            "the tail did not arrive within the frame timeout ({})",
            self.came()
        )
    }

    fn came(&self) -> String {
        format!(
            "{} of {} bytes came",
            grouped(self.consumed),
            grouped(self.len)
        )
    }
}
