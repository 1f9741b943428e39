//! An input document: the scan and jqjail's parser agree on what is refused and why, and a
//! document the scan accepts has exactly the value jaq-json gives it (or jaq's own refusal).
//! The first byte picks the nesting limit (mostly the default, sometimes one the input can
//! reach).
#![no_main]

use jqjail_worker::json::scan;
use jqjail_worker::value::{Refusal, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, text)) = data.split_first() else {
        return;
    };
    let max_depth = if knob < 200 { 1000 } else { u32::from(knob - 200) };
    let ours = parse(&bytes::Bytes::copy_from_slice(text), max_depth);
    match (scan(text, max_depth), ours) {
        (Err(scanned), Err(Refusal::Scan(e))) => assert_eq!(scanned, e),
        (Err(scanned), ours) => panic!("the scan refuses ({scanned:?}), the parser: {ours:?}"),
        (Ok(()), ours) => {
            let ours = match ours {
                // jqjail reads the integer `-0` as jq does (the negative double), jaq as 0.
                Ok(v) => format!("{:?}", Ok::<_, ()>(v))
                    .replace("Num(Float(-0.0))", "Num(Int(0))"),
                Err(Refusal::Jaq(e)) => format!("{:?}", Err::<(), _>(e)),
                Err(Refusal::Scan(e)) => panic!("the scan accepts, the parser refuses: {e:?}"),
            };
            let jaqs = format!("{:?}", jaq_json::read::parse_single(text));
            assert_eq!(ours, jaqs);
        }
    }
});
