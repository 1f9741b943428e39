//! The input parser (`jqjail_worker::value`) against jaq-json's own, on generated documents:
//! for every input the strict scan accepts, both must build the same value, variant for
//! variant (compared through `Debug`, which shows `Num::Int` and `Num::Dec` apart and keeps
//! key order); on any bytes at all, the parser must answer rather than panic.

use jqjail_worker::Bytes;
use jqjail_worker::json::scan;
use jqjail_worker::value::parse;
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
            if neg {
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

fn same_as_jaq(text: &[u8]) -> Result<(), TestCaseError> {
    let ours = parse(&Bytes::copy_from_slice(text));
    if scan(text, 1000).is_ok() {
        let jaqs = jaq_json::read::parse_single(text);
        prop_assert_eq!(
            format!("{ours:?}"),
            format!("{jaqs:?}"),
            "{}",
            String::from_utf8_lossy(text)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn scanned_documents_parse_exactly_as_jaq_parses_them(
        (before, doc, after) in (ws(), document(), ws())
    ) {
        let text = format!("{before}{doc}{after}");
        prop_assert!(scan(text.as_bytes(), 1000).is_ok(), "{}", text);
        same_as_jaq(text.as_bytes())?;
    }

    #[test]
    fn damaged_documents_get_an_answer_not_a_panic(
        doc in document(), at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>(),
    ) {
        let mut bytes = doc.into_bytes();
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        same_as_jaq(&bytes)?;
    }
}
