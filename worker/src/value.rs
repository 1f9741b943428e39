//! Checks an input strictly and builds its jaq value in one pass, without copying its
//! strings: a string without escapes is a slice of the input buffer (`Bytes` shares it), and
//! arrays and objects are allocated once, at their final size. No recursion.
//!
//! jaq-json's own parser copies every string into a growing `Vec` and then wraps it in a
//! second allocation, and grows every array and object as it goes. For a worker, whose heap
//! is fresh and whose every new page is a page fault, the bytes allocated are most of the
//! cost: on 20 MiB of GitHub-issues-like JSON this parser builds the value in about half the
//! memory and a third of the time (BENCHMARKS.md).
//!
//! Strictness is [`crate::json::scan`]'s, token for token: strings and numbers are checked by
//! the scan's own functions, the grammar and the nesting limit by the parser's loop, UTF-8
//! up front. When the parser refuses an input, the scan runs and says why, with line and
//! column; so refusals read exactly as they did when the scan ran first.
//!
//! The value is the same, variant for variant, as `jaq_json::read::parse_single` gives for
//! the same bytes (tested differentially in `worker/tests/parse.rs`): numbers go through
//! jaq's own number parser unless they are short plain integers, and escapes are decoded as
//! jaq decodes them. Strict JSON that this parser refuses anyway — an escaped lone
//! surrogate, which jaq refuses too — goes to jaq's parser whole, so that the answer and
//! its error message are jaq's.
//!
//! This module never allocates by a length read from the input: every allocation is the size
//! of something already parsed.

use crate::json::{self, ScanError};
use bytes::Bytes;
use jaq_json::{Map, Num, Rc, Val};

/// Why an input has no value.
#[derive(Debug)]
pub enum Refusal {
    /// Not strict JSON, or nested too deep: the scan's finding.
    Scan(ScanError),
    /// Strict JSON that jaq refuses (an escaped lone surrogate): jaq's error.
    Jaq(jaq_json::read::Error),
}

/// Checks that `input` is exactly one strict JSON value nested at most `max_depth` levels
/// (what [`json::scan`] checks) and builds its jaq value.
pub fn parse(input: &Bytes, max_depth: u32) -> Result<Val, Refusal> {
    if let Some(value) = Parser::new(input, max_depth).document() {
        return Ok(value);
    }
    json::scan(input, max_depth).map_err(Refusal::Scan)?;
    jaq_json::read::parse_single(input).map_err(Refusal::Jaq)
}

/// An open array or object: where its items start on the pending stack.
#[derive(Clone, Copy)]
enum Open {
    Array(usize),
    /// Keys and values alternate on the stack from here.
    Object(usize),
}

struct Parser<'a> {
    input: &'a Bytes,
    bytes: &'a [u8],
    pos: usize,
    max_depth: usize,
    /// The items of every open container, innermost last.
    pending: Vec<Val>,
    open: Vec<Open>,
}

impl<'a> Parser<'a> {
    fn new(input: &'a Bytes, max_depth: u32) -> Self {
        Parser {
            input,
            bytes: input.as_ref(),
            pos: 0,
            max_depth: max_depth as usize,
            pending: Vec::new(),
            open: Vec::new(),
        }
    }

    /// The whole document, or `None` where the input is not strict JSON within the depth
    /// limit (or is an escaped lone surrogate).
    fn document(mut self) -> Option<Val> {
        // SIMD validation (simdutf8): std's is fast on ASCII only, and JSON text is often not
        // (11 % of a worker's CPU on the benchmark's 20 MiB input, measured with perf).
        simdutf8::basic::from_utf8(self.bytes).ok()?;
        'value: loop {
            self.skip_ws();
            let mut value = match *self.bytes.get(self.pos)? {
                open @ (b'[' | b'{') => {
                    // As in the scan: a bracket past the limit is refused, even an empty one.
                    if self.open.len() >= self.max_depth {
                        return None;
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if open == b'[' {
                        if self.eat(b']') {
                            Val::Arr(Rc::new(Vec::new()))
                        } else {
                            self.open.push(Open::Array(self.pending.len()));
                            continue 'value;
                        }
                    } else if self.eat(b'}') {
                        Val::obj(Map::default())
                    } else {
                        self.open.push(Open::Object(self.pending.len()));
                        self.key()?;
                        continue 'value;
                    }
                }
                b'"' => self.string()?,
                b't' => self.literal(b"true", Val::Bool(true))?,
                b'f' => self.literal(b"false", Val::Bool(false))?,
                b'n' => self.literal(b"null", Val::Null)?,
                _ => self.number()?,
            };
            // A value is complete: it goes into its container, which may complete in turn.
            loop {
                let Some(&open) = self.open.last() else {
                    self.skip_ws();
                    return (self.pos == self.bytes.len()).then_some(value);
                };
                self.pending.push(value);
                self.skip_ws();
                let (close, start) = match open {
                    Open::Array(start) => (b']', start),
                    Open::Object(start) => (b'}', start),
                };
                match *self.bytes.get(self.pos)? {
                    b',' => {
                        self.pos += 1;
                        if matches!(open, Open::Object(_)) {
                            self.skip_ws();
                            self.key()?;
                        }
                        continue 'value;
                    }
                    b if b == close => {
                        self.pos += 1;
                        self.open.pop();
                        let items = self.pending.drain(start..);
                        value = if close == b']' {
                            Val::Arr(Rc::new(items.collect()))
                        } else {
                            object(items)?
                        };
                    }
                    _ => return None,
                }
            }
        }
    }

