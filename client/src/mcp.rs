//! `jqjail mcp`: a Model Context Protocol server over stdio, built on the official
//! Rust SDK (`rmcp`).
//!
//! It is a front end, not a second engine: it connects to the daemon as an ordinary client
//! (found or started exactly as for `jqjail FILTER`), so the uid that started it is its
//! tenant, and every filter runs in a confined worker under the daemon's limits. The tools are
//! those of [`crate::tools::list`]: `jq`, `json_path`, `json_shape`, `hide_next`, `hide_jump`,
//! `hide_search`.
//!
//! A `jq` or `json_path` output over the output limit is kept as a hide: the tool answers
//! with its ID, its shape and page 1 with the reflection hint, and the paging tools default to
//! it. Every jqjail error is a tool error (`isError: true`) whose text is `CODE: message`, so
//! the model can act on it; the server itself never stops on a bad call.

use crate::hide_buffer::{First, FirstShown, HideBuffer, format_page};
use crate::{
    Answer, Client, ClientError, ErrorCode, HideEntry, Lang, OnOversize, RunOptions, Source,
};
use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    Implementation, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// The source of a hide kept of an upstream result (its ID is `upstream-…`).
const UPSTREAM_SOURCE: &str = "upstream";

/// Bytes per page of a hide read through the paging tools.
pub const PAGE_BYTES: u64 = 16_384;

/// The smallest page the daemon cuts.
pub const MIN_PAGE_BYTES: u64 = 64;

/// Bytes per page under a cap on what one reply may carry: three quarters of it (the rest is
/// room for the shape), at least [`MIN_PAGE_BYTES`], at most [`PAGE_BYTES`].
pub fn page_bytes(cap: Option<usize>) -> u64 {
    match cap {
        None => PAGE_BYTES,
        Some(cap) => (cap as u64 - cap as u64 / 4).clamp(MIN_PAGE_BYTES, PAGE_BYTES),
    }
}

/// The most bytes of a path shown under a cap: half of what a page leaves of it, shared among
/// the paths a page shows.
fn path_bytes(cap: usize) -> u32 {
    let left = (cap as u64).saturating_sub(page_bytes(Some(cap)));
    (left / 2 / crate::hide_buffer::PATHS_SHOWN as u64).min(1024) as u32
}

/// The server: one daemon connection and one hide buffer for the whole session.
#[derive(Clone)]
pub struct Server {
    state: Arc<Mutex<State>>,
    /// The large requests read and not yet done (see [`inflight`]).
    inflight: Arc<inflight::Inflight>,
    /// The hides this session kept, as resources (apart from `state`, whose lock a call to
    /// the daemon holds: listing never waits for one).
    listed: Arc<Mutex<resources::Listed>>,
    /// Where the list's changes are told.
    notifier: Arc<resources::Notifier>,
}

struct State {
    buffer: HideBuffer<Client>,
    /// The largest message the server reads: room for the largest input the daemon takes,
    /// escaped as a JSON string (fixed at start).
    max_message: usize,
    /// How to reach the daemon again if the connection is lost.
    socket: Option<PathBuf>,
    /// The most bytes of document, output or error text one reply may carry (`--hide-over`
    /// in front of an upstream server): a longer output is kept as a hide, a shape or an
    /// error text over it is refused or cut.
    cap: Option<usize>,
    /// The session's hides, as listed (shared with [`Server`]).
    listed: Arc<Mutex<resources::Listed>>,
}

/// A tool call's answer for the model.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    /// The text.
    pub(crate) text: String,
    /// The hide it kept, linked beside the text.
    pub(crate) kept: Option<resources::Kept>,
    /// Whether that hide is new to the session's list of resources.
    pub(crate) new: bool,
    /// The answer as a JSON object, for a tool with an output schema.
    pub(crate) structured: Option<Value>,
}

impl From<String> for Reply {
    fn from(text: String) -> Reply {
        Reply {
            text,
            ..Reply::default()
        }
    }
}

/// A tool call's outcome: the answer, or an error's `CODE: message`.
pub(crate) type Outcome = Result<Reply, String>;

