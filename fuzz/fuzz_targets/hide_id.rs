//! Hide IDs from clients and the sources they are made from: checking one never panics, and
//! every ID the store would make from any source is one it accepts.
#![no_main]

use jqjail_store::id::{candidates, is_well_formed, sanitize_source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = is_well_formed(&text);
    let key = sanitize_source(&text);
    let sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    for id in candidates(&key, sha) {
        assert!(is_well_formed(&id), "{id}");
    }
});
