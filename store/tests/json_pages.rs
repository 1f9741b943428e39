//! JSON pages (issue 37) against their rule, on generated JSON (deep, wide, long strings,
//! escapes, non-ASCII, big numbers; compact and indented) and on the README's example:
//! the pages concatenate to the document, none is over the page size, a page ends inside a
//! token only where the token began at or before the page's start, and each page's first and
//! last paths are those an independent reader gives for its first and last significant bytes.

use jqjail_store::json_page::{JsonLayout, Path, Step, find, parse_path, render};
use proptest::prelude::*;

/// A JSON value to write out.
#[derive(Debug, Clone)]
enum Json {
    Null,
    Bool(bool),
    /// A number as written (big ones keep every digit).
    Number(String),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,8}",
        "[a-zA-Z0-9 _\\-\"\\\\/\n\t\u{1}]{0,40}",
        "[é漢😀a\u{7f}\u{2028}]{0,20}",
        // Longer than small pages.
        "[a-z\"]{100,400}",
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "-?[1-9][0-9]{20,80}",
        "-?(0|[1-9][0-9]{0,5})\\.[0-9]{1,6}([eE][+-]?[0-9]{1,3})?",
    ]
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number().prop_map(Json::Number),
        string().prop_map(Json::Str),
    ];
    leaf.prop_recursive(12, 200, 12, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..12).prop_map(Json::Array),
            prop::collection::vec((string(), inner), 0..10).prop_map(Json::Object),
        ]
    })
}

fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn write(v: &Json, indent: Option<usize>, depth: usize, out: &mut String) {
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * depth));
        }
    };
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::Str(s) => out.push_str(&quote(s)),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write(item, indent, depth + 1, out);
            }
            if !items.is_empty() {
                newline(out, depth);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                out.push_str(&quote(k));
                out.push_str(if indent.is_some() { ": " } else { ":" });
                write(item, indent, depth + 1, out);
            }
            if !members.is_empty() {
                newline(out, depth);
            }
            out.push('}');
        }
    }
}

/// An independent reader: for every byte, the path of the innermost value it belongs to
/// (`None` for whitespace, commas and colons), and the spans of every token (strings, keys,
/// numbers, literals).
struct Oracle {
    owner: Vec<Option<Path>>,
    tokens: Vec<std::ops::Range<usize>>,
    /// Where each value begins, with its path, in document order.
    values: Vec<(usize, Path)>,
}

impl Oracle {
    fn read(doc: &[u8]) -> Oracle {
        let mut o = Oracle {
            owner: vec![None; doc.len()],
            tokens: Vec::new(),
            values: Vec::new(),
        };
        let mut at = 0;
        o.value(doc, &mut at, &mut Vec::new());
        o
    }

    fn ws(doc: &[u8], at: &mut usize) {
        while *at < doc.len() && matches!(doc[*at], b' ' | b'\n' | b'\t' | b'\r') {
            *at += 1;
        }
    }

    fn mark(&mut self, range: std::ops::Range<usize>, path: &Path) {
        for i in range {
            self.owner[i] = Some(path.clone());
        }
    }

    fn string_end(doc: &[u8], start: usize) -> usize {
        let mut i = start + 1;
        while doc[i] != b'"' {
            i += if doc[i] == b'\\' { 2 } else { 1 };
        }
        i + 1
    }

    fn value(&mut self, doc: &[u8], at: &mut usize, path: &mut Path) {
        Self::ws(doc, at);
        self.values.push((*at, path.clone()));
        match doc[*at] {
            b'[' => {
                self.mark(*at..*at + 1, path);
                *at += 1;
                let mut i = 0;
                loop {
                    Self::ws(doc, at);
                    if doc[*at] == b']' {
                        break;
                    }
                    if doc[*at] == b',' {
                        *at += 1;
                        continue;
                    }
                    path.push(Step::Index(i));
                    self.value(doc, at, path);
                    path.pop();
                    i += 1;
                }
                self.mark(*at..*at + 1, path);
                *at += 1;
            }
            b'{' => {
                self.mark(*at..*at + 1, path);
                *at += 1;
                loop {
                    Self::ws(doc, at);
                    if doc[*at] == b'}' {
                        break;
                    }
                    if doc[*at] == b',' {
                        *at += 1;
                        continue;
                    }
                    let end = Self::string_end(doc, *at);
                    let key: String = serde_json::from_slice(&doc[*at..end]).unwrap();
                    path.push(Step::Key(key));
                    self.mark(*at..end, path);
                    self.tokens.push(*at..end);
                    *at = end;
                    Self::ws(doc, at);
                    assert_eq!(doc[*at], b':');
                    *at += 1;
                    self.value(doc, at, path);
                    path.pop();
                }
                self.mark(*at..*at + 1, path);
                *at += 1;
            }
            b'"' => {
                let end = Self::string_end(doc, *at);
                self.mark(*at..end, path);
                self.tokens.push(*at..end);
                *at = end;
            }
            _ => {
                let start = *at;
                while *at < doc.len()
                    && (doc[*at].is_ascii_alphanumeric() || matches!(doc[*at], b'+' | b'-' | b'.'))
                {
                    *at += 1;
                }
                self.mark(start..*at, path);
                self.tokens.push(start..*at);
            }
        }
    }
}

