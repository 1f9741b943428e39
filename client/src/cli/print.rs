//! Outputs printed as jq prints them: each output on its own, pretty with two spaces by
//! default (`--indent N`, `--tab`, `-c`), `-r`/`-j` raw strings, `-a` ASCII, `-S` sorted keys.
//!
//! The daemon answers each output as compact JSON text on a line of its own (`Outputs::Lines`);
//! these functions re-lay that text without parsing numbers, so a number keeps its spelling
//! (`12345678901234567890` stays exact, which jq 1.6 does not do).

mod colour;

/// How outputs are printed.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Style {
    /// `-c`: compact, one line each.
    pub compact: bool,
    /// Spaces per level (`--indent N`, 0 is compact; default 2).
    pub indent: usize,
    /// `--tab`: a tab per level.
    pub tab: bool,
    /// `-r`: strings without quotes or escapes (unless `-a`, as in jq 1.6).
    pub raw: bool,
    /// `-j`: as `-r`, and no newline after each output.
    pub join: bool,
    /// `-a`: non-ASCII characters as `\uXXXX`.
    pub ascii: bool,
    /// `-S`: object keys sorted.
    pub sort_keys: bool,
    /// `--seq`: an RS (0x1e) before each output.
    pub seq: bool,
    /// `-C` (or a terminal): jq's colours.
    pub color: bool,
}

/// Deepest nesting `-S` sorts (it builds a tree); deeper outputs are refused with a message.
const MAX_SORT_DEPTH: usize = 10_000;

/// Why printing stopped.
#[derive(Debug)]
pub(super) enum PrintError {
    /// Writing failed (a closed pipe among them).
    Io(std::io::Error),
    /// The daemon's text was not what it should be.
    Bad(String),
}

impl From<std::io::Error> for PrintError {
    fn from(e: std::io::Error) -> Self {
        PrintError::Io(e)
    }
}

impl From<String> for PrintError {
    fn from(why: String) -> Self {
        PrintError::Bad(why)
    }
}

/// Prints `lines` (one compact JSON text per line) in `style` to `out`, as it goes (a pretty
/// deep output can be far larger than its compact text). Returns whether the last output was
/// neither `false` nor `null` (`None`: no output), for `-e`.
pub(super) fn print(
    lines: &str,
    style: &Style,
    out: &mut impl std::io::Write,
) -> Result<Option<bool>, PrintError> {
    let mut last = None;
    for line in lines.lines() {
        last = Some(line != "false" && line != "null");
        let sorted;
        let text = match style.sort_keys {
            true => {
                sorted = sort_keys(line)?;
                sorted.as_str()
            }
            false => line,
        };
        if style.seq {
            out.write_all(b"\x1e")?;
        }
        // As in jq 1.6, `-a` wins over `-r`: a string is then printed quoted and escaped.
        if (style.raw || style.join) && !style.ascii && text.starts_with('"') {
            let decoded: String = serde_json::from_str(text)
                .map_err(|e| format!("the daemon's output is not a JSON string: {e}"))?;
            out.write_all(decoded.as_bytes())?;
        } else if style.color {
            colour::lay_out(text, style, out)?;
        } else {
            lay_out(text, style, out)?;
        }
        if !style.join {
            out.write_all(b"\n")?;
        }
    }
    Ok(last)
}

/// Lays out one compact JSON text: as it is with `-c` (or `--indent 0`), else indented.
fn lay_out(text: &str, style: &Style, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let text = match style.ascii {
        true => std::borrow::Cow::Owned(ascii(text)),
        false => std::borrow::Cow::Borrowed(text),
    };
    let bytes = text.as_bytes();
    if style.compact || (style.indent == 0 && !style.tab) {
        return out.write_all(bytes);
    }
    let unit: &[u8] = match style.tab {
        true => b"\t",
        false => &b"        "[..style.indent.min(8)],
    };
    let newline = |out: &mut dyn std::io::Write, depth: usize| -> std::io::Result<()> {
        out.write_all(b"\n")?;
        for _ in 0..depth {
            out.write_all(unit)?;
        }
        Ok(())
    };
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                let end = jqjail_protocol::values::string_end(bytes, i);
                out.write_all(&bytes[i..end])?;
                i = end;
                continue;
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                if bytes.get(i + 1) == Some(&close) {
                    out.write_all(&[b, close])?;
                    i += 2;
                    continue;
                }
                out.write_all(&[b])?;
                depth += 1;
                newline(out, depth)?;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(out, depth)?;
                out.write_all(&[b])?;
            }
            b',' => {
                out.write_all(b",")?;
                newline(out, depth)?;
            }
            b':' => out.write_all(b": ")?,
            _ => {
                // A run of plain bytes (a number, a literal) at once.
                let end = bytes[i..]
                    .iter()
                    .position(|c| matches!(c, b',' | b']' | b'}' | b':' | b'"' | b'{' | b'['))
                    .map_or(bytes.len(), |n| i + n);
                out.write_all(&bytes[i..end])?;
                i = end;
                continue;
            }
        }
        i += 1;
    }
    Ok(())
}

