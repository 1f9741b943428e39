//! The path language (`lang: path`): the JMESPath-inspired subset of
//! dsh-tool-json, evaluated over the parsed input in the worker, under the same confinement as
//! jq filters.
//!
//! Grammar (no recursion anywhere: the parser is a loop, the evaluator walks a flat list of
//! steps with an explicit work stack for projections):
//!
//! ```text
//! query   := "" | first step*
//! first   := ident | bracket
//! step    := "." ident | bracket
//! bracket := "[" integer "]" | "[" quoted "]" | "[*]"
//! ident   := ( [A-Za-z0-9_$] | a non-ASCII character of the BMP )+
//! quoted  := "'" … "'" | '"' … '"'      escapes: \\ \' \"  (either quote form)
//! integer := "-"? ( "0" | [1-9][0-9]* ), a safe integer (|n| ≤ 2^53 − 1)
//! ```
//!
//! Semantics (dsh-tool-json's "semantic boundaries", kept exactly):
//! - `[*]` projects over an array only (an object or scalar is `TYPE_MISMATCH`); the rest of
//!   the path is applied to each element and the results are collected; nested wildcards give
//!   nested arrays, never flattened;
//! - inside a projection an element the rest of the path cannot find a property on (missing
//!   key, or not an object) is skipped (`MISSING_PROPERTY`); a property whose value is `null` is
//!   kept; type and index errors are raised;
//! - a negative index counts from the end (`[-1]` is the last element), as in JMESPath;
//! - keys such as `__proto__` and `constructor` are ordinary keys.
//!
//! Limits: query ≤ 200 characters, ≤ 20 steps ("parse depth"), input nesting ≤ 100, one
//! projection ≤ 100,000 elements; and, unlike the original, the output cap.
//! The empty query returns the whole input (as the original does), within the output cap.

use crate::engine::EvalError;
use jaq_json::Val;
use jqjail_protocol::ErrorCode;
use jqjail_protocol::limits::grouped;

/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 200;
/// Most steps in a query.
pub const MAX_STEPS: usize = 20;
/// Deepest input nesting the path language accepts.
pub const MAX_INPUT_DEPTH: u32 = 100;
/// Most elements one wildcard may project over.
pub const MAX_PROJECTION: usize = 100_000;
/// Largest array index: JavaScript's Number.MAX_SAFE_INTEGER.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// One step of a parsed query, with the query text it came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `.name`, `name` or `['name']`.
    Key(String),
    /// `[n]`.
    Index(i64),
    /// `[*]`.
    Wildcard,
}

/// A parsed query: its steps and, for each, the query text up to and including it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    steps: Vec<(Step, String)>,
}

