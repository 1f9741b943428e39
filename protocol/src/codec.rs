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

/// Decodes a bincode value from the start of `body`, allocating at most 16 × `body.len()`
/// bytes (at least 64 KiB) for its strings, byte strings and sequences, whatever lengths the
/// bytes declare. Returns the value and the bytes it took.
///
/// bincode sizes a `String` or `Vec` from its declared length before reading it, so without
/// a limit a declared length of 2^44 is a 16 TiB allocation, and the process aborts. Every
/// such allocation is claimed against the configuration's limit first; the limit is a
/// constant in bincode's API, so it is picked from five tiers, the smallest that holds the
/// body. A valid message never claims more than its own length.
fn bincode_decode<'de, T: Deserialize<'de>>(
    body: &'de [u8],
) -> Result<(T, usize), bincode::error::DecodeError> {
    use bincode::serde::borrow_decode_from_slice as decode;
    const TIER: [usize; 4] = [1 << 16, 1 << 20, 1 << 24, 1 << 28];
    match body.len() {
        n if n <= TIER[0] => decode(body, BINCODE.with_limit::<{ TIER[0] }>()),
        n if n <= TIER[1] => decode(body, BINCODE.with_limit::<{ TIER[1] }>()),
        n if n <= TIER[2] => decode(body, BINCODE.with_limit::<{ TIER[2] }>()),
        n if n <= TIER[3] => decode(body, BINCODE.with_limit::<{ TIER[3] }>()),
        // A frame's length is a u32: at most 4 GiB, 16 × the last tier.
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

/// The bincode encoding of a run request, minus its input bytes: the message is
/// `header ++ input`. The input is the run request's last field, so a client can send a
/// 20 MiB input straight from its own buffer instead of copying it into an encoded message.
pub fn bincode_run_header(
    filter: &str,
    lang: crate::Lang,
    limits: crate::LimitOverrides,
    on_oversize: crate::OnOversize,
    input_len: usize,
) -> Result<Vec<u8>, CodecError> {
    header_before_tail(
        &crate::Request::Run(crate::RunRequest {
            filter: filter.to_string(),
            lang,
            limits,
            on_oversize,
            input: crate::Input::Inline(crate::JsonText::from(&b""[..])),
        }),
        input_len,
    )
}

/// The bincode encoding of a hide put, minus its content bytes (as [`bincode_run_header`]).
pub fn bincode_put_header(
    kind: &str,
    source: &str,
    meta: &std::collections::BTreeMap<String, String>,
    content_len: usize,
) -> Result<Vec<u8>, CodecError> {
    header_before_tail(
        &crate::Request::HidePut(crate::HidePut {
            kind: kind.to_string(),
            source: source.to_string(),
            meta: meta.clone(),
            content: crate::Bytes::from(&b""[..]),
        }),
        content_len,
    )
}

/// Everything of a bincode run request with inline input except the input bytes: what a
/// server needs to admit the request while the input is still arriving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHead {
    /// The filter text.
    pub filter: String,
    /// Its language.
    pub lang: crate::Lang,
    /// Tighter limits for this request.
    pub limits: crate::LimitOverrides,
    /// What to do with output over the limit.
    pub on_oversize: crate::OnOversize,
    /// Bytes of inline input that follow the head.
    pub input_len: u64,
    /// Bytes of the message the head takes; the input starts here.
    pub head_len: usize,
}

/// Decodes the head of a bincode message that starts with `buf`, when the message is a run
/// request with inline input (`None` for anything else, or when `buf` ends inside the head).
/// The inverse of [`bincode_run_header`].
pub fn decode_bincode_run_head(buf: &[u8]) -> Option<RunHead> {
    type Head = (
        u32,
        String,
        crate::Lang,
        crate::LimitOverrides,
        crate::OnOversize,
        u32,
        u64,
    );
    const RUN: u32 = 1;
    const INLINE: u32 = 0;
    let ((variant, filter, lang, limits, on_oversize, input, input_len), head_len) =
        bincode_decode::<Head>(buf).ok()?;
    (variant == RUN && input == INLINE).then_some(RunHead {
        filter,
        lang,
        limits,
        on_oversize,
        input_len,
        head_len,
    })
}

/// Everything of a bincode hide put except the content bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutHead {
    /// The hide's kind.
    pub kind: String,
    /// Its source.
    pub source: String,
    /// Its meta pairs.
    pub meta: std::collections::BTreeMap<String, String>,
    /// Bytes of content that follow the head.
    pub content_len: u64,
    /// Bytes of the message the head takes; the content starts here.
    pub head_len: usize,
}

