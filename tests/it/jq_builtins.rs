//! jq 1.6's builtins beside jqjail's: each call below runs over the same 46 values of every
//! kind (Debian's `jq` and the daemon, each once per call), and every value's answer must be
//! jq's: the same output, or an error with the same message. The differences left are listed
//! with their reasons and are the only ones allowed. Every call is one jq 1.6 runs: one it
//! cannot (no such builtin, or an abort) fails the test rather than passing uncompared.
//! Needs jq (`.ci/run` installs it).

use crate::util::{Daemon, installed, skip};
use jqjail_client::RunOptions;
use std::process::Command;

/// Values of every kind, among them the ones builtins trip on.
const INPUTS: &str = r#"[null, true, false, 0, 1, -1, 2.5, -2.5, 1e17, 1e300, 123456789, 0.1,
 "", "a", "abc", "héllo", "1", "2015-03-05T23:51:47Z", "1425599507", "[1,2]", [], [1],
 [1,2,3], [3,1,2,1], [null], [[1,2],[3]], [[1,[2]],3], [1,"a",null], ["a","b"],
 [{"a":1},{"a":2}], [[],[1]], [0.5, -1.5], [1425599507,0,0,0,0,0,0,0],
 [2015,2,5,23,51,47,4,63], {}, {"a":1}, {"a":[1,2],"b":{"c":null}}, {"b":2,"a":1},
 [{"key":"a","value":1}], [{"name":"x","value":2}], [[1,2],[3,4]], [1,[2,[3,[4]]]],
 "\u0000", [1e300, -1e300], [true, false], ["b","a","c"]]"#;

const CALLS: &[&str] = &[
    // No arguments.
    "add",
    "any",
    "all",
    "arrays",
    "ascii_downcase",
    "ascii_upcase",
    "booleans",
    "ceil",
    "[combinations]",
    "empty",
    "explode",
    "fabs",
    "finites",
    "first",
    "flatten",
    "floor",
    "frexp",
    "from_entries",
    "fromjson",
    "gamma",
    "isinfinite",
    "isnan",
    "isnormal",
    "iterables",
    "keys",
    "keys_unsorted",
    "last",
    "leaf_paths",
    "length",
    "lgamma_r",
    "log",
    "logb",
    "max",
    "min",
    "modf",
    "nearbyint",
    "normals",
    "not",
    "nulls",
    "numbers",
    "objects",
    "paths",
    "[recurse]",
    "reverse",
    "rint",
    "round",
    "scalars",
    "significand",
    "sort",
    "sqrt",
    "strings",
    "to_entries",
    "tojson",
    "tonumber",
    "tostream",
    "tostring",
    "transpose",
    "trunc",
    "type",
    "unique",
    "utf8bytelength",
    "values",
    "@base64",
    "@base64d",
    "@uri",
    "@csv",
    "@tsv",
    "@sh",
    "@html",
    "@json",
    "@text",
    "[..]",
    "[.[]?]",
    ".[1:]",
    ".[-1:]",
    ".a?",
    ".[0]?",
    // Arguments.
    "IN(1, 2)",
    "INDEX(.a)",
    "all(. > 1)",
    "any(. > 1)",
    "bsearch(2)",
    "bsearch(0)",
    "[combinations(2)]",
    "contains(\"a\")",
    "contains([1])",
    "contains({\"a\":1})",
    "del(.[0])",
    "del(.a)",
    "delpaths([[0]])",
    "endswith(\"a\")",
    "first(.[])",
    "flatten(1)",
    "flatten(0)",
    "flatten(-1)",
    "format(\"csv\")",
    "format(\"text\")",
    "format(1)",
    "getpath([\"a\"])",
    "getpath([0])",
    "getpath([\"a\",0,\"b\"])",
    "group_by(.)",
    "group_by(.a)",
    "has(\"a\")",
    "has(0)",
    "in({\"a\":1})",
    "index(\"a\")",
    "index(\",\")",
    "indices(1)",
    "indices(\"a\")",
    "indices([1,2])",
    "indices([])",
    "inside(\"abc\")",
    "inside([1,2,3])",
    "isempty(.[])",
    "join(\",\")",
    "join(\"\")",
    "last(.[])",
    "[limit(2; .[])]",
    "ltrimstr(\"a\")",
    "rtrimstr(\"c\")",
    "ltrimstr(1)",
    "map(. + 1)",
    "map_values(. + 1)",
    "map_values(empty)",
    "max_by(.a)",
    "min_by(.a)",
    "max_by(.)",
    "min_by(length)",
    "nth(1)",
    "nth(1; .[])",
    "path(.a)",
    "[paths(type == \"number\")]",
    "[pow(.; 2)]",
    "[pow(1,2; 3,4)]",
    "[atan2(.; 1)]",
    "[ldexp(.; 2)]",
    "[recurse(.[]?)]",
    "[recurse(.[]?; . != 3)]",
    "rindex(\"a\")",
    "rindex(\",\")",
    "select(. == 1)",
    "setpath([\"a\"]; 1)",
    "setpath([0]; 1)",
    "[setpath([\"a\"],[\"b\"]; 1,2)]",
    "sort_by(.)",
    "sort_by(.a)",
    "split(\",\")",
    "split(\"\")",
    "startswith(\"a\")",
    "startswith(1)",
    "test(\"a\")",
    "unique_by(.)",
    "unique_by(length)",
    "[limit(3; repeat(.))]",
    "until(. > 100 or . <= 0; . * 2)",
    "walk(if type == \"number\" then . + 1 else . end)",
    "[while(. < 100 and . > 0; . * 2)]",
    "with_entries(.value += 1)",
    "tojson | fromjson",
    "getpath([])",
    ".[] += 1",
    ".a += 1",
    ".a //= 3",
    "to_entries | from_entries",
    "[limit(0; .[])]",
    "[limit(-1; .[])]",
    "[range(5; 0; -2)]",
    "[limit(5; range(.))]",
    "[range(0,1; 3,4)]",
    "[limit(5; range(.; 2))]",
    "fromstream(tostream)",
    "@sh \"echo \\(.)\"",
    "@json \"x\\(.)y\"",
    "try error(.) catch .",
    ". as [$a, $b] | [$a, $b]",
    ". as {a: $x} | $x",
];