fn invalid(message: String) -> EvalError {
    EvalError {
        code: ErrorCode::InvalidQuery,
        message,
        limit: None,
        actual: None,
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || (!c.is_ascii() && (c as u32) <= 0xFFFF)
}

/// Parses a query.
pub fn parse(query: &str) -> Result<Query, EvalError> {
    let chars: Vec<char> = query.chars().collect();
    if chars.len() > MAX_QUERY_CHARS {
        let mut e = invalid(format!(
            "query is {} characters, over the {MAX_QUERY_CHARS}-character limit",
            chars.len()
        ));
        e.limit = Some(MAX_QUERY_CHARS as u64);
        e.actual = Some(chars.len() as u64);
        return Err(e);
    }
    let mut steps = Vec::new();
    let mut i = 0;
    let at = |i: usize| format!("at character {} of the query", i + 1);
    while i < chars.len() {
        let start = i;
        let step = match chars[i] {
            '.' if steps.is_empty() => {
                return Err(invalid(format!(
                    "a query cannot start with `.` ({})",
                    at(i)
                )));
            }
            '.' => {
                i += 1;
                let begin = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                if i == begin {
                    return Err(invalid(format!(
                        "expected a property name after `.` ({}); names are letters, digits, `_`, `$` and non-ASCII characters; quote others as ['…']",
                        at(begin)
                    )));
                }
                Step::Key(chars[begin..i].iter().collect())
            }
            '[' => {
                i += 1;
                match chars.get(i) {
                    Some('*') => {
                        i += 1;
                        Step::Wildcard
                    }
                    Some(q @ ('\'' | '"')) => {
                        let quote = *q;
                        i += 1;
                        let mut key = String::new();
                        loop {
                            match chars.get(i) {
                                None => {
                                    return Err(invalid(format!(
                                        "unterminated quoted property ({})",
                                        at(start)
                                    )));
                                }
                                Some('\\') => match chars.get(i + 1) {
                                    Some(c @ ('\\' | '\'' | '"')) => {
                                        key.push(*c);
                                        i += 2;
                                    }
                                    other => {
                                        return Err(invalid(format!(
                                            "invalid escape `\\{}` ({}); only \\\\, \\' and \\\" are allowed",
                                            other.map_or(String::new(), |c| c.to_string()),
                                            at(i)
                                        )));
                                    }
                                },
                                Some(c) if *c == quote => {
                                    i += 1;
                                    break;
                                }
                                Some(c) => {
                                    key.push(*c);
                                    i += 1;
                                }
                            }
                        }
                        Step::Key(key)
                    }
                    Some(c) if c.is_ascii_digit() || *c == '-' => {
                        let begin = i;
                        if chars[i] == '-' {
                            i += 1;
                        }
                        let digits = i;
                        while i < chars.len() && chars[i].is_ascii_digit() {
                            i += 1;
                        }
                        let text: String = chars[begin..i].iter().collect();
                        let leading_zero = i - digits > 1 && chars[digits] == '0';
                        let value = text
                            .parse::<i64>()
                            .ok()
                            .filter(|v| v.abs() <= MAX_SAFE_INTEGER && i > digits && !leading_zero);
                        match value {
                            Some(v) => Step::Index(v),
                            None => {
                                return Err(invalid(format!(
                                    "`{text}` is not a safe integer index ({}); indexes are whole numbers of at most {} in magnitude without leading zeros",
                                    at(begin),
                                    grouped(MAX_SAFE_INTEGER as u64)
                                )));
                            }
                        }
                    }
                    _ => {
                        return Err(invalid(format!(
                            "expected an index, a quoted property or `*` after `[` ({})",
                            at(i)
                        )));
                    }
                }
            }
            c if is_ident_char(c) && steps.is_empty() => {
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                Step::Key(chars[start..i].iter().collect())
            }
            c => {
                return Err(invalid(format!(
                    "unexpected `{c}` ({}); expected `.name`, `[index]`, `['name']` or `[*]`",
                    at(i)
                )));
            }
        };
        if matches!(step, Step::Wildcard | Step::Index(_)) || chars.get(start) == Some(&'[') {
            if chars.get(i) != Some(&']') {
                return Err(invalid(format!("expected `]` ({})", at(i))));
            }
            i += 1;
        }
        steps.push((step, chars[..i].iter().collect()));
        if steps.len() > MAX_STEPS {
            let mut e = invalid(format!(
                "query has more than {MAX_STEPS} steps (the parse-depth limit); step {} ends {}",
                steps.len(),
                at(i - 1)
            ));
            e.limit = Some(MAX_STEPS as u64);
            e.actual = Some(steps.len() as u64);
            return Err(e);
        }
    }
    Ok(Query { steps })
}

fn type_name(v: &Val) -> &'static str {
    crate::output::type_name(v)
}

fn fail(code: ErrorCode, message: String) -> EvalError {
    EvalError {
        code,
        message,
        limit: None,
        actual: None,
    }
}

/// One frame of evaluation: apply steps `from..` to `value`; the result goes to `slot`.
struct Task<'v> {
    value: &'v Val,
    from: usize,
    /// Inside how many projections this task runs (0: none).
    depth: usize,
    slot: Slot,
}

/// Where a task's result goes: the final answer, or element `i` of projection `p`.
#[derive(Clone, Copy)]
enum Slot {
    Answer,
    Element { projection: usize, index: usize },
}

/// The results of one projection, filled in as its element tasks finish.
struct Projection {
    items: Vec<Option<Val>>,
    pending: usize,
    slot: Slot,
}

