//! The session's hides as MCP resources.
//!
//! - `resources/list`: the hides this session kept (a tool's output or an upstream result
//!   over the limit), newest first, [`LIST_PAGE`] a page; at most [`MAX_LISTED`] are listed
//!   (older ones stay readable by URI).
//! - `resources/templates/list`: `jqjail://hide/{id}` (what the hide is, its shape and page 1)
//!   and `jqjail://hide/{id}/page/{n}` (page n, as `hide_jump` answers it).
//! - `resources/read`: either URI, for any hide of this uid; a page is cut at the server's page
//!   size, so under `--hide-over N` no read carries more than N bytes of the hide's content
//!   (as the tools' answers). A read moves no `hide_next` cursor: a host reading resources does
//!   not change what the model reads next.
//! - `notifications/resources/list_changed` when the session keeps a new hide, or finds a
//!   listed one gone: to a client on a revision before 2026-07-28 as it comes, to one on
//!   2026-07-28 through each `subscriptions/listen` stream that asked for it (at most
//!   [`MAX_LISTENERS`] a session; one more is refused before it is acknowledged). Behind
//!   `--upstream`, those streams also carry the upstream's tool-list changes.

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, Resource,
    ResourceTemplate, SubscriptionFilter,
};
use rmcp::service::{Peer, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink};
use std::collections::VecDeque;
use std::sync::Mutex;

/// A hide's URI is this and its ID.
pub(super) const URI_PREFIX: &str = "jqjail://hide/";

/// Resources a `resources/list` page holds.
pub(super) const LIST_PAGE: usize = 100;

/// Hides listed, at most: the oldest leave the list (not the store) past it.
pub(super) const MAX_LISTED: usize = 1024;

/// Open `subscriptions/listen` streams a session may hold, at most.
pub(super) const MAX_LISTENERS: usize = 16;

/// The longest hide ID read from a URI (the daemon's IDs are far shorter).
const MAX_ID: usize = 256;

/// A hide kept by this session.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub(crate) id: String,
    pub(crate) size: u64,
    /// What it is: "The output of jq", "The result of read_file".
    pub(crate) what: String,
}

impl Kept {
    /// The hide as a resource (also the `resource_link` beside a tool's answer).
    pub(super) fn resource(&self) -> Resource {
        Resource::new(format!("{URI_PREFIX}{}", self.id), self.id.clone())
            .with_title(self.what.clone())
            .with_description(format!(
                "{} bytes kept by jqjail. Reading this URI gives its shape and page 1; \
                 {URI_PREFIX}{}/page/N gives page N, as hide_jump does.",
                self.size, self.id
            ))
            .with_mime_type("text/plain")
            .with_size(self.size)
    }
}

/// The hides this session kept, oldest first, each with its place in the order.
#[derive(Debug, Default)]
pub(super) struct Listed {
    hides: VecDeque<(u64, Kept)>,
    next: u64,
}

impl Listed {
    /// Lists `kept`; false if it was listed already.
    pub(super) fn add(&mut self, kept: &Kept) -> bool {
        if self.hides.iter().any(|(_, k)| k.id == kept.id) {
            return false;
        }
        if self.hides.len() == MAX_LISTED {
            self.hides.pop_front();
        }
        self.hides.push_back((self.next, kept.clone()));
        self.next += 1;
        true
    }

    /// Takes `id` off the list (it is gone from the store); false if it was not listed.
    pub(super) fn remove(&mut self, id: &str) -> bool {
        let before = self.hides.len();
        self.hides.retain(|(_, k)| k.id != id);
        self.hides.len() != before
    }

    /// What a listed hide is.
    pub(super) fn what(&self, id: &str) -> Option<&str> {
        self.hides
            .iter()
            .find(|(_, k)| k.id == id)
            .map(|(_, k)| k.what.as_str())
    }

    /// One page of the list, newest first: those before `cursor` (an earlier page's
    /// `nextCursor`; none: the newest).
    pub(super) fn page(
        &self,
        request: Option<&PaginatedRequestParams>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let before = match request.and_then(|r| r.cursor.as_deref()) {
            None => u64::MAX,
            Some(cursor) => cursor.parse::<u64>().map_err(|_| {
                ErrorData::invalid_params(
                    format!(
                        "the cursor {:?} is not one this server gave",
                        super::cut(cursor, 64)
                    ),
                    None,
                )
            })?,
        };
        let items: Vec<&(u64, Kept)> = self
            .hides
            .iter()
            .rev()
            .filter(|(n, _)| *n < before)
            .take(LIST_PAGE + 1)
            .collect();
        let more = items.len() > LIST_PAGE;
        let shown = &items[..items.len().min(LIST_PAGE)];
        let mut result =
            ListResourcesResult::with_all_items(shown.iter().map(|(_, k)| k.resource()).collect())
                .with_ttl_ms(0)
                .with_cache_scope(CacheScope::Private);
        if more && let Some((last, _)) = shown.last() {
            result.next_cursor = Some(last.to_string());
        }
        Ok(result)
    }
}