impl Server {
    /// A server talking to the daemon through `client`; `socket` is what the user named (or
    /// `None` for the default search), used to reconnect. With a `cap`, no reply carries more
    /// than that many bytes of a document, an output or an error's text. An output too large
    /// to show is first shown as `first` says.
    pub fn new(
        client: Client,
        socket: Option<PathBuf>,
        cap: Option<usize>,
        first: First,
    ) -> Server {
        let max_message = max_message(client.limits().max_input_bytes);
        let listed = Arc::new(Mutex::new(resources::Listed::default()));
        Server {
            listed: listed.clone(),
            notifier: Arc::default(),
            state: Arc::new(Mutex::new(State {
                listed,
                max_message,
                buffer: match cap {
                    // What a page leaves of the cap, half for the paths shown and half for
                    // the shape: keys in a path are the content's bytes too.
                    Some(cap) => HideBuffer::new(client, page_bytes(Some(cap)))
                        .with_max_path_bytes(path_bytes(cap)),
                    None => HideBuffer::new(client, page_bytes(cap)),
                }
                .with_first(first),
                socket,
                cap,
            })),
            inflight: Arc::default(),
        }
    }

    /// The largest message this server reads (see [`guard`]).
    fn max_message(&self) -> usize {
        match self.state.lock() {
            Ok(state) => state.max_message,
            Err(poisoned) => poisoned.into_inner().max_message,
        }
    }

    /// Answers one tool call (blocking: it talks to the daemon).
    pub(crate) fn call(&self, name: &str, args: Map<String, Value>) -> Outcome {
        let args = Value::Object(args);
        self.attempt(|state| state.call(name, &args))
    }

    /// Keeps `text`, an upstream tool's result too large for the context, as a hide of this
    /// session and answers with its ID, its shape (when it is JSON) and page 1 with the hint.
    /// Nothing of the upstream's choosing names it (not its tool's name: the caller knows
    /// which tool it called), so a list of many such hides carries no upstream bytes.
    pub(crate) fn keep(&self, text: &str) -> Outcome {
        self.attempt(|state| state.keep(text))
    }

    /// Reads a hide's resource (blocking: it talks to the daemon). A hide gone from the store
    /// leaves the list; the answer says whether it was on it.
    fn read(&self, uri: &str) -> Result<ReadResourceResult, (ErrorData, bool)> {
        let (id, page) = resources::parse(uri).map_err(|e| (e, false))?;
        match self.attempt_raw(|state| state.read(id, page)) {
            Ok(text) => Ok(
                ReadResourceResult::new(vec![ResourceContents::text(text, uri)])
                    .with_ttl_ms(0)
                    .with_cache_scope(CacheScope::Private),
            ),
            Err(Failure::Missing(why)) => {
                let gone = self.listed.lock().is_ok_and(|mut l| l.remove(id));
                Err((ErrorData::resource_not_found(self.capped(why), None), gone))
            }
            Err(Failure::OutOfRange(why)) => {
                Err((ErrorData::invalid_params(self.capped(why), None), false))
            }
            Err(other) => Err((
                ErrorData::internal_error(self.capped(other.text()), None),
                false,
            )),
        }
    }

    /// `text` cut to the cap, if there is one.
    fn capped(&self, text: String) -> String {
        let cap = match self.state.lock() {
            Ok(state) => state.cap,
            Err(poisoned) => poisoned.into_inner().cap,
        };
        match cap {
            Some(cap) => cut(&text, cap),
            None => text,
        }
    }

    /// Runs `work` on the session's state; if the daemon connection is gone (the daemon
    /// restarted, say), reconnects once and runs it again.
    fn attempt(&self, work: impl Fn(&mut State) -> Result<Reply, Failure>) -> Outcome {
        let outcome = self.attempt_raw(work).map_err(Failure::text);
        // An error's text can quote the document (`error(.)`): cut to the cap.
        outcome.map_err(|text| self.capped(text))
    }

