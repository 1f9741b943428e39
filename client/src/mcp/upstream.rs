//! `jqjail mcp --upstream -- CMD ARGS…`: another MCP server behind jqjail's.
//!
//! The upstream server runs as a child over stdio (rmcp's client). Its tools are offered
//! unchanged beside jqjail's own, with two additions:
//!
//! - A result over `--hide-over` bytes, counting every block (text, resources, images) and
//!   its structured content, is kept as a hide of the session and replaced by its ID, its
//!   shape (when it is JSON) and page 1 with the hint; the paging and jq tools then work on it
//!   by ID. A result that is text (with at most a structured copy of it) is kept as that
//!   text, any other as its JSON (`{"content", "structuredContent"}`). An upstream
//!   error result is kept the same way and stays an error; a JSON-RPC error's message is cut
//!   to the threshold. Smaller results pass through untouched.
//! - Each upstream tool gains an optional `jq` argument (when its schema has no property of
//!   that name): it is taken out before the call is forwarded, and the result's text is
//!   narrowed by the filter in a confined worker, as the `jq` tool would (text that is not
//!   JSON is a clear tool error).
//!
//! An upstream tool's output schema is offered as it is: a result passed through is the
//! tool's own. A result jqjail changes (kept as a hide, narrowed by `jq`) does not follow the
//! schema, and clients check a successful result against it: such a result comes with
//! `isError` set, as the tool's description then says. A kept result carries a
//! `resource_link` to its hide, which `resources/read` pages (see [`super::resources`]).
//!
//! Upstream failures are tool errors that say so (`UPSTREAM_ERROR`, `UPSTREAM_FAILED`,
//! `UPSTREAM_TIMEOUT`), never a hang: every call has a deadline, and a dead upstream leaves
//! jqjail's own tools working. Upstream notifications (log messages, progress, tool list
//! changes) are relayed to the client.
//!
//! Nothing the upstream sends reaches the client larger than `--hide-over` (issue 34): an
//! error's text is cut to it; a tool's description is cut to [`MAX_DESCRIPTION`] and a tool
//! whose name is offered already (one of jqjail's, or an earlier upstream tool's), whose name
//! is over 128 bytes or whose input schema is over [`MAX_TOOL_SCHEMA`] is left out and
//! reported, as are tools past [`MAX_UPSTREAM_TOOLS`]; a notification's text or data is cut to it, and at most
//! [`NOTIFICATIONS_PER_SECOND`] are relayed a second (the rest are dropped and counted on
//! stderr). The child's stdout passes the guard ([`super::guard::Guard::upstream`]) before
//! rmcp reads it: an answer over the message bound, too deep, or too costly to parse is an
//! error for its call, never read whole.

use super::{Server, call_own, cut, own_tools, result, runtime, too_large};
#[allow(deprecated)]
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ResultType,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, RoleClient, RoleServer, SubscriptionContext,
};
use rmcp::{ClientHandler, ErrorData, ServerHandler, ServiceError, ServiceExt};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Results longer than this (bytes of text) become hides: well under a model's context.
pub(super) const DEFAULT_HIDE_OVER: usize = 16_384;

/// The argument every upstream tool gains.
const JQ_ARG: &str = "jq";

/// The longest upstream tool description offered, in bytes (a longer one is cut).
pub(super) const MAX_DESCRIPTION: usize = 2048;

/// Upstream tools offered, at most (the rest are left out and reported).
pub(super) const MAX_UPSTREAM_TOOLS: usize = 512;

/// The largest upstream tool input schema offered, as JSON text; a tool with a larger one is
/// left out and reported. Its `_meta` and icons are offered up to the same size together.
pub(super) const MAX_TOOL_SCHEMA: usize = 16 * 1024;

/// What the description of an upstream tool with an output schema gains.
const SCHEMA_NOTE: &str = " (Through jqjail: a result too large to show, kept as a hide, or narrowed by the `jq` argument does not follow this tool's output schema, so it comes marked as an error; its text is the answer.)";

/// Bytes of upstream output schemas offered in all (a tool past it is offered without its own).
pub(super) const MAX_OUTPUT_SCHEMAS: usize = 256 * 1024;

/// The deepest upstream output schema offered.
const MAX_SCHEMA_DEPTH: usize = 16;

