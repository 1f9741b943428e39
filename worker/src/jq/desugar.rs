//! jq syntax that jaq's parser lacks, rewritten into syntax it has, on the filter's tokens
//! before jaq sees the text. A filter without any of it is returned unchanged (borrowed).
//!
//! - `$__loc__` becomes `{"file":"<top-level>","line":N}`, N the line it is on.
//! - `$name: pattern` in an object pattern becomes `"name": $name, "name": pattern`.
//! - `TERM as P1 ?// P2 ?// … | BODY` becomes
//!   `TERM as $__jqjail_alt | . as $__jqjail_dot | try (ALT1) catch ($__jqjail_dot | try …)`,
//!   where ALTi is `$__jqjail_alt as Pi | null as $v | … | (BODY)` with every variable of
//!   the other patterns bound to `null`: jq's meaning, where an error in a pattern or in
//!   the body moves on to the next alternative and the last one's error is the error.
//!
//! The rewrite copies the body once per alternative, so its output is bounded: past
//! [`MAX_EXPANDED`] bytes the filter is refused rather than grown.
//!
//! Then [`wrap_updates`] groups every update (`L |= R`, `L = R`, `L += R`, …) as jq's grammar
//! does, `(L |= (R))`, and makes `L` `_jqjail_modify(L)` where jaq's update could answer
//! otherwise ([`super::modify`]): `. |= empty`, `.. |= f`, `(.[0], .[1]) |= empty` and
//! `.a // .b |= 5` then answer as in jq. A binder after an operator is grouped as jq binds it
//! (`2 * (. as $x | …)`). It inserts 16 bytes at most per operator or binder.

use std::borrow::Cow;

/// The longest text a rewrite may produce.
pub const MAX_EXPANDED: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    /// A name or keyword (`as`, `if`, `map`, `@csv`).
    Word,
    /// A name right after `.` (`.end`) or an object key (`{if: 1}`, `{end}`): never a
    /// keyword.
    Field,
    /// A variable (`$x`).
    Var,
    /// Opens a group: `(`, `[`, `{`, `if`, or `\(` inside a string.
    Open,
    /// Closes a group: `)`, `]`, `}`, `end`.
    Close,
    /// `?//`.
    Alt,
    /// Anything else: punctuation, numbers, string text.
    Other,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

/// The tokens of `code` that matter here; string text and comments are skipped. A filter
/// that does not lex is left to jaq, which says why.
fn tokens(code: &str) -> Option<Vec<Token>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    // For each open group, whether it is a string interpolation (whose `)` resumes the string).
    let mut groups: Vec<bool> = Vec::new();
    let mut i = 0;
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let push = |out: &mut Vec<Token>, tok, start, end| out.push(Token { tok, start, end });
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i = string_rest(b, i + 1, &mut groups, &mut out)?;
            }
            b'(' | b'[' | b'{' => {
                groups.push(false);
                push(&mut out, Tok::Open, start, i + 1);
                i += 1;
            }
            b')' | b']' | b'}' => {
                let interpolation = groups.pop()?;
                push(&mut out, Tok::Close, start, i + 1);
                i += 1;
                if interpolation {
                    i = string_rest(b, i, &mut groups, &mut out)?;
                }
            }
            b'?' if b[i..].starts_with(b"?//") => {
                push(&mut out, Tok::Alt, start, i + 3);
                i += 3;
            }
            b'$' => {
                i += 1;
                while i < b.len() && (word(b[i]) || b[i] == b':' && b.get(i + 1) == Some(&b':')) {
                    i += if b[i] == b':' { 2 } else { 1 };
                }
                push(&mut out, Tok::Var, start, i);
            }
            c if word(c) || c == b'@' => {
                i += 1;
                while i < b.len() && (word(b[i]) || b[i] == b':' && b.get(i + 1) == Some(&b':')) {
                    i += if b[i] == b':' { 2 } else { 1 };
                }
                // An object key: after `{` or `,`, and before `:`, `,` or `}` (`{if: 1}`,
                // `{end}`); a keyword elsewhere before `:` is one (`.[if . then 1 end:]`).
                let rest = code[i..].trim_start();
                let key = code[..start].trim_end().ends_with(['{', ','])
                    && (rest.starts_with([',', '}'])
                        || (rest.starts_with(':') && !rest.starts_with("::")));
                let field = (start > 0 && b[start - 1] == b'.') || key;
                let tok = match &code[start..i] {
                    _ if field => Tok::Field,
                    "if" => {
                        groups.push(false);
                        Tok::Open
                    }
                    "end" => {
                        groups.pop()?;
                        Tok::Close
                    }
                    _ => Tok::Word,
                };
                push(&mut out, tok, start, i);
            }
            _ => {
                // A whole character, so that every token's text is a slice of `code`.
                let len = code[i..].chars().next().map_or(1, char::len_utf8);
                push(&mut out, Tok::Other, start, i + len);
                i += len;
            }
        }
    }
    groups.is_empty().then_some(out)
}

