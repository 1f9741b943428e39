//! Hide-store messages: put, get, cut, search, list, delete and usage of a tenant's
//! hides, and the reply of a run whose oversized output was stored as a hide.
//!
//! Content travels as a message's tail (v2): raw bytes after the frame, binary-safe in both
//! encodings.

use crate::message::Cost;
use crate::tail::Tail;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// v1: store `content` as a hide of the caller's tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HidePut<'a> {
    /// What produced it (e.g. `tool_output`), free-form, at most 256 bytes.
    #[serde(default)]
    pub kind: String,
    /// Where it came from (e.g. the tool's name); its letters and digits, lowercased, start
    /// the ID. At most 256 bytes.
    #[serde(default)]
    pub source: String,
    /// Key/value pairs kept with the hide (at most 64, each string at most 1,024 bytes). A
    /// message with more pairs decodes with the first 65 (and is refused for them): the
    /// pairs are counted as they are read, so a declared million pairs never becomes a
    /// million-entry map.
    #[serde(default, deserialize_with = "bounded_meta")]
    pub meta: BTreeMap<String, String>,
    /// The bytes: the message's tail (v2), `content_bytes` on the wire.
    #[serde(rename = "content_bytes")]
    pub content: Tail<'a>,
}

/// Most meta pairs a hide may have (the store checks the same number).
pub const MAX_META_PAIRS: usize = 64;

/// A hide's meta pairs, decoded with [`bounded_meta`]; for decoders that take whole tuples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoundedMeta(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for BoundedMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bounded_meta(d).map(BoundedMeta)
    }
}

/// Deserializes meta pairs, keeping at most one over [`MAX_META_PAIRS`] (enough for the
/// refusal) instead of building a map of whatever size the message declares.
pub fn bounded_meta<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    struct Pairs;
    impl<'de> serde::de::Visitor<'de> for Pairs {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "at most {MAX_META_PAIRS} string pairs")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            let mut pairs = 0usize;
            while let Some((key, value)) = map.next_entry::<String, String>()? {
                pairs += 1;
                // One pair past the limit is kept, so that the request still decodes and is
                // refused as `INVALID_REQUEST` with its tail skipped; the rest are read (the
                // frame's length bounds them) and dropped at once.
                if pairs <= MAX_META_PAIRS + 1 && out.insert(key, value).is_some() {
                    // As for argument names: a key given twice does not decode, so the count
                    // of pairs is the count of keys.
                    return Err(serde::de::Error::custom("a meta key is given twice"));
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(Pairs)
}

/// v1: names one hide of the caller's tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideRef {
    /// The hide's ID.
    pub id: String,
}

/// v1: one page of a hide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideCutRequest {
    /// The hide's ID.
    pub id: String,
    /// 1-based page number.
    pub page: u64,
    /// Bytes per page (64 to 1,048,576); `None` means 16,384.
    #[serde(default)]
    pub page_size: Option<u64>,
    /// Add the reflection-hint preface for a model.
    #[serde(default)]
    pub hint: bool,
}

/// v1: find every occurrence of a string in a hide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideSearchRequest {
    /// The hide's ID.
    pub id: String,
    /// The text to find (1 to 1,024 bytes), matched literally.
    pub query: String,
    /// Match regardless of case (Unicode simple case folding).
    #[serde(default)]
    pub ignore_case: bool,
    /// The page size the reported pages refer to; `None` means 16,384.
    #[serde(default)]
    pub page_size: Option<u64>,
    /// Report at most this many matches (1 to 10,000); `None` means 100.
    #[serde(default)]
    pub max_matches: Option<u32>,
}

/// v1: a hide's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideEntry {
    /// `<sanitized-source>-<hex prefix of sha256(content)>`.
    pub id: String,
    /// As put.
    pub kind: String,
    /// As put.
    pub source: String,
    /// Bytes of content.
    pub size: u64,
    /// sha256 of the content, hex.
    pub sha256: String,
    /// As put.
    pub meta: BTreeMap<String, String>,
    /// When it was stored, milliseconds since the Unix epoch.
    pub created_ms: u64,
}

/// v1: answer to a put.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HidePutReply {
    /// The stored hide.
    pub entry: HideEntry,
    /// False when the tenant already had this content from this source (same ID back).
    pub created: bool,
    /// IDs the retention policy deleted to make room or for age.
    pub evicted: Vec<String>,
}

/// v1: answer to a get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideContent {
    /// The hide.
    pub entry: HideEntry,
    /// All of its bytes: the message's tail (v2), `content_bytes` on the wire.
    #[serde(rename = "content_bytes")]
    pub content: Tail<'static>,
}

