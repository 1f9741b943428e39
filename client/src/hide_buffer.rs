//! [`HideBuffer`]: the per-turn paginator of the hide seed, backed by the daemon's store.
//!
//! An agent host keeps one buffer per model turn. An oversized tool result is stored once
//! ([`HideBuffer::store`]); the model sees [`HideBuffer::first_cut`] (page 1 with the
//! reflection hint) and reads on through the `hide_next`, `hide_jump` and `hide_search` tools,
//! which [`HideBuffer::call_tool`] answers. The buffer remembers, per hide, the last page it
//! served, so `hide_next` is the page after that one. The pages themselves stay on the
//! daemon's disk; the buffer holds only IDs, sizes and cursors.
//!
//! Pages are JSON pages (protocol 3's `hide_page`): a JSON hide's pages end between values and
//! each says which paths it holds, so the model knows which element of which array it reads;
//! a hide that is not JSON is paged in bytes. [`HideBuffer::with_pages`] picks byte pages.
//!
//! The first answer ([`HideBuffer::first_answer`]) is the hide's head and tail by default
//! (protocol 4's `hide_ends`): its beginning and its end, each half a page, and a line saying
//! what lies between (bytes, paths, elements). `jqjail-bench --reader` measured it: with head
//! and tail a reader knows the main array's length from the first answer, on JSON pages alone
//! it needs a second page (BENCHMARKS.md). [`HideBuffer::with_first`] picks page 1 instead.

use crate::{
    Client, ClientError, End, HideContent, HideCut, HideEnds, HideEndsRequest, HideEntry, HidePage,
    HidePageRequest, HideSearchRequest, PageAt, Pages,
};
use serde_json::Value;
use std::borrow::BorrowMut;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// The most paths a served page shows: five in the daemon's preface (first, last, the array,
/// and first and last again for a page inside a string) and three in [`format_page`]'s header.
pub const PATHS_SHOWN: usize = 8;

/// What the first answer of an oversized output shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum First {
    /// Its beginning and its end, each half a page, and what lies between (the default).
    #[default]
    HeadAndTail,
    /// Page 1.
    Page,
}

/// A first answer: page 1, or the head and tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstShown {
    /// Page 1.
    Page(Box<HidePage>),
    /// Head and tail.
    Ends(Box<HideEnds>),
}

impl FirstShown {
    /// As the model reads it ([`format_page`] or [`format_ends`]).
    pub fn text(&self) -> String {
        match self {
            FirstShown::Page(page) => format_page(page),
            FirstShown::Ends(ends) => format_ends(ends),
        }
    }

    /// Bytes of the hide's content it shows.
    pub fn content_len(&self) -> usize {
        match self {
            FirstShown::Page(page) => page.content.as_bytes().len(),
            FirstShown::Ends(ends) => ends.content.as_bytes().len(),
        }
    }

    /// The hide's size.
    pub fn size(&self) -> u64 {
        match self {
            FirstShown::Page(page) => page.size,
            FirstShown::Ends(ends) => ends.size,
        }
    }
}

/// The smallest page size a head and tail is cut at (two ends of the smallest page).
pub const MIN_ENDS_PAGE_SIZE: u64 = 128;

/// The most paths a head and tail shows: seven in the daemon's preface (each end's first and
/// last, the left-out part's, and its array) and seven in [`format_ends`].
pub const ENDS_PATHS_SHOWN: usize = 14;

/// The `kind` recorded for hides stored through a buffer.
pub const TOOL_OUTPUT_KIND: &str = "tool_output";

/// A per-turn view of hides, paged by a fixed page size. It holds its client as `C`: a
/// `&mut Client` for a buffer that lives for one turn, or a `Client` it owns (as a server that
/// keeps one buffer for its whole session does).
#[derive(Debug)]
pub struct HideBuffer<C: BorrowMut<Client>> {
    client: C,
    page_size: u64,
    /// The most recently stored or loaded hide: its ID and size.
    latest: Option<(String, u64)>,
    /// The last page served, per hide.
    cursors: HashMap<String, u64>,
    /// JSON or byte pages.
    pages: Pages,
    /// The most bytes of a path shown (`None`: the daemon's 1,024).
    max_path_bytes: Option<u32>,
    /// What a first answer shows.
    first: First,
}

impl<C: BorrowMut<Client>> HideBuffer<C> {
    /// A buffer that pages by `page_size` bytes (64 to 1,048,576; the daemon checks).
    pub fn new(client: C, page_size: u64) -> Self {
        Self {
            client,
            page_size,
            latest: None,
            cursors: HashMap::new(),
            pages: Pages::Json,
            max_path_bytes: None,
            first: First::default(),
        }
    }

    /// The same buffer, its first answers showing `first`.
    pub fn with_first(mut self, first: First) -> Self {
        self.first = first;
        self
    }

