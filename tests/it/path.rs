//! The path language (`lang: path`) through the real daemon: the categories of
//! dsh-tool-json's suite (functional, errors, attack payloads, limits and escape
//! boundaries), and a property test against jq.

use crate::util::Daemon;
use jqjail_client::{ClientError, ErrorCode, Lang, RunOptions};
use jqjail_protocol::worker::Job;
use jqjail_worker::{Bytes, Engine, evaluate};

const DOC: &str = r##"{"data":{"items":[{"name":"hello","tags":["a","b"],"n":1},{"name":"b","tags":["c"],"n":2},{"other":true},{"name":null,"tags":[]}],"meta":{"count":4}},"complex-key":"ok","sp ace":1,"q'uote":2,"d\"q":3,"back\\slash":4,"__proto__":{"polluted":true},"constructor":"plain","prototype":0,"日本語":{"キー":"値"},"$ref":"#/x","_":0,"arr":[[1,2],[3]],"nul":null,"zero":0,"empty":{}}"##;

enum Want {
    Out(&'static str),
    Err(ErrorCode),
}
use Want::{Err as E, Out};

fn path(d: &Daemon, query: &str, input: &str) -> Result<String, ClientError> {
    let options = RunOptions {
        lang: Lang::Path,
        ..Default::default()
    };
    d.client()
        .run(query, input.as_bytes(), &options)
        .map(|r| r.output)
}

#[test]
fn the_path_language_through_the_daemon() {
    use ErrorCode::*;
    let long_ok = format!("['{}']", "x".repeat(196));
    let long_bad = format!("['{}']", "x".repeat(197));
    let deep_ok = format!("a{}", ".a".repeat(19));
    let deep_bad = format!("a{}", ".a".repeat(20));
    let nest = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let cases: Vec<(&str, String, String, Want)> = vec![
        // Functional.
        ("dot access", "data.meta.count".into(), DOC.into(), Out("4")),
        (
            "index",
            "data.items[0].name".into(),
            DOC.into(),
            Out(r#""hello""#),
        ),
        (
            "negative index",
            "data.items[-1].tags".into(),
            DOC.into(),
            Out("[]"),
        ),
        (
            "single quotes",
            "['complex-key']".into(),
            DOC.into(),
            Out(r#""ok""#),
        ),
        (
            "double quotes",
            r#"["complex-key"]"#.into(),
            DOC.into(),
            Out(r#""ok""#),
        ),
        ("space in key", "['sp ace']".into(), DOC.into(), Out("1")),
        (
            "wildcard",
            "data.items[*].name".into(),
            DOC.into(),
            Out(r#"["hello","b",null]"#),
        ),
        (
            "nested wildcards",
            "data.items[*].tags[*]".into(),
            DOC.into(),
            Out(r#"[["a","b"],["c"],[]]"#),
        ),
        (
            "wildcard then index",
            "arr[*][0]".into(),
            DOC.into(),
            Out("[1,3]"),
        ),
        (
            "wildcard of wildcard",
            "arr[*][*]".into(),
            DOC.into(),
            Out("[[1,2],[3]]"),
        ),
        (
            "object result",
            "data.meta".into(),
            DOC.into(),
            Out(r#"{"count":4}"#),
        ),
        ("null value", "nul".into(), DOC.into(), Out("null")),
        ("zero value", "zero".into(), DOC.into(), Out("0")),
        (
            "non-ASCII identifiers",
            "日本語.キー".into(),
            DOC.into(),
            Out(r#""値""#),
        ),
        (
            "dollar identifier",
            "$ref".into(),
            DOC.into(),
            Out(r##""#/x""##),
        ),
        ("underscore identifier", "_".into(), DOC.into(), Out("0")),
        ("root index", "[1]".into(), "[10,20]".into(), Out("20")),
        ("empty query", "".into(), "[1,2]".into(), Out("[1,2]")),
        (
            "big integer kept",
            "id".into(),
            r#"{"id":12345678901234567890}"#.into(),
            Out("12345678901234567890"),
        ),
        // Errors.
        (
            "missing property",
            "data.nope".into(),
            DOC.into(),
            E(MissingProperty),
        ),
        (
            "property of a number",
            "zero.x".into(),
            DOC.into(),
            E(TypeMismatch),
        ),
        (
            "property of null",
            "nul.x".into(),
            DOC.into(),
            E(TypeMismatch),
        ),
        (
            "index of an object",
            "data[0]".into(),
            DOC.into(),
            E(TypeMismatch),
        ),
        (
            "index out of bounds",
            "data.items[4]".into(),
            DOC.into(),
            E(IndexOutOfBounds),
        ),
        (
            "negative out of bounds",
            "data.items[-5]".into(),
            DOC.into(),
            E(IndexOutOfBounds),
        ),
        (
            "wildcard on an object",
            "data.meta[*]".into(),
            DOC.into(),
            E(TypeMismatch),
        ),
        (
            "index error in a projection",
            "data.items[*].tags[1]".into(),
            DOC.into(),
            E(IndexOutOfBounds),
        ),
        (
            "empty object",
            "empty.a".into(),
            DOC.into(),
            E(MissingProperty),
        ),
        // Attack payloads: ordinary keys, or refused queries.
        (
            "__proto__ is a key",
            "__proto__.polluted".into(),
            DOC.into(),
            Out("true"),
        ),
        (
            "constructor is a key",
            "constructor".into(),
            DOC.into(),
            Out(r#""plain""#),
        ),
        (
            "prototype is a key",
            "prototype".into(),
            DOC.into(),
            Out("0"),
        ),
        (
            "no prototype chain",
            "data.toString".into(),
            DOC.into(),
            E(MissingProperty),
        ),
        (
            "no inherited constructor",
            "empty.constructor".into(),
            DOC.into(),
            E(MissingProperty),
        ),
        (
            "quote injection",
            "['a'].b']".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        (
            "unsafe integer",
            "data.items[9007199254740993]".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        (
            "largest safe integer",
            "data.items[9007199254740991]".into(),
            DOC.into(),
            E(IndexOutOfBounds),
        ),
        (
            "filter expression",
            "data.items[?n > 1]".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        ("pipe", "data | meta".into(), DOC.into(), E(InvalidQuery)),
        (
            "function call",
            "length(data)".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        ("jq syntax", ".data".into(), DOC.into(), E(InvalidQuery)),
        (
            "emoji identifier",
            "a😀".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        // Escape boundaries.
        (
            "escaped single quote",
            r#"['q\'uote']"#.into(),
            DOC.into(),
            Out("2"),
        ),
        (
            "escaped double quote",
            r#"["d\"q"]"#.into(),
            DOC.into(),
            Out("3"),
        ),
        (
            "escaped backslash",
            r#"['back\\slash']"#.into(),
            DOC.into(),
            Out("4"),
        ),
        (
            "double quote in single quotes",
            r#"['d"q']"#.into(),
            DOC.into(),
            Out("3"),
        ),
        (
            "invalid escape",
            r#"['\n']"#.into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        (
            "unterminated quote",
            "['abc".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        (
            "unclosed bracket",
            "data.items[0".into(),
            DOC.into(),
            E(InvalidQuery),
        ),
        // Limits at and over.
        (
            "query of 200 characters",
            long_ok,
            r#"{}"#.into(),
            E(MissingProperty),
        ),
        (
            "query of 201 characters",
            long_bad,
            r#"{}"#.into(),
            E(InvalidQuery),
        ),
        ("parse depth 20", deep_ok, "{}".into(), E(MissingProperty)),
        ("parse depth 21", deep_bad, "{}".into(), E(InvalidQuery)),
        ("input nesting 100", "".into(), nest(100), Out("")),
        ("input nesting 101", "".into(), nest(101), E(InputTooDeep)),
        (
            "output cap",
            "".into(),
            format!("\"{}\"", "a".repeat(100_000)),
            E(OutputTooLarge),
        ),
        (
            "projection of 100,000",
            "[*]".into(),
            format!("[{}]", vec!["0"; 100_000].join(",")),
            E(OutputTooLarge),
        ),
        (
            "projection of 100,001",
            "[*]".into(),
            format!("[{}]", vec!["0"; 100_001].join(",")),
            E(ProjectionTooLarge),
        ),
        ("invalid input", "a".into(), "{a:1}".into(), E(InvalidJson)),
    ];
    assert!(cases.len() >= 54, "{} cases", cases.len());
    let d = Daemon::start();
    let mut failures = Vec::new();
    for (name, query, input, want) in &cases {
        let got = path(&d, query, input);
        let ok = match (want, &got) {
            // Out("") marks "succeeds with any output".
            (Out(""), Ok(_)) => true,
            (Out(text), Ok(out)) => out == text,
            (E(code), Err(ClientError::Server(e))) => e.code == *code,
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{name}: `{query}` → {:?}",
                got.map_err(|e| e.to_string())
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn messages_say_where_in_the_query() {
    let d = Daemon::start();
    let err = path(&d, "data.items[0].nope", DOC).unwrap_err();
    assert_eq!(
        err.to_string(),
        "MISSING_PROPERTY: property `nope` does not exist (at `data.items[0].nope`)"
    );
    let err = path(&d, "data.items[7]", DOC).unwrap_err();
    assert!(
        err.to_string()
            .contains("index 7 is outside an array of 4 elements (at `data.items[7]`)"),
        "{err}"
    );
    let err = path(&d, "a..b", DOC).unwrap_err();
    assert!(
        err.to_string().contains("at character 3 of the query"),
        "{err}"
    );
}

#[test]
fn the_cli_speaks_the_path_language() {
    let d = Daemon::start();
    let out = std::process::Command::new(crate::util::CLI)
        .arg("--socket")
        .arg(&d.socket)
        .args(["--lang", "path", "[*].title"])
        .arg(crate::util::repo_file("examples/issues.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let titles: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(titles.len(), 20);
    let out = std::process::Command::new(crate::util::CLI)
        .arg("--socket")
        .arg(&d.socket)
        .args(["--lang", "path", "[*].nope[0]"])
        .arg(crate::util::repo_file("examples/issues.json"))
        .output()
        .unwrap();
    // Every element lacks `nope`: all are skipped, the answer is an empty array.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[]\n");
}

/// xorshift64*: deterministic random documents and paths.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const KEYS: [&str; 8] = ["a", "b", "name", "__proto__", "日本", "k-ey", "q'x", "$"];

fn random_value(rng: &mut Rng, depth: u32) -> serde_json::Value {
    use serde_json::{Value, json};
    match if depth == 0 {
        rng.below(4)
    } else {
        rng.below(7)
    } {
        0 => Value::Null,
        1 => json!(rng.below(1000)),
        2 => json!(format!("s{}", rng.below(100))),
        3 => json!(rng.below(2) == 0),
        4 | 5 => {
            let mut map = serde_json::Map::new();
            for _ in 0..1 + rng.below(4) {
                let k = KEYS[rng.below(KEYS.len() as u64) as usize];
                map.insert(k.to_string(), random_value(rng, depth - 1));
            }
            Value::Object(map)
        }
        _ => {
            // Arrays of objects with a shared key, so that projections have something to find.
            let k = KEYS[rng.below(KEYS.len() as u64) as usize];
            Value::Array(
                (0..rng.below(4))
                    .map(|_| serde_json::json!({ k: random_value(rng, depth - 1) }))
                    .collect(),
            )
        }
    }
}

/// A random path that exists in `v` (no missing properties, no type errors), as a path
/// query and as the equivalent jq filter. Returns None where `v` offers no step.
fn random_path(
    rng: &mut Rng,
    v: &serde_json::Value,
    path: &mut String,
    jq: &mut String,
    steps: usize,
) {
    use serde_json::Value;
    if steps == 0 {
        return;
    }
    match v {
        Value::Object(map) if !map.is_empty() && (path.is_empty() || rng.below(5) > 0) => {
            let (k, child) = map
                .iter()
                .nth(rng.below(map.len() as u64) as usize)
                .unwrap();
            if k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii())
                && !path.is_empty()
                && rng.below(2) == 0
            {
                path.push('.');
                path.push_str(k);
            } else if k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii())
                && path.is_empty()
            {
                path.push_str(k);
            } else {
                path.push_str(&format!(
                    "['{}']",
                    k.replace('\\', "\\\\").replace('\'', "\\'")
                ));
            }
            jq.push_str(&format!("[{}]", serde_json::to_string(k).unwrap()));
            random_path(rng, child, path, jq, steps - 1);
        }
        Value::Array(items) if !items.is_empty() && rng.below(2) == 0 => {
            let i = rng.below(items.len() as u64) as i64;
            let i = if rng.below(3) == 0 {
                i - items.len() as i64
            } else {
                i
            };
            path.push_str(&format!("[{i}]"));
            jq.push_str(&format!("[{i}]"));
            let at = if i < 0 { items.len() as i64 + i } else { i } as usize;
            random_path(rng, &items[at], path, jq, steps - 1);
        }
        Value::Array(items) => {
            // Project only where every element is an object holding the same single key, so
            // that nothing is skipped and `[*].k` agrees with jq's `[.[] | .k]`.
            let key = items
                .first()
                .and_then(|f| f.as_object())
                .and_then(|o| o.keys().next().cloned());
            let uniform = key.as_ref().is_some_and(|k| {
                items.iter().all(|it| {
                    it.as_object()
                        .is_some_and(|o| o.len() == 1 && o.contains_key(k))
                })
            });
            path.push_str("[*]");
            if uniform {
                let k = key.unwrap();
                path.push_str(&format!(
                    "['{}']",
                    k.replace('\\', "\\\\").replace('\'', "\\'")
                ));
                jq.push_str(&format!(
                    " | [.[] | .[{}]]",
                    serde_json::to_string(&k).unwrap()
                ));
            } else {
                jq.push_str(" | [.[]]");
            }
        }
        _ => {}
    }
}

#[test]
fn paths_agree_with_the_equivalent_jq_filter() {
    let engine = Engine::new();
    let d = Daemon::start();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let (mut compared, mut nonempty, mut projecting) = (0, 0, 0);
    for round in 0..400 {
        // Always a container at the top, so that most paths have steps.
        let doc = serde_json::json!({
            "a": random_value(&mut rng, 4),
            "items": (0..1 + rng.below(3))
                .map(|_| serde_json::json!({"name": random_value(&mut rng, 3)}))
                .collect::<Vec<_>>(),
            "日本": random_value(&mut rng, 3),
        });
        let input = serde_json::to_string(&doc).unwrap();
        let (mut query, mut jq) = (String::new(), String::from("."));
        let steps = 1 + rng.below(5) as usize;
        random_path(&mut rng, &doc, &mut query, &mut jq, steps);
        let job = |filter: &str, lang: Lang| Job {
            filter: filter.to_string(),
            lang,
            input_bytes: input.len() as u64,
            max_depth: 1000,
            max_output_bytes: 100_000,
            args: Default::default(),
            outputs: Default::default(),
            inputs: Default::default(),
        };
        let bytes = Bytes::copy_from_slice(input.as_bytes());
        let by_path = evaluate(&engine, &job(&query, Lang::Path), &bytes);
        let by_jq = evaluate(&engine, &job(&jq, Lang::Jq), &bytes);
        let (Ok(p), Ok(j)) = (&by_path, &by_jq) else {
            panic!("`{query}` / `{jq}` on {input}: path {by_path:?}, jq {by_jq:?}");
        };
        let p: serde_json::Value = serde_json::from_str(p).unwrap();
        let j: serde_json::Value = serde_json::from_str(j).unwrap();
        assert_eq!(p, j, "`{query}` vs `{jq}` on {input}");
        compared += 1;
        nonempty += usize::from(!query.is_empty());
        projecting += usize::from(query.contains("[*]"));
        if round < 6 {
            eprintln!("sample: `{query}` ≡ `{jq}`");
        }
        // A sample goes through the daemon too.
        if round % 20 == 0 {
            assert_eq!(
                path(&d, &query, &input).unwrap(),
                *by_path.as_ref().unwrap(),
                "`{query}`"
            );
        }
    }
    assert_eq!(compared, 400);
    // The generator must exercise the language, not compare empty queries.
    eprintln!("{nonempty} non-empty paths, {projecting} with a projection");
    assert!(
        nonempty >= 200 && projecting >= 20,
        "{nonempty} non-empty, {projecting} projecting"
    );
}