/// Checks the rule for `doc` at `size`; returns the layout.
fn check(doc: &[u8], size: u64) -> JsonLayout {
    let layout = JsonLayout::new(doc, size).unwrap_or_else(|e| panic!("{e}"));
    let oracle = Oracle::read(doc);
    let mut next = 0u64;
    for (n, page) in layout.pages().iter().enumerate() {
        let (start, end) = (page.range.start as usize, page.range.end as usize);
        assert_eq!(
            page.range.start,
            next,
            "page {} starts where the last ended",
            n + 1
        );
        assert!(
            page.range.end - page.range.start <= size.max(64),
            "page {} is {} bytes",
            n + 1,
            end - start
        );
        assert!(end > start || doc.is_empty(), "page {} is empty", n + 1);
        // A token split only where it began at or before the page's start.
        if end < doc.len() {
            for token in &oracle.tokens {
                if token.start < end && end < token.end {
                    assert!(
                        token.start <= start,
                        "page {} ({start}..{end}) splits the token at {token:?} that fits after its start",
                        n + 1
                    );
                    assert!(
                        std::str::from_utf8(&doc[..end]).is_ok(),
                        "page {} splits a character",
                        n + 1
                    );
                }
            }
        }
        let significant: Vec<&Path> = oracle.owner[start..end].iter().flatten().collect();
        if let (Some(first), Some(last)) = (significant.first(), significant.last()) {
            assert_eq!(
                render(&page.first),
                render(first),
                "page {} first path ({start}..{end}): {:?} after {:?}",
                n + 1,
                String::from_utf8_lossy(&doc[start..(start + 40).min(end)]),
                String::from_utf8_lossy(&doc[start.saturating_sub(40)..start]),
            );
            assert_eq!(
                render(&page.last),
                render(last),
                "page {} last path ({start}..{end})",
                n + 1
            );
        }
        next = page.range.end;
    }
    assert_eq!(next, doc.len() as u64, "the pages cover the document");
    layout
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn json_pages_follow_the_rule(v in json(), indent in prop::option::of(0usize..4), size in 64u64..600) {
        let mut doc = String::new();
        write(&v, indent, 0, &mut doc);
        check(doc.as_bytes(), size);
    }

    /// Every value is found at its path, and every path reads back from how it is shown.
    #[test]
    fn a_path_finds_its_value(v in json(), indent in prop::option::of(0usize..4)) {
        let mut doc = String::new();
        write(&v, indent, 0, &mut doc);
        let oracle = Oracle::read(doc.as_bytes());
        // With a key given twice, the last member is the one found (as jq reads it).
        let mut last = std::collections::HashMap::new();
        for (start, path) in &oracle.values {
            last.insert(render(path), *start);
        }
        for (_, path) in &oracle.values {
            let want = last[&render(path)];
            prop_assert_eq!(find(doc.as_bytes(), path), Some(want as u64), "{}", render(path));
            if path.iter().all(|s| !matches!(s, Step::Key(k) if k.len() > 256)) {
                prop_assert_eq!(&parse_path(&render(path)).unwrap(), path);
                let jq = serde_json::to_string(&jqjail_store::json_page::jq_path(path)).unwrap();
                prop_assert_eq!(&parse_path(&jq).unwrap(), path);
            }
            let mut past = path.clone();
            past.push(Step::Index(1 << 40));
            prop_assert_eq!(find(doc.as_bytes(), &past), None);
        }
    }

    /// A page is the same whether its reader starts at its own start (a mark on every page),
    /// at a mark some pages before, or at the document's start: the marks keep what a window
    /// does not reach back to (the keys of the members the page is inside).
    #[test]
    fn where_the_marks_are_does_not_change_a_page(v in json(), indent in prop::option::of(0usize..4), size in 64u64..600, every in prop::sample::select(vec![1u64, 300, 5000, u64::MAX])) {
        let mut doc = String::new();
        write(&v, indent, 0, &mut doc);
        let each = JsonLayout::new(doc.as_bytes(), size).unwrap();
        let spaced = JsonLayout::with_marks(doc.as_bytes(), size, every).unwrap();
        prop_assert_eq!(each, spaced);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn large_documents_follow_the_rule_at_large_pages(items in prop::collection::vec(json(), 20..200), size in prop::sample::select(vec![64u64, 1000, 4096, 16384, 1 << 20])) {
        let mut doc = String::new();
        write(&Json::Array(items), Some(2), 0, &mut doc);
        check(doc.as_bytes(), size);
    }
}

#[test]
fn the_readme_example_in_600_byte_pages_names_each_page() {
    let doc = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/issues.json"
    ))
    .unwrap();
    let layout = check(&doc, 600);
    assert!(layout.total_pages() > 5);
    for page in layout.pages() {
        // Every page but the last ends right before a member, an element or a closing bracket.
        if (page.range.end as usize) < doc.len() {
            let next = doc[page.range.end as usize];
            assert!(
                matches!(next, b'"' | b'{' | b'[' | b']' | b'}')
                    || next.is_ascii_digit()
                    || matches!(next, b'-' | b't' | b'f' | b'n'),
                "page ends before {:?}",
                next as char
            );
        }
        assert_eq!(
            page.array
                .as_ref()
                .map(|(path, _)| render(path))
                .as_deref()
                .is_some(),
            page.depth > 0
        );
    }
    let issues = serde_json::from_slice::<Vec<serde_json::Value>>(&doc)
        .unwrap()
        .len() as u64;
    let second = layout.page(2).unwrap();
    assert!(
        render(&second.first).starts_with("$["),
        "{}",
        render(&second.first)
    );
    // Every page names the issue it is in, and how many issues there are.
    for page in layout.pages().iter().skip(1) {
        let (outer, len) = page.array.clone().unwrap();
        let labels = render(&outer).ends_with(".labels");
        assert!(
            render(&outer) == "$" && len == issues || labels,
            "{}",
            render(&outer)
        );
    }
}