    /// The same buffer, showing at most `max` bytes of any path (a JSON page shows up to
    /// [`PATHS_SHOWN`] paths between its preface and its header; keys are content).
    pub fn with_max_path_bytes(mut self, max: u32) -> Self {
        self.max_path_bytes = Some(max);
        self
    }

    /// The same buffer, paging in `pages` (JSON pages unless told).
    pub fn with_pages(mut self, pages: Pages) -> Self {
        self.pages = pages;
        self
    }

    /// A buffer holding one hide already in the store (the seed's `LoadIntoBuffer`).
    pub fn load(client: C, id: &str, page_size: u64) -> Result<Self, ClientError> {
        let mut buffer = Self::new(client, page_size);
        let first = buffer.client.borrow_mut().hide_page(HidePageRequest {
            id: id.into(),
            at: PageAt::Page(1),
            page_size: Some(page_size),
            hint: false,
            pages: Pages::Bytes,
            max_path_bytes: None,
        })?;
        buffer.latest = Some((first.hide_id, first.size));
        Ok(buffer)
    }

    /// The page size.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The most recently stored or loaded hide.
    pub fn latest(&self) -> Option<&str> {
        self.latest.as_ref().map(|(id, _)| id.as_str())
    }

    /// Stores a tool's output; it becomes the latest hide.
    pub fn store(&mut self, source: &str, content: &[u8]) -> Result<HideEntry, ClientError> {
        let put = self.client.borrow_mut().hide_put(
            TOOL_OUTPUT_KIND,
            source,
            content,
            &BTreeMap::new(),
        )?;
        self.latest = Some((put.entry.id.clone(), put.entry.size));
        self.cursors.remove(&put.entry.id);
        Ok(put.entry)
    }

    /// A hide's metadata and whole content.
    pub fn get(&mut self, id: &str) -> Result<HideContent, ClientError> {
        self.client.borrow_mut().hide_get(id)
    }

    /// One page (1-based); it becomes that hide's cursor.
    pub fn cut(&mut self, id: &str, page: u64) -> Result<HidePage, ClientError> {
        self.serve(id, PageAt::Page(page), false)
    }

    /// Page `page` (1-based) of `id`, with the reflection hint if asked, cut as this buffer
    /// cuts pages; no cursor moves and the latest hide stays (for a reader beside the model,
    /// such as an MCP host reading resources).
    pub fn peek(&mut self, id: &str, page: u64, hint: bool) -> Result<HidePage, ClientError> {
        self.request(id, PageAt::Page(page), hint)
    }

    /// The JSON page holding the value at `path` (`$[17].labels`, `.[17].labels`); it becomes
    /// that hide's cursor.
    pub fn jump(&mut self, id: &str, path: &str) -> Result<HidePage, ClientError> {
        self.serve(id, PageAt::Path(path.into()), false)
    }