    /// [`Server::attempt`], its failure as it came.
    fn attempt_raw<T>(
        &self,
        work: impl Fn(&mut State) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let mut state = match self.state.lock() {
            Ok(state) => state,
            // A panic in an earlier call must not take the session down with it.
            Err(poisoned) => poisoned.into_inner(),
        };
        match work(&mut state) {
            Err(Failure::Connection(why)) => {
                match super::cli::connect(
                    state.socket.as_deref(),
                    crate::discover::Handshake::Awaited,
                ) {
                    Ok(client) => {
                        *state.buffer.client() = client;
                        work(&mut state)
                    }
                    Err(again) => Err(Failure::Tool(format!(
                        "UNAVAILABLE: {why}; reconnecting: {again}"
                    ))),
                }
            }
            other => other,
        }
    }
}

/// Why a call failed.
enum Failure {
    /// The daemon answered with an error, or the call was malformed: tell the model.
    Tool(String),
    /// The connection to the daemon failed.
    Connection(String),
    /// The hide is not in the store (`NOT_FOUND: …`).
    Missing(String),
    /// The hide has no such page (`PAGE_OUT_OF_RANGE: …`).
    OutOfRange(String),
}

impl Failure {
    fn text(self) -> String {
        match self {
            Failure::Tool(text) | Failure::Missing(text) | Failure::OutOfRange(text) => text,
            Failure::Connection(why) => format!("UNAVAILABLE: {why}"),
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        match e {
            ClientError::Server(e) if e.code == ErrorCode::NotFound => {
                Failure::Missing(format!("{}: {}", e.code.as_str(), e.message))
            }
            ClientError::Server(e) if e.code == ErrorCode::PageOutOfRange => {
                Failure::OutOfRange(format!("{}: {}", e.code.as_str(), e.message))
            }
            ClientError::Server(e) => Failure::Tool(format!("{}: {}", e.code.as_str(), e.message)),
            ClientError::Io(_) | ClientError::Protocol(_) => Failure::Connection(e.to_string()),
            other => Failure::Tool(other.to_string()),
        }
    }
}

impl State {
    fn call(&mut self, name: &str, args: &Value) -> Result<Reply, Failure> {
        use crate::tools::Tool;
        let Some(tool) = Tool::named(name) else {
            return Err(Failure::Tool(format!(
                "INVALID_REQUEST: there is no tool named `{name}`"
            )));
        };
        // Every tool named: a new one does not compile until it is answered here.
        match tool {
            Tool::Jq => {
                let filter = string(args, "filter")?;
                let named = named_args(args)?;
                self.run(filter, Lang::Jq, args, &named)
            }
            Tool::JsonPath => {
                let query = string(args, "query")?;
                self.run(query, Lang::Path, args, &crate::Args::default())
            }
            Tool::JsonShape => {
                let document = document(args)?;
                let shape = match self.buffer.client().shape(document.source()) {
                    Ok(reply) => reply.output,
                    Err(e) => return Err(document.explain(e)),
                };
                // Sent twice: as text, and as the structured content its output schema names.
                match self.cap {
                    Some(cap) if 2 * shape.len() > cap => Err(Failure::Tool(format!(
                        "OUTPUT_TOO_LARGE: the shape is {} bytes, sent as text and as structured content {} bytes, over the {cap}-byte limit of one answer; narrow the document with jq or json_path first",
                        shape.len(),
                        2 * shape.len()
                    ))),
                    _ => Ok(Reply {
                        structured: serde_json::from_str(&shape).ok(),
                        ..Reply::from(shape)
                    }),
                }
            }
            Tool::HideNext | Tool::HideJump | Tool::HideSearch => self
                .buffer
                .try_call_tool(name, args)
                .map(Reply::from)
                .map_err(Failure::Tool),
        }
    }

    fn keep(&mut self, text: &str) -> Result<Reply, Failure> {
        let entry = self.buffer.store(UPSTREAM_SOURCE, text.as_bytes())?;
        let first = self.buffer.first_answer(&entry.id)?;
        self.kept("The upstream tool's result", &entry, &first)
    }

    /// A hide's resource: what it is and its first answer (`page` none), or a page; no
    /// cursor moves.
    fn read(&mut self, id: &str, page: Option<u64>) -> Result<String, Failure> {
        if let Some(page) = page {
            return Ok(format_page(&self.buffer.peek(id, page, false)?));
        }
        let first = self.buffer.peek_first(id)?;
        let listed = self
            .listed
            .lock()
            .ok()
            .and_then(|l| l.what(id).map(String::from));
        let what = listed.unwrap_or_else(|| format!("Hide {id}"));
        self.overview(&what, id, first.size(), &first)
    }