/// Evaluates a parsed query over `input`.
pub fn evaluate(query: &Query, input: &Val) -> Result<Val, EvalError> {
    let steps = &query.steps;
    let mut projections: Vec<Projection> = Vec::new();
    let mut answer: Option<Val> = None;
    let mut work = vec![Task {
        value: input,
        from: 0,
        depth: 0,
        slot: Slot::Answer,
    }];
    while let Some(task) = work.pop() {
        let mut value = task.value;
        let mut outcome: Result<Option<Val>, EvalError> = Ok(None);
        let mut i = task.from;
        let mut projected = false;
        while i < steps.len() {
            let (step, text) = &steps[i];
            match step {
                Step::Key(key) => match value {
                    Val::Obj(map) => match map.get(&Val::utf8_str(key.as_bytes().to_vec())) {
                        Some(v) => value = v,
                        None => {
                            outcome = Err(fail(
                                ErrorCode::MissingProperty,
                                format!("property `{key}` does not exist (at `{text}`)"),
                            ));
                            break;
                        }
                    },
                    // Inside a projection, an element that is not an object has no such
                    // property: it is skipped like a missing one.
                    other if task.depth > 0 => {
                        outcome = Err(fail(
                            ErrorCode::MissingProperty,
                            format!(
                                "a {} has no property `{key}` (at `{text}`)",
                                type_name(other)
                            ),
                        ));
                        break;
                    }
                    other => {
                        outcome = Err(fail(
                            ErrorCode::TypeMismatch,
                            format!(
                                "cannot read property `{key}` of a {} (at `{text}`)",
                                type_name(other)
                            ),
                        ));
                        break;
                    }
                },
                Step::Index(n) => match value {
                    Val::Arr(items) => {
                        let len = items.len() as i64;
                        let at = if *n < 0 { len + n } else { *n };
                        match usize::try_from(at).ok().and_then(|a| items.get(a)) {
                            Some(v) => value = v,
                            None => {
                                let mut e = fail(
                                    ErrorCode::IndexOutOfBounds,
                                    format!(
                                        "index {n} is outside an array of {len} elements (at `{text}`)"
                                    ),
                                );
                                e.limit = Some(len as u64);
                                outcome = Err(e);
                                break;
                            }
                        }
                    }
                    other => {
                        outcome = Err(fail(
                            ErrorCode::TypeMismatch,
                            format!(
                                "cannot index a {} with [{n}] (at `{text}`)",
                                type_name(other)
                            ),
                        ));
                        break;
                    }
                },
                Step::Wildcard => match value {
                    Val::Arr(items) => {
                        if items.len() > MAX_PROJECTION {
                            let mut e = fail(
                                ErrorCode::ProjectionTooLarge,
                                format!(
                                    "`[*]` would project over {} elements, over the {}-element limit (at `{text}`)",
                                    grouped(items.len() as u64),
                                    grouped(MAX_PROJECTION as u64)
                                ),
                            );
                            e.limit = Some(MAX_PROJECTION as u64);
                            e.actual = Some(items.len() as u64);
                            outcome = Err(e);
                            break;
                        }
                        let p = projections.len();
                        projections.push(Projection {
                            items: vec![None; items.len()],
                            pending: items.len(),
                            slot: task.slot,
                        });
                        // Pushed in reverse so that elements are evaluated in order.
                        for (index, item) in items.iter().enumerate().rev() {
                            work.push(Task {
                                value: item,
                                from: i + 1,
                                depth: task.depth + 1,
                                slot: Slot::Element {
                                    projection: p,
                                    index,
                                },
                            });
                        }
                        if items.is_empty() {
                            outcome = Ok(Some(Val::Arr(Default::default())));
                            projections.pop();
                        } else {
                            projected = true;
                        }
                        break;
                    }
                    other => {
                        outcome = Err(fail(
                            ErrorCode::TypeMismatch,
                            format!(
                                "`[*]` projects over arrays only, not a {} (at `{text}`)",
                                type_name(other)
                            ),
                        ));
                        break;
                    }
                },
            }
            i += 1;
        }
        if projected {
            continue;
        }
        let result = match outcome {
            Ok(Some(v)) => Some(v),
            Ok(None) => Some(value.clone()),
            // Inside a projection only a missing property is skipped.
            Err(e) if e.code == ErrorCode::MissingProperty && task.depth > 0 => None,
            Err(e) => return Err(e),
        };
        deliver(task.slot, result, &mut projections, &mut answer);
    }
    answer.ok_or_else(|| {
        fail(
            ErrorCode::Internal,
            "path evaluation produced no answer".into(),
        )
    })
}

