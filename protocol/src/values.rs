//! Cutting a stream of JSON texts (`1 [2] {"a":3}`) into its values, without validating
//! them: whoever parses each piece strictly names what is wrong with it. Used by the CLI
//! (a stream of files runs once per value) and the worker (`input`/`inputs` over a run's
//! values). Linear, no recursion, no allocation but the list of pieces.

/// The pieces of `bytes`: a value ends where its brackets close outside strings, a string at
/// its closing quote, anything else at whitespace or where a bracket or quote begins the next.
/// Bytes that are no value still form a piece.
pub fn split_values(bytes: &[u8]) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let end = value_end(bytes, i);
        pieces.push(&bytes[i..end]);
        i = end;
    }
    pieces
}

/// Where the value that begins at `start` ends (see [`split_values`]).
fn value_end(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        let c = bytes[i];
        if depth == 0 && i > start && (c.is_ascii_whitespace() || matches!(c, b'[' | b'{' | b'"')) {
            return i;
        }
        match c {
            b'"' => {
                i = string_end(bytes, i);
                if depth == 0 {
                    return i;
                }
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' if depth <= 1 => return i + 1,
            b']' | b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// Just past the string that opens at `start` (or the end of `bytes` if it never closes).
pub fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_cut_into_its_values() {
        let cut = |text: &str| -> Vec<String> {
            split_values(text.as_bytes())
                .into_iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect()
        };
        assert_eq!(
            cut(" 1 2\n[3, [4]]{\"a\":\"]}\\\"\"}"),
            ["1", "2", "[3, [4]]", r#"{"a":"]}\""}"#]
        );
        assert_eq!(cut("1[2]\"s\"true"), ["1", "[2]", "\"s\"", "true"]);
        assert_eq!(cut(""), Vec::<String>::new());
        assert_eq!(cut(" \n\t"), Vec::<String>::new());
        // What is no value still forms pieces, for the worker to refuse with its position.
        assert_eq!(cut("[1, 2"), ["[1, 2"]);
        assert_eq!(cut("] x"), ["]", "x"]);
        assert_eq!(cut("\"open"), ["\"open"]);
    }
}
