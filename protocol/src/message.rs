//! Client ↔ supervisor messages.
//!
//! Both enums are append-only: bincode encodes a variant by its index, so new variants go at
//! the end and none is ever removed or reordered. A struct's fields are frozen within a protocol
//! version; a new field means a new message variant or a new version. Each item says the
//! version that added it.

use crate::error::ErrorCode;
use crate::hide::{
    HiddenReply, HideContent, HideCut, HideCutRequest, HideEnds, HideEndsRequest, HideEntry,
    HideListReply, HideListRequest, HidePage, HidePageRequest, HidePut, HidePutReply, HideRef,
    HideSearchReply, HideSearchRequest, HideUsageReply, OnOversize,
};
use crate::limits::{LimitOverrides, Limits};
use crate::tail::Tail;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A message from a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request<'a> {
    /// v1: must be the first message on a connection.
    Hello(Hello),
    /// v1 (its input's fields: v2): evaluate a filter.
    Run(RunRequest<'a>),
    /// v1: the daemon's counters, as far as this tenant may see them.
    Stats,
    /// v1: store a hide → [`Response::HidePut`].
    HidePut(HidePut<'a>),
    /// v1: a hide's metadata and bytes → [`Response::HideContent`].
    HideGet(HideRef),
    /// v1: one page of a hide → [`Response::HideCut`].
    HideCut(HideCutRequest),
    /// v1: every occurrence of a string → [`Response::HideSearch`].
    HideSearch(HideSearchRequest),
    /// v1: the tenant's hides, newest first, one page at a time (v2) →
    /// [`Response::HideList`].
    HideList(#[serde(default)] HideListRequest),
    /// v1: delete a hide → [`Response::HideEntry`] (what was deleted).
    HideDelete(HideRef),
    /// v1: what the tenant holds and may hold → [`Response::HideUsage`].
    HideUsage,
    /// v3: one page of a hide, by number or path, in JSON or byte pages →
    /// [`Response::HidePage`].
    HidePage(HidePageRequest),
    /// v4: a hide's beginning and end together → [`Response::HideEnds`].
    HideEnds(HideEndsRequest),
}

/// A message from the supervisor. Every request gets exactly one response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// v1: answer to [`Request::Hello`].
    Hello(HelloReply),
    /// v1 (its output a tail: v2): a successful run.
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
    /// v1 (its first page's content a tail: v2): answer to a run with `on_oversize: hide`
    /// whose output was over the output limit.
    Hidden(HiddenReply),
    /// v3: answer to [`Request::HidePage`].
    HidePage(HidePage),
    /// v4: answer to [`Request::HideEnds`].
    HideEnds(Box<HideEnds>),
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

impl StatsReply {
    /// How many runs were answered with `code` (`OK` or an error code's name).
    pub fn outcome(&self, code: &str) -> u64 {
        self.outcomes
            .iter()
            .find(|(c, _)| c == code)
            .map_or(0, |(_, n)| *n)
    }
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

/// v1: evaluate `filter` over `input`. An inline input is the message's tail (v2).
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
    pub input: Input<'a>,
    /// v2: values bound in a jq filter: `$name` for each named one, and `$ARGS`
    /// (`{"positional": [...], "named": {...}}`). Refused for the path language.
    #[serde(default)]
    pub args: Args,
    /// v2: how several outputs are answered: collapsed into one JSON text (the default), or
    /// each on a line of its own.
    #[serde(default)]
    pub outputs: Outputs,
}

/// v2: the form of a run's answer text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outputs {
    /// v2: one output → that value, several → an array of them, none → `null`.
    #[default]
    Collapsed,
    /// v2: every output as compact JSON text followed by a newline (none: empty), so a
    /// client can tell one array from several outputs. The cap counts the newlines.
    Lines,
}

/// v2: a run's arguments, each value a JSON text (as `--argjson` takes it; a string value is
/// its JSON form, `"\"text\""`). The supervisor passes them on unparsed; the worker parses
/// each as strictly as an input, so a value can only ever be data, never filter code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Args {
    /// Named values, bound as `$name` and in `$ARGS.named`, in the order given.
    #[serde(default)]
    pub named: Named,
    /// Positional values, in `$ARGS.positional`.
    #[serde(default)]
    pub positional: Vec<String>,
}

impl Args {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && self.positional.is_empty()
    }
}

/// v2: named argument values in the order they were given (jq lists `$ARGS.named` in
/// command-line order). On the wire it is a map (bincode: a length, then name and value for
/// each; JSON: an object), so a name given twice is refused when decoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named(Vec<(String, String)>);

