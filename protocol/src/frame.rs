//! Length-prefixed frames: a 4-byte little-endian length, then that many bytes.
//!
//! Every length is checked against the caller's maximum before a byte of the body is
//! allocated; a frame over it is refused whole.

use std::io::{self, Read, Write};

/// Bytes in a frame's length prefix.
pub const PREFIX_BYTES: usize = 4;

/// Room in a request's frame for everything but its filter: a put's labels and meta pairs
/// (at most 64 pairs of 1 KiB strings), options, field names.
pub const ENVELOPE_BYTES: u64 = 384 * 1024;

/// The largest request frame a supervisor accepts with the default limits (512 KiB). Inputs
/// and contents are tails, outside the frame (v2), so a frame is bounded by the filter limit.
pub const MAX_FRAME_BYTES: u64 = max_request_frame_bytes(crate::limits::DEFAULT_MAX_FILTER_BYTES);

/// The largest request frame for a filter limit: the filter doubled for the JSON encoding's
/// escaping (`"` → `\"`), plus the envelope.
pub const fn max_request_frame_bytes(max_filter_bytes: u64) -> u64 {
    2 * max_filter_bytes + ENVELOPE_BYTES
}

/// The largest response frame a client need accept: a list page's labels and meta (256 KiB)
/// escaped, or an error message. Contents and outputs are tails, outside the frame.
pub const MAX_RESPONSE_FRAME_BYTES: u64 = 8 * 1024 * 1024;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the stream cleanly between frames.
    #[error("connection closed")]
    Closed,
    /// The length prefix is over the maximum; nothing was allocated.
    #[error("frame of {len} bytes is over the {max}-byte limit")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The maximum.
        max: u64,
    },
    /// The stream failed or ended inside a frame.
    #[error("frame i/o: {0}")]
    Io(#[from] io::Error),
}

fn check(prefix: [u8; PREFIX_BYTES], max: u64) -> Result<usize, FrameError> {
    let len = u64::from(u32::from_le_bytes(prefix));
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    usize::try_from(len).map_err(|_| FrameError::TooLarge { len, max })
}

/// Reads the length prefix, or `Closed` if the stream ends before its first byte.
fn read_prefix(r: &mut impl Read) -> Result<[u8; PREFIX_BYTES], FrameError> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut got = 0;
    while got < PREFIX_BYTES {
        match r.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(prefix)
}

/// Reads one frame of at most `max` bytes.
pub fn read_frame(r: &mut impl Read, max: u64) -> Result<Vec<u8>, FrameError> {
    let len = check(read_prefix(r)?, max)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// The 4-byte prefix for a body of `len` bytes.
pub fn prefix(len: usize) -> io::Result<[u8; PREFIX_BYTES]> {
    u32::try_from(len)
        .map(u32::to_le_bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))
}

/// Parts of a message up to this many bytes in all are written with one `write`.
pub const COALESCE_BYTES: usize = 64 * 1024;

/// Writes `parts` in order: copied together and written at once when they total at most
/// [`COALESCE_BYTES`], so that the reader is woken once rather than once per part (a
/// wake-up is the dearest part of a small message, and dearer still in a VM); else one by one.
/// Only `write` is used: a worker's system-call allowlist has no `writev`.
pub fn write_parts(w: &mut impl Write, parts: &[&[u8]]) -> io::Result<()> {
    match coalesced(parts) {
        Some(all) => w.write_all(&all),
        None => parts.iter().try_for_each(|part| w.write_all(part)),
    }
}

/// `parts` copied together, when they are small enough (see [`write_parts`]).
fn coalesced(parts: &[&[u8]]) -> Option<Vec<u8>> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    (total <= COALESCE_BYTES).then(|| parts.concat())
}

/// Writes one frame.
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    write_parts(w, &[&prefix(body.len())?, body])?;
    w.flush()
}

