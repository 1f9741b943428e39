//! The two encodings of a message body, and how a connection picks one.
//!
//! A connection's encoding is fixed by the first byte of its first frame: `{` (0x7B) means
//! JSON for the whole connection, anything else means bincode. The first message is always a
//! `Hello`, whose bincode form starts with its variant index 0x00, so the two cannot be
//! confused.

use serde::{Deserialize, Serialize};

/// How message bodies are encoded on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// bincode 2 with its `standard` configuration (little-endian, variable-length integers).
    Bincode,
    /// One JSON object per frame, UTF-8, as described in PROTOCOL.md.
    Json,
}

/// A body that does not decode, or a value that does not encode.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// bincode decoding failed.
    #[error("bad bincode message: {0}")]
    BincodeDecode(#[from] bincode::error::DecodeError),
    /// bincode encoding failed.
    #[error("cannot encode message: {0}")]
    BincodeEncode(#[from] bincode::error::EncodeError),
    /// JSON decoding or encoding failed.
    #[error("bad JSON message: {0}")]
    Json(#[from] serde_json::Error),
    /// The body decoded but bytes were left over.
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}

const BINCODE: bincode::config::Configuration = bincode::config::standard();

/// How many times its own length a bincode body may claim in allocations as it decodes.
pub const CLAIM_FACTOR: usize = 32;

/// Decodes a bincode value from the start of `body`, allocating at most 32 × `body.len()`
/// bytes (at least 64 KiB) for its strings, byte strings and sequences, whatever lengths the
/// bytes declare. Returns the value and the bytes it took.
///
/// bincode sizes a `String` or `Vec` from its declared length before reading it, so without
/// a limit a declared length of 2^44 is a 16 TiB allocation, and the process aborts. Every
/// such allocation is claimed against the configuration's limit first; the limit is a
/// constant in bincode's API, so it is picked from five tiers, the smallest that is at least
/// 32 times the body. A claim counts the element's in-memory size (24 bytes for a `String` in
/// a list, 48 for a pair of them in a map) while the element takes at least 1 or 2 bytes on
/// the wire, so a valid message never claims more than 32 times its own length.
fn bincode_decode<'de, T: Deserialize<'de>>(
    body: &'de [u8],
) -> Result<(T, usize), bincode::error::DecodeError> {
    use bincode::serde::borrow_decode_from_slice as decode;
    const TIER: [usize; 4] = [1 << 16, 1 << 20, 1 << 24, 1 << 28];
    match body.len().saturating_mul(CLAIM_FACTOR) {
        n if n <= TIER[0] => decode(body, BINCODE.with_limit::<{ TIER[0] }>()),
        n if n <= TIER[1] => decode(body, BINCODE.with_limit::<{ TIER[1] }>()),
        n if n <= TIER[2] => decode(body, BINCODE.with_limit::<{ TIER[2] }>()),
        n if n <= TIER[3] => decode(body, BINCODE.with_limit::<{ TIER[3] }>()),
        // Bodies over 8 MiB (a worker's reply with a large output): a string's claim is its
        // own length, so 4 GiB is enough, and no frame is longer than that.
        _ => decode(body, BINCODE.with_limit::<{ 1 << 32 }>()),
    }
}

impl Encoding {
    /// The encoding a connection uses, from the first byte of its first frame.
    pub fn detect(first_frame: &[u8]) -> Encoding {
        match first_frame.first() {
            Some(b'{') => Encoding::Json,
            _ => Encoding::Bincode,
        }
    }

    /// Encodes a message body.
    pub fn encode<T: Serialize>(self, message: &T) -> Result<Vec<u8>, CodecError> {
        Ok(match self {
            Encoding::Bincode => bincode::serde::encode_to_vec(message, BINCODE)?,
            Encoding::Json => serde_json::to_vec(message)?,
        })
    }

    /// Decodes a message body, borrowing from it where the type allows.
    pub fn decode<'de, T: Deserialize<'de>>(self, body: &'de [u8]) -> Result<T, CodecError> {
        match self {
            Encoding::Bincode => {
                let (value, used) = bincode_decode(body)?;
                match body.len() - used {
                    0 => Ok(value),
                    extra => Err(CodecError::Trailing(extra)),
                }
            }
            Encoding::Json => Ok(serde_json::from_slice(body)?),
        }
    }
}