/// Calls whose answers differ from jq 1.6's on purpose, and why.
const ANSWERS_DIFFER: &[(&str, &str)] = &[
    (
        "map_values(empty)",
        "jq 1.6's `.[] |= empty` deletes every other element; jqjail deletes all (README)",
    ),
    (
        "nth(1; .[])",
        "jq 1.6's nth past the end gives the last element; jqjail gives none (README)",
    ),
    (
        "[limit(0; .[])]",
        "jq 1.6's limit(0) gives everything; jqjail none (README)",
    ),
    (
        "inside(\"abc\")",
        "jq 1.6 compares C strings: \"\\u0000\" is inside anything",
    ),
    (
        "reverse",
        "a string reverses as in jq 1.7 (README); jq 1.6 errors or gives []",
    ),
    (
        "@sh",
        "jq 1.6 writes a NUL character as the two characters `\\0`",
    ),
    (
        "@html",
        "jq 1.6 writes a NUL character as the two characters `\\0`",
    ),
    (
        "@sh \"echo \\(.)\"",
        "jq 1.6 writes a NUL character as the two characters `\\0`",
    ),
    (
        "try error(.) catch .",
        "jq 1.6's `try` drops `error(null)`; jq 1.7 and jqjail catch null",
    ),
];

/// Calls whose error messages differ from jq 1.6's, and why (the answer is an error in both).
const MESSAGES_DIFFER: &[(&str, &str)] = &[
    (
        "test(\"a\")",
        "jaq's regex natives say \"cannot use X as string\" for a non-string",
    ),
    (
        "split(\"\")",
        "jaq's split says \"cannot use X as string\" for a non-string",
    ),
    (
        "split(\",\")",
        "jaq's split says \"cannot use X as string\" for a non-string",
    ),
    ("path(.a)", "jaq's invalid path expression message (README)"),
];

fn listed(list: &[(&str, &str)], call: &str) -> bool {
    list.iter().any(|(c, _)| *c == call)
}

#[test]
fn builtins_answer_as_jq_1_6_answers() {
    if !installed("jq") {
        skip("jq is not installed (Debian package `jq`; .ci/run installs it)");
        return;
    }
    let inputs: serde_json::Value = serde_json::from_str(INPUTS).unwrap();
    let compact = inputs.to_string();
    let d = Daemon::start();
    let mut client = d.client();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for call in CALLS {
        let filter = format!("[.[] | try ([{call}] | tojson) catch (\"ERR \" + tostring)]");
        let jq = Command::new("jq")
            .args([
                "-c",
                "--argjson",
                "in",
                &compact,
                "-n",
                &format!("$in | {filter}"),
            ])
            .output()
            .unwrap();
        let theirs: Vec<String> = serde_json::from_slice(&jq.stdout).unwrap_or_else(|_| {
            panic!(
                "{call}: jq 1.6 gave no answer to compare with: {}",
                String::from_utf8_lossy(&jq.stderr)
            )
        });
        let reply = client
            .run(&filter, compact.as_bytes(), &RunOptions::default())
            .unwrap_or_else(|e| panic!("{call}: {e}"));
        let ours: Vec<String> = serde_json::from_str(&reply.output).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{call}");
        compared += 1;
        for ((input, jq), ours) in inputs.as_array().unwrap().iter().zip(&theirs).zip(&ours) {
            if jq == ours {
                continue;
            }
            let both_errors = jq.starts_with("ERR ") && ours.starts_with("ERR ");
            let allowed = match both_errors {
                true => listed(MESSAGES_DIFFER, call),
                false => listed(ANSWERS_DIFFER, call),
            };
            if !allowed {
                wrong.push(format!("{call} on {input}: jq {jq}, jqjail {ours}"));
            }
        }
    }
    eprintln!(
        "{compared} calls compared over {} values",
        inputs.as_array().unwrap().len()
    );
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