    /// The answer for a hide kept in place of a result (see [`State::overview`]); the hide
    /// joins the session's resources.
    fn kept(
        &mut self,
        what: &str,
        entry: &HideEntry,
        first: &FirstShown,
    ) -> Result<Reply, Failure> {
        let text = self.overview(what, &entry.id, entry.size, first)?;
        let kept = resources::Kept {
            id: entry.id.clone(),
            size: entry.size,
            what: what.to_string(),
        };
        let new = self.listed.lock().is_ok_and(|mut l| l.add(&kept));
        Ok(Reply {
            kept: Some(kept),
            new,
            ..Reply::from(text)
        })
    }

    /// What a hide is, its ID, its shape (when it is JSON: pages and search work on any text)
    /// and its first answer (head and tail, or page 1) with the hint.
    fn overview(
        &mut self,
        what: &str,
        id: &str,
        size: u64,
        first: &FirstShown,
    ) -> Result<String, Failure> {
        // Under a cap, the shape gets what the first answer leaves of it (its paths share
        // one budget however many there are: `HideBuffer` scales each path's bound).
        let room = self.cap.map(|cap| {
            let paths = crate::hide_buffer::PATHS_SHOWN * path_bytes(cap) as usize;
            cap.saturating_sub(first.content_len() + paths)
        });
        let shape = match self.buffer.client().shape(Source::Hide(id)) {
            Ok(reply) if room.is_some_and(|room| reply.output.len() > room) => format!(
                "Shape: not shown ({} bytes, more than this answer has room for)\n",
                reply.output.len()
            ),
            Ok(reply) => format!("Shape: {}\n", reply.output),
            Err(ClientError::Server(_)) => String::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(format!(
            "{what} is {size} bytes, too large to show, so jqjail kept it as hide {id}. \
             Narrow it with jq or json_path on hide_id {id:?}, or page it with hide_next, \
             hide_jump and hide_search.\n{shape}\n{}",
            first.text(),
        ))
    }

    /// Runs a jq filter or path query; an output over the limit is kept as a hide and
    /// answered with its ID, shape and first page.
    fn run(
        &mut self,
        filter: &str,
        lang: Lang,
        args: &Value,
        named: &crate::Args,
    ) -> Result<Reply, Failure> {
        let options = RunOptions {
            lang,
            on_oversize: OnOversize::Hide,
            ..RunOptions::default()
        };
        let tool = match lang {
            Lang::Path => "json_path",
            _ => "jq",
        };
        let document = document(args)?;
        let answer = self
            .buffer
            .client()
            .run_with_args(filter, document.source(), &options, named);
        match answer.map_err(|e| document.explain(e))? {
            // Over the cap but under the daemon's limit: kept here, as the daemon would.
            Answer::Output(reply) if self.cap.is_some_and(|cap| reply.output.len() > cap) => {
                let entry = self.buffer.store(tool, reply.output.as_bytes())?;
                let first = self.buffer.first_answer(&entry.id)?;
                self.kept(&format!("The output of {tool}"), &entry, &first)
            }
            Answer::Output(reply) => Ok(Reply::from(reply.output)),
            Answer::Hidden(hidden) => {
                // The daemon's page 1 is a byte page at its own page size; the model reads
                // this server's first answer and pages (JSON pages, at its page size).
                let first = self.buffer.first_answer(&hidden.entry.id)?;
                self.kept(&format!("The output of {tool}"), &hidden.entry, &first)
            }
        }
    }
}

/// The document a tool works on: `input` or `hide_id`, exactly one. `input` is JSON text, or
/// the JSON value itself, as models often send it (seed 001's tool takes both). A string is
/// always read as JSON text: a string value is given as its JSON text, quotes included.
enum Document<'a> {
    /// `input` as a string: JSON text.
    Text(&'a [u8]),
    /// `input` as any other JSON value, written out as JSON text.
    Value(Vec<u8>),
    /// `hide_id`.
    Hide(&'a str),
}

impl Document<'_> {
    fn source(&self) -> Source<'_> {
        match self {
            Document::Text(text) => Source::Inline(text),
            Document::Value(text) => Source::Inline(text),
            Document::Hide(id) => Source::Hide(id),
        }
    }

