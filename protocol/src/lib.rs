//! The jqjail wire protocol: length-prefixed frames, a version handshake, and append-only
//! message enums in two encodings (bincode for Rust, JSON for everyone else).
//!
//! This crate owns every message type that crosses a process boundary — client ↔ supervisor
//! and supervisor ↔ worker (the worker's start-up arguments included). The one exception is
//! the zygote's control socket, whose one-line text messages (`ok PID`, `err WHY`) are defined
//! with it in `jqjail_worker::zygote`. Other crates derive serde only to read configuration
//! files. It does no I/O policy (timeouts, retries) and never interprets a filter or an input
//! document. It also writes the stats in Prometheus's text format ([`exposition`]), so the
//! CLI and the daemon's metrics listener name every metric alike.
//!
//! `PROTOCOL.md` at the repository root is the normative description; the golden-bytes tests
//! in this crate pin it.

pub mod codec;
pub mod error;
pub mod exposition;
pub mod frame;
pub mod hide;
pub mod limits;
pub mod message;
pub mod syscalls;
pub mod tail;
pub mod values;
pub mod worker;

pub use codec::{CodecError, Encoding};
pub use error::ErrorCode;
pub use frame::{FrameError, MAX_FRAME_BYTES};
pub use hide::{
    ElementsLeftOut, End, HiddenReply, HideContent, HideCut, HideCutRequest, HideEnds,
    HideEndsRequest, HideEntry, HideListReply, HideListRequest, HideMatch, HidePage,
    HidePageRequest, HidePut, HidePutReply, HideRef, HideSearchReply, HideSearchRequest,
    HideUsageReply, LeftOut, OnOversize,
};
pub use limits::{LimitOverrides, Limits};
pub use message::{
    Args, Cost, ErrorReply, Hello, HelloReply, Input, Lang, Latency, Named, Outputs, Request,
    Response, RunReply, RunRequest, StatsReply, TenantStats,
};
pub use tail::Tail;

/// The protocol version this build speaks. Version 2 replaced version 1 (inputs, contents
/// and outputs inside frames) with small frames and raw tails; nothing speaks version 1 any
/// more. Version 3 added `hide_page` (JSON pages, a page by path) and version 4 `hide_ends`
/// (a hide's beginning and end together); neither changed anything else, so a version-2 or 3
/// peer is served as before.
pub const PROTOCOL_VERSION: u32 = 4;

/// The oldest protocol version this build still accepts from a peer.
pub const MIN_PROTOCOL_VERSION: u32 = 2;
