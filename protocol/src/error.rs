//! Stable error codes. A code names a class of failure that a program can branch on; the
//! human-readable message beside it may change between releases, the code may not.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Every failure a request can end in.
///
/// Append-only: bincode encodes the variant's index, so a new code goes at the end and an
/// existing one is never removed or reordered. JSON carries the `SCREAMING_SNAKE_CASE` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ErrorCode {
    /// v1: the inline input is larger than the input limit.
    InputTooLarge,
    /// v1: the filter text is longer than the filter limit.
    FilterTooLong,
    /// v1: the input nests arrays and objects deeper than the depth limit.
    InputTooDeep,
    /// v1: the final output text would exceed the output limit.
    OutputTooLarge,
    /// v1: the request ran past its wall-clock deadline and its worker was killed.
    Timeout,
    /// v1: the worker used up its CPU-time limit.
    CpuLimit,
    /// v1: the worker's heap hit the memory limit.
    MemoryLimit,
    /// v1: evaluation recursed deeper than the worker's stack allows.
    StackLimit,
    /// v1: the input is not a single strict JSON (RFC 8259) value in UTF-8.
    InvalidJson,
    /// v1: the filter does not parse or names something undefined.
    CompileError,
    /// v1: the filter raised an error while running (including `error` and `halt_error`).
    RuntimeError,
    /// v1: a value in the output has no JSON form (NaN, Infinity, a byte string, a non-string key).
    NonJsonOutput,
    /// v1: the worker made a system call outside its seccomp allowlist and was killed.
    SandboxViolation,
    /// v1: the worker died for another reason (signal or exit status in the message).
    WorkerCrashed,
    /// v1: the peer broke the protocol (bad frame, bad message, wrong message order).
    ProtocolError,
    /// v1: the peer's protocol version is not supported.
    UnsupportedVersion,
    /// v1: a frame's length prefix is over the maximum; the connection is closed after this.
    FrameTooLarge,
    /// v1: the request asked for a limit above the server's, or an otherwise invalid value.
    InvalidRequest,
    /// v1: the server has too much work queued; retry later.
    Overloaded,
    /// v1: the server is shutting down and takes no new requests.
    ShuttingDown,
    /// v1: a failure inside jqjail itself (spawning a worker, an I/O error); a bug or a host problem.
    Internal,
    /// v1 (path language): a property the path names does not exist.
    MissingProperty,
    /// v1 (path language): the path applies an operation to a value of the wrong type.
    TypeMismatch,
    /// v1 (path language): an array index is outside the array.
    IndexOutOfBounds,
    /// v1 (path language): the query does not parse or breaks a query limit.
    InvalidQuery,
    /// v1 (path language): a wildcard projects over more elements than the limit.
    ProjectionTooLarge,
    /// v1: the peer's uid is not a tenant of this daemon; the connection is closed.
    PermissionDenied,
    /// v1 (hide store): no hide with this ID for this tenant (another tenant's reads the same).
    NotFound,
    /// v1 (hide store): the page is outside `1..=total_pages`.
    PageOutOfRange,
    /// v1 (hide store): the put does not fit the tenant's quota and the policy refuses it.
    QuotaExceeded,
    /// v1 (hide store): the hide store failed (an I/O error).
    StoreUnavailable,
}

impl ErrorCode {
    /// The stable name, as it appears in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InputTooLarge => "INPUT_TOO_LARGE",
            Self::FilterTooLong => "FILTER_TOO_LONG",
            Self::InputTooDeep => "INPUT_TOO_DEEP",
            Self::OutputTooLarge => "OUTPUT_TOO_LARGE",
            Self::Timeout => "TIMEOUT",
            Self::CpuLimit => "CPU_LIMIT",
            Self::MemoryLimit => "MEMORY_LIMIT",
            Self::StackLimit => "STACK_LIMIT",
            Self::InvalidJson => "INVALID_JSON",
            Self::CompileError => "COMPILE_ERROR",
            Self::RuntimeError => "RUNTIME_ERROR",
            Self::NonJsonOutput => "NON_JSON_OUTPUT",
            Self::SandboxViolation => "SANDBOX_VIOLATION",
            Self::WorkerCrashed => "WORKER_CRASHED",
            Self::ProtocolError => "PROTOCOL_ERROR",
            Self::UnsupportedVersion => "UNSUPPORTED_VERSION",
            Self::FrameTooLarge => "FRAME_TOO_LARGE",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::Overloaded => "OVERLOADED",
            Self::ShuttingDown => "SHUTTING_DOWN",
            Self::Internal => "INTERNAL",
            Self::MissingProperty => "MISSING_PROPERTY",
            Self::TypeMismatch => "TYPE_MISMATCH",
            Self::IndexOutOfBounds => "INDEX_OUT_OF_BOUNDS",
            Self::InvalidQuery => "INVALID_QUERY",
            Self::ProjectionTooLarge => "PROJECTION_TOO_LARGE",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::NotFound => "NOT_FOUND",
            Self::PageOutOfRange => "PAGE_OUT_OF_RANGE",
            Self::QuotaExceeded => "QUOTA_EXCEEDED",
            Self::StoreUnavailable => "STORE_UNAVAILABLE",
        }
    }

    /// Every code, in wire order.
    pub const ALL: [ErrorCode; 31] = [
        Self::InputTooLarge,
        Self::FilterTooLong,
        Self::InputTooDeep,
        Self::OutputTooLarge,
        Self::Timeout,
        Self::CpuLimit,
        Self::MemoryLimit,
        Self::StackLimit,
        Self::InvalidJson,
        Self::CompileError,
        Self::RuntimeError,
        Self::NonJsonOutput,
        Self::SandboxViolation,
        Self::WorkerCrashed,
        Self::ProtocolError,
        Self::UnsupportedVersion,
        Self::FrameTooLarge,
        Self::InvalidRequest,
        Self::Overloaded,
        Self::ShuttingDown,
        Self::Internal,
        Self::MissingProperty,
        Self::TypeMismatch,
        Self::IndexOutOfBounds,
        Self::InvalidQuery,
        Self::ProjectionTooLarge,
        Self::PermissionDenied,
        Self::NotFound,
        Self::PageOutOfRange,
        Self::QuotaExceeded,
        Self::StoreUnavailable,
    ];
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_match_as_str() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn bincode_indices_are_append_only() {
        // The wire index of every code is its position in ALL; a reorder breaks this test.
        for (index, code) in ErrorCode::ALL.iter().enumerate() {
            let bytes = bincode::serde::encode_to_vec(code, bincode::config::standard()).unwrap();
            assert_eq!(bytes, vec![index as u8], "{code}");
        }
    }
}
