//! jq as jq does it: the layer jqjail puts between jaq's engine and the user, so that a
//! filter written for jq gets jq's answer or an error that names what is not supported.
//!
//! - [`val`]: the value type ([`Jv`]) with jq's indexing, path updates, arithmetic and text;
//! - [`number`]: numbers written as jq writes them;
//! - [`funs`] and `defs.jq`: jq's builtins where jaq's differ or are missing;
//! - [`range`]: `range/3`, counted as integers while they are exact;
//! - [`desugar`]: jq syntax jaq's parser lacks (`?//`, `$__loc__`, `$name: pattern`),
//!   rewritten into syntax it has before compiling;
//! - [`modify`]: jq's updates, for a left-hand side where jaq's update would differ.

pub mod desugar;
pub mod funs;
pub mod jvparse;
pub mod modify;
pub mod number;
pub mod range;
pub mod val;

pub use val::Jv;

/// What jqjail's filters run on.
pub type Data = jaq_core::data::JustLut<Jv>;

/// jq's definitions that jqjail adds after jaq's standard library.
pub const DEFS: &str = include_str!("defs.jq");

/// jaq's natives that jqjail replaces (by a native of its own or a definition in `DEFS`).
const REPLACED: [&str; 12] = [
    "keys_unsorted",
    "utf8bytelength",
    "ltrimstr",
    "rtrimstr",
    "startswith",
    "endswith",
    "tobytes",
    "localtime",
    "strflocaltime",
    "env",
    "stderr_empty",
    "strptime",
];

/// jaq's natives that jqjail's definitions wrap, under a second name: jaq's own definitions
/// keep calling them by the first, and jqjail's definitions of the first name shadow them
/// for filters.
fn alias(name: &str) -> Option<&'static str> {
    Some(match name {
        "limit" => "_jaq_limit",
        "sort_by" => "_jaq_sort_by",
        "sort" => "_jaq_sort",
        "group_by" => "_jaq_group_by",
        "explode" => "_jaq_explode",
        "ascii_downcase" => "_jaq_ascii_downcase",
        "ascii_upcase" => "_jaq_ascii_upcase",
        "range" => "_jaq_range",
        "reverse" => "_jaq_reverse",
        "mktime" => "_jaq_mktime",
        "gmtime" => "_jaq_gmtime",
        "strftime" => "_jaq_strftime",
        _ => return None,
    })
}