/// An upstream output schema rebuilt of what clients check safely, as JSON text: its root an
/// object schema; `type` (JSON types only), `properties`, `items`, `additionalProperties`,
/// `required`, `enum` (at most 64 scalars), `title` and `description` (cut to 256 bytes).
/// Every other keyword is left out: `pattern` and `format` (a client runs them on every
/// result: a pattern can take it exponential time), `$ref` and the combinators (which a client
/// compiles, and may refuse). Leaving a keyword out only widens what the schema admits, so the
/// tool's own results still pass. `None`: not an object schema, a `type` or `required` no
/// client can compile, over [`MAX_TOOL_SCHEMA`] bytes or [`MAX_SCHEMA_DEPTH`] levels.
fn safe_schema(schema: &Map<String, Value>) -> Option<String> {
    fn types(v: &Value) -> Option<Value> {
        const TYPES: [&str; 7] = [
            "null", "boolean", "object", "array", "number", "string", "integer",
        ];
        let ok = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
        match v {
            Value::String(_) if ok(v) => Some(v.clone()),
            Value::Array(all) if !all.is_empty() && all.iter().all(ok) => {
                let mut seen = HashSet::new();
                all.iter()
                    .all(|t| seen.insert(t.as_str()))
                    .then(|| v.clone())
            }
            _ => None,
        }
    }
    fn rebuild(v: &Value, depth: usize) -> Option<Value> {
        let map = match v {
            Value::Bool(_) => return Some(v.clone()),
            Value::Object(map) if depth <= MAX_SCHEMA_DEPTH => map,
            _ => return None,
        };
        let mut out = Map::new();
        for (key, value) in map {
            let kept = match key.as_str() {
                "type" => types(value)?,
                "properties" => {
                    let Value::Object(props) = value else {
                        return None;
                    };
                    let mut rebuilt = Map::new();
                    for (name, schema) in props {
                        rebuilt.insert(name.clone(), rebuild(schema, depth + 1)?);
                    }
                    Value::Object(rebuilt)
                }
                "items" | "additionalProperties" => rebuild(value, depth + 1)?,
                "required" => {
                    let Value::Array(names) = value else {
                        return None;
                    };
                    let mut seen = HashSet::new();
                    if !names
                        .iter()
                        .all(|n| n.as_str().is_some_and(|n| seen.insert(n)))
                    {
                        return None;
                    }
                    value.clone()
                }
                "enum" => match value {
                    Value::Array(all)
                        if !all.is_empty()
                            && all.len() <= 64
                            && all.iter().all(|e| !e.is_object() && !e.is_array()) =>
                    {
                        value.clone()
                    }
                    _ => continue,
                },
                "title" | "description" => match value {
                    Value::String(text) => Value::String(cut(text, 256)),
                    _ => continue,
                },
                _ => continue,
            };
            out.insert(key.clone(), kept);
        }
        Some(Value::Object(out))
    }
    if schema.get("type").and_then(Value::as_str) != Some("object")
        || serde_json::to_string(schema).map_or(true, |t| t.len() > MAX_TOOL_SCHEMA)
    {
        return None;
    }
    let text = rebuild(&Value::Object(schema.clone()), 0)?.to_string();
    (text.len() <= MAX_TOOL_SCHEMA).then_some(text)
}

/// Upstream notifications relayed a second, at most.
pub(super) const NOTIFICATIONS_PER_SECOND: u32 = 20;

/// How the wrapper treats upstream results.
#[derive(Debug, Clone, Copy)]
pub(super) struct Options {
    /// Results over this many bytes of text are kept as hides.
    pub(super) hide_over: usize,
    /// The deadline of one upstream call.
    pub(super) timeout: Duration,
}

/// The client we serve, once it has made a request: where upstream notifications go.
type Downstream = Arc<Mutex<Option<Peer<RoleServer>>>>;

/// Relays the upstream server's notifications to our client, each cut to `hide_over` bytes
/// and at most [`NOTIFICATIONS_PER_SECOND`] a second.
struct Relay {
    downstream: Downstream,
    /// The session's `subscriptions/listen` streams (the wrapper's own server's).
    notifier: Arc<super::resources::Notifier>,
    hide_over: usize,
    /// This second's start, the notifications relayed in it, and those dropped since the
    /// last report.
    window: Mutex<(std::time::Instant, u32, u64)>,
}