/// v1: one page of a hide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideCut {
    /// The hide.
    pub hide_id: String,
    /// 1-based page number.
    pub page: u64,
    /// Pages at this page size.
    pub total_pages: u64,
    /// The page size used.
    pub page_size: u64,
    /// Byte offset of the page in the hide.
    pub offset: u64,
    /// Size of the whole hide.
    pub size: u64,
    /// The page's bytes; never ends or starts inside a UTF-8 character. The message's tail
    /// (v2), `content_bytes` on the wire.
    #[serde(rename = "content_bytes")]
    pub content: Tail<'static>,
    /// The reflection hint, when asked for.
    #[serde(default)]
    pub preface: Option<String>,
}

/// v3: one page of a hide, by number or by a path in it, in JSON pages (the default) or
/// byte pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HidePageRequest {
    /// The hide's ID.
    pub id: String,
    /// Which page.
    pub at: PageAt,
    /// Bytes per page at most (64 to 1,048,576); `None` means 16,384.
    #[serde(default)]
    pub page_size: Option<u64>,
    /// Add the reflection-hint preface for a model.
    #[serde(default)]
    pub hint: bool,
    /// How pages are cut; JSON pages fall back to byte pages for content that is not one JSON
    /// value, and say so.
    #[serde(default)]
    pub pages: Pages,
    /// The most bytes of any path the answer shows (in its fields and its preface); a longer
    /// one is cut in the middle with `…`. `None` means [`MAX_SHOWN_PATH`]; more is refused.
    /// A caller bounding what one answer carries of the content (keys are content) lowers it.
    #[serde(default)]
    pub max_path_bytes: Option<u32>,
}

/// The most bytes of a path an answer shows.
pub const MAX_SHOWN_PATH: u32 = 1024;

/// Most bytes of a path a page is asked for by.
pub const MAX_PATH_BYTES: usize = 4096;

/// v3: which page of a hide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageAt {
    /// 1-based page number.
    Page(u64),
    /// The page that holds the first byte of the value at this path: `$[130].labels`, a jq
    /// path expression of keys and indices (`.[130].labels`) or jq's array form
    /// (`[130,"labels"]`); at most [`MAX_PATH_BYTES`]. JSON pages only.
    Path(String),
    /// The page that holds this byte offset of the hide (a search match's, say).
    Offset(u64),
}

/// v3: how a hide is cut into pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pages {
    /// Pages end between JSON values and name their paths (content that is not one JSON value
    /// is cut in bytes).
    #[default]
    Json,
    /// Pages are byte windows ending at a character boundary (as `hide_cut`).
    Bytes,
}

/// v3: a page of a hide with where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HidePage {
    /// The hide.
    pub hide_id: String,
    /// 1-based page number.
    pub page: u64,
    /// Pages at this page size, cut as `pages` says.
    pub total_pages: u64,
    /// The page size used.
    pub page_size: u64,
    /// Byte offset of the page in the hide.
    pub offset: u64,
    /// Size of the whole hide.
    pub size: u64,
    /// How this hide's pages are cut: `json`, or `bytes` (asked for, or the content is not
    /// one JSON value: `not_json` says why).
    pub pages: Pages,
    /// Where a JSON page is in the document.
    #[serde(default)]
    pub json: Option<JsonPlace>,
    /// Why JSON pages were asked for and byte pages given.
    #[serde(default)]
    pub not_json: Option<String>,
    /// The page's bytes: the message's tail, `content_bytes` on the wire.
    #[serde(rename = "content_bytes")]
    pub content: Tail<'static>,
    /// The reflection hint, when asked for.
    #[serde(default)]
    pub preface: Option<String>,
}

/// v3: where a JSON page is. Paths are written `$`, then `.key` (`["key"]` for a key that is
/// not letters, digits and `_` not starting with a digit, or over 256 bytes: then cut, with
/// `…`) and `[index]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonPlace {
    /// The innermost value the page's first significant byte belongs to.
    pub first: String,
    /// The innermost value its last byte belongs to.
    pub last: String,
    /// The innermost array around the page's first byte.
    #[serde(default)]
    pub array: Option<ArrayPlace>,
    /// Containers open around the page's first byte.
    pub depth: u64,
    /// The page starts inside a string longer than a page (the one at `first`): at this byte
    /// offset of its JSON text, after the opening quote.
    #[serde(default)]
    pub starts_in_string: Option<u64>,
    /// The page ends inside a string (the one at `last`), at this offset.
    #[serde(default)]
    pub ends_in_string: Option<u64>,
}

/// v4: a hide's beginning and its end together, as a first answer shows an oversized output
/// (`Request::HideEnds`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideEndsRequest {
    /// The hide's ID.
    pub id: String,
    /// What both ends may hold together (64 to 1,048,576): each is cut as page 1 and the last
    /// page at half of it. `None` means 16,384.
    #[serde(default)]
    pub page_size: Option<u64>,
    /// Add the reflection-hint preface for a model.
    #[serde(default)]
    pub hint: bool,
    /// As in [`HidePageRequest`]: the most bytes of any path the answer shows.
    #[serde(default)]
    pub max_path_bytes: Option<u32>,
}

