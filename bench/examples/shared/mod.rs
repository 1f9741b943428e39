//! What the in-process examples share (a directory of its own, so that cargo does not take it
//! for an example).

use jqjail_protocol::worker::Job;

/// A jq job over one input of `input_len` bytes, at the default depth limit and with room for
/// a 1 MiB answer.
pub(crate) fn job(filter: String, input_len: usize) -> Job {
    Job {
        filter,
        lang: jqjail_protocol::Lang::Jq,
        input_bytes: input_len as u64,
        max_depth: 1000,
        max_output_bytes: 1 << 20,
        args: Default::default(),
        outputs: Default::default(),
        inputs: Default::default(),
    }
}