#[test]
fn what_is_not_one_json_value_has_no_json_layout() {
    for bad in [
        &b""[..],
        b"  ",
        b"{",
        b"[1,]",
        b"1 2",
        b"{\"a\" 1}",
        b"tru",
        b"01",
        b"\"\\x\"",
        b"[1]]",
        b"\"\x01\"",
    ] {
        assert!(
            JsonLayout::new(bad, 64).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
    assert!(JsonLayout::new(deep.as_bytes(), 64).is_err());
}

#[test]
fn a_string_longer_than_a_page_is_split_at_characters_with_its_offset() {
    let text = format!("{{\"k\":[1,\"{}\"]}}", "é\\n\\u00e9ab".repeat(100));
    let layout = check(text.as_bytes(), 64);
    let inside: Vec<_> = layout
        .pages()
        .iter()
        .filter(|p| p.starts_in_string.is_some())
        .collect();
    assert!(inside.len() > 10);
    for page in inside {
        assert_eq!(render(&page.first), "$.k[1]");
        // Never inside an escape: the page's text does not start in the middle of one.
        let start = page.range.start as usize;
        let before = &text.as_bytes()[..start];
        let backslashes = before.iter().rev().take_while(|&&b| b == b'\\').count();
        assert_eq!(backslashes % 2, 0, "a page starts right after a backslash");
    }
}

#[test]
fn paths_read_as_shown_as_jq_writes_them_and_as_arrays() {
    let want = vec![
        Step::Index(130),
        Step::Key("labels".into()),
        Step::Key("a b".into()),
    ];
    for text in [
        r#"$[130].labels["a b"]"#,
        r#".[130].labels."a b""#,
        r#".[130].labels.["a b"]"#,
        r#"[130,"labels","a b"]"#,
        r#" $[130]["labels"]["a b"] "#,
    ] {
        assert_eq!(parse_path(text).unwrap(), want, "{text}");
    }
    for root in ["$", ".", "[]", ""] {
        assert_eq!(parse_path(root).unwrap(), Vec::<Step>::new(), "{root:?}");
    }
    for bad in ["$[-1]", ".a[", "$..a", "[1.5]", "a.b", "$[\"x]", ".[true]"] {
        assert!(parse_path(bad).is_err(), "{bad} was read");
    }
}

/// A page of only whitespace inside an empty container names the container (found by the
/// fuzzer: it named `$[0]`, an element the array does not have).
#[test]
fn a_page_of_whitespace_in_an_empty_container_names_the_container() {
    for doc in [
        format!("[{}]", " ".repeat(300)),
        format!("{{\"a\":{{{}}}}}", "\n".repeat(300)),
    ] {
        let layout = JsonLayout::new(doc.as_bytes(), 64).unwrap();
        for page in layout.pages() {
            let path = render(&page.first);
            assert!(
                find(doc.as_bytes(), &page.first).is_some(),
                "{path} names no value"
            );
        }
    }
}

/// Found by the property above: a page that begins with the bracket closing a container,
/// right after a number that ended with the page before (a number has no end of its own: the
/// bracket ends it). Its first path was the number's member, not the container the bracket
/// closes.
#[test]
fn a_page_that_begins_by_closing_after_a_number_is_the_containers() {
    let number = format!("1{}", "0".repeat(72));
    check(format!("[{{\"\":{number}}}]").as_bytes(), 73);
    check(format!("[[{number}],1]").as_bytes(), 73);
    check(format!("[[{number}]]").as_bytes(), 75);
}
