//! The strict JSON writer: turns jaq values into RFC 8259 text, refuses what JSON cannot say,
//! and stops the moment the text would pass its byte budget.
//!
//! jaq's own writer may print `NaN`, `b"…"` byte strings and non-string keys (its docs say so)
//! and recurses once per nesting level; this one does neither.

use jaq_json::{Num, Val};

/// Why a value could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// The text would pass the byte budget; writing stopped.
    OverBudget,
    /// The value has no JSON form.
    NonJson(String),
}

enum Frame<'v> {
    Arr(std::slice::Iter<'v, Val>),
    Obj(indexmap_iter::Iter<'v>),
}

/// Iterator over an object's entries, named so `Frame` can hold it.
mod indexmap_iter {
    use jaq_json::Val;
    pub(super) type Iter<'v> = Box<dyn Iterator<Item = (&'v Val, &'v Val)> + 'v>;
}

/// Appends `v` as compact JSON to `out`, failing with `OverBudget` as soon as `out` would grow
/// past `limit` bytes. On error `out` holds a partial value and must be discarded.
pub fn write_value(out: &mut Vec<u8>, v: &Val, limit: usize) -> Result<(), WriteError> {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(v);
    loop {
        if let Some(v) = next.take() {
            match v {
                Val::Arr(items) => {
                    push(out, b"[", limit)?;
                    stack.push(Frame::Arr(items.iter()));
                    // The first element is pulled below without a comma.
                    match stack.last_mut() {
                        Some(Frame::Arr(it)) => next = it.next(),
                        _ => unreachable!("just pushed an array frame"),
                    }
                    if next.is_none() {
                        stack.pop();
                        push(out, b"]", limit)?;
                    } else {
                        continue;
                    }
                }
                Val::Obj(map) => {
                    push(out, b"{", limit)?;
                    let mut it: indexmap_iter::Iter<'_> = Box::new(map.iter());
                    match it.next() {
                        None => push(out, b"}", limit)?,
                        Some((k, v)) => {
                            key(out, k, limit)?;
                            stack.push(Frame::Obj(it));
                            next = Some(v);
                            continue;
                        }
                    }
                }
                scalar => write_scalar(out, scalar, limit)?,
            }
        }
        // A value is complete: move to its next sibling, closing finished containers.
        loop {
            match stack.last_mut() {
                None => return Ok(()),
                Some(Frame::Arr(it)) => match it.next() {
                    Some(v) => {
                        push(out, b",", limit)?;
                        next = Some(v);
                        break;
                    }
                    None => {
                        stack.pop();
                        push(out, b"]", limit)?;
                    }
                },
                Some(Frame::Obj(it)) => match it.next() {
                    Some((k, v)) => {
                        push(out, b",", limit)?;
                        key(out, k, limit)?;
                        next = Some(v);
                        break;
                    }
                    None => {
                        stack.pop();
                        push(out, b"}", limit)?;
                    }
                },
            }
        }
    }
}

fn push(out: &mut Vec<u8>, bytes: &[u8], limit: usize) -> Result<(), WriteError> {
    if out.len() + bytes.len() > limit {
        return Err(WriteError::OverBudget);
    }
    out.extend_from_slice(bytes);
    Ok(())
}

fn key(out: &mut Vec<u8>, k: &Val, limit: usize) -> Result<(), WriteError> {
    match k {
        Val::TStr(s) => string(out, s, limit)?,
        other => {
            return Err(WriteError::NonJson(format!(
                "an object key is not a string ({}); JSON keys are strings, use `tostring` on it",
                type_name(other)
            )));
        }
    }
    push(out, b":", limit)
}

fn write_scalar(out: &mut Vec<u8>, v: &Val, limit: usize) -> Result<(), WriteError> {
    match v {
        Val::Null => push(out, b"null", limit),
        Val::Bool(true) => push(out, b"true", limit),
        Val::Bool(false) => push(out, b"false", limit),
        Val::Num(n) => number(out, n, limit),
        Val::TStr(s) => string(out, s, limit),
        Val::BStr(_) => Err(WriteError::NonJson(
            "a byte string has no JSON form; convert it with `tostring` or `@base64`".into(),
        )),
        Val::Arr(_) | Val::Obj(_) => unreachable!("containers are written by write_value"),
    }
}

/// A number as jq writes it (`jq::number`): NaN as `null`, the infinities as the largest
/// doubles, integers exact.
fn number(out: &mut Vec<u8>, n: &Num, limit: usize) -> Result<(), WriteError> {
    push(out, crate::jq::number::num_text(n).as_bytes(), limit)
}

/// Writes a JSON string. Invalid UTF-8 (which jaq text strings may hold after `@base64d` or
/// `implode`) becomes U+FFFD, as jq does.
fn string(out: &mut Vec<u8>, bytes: &[u8], limit: usize) -> Result<(), WriteError> {
    // Escaping only grows the text, so a raw length over the budget is already over it.
    if out.len() + bytes.len() + 2 > limit {
        return Err(WriteError::OverBudget);
    }
    // Nearly always valid (an input's strings were checked): SIMD says so without a copy.
    let lossy;
    let raw = match simdutf8::basic::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(_) => {
            lossy = String::from_utf8_lossy(bytes);
            lossy.as_bytes()
        }
    };
    push(out, b"\"", limit)?;
    let (mut start, mut i) = (0, 0);
    loop {
        // Plain runs eight bytes at a time, then one byte, which may need an escape.
        while let Some(word) = raw.get(i..i + 8) {
            if needs_escape(u64::from_le_bytes(word.try_into().expect("eight bytes"))) {
                break;
            }
            i += 8;
        }
        let Some(&b) = raw.get(i) else { break };
        i += 1;
        let escaped: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\t' => b"\\t",
            b'\r' => b"\\r",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f | 0x7f => &format!("\\u{b:04x}").into_bytes(),
            _ => continue,
        };
        push(out, &raw[start..i - 1], limit)?;
        push(out, escaped, limit)?;
        start = i;
    }
    push(out, &raw[start..], limit)?;
    push(out, b"\"", limit)
}