    /// The daemon's answer for this document, with what was expected where `input` was a
    /// string that is not JSON text (a model meant a string value, or sent broken text).
    fn explain(&self, e: ClientError) -> Failure {
        match (self, &e) {
            (Document::Text(_), ClientError::Server(reply))
                if reply.code == ErrorCode::InvalidJson =>
            {
                Failure::Tool(format!(
                    "{}: {} (`input` was a string, which is read as JSON text: give the document's \
                     text, or the JSON value itself; a string value is given as its JSON text, \
                     quotes included)",
                    reply.code.as_str(),
                    reply.message
                ))
            }
            _ => e.into(),
        }
    }
}

fn document(args: &Value) -> Result<Document<'_>, Failure> {
    match (args.get("input"), args.get("hide_id")) {
        (Some(Value::String(text)), None) => Ok(Document::Text(text.as_bytes())),
        (Some(value), None) => serde_json::to_vec(value)
            .map(Document::Value)
            .map_err(|e| usage(&format!("`input` cannot be written as JSON text: {e}"))),
        (None, Some(Value::String(id))) => Ok(Document::Hide(id)),
        (Some(_), Some(_)) => Err(usage("give either `input` or `hide_id`, not both")),
        (None, None) => Err(usage(
            "give the document as `input` (JSON text or a JSON value) or `hide_id`",
        )),
        (None, Some(_)) => Err(usage("`hide_id` is a string, such as `github-1a2b3c4d`")),
    }
}

fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, Failure> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| usage(&format!("`{key}` is required and is a string")))
}

/// `args` of the jq tool: each value sent as JSON text, so it is only ever data.
fn named_args(args: &Value) -> Result<crate::Args, Failure> {
    let mut out = crate::Args::default();
    match args.get("args") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, value) in map {
                if let Some(problem) = jqjail_protocol::message::arg_name_problem(name) {
                    return Err(usage(&problem));
                }
                out.named.insert_first(name.clone(), value.to_string());
            }
        }
        Some(_) => return Err(usage("`args` is an object of names to JSON values")),
    }
    Ok(out)
}

