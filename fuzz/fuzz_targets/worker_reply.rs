//! What a worker sends its supervisor (assume the worker runs the attacker's code): the
//! ready-or-failed message and the reply. Decoding never panics or aborts.
#![no_main]

use jqjail_protocol::Encoding;
use jqjail_protocol::worker::{Reply, Started};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(reply) = Encoding::Bincode.decode::<Reply>(data) {
        let again = Encoding::Bincode.encode(&reply).unwrap();
        assert_eq!(Encoding::Bincode.decode::<Reply>(&again).unwrap(), reply);
    }
    if let Ok(started) = Encoding::Bincode.decode::<Started>(data) {
        let again = Encoding::Bincode.encode(&started).unwrap();
        assert_eq!(
            Encoding::Bincode.decode::<Started>(&again).unwrap(),
            started
        );
    }
});