/// jaq's generic natives (less the replaced ones, some under a second name too) and
/// jqjail's own.
pub fn natives() -> impl Iterator<Item = jaq_core::native::Fun<Data>> {
    let jaq = || jaq_core::funs::<Data>().chain(jaq_std::funs::<Data>());
    let aliases = jaq().filter_map(|(name, arity, f)| Some((alias(name)?, arity, f)));
    jaq()
        .filter(|(name, _, _)| !REPLACED.contains(name) && !funs::MATH.contains(name))
        .chain(aliases)
        .chain(funs::funs())
        .chain(std::iter::once(modify::fun()))
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;

    fn eval(filter: &str, input: &str) -> String {
        let engine = Engine::new();
        let compiled = engine.compile(filter).unwrap();
        let input = jaq_json::read::parse_single(input.as_bytes()).unwrap();
        match engine.run(&compiled, input, 100_000) {
            Ok(out) => out,
            Err(e) => format!("error: {}", e.message),
        }
    }

    /// A NaN key equals nothing, itself included: deleting it once looped for ever.
    #[test]
    fn deleting_a_nan_index_ends_and_deletes_nothing() {
        assert_eq!(eval("del(.[nan])", "[1,2,3]"), "[1,2,3]");
        assert_eq!(eval("del(.[nan,nan], .[0])", "[1,2,3]"), "[2,3]");
    }

    /// Only the top of `contains` compares kinds; below it, another kind is not contained.
    #[test]
    fn containment_errors_only_at_the_top() {
        assert_eq!(eval(r#"contains({"a":"x"})"#, r#"{"a":1}"#), "false");
        assert_eq!(eval(r#"contains(["x"])"#, "[1,2]"), "false");
        assert!(eval(r#"contains("x")"#, "[1]").contains("cannot have their containment"));
    }

    #[test]
    fn repetition_past_jqs_limit_is_jqs_error() {
        assert_eq!(
            eval(r#""abc" * 1000000000"#, "null"),
            "error: filter error: Repeat string result too long"
        );
        assert_eq!(
            eval(r#""ab" * 2.5, "ab" * 0.5, "ab" * 0"#, "null"),
            r#"["abab","ab",null]"#
        );
    }

    /// Messages name a value by its first bytes, however large it is.
    #[test]
    fn messages_show_a_bounded_part_of_a_value() {
        assert_eq!(
            eval("[range(100000)] - 1", "null"),
            "error: filter error: array ([0,1,2,3,4,...) and number (1) cannot be subtracted"
        );
        assert_eq!(
            eval("{} - 1", "null"),
            "error: filter error: object ({}) and number (1) cannot be subtracted"
        );
    }

    #[test]
    fn integer_literals_stay_exact_under_negation() {
        assert_eq!(
            eval("-12345678901234567890", "null"),
            "-12345678901234567890"
        );
        assert_eq!(eval("[range(5)] - [range(1; 4)]", "null"), "[0,4]");
    }

    /// jq's numbers are doubles, and a zero may be negative: jq writes it `-0`.
    #[test]
    fn negative_zero_is_jqs() {
        assert_eq!(
            eval("[-0, 0 * -1, -0 + -0, 0 - 0, -(0), 0 / -1]", "null"),
            "[-0,-0,-0,0,-0,-0]"
        );
        assert_eq!(eval("[-0, 0] | map(tostring)", "null"), r#"["-0","0"]"#);
        assert_eq!(eval("-0 == 0", "null"), "true");
    }

    /// Each of these is Debian's jq 1.6's own answer.
    #[test]
    fn math_builtins_are_cs_with_jqs_messages() {
        assert_eq!(eval("[.[] | floor]", "[1e300, 2.5, -2.5]"), "[1e+300,2,-3]");
        assert_eq!(eval("[.[] | round]", "[-0.4, 0.5, -2.5]"), "[-0,1,-3]");
        assert_eq!(eval("[.[] | rint]", "[0.5, 1.5, 2.5]"), "[0,2,2]");
        assert_eq!(
            eval("12345678901234567890 | floor", "null"),
            "12345678901234567890"
        );
        assert_eq!(
            eval("[3 | gamma, lgamma, tgamma]", "null"),
            "[0.6931471805599453,0.6931471805599453,2]"
        );
        assert_eq!(
            eval("2.5 | frexp, modf, lgamma_r", "null"),
            "[[0.625,2],[0.5,2],[0.2846828704729192,1]]"
        );
        assert_eq!(
            eval("try floor catch .", r#""a""#),
            r#""string (\"a\") number required""#
        );
        assert_eq!(
            eval("try sqrt catch .", r#"{"a":"bbbbbbbbbbbbbbbb"}"#),
            r#""object ({\"a\":\"bbbbb...) number required""#
        );
    }

    /// Builtins where jaq's answer was not jq 1.6's, each found by running jq 1.6 beside.
    #[test]
    fn builtins_answer_as_jq_1_6() {
        for (filter, input, jq) in [
            ("[last(empty)]", "null", "[null]"),
            ("[combinations]", "null", "[[]]"),
            (r#"indices("a"), index("a")"#, r#"{"a":[5,6]}"#, "[[5,6],5]"),
            (r#"has("a")"#, "null", "false"),
            (
                r#"format("csv"), format("text")"#,
                r#"[1,"a"]"#,
                r#"["1,\"a\"","[1,\"a\"]"]"#,
            ),
            ("bsearch(2), bsearch(0)", "[3,1,2,1]", "[2,-1]"),
            ("[pow(1,2; 3,4)]", "null", "[1,8,1,16]"),
            (
                r#"[setpath(["a"],["b"]; 1,2)]"#,
                "null",
                r#"[{"a":1},{"b":1},{"a":2},{"b":2}]"#,
            ),
            (
                "ldexp(1; 1e10), pow(123456789; 2)",
                "null",
                "[0,15241578750190522]",
            ),
            (
                "try sort_by(.a) catch .",
                "[1]",
                r#""Cannot index number with string \"a\"""#,
            ),
            (
                "try sort catch .",
                "null",
                r#""null (null) cannot be sorted, as it is not an array""#,
            ),
            (
                "try group_by(.) catch .",
                "{}",
                r#""object ({}) and array ([]) cannot be sorted, as they are not both arrays""#,
            ),
            (
                "try min catch .",
                "1",
                r#""number (1) and number (1) cannot be iterated over""#,
            ),
            (
                "try unique catch .",
                r#""a""#,
                r#""Cannot iterate over string (\"a\")""#,
            ),
            (
                "try ascii_upcase catch .",
                "1",
                r#""explode input must be a string""#,
            ),
            (
                "try @csv catch .",
                "1",
                r#""number (1) cannot be csv-formatted, only array""#,
            ),
            (
                r#"[.[] | @base64d | explode]"#,
                r#"["YWI", "null", "7aCA"]"#,
                "[[97,98],[65533,65533],[65533]]",
            ),
            (
                "try @base64d catch .",
                r#""Y""#,
                r#""string (\"Y\") trailing base64 byte found""#,
            ),
            ("[.[[]], indices([])]", "[0,1]", "[[],[]]"),
            (
                "[infinite % 3, -1e19 % 7, nan % 3, 5 % nan, 7 % 1e300]",
                "null",
                "[1,-1,null,null,7]",
            ),
            (
                "try format(1) catch .",
                "null",
                r#""number (1) is not a valid format""#,
            ),
            (
                "try todate catch ., try localtime catch .",
                r#""x""#,
                r#"["strftime/1 requires parsed datetime inputs","localtime() requires numeric inputs"]"#,
            ),
            (
                "try fromdate catch .",
                "1",
                r#""strptime/1 requires string inputs and arguments""#,
            ),
        ] {
            assert_eq!(eval(filter, input), jq, "{filter}");
        }
    }

    /// `fromjson` and `tonumber` read as jq reads: its extra literals, its messages.
    #[test]
    fn texts_read_as_jq_reads_them() {
        assert_eq!(
            eval("[.[] | fromjson]", r#"["01", ".5", "NaN", "-0"]"#),
            "[1,0.5,null,-0]"
        );
        assert_eq!(
            eval("try fromjson catch .", r#""nan""#),
            r#""Invalid literal at EOF at line 1, column 3 (while parsing 'nan')""#
        );
        assert_eq!(
            eval("try tonumber catch .", r#""1 2""#),
            r#""Unexpected extra JSON values (while parsing '1 2')""#
        );
        assert_eq!(
            eval("try tonumber catch .", r#""[1]""#),
            r#""string (\"[1]\") cannot be parsed as a number""#
        );
        // jq's parsing depth: 256 levels, whichever reader sees the text.
        let nested = |n| format!("\"{}{}\"", "[".repeat(n), "]".repeat(n));
        assert_eq!(eval("fromjson | length", &nested(256)), "1");
        for text in [nested(257), nested(300)] {
            assert!(
                eval("try fromjson catch .", &text)
                    .starts_with(r#""Exceeds depth limit for parsing at line 1, column 257"#),
                "{text}"
            );
        }
    }

    /// jq's updates: paths from the input as it was, `.` among them, deletions at the end.
    #[test]
    fn updates_take_their_paths_from_the_input_as_it_was() {
        for (filter, input, jq) in [
            (
                ".. |= (if type == \"object\" then del(.k) else . end)",
                r#"{"a":{"k":1},"k":2}"#,
                r#"{"a":{"k":null},"k":null}"#,
            ),
            ("[. |= empty, (. |= (1, 2))]", "[3]", "[null,1]"),
            ("[.. |= (numbers | . + 1)]", "[1,[2]]", "[null]"),
            ("(.[0], .[1]) |= empty", "[1,2,3]", "[3]"),
            (
                "(.a, .a.b) |= empty",
                r#"{"a":{"b":1},"c":2}"#,
                r#"{"c":2}"#,
            ),
            (
                "[.. = 1]",
                "[[2]]",
                "error: filter error: Cannot index number with number",
            ),
            ("(.a, .b) += 1", r#"{"a":1}"#, r#"{"a":2,"b":1}"#),
            (
                "try (.a[1:] |= 1) catch .",
                r#"{"a":{}}"#,
                r#""Cannot index object with object""#,
            ),
            // An empty right-hand side changes nothing on the way to its path.
            (
                "[(.[3]) |= empty, ((.[-9]) |= empty)]",
                "[1,2,3,4]",
                "[[1,2,3],[1,2,3,4]]",
            ),
            ("[(.[3]) |= empty]", "[1]", "[[1]]"),
            ("[.a.b |= empty, (.x[0] |= select(false))]", "{}", "[{},{}]"),
            // jq's grouping, and keywords as field names.
            (
                "[.a // .b |= 5, (.a = null // 5)]",
                r#"{"a":1}"#,
                r#"[1,{"a":null}]"#,
            ),
            (".a |= 1 as $x | $x + 1", "{}", r#"{"a":2}"#),
            (
                "[.if, .end |= 1]",
                r#"{"if":0,"end":0}"#,
                r#"[0,{"if":0,"end":1}]"#,
            ),
            ("try (.a, .b) |= 3", "{}", r#"{"a":3,"b":3}"#),
            // A comment at the end, a `catch` in a binder, `end` as a key: as jq.
            (".a |= 1 # set a", "{}", r#"{"a":1}"#),
            (". as [$a] ?// $a | $a # first", "[1]", "1"),
            (
                ".a |= . as $v | try tonumber catch $v",
                r#"{"a":"x"}"#,
                r#"{"a":"x"}"#,
            ),
            (
                "[(.a = null // 5), .[if true then 1 else 0 end:]]",
                "[1,2]",
                "error: filter error: Cannot index array with string \"a\"",
            ),
            ("{end: 1} as $o | .a = null // 5", "{}", r#"{"a":null}"#),
        ] {
            assert_eq!(eval(filter, input), jq, "{filter}");
        }
    }

    /// `E op T as $x | B` binds `T` alone, as jq's grammar does (jaq's binds `E op T`).
    #[test]
    fn binders_after_an_operator_bind_the_term_alone() {
        for (filter, jq) in [
            ("2 * 3 as $x | $x + 1", "8"),
            ("[10 - 1e-1 as $x | $x]", "[9.9]"),
            ("[1, 2 * 3 as [$x] ?// $x | $x]", "[1,6]"),
            ("1 + 2 as $x | $x * 10 # c", "21"),
            ("reduce (1, 2) as $x (0; . + $x)", "3"),
        ] {
            assert_eq!(eval(filter, "null"), jq, "{filter}");
        }
    }

    /// An update changes the child it takes in place: the value held once stays held once.
    #[test]
    fn deep_updates_build_the_same_value() {
        assert_eq!(
            eval("reduce range(3) as $i (.; .a[$i].b = $i)", "{}"),
            r#"{"a":[{"b":0},{"b":1},{"b":2}]}"#
        );
        assert_eq!(
            eval(".a.b |= . + 1", r#"{"a":{"b":1,"c":2}}"#),
            r#"{"a":{"b":2,"c":2}}"#
        );
    }

    /// `?` excuses a path that cannot be taken, not an update that cannot be made: jq's
    /// `setpath` still fails on an index before the start.
    #[test]
    fn optional_paths_excuse_only_the_path() {
        assert_eq!(eval(".a? = 5", "1"), "1");
        assert_eq!(
            eval("try (.[-1]? = 1) catch .", "null"),
            r#""Out of bounds negative array index""#
        );
        assert_eq!(eval(r#".["a":]? = [1]"#, "[0]"), "[0]");
    }
}
