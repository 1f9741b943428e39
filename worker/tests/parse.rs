//! The input parser (`jqjail_worker::value`) against jaq-json's parser and the strict scan,
//! on generated documents and damaged ones: every input the scan refuses, the parser refuses
//! with the scan's error; for every input the scan accepts, the parser builds jaq's value,
//! variant for variant (compared through `Debug`, which shows `Num::Int` and `Num::Dec` apart
//! and keeps key order), or gives jaq's error; and it never panics.

use jqjail_worker::Bytes;
use jqjail_worker::json::scan;
use jqjail_worker::value::{Refusal, parse};
use proptest::prelude::*;

fn number() -> impl Strategy<Value = String> {
    (
        prop::bool::ANY,
        prop_oneof![Just("0".to_string()), "[1-9][0-9]{0,24}"],
        prop::option::of("[0-9]{1,6}"),
        prop::option::of(("[eE]", "[+-]?", "[0-9]{1,3}")),
    )
        .prop_map(|(neg, int, frac, exp)| {
            let mut s = String::new();
            // Not `-0`: jaq reads it as the integer 0, jqjail as jq does, the negative double
            // (value.rs tests it).
            if neg && !(int == "0" && frac.is_none() && exp.is_none()) {
                s.push('-');
            }
            s.push_str(&int);
            if let Some(f) = frac {
                s.push('.');
                s.push_str(&f);
            }
            if let Some((e, sign, digits)) = exp {
                s.push_str(&e);
                s.push_str(&sign);
                s.push_str(&digits);
            }
            s
        })
}

/// A string literal with plain runs, non-ASCII text and every kind of escape, including
/// surrogate pairs and lone surrogates (which jaq refuses).
fn string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z ]{0,12}",
        1 => "\\PC{1,3}".prop_map(|s| s.replace(['"', '\\'], "")),
        2 => prop::sample::select(vec!["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"])
            .prop_map(str::to_string),
        1 => (0u32..0x10000).prop_map(|u| format!("\\u{u:04x}")),
        1 => (0xD800u32..0xDC00, 0xDC00u32..0xE000)
            .prop_map(|(h, l)| format!("\\u{h:04X}\\u{l:04x}")),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|p| format!("\"{}\"", p.concat()))
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", " ", "\n", "\t", "\r\n  "])
}

fn document() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        number(),
        string(),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let item = (ws(), inner.clone(), ws()).prop_map(|(a, v, b)| format!("{a}{v}{b}"));
        prop_oneof![
            prop::collection::vec(item, 0..6).prop_map(|items| format!("[{}]", items.join(","))),
            // Few distinct keys, so that objects repeat keys (the first position stays, the
            // last value wins).
            prop::collection::vec(
                (
                    prop::sample::select(vec!["a", "b", "id", "é", "a\\u0062"]),
                    ws(),
                    inner
                ),
                0..6
            )
            .prop_map(|entries| {
                let body: Vec<String> = entries
                    .into_iter()
                    .map(|(k, w, v)| format!("\"{k}\"{w}:{w}{v}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
}

fn same_as_scan_and_jaq(text: &[u8], max_depth: u32) -> Result<(), TestCaseError> {
    let shown = String::from_utf8_lossy(text);
    let ours = parse(&Bytes::copy_from_slice(text), max_depth);
    match (scan(text, max_depth), ours) {
        (Err(scanned), Err(Refusal::Scan(e))) => prop_assert_eq!(scanned, e, "{}", shown),
        (Err(scanned), ours) => {
            prop_assert!(
                false,
                "{shown}: the scan refuses ({scanned}), the parser: {ours:?}"
            )
        }
        (Ok(()), ours) => {
            let ours = match ours {
                Ok(v) => format!("{:?}", Ok::<_, ()>(v)),
                Err(Refusal::Jaq(e)) => format!("{:?}", Err::<(), _>(e)),
                Err(Refusal::Scan(e)) => format!("refused as by the scan: {e}"),
            };
            let jaqs = format!("{:?}", jaq_json::read::parse_single(text));
            // jqjail reads the integer `-0` as jq does (the negative double), jaq as 0.
            let zero = |s: String| s.replace("Num(Float(-0.0))", "Num(Int(0))");
            prop_assert_eq!(zero(ours), zero(jaqs), "{}", shown);
        }
    }
    Ok(())
}

/// Mostly the usual limit, sometimes one low enough for the documents to reach.
fn depth() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(1000u32), 1 => 0u32..5]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn documents_parse_exactly_as_jaq_parses_them(
        (before, doc, after) in (ws(), document(), ws()), max_depth in depth(),
    ) {
        let text = format!("{before}{doc}{after}");
        prop_assert!(scan(text.as_bytes(), 1000).is_ok(), "{}", text);
        same_as_scan_and_jaq(text.as_bytes(), max_depth)?;
    }

    #[test]
    fn damaged_documents_are_refused_exactly_where_the_scan_refuses_them(
        doc in document(), at in any::<prop::sample::Index>(), byte in any::<u8>(),
        damage in 0..4, max_depth in depth(),
    ) {
        let mut bytes = doc.into_bytes();
        let i = at.index(bytes.len());
        match damage {
            0 => bytes.truncate(i),
            1 => bytes[i] = byte,
            2 => bytes.insert(i, byte),
            _ => {
                // A byte JSON gives meaning to, where the damage is likeliest to be subtle.
                let structural = b"{}[],:\"\\ -.0eE+tfnu";
                bytes.insert(i, structural[usize::from(byte) % structural.len()]);
            }
        }
        same_as_scan_and_jaq(&bytes, max_depth)?;
    }
}