/// The two URI templates.
pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{URI_PREFIX}{{id}}"), "hide")
            .with_title("A hide: its shape and page 1")
            .with_description(
                "A result jqjail kept because it was too large to show: what it is, its size, \
                 its shape (when it is JSON) and page 1, with the paths a JSON page holds.",
            )
            .with_mime_type("text/plain"),
        ResourceTemplate::new(format!("{URI_PREFIX}{{id}}/page/{{n}}"), "hide page")
            .with_title("Page n of a hide")
            .with_description(
                "Page n (from 1) of a hide, as hide_jump answers it: a JSON hide's pages end \
                 between values and name the paths they hold.",
            )
            .with_mime_type("text/plain"),
    ])
    .with_ttl_ms(0)
    .with_cache_scope(CacheScope::Private)
}

/// A hide URI: the ID, and the page (none: the hide itself).
pub(super) fn parse(uri: &str) -> Result<(&str, Option<u64>), ErrorData> {
    let not_ours = || {
        ErrorData::resource_not_found(
            format!(
                "{:?} is not a jqjail resource: they are {URI_PREFIX}ID and {URI_PREFIX}ID/page/N",
                super::cut(uri, 128)
            ),
            None,
        )
    };
    let rest = uri.strip_prefix(URI_PREFIX).ok_or_else(not_ours)?;
    let (id, page) = match rest.split_once('/') {
        None => (rest, None),
        Some((id, page)) => {
            let n = page.strip_prefix("page/").ok_or_else(not_ours)?;
            // Digits only: no sign, no space, no leading `+`.
            if n.is_empty() || n.len() > 19 || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ErrorData::invalid_params(
                    format!(
                        "the page in {:?} is not a page number (1 or more)",
                        super::cut(uri, 128)
                    ),
                    None,
                ));
            }
            (id, Some(n.parse::<u64>().unwrap_or(0)))
        }
    };
    if id.is_empty() || id.len() > MAX_ID || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(not_ours());
    }
    if page == Some(0) {
        return Err(ErrorData::invalid_params(
            "pages are numbered from 1".to_string(),
            None,
        ));
    }
    Ok((id, page))
}

/// Where `notifications/resources/list_changed` goes.
#[derive(Debug, Default)]
pub(super) struct Notifier {
    inner: Mutex<Listeners>,
}

#[derive(Debug, Default)]
struct Listeners {
    /// The client, if it negotiated a revision before 2026-07-28 (which takes notifications
    /// as they come).
    legacy: Option<Peer<RoleServer>>,
    /// Open `subscriptions/listen` streams (2026-07-28); each sink sends only what its
    /// stream was accepted for.
    sinks: Vec<(u64, SubscriptionSink)>,
    next: u64,
}

/// The revision from which notifications go only through `subscriptions/listen`.
const LISTEN_REVISION: &str = "2026-07-28";

impl Notifier {
    /// Remembers the client of a request, to notify it as its revision allows.
    pub(super) fn remember(&self, context: &RequestContext<RoleServer>) {
        let legacy = context
            .protocol_version()
            .is_some_and(|v| v.as_str() < LISTEN_REVISION);
        if legacy && let Ok(mut inner) = self.inner.lock() {
            inner.legacy = Some(context.peer.clone());
        }
    }

    /// The part of a `subscriptions/listen` filter served: the resource list's changes, and
    /// the tool list's where `tools` (a wrapper's upstream tools change). `None` (the method
    /// refused, before any acknowledgement) when the session has [`MAX_LISTENERS`] open.
    pub(super) fn accepted(
        &self,
        requested: &SubscriptionFilter,
        tools: bool,
    ) -> Option<SubscriptionFilter> {
        let open = self.inner.lock().map_or(MAX_LISTENERS, |i| i.sinks.len());
        if open >= MAX_LISTENERS {
            return None;
        }
        let mut accepted = SubscriptionFilter::default();
        accepted.resources_list_changed = requested.resources_list_changed;
        if tools {
            accepted.tools_list_changed = requested.tools_list_changed;
        }
        Some(accepted)
    }