/// Skips string text from `i` (just inside the quotes or after an interpolation's `)`) to
/// the closing quote, or to an interpolation's `\(`, which opens a group.
fn string_rest(
    b: &[u8],
    mut i: usize,
    groups: &mut Vec<bool>,
    out: &mut Vec<Token>,
) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' if b.get(i + 1) == Some(&b'(') => {
                groups.push(true);
                out.push(Token {
                    tok: Tok::Open,
                    start: i,
                    end: i + 2,
                });
                return Some(i + 2);
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// Whether `code` may hold anything [`desugar`] rewrites: `$__loc__`, `?//`, a `$name:`
/// pattern or a `.` before a digit. Most filters hold none, and skip the tokenizer.
fn might_need_rewrite(code: &str) -> bool {
    let b = code.as_bytes();
    memchr::memchr2_iter(b'$', b'.', b).any(|i| match b[i] {
        b'.' => b.get(i + 1).is_some_and(u8::is_ascii_digit),
        _ => {
            let rest = &b[i + 1..];
            let name = rest
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            rest.starts_with(b"__loc__") || rest[name..].trim_ascii_start().starts_with(b":")
        }
    }) || code.contains("?//")
}

/// Rewrites what jaq cannot parse, or says why it cannot be rewritten.
pub fn desugar(code: &str) -> Result<Cow<'_, str>, String> {
    // jqjail's helpers are called by the rewrites: a filter may not define its own. Read on
    // the tokens (strings and comments are not definitions).
    let defines_helper = code.contains("_jqjail_")
        && match tokens(code) {
            Some(toks) => (1..toks.len()).any(|i| {
                toks[i - 1].tok == Tok::Word
                    && text(code, &toks, i - 1) == "def"
                    && text(code, &toks, i).starts_with("_jqjail_")
            }),
            // Nothing is rewritten in a filter that does not lex, so nothing calls a helper.
            None => false,
        };
    if defines_helper {
        return Err(
            "a definition named `_jqjail_…`: names starting with `_jqjail_` are \
                    reserved for jqjail's own helpers"
                .into(),
        );
    }
    if !might_need_rewrite(code) {
        return Ok(Cow::Borrowed(code));
    }
    let Some(toks) = tokens(code) else {
        return Ok(Cow::Borrowed(code));
    };
    // The rewrites in place, all in one pass; then the patterns, one `as` a pass (each
    // pass removes a `?//` or a `$name:`, so this ends; the count is bounded anyway).
    let mut text = in_place(code, &toks);
    for _ in 0..MAX_PASSES {
        let Some(toks) = tokens(&text) else {
            return Ok(text);
        };
        let Some(next) = rewrite_pattern(&text, &toks)? else {
            return Ok(text);
        };
        if next.len() > MAX_EXPANDED {
            return Err(format!(
                "the filter's `?//` alternatives expand to over {MAX_EXPANDED} bytes"
            ));
        }
        text = Cow::Owned(next);
    }
    Err(format!(
        "the filter has over {MAX_PASSES} destructuring patterns (`?//`, `{{$name: …}}`) to rewrite"
    ))
}

/// The most `as` patterns one filter may have rewritten.
const MAX_PASSES: usize = 1024;

/// `$__loc__` and `.5` rewritten where they stand, in one pass.
fn in_place<'a>(code: &'a str, toks: &[Token]) -> Cow<'a, str> {
    let text = |t: &Token| &code[t.start..t.end];
    let mut out = String::new();
    let (mut copied, mut line, mut counted) = (0, 1, 0);
    let mut changed = false;
    for t in toks {
        let with = if t.tok == Tok::Var && text(t) == "$__loc__" {
            line += code[counted..t.start].matches('\n').count();
            counted = t.start;
            format!("{{\"file\":\"<top-level>\",\"line\":{line}}}")
        } else if t.tok == Tok::Other
            && text(t) == "."
            && code.as_bytes().get(t.end).is_some_and(u8::is_ascii_digit)
            && !code[..t.start]
                .bytes()
                .next_back()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            // `.5` is jq's number 0.5; jaq reads only `0.5`.
            "0.".to_string()
        } else {
            continue;
        };
        out.push_str(&code[copied..t.start]);
        out.push_str(&with);
        copied = t.end;
        changed = true;
    }
    if !changed {
        return Cow::Borrowed(code);
    }
    out.push_str(&code[copied..]);
    Cow::Owned(out)
}

