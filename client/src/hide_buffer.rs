//! [`HideBuffer`]: the per-turn paginator of the hide seed, backed by the daemon's store.
//!
//! An agent host keeps one buffer per model turn. An oversized tool result is stored once
//! ([`HideBuffer::store`]); the model sees [`HideBuffer::first_cut`] (page 1 with the
//! reflection hint) and reads on through the `hide_next`, `hide_jump` and `hide_search` tools,
//! which [`HideBuffer::call_tool`] answers. The buffer remembers, per hide, the last page it
//! served, so `hide_next` is the page after that one. The pages themselves stay on the
//! daemon's disk; the buffer holds only IDs, sizes and cursors.

use crate::{Client, ClientError, HideContent, HideCut, HideEntry, HideSearchRequest};
use serde_json::Value;
use std::borrow::BorrowMut;
use std::collections::{BTreeMap, HashMap};

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
}

impl<C: BorrowMut<Client>> HideBuffer<C> {
    /// A buffer that pages by `page_size` bytes (64 to 1,048,576; the daemon checks).
    pub fn new(client: C, page_size: u64) -> Self {
        Self {
            client,
            page_size,
            latest: None,
            cursors: HashMap::new(),
        }
    }

    /// A buffer holding one hide already in the store (the seed's `LoadIntoBuffer`).
    pub fn load(client: C, id: &str, page_size: u64) -> Result<Self, ClientError> {
        let mut buffer = Self::new(client, page_size);
        let first = buffer
            .client
            .borrow_mut()
            .hide_cut(id, 1, Some(page_size), false)?;
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
    pub fn cut(&mut self, id: &str, page: u64) -> Result<HideCut, ClientError> {
        self.serve(id, page, false)
    }

    /// The page holding the first occurrence of `query`, or `None`: not found (never page 1).
    pub fn search(
        &mut self,
        id: &str,
        query: &str,
        ignore_case: bool,
    ) -> Result<Option<HideCut>, ClientError> {
        let found = self.client.borrow_mut().hide_search(HideSearchRequest {
            id: id.into(),
            query: query.into(),
            ignore_case,
            page_size: Some(self.page_size),
            max_matches: Some(1),
        })?;
        match found.matches.first() {
            Some(m) => self.serve(id, m.page, false).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the latest hide is longer than one page.
    pub fn needs_paging(&self) -> bool {
        self.latest
            .as_ref()
            .is_some_and(|(_, size)| *size > self.page_size)
    }

    /// Page 1 of the latest hide, with the reflection hint.
    pub fn first_cut(&mut self) -> Result<HideCut, ClientError> {
        let id = self.latest_id()?;
        self.serve(&id, 1, true)
    }

    /// The page after the last one served of `id` (default: the latest hide); page 1 when none
    /// was served yet.
    pub fn next(&mut self, id: Option<&str>) -> Result<HideCut, ClientError> {
        let id = self.pick(id)?;
        let page = self.cursors.get(&id).map_or(1, |p| p + 1);
        self.serve(&id, page, false)
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
            Some(Tool::HideNext) => self.next(id).map(|c| format_cut(&c)),
            Some(Tool::HideJump) => match args.get("page").and_then(Value::as_u64) {
                Some(page) => self
                    .pick(id)
                    .and_then(|id| self.cut(&id, page))
                    .map(|c| format_cut(&c)),
                None => return Err("hide_jump needs a positive integer `page`".into()),
            },
            Some(Tool::HideSearch) => match args.get("query").and_then(Value::as_str) {
                Some(query) => {
                    let ignore_case = args
                        .get("ignore_case")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    self.pick(id).and_then(|id| {
                        Ok(match self.search(&id, query, ignore_case)? {
                            Some(cut) => format!(
                                "Found {query:?} on page {}:\n{}",
                                cut.page,
                                format_cut(&cut)
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

    /// Makes `cut`'s hide the latest, with `cut` as the last page served of it: for a page
    /// that came from elsewhere, such as the first page of a run's output kept as a hide.
    pub fn served(&mut self, cut: &HideCut) {
        self.latest = Some((cut.hide_id.clone(), cut.size));
        self.cursors.insert(cut.hide_id.clone(), cut.page);
    }

    /// The client the buffer pages with, for other requests in the same session (or to
    /// replace it after its connection is lost).
    pub fn client(&mut self) -> &mut Client {
        self.client.borrow_mut()
    }

    fn serve(&mut self, id: &str, page: u64, hint: bool) -> Result<HideCut, ClientError> {
        let cut = self
            .client
            .borrow_mut()
            .hide_cut(id, page, Some(self.page_size), hint)?;
        self.cursors.insert(cut.hide_id.clone(), cut.page);
        Ok(cut)
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

/// A page as the model reads it: the preface (when there is one), a header, the text and an
/// end marker, so the model knows where it is.
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