    /// Holds one `subscriptions/listen` stream open until the client ends it.
    pub(super) async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let key = {
            let mut inner = self
                .inner
                .lock()
                .map_err(|_| ErrorData::internal_error("the listener list is poisoned", None))?;
            if inner.sinks.len() >= MAX_LISTENERS {
                return Err(ErrorData::invalid_request(
                    format!(
                        "this session has {MAX_LISTENERS} subscriptions open, the most it may; end one first"
                    ),
                    None,
                ));
            }
            let key = inner.next;
            inner.next += 1;
            inner.sinks.push((key, context.sink().clone()));
            key
        };
        context.cancelled().await;
        if let Ok(mut inner) = self.inner.lock() {
            inner.sinks.retain(|(k, _)| *k != key);
        }
        Ok(())
    }

    /// Tells the client the list of resources changed.
    pub(super) async fn changed(&self) {
        let (legacy, sinks) = self.listeners(|f| f.resources_list_changed);
        if let Some(peer) = legacy {
            let _ = peer.notify_resource_list_changed().await;
        }
        for sink in sinks {
            let _ = sink.notify_resource_list_changed().await;
        }
    }

    /// Tells the streams that asked that the list of tools changed (a client on an older
    /// revision is told by the wrapper's relay).
    pub(super) async fn tools_changed(&self) {
        for sink in self.listeners(|f| f.tools_list_changed).1 {
            let _ = sink.notify_tool_list_changed().await;
        }
    }

    /// The legacy client, and the streams accepted for what `wants` picks.
    fn listeners(
        &self,
        wants: impl Fn(&SubscriptionFilter) -> Option<bool>,
    ) -> (Option<Peer<RoleServer>>, Vec<SubscriptionSink>) {
        match self.inner.lock() {
            Ok(inner) => (
                inner.legacy.clone(),
                inner
                    .sinks
                    .iter()
                    .filter(|(_, s)| wants(s.accepted()) == Some(true))
                    .map(|(_, s)| s.clone())
                    .collect(),
            ),
            Err(_) => (None, Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(n: usize) -> Kept {
        Kept {
            id: format!("output-{n:08x}"),
            size: 100_000 + n as u64,
            what: "The output of jq".into(),
        }
    }

    fn cursor(c: Option<String>) -> Option<PaginatedRequestParams> {
        c.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)))
    }

    #[test]
    fn uris_name_a_hide_or_one_of_its_pages_and_nothing_else() {
        assert_eq!(parse("jqjail://hide/gh-1a2b").unwrap(), ("gh-1a2b", None));
        assert_eq!(
            parse("jqjail://hide/gh-1a2b/page/12").unwrap(),
            ("gh-1a2b", Some(12))
        );
        for bad in [
            "",
            "jqjail://hide/",
            "jqjail://hide//page/1",
            "jqjail://hides/x",
            "file:///etc/passwd",
            "jqjail://hide/x/page/0",
            "jqjail://hide/x/page/-1",
            "jqjail://hide/x/page/+1",
            "jqjail://hide/x/page/1 ",
            "jqjail://hide/x/page/99999999999999999999",
            "jqjail://hide/x/page/",
            "jqjail://hide/x/pages/1",
            "jqjail://hide/x/page/1/more",
            "jqjail://hide/a b",
            "jqjail://hide/é",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was read");
        }
        let long = format!("jqjail://hide/{}", "a".repeat(MAX_ID + 1));
        assert!(parse(&long).is_err());
    }

    #[test]
    fn the_list_pages_newest_first_each_hide_once_within_its_bound() {
        let mut listed = Listed::default();
        for n in 0..250 {
            assert!(listed.add(&kept(n)));
        }
        assert!(!listed.add(&kept(7)), "listed twice");
        let mut seen = Vec::new();
        let mut next = None;
        loop {
            let page = listed.page(cursor(next).as_ref()).unwrap();
            assert!(page.resources.len() <= LIST_PAGE);
            seen.extend(page.resources.into_iter().map(|r| r.name));
            match page.next_cursor {
                Some(c) => next = Some(c),
                None => break,
            }
        }
        let expected: Vec<String> = (0..250).rev().map(|n| kept(n).id).collect();
        assert_eq!(seen, expected);
        assert!(listed.page(cursor(Some("x".into())).as_ref()).is_err());
        // A hide added between pages does not shift the next page.
        let first = listed.page(None).unwrap();
        listed.add(&kept(1000));
        let second = listed.page(cursor(first.next_cursor).as_ref()).unwrap();
        assert_eq!(second.resources[0].name, kept(149).id);

        let mut full = Listed::default();
        for n in 0..MAX_LISTED + 10 {
            full.add(&kept(n));
        }
        assert_eq!(full.hides.len(), MAX_LISTED);
        assert!(full.what(&kept(0).id).is_none() && full.what(&kept(10).id).is_some());
        assert!(full.remove(&kept(10).id) && !full.remove(&kept(10).id));
    }
}