/// The text of token `i`.
fn text<'a>(code: &'a str, toks: &[Token], i: usize) -> &'a str {
    &code[toks[i].start..toks[i].end]
}

/// Whether tokens `i` and `i + 1` touch and read `a` and `b` (`//`, `==`, `|=`).
fn pair(code: &str, toks: &[Token], i: usize, a: &str, b: &str) -> bool {
    i + 1 < toks.len()
        && toks[i].end == toks[i + 1].start
        && text(code, toks, i) == a
        && text(code, toks, i + 1) == b
}

/// The tokens on the level of a walk's first one, in the walk's order (`idx` forward, or
/// backward with `forward` false): `Ok(i)` for each (the groups inside are passed over
/// whole), then `Err(i)` for the token that ends the level (the one that closes its group
/// going forward, opens it going backward), where the walk stops.
fn level(
    toks: &[Token],
    idx: impl Iterator<Item = usize>,
    forward: bool,
) -> impl Iterator<Item = Result<usize, usize>> {
    let (inward, outward) = match forward {
        true => (Tok::Open, Tok::Close),
        false => (Tok::Close, Tok::Open),
    };
    let (mut depth, mut done) = (0usize, false);
    idx.map_while(move |i| {
        if done {
            return None;
        }
        let tok = toks[i].tok;
        Some(if tok == inward {
            depth += 1;
            None
        } else if tok == outward && depth == 0 {
            done = true;
            Some(Err(i))
        } else if tok == outward {
            depth -= 1;
            None
        } else {
            (depth == 0).then_some(Ok(i))
        })
    })
    .flatten()
}

/// The update operator (`|=`, `=`, `+=`, `-=`, `*=`, `/=`, `%=`, `//=`) whose `=` is token
/// `k`, as the index of its first token; `None` if that `=` is part of a comparison.
fn update_op(code: &str, toks: &[Token], k: usize) -> Option<usize> {
    if toks[k].tok != Tok::Other || text(code, toks, k) != "=" || pair(code, toks, k, "=", "=") {
        return None;
    }
    let before = |i: usize| (i > 0 && toks[i - 1].end == toks[i].start).then(|| i - 1);
    let Some(p) = before(k).filter(|p| toks[*p].tok == Tok::Other) else {
        return Some(k);
    };
    match text(code, toks, p) {
        "=" | "!" | "<" | ">" => None,
        "/" if before(p).is_some_and(|q| text(code, toks, q) == "/") => Some(p - 1),
        "|" | "+" | "-" | "*" | "/" | "%" => Some(p),
        _ => Some(k),
    }
}

/// Where the left-hand side of the update whose first token is `op` starts: just past the
/// nearest token before it, at the same depth, that binds more loosely than an update in jq
/// (`|`, `,`, `//`, `;`, `:`, another update, `then`, `elif`, `else`, `def`, or the group it
/// is in). `try … catch …` binds tighter (`try .a |= 1` updates `try .a`).
fn update_lhs_start(code: &str, toks: &[Token], op: usize) -> usize {
    for step in level(toks, (0..op).rev(), false) {
        let j = match step {
            Ok(j) => j,
            Err(open) => return toks[open].end,
        };
        let boundary = match toks[j].tok {
            Tok::Alt => true,
            Tok::Word => matches!(text(code, toks, j), "then" | "elif" | "else" | "def"),
            Tok::Other => match text(code, toks, j) {
                "|" | "," | ";" | ":" => true,
                "/" => j > 0 && pair(code, toks, j - 1, "/", "/"),
                "=" => update_op(code, toks, j).is_some(),
                _ => false,
            },
            _ => false,
        };
        if boundary {
            return toks[j].end;
        }
    }
    0
}