fn usage(why: &str) -> Failure {
    Failure::Tool(format!("INVALID_REQUEST: {why}"))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("jqjail", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "jq and a simple path language over JSON, run in confined workers, and paging \
                 of results too large to read (hides). Call json_shape first on a large \
                 document, then narrow it with jq or json_path.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(own_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.notifier.remember(&context);
        let claim = self.inflight.claim(&context.id);
        if let Some(answer) = too_large(&request) {
            return Ok(answer.into());
        }
        Ok(call_own(self, request, claim).await.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.list_resources_page(request, &context)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.notifier.remember(&context);
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read_resource_now(request, &context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.notifier.accepted(requested, false)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.notifier.listen(context).await
    }
}

impl Server {
    /// A page of the session's hides (`resources/list`).
    fn list_resources_page(
        &self,
        request: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.notifier.remember(context);
        match self.listed.lock() {
            Ok(listed) => listed.page(request.as_ref()),
            Err(poisoned) => poisoned.into_inner().page(request.as_ref()),
        }
    }

    /// Answers `resources/read` off the async runtime (it talks to the daemon); a listed
    /// hide found gone leaves the list, and the client is told.
    async fn read_resource_now(
        &self,
        request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.notifier.remember(context);
        let server = self.clone();
        let uri = request.uri;
        let read = tokio::task::spawn_blocking(move || server.read(&uri))
            .await
            .unwrap_or_else(|e| {
                Err((
                    ErrorData::internal_error(format!("the read failed: {e}"), None),
                    false,
                ))
            });
        match read {
            Ok(result) => Ok(result.into()),
            Err((error, gone)) => {
                if gone {
                    self.notifier.changed().await;
                }
                Err(error)
            }
        }
    }

    /// The result of a call: its text, a link to the hide it kept, its structured content;
    /// a hide new to the session's list is told to the client.
    async fn finish(&self, outcome: Outcome) -> CallToolResult {
        let new = outcome.as_ref().is_ok_and(|reply| reply.new);
        let result = result(outcome);
        if new {
            self.notifier.changed().await;
        }
        result
    }
}

mod guard;
mod inflight;
mod resources;
mod upstream;

/// The largest MCP message read for a daemon whose input limit is `max_input` bytes: twice
/// that (a JSON document escaped as a JSON string: every `"` is `\"`), and a MiB for the rest
/// of the message.
fn max_message(max_input: u64) -> usize {
    usize::try_from(max_input.saturating_mul(2).saturating_add(1 << 20)).unwrap_or(usize::MAX)
}

/// The answer to a message too large to read (the guard's stand-in call), if this is one.
fn too_large(request: &CallToolRequestParams) -> Option<CallToolResult> {
    if request.name != guard::TOO_LARGE_TOOL {
        return None;
    }
    let arg = |key| {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    if arg("depth") > 0 {
        return Some(result(Err(format!(
            "INVALID_REQUEST: the message is nested more than {} levels deep, the limit of one message to jqjail mcp; pass a deeply nested document as a string (`input`), or store it and pass its hide_id",
            guard::MAX_DEPTH
        ))));
    }
    if request
        .arguments
        .as_ref()
        .and_then(|a| a.get("costly"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Some(result(Err(format!(
            "INVALID_REQUEST: the message holds so many values that reading it would take over {} MiB of memory (the limit of one message to jqjail mcp, counting {} bytes an object, {} an array, {} any other value and {} a byte of a string with escapes); pass a document as one string (`input`), or store it and pass its hide_id",
            guard::MAX_VALUE_BYTES >> 20,
            guard::OBJECT_COST,
            guard::ARRAY_COST,
            guard::VALUE_COST,
            guard::STRING_BYTE_COST,
        ))));
    }
    Some(result(Err(format!(
        "INPUT_TOO_LARGE: the message is {} bytes, over the {}-byte limit of one message to jqjail mcp; store the document and pass its hide_id, or narrow it before the call",
        jqjail_protocol::limits::grouped(arg("bytes")),
        jqjail_protocol::limits::grouped(arg("limit"))
    ))))
}

/// stdin and stdout as the MCP transport, each incoming message bounded to `max` bytes and a
/// longer one answered (see [`guard`]).
/// The large requests read and not yet done are charged to `held` (see [`inflight`]).
fn transport(
    max: usize,
    held: Arc<inflight::Inflight>,
) -> rmcp::transport::async_rw::AsyncRwTransport<
    RoleServer,
    guard::Guard<tokio::io::Stdin>,
    tokio::io::Stdout,
> {
    let (stdin, stdout) = rmcp::transport::stdio();
    rmcp::transport::async_rw::AsyncRwTransport::new_server(
        guard::Guard::new(stdin, max).with_inflight(held),
        stdout,
    )
    .with_max_line_length(max + 1)
}

/// `jqjail-mcp`'s command line as a clap command, for its man page and completions.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    McpArgs::command().name("jqjail-mcp").bin_name("jqjail-mcp")
}

/// `jqjail-mcp [--socket S] [--upstream [--hide-over BYTES] -- CMD ARGS…]` (also `jqjail mcp …`).
#[derive(Debug, clap::Parser)]
#[command(
    name = "jqjail mcp",
    version,
    about = "An MCP server over stdio: tools jq, json_path, json_shape, hide_next, hide_jump and hide_search, run by the jqjail daemon as this user"
)]
struct McpArgs {
    /// The daemon's socket (default as for running a filter: $JQJAIL_SOCKET, the system
    /// daemon, or a private one, started if need be).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Start the MCP server CMD ARGS… (after `--`) and offer its tools beside jqjail's: a
    /// result over --hide-over bytes is kept as a hide, and every tool gains a `jq` argument.
    #[arg(long, requires = "command")]
    upstream: bool,
    /// Upstream results longer than this many bytes of text become hides.
    #[arg(long, value_name = "BYTES", default_value_t = upstream::DEFAULT_HIDE_OVER, requires = "upstream")]
    hide_over: usize,
    /// How long an upstream tool call may take, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        requires = "upstream"
    )]
    upstream_timeout: u64,
    /// What an output too large to show is first shown as: its head and tail (its beginning
    /// and its end, each half a page, and what lies between), or page 1.
    #[arg(long, value_enum, default_value_t = FirstArg::HeadAndTail)]
    first: FirstArg,
    /// The upstream server's command line (with --upstream).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<std::ffi::OsString>,
}