/// Decodes the head of a bincode message that starts with `buf`, when the message is a hide
/// put (`None` otherwise). The inverse of [`bincode_put_header`].
pub fn decode_bincode_put_head(buf: &[u8]) -> Option<PutHead> {
    type Head = (u32, String, String, crate::hide::BoundedMeta, u64);
    const HIDE_PUT: u32 = 3;
    let ((variant, kind, source, crate::hide::BoundedMeta(meta), content_len), head_len) =
        bincode_decode::<Head>(buf).ok()?;
    (variant == HIDE_PUT).then_some(PutHead {
        kind,
        source,
        meta,
        content_len,
        head_len,
    })
}

/// Encodes `message`, whose last field is an empty byte string, and replaces that field's
/// length (a one-byte varint 0) with `tail_len`, so that `header ++ tail` is the message with
/// the tail in place.
fn header_before_tail(
    message: &crate::Request<'_>,
    tail_len: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut header = Encoding::Bincode.encode(message)?;
    debug_assert_eq!(header.last(), Some(&0));
    header.pop();
    header.extend(bincode::encode_to_vec(tail_len as u64, BINCODE)?);
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Input, JsonText, Lang, LimitOverrides, OnOversize, Request, RunRequest};

    #[test]
    fn run_header_plus_input_is_the_whole_message() {
        for len in [0usize, 1, 250, 251, 65_535, 65_536, 1 << 20] {
            let input = vec![b'7'; len];
            let limits = LimitOverrides {
                timeout_ms: Some(300),
                ..Default::default()
            };
            let whole = Encoding::Bincode
                .encode(&Request::Run(RunRequest {
                    filter: ".a".into(),
                    lang: Lang::Path,
                    limits,
                    on_oversize: OnOversize::Hide,
                    input: Input::Inline(JsonText::from(&input[..])),
                }))
                .unwrap();
            let mut parts =
                bincode_run_header(".a", Lang::Path, limits, OnOversize::Hide, len).unwrap();
            let head = decode_bincode_run_head(&parts).expect("a run head");
            assert_eq!(
                (
                    head.filter.as_str(),
                    head.lang,
                    head.limits,
                    head.on_oversize
                ),
                (".a", Lang::Path, limits, OnOversize::Hide)
            );
            assert_eq!((head.input_len, head.head_len), (len as u64, parts.len()));
            assert_eq!(decode_bincode_run_head(&parts[..parts.len() - 1]), None);
            parts.extend_from_slice(&input);
            assert_eq!(parts, whole, "input of {len} bytes");
            let meta: std::collections::BTreeMap<_, _> =
                [("k".to_string(), "v".to_string())].into();
            let whole = Encoding::Bincode
                .encode(&Request::HidePut(crate::HidePut {
                    kind: "k".into(),
                    source: "s".into(),
                    meta: meta.clone(),
                    content: crate::Bytes::from(&input[..]),
                }))
                .unwrap();
            let mut parts = bincode_put_header("k", "s", &meta, len).unwrap();
            assert_eq!(decode_bincode_run_head(&parts), None, "a put is not a run");
            let head = decode_bincode_put_head(&parts).expect("a put head");
            assert_eq!((head.kind.as_str(), head.source.as_str()), ("k", "s"));
            assert_eq!(head.meta, meta);
            assert_eq!((head.content_len, head.head_len), (len as u64, parts.len()));
            parts.extend_from_slice(&input);
            assert_eq!(parts, whole, "content of {len} bytes");
        }
    }
}
