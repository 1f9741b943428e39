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
                let (value, used) = bincode::serde::borrow_decode_from_slice(body, BINCODE)?;
                match body.len() - used {
                    0 => Ok(value),
                    extra => Err(CodecError::Trailing(extra)),
                }
            }
            Encoding::Json => Ok(serde_json::from_slice(body)?),
        }
    }
}