/// Puts a finished result in its slot; completes projections whose last element arrived.
fn deliver(
    mut slot: Slot,
    mut result: Option<Val>,
    projections: &mut [Projection],
    answer: &mut Option<Val>,
) {
    loop {
        match slot {
            Slot::Answer => {
                *answer = result;
                return;
            }
            Slot::Element { projection, index } => {
                let p = &mut projections[projection];
                p.items[index] = result;
                p.pending -= 1;
                if p.pending > 0 {
                    return;
                }
                let items: Vec<Val> = std::mem::take(&mut p.items).into_iter().flatten().collect();
                result = Some(Val::Arr(jaq_json::Rc::new(items)));
                slot = p.slot;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(query: &str, input: &str) -> Result<String, (ErrorCode, String)> {
        let q = parse(query).map_err(|e| (e.code, e.message))?;
        let v = jaq_json::read::parse_single(input.as_bytes()).unwrap();
        let out = evaluate(&q, &v).map_err(|e| (e.code, e.message))?;
        let mut text = Vec::new();
        crate::output::write_value(&mut text, &out, usize::MAX).unwrap();
        Ok(String::from_utf8(text).unwrap())
    }

    fn code(query: &str, input: &str) -> ErrorCode {
        run(query, input).unwrap_err().0
    }

    const DOC: &str = r#"{"foo":{"bar":1},"items":[{"name":"a","tags":["x","y"]},{"name":"b","tags":["z"]},{"other":1},{"name":null}],"a-b":{"c d":2},"q'\"\\":3,"__proto__":{"x":1},"constructor":"c","日本":{"語":5},"$id":7,"n":[1,2,3]}"#;

    #[test]
    fn functional() {
        assert_eq!(run("foo.bar", DOC).unwrap(), "1");
        assert_eq!(run("foo", DOC).unwrap(), r#"{"bar":1}"#);
        assert_eq!(run("items[0].name", DOC).unwrap(), r#""a""#);
        assert_eq!(run("items[1]['name']", DOC).unwrap(), r#""b""#);
        assert_eq!(run(r#"items[1]["name"]"#, DOC).unwrap(), r#""b""#);
        assert_eq!(run("['a-b']['c d']", DOC).unwrap(), "2");
        assert_eq!(run("n[-1]", DOC).unwrap(), "3");
        assert_eq!(run("n[0]", DOC).unwrap(), "1");
        assert_eq!(run("日本.語", DOC).unwrap(), "5");
        assert_eq!(run("$id", DOC).unwrap(), "7");
        assert_eq!(run("", "[1]").unwrap(), "[1]");
        assert_eq!(run("[0]", "[[9]]").unwrap(), "[9]");
        assert_eq!(
            run("a.b[0].c.d", r#"{"a":{"b":[{"c":{"d":true}}]}}"#).unwrap(),
            "true"
        );
    }

    #[test]
    fn projections() {
        // Missing properties are skipped, a legal null is kept.
        assert_eq!(run("items[*].name", DOC).unwrap(), r#"["a","b",null]"#);
        // Nested wildcards give nested arrays.
        assert_eq!(
            run("items[*].tags[*]", DOC).unwrap(),
            r#"[["x","y"],["z"]]"#
        );
        assert_eq!(run("items[*].tags[0]", DOC).unwrap(), r#"["x","z"]"#);
        assert_eq!(run("n[*]", DOC).unwrap(), "[1,2,3]");
        assert_eq!(run("[*]", "[]").unwrap(), "[]");
        // Non-object elements are skipped for property access.
        assert_eq!(
            run("[*].a", r#"[1,{"a":2},"s",null,{"a":3}]"#).unwrap(),
            "[2,3]"
        );
        // Index errors inside a projection are raised.
        assert_eq!(code("items[*].tags[5]", DOC), ErrorCode::IndexOutOfBounds);
        assert_eq!(code("[*][0]", r#"[[1],{"a":1}]"#), ErrorCode::TypeMismatch);
        // Wildcard on an object or scalar.
        assert_eq!(code("foo[*]", DOC), ErrorCode::TypeMismatch);
        assert_eq!(code("[*]", "1"), ErrorCode::TypeMismatch);
    }

    #[test]
    fn errors() {
        assert_eq!(code("nope", DOC), ErrorCode::MissingProperty);
        assert_eq!(code("foo.bar.baz", DOC), ErrorCode::TypeMismatch);
        assert_eq!(code("n[3]", DOC), ErrorCode::IndexOutOfBounds);
        assert_eq!(code("n[-4]", DOC), ErrorCode::IndexOutOfBounds);
        assert_eq!(code("foo[0]", DOC), ErrorCode::TypeMismatch);
        let (_, msg) = run("items[0].nope", DOC).unwrap_err();
        assert_eq!(msg, "property `nope` does not exist (at `items[0].nope`)");
    }

    #[test]
    fn attack_payloads_are_ordinary_keys_or_refused() {
        assert_eq!(run("__proto__.x", DOC).unwrap(), "1");
        assert_eq!(run("constructor", DOC).unwrap(), r#""c""#);
        assert_eq!(code("toString", DOC), ErrorCode::MissingProperty);
        assert_eq!(code("__proto__.polluted", DOC), ErrorCode::MissingProperty);
        assert_eq!(run(r#"['q\'"\\']"#, DOC).unwrap(), "3");
        assert_eq!(run(r#"["q'\"\\"]"#, DOC).unwrap(), "3");
        for bad in [
            "items[9007199254740993]",
            "items[9007199254740992]",
            "items[01]",
            "items[1.5]",
            "items[-]",
            "a..b",
            ".a",
            "a.",
            "a[",
            "a[']",
            r#"a['\x']"#,
            "a['b'",
            "a[*",
            "a b",
            "a|b",
            "a[?x>1]",
            "a.😀",
            "length(a)",
        ] {
            assert_eq!(code(bad, DOC), ErrorCode::InvalidQuery, "{bad}");
        }
        assert_eq!(
            run("n[9007199254740991]", DOC).unwrap_err().0,
            ErrorCode::IndexOutOfBounds
        );
    }

    #[test]
    fn limits_at_and_over() {
        let at = format!("a{}", ".a".repeat(MAX_STEPS - 1));
        assert!(parse(&at).is_ok());
        let over = format!("a{}", ".a".repeat(MAX_STEPS));
        let e = parse(&over).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidQuery);
        assert_eq!(e.limit, Some(20));
        let long = format!("['{}']", "x".repeat(MAX_QUERY_CHARS - 4));
        assert!(parse(&long).is_ok());
        let too_long = format!("['{}']", "x".repeat(MAX_QUERY_CHARS - 3));
        assert_eq!(parse(&too_long).unwrap_err().actual, Some(201));
        // Characters, not bytes.
        assert!(parse(&"語".repeat(MAX_QUERY_CHARS)).is_ok());
        let big = format!("[{}]", vec!["1"; MAX_PROJECTION + 1].join(","));
        assert_eq!(code("[*]", &big), ErrorCode::ProjectionTooLarge);
        let fits = format!("[{}]", vec!["1"; MAX_PROJECTION].join(","));
        assert!(run("[*]", &fits).is_ok());
    }

    #[test]
    fn deep_projections_do_not_recurse() {
        let mut doc = String::from("1");
        for _ in 0..19 {
            doc = format!("[{doc},{doc}]");
        }
        let query = vec!["[*]"; 19].join("");
        assert!(run(&query, &doc).is_ok());
    }
}