impl Relay {
    /// The client to relay to, if it has made a request yet and this second has room.
    fn peer(&self) -> Option<Peer<RoleServer>> {
        let peer = self.downstream.lock().ok().and_then(|p| p.clone())?;
        let mut w = self.window.lock().ok()?;
        let (start, sent, dropped) = &mut *w;
        if start.elapsed() >= Duration::from_secs(1) {
            if *dropped > 0 {
                eprintln!(
                    "jqjail mcp: {dropped} upstream notifications dropped, over {NOTIFICATIONS_PER_SECOND} a second"
                );
            }
            (*start, *sent, *dropped) = (std::time::Instant::now(), 0, 0);
        }
        if *sent >= NOTIFICATIONS_PER_SECOND {
            *dropped += 1;
            return None;
        }
        *sent += 1;
        Some(peer)
    }
}

impl ClientHandler for Relay {
    // Logging is deprecated by the newest MCP revision, but upstream servers and clients on
    // older revisions still use it: relayed as it comes.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut params = params;
        let data = params.data.to_string();
        if data.len() > self.hide_over {
            params.data = Value::String(cut(&data, self.hide_over));
        }
        if let Some(logger) = &params.logger
            && logger.len() > 256
        {
            params.logger = Some(cut(logger, 256));
        }
        if let Some(peer) = self.peer() {
            let _ = peer.notify_logging_message(params).await;
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut params = params;
        if let Some(message) = &params.message
            && message.len() > self.hide_over
        {
            params.message = Some(cut(message, self.hide_over));
        }
        if let Some(peer) = self.peer() {
            let _ = peer.notify_progress(params).await;
        }
    }

    // Never rate-limited: dropped, the client would keep a stale list (it carries nothing).
    // A client on 2026-07-28 is told through its `subscriptions/listen` streams.
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(peer) = self.downstream.lock().ok().and_then(|p| p.clone()) {
            let _ = peer.notify_tool_list_changed().await;
        }
        self.notifier.tools_changed().await;
    }
}

/// jqjail's tools and the upstream server's, behind one MCP server.
#[derive(Clone)]
struct Wrapper {
    own: Server,
    upstream: Peer<RoleClient>,
    options: Options,
    downstream: Downstream,
    /// The names of jqjail's own tools.
    own_names: Arc<HashSet<String>>,
    /// Upstream tools to which the wrapper added the `jq` argument, as last listed (`None`
    /// until the upstream's tools are first listed).
    with_jq: Arc<Mutex<Option<HashSet<String>>>>,
    /// Upstream tools offered with their output schema, as last listed.
    with_schema: Arc<Mutex<HashSet<String>>>,
}

impl Wrapper {
    fn remember(&self, context_peer: &Peer<RoleServer>) {
        if let Ok(mut slot) = self.downstream.lock()
            && slot.is_none()
        {
            *slot = Some(context_peer.clone());
        }
    }

