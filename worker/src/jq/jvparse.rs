//! jq 1.6's reader of one JSON text, for `fromjson` and `tonumber` where the strict parser
//! refuses the text: what jq accepts beyond JSON (`01`, `1.`, `.5`, `+1`, `NaN`, `Infinity`,
//! `inf`), and jq's own messages for what it refuses ("Invalid numeric literal at EOF at
//! line 1, column 4 (while parsing 'NaN1')").
//!
//! jq reads a text as a run of tokens: a structural character (`[`, `{`, `:`, `,`, `]`, `}`),
//! a string, or a literal (a run of anything else) that must be `true`, `false`, `null` or
//! what C's `strtod` reads whole. Its messages name the line and the column (in bytes, of the
//! character that showed the error), and "at EOF" where the text ended first. This is a state
//! machine written from that behaviour and checked against Debian's jq 1.6 on generated texts;
//! only the error path and jq's extra literals reach it, so it favours being exact over being
//! fast.

use jaq_json::{Map, Rc, Val};

/// What a text parses to in jq, or jq's message, "(while parsing '…')" included.
pub fn parse(text: &[u8], max_depth: usize) -> Result<Val, String> {
    // jq's message quotes the text as a C string: up to its first NUL.
    let quoted = String::from_utf8_lossy(text.split(|b| *b == 0).next().unwrap_or_default());
    let whole = |msg: String| format!("{msg} (while parsing '{quoted}')");
    // jq skips a leading byte order mark, and refuses a text that starts with part of one
    // (a character from U+F000 to U+FFFF but U+FEFF).
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let text = match text.strip_prefix(BOM) {
        Some(rest) => rest,
        None if text.first() == Some(&BOM[0]) => return Err(whole("Malformed BOM".into())),
        None => text,
    };
    let mut reader = Reader::new(text, max_depth);
    match reader.next_value() {
        Next::Value(v) => match reader.next_value() {
            Next::Value(_) => Err(whole("Unexpected extra JSON values".into())),
            Next::Error(msg) => Err(whole(msg)),
            Next::Nothing => Ok(v),
        },
        Next::Error(msg) => Err(whole(msg)),
        Next::Nothing => Err(whole("Expected JSON value".into())),
    }
}

enum Next {
    Value(Val),
    Error(String),
    Nothing,
}

/// An open array, an open object, or an object's key waiting for its value.
enum Frame {
    Arr(Vec<Val>),
    Obj(Map),
    Key(Val),
}

#[derive(PartialEq)]
enum State {
    Normal,
    Str,
    StrEscape,
}

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
    column: usize,
    state: State,
    stack: Vec<Frame>,
    /// The last complete value, not yet placed in its container.
    next: Option<Val>,
    /// The literal or the string being read.
    token: Vec<u8>,
    max_depth: usize,
    /// The text was abandoned after an error.
    done: bool,
}

/// What reading one character ends in, besides a value or nothing yet.
enum Stop {
    /// jq's message for the character.
    Error(&'static str),
    /// An RS (0x1E) that completes no value: jq drops what it read and gives nothing.
    Reset,
}

impl From<&'static str> for Stop {
    fn from(msg: &'static str) -> Self {
        Stop::Error(msg)
    }
}

type Step = Result<Option<Val>, Stop>;

impl<'a> Reader<'a> {
    fn new(text: &'a [u8], max_depth: usize) -> Self {
        Reader {
            text,
            pos: 0,
            line: 1,
            column: 0,
            state: State::Normal,
            stack: Vec::new(),
            next: None,
            token: Vec::new(),
            max_depth,
            done: false,
        }
    }

    fn next_value(&mut self) -> Next {
        if self.done {
            return Next::Nothing;
        }
        while let Some(&ch) = self.text.get(self.pos) {
            self.pos += 1;
            match self.scan(ch) {
                Ok(Some(v)) => return Next::Value(v),
                Ok(None) => {}
                Err(Stop::Reset) => {
                    self.done = true;
                    return Next::Nothing;
                }
                Err(Stop::Error(msg)) => {
                    self.done = true;
                    return Next::Error(format!(
                        "{msg} at line {}, column {}",
                        self.line, self.column
                    ));
                }
            }
        }
        self.done = true;
        let at_eof = |msg: &str, r: &Self| {
            Next::Error(format!(
                "{msg} at EOF at line {}, column {}",
                r.line, r.column
            ))
        };
        if self.state != State::Normal {
            return at_eof("Unfinished string", self);
        }
        if let Err(msg) = self.literal() {
            return at_eof(msg, self);
        }
        if !self.stack.is_empty() {
            return at_eof("Unfinished JSON term", self);
        }
        self.next.take().map_or(Next::Nothing, Next::Value)
    }

