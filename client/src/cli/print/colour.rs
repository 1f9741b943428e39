//! Outputs in jq 1.6's colours (`-C`, or a terminal): each value in its kind's colour (null
//! `1;30`, false, true and numbers `0;39`, strings `0;32`, arrays and objects `1;39`), object
//! keys in `34;1`, and a reset after each value, byte for byte as jq 1.6 writes them (the CLI
//! table in `tests/it/jq_cli.rs` compares them). Walks the compact text with a stack, so any
//! depth prints.

use super::Style;
use std::io::Write;

const RESET: &[u8] = b"\x1b[0m";
const KEY: &[u8] = b"\x1b[34;1m";
const CONTAINER: &[u8] = b"\x1b[1;39m";

fn colour_of(first: u8, text: &[u8]) -> &'static [u8] {
    match first {
        b'"' => b"\x1b[0;32m",
        b'[' | b'{' => CONTAINER,
        b'n' if text == b"null" => b"\x1b[1;30m",
        _ => b"\x1b[0;39m",
    }
}

/// Lays out one compact JSON text in colour, indented as `style` says.
pub(super) fn lay_out(text: &str, style: &Style, out: &mut impl Write) -> std::io::Result<()> {
    let text = match style.ascii {
        true => std::borrow::Cow::Owned(super::ascii(text)),
        false => std::borrow::Cow::Borrowed(text),
    };
    let b = text.as_bytes();
    let pretty = !(style.compact || (style.indent == 0 && !style.tab));
    let unit: &[u8] = match style.tab {
        true => b"\t",
        false => &b"        "[..style.indent.min(8)],
    };
    let newline = |out: &mut dyn Write, depth: usize| -> std::io::Result<()> {
        if pretty {
            out.write_all(b"\n")?;
            for _ in 0..depth {
                out.write_all(unit)?;
            }
        }
        Ok(())
    };
    // The open containers, innermost last; their closing byte.
    let mut open: Vec<u8> = Vec::new();
    let mut i = 0;
    // Whether the next token begins a value (else it follows one: `,`, a close or the end).
    let mut at_value = true;
    // Whether that value is an object's key (just after `{` or an object's `,`).
    let mut key_next = false;
    while i < b.len() {
        if at_value {
            let c = b[i];
            // An object's key comes first: jq writes it in the key colour, then the colon in
            // the object's.
            if key_next {
                key_next = false;
                let end = jqjail_protocol::values::string_end(b, i);
                out.write_all(RESET)?;
                out.write_all(KEY)?;
                out.write_all(&b[i..end])?;
                out.write_all(RESET)?;
                out.write_all(CONTAINER)?;
                out.write_all(b":")?;
                if pretty {
                    out.write_all(b" ")?;
                }
                out.write_all(RESET)?;
                // Past the key's `:`.
                i = end + 1;
                continue;
            }
            let end = match c {
                b'"' => jqjail_protocol::values::string_end(b, i),
                b'[' | b'{' => i + 1,
                _ => b[i..]
                    .iter()
                    .position(|c| matches!(c, b',' | b']' | b'}'))
                    .map_or(b.len(), |n| i + n),
            };
            out.write_all(colour_of(c, &b[i..end]))?;
            if matches!(c, b'[' | b'{') {
                let close = if c == b'[' { b']' } else { b'}' };
                if b.get(end) == Some(&close) {
                    out.write_all(&[c, close])?;
                    out.write_all(RESET)?;
                    i = end + 1;
                    at_value = false;
                    continue;
                }
                out.write_all(&[c])?;
                open.push(close);
                key_next = c == b'{';
                newline(out, open.len())?;
                i = end;
                continue;
            }
            out.write_all(&b[i..end])?;
            out.write_all(RESET)?;
            i = end;
            at_value = false;
            continue;
        }
        // After a value inside a container: the container's colour again, then `,` or its end.
        out.write_all(CONTAINER)?;
        match b[i] {
            b',' => {
                out.write_all(b",")?;
                newline(out, open.len())?;
                at_value = true;
                key_next = open.last() == Some(&b'}');
            }
            close => {
                open.pop();
                newline(out, open.len())?;
                out.write_all(CONTAINER)?;
                out.write_all(&[close])?;
                out.write_all(RESET)?;
            }
        }
        i += 1;
    }
    Ok(())
}