    /// The upstream tools as offered: unchanged but for the `jq` argument, and without any
    /// whose name is one of jqjail's own (reported on stderr).
    async fn upstream_tools(&self) -> Result<Vec<Tool>, String> {
        let tools = tokio::time::timeout(self.options.timeout, self.upstream.list_all_tools())
            .await
            .map_err(|_| "the upstream server did not list its tools in time".to_string())?
            .map_err(|e| format!("listing the upstream server's tools: {e}"))?;
        let mut with_jq = HashSet::new();
        let mut with_schema = HashSet::new();
        // Bytes of output schemas offered so far.
        let mut schemas = 0;
        let mut offered = Vec::new();
        let mut names = HashSet::new();
        for mut tool in tools {
            if self.own_names.contains(tool.name.as_ref()) {
                eprintln!(
                    "jqjail mcp: the upstream tool `{}` has the name of one of jqjail's; it is not offered",
                    cut(&tool.name, 256)
                );
                continue;
            }
            if !names.insert(tool.name.to_string()) {
                eprintln!(
                    "jqjail mcp: the upstream server lists the tool `{}` twice; only the first is offered",
                    cut(&tool.name, 256)
                );
                continue;
            }
            if offered.len() == MAX_UPSTREAM_TOOLS {
                eprintln!(
                    "jqjail mcp: the upstream server lists more than {MAX_UPSTREAM_TOOLS} tools; the rest are not offered"
                );
                break;
            }
            if tool.name.len() > 128 {
                eprintln!(
                    "jqjail mcp: an upstream tool's name is {} bytes, over MCP's 128; it is not offered",
                    tool.name.len()
                );
                continue;
            }
            let schema_len = Value::Object((*tool.input_schema).clone())
                .to_string()
                .len();
            if schema_len > MAX_TOOL_SCHEMA {
                eprintln!(
                    "jqjail mcp: the upstream tool `{}` has an input schema of {schema_len} bytes, over {MAX_TOOL_SCHEMA}; it is not offered",
                    tool.name
                );
                continue;
            }
            if let Some(description) = &tool.description
                && description.len() > MAX_DESCRIPTION
            {
                tool.description = Some(cut(description, MAX_DESCRIPTION).into());
            }
            if let Some(title) = &tool.title
                && title.len() > 256
            {
                tool.title = Some(cut(title, 256));
            }
            let extras =
                serde_json::to_string(&(&tool.meta, &tool.icons)).map_or(usize::MAX, |t| t.len());
            if extras > MAX_TOOL_SCHEMA {
                tool.meta = None;
                tool.icons = None;
            }
            // A result passed through is the tool's own, its structured content too: its
            // output schema is offered, rebuilt of the keywords clients check safely (see
            // `safe_schema`). A result jqjail changes (kept as a hide, narrowed by `jq`) does
            // not follow it, so it comes as a tool error (clients check a result against the
            // schema, an error's never), as the description says.
            let output = tool.output_schema.take();
            if let Some(output) = output {
                match safe_schema(&output) {
                    Some(safe) if schemas + safe.len() <= MAX_OUTPUT_SCHEMAS => {
                        schemas += safe.len();
                        with_schema.insert(tool.name.to_string());
                        let described = tool.description.as_deref().unwrap_or("");
                        tool.description = Some(format!("{described}{SCHEMA_NOTE}").into());
                        if let Ok(Value::Object(safe)) = serde_json::from_str(&safe) {
                            tool.output_schema = Some(Arc::new(safe));
                        }
                    }
                    Some(_) => eprintln!(
                        "jqjail mcp: the upstream tools' output schemas pass {MAX_OUTPUT_SCHEMAS} bytes in all; `{}` is offered without its own",
                        tool.name
                    ),
                    None => eprintln!(
                        "jqjail mcp: the upstream tool `{}` has an output schema that is not an object schema of at most {MAX_TOOL_SCHEMA} bytes and {MAX_SCHEMA_DEPTH} levels; it is offered without it",
                        tool.name
                    ),
                }
            }
            let mut schema = (*tool.input_schema).clone();
            let properties = schema
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(properties) = properties
                && !properties.contains_key(JQ_ARG)
            {
                properties.insert(
                    JQ_ARG.into(),
                    json!({
                        "type": "string",
                        "description": "Optional jq filter that jqjail applies to this tool's JSON result, in a sandbox, before it is returned: ask for only what you need (e.g. `.items[] | {id, name}`)."
                    }),
                );
                with_jq.insert(tool.name.to_string());
                tool.input_schema = Arc::new(schema);
            }
            offered.push(tool);
        }
        if let Ok(mut known) = self.with_jq.lock() {
            *known = Some(with_jq);
        }
        if let Ok(mut known) = self.with_schema.lock() {
            *known = with_schema;
        }
        Ok(offered)
    }