    fn scan(&mut self, ch: u8) -> Step {
        self.column += 1;
        if ch == b'\n' {
            self.line += 1;
            self.column = 0;
        }
        if ch == 0x1e {
            // jq ends the token here whatever the state, a string's text included.
            self.literal()?;
            if self.state == State::Normal
                && let Some(v) = self.done_value()
            {
                return Ok(Some(v));
            }
            return Err(Stop::Reset);
        }
        if self.state == State::Normal {
            let structural = matches!(ch, b'[' | b'{' | b':' | b',' | b']' | b'}');
            if !matches!(ch, b' ' | b'\t' | b'\r' | b'\n' | b'"') && !structural {
                self.token.push(ch);
                return Ok(None);
            }
            // A literal ends here; a top-level value it completes is jq's answer even when
            // this character starts the next one (`1[` reads 1, then an unfinished array).
            self.literal()?;
            let before = self.done_value();
            if ch == b'"' {
                self.state = State::Str;
            } else if structural {
                self.structure(ch)?;
            }
            return Ok(before.or_else(|| self.done_value()));
        } else if ch == b'"' && self.state == State::Str {
            self.string()?;
            self.state = State::Normal;
        } else {
            self.token.push(ch);
            self.state = match (ch, &self.state) {
                (b'\\', State::Str) => State::StrEscape,
                _ => State::Str,
            };
        }
        Ok(self.done_value())
    }

    /// The complete top-level value, once there is one.
    fn done_value(&mut self) -> Option<Val> {
        match self.stack.is_empty() {
            true => self.next.take(),
            false => None,
        }
    }

    fn value(&mut self, v: Val) -> Result<(), &'static str> {
        if self.next.is_some() {
            return Err("Expected separator between values");
        }
        self.next = Some(v);
        Ok(())
    }

    /// Ends the literal being read, if any: `true`, `false`, `null`, or a number as `strtod`
    /// reads it whole.
    fn literal(&mut self) -> Result<(), &'static str> {
        if self.token.is_empty() {
            return Ok(());
        }
        let token = std::mem::take(&mut self.token);
        let word = match token[0] {
            b't' => Some(("true", Val::Bool(true))),
            b'f' => Some(("false", Val::Bool(false))),
            b'n' => Some(("null", Val::Null)),
            _ => None,
        };
        let v = match word {
            Some((word, v)) if token == word.as_bytes() => v,
            Some(_) => return Err("Invalid literal"),
            None => Val::from(strtod(&token).ok_or("Invalid numeric literal")?),
        };
        self.value(v)
    }

    fn structure(&mut self, ch: u8) -> Result<(), &'static str> {
        match ch {
            b'[' | b'{' => {
                if self.next.is_some() {
                    return Err("Expected separator between values");
                }
                if self.stack.len() >= self.max_depth {
                    return Err("Exceeds depth limit for parsing");
                }
                self.stack.push(match ch {
                    b'[' => Frame::Arr(Vec::new()),
                    _ => Frame::Obj(Map::default()),
                });
            }
            b':' => {
                let Some(key) = self.next.take() else {
                    return Err("Expected string key before ':'");
                };
                if !matches!(self.stack.last(), Some(Frame::Obj(_))) {
                    return Err("':' not as part of an object");
                }
                if !matches!(key, Val::TStr(_)) {
                    return Err("Object keys must be strings");
                }
                self.stack.push(Frame::Key(key));
            }
            b',' => {
                let Some(v) = self.next.take() else {
                    return Err("Expected value before ','");
                };
                match self.stack.last_mut() {
                    None => return Err("',' not as part of an object or array"),
                    Some(Frame::Arr(items)) => items.push(v),
                    Some(Frame::Key(_)) => self.set(v),
                    Some(Frame::Obj(_)) => return Err("Objects must consist of key:value pairs"),
                }
            }
            b']' => {
                let Some(Frame::Arr(items)) = self.stack.last_mut() else {
                    return Err("Unmatched ']'");
                };
                match self.next.take() {
                    Some(v) => items.push(v),
                    None if !items.is_empty() => return Err("Expected another array element"),
                    None => {}
                }
                let Some(Frame::Arr(items)) = self.stack.pop() else {
                    unreachable!("the top frame is the array")
                };
                self.next = Some(Val::Arr(Rc::new(items)));
            }
            b'}' => {
                match (self.next.take(), self.stack.last()) {
                    (_, None) => return Err("Unmatched '}'"),
                    (Some(v), Some(Frame::Key(_))) => self.set(v),
                    (Some(_), Some(_)) => return Err("Objects must consist of key:value pairs"),
                    (None, Some(Frame::Obj(map))) if !map.is_empty() => {
                        return Err("Expected another key-value pair");
                    }
                    (None, Some(Frame::Obj(_))) => {}
                    (None, Some(_)) => return Err("Unmatched '}'"),
                }
                let Some(Frame::Obj(map)) = self.stack.pop() else {
                    unreachable!("a key's frame sits on its object's")
                };
                self.next = Some(Val::obj(map));
            }
            _ => unreachable!("only structural characters reach here"),
        }
        Ok(())
    }

    /// Sets the key on top of the stack to `v` in the object beneath it.
    fn set(&mut self, v: Val) {
        let Some(Frame::Key(key)) = self.stack.pop() else {
            unreachable!("called with a key on top")
        };
        let Some(Frame::Obj(map)) = self.stack.last_mut() else {
            unreachable!("a key's frame sits on its object's")
        };
        map.insert(key, v);
    }

    /// Ends a string: its escapes decoded as jq decodes them.
    fn string(&mut self) -> Result<(), &'static str> {
        let raw = std::mem::take(&mut self.token);
        let mut out = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            let c = raw[i];
            i += 1;
            if c != b'\\' {
                if (1..0x1f).contains(&c) {
                    return Err(
                        "Invalid string: control characters from U+0000 through U+001F must be escaped",
                    );
                }
                out.push(c);
                continue;
            }
            let Some(&e) = raw.get(i) else {
                return Err("Expected escape character at end of string");
            };
            i += 1;
            match e {
                b'\\' | b'"' | b'/' => out.push(e),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'u' => {
                    let Some(digits) = raw.get(i..i + 4) else {
                        return Err("Invalid \\uXXXX escape");
                    };
                    let mut code = hex4(digits).ok_or("Invalid characters in \\uXXXX escape")?;
                    i += 4;
                    if (0xD800..0xDC00).contains(&code) {
                        let low = match raw.get(i..i + 6) {
                            Some([b'\\', b'u', d @ ..]) => hex4(d),
                            _ => None,
                        };
                        let low = low
                            .filter(|l| (0xDC00..0xE000).contains(l))
                            .ok_or("Invalid \\uXXXX\\uXXXX surrogate pair escape")?;
                        i += 6;
                        code = 0x10000 + ((code - 0xD800) << 10 | (low - 0xDC00));
                    }
                    // A lone low surrogate is no character: jq writes U+FFFD for it.
                    let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => return Err("Invalid escape"),
            }
        }
        let s = match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        self.value(Val::from(s))
    }
}

