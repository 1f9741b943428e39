//! What each request kind can be refused for at its head, before its tail is read.

use super::run::{args_problem, filter_too_long, input_too_large};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::{ErrorCode, ErrorReply, Request};

/// What can be refused of a request with a tail of `tail_len` bytes before the tail is read:
/// a tail over the input limit, a filter over its limit, a put's labels over the store's. So
/// an oversized head is never held while its tail trickles in, and a put is not written to
/// disk only to be refused.
pub(crate) fn check_head(
    request: &Request<'_>,
    tail_len: u64,
    limits: &jqjail_protocol::Limits,
) -> Option<ErrorReply> {
    if tail_len > limits.max_input_bytes {
        let e = input_too_large(tail_len, limits.max_input_bytes);
        return Some(match request {
            Request::HidePut(_) => ErrorReply {
                message: format!(
                    "hide content is {} bytes, over the {}-byte input limit (a hide is a filter's input)",
                    grouped(tail_len),
                    grouped(limits.max_input_bytes)
                ),
                ..e
            },
            _ => e,
        });
    }
    match request {
        Request::Run(run) if run.filter.len() as u64 > limits.max_filter_bytes => Some(
            filter_too_long(run.filter.len() as u64, limits.max_filter_bytes),
        ),
        Request::Run(run) => args_problem(run.lang, &run.args),
        Request::HidePut(put) => {
            let meta: Vec<(String, String)> = put
                .meta
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            jqjail_store::check_labels(&put.kind, &put.source, &meta)
                .err()
                .map(|e| ErrorReply::new(ErrorCode::InvalidRequest, e.to_string()))
        }
        // Every kind named: a new one is a compile error here until its head's checks are.
        Request::Hello(_)
        | Request::Stats
        | Request::HideGet(_)
        | Request::HideCut(_)
        | Request::HidePage(_)
        | Request::HideEnds(_)
        | Request::HideSearch(_)
        | Request::HideList(_)
        | Request::HideDelete(_)
        | Request::HideUsage => None,
    }
}
