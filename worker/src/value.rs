//! Builds the jaq value of an input that [`crate::json::scan`] has accepted, without copying
//! its strings: a string without escapes is a slice of the input buffer (`Bytes` shares it),
//! and arrays and objects are allocated once, at their final size.
//!
//! jaq-json's own parser copies every string into a growing `Vec` and then wraps it in a
//! second allocation, and grows every array and object as it goes. For a worker, whose heap
//! is fresh and whose every new page is a page fault, the bytes allocated are most of the
//! cost: on 20 MiB of GitHub-issues-like JSON this parser builds the value in a fraction of
//! the memory and time (BENCHMARKS.md).
//!
//! The result is the same value, variant for variant, as `jaq_json::read::parse_single`
//! gives for the same bytes (tested differentially in `worker/tests/parse.rs`): numbers go
//! through jaq's own number parser unless they are short plain integers, and escapes are
//! decoded as jaq decodes them. Whatever this parser does not expect — which, after the
//! scan, is only an escaped lone surrogate, a value jaq refuses — makes [`parse`] hand the
//! whole input to jaq's parser, so that the answer and its error message are jaq's.
//!
//! This module never allocates by a length read from the input: every allocation is the size
//! of something already parsed.

use bytes::Bytes;
use jaq_json::{Map, Num, Rc, Val};

/// Parses `input`, which must have passed [`crate::json::scan`] (one strict RFC 8259 value,
/// valid UTF-8, nesting already bounded). On input the scan would refuse, the answer is
/// still jaq's: this parser gives up and jaq's parser runs.
pub fn parse(input: &Bytes) -> Result<Val, jaq_json::read::Error> {
    match Parser::new(input).document() {
        Some(value) => Ok(value),
        None => jaq_json::read::parse_single(input),
    }
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
    /// The items of every open container, innermost last.
    pending: Vec<Val>,
    open: Vec<Open>,
}

impl<'a> Parser<'a> {
    fn new(input: &'a Bytes) -> Self {
        Parser {
            input,
            bytes: input.as_ref(),
            pos: 0,
            pending: Vec::new(),
            open: Vec::new(),
        }
    }

    /// The whole document, or `None` where the input is not what the scan accepts.
    fn document(mut self) -> Option<Val> {
        'value: loop {
            self.skip_ws();
            let mut value = match *self.bytes.get(self.pos)? {
                b'[' => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.eat(b']') {
                        Val::Arr(Rc::new(Vec::new()))
                    } else {
                        self.open.push(Open::Array(self.pending.len()));
                        continue 'value;
                    }
                }
                b'{' => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.eat(b'}') {
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

    /// The string whose opening quote is at `pos`.
    fn string(&mut self) -> Option<Val> {
        let start = self.pos + 1;
        let end = start + memchr::memchr2(b'"', b'\\', self.bytes.get(start..)?)?;
        if self.bytes[end] == b'"' {
            self.pos = end + 1;
            return Some(Val::utf8_str(self.input.slice(start..end)));
        }
        // Escapes: decoded into a buffer of their own.
        let mut out = Vec::with_capacity(end - start + 16);
        out.extend_from_slice(&self.bytes[start..end]);
        self.pos = end;
        loop {
            let run = memchr::memchr2(b'"', b'\\', self.bytes.get(self.pos..)?)?;
            out.extend_from_slice(&self.bytes[self.pos..self.pos + run]);
            self.pos += run;
            if self.bytes[self.pos] == b'"' {
                self.pos += 1;
                return Some(Val::utf8_str(out));
            }
            let escaped = *self.bytes.get(self.pos + 1)?;
            self.pos += 2;
            let c = match escaped {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return None,
            };
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }

    /// The character of a `\uXXXX` escape whose hex digits start at `pos`, with its low
    /// surrogate if it is a high one. A lone surrogate is `None`: jaq refuses it.
    fn unicode_escape(&mut self) -> Option<char> {
        let high = self.hex4()?;
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high);
        }
        if self.bytes.get(self.pos..self.pos + 2)? != b"\\u" {
            return None;
        }
        self.pos += 2;
        let low = self.hex4()?;
        if !(0xDC00..0xE000).contains(&low) {
            return None;
        }
        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        digits.iter().try_fold(0, |n, &d| {
            let d = char::from(d).to_digit(16)?;
            Some(n << 4 | d)
        })
    }

    /// A number: a short plain integer directly, anything else by jaq's number parser, so
    /// that a decimal keeps its literal text (`Num::Dec`) and a long integer becomes a big
    /// one exactly as jaq makes them.
    fn number(&mut self) -> Option<Val> {
        let start = self.pos;
        let len = self.bytes[start..]
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(self.bytes.len() - start);
        let text = &self.bytes[start..start + len];
        self.pos += len;
        let (negative, digits) = match text.split_first()? {
            (b'-', rest) => (true, rest),
            _ => (false, text),
        };
        // Eighteen decimal digits always fit in an isize, which is what jaq makes of them.
        if !digits.is_empty() && digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit) {
            let n = digits
                .iter()
                .fold(0isize, |n, d| n * 10 + isize::from(d - b'0'));
            return Some(Val::Num(Num::Int(if negative { -n } else { n })));
        }
        jaq_json::read::parse_single_num(text).map(Val::Num)
    }
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

    fn both(text: &str) -> (String, String) {
        let ours = parse(&Bytes::copy_from_slice(text.as_bytes()));
        let jaqs = jaq_json::read::parse_single(text.as_bytes());
        (format!("{ours:?}"), format!("{jaqs:?}"))
    }

    #[test]
    fn values_are_jaqs_variant_for_variant() {
        for text in [
            "0",
            "-0",
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
    fn plain_strings_share_the_input() {
        let input = Bytes::from(br#"{"key":"value"}"#.to_vec());
        let Ok(Val::Obj(map)) = parse(&input) else {
            panic!("an object")
        };
        let (Val::TStr(key), Val::TStr(value)) = map.get_index(0).expect("one entry") else {
            panic!("two strings")
        };
        let within = |b: &Bytes| input.as_ptr_range().contains(&b.as_ptr());
        assert!(within(key) && within(value));
    }
}
