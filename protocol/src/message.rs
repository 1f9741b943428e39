//! Client ↔ supervisor messages.
//!
//! Both enums are append-only: bincode encodes a variant by its index, so new variants go at
//! the end and none is ever removed or reordered. A struct's fields are frozen within a protocol
//! version; a new field means a new message variant or a new version. Each item says the
//! version that added it.

use crate::error::ErrorCode;
use crate::hide::{
    HiddenReply, HideContent, HideCut, HideCutRequest, HideEntry, HideListReply, HidePut,
    HidePutReply, HideRef, HideSearchReply, HideSearchRequest, HideUsageReply, OnOversize,
};
use crate::limits::{LimitOverrides, Limits};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// A message from a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request<'a> {
    /// v1: must be the first message on a connection.
    Hello(Hello),
    /// v1: evaluate a filter.
    Run(#[serde(borrow)] RunRequest<'a>),
    /// v1: the daemon's counters, as far as this tenant may see them.
    Stats,
    /// v1: store a hide → [`Response::HidePut`].
    HidePut(#[serde(borrow)] HidePut<'a>),
    /// v1: a hide's metadata and bytes → [`Response::HideContent`].
    HideGet(HideRef),
    /// v1: one page of a hide → [`Response::HideCut`].
    HideCut(HideCutRequest),
    /// v1: every occurrence of a string → [`Response::HideSearch`].
    HideSearch(HideSearchRequest),
    /// v1: the tenant's hides, newest first → [`Response::HideList`].
    HideList,
    /// v1: delete a hide → [`Response::HideEntry`] (what was deleted).
    HideDelete(HideRef),
    /// v1: what the tenant holds and may hold → [`Response::HideUsage`].
    HideUsage,
}

/// A message from the supervisor. Every request gets exactly one response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// v1: answer to [`Request::Hello`].
    Hello(HelloReply),
    /// v1: a successful run.
    Run(RunReply),
    /// v1: any failure.
    Error(ErrorReply),
    /// v1: answer to [`Request::Stats`].
    Stats(StatsReply),
    /// v1: answer to [`Request::HidePut`].
    HidePut(HidePutReply),
    /// v1: answer to [`Request::HideGet`].
    HideContent(HideContent),
    /// v1: answer to [`Request::HideCut`].
    HideCut(HideCut),
    /// v1: answer to [`Request::HideSearch`].
    HideSearch(HideSearchReply),
    /// v1: answer to [`Request::HideList`].
    HideList(HideListReply),
    /// v1: answer to [`Request::HideDelete`]: the deleted hide.
    HideEntry(HideEntry),
    /// v1: answer to [`Request::HideUsage`].
    HideUsage(HideUsageReply),
    /// v1: answer to a run with `on_oversize: hide` whose output was over the output limit.
    Hidden(HiddenReply),
}

/// v1: the daemon's counters. A tenant sees the totals and its own row; the daemon's own
/// uid (and root) sees every tenant's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsReply {
    /// Milliseconds since the daemon started.
    pub uptime_ms: u64,
    /// Runs answered, by outcome: `OK` or an error code (hide, stats and hello requests are
    /// not counted).
    pub outcomes: Vec<(String, u64)>,
    /// Latency of recent runs (the last 1,024), in microseconds.
    pub latency: Latency,
    /// Evaluations running and requests waiting for a slot, now.
    pub running: u64,
    /// Requests waiting for a slot, now.
    pub waiting: u64,
    /// Open connections, now.
    pub connections: u64,
    /// Workers started, workers that failed to start.
    pub workers_started: u64,
    /// Workers that failed to start.
    pub worker_start_failures: u64,
    /// Per tenant (only the caller's own, unless it is the daemon's administrator).
    pub tenants: Vec<TenantStats>,
}

/// v1: latency percentiles, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latency {
    /// Runs in the window.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
}

/// v1: one tenant's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantStats {
    /// The tenant's name.
    pub name: String,
    /// Runs answered.
    pub requests: u64,
    /// Of which errors.
    pub errors: u64,
}

/// v1: the client's opening message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The highest protocol version the client speaks.
    pub protocol: u32,
    /// A free-form client name for the server's logs (e.g. "jqjail-cli/0.1.0").
    #[serde(default)]
    pub client: String,
}

/// v1: the server's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    /// The version both sides will speak: the lower of the two.
    pub protocol: u32,
    /// Server name and version (e.g. "jqjaild/0.1.0").
    pub server: String,
    /// The server's limits; a request may lower them.
    pub limits: Limits,
}

/// v1: evaluate `filter` over `input`.
///
/// The input comes last, so that in bincode everything needed to admit a request precedes
/// the (possibly 20 MiB) input bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest<'a> {
    /// The filter text.
    pub filter: String,
    /// The filter language.
    #[serde(default)]
    pub lang: Lang,
    /// Tighter limits for this request only.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// What to do with output over the output limit.
    #[serde(default)]
    pub on_oversize: OnOversize,
    /// Where the input comes from.
    #[serde(borrow)]
    pub input: Input<'a>,
}