/// `text` with every non-ASCII character as a `\uXXXX` escape (two for characters beyond the
/// Basic Multilingual Plane), as jq's `-a` writes them. Only strings hold such characters.
pub(super) fn ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// One JSON value with every object's keys in code-point order, compact, numbers as spelled.
fn sort_keys(text: &str) -> Result<String, String> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let tree = parser.value(0)?;
    let mut out = String::with_capacity(text.len());
    tree.write(&mut out);
    Ok(out)
}

/// A JSON value whose scalars are kept as their text.
enum Tree<'a> {
    Scalar(&'a str),
    Array(Vec<Tree<'a>>),
    Object(Vec<(String, &'a str, Tree<'a>)>),
}

impl Tree<'_> {
    fn write(&self, out: &mut String) {
        match self {
            Tree::Scalar(text) => out.push_str(text),
            Tree::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Tree::Object(members) => {
                out.push('{');
                for (i, (_, key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(key);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A parser of compact JSON text as the daemon writes it (no whitespace).
struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn text(&self, from: usize) -> &'a str {
        std::str::from_utf8(&self.bytes[from..self.at]).unwrap_or_default()
    }

    fn value(&mut self, depth: usize) -> Result<Tree<'a>, String> {
        if depth > MAX_SORT_DEPTH {
            return Err(format!(
                "an output nests deeper than {MAX_SORT_DEPTH} levels; -S does not sort it"
            ));
        }
        let start = self.at;
        match self.bytes.get(self.at) {
            Some(b'"') => {
                self.at = jqjail_protocol::values::string_end(self.bytes, self.at);
                Ok(Tree::Scalar(self.text(start)))
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                while self.bytes.get(self.at) != Some(&b']') {
                    items.push(self.value(depth + 1)?);
                    if self.bytes.get(self.at) == Some(&b',') {
                        self.at += 1;
                    } else if self.bytes.get(self.at) != Some(&b']') {
                        return Err("the daemon's output is not JSON".into());
                    }
                }
                self.at += 1;
                Ok(Tree::Array(items))
            }
            Some(b'{') => {
                self.at += 1;
                let mut members = Vec::new();
                while self.bytes.get(self.at) != Some(&b'}') {
                    let key_start = self.at;
                    self.at = jqjail_protocol::values::string_end(self.bytes, self.at);
                    let key = self.text(key_start);
                    let decoded: String = serde_json::from_str(key)
                        .map_err(|e| format!("the daemon's output is not JSON: {e}"))?;
                    if self.bytes.get(self.at) != Some(&b':') {
                        return Err("the daemon's output is not JSON".into());
                    }
                    self.at += 1;
                    let value = self.value(depth + 1)?;
                    members.push((decoded, key, value));
                    if self.bytes.get(self.at) == Some(&b',') {
                        self.at += 1;
                    } else if self.bytes.get(self.at) != Some(&b'}') {
                        return Err("the daemon's output is not JSON".into());
                    }
                }
                self.at += 1;
                members.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Tree::Object(members))
            }
            Some(_) => {
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| !matches!(b, b',' | b']' | b'}'))
                {
                    self.at += 1;
                }
                Ok(Tree::Scalar(self.text(start)))
            }
            None => Err("the daemon's output ended early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(lines: &str, style: Style) -> String {
        let mut out = Vec::new();
        print(lines, &style, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn last(lines: &str) -> Option<bool> {
        print(lines, &Style::default(), &mut Vec::new()).unwrap()
    }

    #[test]
    fn pretty_by_default_as_jq_lays_it_out() {
        let style = Style {
            indent: 2,
            ..Style::default()
        };
        assert_eq!(
            show("{\"a\":[1,{}],\"b\":\"x,y:[z]\",\"c\":[]}\n2\n", style),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": \"x,y:[z]\",\n  \"c\": []\n}\n2\n"
        );
        let tab = Style { tab: true, ..style };
        assert_eq!(show("[1]\n", tab), "[\n\t1\n]\n");
    }

    #[test]
    fn raw_ascii_sorted_compact() {
        let raw = Style {
            raw: true,
            indent: 2,
            ..Style::default()
        };
        assert_eq!(show("\"a\\nb\"\n[\"c\"]\n", raw), "a\nb\n[\n  \"c\"\n]\n");
        let join = Style {
            join: true,
            ..Style::default()
        };
        assert_eq!(show("\"a\"\n1\n", join), "a1");
        let ascii = Style {
            ascii: true,
            compact: true,
            ..Style::default()
        };
        assert_eq!(show("\"é😀\"\n", ascii), "\"\\u00e9\\ud83d\\ude00\"\n");
        let sorted = Style {
            sort_keys: true,
            compact: true,
            ..Style::default()
        };
        assert_eq!(
            show(
                "{\"b\":1,\"a\":{\"d\":12345678901234567890,\"c\":[]}}\n",
                sorted
            ),
            "{\"a\":{\"c\":[],\"d\":12345678901234567890},\"b\":1}\n"
        );
    }

    #[test]
    fn the_last_output_decides_exit_status_e() {
        assert_eq!(last("1\nnull\n"), Some(false));
        assert_eq!(last("false\n1\n"), Some(true));
        assert_eq!(last(""), None);
    }
}