    /// Forwards a call to the upstream server and treats its result.
    async fn forward(&self, mut request: CallToolRequestParams) -> CallToolResult {
        let name = request.name.to_string();
        // A client may call without listing first; learn which tools got `jq`.
        let listed = self.with_jq.lock().is_ok_and(|k| k.is_some());
        if !listed && let Err(why) = self.upstream_tools().await {
            return result(Err(format!("UPSTREAM_FAILED: {why}")));
        }
        let ours = self
            .with_jq
            .lock()
            .is_ok_and(|k| k.as_ref().is_some_and(|k| k.contains(&name)));
        let schema = self.with_schema.lock().is_ok_and(|s| s.contains(&name));
        let filter = match (ours, request.arguments.as_mut()) {
            (true, Some(args)) => match args.remove(JQ_ARG) {
                None | Some(Value::Null) => None,
                Some(Value::String(filter)) => Some(filter),
                Some(_) => {
                    return result(Err(format!(
                        "INVALID_REQUEST: `{JQ_ARG}` is a jq filter, as a string"
                    )));
                }
            },
            _ => None,
        };
        let answer = match tokio::time::timeout(
            self.options.timeout,
            self.upstream.call_tool(request),
        )
        .await
        {
            Err(_) => {
                return result(Err(format!(
                    "UPSTREAM_TIMEOUT: the upstream tool `{name}` did not answer within {} s",
                    self.options.timeout.as_secs()
                )));
            }
            Ok(Err(ServiceError::McpError(e))) => {
                return result(Err(format!(
                    "UPSTREAM_ERROR: the upstream server refused `{name}`: {}",
                    cut(&e.message, self.options.hide_over)
                )));
            }
            Ok(Err(e)) => {
                return result(Err(format!(
                    "UPSTREAM_FAILED: the call to the upstream tool `{name}` failed ({}); \
                         the upstream server may have exited. jqjail's own tools still work.",
                    cut(&e.to_string(), self.options.hide_over)
                )));
            }
            Ok(Ok(answer)) => answer,
        };
        // Everything the result would put in the context: the whole result as sent (its
        // blocks of every kind, its structured content, its `_meta`).
        let structured = answer.structured_content.as_ref().map(Value::to_string);
        let size = serde_json::to_string(&answer).map_or(usize::MAX, |t| t.len());
        let failed = answer.is_error == Some(true);
        let text: String = answer
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        // Kept as its text when that is all there is to it: only text blocks, and structured
        // content (if any) no larger than a serialization of that text would be, as the MCP
        // spec has tools send it (the filesystem server's `{"content": text}`). Anything
        // else is kept whole, as JSON.
        let only_text = answer
            .content
            .iter()
            .all(|block| matches!(block, ContentBlock::Text(_)))
            && !text.is_empty()
            && structured
                .as_ref()
                .is_none_or(|s| s.len() <= 2 * text.len() + 1024);
        let treated = match filter {
            // The upstream tool's own error is not filtered: it is passed on (or kept, below).
            Some(filter) if !failed => {
                // The filter runs over the text; a result with no text, over its structured
                // content. Other blocks are left out of a narrowed result.
                let input = match (text.is_empty(), &structured) {
                    (true, Some(structured)) => structured.clone(),
                    _ => text,
                };
                let own = self.own.clone();
                let args: Map<String, Value> = [
                    ("filter".into(), filter.into()),
                    ("input".into(), input.into()),
                ]
                .into_iter()
                .collect();
                tokio::task::spawn_blocking(move || {
                    own.call("jq", args).map_err(|e| {
                        format!("{e} (the `{JQ_ARG}` filter ran over the result of `{name}`)")
                    })
                })
                .await
                .unwrap_or_else(|e| Err(format!("INTERNAL: {e}")))
            }
            _ if size > self.options.hide_over => {
                // Kept whole, so nothing large reaches the context.
                let kept = match only_text && answer.meta.is_none() {
                    true => text,
                    false => json!({
                        "content": answer.content,
                        "structuredContent": answer.structured_content,
                        "_meta": answer.meta,
                    })
                    .to_string(),
                };
                let own = self.own.clone();
                let kept = tokio::task::spawn_blocking(move || own.keep(&kept))
                    .await
                    .unwrap_or_else(|e| Err(format!("INTERNAL: {e}")));
                let mut kept = self.own.finish(kept).await;
                // An error kept stays an error; so does a result of a tool with an output
                // schema, which the hide's text does not follow (clients check it).
                if failed || schema {
                    kept.is_error = Some(true);
                }
                return kept;
            }
            // Small and unfiltered (or the upstream's own small error): as it was given, and
            // marked complete as a client on 2026-07-28 requires (an upstream on an older
            // revision marks nothing); a result of another type is not one jqjail relays.
            _ => {
                let mut answer = answer;
                match &answer.result_type {
                    None => answer.result_type = Some(ResultType::COMPLETE),
                    Some(kind) if *kind == ResultType::COMPLETE => {}
                    Some(kind) => {
                        return result(Err(format!(
                            "UPSTREAM_ERROR: the upstream tool `{name}` answered a result of type `{}`, which jqjail does not relay",
                            cut(kind.as_str(), 64)
                        )));
                    }
                }
                return answer;
            }
        };
        let mut narrowed = self.own.finish(treated).await;
        if schema {
            narrowed.is_error = Some(true);
        }
        narrowed
    }
}