impl Named {
    /// Adds `name` unless it is there already, as jq keeps the first value of a name.
    /// Returns whether it was added. (A scan: for a few names at a time; build many at once
    /// with `collect`.)
    pub fn insert_first(&mut self, name: String, value: String) -> bool {
        if self.get(&name).is_some() {
            return false;
        }
        self.0.push((name, value));
        true
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The names and values, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The names, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, String)> for Named {
    /// Keeps the first value of a name given twice.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        let mut seen = std::collections::HashSet::new();
        let mut named = Named::default();
        for (name, value) in pairs {
            if seen.insert(name.clone()) {
                named.0.push((name, value));
            }
        }
        named
    }
}

impl<const N: usize> From<[(String, String); N]> for Named {
    fn from(pairs: [(String, String); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl Serialize for Named {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Named {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Named;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of argument names to JSON texts")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Named, A::Error> {
                // The capacity is not taken from the peer: entries are pushed as they decode.
                // Names are checked against a set: a scan per name would make a frame of
                // many short names quadratic to decode (an attack on the daemon's runtime).
                let mut named = Named::default();
                let mut seen = std::collections::HashSet::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    if !seen.insert(name.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "named argument `{name}` is given twice"
                        )));
                    }
                    named.0.push((name, value));
                }
                Ok(named)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Why `name` cannot name an argument, if it cannot: a jq variable name (`[A-Za-z_]
/// [A-Za-z0-9_]*`, at most 64 bytes) that is not one jqjail binds itself (`ENV`, `ARGS`,
/// `__loc__`).
pub fn arg_name_problem(name: &str) -> Option<String> {
    let well_formed = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    match name {
        _ if !well_formed => {
            let shown: String = name.chars().take(64).collect();
            let more = if shown.len() < name.len() { "…" } else { "" };
            Some(format!(
                "`{}{more}` ({} bytes) is not an argument name: a letter or `_`, then letters, digits or `_`, at most 64 bytes",
                shown.escape_debug(),
                name.len()
            ))
        }
        "ENV" | "ARGS" | "__loc__" => Some(format!("`${name}` is reserved by jqjail")),
        _ => None,
    }
}

/// v1: the input of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input<'a> {
    /// v2: JSON text of this many bytes, sent raw after the request's frame.
    Inline(Tail<'a>),
    /// v1: a hide of the caller's tenant, by ID: read by the daemon off its own disk.
    Hide(String),
    /// v2, added for jq's `input` and `inputs`: zero or more JSON texts of this many bytes in
    /// all, separated by whitespace, sent raw after the frame as `inline` is. The filter reads
    /// them with `input` and `inputs`. With `null_input` it runs once with `.` null (jq's
    /// `-n`); without, once for each value that `input` and `inputs` have not read, as jq
    /// runs a stream.
    Values {
        /// The texts' length.
        values: Tail<'a>,
        /// Whether the filter runs once on `null` rather than on each value.
        null_input: bool,
    },
}

/// v1: the language of a filter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    /// v1: jq, evaluated by jaq.
    #[default]
    Jq,
    /// v1: the JMESPath-inspired path language (`items[*].name`; `worker/src/path.rs`).
    Path,
    /// v2: no filter (the filter must be empty): the answer is the input's shape summary
    /// (`worker/src/shape.rs`), a bounded skeleton of at most 4 KiB whatever the input.
    Shape,
}

/// v1: a successful run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReply {
    /// The answer as JSON text: one output → that value, several → an array, none → `null`.
    /// The message's tail (v2): on the wire, `output_bytes`, then the text after the frame.
    #[serde(rename = "output_bytes")]
    pub output: Tail<'static>,
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

impl<'a> Request<'a> {
    /// The heap memory this decoded request holds, bytes: each string's and vector's
    /// allocation as a general-purpose allocator rounds it, its tail's bytes if in hand. A
    /// server takes this from its budget before it keeps the request (a frame of many short
    /// arguments decodes to many times its wire size).
    pub fn held_bytes(&self) -> u64 {
        let tail = |t: &Tail<'_>| alloc_bytes(t.as_bytes().len());
        match self {
            Request::Hello(h) => string_bytes(&h.client),
            Request::Run(run) => {
                let input = match &run.input {
                    Input::Inline(t) | Input::Values { values: t, .. } => tail(t),
                    Input::Hide(id) => string_bytes(id),
                };
                let named = run.args.named.0.capacity() * 2 * std::mem::size_of::<String>();
                let positional = run.args.positional.capacity() * std::mem::size_of::<String>();
                string_bytes(&run.filter)
                    + input
                    + alloc_bytes(named)
                    + alloc_bytes(positional)
                    + run
                        .args
                        .named
                        .iter()
                        .map(|(n, v)| string_bytes(n) + string_bytes(v))
                        .sum::<u64>()
                    + run
                        .args
                        .positional
                        .iter()
                        .map(|s| string_bytes(s))
                        .sum::<u64>()
            }
            Request::HidePut(put) => {
                // A B-tree node holds up to 11 pairs; count one node per pair, generously.
                let node = 11 * 2 * std::mem::size_of::<String>() + 64;
                string_bytes(&put.kind)
                    + string_bytes(&put.source)
                    + tail(&put.content)
                    + put
                        .meta
                        .iter()
                        .map(|(k, v)| alloc_bytes(node) / 4 + string_bytes(k) + string_bytes(v))
                        .sum::<u64>()
            }
            Request::HideGet(r) | Request::HideDelete(r) => string_bytes(&r.id),
            Request::HideCut(r) => string_bytes(&r.id),
            Request::HidePage(r) => {
                string_bytes(&r.id)
                    + match &r.at {
                        crate::hide::PageAt::Path(path) => string_bytes(path),
                        crate::hide::PageAt::Page(_) | crate::hide::PageAt::Offset(_) => 0,
                    }
            }
            Request::HideEnds(r) => string_bytes(&r.id),
            Request::HideSearch(r) => string_bytes(&r.id) + string_bytes(&r.query),
            Request::Stats | Request::HideList(_) | Request::HideUsage => 0,
        }
    }