    /// A key and its colon; the key goes onto the pending stack.
    fn key(&mut self) -> Option<()> {
        if self.bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let key = self.string()?;
        self.pending.push(key);
        self.skip_ws();
        self.eat(b':').then_some(())
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.bytes.get(self.pos) == Some(&b);
        self.pos += usize::from(hit);
        hit
    }

    fn literal(&mut self, word: &[u8], value: Val) -> Option<Val> {
        self.bytes[self.pos..].starts_with(word).then(|| {
            self.pos += word.len();
            value
        })
    }

    /// The string whose opening quote is at `pos`, checked by the scan's own function.
    fn string(&mut self) -> Option<Val> {
        let (end, escaped) = json::string(self.bytes, self.pos).ok()?;
        let (start, close) = (self.pos + 1, end - 1);
        self.pos = end;
        if !escaped {
            return Some(Val::utf8_str(self.input.slice(start..close)));
        }
        // Escapes (all well-formed, the scan's function has checked): decoded into a buffer
        // of their own.
        let mut out = Vec::with_capacity(close - start);
        let mut i = start;
        loop {
            let run = memchr::memchr(b'\\', &self.bytes[i..close]).unwrap_or(close - i);
            out.extend_from_slice(&self.bytes[i..i + run]);
            i += run;
            if i == close {
                return Some(Val::utf8_str(out));
            }
            let c = match self.bytes[i + 1] {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let (c, len) = unicode_escape(&self.bytes[i..close])?;
                    i += len;
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    continue;
                }
                _ => return None,
            };
            i += 2;
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }

    /// A number, checked by the scan's own function: a short plain integer directly,
    /// anything else by jaq's number parser, so that a decimal keeps its literal text
    /// (`Num::Dec`) and a long integer becomes a big one exactly as jaq makes them.
    fn number(&mut self) -> Option<Val> {
        let start = self.pos;
        self.pos = json::number(self.bytes, start).ok()?;
        let text = &self.bytes[start..self.pos];
        let (negative, digits) = match text.split_first()? {
            (b'-', rest) => (true, rest),
            _ => (false, text),
        };
        // Eighteen decimal digits always fit in an isize, which is what jaq makes of them.
        if digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit) {
            let n = digits
                .iter()
                .fold(0isize, |n, d| n * 10 + isize::from(d - b'0'));
            return Some(Val::Num(match (negative, n) {
                // `-0` is the double negative zero, as jq reads it.
                (true, 0) => Num::Float(-0.0),
                (true, n) => Num::Int(-n),
                (false, n) => Num::Int(n),
            }));
        }
        jaq_json::read::parse_single_num(text).map(Val::Num)
    }
}

/// The character of the `\uXXXX` escape that `escape` starts with, with its low surrogate if
/// it is a high one, and the escape's length in bytes. A lone surrogate is `None`: jaq
/// refuses it.
fn unicode_escape(escape: &[u8]) -> Option<(char, usize)> {
    let high = hex4(escape.get(2..6)?)?;
    if !(0xD800..0xDC00).contains(&high) {
        return Some((char::from_u32(high)?, 6));
    }
    if escape.get(6..8)? != b"\\u" {
        return None;
    }
    let low = hex4(escape.get(8..12)?)?;
    if !(0xDC00..0xE000).contains(&low) {
        return None;
    }
    let c = char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?;
    Some((c, 12))
}

fn hex4(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0, |n, &d| {
        let d = char::from(d).to_digit(16)?;
        Some(n << 4 | d)
    })
}

