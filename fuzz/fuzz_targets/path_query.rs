//! A path-language query: parsing never panics, and a query that parses evaluates (to a value
//! or an error) on a document with every kind of value.
#![no_main]

use jqjail_worker::path::{evaluate, parse};
use libfuzzer_sys::fuzz_target;

const DOC: &[u8] =
    br#"{"a":[1,2.5,"x",null,true,{"b":[{"c":1},{"c":"d"}]}],"items":[{"name":"n","tags":["t"]}],"e":{}}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(q) = parse(query) {
        // jaq's values are reference-counted, not Sync: one per run (the parse is cheap).
        let doc = jaq_json::read::parse_single(DOC).unwrap();
        let _ = evaluate(&q, &doc);
    }
});
