//! Tails (v2): bulk bytes that travel raw after their message's frame instead of inside it.
//!
//! A run's inline input, a put's content, a run's output and a hide's content or page are
//! tails. In the message a tail is only its length (a varint in bincode, a number in JSON);
//! exactly that many raw bytes follow the frame on the stream. So a control frame stays small
//! whatever the payload, a JSON client never escapes 20 MiB of JSON into a string, and the
//! daemon can pass a tail on (to a worker, the store, the socket) as it arrives, exactly as it
//! talks to workers (a job frame, then the raw input).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// A message's tail: its length, and its bytes once they are in hand.
///
/// Decoding a message gives a *pending* tail (the length alone); whoever reads the stream
/// reads that many bytes after the frame and [`Tail::fill`]s it. Encoding writes the length
/// alone; the writer sends the bytes after the frame.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Tail<'a> {
    len: u64,
    bytes: Option<Cow<'a, [u8]>>,
}

impl<'a> Tail<'a> {
    /// A tail of `len` bytes that are not in hand (yet).
    pub fn pending(len: u64) -> Tail<'a> {
        Tail { len, bytes: None }
    }

    /// The tail's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the bytes are in hand (always, for an empty tail).
    pub fn is_filled(&self) -> bool {
        self.len == 0 || self.bytes.is_some()
    }

    /// The bytes, when in hand; empty for a pending tail.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or_default()
    }

    /// Puts the bytes read after the frame in place. Refused (the tail unchanged) unless
    /// there are exactly as many as the message declared.
    pub fn fill(&mut self, bytes: Vec<u8>) -> Result<(), Vec<u8>> {
        if bytes.len() as u64 != self.len {
            return Err(bytes);
        }
        self.bytes = Some(Cow::Owned(bytes));
        Ok(())
    }

    /// The bytes, owned (empty for a pending tail).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes.map(Cow::into_owned).unwrap_or_default()
    }

    /// An owned copy that outlives the buffer it borrows from.
    pub fn into_owned(self) -> Tail<'static> {
        Tail {
            len: self.len,
            bytes: self.bytes.map(|b| Cow::Owned(b.into_owned())),
        }
    }
}

impl<'a> From<&'a [u8]> for Tail<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Tail {
            len: bytes.len() as u64,
            bytes: Some(Cow::Borrowed(bytes)),
        }
    }
}

impl<'a> From<&'a str> for Tail<'a> {
    fn from(text: &'a str) -> Self {
        Tail::from(text.as_bytes())
    }
}

impl From<Vec<u8>> for Tail<'static> {
    fn from(bytes: Vec<u8>) -> Self {
        Tail {
            len: bytes.len() as u64,
            bytes: Some(Cow::Owned(bytes)),
        }
    }
}

impl From<String> for Tail<'static> {
    fn from(text: String) -> Self {
        Tail::from(text.into_bytes())
    }
}

impl fmt::Debug for Tail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.is_filled() {
            true => write!(f, "Tail({} bytes)", self.len),
            false => write!(f, "Tail({} bytes pending)", self.len),
        }
    }
}

impl Serialize for Tail<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.len)
    }
}

impl<'de> Deserialize<'de> for Tail<'_> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        u64::deserialize(deserializer).map(Tail::pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_is_its_length_on_the_wire_and_fills_only_with_that_many_bytes() {
        let t = Tail::from(&b"abc"[..]);
        assert_eq!(serde_json::to_string(&t).unwrap(), "3");
        let mut got: Tail<'_> = serde_json::from_str("3").unwrap();
        assert!(!got.is_filled());
        assert_eq!(got.as_bytes(), b"");
        assert_eq!(got.fill(b"ab".to_vec()), Err(b"ab".to_vec()));
        assert!(got.fill(b"abc".to_vec()).is_ok());
        assert_eq!(got, t);
        assert!(Tail::pending(0).is_filled());
    }
}