/// An object from its alternating keys and values; a repeated key keeps its first position
/// and its last value, as in jaq.
fn object(mut items: std::vec::Drain<'_, Val>) -> Option<Val> {
    let mut map = Map::with_capacity_and_hasher(items.len() / 2, Default::default());
    while let Some(key) = items.next() {
        map.insert(key, items.next()?);
    }
    Some(Val::obj(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This parser's answer and jaq's, both as jaq's `Result` would print.
    fn both(text: &str) -> (String, String) {
        let ours = match parse(&Bytes::copy_from_slice(text.as_bytes()), 1000) {
            Ok(v) => format!("{:?}", Ok::<_, ()>(v)),
            Err(Refusal::Jaq(e)) => format!("{:?}", Err::<(), _>(e)),
            Err(Refusal::Scan(e)) => format!("the scan refused it: {e}"),
        };
        let jaqs = jaq_json::read::parse_single(text.as_bytes());
        (ours, format!("{jaqs:?}"))
    }

    #[test]
    fn values_are_jaqs_variant_for_variant() {
        for text in [
            "0",
            "  17 ",
            "-123456789012345678",
            "1234567890123456789",
            "-9223372036854775808",
            "99999999999999999999999",
            "1.50",
            "1e3",
            "-2.5E-3",
            "\"\"",
            "\"plain\"",
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u00e9\u20ac\ud83d\ude00 x""#,
            "\"\u{e9}t\u{e9}\"",
            "[]",
            "{}",
            "[1,[2,[3,[]]],{}]",
            r#"{"a":1,"b":{"c":[true,false,null]},"a":2}"#,
            r#"{ "k" : "v" , "n" : [ 1 , 2 ] }"#,
            "\n\t[\r\n1\n]\n",
        ] {
            let (ours, jaqs) = both(text);
            assert_eq!(ours, jaqs, "{text}");
        }
    }

    /// jaq reads `-0` as the integer 0; jq (and so jqjail) as the double negative zero.
    #[test]
    fn minus_zero_is_the_negative_double() {
        let text = bytes::Bytes::from_static(b"[-0, 0, -0.0]");
        let Val::Arr(items) = parse(&text, 8).unwrap() else {
            panic!("an array")
        };
        assert!(matches!(&items[0], Val::Num(Num::Float(z)) if *z == 0.0 && z.is_sign_negative()));
        assert!(matches!(&items[1], Val::Num(Num::Int(0))));
    }

    #[test]
    fn a_lone_surrogate_gets_jaqs_error() {
        for text in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#"["x\ud83d"]"#,
        ] {
            let (ours, jaqs) = both(text);
            assert!(ours.starts_with("Err"), "{text}: {ours}");
            assert_eq!(ours, jaqs, "{text}");
        }
    }

    #[test]
    fn refusals_are_the_scans() {
        for (text, depth) in [
            ("", 10),
            (" ", 10),
            ("[1,]", 10),
            ("{\"a\":1,}", 10),
            ("{\"a\" 1}", 10),
            ("{1:2}", 10),
            ("[1 2]", 10),
            ("01", 10),
            ("-", 10),
            ("1.", 10),
            ("+1", 10),
            ("NaN", 10),
            ("tru", 10),
            ("nul", 10),
            ("\"a\tb\"", 10),
            ("\"\\x\"", 10),
            ("\"\\u12\"", 10),
            ("\"open", 10),
            ("[1] 2", 10),
            ("[1]]", 10),
            ("# comment\n1", 10),
            ("\u{feff}1", 10),
            ("[[[]]]", 2),
            ("[[{}]]", 2),
            ("[[1]]", 1),
        ] {
            let input = Bytes::copy_from_slice(text.as_bytes());
            let scan = json::scan(&input, depth).expect_err(text);
            match parse(&input, depth) {
                Err(Refusal::Scan(e)) => assert_eq!(e, scan, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let invalid_utf8 = Bytes::from_static(b"\"\xff\"");
        assert!(matches!(
            parse(&invalid_utf8, 10),
            Err(Refusal::Scan(ScanError::NotUtf8 { offset: 1 }))
        ));
        // At the limit itself, accepted.
        assert!(parse(&Bytes::from_static(b"[[]]"), 2).is_ok());
    }

    #[test]
    fn plain_strings_share_the_input() {
        let input = Bytes::from(br#"{"key":"value"}"#.to_vec());
        let Ok(Val::Obj(map)) = parse(&input, 10) else {
            panic!("an object")
        };
        let (Val::TStr(key), Val::TStr(value)) = map.get_index(0).expect("one entry") else {
            panic!("two strings")
        };
        let within = |b: &Bytes| input.as_ptr_range().contains(&b.as_ptr());
        assert!(within(key) && within(value));
    }
}