fn hex4(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0, |n, &d| {
        let d = char::from(d).to_digit(16)?;
        Some(n << 4 | d)
    })
}

/// A literal as C's `strtod` reads it, where it reads all of it up to a NUL (where C's string
/// ends, so that an empty one reads as 0): leading white space skipped, decimal notation with
/// an optional sign, `.5` and `1.`, and `inf`, `infinity` and `nan` in any case.
fn strtod(token: &[u8]) -> Option<f64> {
    let token = token.split(|b| *b == 0).next().unwrap_or_default();
    if token.is_empty() {
        return Some(0.0);
    }
    // C's isspace: a token holds no space, tab, CR or LF, but may hold VT and FF.
    let blank = token
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count();
    std::str::from_utf8(&token[blank..]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> String {
        parse(text.as_bytes(), 1000).unwrap_err()
    }

    fn ok(text: &str) -> String {
        crate::jq::val::dump(&parse(text.as_bytes(), 1000).unwrap())
    }

    /// Each of these is Debian's jq 1.6's own answer (`jq -c 'try fromjson catch .'`).
    #[test]
    fn jq_s_messages() {
        for (text, want) in [
            ("NaN1", "Invalid numeric literal at EOF at line 1, column 4"),
            ("", "Expected JSON value"),
            ("1 2", "Unexpected extra JSON values"),
            ("[1,", "Unfinished JSON term at EOF at line 1, column 3"),
            ("tru", "Invalid literal at EOF at line 1, column 3"),
            (
                "[1 2]",
                "Expected separator between values at line 1, column 5",
            ),
            (
                " \"\\u00e9\"nul{\"a\":{\"b\":[1,{}]}}",
                "Invalid literal at line 1, column 13",
            ),
        ] {
            assert_eq!(
                msg(text),
                format!("{want} (while parsing '{text}')"),
                "{text}"
            );
        }
    }

    #[test]
    fn jq_s_extra_literals() {
        for (text, want) in [
            ("01", "1"),
            ("1.", "1"),
            (".5", "0.5"),
            ("+1", "1"),
            ("Infinity", "1.7976931348623157e+308"),
            ("-inf", "-1.7976931348623157e+308"),
            ("NaN", "null"),
            ("[01, {\"a\": .5}]", "[1,{\"a\":0.5}]"),
            ("\"\\udc00\"", "\"\u{fffd}\""),
        ] {
            assert_eq!(ok(text), want, "{text}");
        }
        assert!(msg("nan").starts_with("Invalid literal at EOF"));
    }

    #[test]
    fn depth_is_bounded() {
        let deep = "[".repeat(20);
        assert!(
            parse(deep.as_bytes(), 10)
                .unwrap_err()
                .starts_with("Exceeds depth limit for parsing at line 1, column 11")
        );
    }

    /// jq 1.6 skips a whole byte order mark and refuses a part of one.
    #[test]
    fn a_partial_byte_order_mark_is_refused() {
        assert_eq!(parse("\u{feff}1".as_bytes(), 10), Ok(Val::from(1isize)));
        assert_eq!(
            parse("\u{f000}1".as_bytes(), 10),
            Err("Malformed BOM (while parsing '\u{f000}1')".into())
        );
    }
}