    /// The request's tail, if its kind has one: a run's inline input, a put's content. The
    /// match names every kind, so a new one is a compile error here until its tail is decided.
    pub fn tail(&self) -> Option<&Tail<'a>> {
        match self {
            Request::Run(RunRequest {
                input: Input::Inline(tail) | Input::Values { values: tail, .. },
                ..
            }) => Some(tail),
            Request::HidePut(put) => Some(&put.content),
            Request::Run(RunRequest {
                input: Input::Hide(_),
                ..
            })
            | Request::Hello(_)
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

    /// The request's tail, to fill (every kind named, as in [`Request::tail`]).
    pub fn tail_mut(&mut self) -> Option<&mut Tail<'a>> {
        match self {
            Request::Run(RunRequest {
                input: Input::Inline(tail) | Input::Values { values: tail, .. },
                ..
            }) => Some(tail),
            Request::HidePut(put) => Some(&mut put.content),
            Request::Run(RunRequest {
                input: Input::Hide(_),
                ..
            })
            | Request::Hello(_)
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
}

impl Response {
    /// The response's tail, if its kind has one: a run's output, a hide's content or page.
    /// The match names every kind, so a new one is a compile error here until its tail is
    /// decided.
    pub fn tail(&self) -> Option<&Tail<'static>> {
        match self {
            Response::Run(reply) => Some(&reply.output),
            Response::HideContent(content) => Some(&content.content),
            Response::HideCut(cut) => Some(&cut.content),
            Response::Hidden(hidden) => Some(&hidden.first.content),
            Response::HidePage(page) => Some(&page.content),
            Response::HideEnds(ends) => Some(&ends.content),
            Response::Hello(_)
            | Response::Error(_)
            | Response::Stats(_)
            | Response::HidePut(_)
            | Response::HideSearch(_)
            | Response::HideList(_)
            | Response::HideEntry(_)
            | Response::HideUsage(_) => None,
        }
    }

    /// The response's tail, to fill (every kind named, as in [`Response::tail`]).
    pub fn tail_mut(&mut self) -> Option<&mut Tail<'static>> {
        match self {
            Response::Run(reply) => Some(&mut reply.output),
            Response::HideContent(content) => Some(&mut content.content),
            Response::HideCut(cut) => Some(&mut cut.content),
            Response::Hidden(hidden) => Some(&mut hidden.first.content),
            Response::HidePage(page) => Some(&mut page.content),
            Response::HideEnds(ends) => Some(&mut ends.content),
            Response::Hello(_)
            | Response::Error(_)
            | Response::Stats(_)
            | Response::HidePut(_)
            | Response::HideSearch(_)
            | Response::HideList(_)
            | Response::HideEntry(_)
            | Response::HideUsage(_) => None,
        }
    }
}

/// Bytes a heap allocation of `len` bytes takes: none for none; else the length and a word of
/// header, rounded up to 16, and at least 32 (glibc malloc's smallest chunk).
fn alloc_bytes(len: usize) -> u64 {
    match len {
        0 => 0,
        n => ((n + 8).next_multiple_of(16).max(32)) as u64,
    }
}

/// A decoded string's heap bytes (its capacity is its length).
fn string_bytes(s: &str) -> u64 {
    alloc_bytes(s.len())
}