/// `--first`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FirstArg {
    HeadAndTail,
    Page,
}

/// Runs the MCP server with these arguments (argv\[0\] first).
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    use clap::Parser;
    let args = match McpArgs::try_parse_from(args) {
        Ok(args) => args,
        Err(e) => return ExitCode::from(super::cli::clap_failed(e)),
    };
    if !args.command.is_empty() && !args.upstream {
        eprintln!("jqjail mcp: a command after `--` needs --upstream");
        return ExitCode::from(2);
    }
    let client =
        match super::cli::connected(args.socket.as_deref(), crate::discover::Handshake::Awaited) {
            Ok(client) => client,
            Err(exit) => return ExitCode::from(u8::from(exit)),
        };
    let cap = args.upstream.then_some(args.hide_over);
    let first = match args.first {
        FirstArg::HeadAndTail => First::HeadAndTail,
        FirstArg::Page => First::Page,
    };
    let server = Server::new(client, args.socket, cap, first);
    if args.upstream {
        let options = upstream::Options {
            hide_over: args.hide_over,
            timeout: std::time::Duration::from_secs(args.upstream_timeout),
        };
        return upstream::serve(server, &args.command, options);
    }
    serve(server)
}

/// jqjail's own tools, as MCP tools.
fn own_tools() -> Vec<Tool> {
    let object = |schema| match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    crate::tools::Tool::ALL
        .into_iter()
        .map(|tool| {
            let mut offered = Tool::new(
                tool.name(),
                tool.description(),
                Arc::new(object(tool.schema())),
            );
            offered.output_schema = tool.output_schema().map(|s| Arc::new(object(s)));
            offered
        })
        .collect()
}

/// Answers a tool call of jqjail's own off the async runtime (it talks to the daemon).
/// The request's `claim` on its charge goes with the blocking work, which holds the arguments
/// even when the call is cancelled.
async fn call_own(
    server: &Server,
    request: CallToolRequestParams,
    claim: inflight::Claim,
) -> CallToolResult {
    let server_of = server;
    let server = server.clone();
    let name = request.name.to_string();
    let args = request.arguments.unwrap_or_default();
    let outcome = tokio::task::spawn_blocking(move || {
        let _claim = claim;
        server.call(&name, args)
    })
    .await
    .unwrap_or_else(|e| Err(format!("INTERNAL: the tool call failed: {e}")));
    server_of.finish(outcome).await
}

/// `text` cut to at most `max` bytes (at a character boundary), saying how much was cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes cut)", &text[..end], text.len() - end)
}

/// A tool's answer (its text, a `resource_link` to the hide it kept, its structured
/// content), or its error as a tool error.
fn result(outcome: Outcome) -> CallToolResult {
    match outcome {
        Ok(reply) => {
            let mut blocks = vec![ContentBlock::text(reply.text)];
            if let Some(kept) = &reply.kept {
                blocks.push(ContentBlock::resource_link(kept.resource()));
            }
            let mut result = CallToolResult::success(blocks);
            result.structured_content = reply.structured;
            result
        }
        Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
    }
}

/// The runtime both servers run on.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("jqjail mcp: cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Serves MCP on stdin/stdout until the client closes it.
pub fn serve(server: Server) -> ExitCode {
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let service = match server
            .clone()
            .serve(transport(server.max_message(), server.inflight.clone()))
            .await
        {
            Ok(service) => service,
            Err(e) => {
                eprintln!("jqjail mcp: the MCP session did not start: {e}");
                return ExitCode::FAILURE;
            }
        };
        match service.waiting().await {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("jqjail mcp: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
