//! The strict, non-recursive check of an input: UTF-8, RFC 8259 syntax, exactly one value,
//! and the nesting depth. It is the definition of what a worker accepts: the parser
//! (`value.rs`) checks strings and numbers with this module's own functions and must refuse
//! exactly what [`scan`] refuses; when it does, [`scan`] runs and its error (with line and
//! column) is the answer. jaq-json's parser, which runs only on input [`scan`] accepted, is
//! recursive and accepts extensions such as `NaN` and comments; the scan keeps those out.

use jqjail_protocol::limits::grouped;
use std::fmt;

/// Why an input was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    /// The bytes are not UTF-8.
    NotUtf8 {
        /// First offending byte.
        offset: usize,
    },
    /// Not JSON at this byte.
    Syntax {
        /// Offending byte.
        offset: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// Nesting went past the limit.
    TooDeep {
        /// The limit.
        limit: u32,
        /// Where the first too-deep bracket is.
        offset: usize,
    },
}

impl ScanError {
    /// The message a person reads, with line and column for syntax errors.
    pub fn describe(&self, input: &[u8]) -> String {
        match *self {
            Self::NotUtf8 { offset } => {
                format!("input is not valid UTF-8 at byte {offset}")
            }
            Self::Syntax { offset, expected } => {
                let (line, col) = line_col(input, offset);
                let found = match input.get(offset) {
                    None => "the end of the input".to_string(),
                    Some(b) if b.is_ascii_graphic() => format!("`{}`", *b as char),
                    Some(b) => format!("byte 0x{b:02x}"),
                };
                format!(
                    "input is not valid JSON: expected {expected} at line {line}, column {col} (byte {offset}), found {found}"
                )
            }
            Self::TooDeep { limit, offset } => {
                let limit = u64::from(limit);
                format!(
                    "input nests arrays and objects more than {} levels deep (level {} starts at byte {}), over the {}-level limit",
                    grouped(limit),
                    grouped(limit + 1),
                    grouped(offset as u64),
                    grouped(limit)
                )
            }
        }
    }
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

fn line_col(input: &[u8], offset: usize) -> (usize, usize) {
    let before = &input[..offset.min(input.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, col)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// A value (top level, after `:` or after `,` in an array).
    Value,
    /// A value or `]` (just after `[`).
    ValueOrEnd,
    /// A key or `}` (just after `{`).
    KeyOrEnd,
    /// A key (after `,` in an object).
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or the closing bracket of the innermost container.
    CommaOrEnd,
    /// Only whitespace until the end.
    Done,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Checks that `input` is exactly one strict JSON value nested at most `max_depth` levels.
pub fn scan(input: &[u8], max_depth: u32) -> Result<(), ScanError> {
    if let Err(e) = std::str::from_utf8(input) {
        return Err(ScanError::NotUtf8 {
            offset: e.valid_up_to(),
        });
    }
    // One bit of state per open container: true for an object.
    let mut stack: Vec<bool> = Vec::new();
    let mut want = Want::Value;
    let mut i = 0;
    let n = input.len();
    let syntax = |offset, expected| Err(ScanError::Syntax { offset, expected });
    loop {
        while i < n && is_ws(input[i]) {
            i += 1;
        }
        if i == n {
            return match want {
                Want::Done => Ok(()),
                Want::Value | Want::ValueOrEnd => syntax(i, "a value"),
                Want::KeyOrEnd | Want::Key => syntax(i, "a string key"),
                Want::Colon => syntax(i, "`:`"),
                Want::CommaOrEnd => syntax(i, "`,` or a closing bracket"),
            };
        }
        let b = input[i];
        match want {
            Want::Done => return syntax(i, "the end of the input after the value"),
            Want::Value | Want::ValueOrEnd => {
                if want == Want::ValueOrEnd && b == b']' {
                    stack.pop();
                    i += 1;
                    want = after_value(&stack);
                    continue;
                }
                match b {
                    b'{' | b'[' => {
                        if stack.len() >= max_depth as usize {
                            return Err(ScanError::TooDeep {
                                limit: max_depth,
                                offset: i,
                            });
                        }
                        stack.push(b == b'{');
                        want = if b == b'{' {
                            Want::KeyOrEnd
                        } else {
                            Want::ValueOrEnd
                        };
                        i += 1;
                        continue;
                    }
                    b'"' => i = string(input, i)?.0,
                    b'-' | b'0'..=b'9' => i = number(input, i)?,
                    b't' => i = literal(input, i, b"true")?,
                    b'f' => i = literal(input, i, b"false")?,
                    b'n' => i = literal(input, i, b"null")?,
                    _ => return syntax(i, "a value"),
                }
                want = after_value(&stack);
            }
            Want::KeyOrEnd | Want::Key => {
                if want == Want::KeyOrEnd && b == b'}' {
                    stack.pop();
                    i += 1;
                    want = after_value(&stack);
                } else if b == b'"' {
                    i = string(input, i)?.0;
                    want = Want::Colon;
                } else {
                    return syntax(i, "a string key");
                }
            }
            Want::Colon => {
                if b != b':' {
                    return syntax(i, "`:`");
                }
                i += 1;
                want = Want::Value;
            }
            Want::CommaOrEnd => {
                let in_object = stack.last().copied().unwrap_or(false);
                match (b, in_object) {
                    (b',', true) => want = Want::Key,
                    (b',', false) => want = Want::Value,
                    (b'}', true) | (b']', false) => {
                        stack.pop();
                        want = after_value(&stack);
                    }
                    (_, true) => return syntax(i, "`,` or `}`"),
                    (_, false) => return syntax(i, "`,` or `]`"),
                }
                i += 1;
            }
        }
    }
}

fn after_value(stack: &[bool]) -> Want {
    if stack.is_empty() {
        Want::Done
    } else {
        Want::CommaOrEnd
    }
}

fn literal(input: &[u8], i: usize, word: &'static [u8]) -> Result<usize, ScanError> {
    if input[i..].starts_with(word) {
        Ok(i + word.len())
    } else {
        Err(ScanError::Syntax {
            offset: i,
            expected: "a value",
        })
    }
}

/// Scans a string starting at the opening quote; returns the index after the closing quote,
/// and whether the string has any escape.
pub(crate) fn string(input: &[u8], start: usize) -> Result<(usize, bool), ScanError> {
    let mut i = start + 1;
    let mut escaped = false;
    let n = input.len();
    loop {
        // Fast path: eight plain bytes at a time (most of a document's bytes are in strings),
        // then byte by byte up to the byte that needs attention.
        while let Some(word) = input.get(i..i + 8) {
            if needs_attention(u64::from_le_bytes(word.try_into().expect("eight bytes"))) {
                break;
            }
            i += 8;
        }
        while i < n && input[i] != b'"' && input[i] != b'\\' && input[i] >= 0x20 {
            i += 1;
        }
        if i == n {
            return Err(ScanError::Syntax {
                offset: i,
                expected: "a closing quote",
            });
        }
        match input[i] {
            b'"' => return Ok((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                let esc = input.get(i + 1).copied();
                match esc {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => {
                        let hex = input.get(i + 2..i + 6);
                        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                            return Err(ScanError::Syntax {
                                offset: i,
                                expected: "four hex digits after `\\u`",
                            });
                        }
                        i += 6;
                    }
                    _ => {
                        return Err(ScanError::Syntax {
                            offset: i,
                            expected: "a valid escape (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)",
                        });
                    }
                }
            }
            _ => {
                return Err(ScanError::Syntax {
                    offset: i,
                    expected: "no raw control character in a string (escape it)",
                });
            }
        }
    }
}

/// Whether any of the eight bytes of `word` is a quote, a backslash or a control character
/// (below 0x20): the bytes that end a string's plain run.
pub(crate) fn needs_attention(word: u64) -> bool {
    has_byte(word, b'"') || has_byte(word, b'\\') || has_byte_below(word, 0x20)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether some byte of `word` is below `n` (at most 0x80). Exact, with no false positives:
/// `x - n…n & !x & 0x80…80` can be wrong only in bytes above the lowest byte below `n`, so it
/// is non-zero exactly when there is one.
pub(crate) fn has_byte_below(word: u64, n: u8) -> bool {
    word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH != 0
}

/// Whether some byte of `word` is `b`: a byte of `word ^ b…b` is zero exactly there.
pub(crate) fn has_byte(word: u64, b: u8) -> bool {
    has_byte_below(word ^ (ONES * u64::from(b)), 1)
}

/// Scans `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`; returns the index after it.
pub(crate) fn number(input: &[u8], start: usize) -> Result<usize, ScanError> {
    let digit = |i: usize| input.get(i).is_some_and(u8::is_ascii_digit);
    let err = |offset| ScanError::Syntax {
        offset,
        expected: "a digit",
    };
    let mut i = start;
    if input.get(i) == Some(&b'-') {
        i += 1;
    }
    match input.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while digit(i) {
                i += 1;
            }
        }
        _ => return Err(err(i)),
    }
    if input.get(i) == Some(&b'.') {
        i += 1;
        if !digit(i) {
            return Err(err(i));
        }
        while digit(i) {
            i += 1;
        }
    }
    if matches!(input.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(input.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digit(i) {
            return Err(err(i));
        }
        while digit(i) {
            i += 1;
        }
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_test_flags_exactly_the_bytes_that_end_a_plain_run() {
        for special in 0..=255u8 {
            let flagged = special == b'"' || special == b'\\' || special < 0x20;
            for at in 0..8 {
                // Every other byte plain, low and high (UTF-8 continuation bytes are plain).
                for filler in [b'a', b' ', 0x7f, 0x80, 0xff] {
                    let mut word = [filler; 8];
                    word[at] = special;
                    assert_eq!(
                        needs_attention(u64::from_le_bytes(word)),
                        flagged,
                        "byte 0x{special:02x} at {at} among 0x{filler:02x}"
                    );
                }
            }
        }
    }

    #[test]
    fn strings_end_at_the_first_quote_wherever_it_falls() {
        for len in 0..40 {
            let text = format!("\"{}\"", "é".repeat(len / 2) + &"a".repeat(len % 2));
            assert_eq!(
                string(text.as_bytes(), 0),
                Ok((text.len(), false)),
                "{text}"
            );
            let raw_newline = format!("\"{}\n\"", "a".repeat(len));
            assert!(string(raw_newline.as_bytes(), 0).is_err(), "{len}");
            let escaped = format!("[\"{}\\\"x\"]", "b".repeat(len));
            assert_eq!(scan(escaped.as_bytes(), 10), Ok(()), "{escaped}");
            assert_eq!(string(escaped.as_bytes(), 1), Ok((escaped.len() - 1, true)));
        }
    }

    fn ok(s: &str) {
        assert_eq!(scan(s.as_bytes(), 1000), Ok(()), "{s}");
    }
    fn bad(s: &str) {
        assert!(scan(s.as_bytes(), 1000).is_err(), "{s} should be refused");
    }

    #[test]
    fn accepts_rfc_8259() {
        for s in [
            "0",
            "-0",
            "1.5e10",
            "-1E-2",
            "12345678901234567890",
            "\"\"",
            "\"a\\u00e9\\n\"",
            "[]",
            "{}",
            " [1, {\"a\": [null, true, false]}] ",
            "\"é日本\"",
            "{\"\":{}}",
        ] {
            ok(s);
        }
    }

    #[test]
    fn refuses_extensions_and_garbage() {
        for s in [
            "",
            " ",
            "NaN",
            "Infinity",
            "-Infinity",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "[1 2]",
            "{a:1}",
            "{'a':1}",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\tb\"",
            "# comment\n1",
            "1 2",
            "[",
            "{\"a\"}",
            "b\"x\"",
            "[1]]",
            "nul",
            "tru",
        ] {
            bad(s);
        }
    }

    #[test]
    fn invalid_utf8_is_named() {
        let err = scan(b"\"a\xff\"", 10).unwrap_err();
        assert_eq!(err, ScanError::NotUtf8 { offset: 2 });
    }

    #[test]
    fn depth_at_limit_and_limit_plus_one() {
        let at = format!("{}{}", "[".repeat(5), "]".repeat(5));
        assert_eq!(scan(at.as_bytes(), 5), Ok(()));
        let over = format!("{}{}", "[".repeat(6), "]".repeat(6));
        assert_eq!(
            scan(over.as_bytes(), 5),
            Err(ScanError::TooDeep {
                limit: 5,
                offset: 5
            })
        );
    }

    #[test]
    fn deep_input_does_not_recurse() {
        let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        assert_eq!(scan(deep.as_bytes(), 2_000_000), Ok(()));
    }

    #[test]
    fn messages_name_position() {
        let input = b"[1,\n 2,]";
        let msg = scan(input, 10).unwrap_err().describe(input);
        assert_eq!(
            msg,
            "input is not valid JSON: expected a value at line 2, column 4 (byte 7), found `]`"
        );
    }
}