/// v1: the input of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input<'a> {
    /// v1: the JSON text itself.
    Inline(#[serde(borrow)] JsonText<'a>),
    /// v1: a hide of the caller's tenant, by ID: read by the daemon off its own disk.
    Hide(String),
}

/// v1: the language of a filter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    /// v1: jq, evaluated by jaq.
    #[default]
    Jq,
    /// v1: the JMESPath-inspired path language of SPEC §4 (`items[*].name`).
    Path,
}

/// v1: a successful run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReply {
    /// The answer as JSON text: one output → that value, several → an array, none → `null`.
    pub output: String,
    /// What the run cost.
    pub cost: Cost,
}

/// v1: what a run cost, measured by the supervisor (wall time) and the kernel (the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Wall time from the request's arrival at the supervisor to its answer, in microseconds.
    pub wall_us: u64,
    /// CPU time (user + system) of the worker process, in microseconds.
    pub cpu_us: u64,
    /// Peak resident set size of the worker process, in bytes.
    pub peak_rss_bytes: u64,
    /// Bytes of input the worker received.
    pub input_bytes: u64,
    /// Bytes of output text (0 on error).
    pub output_bytes: u64,
}

/// v1: a failed request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// The stable code to branch on.
    pub code: ErrorCode,
    /// What went wrong, naming the limit and the value where there is one.
    pub message: String,
    /// The limit that was hit, where one was.
    #[serde(default)]
    pub limit: Option<u64>,
    /// The value that hit it, where known (for an early stop: the amount seen when stopped).
    #[serde(default)]
    pub actual: Option<u64>,
    /// More detail, e.g. the tail of a crashed worker's stderr.
    #[serde(default)]
    pub detail: Option<String>,
    /// What the run cost before it failed, where a worker ran.
    #[serde(default)]
    pub cost: Option<Cost>,
}

impl ErrorReply {
    /// An error with just a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            limit: None,
            actual: None,
            detail: None,
            cost: None,
        }
    }

    /// The same error, naming the limit and the value that broke it.
    pub fn with_limit(mut self, limit: u64, actual: u64) -> Self {
        self.limit = Some(limit);
        self.actual = Some(actual);
        self
    }
}

impl fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorReply {}

/// JSON text carried as bytes: a raw byte string in bincode (validated by the worker, never
/// by the supervisor), a JSON string holding the text in the JSON encoding.
///
/// Borrowed from the frame buffer when the encoding allows, so a 20 MiB input is not copied
/// on its way through the supervisor.
pub type JsonText<'a> = Bytes<'a>;

/// Bytes on the wire: a byte string in bincode, a (UTF-8) string in JSON. Borrowed from the
/// frame when decoding bincode.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Bytes<'a>(pub Cow<'a, [u8]>);

impl Bytes<'_> {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// An owned copy that outlives the frame it was decoded from.
    pub fn into_owned(self) -> Bytes<'static> {
        Bytes(Cow::Owned(self.0.into_owned()))
    }
}

impl<'a> From<&'a [u8]> for Bytes<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Self(Cow::Borrowed(bytes))
    }
}

impl<'a> From<&'a str> for Bytes<'a> {
    fn from(text: &'a str) -> Self {
        Self(Cow::Borrowed(text.as_bytes()))
    }
}

impl From<Vec<u8>> for Bytes<'static> {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Cow::Owned(bytes))
    }
}

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

/// Deserializes [`Bytes`] that outlive the frame (for replies, which own their data).
pub(crate) fn owned_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes<'static>, D::Error> {
    Bytes::deserialize(d).map(Bytes::into_owned)
}

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            let text = std::str::from_utf8(&self.0).map_err(|e| {
                serde::ser::Error::custom(format!(
                    "bytes are not UTF-8 ({e}); the JSON encoding carries only text"
                ))
            })?;
            serializer.serialize_str(text)
        } else {
            serializer.serialize_bytes(&self.0)
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Bytes<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Bytes<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or bytes")
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(Bytes(Cow::Borrowed(v)))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Bytes(Cow::Borrowed(v.as_bytes())))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Self::Value, E> {
                Ok(Bytes(Cow::Owned(v.to_vec())))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Self::Value, E> {
                Ok(Bytes(Cow::Owned(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Bytes(Cow::Owned(v.as_bytes().to_vec())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Bytes(Cow::Owned(v.into_bytes())))
            }
        }
        if deserializer.is_human_readable() {
            deserializer.deserialize_str(Visit)
        } else {
            deserializer.deserialize_bytes(Visit)
        }
    }
}
