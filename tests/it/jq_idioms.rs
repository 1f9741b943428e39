//! The filters models and people write (reshaping, arithmetic, string building, dates, paths,
//! formats, updates), run through jq 1.6 and gojq (Debian's `jq` and `gojq`) beside jqjail's
//! daemon: where jq answers, jqjail must print the very same text or fail; a different answer
//! fails the test. gojq's agreement is printed beside, for the record. In CI (where .ci/run
//! installs both) a missing tool fails the test; elsewhere it skips, saying so.

use crate::util::Daemon;
use jqjail_client::{ClientError, RunOptions};
use std::io::Write;
use std::process::{Command, Stdio};

const USERS: &str = r#"{"users":[{"name":"ann","age":31,"tags":["a","b"],"email":null},{"name":"bob","age":25,"tags":[],"email":"b@x.org"},{"name":"cy","age":40,"tags":["b"],"email":"c@x.org"}],"meta":{"count":3,"next":null}}"#;
const NUMS: &str = "[3.5, 10, 2, 0.1, -4, 1e3, 100, 7]";
const TEXT: &str = r#"{"title":"Hello, World","path":"/a/b/c.json","csv":"x,y,,z","when":"2015-03-05T23:51:47Z","n":"1.50","t":1425599507}"#;

/// (filter, input) pairs.
const CASES: &[(&str, &str)] = &[
    // Reshaping
    (".users[] | {name, age}", USERS),
    (".users | map(select(.age > 30)) | map(.name)", USERS),
    (".users | map({(.name): .age}) | add", USERS),
    (".users | group_by(.tags | length) | map(length)", USERS),
    (".users | sort_by(-.age) | .[0].name", USERS),
    ("[.users[].email] | join(\", \")", USERS),
    ("[.users[].name, 1, true, null] | join(\"-\")", USERS),
    (".users | map(.tags) | flatten | unique", USERS),
    (".users | INDEX(.name) | keys", USERS),
    ("[.users[] | .name | ascii_upcase]", USERS),
    (".users[1:] | length", USERS),
    (".users[-1].name", USERS),
    (".meta.next.page", USERS),
    (".users | to_entries | map(.key)", USERS),
    ("with_entries(select(.key == \"meta\"))", USERS),
    ("[paths(type == \"number\")]", USERS),
    ("[leaf_paths] | length", USERS),
    (
        "[tostream | select(length == 2) | .[0] | map(tostring) | join(\".\")]",
        USERS,
    ),
    ("getpath([\"users\",0,\"name\"])", USERS),
    ("reduce .users[] as $u ({}; .[$u.name] = $u.age)", USERS),
    (".users | any(.age > 35), all(.email)", USERS),
    (
        ".users | map(has(\"email\")), map(.tags | contains([\"b\"]))",
        USERS,
    ),
    (".users | map(.name | startswith(\"b\"))", USERS),
    (
        "[.users[] | select(.email != null) | .email | split(\"@\")[1]]",
        USERS,
    ),
    (".users | map(.age) | add / length", USERS),
    (
        ".users | [.[].age] | max, min, (add / length | floor)",
        USERS,
    ),
    ("[.users[] | .age] | map(. % 7)", USERS),
    (
        "[.users[] | {(.name): (.tags | length)}] | add | to_entries | from_entries",
        USERS,
    ),
    ("[.users[] | [.name, .age]] | map(@csv)", USERS),
    ("[.users[] | [.name, .age, .email]] | map(@tsv)", USERS),
    (".users | map(.name) | @sh", USERS),
    // Updates and paths
    (".meta.missing.deep = 5 | .meta", USERS),
    (".users[0].address.city = \"x\" | .users[0]", USERS),
    ("del(.users[0,2]) | .users | map(.name)", USERS),
    ("del(.users[] | select(.age < 30)) | .users | length", USERS),
    ("setpath([\"meta\",\"x\",\"y\"]; 1) | .meta", USERS),
    (".users |= map(.age += 1) | [.users[].age]", USERS),
    (".users[].tags |= length | [.users[].tags]", USERS),
    ("{\"a\":1} | .b.c = 5", "null"),
    ("null | .[2] = 1", "null"),
    ("[1] | .[3] = 1", "null"),
    ("{\"a\":1,\"b\":2,\"c\":3} | del(.b)", "null"),
    ("[1,2,3] | .[1:] = [\"x\"]", "null"),
    ("{\"a\":{\"b\":{\"c\":1}}} | [paths]", "null"),
    ("{\"a\":[1,{\"b\":2}]} | [paths(..)] | length", "null"),
    (
        "to_entries | map(select(.value != null)) | from_entries",
        r#"{"a":1,"b":null,"c":"x"}"#,
    ),
    ("map_values(. + 1)", r#"{"a":1,"b":2}"#),
    (
        "walk(if type == \"array\" then sort else . end)",
        r#"{"a":[3,1,2],"b":{"c":[2,1]}}"#,
    ),
    // Arithmetic and numbers
    ("map(. * 2)", NUMS),
    ("map(. / 4)", NUMS),
    ("add", NUMS),
    ("map(. % 3)", NUMS),
    ("map(tostring)", NUMS),
    ("sort", NUMS),
    ("map(floor), map(ceil), map(round)", NUMS),
    ("map(fabs | sqrt)", NUMS),
    ("map(pow(.; 2))", NUMS),
    ("(.[0] + .[1]) / 3", NUMS),
    ("map(. > 5)", NUMS),
    ("[.[] | tojson]", NUMS),
    ("10 / 2, 10 / 4, 1e3, 1.5e300 * 1e10, 3.0, 1 / 3", "null"),
    ("[limit(3; .[])], first(.[] | select(. > 5))", NUMS),
    ("[range(0; 10; 3)], [range(5)]", "null"),
    ("map(-.)", NUMS),
    ("5.5 % 2, 7 % -3, (-7) % 3", "null"),
    ("[.[] | numbers] | length", NUMS),
    (
        "infinite, nan, ([nan] | tojson), (infinite | tostring)",
        "null",
    ),
    ("1e-5, 0.0002, 123456789012, 0.1 + 0.2", "null"),
    ("\"1.50\" | tonumber", "null"),
    // Strings
    (".title | ascii_downcase | split(\", \")", TEXT),
    (".title | test(\"world\"; \"i\")", TEXT),
    (".title | sub(\"World\"; \"jq\")", TEXT),
    (".title | [match(\"o\"; \"g\").offset]", TEXT),
    (".path | split(\"/\") | last", TEXT),
    (".path | ltrimstr(\"/a\"), rtrimstr(\".json\")", TEXT),
    (".t | ltrimstr(\"1\")", TEXT),
    (".csv | split(\",\")", TEXT),
    (".n | tonumber", TEXT),
    (".title | @base64, (@base64 | @base64d)", TEXT),
    (".title | @uri, @html, @sh, @json, @text", TEXT),
    ("[.title, .path] | @csv", TEXT),
    ("[.title, 1, null, true] | @tsv", TEXT),
    ("\"\\(.title) has \\(.title | length) chars\"", TEXT),
    (".title | explode | implode", TEXT),
    (".title | ascii_downcase | gsub(\"o\"; \"0\")", TEXT),
    (".title | indices(\"o\"), index(\"o\"), rindex(\"o\")", TEXT),
    (".title | .[0:5], .[-5:]", TEXT),
    (".missing // \"default\"", TEXT),
    ("[.[] | strings] | length", TEXT),
    (
        "keys, (to_entries | map(\"\\(.key)=\\(.value)\") | join(\"&\"))",
        TEXT,
    ),
    (".title * 2, (.title * 0)", TEXT),
    ("[.title | splits(\", *\")]", TEXT),
    (".title | [scan(\"[A-Z]\")]", TEXT),
    (
        ".title | capture(\"(?<first>\\\\w+), (?<second>\\\\w+)\")",
        TEXT,
    ),
    // Dates
    (".when | fromdate", TEXT),
    (".when | fromdate | todate", TEXT),
    (".when | strptime(\"%Y-%m-%dT%H:%M:%SZ\") | mktime", TEXT),
    (".t | strftime(\"%Y-%m-%d %H:%M\"), todate, gmtime", TEXT),
    (".t | gmtime | mktime", TEXT),
    // Arrays
    ("[1,[2,[3]]] | flatten, flatten(1)", "null"),
    ("[3,1,2] | sort | reverse", "null"),
    ("[1,2,2,3] | unique | length", "null"),
    ("[[1,2],[3]] | transpose", "null"),
    ("2 | IN(1,2,3)", "null"),
    ("[[1,2],[3,4]] | [combinations]", "null"),
    ("[1,null,2] | map(values)", "null"),
    ("[1,2,3,2] | indices(2)", "null"),
    ("{\"a\":[1,2]} | .a += [3]", "null"),
    ("[\"a\",1,null] | join(\"-\")", "null"),
    ("[1,2,3] | .[1.5], .[-1], .[10]", "null"),
    ("[1,2] | [.[] | . as $x | $x * 10]", "null"),
    ("[foreach (1,2,3) as $x (0; . + $x)]", "null"),
    ("[1,2] as [$a, $b] | {a: $a, b: $b}", "null"),
    ("[[1],2] | [.[] as [$a] ?// $a | $a]", "null"),
    ("try error(\"x\") catch .", "null"),
    ("[.[]?], (.a? // \"none\")", "1"),
    ("label $out | 1, break $out, 2", "null"),
    ("@json \"v=\\(.)\"", "[1,\"a\"]"),
    ("tojson, (tojson | fromjson)", r#"{"a":[1,2.5,"x"]}"#),
    ("$__loc__", "null"),
    ("[splits(\", \")]", "\"a, b, c\""),
    ("{} | .a.b.c", "null"),
    ("getpath([\"a\",\"b\"])", "{}"),
    ("[.[] | length]", r#"[[1,2],"héllo",{"a":1},null,-5]"#),
    ("[.[] | type]", r#"[[],"",{},null,1,true]"#),
    ("to_entries", "[10,20]"),
    ("with_entries(.value += 1)", r#"{"a":1,"b":2}"#),
    ("tostream", r#"{"a":[1,{"b":2}]}"#),
    ("fromstream(tostream)", r#"{"a":[1,{"b":2}]}"#),
    (
        "[1|truncate_stream([[0],1],[[1,0],2],[[1,0]],[[1]])]",
        "null",
    ),
    ("ascii_downcase, ascii_upcase", "\"MiXeD\""),
    ("[limit(-1; 1, 2)], [nth(1; 10, 20, 30)]", "null"),
    ("bsearch(3), bsearch(4)", "[1,2,3,5]"),
    (
        "min_by(.a), max_by(.a), unique_by(.a)",
        r#"[{"a":2},{"a":1},{"a":2}]"#,
    ),
    ("utf8bytelength", "\"héllo\""),
    ("splits(\"a\")", "\"banana\""),
    ("any, all", "[true, false]"),
    ("[.[] | tostring]", r#"[1, "1", [1], {"a":1.5}, null]"#),
    // Updates: jq takes every path from the input as it was, `.` included
    (
        ".. |= (if type == \"object\" then del(.email) else . end)",
        USERS,
    ),
    (".. |= (if type == \"number\" then . + 1 else . end)", USERS),
    ("(.. | numbers) |= . * 2", USERS),
    ("(.. | strings) |= ascii_upcase", USERS),
    ("(.users[] | select(.age > 30) | .age) |= . + 1", USERS),
    (
        "(.users[] | select(.email == null) | .email) = \"none\"",
        USERS,
    ),
    (".users[] |= (.tags |= length)", USERS),
    (".users |= map(select(.tags != []))", USERS),
    (".meta |= with_entries(.value //= 0)", USERS),
    ("[.. |= (strings | ascii_upcase)], [. |= empty]", USERS),
    (". |= (.a, .b)", r#"{"a":1,"b":2}"#),
    (
        "(.a, .) |= 7, (.[\"a\", \"b\"]) |= empty",
        r#"{"a":1,"b":2}"#,
    ),
    ("(.a, .b) += 1, (.c, .a) //= 5", r#"{"a":1,"b":2}"#),
    ("if .a then .a else .b end |= 9", r#"{"a":1,"b":2}"#),
];

/// A tool's stdout for `filter` over `input` with `-c`, or `None` where it failed.
fn tool(program: &str, filter: &str, input: &str) -> Option<String> {
    let mut child = Command::new(program)
        .args(["-c", filter])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(input.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn idioms_get_jqs_answer_or_an_error_never_another_answer() {
    let in_ci = std::env::var_os("CI").is_some();
    for program in ["jq", "gojq"] {
        if !crate::util::installed(program) {
            assert!(!in_ci, "{program} is not installed; .ci/run installs it");
            crate::util::skip(&format!(
                "{program} is not installed (Debian package `{program}`; .ci/run installs it)"
            ));
            return;
        }
    }
    let d = Daemon::start();
    let mut client = d.client();
    let options = RunOptions {
        outputs: jqjail_protocol::Outputs::Lines,
        ..RunOptions::default()
    };
    let (mut jq_answers, mut ours_same, mut ours_error, mut gojq_same) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for (filter, input) in CASES {
        let Some(jq) = tool("jq", filter, input) else {
            continue;
        };
        jq_answers += 1;
        if tool("gojq", filter, input).as_deref() == Some(jq.as_str()) {
            gojq_same += 1;
        }
        match client.run(filter, input.as_bytes(), &options) {
            Ok(reply) if reply.output == jq => ours_same += 1,
            Ok(reply) => wrong.push(format!(
                "`{filter}` on {input}:\n  jq 1.6: {jq}  jqjail: {}",
                reply.output
            )),
            Err(ClientError::Server(_)) => ours_error += 1,
            Err(e) => panic!("`{filter}`: transport failure: {e}"),
        }
    }
    eprintln!(
        "idioms: jq 1.6 answers {jq_answers} of {}; jqjail prints the same text on {ours_same} and fails on {ours_error}; gojq prints the same text on {gojq_same}",
        CASES.len()
    );
    assert!(
        jq_answers > CASES.len() * 9 / 10,
        "jq 1.6 failed on too many cases"
    );
    assert!(wrong.is_empty(), "different answers:\n{}", wrong.join("\n"));
}
