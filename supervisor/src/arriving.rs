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
            failed: None,
        }
    }

    /// The same tail, cut off when no byte of it comes for `stall` (a client's tail: bytes
    /// from a peer that stopped sending must not hold what the request took).
    pub fn stalls_after(mut self, stall: Duration) -> Arriving<'a> {
        self.stall = Some(stall);
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
        let stalled_by = self.stall.map(|s| Instant::now() + s);
        let by = stalled_by.map_or(self.arrive_by, |s| s.min(self.arrive_by));
        match timeout_at(by.into(), self.from.read(&mut buf[..want])).await {
            Ok(Ok(n)) if n > 0 => {
                self.consumed += n as u64;
                Ok(n)
            }
            Ok(Ok(_)) => Err(format!("the tail ended early ({})", self.came())),
            Ok(Err(e)) => Err(format!("reading the tail: {e} ({})", self.came())),
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
