//! An input document: the scan and jqjail's parser agree on what is refused and why, and a
//! document the scan accepts has exactly the value jaq-json gives it (or jaq's own refusal).
//! The first byte picks the nesting limit (mostly the default, sometimes one the input can
//! reach).
#![no_main]

use jaq_json::{Num, Val};
use jqjail_worker::json::scan;
use jqjail_worker::value::{Refusal, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, text)) = data.split_first() else {
        return;
    };
    let max_depth = if knob < 200 {
        1000
    } else {
        u32::from(knob - 200)
    };
    let ours = parse(&bytes::Bytes::copy_from_slice(text), max_depth);
    match (scan(text, max_depth), ours) {
        (Err(scanned), Err(Refusal::Scan(e))) => assert_eq!(scanned, e),
        (Err(scanned), ours) => panic!("the scan refuses ({scanned:?}), the parser: {ours:?}"),
        (Ok(()), ours) => {
            let ours = match ours {
                Ok(v) => format!("{:?}", Ok::<_, ()>(as_jaq_reads_it(&v))),
                Err(Refusal::Jaq(e)) => format!("{:?}", Err::<(), _>(e)),
                Err(Refusal::Scan(e)) => panic!("the scan accepts, the parser refuses: {e:?}"),
            };
            let jaqs = format!("{:?}", jaq_json::read::parse_single(text));
            assert_eq!(ours, jaqs);
        }
    }
});

/// The value as jaq reads its text: jqjail reads the integer `-0` as jq does (the negative
/// double), jaq as 0. Numbers only, walked: a string that spells `Num(Float(-0.0))` stays as it
/// is (CI's fuzz run found that a textual replace on the printed value changed strings too).
fn as_jaq_reads_it(v: &Val) -> Val {
    match v {
        Val::Num(Num::Float(z)) if *z == 0.0 && z.is_sign_negative() => Val::Num(Num::Int(0)),
        Val::Arr(items) => items.iter().map(as_jaq_reads_it).collect(),
        Val::Obj(members) => Val::obj(
            members
                .iter()
                .map(|(k, v)| (k.clone(), as_jaq_reads_it(v)))
                .collect(),
        ),
        v => v.clone(),
    }
}