    /// The page holding the first occurrence of `query`, or `None`: not found (never page 1).
    pub fn search(
        &mut self,
        id: &str,
        query: &str,
        ignore_case: bool,
    ) -> Result<Option<HidePage>, ClientError> {
        let found = self.client.borrow_mut().hide_search(HideSearchRequest {
            id: id.into(),
            query: query.into(),
            ignore_case,
            page_size: Some(self.page_size),
            max_matches: Some(1),
        })?;
        match found.matches.first() {
            // The search's page numbers are byte pages': the page is found by the offset.
            Some(m) => self.serve(id, PageAt::Offset(m.offset), false).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the latest hide is longer than one page.
    pub fn needs_paging(&self) -> bool {
        self.latest
            .as_ref()
            .is_some_and(|(_, size)| *size > self.page_size)
    }

    /// The first answer of `id` (head and tail, or page 1, as the buffer was made), with the
    /// reflection hint; the hide becomes the latest. After a head and tail, `hide_next` reads
    /// page 1; after page 1, page 2.
    pub fn first_answer(&mut self, id: &str) -> Result<FirstShown, ClientError> {
        let shown = self.peek_first(id)?;
        match &shown {
            FirstShown::Page(page) => self.served(page),
            FirstShown::Ends(ends) => {
                self.latest = Some((ends.hide_id.clone(), ends.size));
                self.cursors.remove(&ends.hide_id);
            }
        }
        Ok(shown)
    }

    /// [`HideBuffer::first_answer`], moving no cursor (for a reader beside the model). Pages
    /// under [`MIN_ENDS_PAGE_SIZE`] have no room for two ends: page 1 is shown.
    pub fn peek_first(&mut self, id: &str) -> Result<FirstShown, ClientError> {
        Ok(match self.first {
            First::HeadAndTail if self.page_size >= MIN_ENDS_PAGE_SIZE => {
                FirstShown::Ends(self.ends(id)?)
            }
            First::HeadAndTail | First::Page => {
                FirstShown::Page(Box::new(self.request(id, PageAt::Page(1), true)?))
            }
        })
    }

    /// The head and tail of `id` with the reflection hint, its ends cut as this buffer cuts
    /// pages (at half its page size); no cursor moves.
    pub fn ends(&mut self, id: &str) -> Result<Box<HideEnds>, ClientError> {
        // Twice a page's paths: each gets half the bound, so together they take no more.
        let max_path_bytes = self
            .max_path_bytes
            .map(|max| (max as usize * PATHS_SHOWN / ENDS_PATHS_SHOWN) as u32);
        self.client.borrow_mut().hide_ends(HideEndsRequest {
            id: id.into(),
            page_size: Some(self.page_size),
            hint: true,
            max_path_bytes,
        })
    }

    /// Page 1 of the latest hide, with the reflection hint.
    pub fn first_cut(&mut self) -> Result<HidePage, ClientError> {
        let id = self.latest_id()?;
        self.serve(&id, PageAt::Page(1), true)
    }

    /// The page after the last one served of `id` (default: the latest hide); page 1 when none
    /// was served yet.
    pub fn next(&mut self, id: Option<&str>) -> Result<HidePage, ClientError> {
        let id = self.pick(id)?;
        let page = self.cursors.get(&id).map_or(1, |p| p + 1);
        self.serve(&id, PageAt::Page(page), false)
    }

    /// Answers a `hide_next`, `hide_jump` or `hide_search` tool call with the text for the
    /// model. Failures are answered too, as text naming the code, so the model can recover.
    pub fn call_tool(&mut self, name: &str, args: &Value) -> String {
        self.try_call_tool(name, args)
            .unwrap_or_else(|why| format!("error: {why}"))
    }

    /// [`HideBuffer::call_tool`], with a failure as `Err("CODE: message")` (or a usage
    /// message) for front ends that report errors apart, as MCP's `isError` does.
    pub fn try_call_tool(&mut self, name: &str, args: &Value) -> Result<String, String> {
        let id = args.get("hide_id").and_then(Value::as_str);
        use crate::tools::Tool;
        let result = match Tool::named(name) {
            Some(Tool::HideNext) => self.next(id).map(|p| format_page(&p)),
            Some(Tool::HideJump) => match (
                args.get("page").and_then(Value::as_u64),
                args.get("path").and_then(Value::as_str),
            ) {
                (Some(page), None) => self
                    .pick(id)
                    .and_then(|id| self.cut(&id, page))
                    .map(|p| format_page(&p)),
                (None, Some(path)) => self
                    .pick(id)
                    .and_then(|id| self.jump(&id, path))
                    .map(|p| format_page(&p)),
                _ => {
                    return Err(
                        "hide_jump needs a positive integer `page` or a string `path`, one of the two"
                            .into(),
                    );
                }
            },
            Some(Tool::HideSearch) => match args.get("query").and_then(Value::as_str) {
                Some(query) => {
                    let ignore_case = args
                        .get("ignore_case")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    self.pick(id).and_then(|id| {
                        Ok(match self.search(&id, query, ignore_case)? {
                            Some(page) => format!(
                                "Found {query:?} on page {}:\n{}",
                                page.page,
                                format_page(&page)
                            ),
                            None => format!("Not found: {query:?} does not occur in hide {id}."),
                        })
                    })
                }
                None => return Err("hide_search needs a string `query`".into()),
            },
            // Every tool named: a new hide tool does not compile until it is answered here.
            Some(Tool::Jq | Tool::JsonPath | Tool::JsonShape) | None => {
                return Err(format!("{name} is not a hide tool"));
            }
        };
        // A server error reads `CODE: message` already.
        result.map_err(|e| e.to_string())
    }

    /// Makes `page`'s hide the latest, with `page` as the last page served of it: for a page
    /// that came from elsewhere, such as the first page of a run's output kept as a hide
    /// (which must be cut as this buffer cuts pages, for `hide_next` to go on from it).
    pub fn served(&mut self, page: &HidePage) {
        self.latest = Some((page.hide_id.clone(), page.size));
        self.cursors.insert(page.hide_id.clone(), page.page);
    }

    /// Page `page` of `id` with the reflection hint, cut as this buffer cuts pages; the hide
    /// becomes the latest, with this page its cursor (for a hide kept elsewhere, such as a
    /// run's output).
    pub fn hinted(&mut self, id: &str, page: u64) -> Result<HidePage, ClientError> {
        let served = self.serve(id, PageAt::Page(page), true)?;
        self.served(&served);
        Ok(served)
    }

    /// The client the buffer pages with, for other requests in the same session (or to
    /// replace it after its connection is lost).
    pub fn client(&mut self) -> &mut Client {
        self.client.borrow_mut()
    }

    fn serve(&mut self, id: &str, at: PageAt, hint: bool) -> Result<HidePage, ClientError> {
        let page = self.request(id, at, hint)?;
        self.cursors.insert(page.hide_id.clone(), page.page);
        Ok(page)
    }

    fn request(&mut self, id: &str, at: PageAt, hint: bool) -> Result<HidePage, ClientError> {
        self.client.borrow_mut().hide_page(HidePageRequest {
            id: id.into(),
            at,
            page_size: Some(self.page_size),
            hint,
            pages: self.pages,
            max_path_bytes: self.max_path_bytes,
        })
    }

    fn latest_id(&self) -> Result<String, ClientError> {
        self.latest
            .as_ref()
            .map(|(id, _)| id.clone())
            .ok_or(ClientError::NoHide)
    }

    fn pick(&self, id: Option<&str>) -> Result<String, ClientError> {
        match id {
            Some(id) => Ok(id.to_string()),
            None => self.latest_id(),
        }
    }
}

/// A page as the model reads it: the preface (when there is one), a header with the paths a
/// JSON page holds, the text and an end marker, so the model knows where it is.
pub fn format_page(page: &HidePage) -> String {
    let mut out = String::new();
    if let Some(preface) = &page.preface {
        out.push_str(preface);
        out.push('\n');
    }
    let end = page.offset + page.content.as_bytes().len() as u64;
    let _ = write!(
        out,
        "[HIDE id={} page={}/{} bytes {}..{end} of {}",
        page.hide_id, page.page, page.total_pages, page.offset, page.size
    );
    if let Some(place) = &page.json {
        let _ = write!(out, " · {} … {}", place.first, place.last);
        if let Some(array) = &place.array {
            let _ = write!(out, " · in {} ({} elements)", array.path, array.length);
        }
    }
    out.push_str("]\n");
    out.push_str(&String::from_utf8_lossy(page.content.as_bytes()));
    let _ = write!(out, "\n[END page {}/{}]", page.page, page.total_pages);
    out
}

/// A head and tail as the model reads it: the preface (when there is one), the head with a
/// header naming its bytes and paths, a line for what is left out between (bytes, paths and
/// the elements of one array), the tail with its header, and an end marker.
pub fn format_ends(ends: &HideEnds) -> String {
    let mut out = String::new();
    if let Some(preface) = &ends.preface {
        out.push_str(preface);
        out.push('\n');
    }
    let bytes = ends.content.as_bytes();
    let head_len = (ends.head.length as usize).min(bytes.len());
    let header = |out: &mut String, what: &str, end: &End| {
        let _ = write!(
            out,
            "[HIDE id={} {what}: bytes {}..{} of {}",
            ends.hide_id,
            end.offset,
            end.offset.saturating_add(end.length),
            ends.size
        );
        if let Some(place) = &end.json {
            let _ = write!(out, " · {} … {}", place.first, place.last);
        }
        out.push_str("]\n");
    };
    header(&mut out, "head", &ends.head);
    out.push_str(&String::from_utf8_lossy(&bytes[..head_len]));
    if let Some(left) = &ends.left_out {
        let _ = write!(
            out,
            "\n[… left out: bytes {}..{} ({} bytes)",
            left.offset,
            left.offset.saturating_add(left.bytes),
            left.bytes
        );
        if let (Some(first), Some(last)) = (&left.first, &left.last) {
            let _ = write!(out, " · {first} … {last}");
        }
        if let Some(el) = &left.elements {
            let _ = write!(
                out,
                " · elements {} to {} of {}, in whole or in part",
                el.from, el.to, el.array
            );
            if let Some(n) = el.length {
                let _ = write!(out, " ({n} elements)");
            }
        }
        out.push_str(" …]");
    }
    if let Some(tail) = &ends.tail {
        out.push('\n');
        header(&mut out, "tail", tail);
        out.push_str(&String::from_utf8_lossy(&bytes[head_len..]));
    }
    let _ = write!(
        out,
        "\n[END head and tail of {}; hide_next reads from page 1]",
        ends.hide_id
    );
    out
}

/// A byte page (`hide_cut`) as the model reads it, as [`format_page`] writes one.
pub fn format_cut(cut: &HideCut) -> String {
    let mut out = String::new();
    if let Some(preface) = &cut.preface {
        out.push_str(preface);
        out.push('\n');
    }
    out.push_str(&format!(
        "[HIDE id={} page={}/{} bytes {}..{} of {}]\n",
        cut.hide_id,
        cut.page,
        cut.total_pages,
        cut.offset,
        cut.offset + cut.content.as_bytes().len() as u64,
        cut.size
    ));
    out.push_str(&String::from_utf8_lossy(cut.content.as_bytes()));
    out.push_str(&format!("\n[END page {}/{}]", cut.page, cut.total_pages));
    out
}