impl ServerHandler for Wrapper {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("jqjail", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "The tools of another MCP server, and jqjail's: a large result is kept as a hide \
             (read it by ID with jq, json_path, json_shape and the hide_* tools), and every \
             tool takes an optional `jq` filter to narrow its result.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.remember(&context.peer);
        let mut tools = own_tools();
        match self.upstream_tools().await {
            Ok(upstream) => tools.extend(upstream),
            // jqjail's own tools stay available; the log says why the others are missing.
            Err(why) => eprintln!("jqjail mcp: {why}"),
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.own.list_resources_page(request, &context)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.own.list_resource_templates(request, context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.own.read_resource_now(request, &context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.own.notifier.accepted(requested, true)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.own.listen(context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.remember(&context.peer);
        self.own.notifier.remember(&context);
        let claim = self.own.inflight.claim(&context.id);
        if let Some(answer) = too_large(&request) {
            return Ok(answer.into());
        }
        let ours = self.own_names.contains(request.name.as_ref());
        Ok(match ours {
            true => call_own(&self.own, request, claim).await,
            false => {
                // The upstream call holds its arguments until it is answered.
                let answer = self.forward(request).await;
                drop(claim);
                answer
            }
        }
        .into())
    }
}

/// Starts the upstream server and serves both sets of tools on stdin/stdout until the client
/// closes it.
pub(super) fn serve(own: Server, command: &[OsString], options: Options) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        eprintln!("jqjail mcp: --upstream needs a command after `--`");
        return ExitCode::from(2);
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async {
        // The child's answers pass the same guard as our client's requests: rmcp would
        // otherwise read a line of any length and build a value of it whatever it costs.
        let max = own.max_message();
        let mut child = match tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                eprintln!(
                    "jqjail mcp: cannot start the upstream server {}: {e}",
                    program.to_string_lossy()
                );
                return ExitCode::FAILURE;
            }
        };
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            eprintln!("jqjail mcp: the upstream server's stdin or stdout is not a pipe");
            return ExitCode::FAILURE;
        };
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
            super::guard::Guard::upstream(stdout, max),
            stdin,
        )
        .with_max_line_length(max + 1);
        let downstream: Downstream = Arc::default();
        let relay = Relay {
            downstream: downstream.clone(),
            notifier: own.notifier.clone(),
            hide_over: options.hide_over,
            window: Mutex::new((std::time::Instant::now(), 0, 0)),
        };
        let upstream = match relay.serve(transport).await {
            Ok(upstream) => upstream,
            Err(e) => {
                eprintln!("jqjail mcp: the upstream server did not start an MCP session: {e}");
                return ExitCode::FAILURE;
            }
        };
        let wrapper = Wrapper {
            own,
            upstream: upstream.peer().clone(),
            options,
            downstream,
            // The stand-in call's name too: an upstream tool of that name would be shadowed.
            own_names: Arc::new(
                own_tools()
                    .into_iter()
                    .map(|t| t.name.into())
                    .chain([super::guard::TOO_LARGE_TOOL.to_string()])
                    .collect(),
            ),
            with_jq: Arc::default(),
            with_schema: Arc::default(),
        };
        let held = wrapper.own.inflight.clone();
        let service = match wrapper.serve(super::transport(max, held)).await {
            Ok(service) => service,
            Err(e) => {
                eprintln!("jqjail mcp: the MCP session did not start: {e}");
                return ExitCode::FAILURE;
            }
        };
        let outcome = service.waiting().await;
        // Our client is gone: end the upstream session too, and its child.
        let _ = upstream.cancel().await;
        drop(child);
        match outcome {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("jqjail mcp: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