/// Whether any of the eight bytes of `word` is escaped in a JSON string: the scan's quote,
/// backslash and control bytes, and DEL (which jq escapes too).
fn needs_escape(word: u64) -> bool {
    crate::json::needs_attention(word) || crate::json::has_byte(word, 0x7f)
}

/// jq's name for a value's type, for messages.
pub fn type_name(v: &Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Bool(_) => "boolean",
        Val::Num(_) => "number",
        Val::BStr(_) => "byte string",
        Val::TStr(_) => "string",
        Val::Arr(_) => "array",
        Val::Obj(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Val {
        jaq_json::read::parse_single(s.as_bytes()).unwrap()
    }

    fn text(v: &Val) -> String {
        let mut out = Vec::new();
        write_value(&mut out, v, usize::MAX).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn round_trips_compact_json() {
        for s in [
            "null",
            "true",
            "[]",
            "{}",
            "[1,[2,[3]],{}]",
            r#"{"a":{"b":[1,"x"]},"c":null}"#,
            "12345678901234567890",
            "123456789012345678901234567890",
            "-1",
            r#""quote\" backslash\\ nl\n tab\t ctl\u0001 del\u007f é""#,
        ] {
            assert_eq!(text(&parse(s)), s);
        }
    }

    #[test]
    fn refuses_non_json_values() {
        let bytes = Val::byte_str(b"ab".to_vec());
        match write_value(&mut Vec::new(), &bytes, 1000) {
            Err(WriteError::NonJson(msg)) => assert!(msg.contains("byte string"), "{msg}"),
            other => panic!("{other:?}"),
        }
        let obj = Val::obj([(Val::from(1usize), Val::Null)].into_iter().collect());
        assert!(matches!(
            write_value(&mut Vec::new(), &obj, 1000),
            Err(WriteError::NonJson(_))
        ));
    }

    /// Numbers are written as jq writes them: non-integer literals as the double they denote,
    /// NaN as null, the infinities as the largest doubles; integers keep every digit.
    #[test]
    fn numbers_as_jq_writes_them() {
        for (input, jq) in [
            ("1.50", "1.5"),
            ("1e100", "1e+100"),
            ("1E3", "1000"),
            ("0.00001", "1e-05"),
        ] {
            assert_eq!(text(&parse(input)), jq, "{input}");
        }
        assert_eq!(text(&Val::Num(Num::Float(f64::NAN))), "null");
        assert_eq!(
            text(&Val::Num(Num::Float(f64::NEG_INFINITY))),
            "-1.7976931348623157e+308"
        );
        assert_eq!(text(&Val::Num(Num::Float(5.0))), "5");
    }

    #[test]
    fn budget_is_exact() {
        let v = parse(r#"["abc",1]"#); // 9 bytes
        let mut out = Vec::new();
        assert_eq!(write_value(&mut out, &v, 9), Ok(()));
        assert_eq!(
            write_value(&mut Vec::new(), &v, 8),
            Err(WriteError::OverBudget)
        );
    }

    #[test]
    fn deep_values_do_not_recurse() {
        let depth = 200_000;
        let mut v = Val::Null;
        for _ in 0..depth {
            v = Val::Arr(jaq_json::Rc::new(vec![v]));
        }
        let mut out = Vec::new();
        write_value(&mut out, &v, usize::MAX).unwrap();
        assert_eq!(out.len(), 2 * depth + 4);
        // Dropping a value this deep recurses in jaq's Drop; the worker never drops its values
        // (it exits instead), and the test must not either.
        std::mem::forget(v);
    }

    #[test]
    fn every_byte_is_escaped_as_jq_escapes_it_wherever_it_falls() {
        for b in 0u8..0x80 {
            let expected = match b {
                b'"' => "\\\"".to_string(),
                b'\\' => "\\\\".to_string(),
                b'\n' => "\\n".to_string(),
                b'\t' => "\\t".to_string(),
                b'\r' => "\\r".to_string(),
                0x08 => "\\b".to_string(),
                0x0c => "\\f".to_string(),
                0x00..=0x1f | 0x7f => format!("\\u{b:04x}"),
                _ => char::from(b).to_string(),
            };
            for at in 0..20 {
                let mut raw = "é".repeat(10).into_bytes();
                raw.insert(at, b);
                let want = format!(
                    "\"{}{expected}{}\"",
                    String::from_utf8_lossy(&raw[..at]),
                    String::from_utf8_lossy(&raw[at + 1..])
                );
                assert_eq!(text(&Val::utf8_str(raw)), want, "byte {b:#04x} at {at}");
            }
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_character() {
        let v = Val::utf8_str(b"a\xffb".to_vec());
        assert_eq!(text(&v), "\"a\u{fffd}b\"");
    }
}
