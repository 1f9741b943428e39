//! A frame body from a client, in either encoding, and what a client reads from a daemon:
//! decoding never panics or aborts, whatever lengths the bytes declare; a request that
//! decodes encodes again and decodes to the same request; a streamed head never claims more
//! bytes than it was given.
#![no_main]

use jqjail_protocol::codec::{decode_bincode_put_head, decode_bincode_run_head};
use jqjail_protocol::{Encoding, Request, Response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for enc in [Encoding::Bincode, Encoding::Json] {
        if let Ok(request) = enc.decode::<Request<'_>>(data) {
            let again = enc.encode(&request).expect("a decoded request encodes");
            assert_eq!(enc.decode::<Request<'_>>(&again).unwrap(), request);
        }
        let _ = enc.decode::<Response>(data);
    }
    if let Some(head) = decode_bincode_run_head(data) {
        assert!(head.head_len <= data.len());
    }
    if let Some(head) = decode_bincode_put_head(data) {
        assert!(head.head_len <= data.len());
    }
});
