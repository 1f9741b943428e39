//! A frame body from a client, in either encoding, and what a client reads from a daemon:
//! decoding never panics or aborts, whatever lengths the bytes declare; a request that
//! decodes encodes again and decodes to the same request (tail length included); a decoded
//! message's tail is always pending (a length, never bytes taken from the frame).
#![no_main]

use jqjail_protocol::{Encoding, Request, Response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for enc in [Encoding::Bincode, Encoding::Json] {
        if let Ok(request) = enc.decode::<Request<'_>>(data) {
            if let Some(tail) = request.tail() {
                assert!(tail.is_empty() || !tail.is_filled());
            }
            let again = enc.encode(&request).expect("a decoded request encodes");
            assert_eq!(enc.decode::<Request<'_>>(&again).unwrap(), request);
        }
        if let Ok(response) = enc.decode::<Response>(data) {
            if let Some(tail) = response.tail() {
                assert!(tail.is_empty() || !tail.is_filled());
            }
        }
    }
});