/// Where the right-hand side of the update whose `=` is token `eq` ends, by jq's grammar: at
/// the first token after it, at the same depth, that binds as loosely as an update or more
/// (`|`, `,`, `//`, `;`, another update, `then`, `elif`, `else`, `catch`, the end of its
/// group); a binder (`E as $x | …`, `label $x | …`, `def f: …;`) takes the rest of the group.
fn update_rhs_end(code: &str, toks: &[Token], eq: usize) -> usize {
    let mut trys = 0usize;
    for step in level(toks, eq + 1..toks.len(), true) {
        let j = match step {
            Ok(j) => j,
            Err(close) => return toks[close].start,
        };
        match (toks[j].tok, text(code, toks, j)) {
            (Tok::Word, "try") => trys += 1,
            (Tok::Word, "catch") if trys > 0 => trys -= 1,
            (Tok::Word, "then" | "elif" | "else" | "catch") => return toks[j].start,
            (Tok::Word, "label" | "def") => return group_end(code, toks, j),
            (Tok::Word, "as") if binds(code, toks, j) => return group_end(code, toks, j),
            (Tok::Alt, _) | (Tok::Other, "|" | "," | ";" | ":") => return toks[j].start,
            (Tok::Other, "/") if pair(code, toks, j, "/", "/") => return toks[j].start,
            (Tok::Other, "=") => {
                if let Some(op) = update_op(code, toks, j) {
                    return toks[op].start;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Whether the `as` at token `j` starts a binder (`… as $x | body`), not `reduce`'s or
/// `foreach`'s (`… as $x (…)`).
fn binds(code: &str, toks: &[Token], j: usize) -> bool {
    let Some(mut end) = pattern_end(toks, j + 1) else {
        return false;
    };
    while toks.get(end).is_some_and(|t| t.tok == Tok::Alt) {
        match pattern_end(toks, end + 1) {
            Some(e) => end = e,
            None => return false,
        }
    }
    end < toks.len() && toks[end].tok == Tok::Other && text(code, toks, end) == "|"
}

/// Where the group that token `j` is in ends: its closing token, or the `;`, `then`, `elif`,
/// `else` or `catch` that ends the part it is in, or the end of the text. The `;` that ends
/// a `def` (`j`'s own included) is the definition's, and a `catch` after a `try` is the
/// `try`'s: neither is the end.
fn group_end(code: &str, toks: &[Token], j: usize) -> usize {
    let (mut defs, mut trys) = (0usize, 0usize);
    for step in level(toks, j..toks.len(), true) {
        let i = match step {
            Ok(i) => i,
            Err(close) => return toks[close].start,
        };
        match (toks[i].tok, text(code, toks, i)) {
            (Tok::Word, "def") => defs += 1,
            (Tok::Word, "try") => trys += 1,
            (Tok::Word, "catch") if trys > 0 => trys -= 1,
            (Tok::Other, ";") if defs > 0 => defs -= 1,
            (Tok::Other | Tok::Word, ";" | "then" | "elif" | "else" | "catch") => {
                return toks[i].start;
            }
            _ => {}
        }
    }
    code.len()
}

/// Whether `lhs` is a chain of steps from `.`, each `.name`, `."text"`, `.[]`, `[N]`,
/// `["text"]`, `[$var]` or a slice of those, any with `?`: a left-hand side whose update is
/// the same in jaq as in jq. `.` alone, `..`, a comma, a call or a computed key is not.
fn plain_chain(lhs: &str) -> bool {
    let b = lhs.as_bytes();
    let mut i = 0;
    let mut steps = 0;
    let name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // A string without escapes or interpolations, from its opening quote; its end.
    let plain_string = |i: usize| -> Option<usize> {
        let close = i + 1 + b[i + 1..].iter().position(|c| *c == b'"')?;
        (!b[i + 1..close].contains(&b'\\')).then_some(close + 1)
    };
    // An index: empty, an integer, a plain string or a variable; its end.
    let simple = |mut i: usize| -> Option<usize> {
        match b.get(i)? {
            b'"' => plain_string(i),
            b'$' => {
                i += 1;
                let start = i;
                while i < b.len() && name(b[i]) {
                    i += 1;
                }
                (i > start).then_some(i)
            }
            _ => {
                if b[i] == b'-' {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                Some(i)
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'.' if b
                .get(i + 1)
                .is_some_and(|c| name(*c) && !c.is_ascii_digit()) =>
            {
                i += 1;
                while i < b.len() && name(b[i]) {
                    i += 1;
                }
            }
            b'.' if b.get(i + 1) == Some(&b'"') => match plain_string(i + 1) {
                Some(end) => i = end,
                None => return false,
            },
            b'.' if b.get(i + 1) == Some(&b'[') => i += 1,
            b'[' if steps > 0 || i > 0 => {
                let Some(mut j) = simple(i + 1) else {
                    return false;
                };
                if b.get(j) == Some(&b':') {
                    match simple(j + 1) {
                        Some(end) => j = end,
                        None => return false,
                    }
                }
                if b.get(j) != Some(&b']') {
                    return false;
                }
                i = j + 1;
            }
            b'?' if steps > 0 => {
                i += 1;
                continue;
            }
            _ => return false,
        }
        steps += 1;
    }
    steps > 0
}

/// `code` with every update (`L |= R`, `L = R`, `L += R`, …) in parentheses as jq groups it
/// (`(L |= (R))`: jaq's parser binds `//` and `as` differently), and its left-hand side in
/// `_jqjail_modify(…)` where jaq's update could differ from jq's: always for `|=`, whose `R`
/// may give no output or several, and for the others unless `L` is a [`plain_chain`]. A
/// binder after an operator is grouped as jq binds it too: `2 * . as $x | B` is
/// `2 *( . as $x | B)` (jaq reads `(2 * .) as $x | B`). Also where text was inserted:
/// (offset in `code`, length), in order. `None` if there is nothing to group. Run after
/// [`desugar`], on its text.
pub fn wrap_updates(code: &str) -> Option<(String, Vec<(usize, usize)>)> {
    // An `=` that is not part of `==`, `!=`, `<=` or `>=`: most filters have none.
    let b = code.as_bytes();
    let update = memchr::memchr_iter(b'=', b).any(|i| {
        b.get(i + 1) != Some(&b'=') && !(i > 0 && matches!(b[i - 1], b'=' | b'!' | b'<' | b'>'))
    });
    if !update && memchr::memmem::find(b, b"as").is_none() {
        return None;
    }
    let toks = tokens(code)?;
    let toks = &toks[..];
    // A comment may run up to where a group ends: it then closes on a line of its own.
    let closing = |end: usize, text: &'static str, commented: &'static str| {
        let before_end = toks.partition_point(|t| t.start < end);
        let after_last = before_end.checked_sub(1).map_or(0, |i| toks[i].end);
        let text = if code[after_last.min(end)..end].contains('#') {
            commented
        } else {
            text
        };
        (end, true, text)
    };
    // (byte offset, whether it closes, text); at one offset what closes comes first.
    let mut inserts: Vec<(usize, bool, &str)> = Vec::new();
    for k in 0..toks.len() {
        if toks[k].tok == Tok::Word && text(code, toks, k) == "as" && binds(code, toks, k) {
            // The token before the binder's term, on its level: an operator binds the term
            // alone in jq (`2 * . as $x | …`), and all it is in in jaq.
            let before = level(toks, (0..k).rev(), false)
                .map_while(Result::ok)
                .find(|&j| !term_part(code, toks, j))
                .filter(|&j| match (toks[j].tok, text(code, toks, j)) {
                    (Tok::Other, "+" | "-" | "*" | "/" | "%" | "<" | ">") => true,
                    // A comparison's; an update's right-hand side is grouped as a whole.
                    (Tok::Other, "=") => update_op(code, toks, j).is_none(),
                    (Tok::Word, "and" | "or") => true,
                    _ => false,
                });
            if let Some(op) = before {
                inserts.push((toks[op].end, false, "("));
                inserts.push(closing(group_end(code, toks, k), ")", "\n)"));
            }
            continue;
        }
        let Some(op) = update_op(code, toks, k) else {
            continue;
        };
        let start = update_lhs_start(code, toks, op);
        let lhs = code[start..toks[op].start].trim();
        if lhs.is_empty() {
            continue;
        }
        let modify = &code[toks[op].start..toks[k].end] == "|=" || !plain_chain(lhs);
        if modify {
            inserts.push((start, false, " (_jqjail_modify("));
            inserts.push((toks[op].start, true, ")"));
        } else {
            inserts.push((start, false, " ("));
        }
        inserts.push((toks[k].end, false, "("));
        inserts.push(closing(update_rhs_end(code, toks, k), "))", "\n))"));
    }
    if inserts.is_empty() {
        return None;
    }
    inserts.sort_by_key(|(at, closes, _)| (*at, !*closes));
    let mut out = String::with_capacity(code.len() + inserts.len() * 16);
    let mut copied = 0;
    for (at, _, text) in &inserts {
        out.push_str(&code[copied..*at]);
        out.push_str(text);
        copied = *at;
    }
    out.push_str(&code[copied..]);
    Some((
        out,
        inserts.iter().map(|(at, _, t)| (*at, t.len())).collect(),
    ))
}

/// Whether token `j` is part of a term (`.a`, `$x[0]?`, `f(…)`, `1.5e-3`) to a walk that has
/// passed over the groups in it.
fn term_part(code: &str, toks: &[Token], j: usize) -> bool {
    match (toks[j].tok, text(code, toks, j)) {
        (Tok::Field | Tok::Var, _) | (Tok::Other, "." | "?") => true,
        (Tok::Word, word) => !matches!(
            word,
            "and"
                | "or"
                | "then"
                | "elif"
                | "else"
                | "try"
                | "catch"
                | "reduce"
                | "foreach"
                | "def"
                | "label"
                | "as"
        ),
        // The sign of a number's exponent (`1e-3`).
        (Tok::Other, "-" | "+") => {
            j > 0 && toks[j - 1].end == toks[j].start && {
                let w = text(code, toks, j - 1);
                w.starts_with(|c: char| c.is_ascii_digit()) && w.ends_with(['e', 'E'])
            }
        }
        _ => false,
    }
}

/// The offset in the text [`wrap_updates`] was given of `offset` in the text it made.
pub fn unwrapped_offset(offset: usize, inserted: &[(usize, usize)]) -> usize {
    let mut shift = 0;
    for (at, len) in inserted {
        if at + shift + len > offset {
            break;
        }
        shift += len;
    }
    offset - shift
}

/// The text with the first `as` whose patterns need it rewritten, or `None`.
fn rewrite_pattern(code: &str, toks: &[Token]) -> Result<Option<String>, String> {
    let text = |t: &Token| &code[t.start..t.end];
    for (n, t) in toks.iter().enumerate() {
        if t.tok == Tok::Word
            && text(t) == "as"
            && let Some(out) = rewrite_as(code, toks, n)?
        {
            return Ok(Some(out));
        }
    }
    Ok(None)
}

fn splice(code: &str, start: usize, end: usize, with: &str) -> String {
    let mut out = String::with_capacity(code.len() + with.len());
    out.push_str(&code[..start]);
    out.push_str(with);
    out.push_str(&code[end..]);
    out
}

/// The index just past the pattern starting at token `i`.
fn pattern_end(toks: &[Token], i: usize) -> Option<usize> {
    match toks.get(i)?.tok {
        Tok::Var => Some(i + 1),
        Tok::Open => {
            let mut depth = 0usize;
            for (j, t) in toks.iter().enumerate().skip(i) {
                match t.tok {
                    Tok::Open => depth += 1,
                    Tok::Close => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        _ => None,
    }
}

/// Rewrites the patterns after the `as` at token `n`: `$name:` shorthands, then `?//`.
fn rewrite_as(code: &str, toks: &[Token], n: usize) -> Result<Option<String>, String> {
    let text = |t: &Token| &code[t.start..t.end];
    let mut patterns = Vec::new();
    let mut i = n + 1;
    loop {
        let Some(end) = pattern_end(toks, i) else {
            return Ok(None);
        };
        patterns.push((i, end));
        // `$name: pattern` inside an object pattern.
        for j in i..end {
            if toks[j].tok == Tok::Var && toks.get(j + 1).is_some_and(|t| text(t) == ":") && j > i {
                let name = &text(&toks[j])[1..];
                let with = format!("\"{name}\": ${name}, \"{name}\":");
                return Ok(Some(splice(code, toks[j].start, toks[j + 1].end, &with)));
            }
        }
        match toks.get(end) {
            Some(t) if t.tok == Tok::Alt => i = end + 1,
            _ => break,
        }
    }
    if patterns.len() == 1 {
        return Ok(None);
    }
    let after = patterns.last().expect("two patterns or more").1;
    match toks.get(after) {
        Some(t) if text(t) == "|" => {}
        _ => {
            return Err(
                "`?//` (destructuring alternatives) is supported by jqjail only in `TERM as P1 ?// P2 | BODY`, not in reduce or foreach"
                    .to_string(),
            );
        }
    }
    // The body runs to the end of the enclosing group.
    let mut depth = 0usize;
    let mut body_end = code.len();
    for t in &toks[after + 1..] {
        match t.tok {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => {
                body_end = t.start;
                break;
            }
            Tok::Close => depth -= 1,
            Tok::Other | Tok::Word
                if depth == 0 && matches!(text(t), ";" | "then" | "elif" | "else") =>
            {
                body_end = t.start;
                break;
            }
            _ => {}
        }
    }
    let body = &code[toks[after].end..body_end];
    let vars_of = |(s, e): (usize, usize)| -> Vec<&str> {
        toks[s..e]
            .iter()
            .filter(|t| t.tok == Tok::Var)
            .map(text)
            .collect()
    };
    let mut all: Vec<&str> = Vec::new();
    for p in &patterns {
        for v in vars_of(*p) {
            if !all.contains(&v) {
                all.push(v);
            }
        }
    }
    let alt = |p: (usize, usize)| {
        let own = vars_of(p);
        let mut s = format!(
            "$__jqjail_alt as {} | ",
            &code[toks[p.0].start..toks[p.1 - 1].end]
        );
        for v in all.iter().filter(|v| !own.contains(v)) {
            s.push_str(&format!("null as {v} | "));
        }
        s.push('(');
        s.push_str(body);
        // The body may end in a comment: the parenthesis then closes on a line of its own.
        if body.contains('#') {
            s.push('\n');
        }
        s.push(')');
        s
    };
    let mut nested = alt(*patterns.last().expect("two patterns or more"));
    for p in patterns.iter().rev().skip(1) {
        nested = format!("try ({}) catch ($__jqjail_dot | {nested})", alt(*p));
    }
    let with = format!("as $__jqjail_alt | . as $__jqjail_dot | {nested}");
    Ok(Some(splice(code, toks[n].start, body_end, &with)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_filters_are_borrowed_unchanged() {
        for f in [
            ".a",
            ".[] as $x | $x",
            "\"a ?// b\"",
            ".a? // 1",
            ". as [$a, $b] | $a",
            "1.5",
            "{a: $x}",
        ] {
            assert!(matches!(desugar(f), Ok(Cow::Borrowed(s)) if s == f), "{f}");
        }
        assert!(!might_need_rewrite(".a | map(.b) | {x: $y}"));
    }

    #[test]
    fn loc_names_its_line() {
        assert_eq!(
            desugar("1,\n$__loc__").unwrap(),
            "1,\n{\"file\":\"<top-level>\",\"line\":2}"
        );
        assert_eq!(
            desugar(r#""\($__loc__)""#).unwrap(),
            r#""\({"file":"<top-level>","line":1})""#
        );
        assert_eq!(
            desugar("$__loc__,\n\n$__loc__.line").unwrap(),
            "{\"file\":\"<top-level>\",\"line\":1},\n\n{\"file\":\"<top-level>\",\"line\":3}.line"
        );
    }

    /// Many constructs cost one pass, not one pass each.
    #[test]
    fn rewrites_in_place_take_one_pass() {
        let f = vec![".5"; 20_000].join(",");
        let out = desugar(&f).unwrap();
        assert_eq!(out.matches("0.5").count(), 20_000);
        let many = vec![". as {$a: $b} | $b"; MAX_PASSES + 1].join(", ");
        assert!(
            desugar(&many)
                .unwrap_err()
                .contains("destructuring patterns")
        );
    }

    #[test]
    fn numbers_may_start_with_a_point() {
        assert_eq!(desugar("select(. > .5)").unwrap(), "select(. > 0.5)");
        assert_eq!(desugar("1.5 + .25").unwrap(), "1.5 + 0.25");
        assert_eq!(
            desugar(".a.b, .[0], .. , \".5\"").unwrap(),
            ".a.b, .[0], .. , \".5\""
        );
    }

    #[test]
    fn object_pattern_shorthand() {
        assert_eq!(
            desugar(". as {$a, $b:[$c]} | $b").unwrap(),
            r#". as {$a, "b": $b, "b":[$c]} | $b"#
        );
    }

    #[test]
    fn alternatives_become_try_catch() {
        let out = desugar(".[] as [$a] ?// $b | [$a, $b]").unwrap();
        assert_eq!(
            out,
            ".[] as $__jqjail_alt | . as $__jqjail_dot | try ($__jqjail_alt as [$a] | null as $b | ( [$a, $b])) catch ($__jqjail_dot | $__jqjail_alt as $b | null as $a | ( [$a, $b]))"
        );
    }

    /// Every update is grouped as jq groups it, and its left-hand side is wrapped where jaq's
    /// update could answer otherwise; keywords as field names are names.
    #[test]
    fn updates_are_grouped_as_jq_groups_them() {
        for f in [
            ".a == 1",
            ".a != 1 and .b <= 2 or .c >= 3",
            "\"x |= 1\" # .. |= 1",
        ] {
            assert_eq!(wrap_updates(f), None, "{f}");
        }
        for (f, want) in [
            (".a |= 1", " (_jqjail_modify(.a )|=( 1))"),
            (".a.b[0]? = 2", " (.a.b[0]? =( 2))"),
            (".[] += 1", " (.[] +=( 1))"),
            ("(.a, .b) = 1", " (_jqjail_modify((.a, .b) )=( 1))"),
            (".a | .b[.c] -= 1", ".a | (_jqjail_modify( .b[.c] )-=( 1))"),
            ("1, .[0,1] *= 2", "1, (_jqjail_modify( .[0,1] )*=( 2))"),
            ("x // .. /= 2", "x // (_jqjail_modify( .. )/=( 2))"),
            (".a = null // 5", " (.a =( null ))// 5"),
            (
                "[.[] | .a |= 1 // 2]",
                "[.[] | (_jqjail_modify( .a )|=( 1 ))// 2]",
            ),
            (
                ".a |= 1 as $x | $x + 1",
                " (_jqjail_modify(.a )|=( 1 as $x | $x + 1))",
            ),
            (
                ".a |= reduce .[] as $x (0; . + $x) | .b",
                " (_jqjail_modify(.a )|=( reduce .[] as $x (0; . + $x) ))| .b",
            ),
            (
                ".a |= def f: 1; f, 2",
                " (_jqjail_modify(.a )|=( def f: 1; f, 2))",
            ),
            (
                ".a |= try error catch 5, 2",
                " (_jqjail_modify(.a )|=( try error catch 5)), 2",
            ),
            ("try .a |= 1", " (_jqjail_modify(try .a )|=( 1))"),
            (
                "if . then .. %= 2 else . end",
                "if . then (_jqjail_modify( .. )%=( 2 ))else . end",
            ),
            (
                ".if, .x, .end |= 1",
                ".if, .x, (_jqjail_modify( .end )|=( 1))",
            ),
            (
                ".x.then[0,1] |= 1",
                " (_jqjail_modify(.x.then[0,1] )|=( 1))",
            ),
            (
                "{end: 1} as $x | [. |= empty]",
                "{end: 1} as $x | [ (_jqjail_modify(. )|=( empty))]",
            ),
            (
                "a and .. # why\n|= 1",
                " (_jqjail_modify(a and .. # why\n)|=( 1))",
            ),
            (
                "(. |= 1) |= 2",
                " (_jqjail_modify(( (_jqjail_modify(. )|=( 1))) )|=( 2))",
            ),
            ("\"\\(. |= 1)\"", "\"\\( (_jqjail_modify(. )|=( 1)))\""),
            (".a |= 1 # set a", " (_jqjail_modify(.a )|=( 1 # set a\n))"),
            (
                ".a |= . as $v | try tonumber catch $v",
                " (_jqjail_modify(.a )|=( . as $v | try tonumber catch $v))",
            ),
            (
                ".a = null // 5, .[if true then 1 else 0 end:]",
                " (.a =( null ))// 5, .[if true then 1 else 0 end:]",
            ),
            ("{end} as $o | .a = 1", "{end} as $o | ( .a =( 1))"),
            ("2 * . as $x | $x + 1", "2 *( . as $x | $x + 1)"),
            (
                ".a |= 2 * .b as $x | $x",
                " (_jqjail_modify(.a )|=( 2 *( .b as $x | $x)))",
            ),
            (
                "[1 == $y.a[0]? as $x | $x, 2] | 3",
                "[1 ==( $y.a[0]? as $x | $x, 2)] | 3",
            ),
            (
                "true and f(1) as $x | $x # c",
                "true and( f(1) as $x | $x # c\n)",
            ),
        ] {
            let (out, inserted) = wrap_updates(f).unwrap();
            assert_eq!(out, want, "{f}");
            // The filter's own text maps back to where it was: the last `=` (or `$`), and
            // what is just after it (past a `(` put there).
            let anchor = if f.contains('=') { '=' } else { '$' };
            let (at, orig) = (out.rfind(anchor).unwrap(), f.rfind(anchor).unwrap());
            assert_eq!(unwrapped_offset(at, &inserted), orig, "{f}");
            let next = at + 1 + usize::from(out[at + 1..].starts_with('('));
            assert_eq!(unwrapped_offset(next, &inserted), orig + 1, "{f}");
        }
    }

    /// A character outside the ASCII range, outside a string, is one token: its text is a
    /// slice of the filter (slicing inside it panicked, and a worker's panic is its death).
    #[test]
    fn characters_beyond_ascii_are_whole_tokens() {
        assert!(wrap_updates(".a = 1 | é").is_some());
        assert!(wrap_updates("é |= 1 | ü").is_some());
        assert!(desugar("$x é $__loc__ ü").is_ok());
        for f in ["é", "\u{1F600} .a |= 1", ".[é] = 1", "$é", "\"é\" |= é"] {
            let _ = desugar(f);
            let _ = wrap_updates(f);
        }
    }

    #[test]
    fn helpers_names_are_reserved() {
        assert!(desugar("def _jqjail_modify(f): 42; (.a, .b) |= 1").is_err());
        assert!(desugar("def\n  _jqjail_x: 1; 2").is_err());
        assert!(desugar("def # c\n_jqjail_modify(f): 42; .a |= 1").is_err());
        assert!(desugar("def undef_jqjail_x: 1; 2").is_ok());
        assert!(desugar(r#""def _jqjail_x" # def _jqjail_y"#).is_ok());
        // A filter that does not lex gets jaq's parse error, not the reservation.
        assert!(desugar(r#""_jqjail_" | ("#).is_ok());
    }

    #[test]
    fn expansion_is_bounded() {
        // Each level copies the body three times: 3^14 copies of the innermost.
        let mut f = String::from("1");
        for _ in 0..14 {
            f = format!(". as [$a] ?// $a ?// {{a:$a}} | ({f})");
        }
        // Refused by the size bound or the pass bound, whichever comes first.
        let why = desugar(&f).unwrap_err();
        assert!(
            why.contains("expand") || why.contains("destructuring patterns"),
            "{why}"
        );
    }
}