/// Async versions of the frame functions, for tokio streams.
#[cfg(feature = "tokio")]
pub mod tokio_io {
    use super::{FrameError, PREFIX_BYTES, check, coalesced, prefix};
    use std::io;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    /// Reads one frame of at most `max` bytes.
    pub async fn read_frame<R: AsyncRead + Unpin>(
        r: &mut R,
        max: u64,
    ) -> Result<Vec<u8>, FrameError> {
        let len = read_len(r, max).await?;
        read_body(r, len).await
    }

    /// Reads a frame's body of `len` bytes (its length as [`read_len`] gave it).
    pub async fn read_body<R: AsyncRead + Unpin>(
        r: &mut R,
        len: usize,
    ) -> Result<Vec<u8>, FrameError> {
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).await?;
        Ok(body)
    }

    /// Reads a frame's length prefix and checks it against `max`, so that a reader can decide
    /// what the body may cost before a byte of it is read or allocated for.
    pub async fn read_len<R: AsyncRead + Unpin>(r: &mut R, max: u64) -> Result<usize, FrameError> {
        let mut pre = [0u8; PREFIX_BYTES];
        let mut got = 0;
        while got < PREFIX_BYTES {
            match r.read(&mut pre[got..]).await? {
                0 if got == 0 => return Err(FrameError::Closed),
                0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                n => got += n,
            }
        }
        check(pre, max)
    }

    /// Writes one frame made of `parts`, concatenated, without joining them in memory.
    pub async fn write_frame_parts<W: AsyncWrite + Unpin>(
        w: &mut W,
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let len = parts.iter().map(|p| p.len()).sum();
        let prefix = prefix(len)?;
        let mut all = Vec::with_capacity(parts.len() + 1);
        all.push(&prefix[..]);
        all.extend_from_slice(parts);
        write_parts(w, &all).await?;
        w.flush().await
    }

    /// [`super::write_parts`] for tokio streams.
    pub async fn write_parts<W: AsyncWrite + Unpin>(w: &mut W, parts: &[&[u8]]) -> io::Result<()> {
        match coalesced(parts) {
            Some(all) => w.write_all(&all).await,
            None => {
                for part in parts {
                    w.write_all(part).await?;
                }
                Ok(())
            }
        }
    }

    /// Writes one frame.
    pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, body: &[u8]) -> io::Result<()> {
        write_frame_parts(w, &[body]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").unwrap();
        assert_eq!(buf, b"\x05\x00\x00\x00hello");
        let got = read_frame(&mut buf.as_slice(), 5).unwrap();
        assert_eq!(got, b"hello");
    }

    #[test]
    fn limit_plus_one_is_refused_before_allocation() {
        // The prefix announces max + 1 bytes and no body follows: a reader that allocated or
        // read first would fail with an EOF instead of TooLarge.
        let prefix = 11u32.to_le_bytes();
        match read_frame(&mut prefix.as_slice(), 10) {
            Err(FrameError::TooLarge { len: 11, max: 10 }) => {}
            other => panic!("expected TooLarge, got {other:?}"),
        }
        // Exactly the limit is accepted.
        let mut buf = Vec::new();
        write_frame(&mut buf, &[7u8; 10]).unwrap();
        assert_eq!(read_frame(&mut buf.as_slice(), 10).unwrap(), vec![7u8; 10]);
    }

    #[test]
    fn clean_close_and_truncation_differ() {
        assert!(matches!(
            read_frame(&mut &b""[..], 10),
            Err(FrameError::Closed)
        ));
        assert!(matches!(
            read_frame(&mut &b"\x05\x00"[..], 10),
            Err(FrameError::Io(_))
        ));
        assert!(matches!(
            read_frame(&mut &b"\x05\x00\x00\x00ab"[..], 10),
            Err(FrameError::Io(_))
        ));
    }

    #[test]
    fn default_max_frame_is_bounded_by_the_filter_limit_not_the_input_limit() {
        assert_eq!(MAX_FRAME_BYTES, 2 * (64 << 10) + (384 << 10));
    }
}