/// v4: a hide's beginning and end, and what lies between them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideEnds {
    /// The hide.
    pub hide_id: String,
    /// Size of the whole hide.
    pub size: u64,
    /// The page size asked for (each end is cut at half of it).
    pub page_size: u64,
    /// How the ends are cut: `json` (pages that end between values), or `bytes` (the content
    /// is not one JSON value: `not_json` says why).
    pub pages: Pages,
    /// The beginning: the first `head.length` bytes of the content.
    pub head: End,
    /// The end: the last `tail.length` bytes of the content. None when the head is the whole
    /// hide (it fits in half a page).
    #[serde(default)]
    pub tail: Option<End>,
    /// What lies between head and tail (none when they meet).
    #[serde(default)]
    pub left_out: Option<LeftOut>,
    /// Why JSON pages were asked for and byte pages given.
    #[serde(default)]
    pub not_json: Option<String>,
    /// The head's bytes, then the tail's: the message's tail, `content_bytes` on the wire.
    #[serde(rename = "content_bytes")]
    pub content: Tail<'static>,
    /// The reflection hint, when asked for: says what is shown, what is left out, and how to
    /// read it.
    #[serde(default)]
    pub preface: Option<String>,
}

/// v4: one end of a hide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// Its byte offset in the hide.
    pub offset: u64,
    /// Its length in bytes.
    pub length: u64,
    /// Where it is in the document (JSON pages).
    #[serde(default)]
    pub json: Option<JsonPlace>,
}

/// v4: the part of a hide between its head and its tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Its byte offset in the hide.
    pub offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// The innermost value its first byte belongs to (JSON pages).
    #[serde(default)]
    pub first: Option<String>,
    /// The innermost value its last byte belongs to (JSON pages).
    #[serde(default)]
    pub last: Option<String>,
    /// The elements of one array it holds, in whole or in part: where `first` and `last` are
    /// in the same array (JSON pages).
    #[serde(default)]
    pub elements: Option<ElementsLeftOut>,
}

/// v4: elements of an array left out between head and tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElementsLeftOut {
    /// The array's path.
    pub array: String,
    /// Index of the first element left out, in whole or in part.
    pub from: u64,
    /// Index of the last element left out, in whole or in part.
    pub to: u64,
    /// The array's length, where a page of the left-out part names it.
    #[serde(default)]
    pub length: Option<u64>,
}

/// v3: an array a page is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayPlace {
    /// Its path.
    pub path: String,
    /// Its elements.
    pub length: u64,
}

/// v1: one occurrence found by a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideMatch {
    /// The page its first byte is on.
    pub page: u64,
    /// Its byte offset in the hide.
    pub offset: u64,
}

/// v1: answer to a search. No match is an empty list, never a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideSearchReply {
    /// The hide.
    pub hide_id: String,
    /// Every match, ascending, up to the bound.
    pub matches: Vec<HideMatch>,
    /// More matches exist than were reported.
    pub truncated: bool,
    /// Pages at `page_size`.
    pub total_pages: u64,
    /// The page size the pages refer to.
    pub page_size: u64,
}

/// v2: which page of the tenant's hides to list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideListRequest {
    /// Hides to skip, newest first (the `next` of the previous page).
    #[serde(default)]
    pub offset: u64,
    /// At most this many hides (1 to 1,000); `None` means 100. A page also ends once its
    /// entries' labels and meta pass 256 KiB.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Most hides one list page holds.
pub const MAX_LIST_PAGE: u32 = 1_000;

/// Hides a list page holds when the request does not say.
pub const DEFAULT_LIST_PAGE: u32 = 100;

/// A list page ends once its entries' labels and meta pass this many bytes (it always holds
/// at least one entry), so a page's frame stays small whatever the tenant stored.
pub const LIST_PAGE_LABEL_BYTES: u64 = 256 * 1024;

/// v1: answer to a list: one page of the tenant's hides, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideListReply {
    /// The hides.
    pub entries: Vec<HideEntry>,
    /// v2: the tenant's hides in all.
    pub total: u64,
    /// v2: the offset of the next page; `None` on the last page.
    pub next: Option<u64>,
}

/// v1: what the tenant holds and may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideUsageReply {
    /// Hides (at most 10,000 per tenant).
    pub entries: u64,
    /// Bytes counted against the quota: each hide's content, labels and meta.
    pub bytes: u64,
    /// The tenant's quota in bytes.
    pub quota_bytes: u64,
    /// Hides older than this many seconds are deleted on the tenant's next put (0: never).
    pub max_age_secs: u64,
}

/// v1: a run whose output was over the output limit and was stored as a hide instead
/// (`on_oversize: hide`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiddenReply {
    /// The hide holding the whole output.
    pub entry: HideEntry,
    /// Its first page, with the reflection hint.
    pub first: HideCut,
    /// What the run cost.
    pub cost: Cost,
}

/// v1: what a run does when its output is over the output limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnOversize {
    /// v1: fail with `OUTPUT_TOO_LARGE`.
    #[default]
    Error,
    /// v1: store the output (up to the input limit) as a hide and answer with its first page.
    Hide,
}
