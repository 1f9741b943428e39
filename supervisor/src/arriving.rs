//! A tail still arriving: the one type that owns where a tail's bytes come from (the
//! client's connection, a hide's file), how many there are, how many were taken, and the
//! deadline by which all of them must have come. Read in pieces and passed on, so that the
//! supervisor never holds a large input or hide whole.

use jqjail_protocol::limits::grouped;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::net::unix::OwnedReadHalf;
use tokio::time::timeout_at;

/// Bytes read from an arriving tail at a time on its way to a worker.
pub const PUMP_CHUNK: usize = 256 * 1024;

/// Where a tail's bytes come from.
enum From<'a> {
    /// Any reader (a hide's file).
    Reader(&'a mut (dyn AsyncRead + Unpin + Send)),
    /// A client's connection, whose bytes can also be spliced on (`splice.rs`) once its read
    /// buffer is empty.
    Peer(&'a mut BufReader<OwnedReadHalf>),
}

/// `len` bytes still to come from `from`, all by `arrive_by`.
pub struct Arriving<'a> {
    from: From<'a>,
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
            from: From::Reader(from),
            len,
            consumed: 0,
            arrive_by,
            stall: None,
            pace: None,
            failed: None,
        }
    }

    /// A tail of `len` bytes from a client's connection `from`, by `arrive_by`: cut off when
    /// no byte of it comes for `stall`, or when its bytes fall behind the minimum pace
    /// (`pace.rs`) over the time spent waiting for them, so that a peer that stops or trickles
    /// does not keep what the request took.
    pub fn from_a_peer(
        from: &'a mut BufReader<OwnedReadHalf>,
        len: u64,
        arrive_by: Instant,
        stall: Duration,
    ) -> Arriving<'a> {
        Arriving {
            from: From::Peer(from),
            len,
            consumed: 0,
            arrive_by,
            stall: Some(stall),
            pace: Some(crate::pace::Pace::default()),
            failed: None,
        }
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

    /// A buffer for [`Arriving::read_some`]: `chunk` bytes, or fewer when fewer are to come.
    pub fn buffer(&self, chunk: usize) -> Vec<u8> {
        vec![0u8; chunk.min(self.unread() as usize)]
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
        let step = self.step();
        let read = match &mut self.from {
            From::Reader(r) => timeout_at(step.by.into(), r.read(&mut buf[..want])).await,
            From::Peer(r) => timeout_at(step.by.into(), r.read(&mut buf[..want])).await,
        };
        self.took(step, read, "reading")
    }

    /// Moves the next piece, at most `max` bytes, into `pipe` without reading it, when this
    /// tail is a client's and none of it waits in the connection's read buffer: `None`
    /// otherwise (read it with [`Arriving::read_some`]). The same limits hold as for a read.
    pub async fn splice_some(
        &mut self,
        pipe: &mut crate::splice::Pipe,
        max: u64,
    ) -> Option<Result<usize, String>> {
        if let Some(why) = &self.failed {
            return Some(Err(why.clone()));
        }
        let From::Peer(peer) = &self.from else {
            return None;
        };
        if !peer.buffer().is_empty() {
            return None;
        }
        let want = max.min(self.unread()) as usize;
        if want == 0 {
            return Some(Ok(0));
        }
        let step = self.step();
        let From::Peer(peer) = &self.from else {
            unreachable!("matched above")
        };
        let socket = peer.get_ref().as_ref();
        let moved = timeout_at(step.by.into(), pipe.fill(socket, want)).await;
        let moved = self.took(step, moved, "splicing");
        if let Err(why) = &moved {
            self.failed = Some(why.clone());
        }
        Some(moved)
    }

    /// The deadline of the next read: the arrival deadline, or sooner when the tail's stall
    /// or pace allows less.
    fn step(&self) -> Step {
        let now = Instant::now();
        let stalled_by = self.stall.map(|s| now + s);
        // The next byte must come within what the pace has left.
        let paced_by = self.pace.map(|p| now + p.allowed());
        let by = [stalled_by, paced_by]
            .into_iter()
            .flatten()
            .fold(self.arrive_by, Instant::min);
        Step {
            began: now,
            by,
            paced_by,
        }
    }

    /// Counts what a read or splice begun at `step` took, or says why it failed.
    fn took(
        &mut self,
        step: Step,
        read: Result<std::io::Result<usize>, tokio::time::error::Elapsed>,
        doing: &str,
    ) -> Result<usize, String> {
        if let (Some(pace), Ok(Ok(n))) = (&mut self.pace, &read) {
            pace.moved(*n as u64, step.began.elapsed());
        }
        let Step { by, paced_by, .. } = step;
        match read {
            Ok(Ok(n)) if n > 0 => {
                self.consumed += n as u64;
                Ok(n)
            }
            Ok(Ok(_)) => Err(format!("the tail ended early ({})", self.came())),
            Ok(Err(e)) => Err(format!("{doing} the tail: {e} ({})", self.came())),
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

/// When one read of a tail began and by when it must take something.
#[derive(Clone, Copy)]
struct Step {
    began: Instant,
    by: Instant,
    paced_by: Option<Instant>,
}
