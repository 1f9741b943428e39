//! Hide-store requests: maps protocol messages to the store's calls and the store's errors to
//! stable codes. Every call names the connection's tenant (from SO_PEERCRED), so a tenant only
//! ever reaches its own hides. The supervisor never interprets a hide's content.
//!
//! Store calls block on file and SQLite I/O; each runs under `block_in_place` (which lets the
//! runtime move its other work off this thread) and only in a store turn of the tenant's uid
//! (`tenant.rs`), so at most `STORE_READS` + `STORE_WRITES` threads block in the store at
//! once, whatever the number of requests waiting. A search runs on a bulk thread
//! (`bulk.rs`) while its caller's thread waits. A small put's content (its tail, read
//! whole) is stored from memory; a large one is written to the store's temp file as it
//! arrives ([`put_streamed`]). A whole hide is answered from its file ([`Reply::file`]).

use super::super::reply::Reply;
use crate::arriving::Arriving;
use crate::config::TenantOf;
use crate::tenant::StoreCall;
use jqjail_protocol::hide::{
    ArrayPlace, DEFAULT_LIST_PAGE, ElementsLeftOut, End, HideEnds, HideEndsRequest, JsonPlace,
    LIST_PAGE_LABEL_BYTES, LeftOut, MAX_LIST_PAGE, MAX_PATH_BYTES, MAX_SHOWN_PATH, PageAt, Pages,
};
use jqjail_protocol::{
    ErrorCode, ErrorReply, HideContent, HideCut, HideEntry, HideListReply, HideMatch, HidePage,
    HidePageRequest, HidePut, HidePutReply, HideSearchReply, HideSearchRequest, HideUsageReply,
    Request, Response, Tail,
};
use jqjail_store::page::{
    DEFAULT_MATCHES, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MIN_PAGE_SIZE, SearchOptions,
};
use jqjail_store::{SearchArgs, Store, StoreError, json_page};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

/// Answers a search for `tenant`, in the search turn `answer` took for it: the hide is opened
/// in a store read turn taken here and given back at once, then scanned on a bulk thread
/// (`bulk.rs`), nicer than the daemon's others, while this thread waits under
/// `block_in_place`. A scan slowed at that priority therefore holds no store turn. A search
/// that panics is answered `INTERNAL` (it only reads an open file).
pub(crate) async fn search(
    r: HideSearchRequest,
    store: Arc<Store>,
    tenant: &TenantOf,
    bulk: &crate::bulk::Bulk,
    payer: (&crate::tenant::Admission, u32),
    by: Instant,
) -> Reply {
    let page_size = r.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    let opts = SearchOptions {
        ignore_case: r.ignore_case,
        max_matches: r.max_matches.unwrap_or(DEFAULT_MATCHES),
    };
    // Refused for its arguments before its hide is looked up, as `Store::search` does.
    let args = match SearchArgs::new(r.query, opts, page_size) {
        Ok(args) => args,
        Err(e) => return Response::Error(error_reply(e)).into(),
    };
    let (admission, uid) = payer;
    let opened = {
        let _turn = match admission.store(uid, StoreCall::Read, by).await {
            Ok(turn) => turn,
            Err(e) => return Response::Error(*e).into(),
        };
        tokio::task::block_in_place(|| store.open_hide(&tenant.name, &r.id))
    };
    let (entry, file) = match opened {
        Ok(opened) => opened,
        Err(e) => return Response::Error(error_reply(e)).into(),
    };
    let scanned =
        tokio::task::block_in_place(|| bulk.run(move || Store::search_in(&entry, &file, &args)));
    let found = match scanned {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return Response::Error(error_reply(e)).into(),
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic");
            if let Some(held_back) = SEARCH_PANIC_LOG.allow() {
                tracing::error!(
                    why = clip(why, 1024),
                    held_back,
                    "a search failed inside the daemon"
                );
            }
            return Response::Error(ErrorReply::new(
                ErrorCode::Internal,
                "the search failed inside the daemon (its log says why); the hide is unchanged",
            ))
            .into();
        }
    };
    Response::HideSearch(HideSearchReply {
        hide_id: r.id,
        matches: found
            .matches
            .iter()
            .map(|m| HideMatch {
                page: m.page,
                offset: m.offset,
            })
            .collect(),
        truncated: found.truncated,
        total_pages: found.total_pages,
        page_size,
    })
    .into()
}

/// The throttle of the failed-search log line.
static SEARCH_PANIC_LOG: std::sync::LazyLock<crate::admit::Throttle> =
    std::sync::LazyLock::new(crate::admit::Throttle::default);

/// Answers one hide request other than a search (`HidePut` … `HideUsage`) for `tenant`, in
/// the store turn `answer` took for it, blocking this thread under `block_in_place`. A put's
/// content was held to the input limit at its head (`head::check_head`): a hide is a filter's
/// input.
pub(crate) fn handle(request: Request<'_>, store: &Store, tenant: &TenantOf) -> Reply {
    let t = &*tenant.name;
    let result = tokio::task::block_in_place(|| match request {
        Request::HidePut(put) => {
            let meta: Vec<(String, String)> = put.meta.into_iter().collect();
            Ok(put_reply(store.put(
                t,
                &put.kind,
                &put.source,
                put.content.as_bytes(),
                &meta,
                &tenant.hides,
            ))
            .into())
        }
        Request::HideGet(r) => {
            // The content is written from the file as the client takes it.
            let (e, file) = store.open_hide(t, &r.id)?;
            let mut reply = Reply::from(Response::HideContent(HideContent {
                content: Tail::pending(e.size),
                entry: entry(e),
            }));
            reply.file = Some(file);
            Ok(reply)
        }
        Request::HideCut(r) => {
            let page_size = r.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
            Ok(Response::HideCut(cut(store, tenant, &r.id, r.page, page_size, r.hint)?).into())
        }
        Request::HidePage(r) => Ok(Response::HidePage(page(store, tenant, r)?).into()),
        Request::HideEnds(r) => Ok(Response::HideEnds(Box::new(ends(store, tenant, r)?)).into()),
        Request::HideList(r) => {
            let limit = r.limit.unwrap_or(DEFAULT_LIST_PAGE);
            if !(1..=MAX_LIST_PAGE).contains(&limit) {
                return Ok(Response::Error(ErrorReply::new(
                    ErrorCode::InvalidRequest,
                    format!("a list page of {limit} hides was asked for; it must be 1 to {MAX_LIST_PAGE}"),
                ))
                .into());
            }
            let (page, total) = store.list_page(t, r.offset, limit, LIST_PAGE_LABEL_BYTES)?;
            let end = r.offset.saturating_add(page.len() as u64);
            Ok(Response::HideList(HideListReply {
                entries: page.into_iter().map(entry).collect(),
                total,
                next: (end < total).then_some(end),
            })
            .into())
        }
        Request::HideDelete(r) => Ok(Response::HideEntry(entry(store.delete(t, &r.id)?)).into()),
        Request::HideUsage => {
            let usage = store.usage(t)?;
            Ok(Response::HideUsage(HideUsageReply {
                entries: usage.entries,
                bytes: usage.bytes,
                quota_bytes: tenant.hides.quota_bytes,
                max_age_secs: tenant.hides.max_age.map_or(0, |d| d.as_secs()),
            })
            .into())
        }
        // A search has a handler of its own (`search`).
        Request::Hello(_) | Request::Run(_) | Request::Stats | Request::HideSearch(_) => {
            Ok(Response::Error(ErrorReply::new(
                ErrorCode::Internal,
                "a request that this handler does not serve reached the hide store",
            ))
            .into())
        }
    });
    result.unwrap_or_else(|e| Response::Error(error_reply(e)).into())
}

/// Stores a hide whose content is still arriving. The content goes to the store's temp file
/// as it comes, so a 20 MiB put never sits in the daemon's memory; each chunk is hashed and
/// written in a supervisor-CPU turn of `payer` (an admission and a uid), so a uid's puts on
/// many connections use one CPU at most. What the store did not take of the content is left in
/// `content` for the caller to skip.
pub(crate) async fn put_streamed(
    put: HidePut<'_>,
    content: &mut Arriving<'_>,
    store: &Store,
    tenant: &TenantOf,
    payer: (&crate::tenant::Admission, u32),
    frame_timeout: std::time::Duration,
) -> Response {
    let size = content.len();
    let (admission, uid) = payer;
    let by = content.arrive_by();
    let turn = match admission.store(uid, StoreCall::Write, by).await {
        Ok(turn) => turn,
        Err(e) => return Response::Error(*e),
    };
    // Refused before a byte of it is written: a hide larger than the whole quota, or one
    // that does not fit beside the tenant's other puts in progress.
    let begun = tokio::task::block_in_place(|| store.begin_put(&tenant.name, size, &tenant.hides));
    drop(turn);
    let mut writing = match begun {
        Ok(w) => w,
        Err(e) => return Response::Error(error_reply(e)),
    };
    // A small buffer: streamed puts are not limited in number like streamed runs, and a
    // disk write gains nothing from a larger one.
    let mut buf = content.buffer(PUT_CHUNK);
    loop {
        let n = match content.read_some(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(why) => return Response::Error(ErrorReply::new(ErrorCode::ProtocolError, why)),
        };
        let _turn = match admission.cpu(uid, by).await {
            Ok(turn) => turn,
            Err(e) => return Response::Error(*e),
        };
        if let Err(e) = tokio::task::block_in_place(|| writing.write(&buf[..n])) {
            return Response::Error(error_reply(e));
        }
    }
    // Made durable in a CPU turn, then committed in a store turn of its own: the frame
    // timeout again from now (the upload may have used most of its own).
    let by = Instant::now() + frame_timeout;
    {
        let _turn = match admission.cpu(uid, by).await {
            Ok(turn) => turn,
            Err(e) => return Response::Error(*e),
        };
        if let Err(e) = tokio::task::block_in_place(|| writing.sync()) {
            return Response::Error(error_reply(e));
        }
    }
    let meta: Vec<(String, String)> = put.meta.into_iter().collect();
    let _turn = match admission.store(uid, StoreCall::Write, by).await {
        Ok(turn) => turn,
        Err(e) => return Response::Error(*e),
    };
    let done = tokio::task::block_in_place(|| {
        writing.finish(&put.kind, &put.source, &meta, &tenant.hides)
    });
    put_reply(done)
}

/// The throttle of the eviction log line.
static EVICTED_LOG: std::sync::LazyLock<crate::admit::Throttle> =
    std::sync::LazyLock::new(crate::admit::Throttle::default);

/// Bytes of a streamed put read (and written to its temp file) at a time.
const PUT_CHUNK: usize = 64 * 1024;

fn put_reply(done: Result<jqjail_store::Put, StoreError>) -> Response {
    match done {
        Ok(done) => {
            // A tenant can make its own hides be evicted at will: logged at most once a second.
            if !done.evicted.is_empty()
                && let Some(held_back) = EVICTED_LOG.allow()
            {
                tracing::info!(
                    evicted = done.evicted.len(),
                    held_back,
                    "hide retention deleted old hides"
                );
            }
            Response::HidePut(HidePutReply {
                entry: entry(done.entry),
                created: done.created,
                evicted: done.evicted,
            })
        }
        Err(e) => Response::Error(error_reply(e)),
    }
}

/// A tenant's hide as a run's input: its length and its file, to be read as the worker
/// takes it. Looked up in a store turn of `uid`, waiting until `by`.
pub(crate) async fn open_input(
    store: &Store,
    tenant: &TenantOf,
    id: &str,
    (admission, uid): (&crate::tenant::Admission, u32),
    by: Instant,
) -> Result<(u64, std::fs::File), Box<ErrorReply>> {
    let _turn = admission.store(uid, StoreCall::Read, by).await?;
    tokio::task::block_in_place(|| store.open_hide(&tenant.name, id))
        .map(|(entry, file)| (entry.size, file))
        .map_err(|e| Box::new(error_reply(e)))
}

/// Stores a run's oversized output as a hide of `tenant`; returns it and its first page
/// (with the reflection hint). A hide is one JSON value, the one the same run answers with its
/// outputs collapsed, whichever form was asked for: so a hide can be filtered by its ID, and
/// every client keeps the same hide for the same run. Lines are collapsed as they are written,
/// not copied first.
///
/// The put is begun and committed in store turns of `uid` (each waited for until `by`); its
/// content is written and made durable in between, in the large-output turn its caller holds.
pub(crate) async fn keep_output(
    store: &Store,
    tenant: &TenantOf,
    filter: &str,
    output: &str,
    lines: bool,
    (admission, uid): (&crate::tenant::Admission, u32),
    by: Instant,
) -> Result<(HideEntry, HideCut), Box<ErrorReply>> {
    let meta = [("filter".to_string(), clip(filter, 1024).to_string())];
    let (kind, source) = ("run_output", "output");
    let collapsed = Collapsed::of(output, lines);
    let fail = |e| Box::new(error_reply(e));
    let turn = admission.store(uid, StoreCall::Write, by).await?;
    let mut writing = tokio::task::block_in_place(|| {
        jqjail_store::check_labels(kind, source, &meta)?;
        store.begin_put(&tenant.name, collapsed.len(), &tenant.hides)
    })
    .map_err(fail)?;
    drop(turn);
    tokio::task::block_in_place(|| {
        collapsed.write_to(|piece| writing.write(piece))?;
        writing.sync()
    })
    .map_err(fail)?;
    let turn = admission.store(uid, StoreCall::Write, by).await?;
    let put = tokio::task::block_in_place(|| writing.finish(kind, source, &meta, &tenant.hides))
        .map_err(fail)?;
    drop(turn);
    let _turn = admission.store(uid, StoreCall::Read, by).await?;
    let first = tokio::task::block_in_place(|| {
        cut(store, tenant, &put.entry.id, 1, DEFAULT_PAGE_SIZE, true)
    })
    .map_err(fail)?;
    Ok((entry(put.entry), first))
}

/// A run's output in the collapsed form: none is `null`, one is itself, several are an array
/// of them. Outputs written as lines are each a compact JSON text, which holds no raw
/// newline, so collapsing them is brackets around the text with its newlines made commas.
struct Collapsed<'a> {
    body: &'a str,
    /// Several lines: bracketed, newlines made commas.
    array: bool,
}

impl<'a> Collapsed<'a> {
    fn of(output: &'a str, lines: bool) -> Collapsed<'a> {
        if !lines {
            return Collapsed {
                body: output,
                array: false,
            };
        }
        let body = output.strip_suffix('\n').unwrap_or(output);
        Collapsed {
            body: if body.is_empty() { "null" } else { body },
            array: body.contains('\n'),
        }
    }

    fn len(&self) -> u64 {
        self.body.len() as u64 + if self.array { 2 } else { 0 }
    }

    /// Gives the collapsed text to `write` in pieces of at most 64 KiB.
    fn write_to<E>(&self, mut write: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        if !self.array {
            return self.body.as_bytes().chunks(64 * 1024).try_for_each(write);
        }
        write(b"[")?;
        let mut piece = Vec::with_capacity(64 * 1024);
        for chunk in self.body.as_bytes().chunks(64 * 1024) {
            piece.clear();
            piece.extend(chunk.iter().map(|&b| if b == b'\n' { b',' } else { b }));
            write(&piece)?;
        }
        write(b"]")
    }
}

fn cut(
    store: &Store,
    tenant: &TenantOf,
    id: &str,
    page: u64,
    page_size: u64,
    hint: bool,
) -> Result<HideCut, StoreError> {
    let c = store.cut(&tenant.name, id, page, page_size)?;
    let preface = hint.then(|| preface(&c));
    Ok(HideCut {
        hide_id: c.hide_id,
        page: c.page,
        total_pages: c.total_pages,
        page_size,
        offset: c.offset,
        size: c.size,
        content: Tail::from(c.content),
        preface,
    })
}

/// A `hide_page`: a JSON page by number or path, or a byte page.
fn page(store: &Store, tenant: &TenantOf, r: HidePageRequest) -> Result<HidePage, StoreError> {
    let page_size = r.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    let at = match r.at {
        PageAt::Page(page) => jqjail_store::PageAt::Number(page),
        PageAt::Offset(offset) => jqjail_store::PageAt::Offset(offset),
        PageAt::Path(path) => {
            if path.len() > MAX_PATH_BYTES {
                return Err(StoreError::Invalid(format!(
                    "the path is {} bytes, over the {MAX_PATH_BYTES}-byte limit",
                    path.len()
                )));
            }
            jqjail_store::PageAt::Path(
                json_page::parse_path(&path)
                    .map_err(|why| StoreError::Invalid(format!("the path `{path}`: {why}")))?,
            )
        }
    };
    if r.pages == Pages::Bytes {
        let c = store.byte_page(&tenant.name, &r.id, at, page_size)?;
        let preface = r.hint.then(|| preface(&c));
        return Ok(hide_page(c, page_size, None, None, preface));
    }
    let shown = shown_bytes(r.max_path_bytes)?;
    let paged = store.json_page(&tenant.name, &r.id, at, page_size)?;
    Ok(json_reply(paged, page_size, r.hint, shown))
}

/// A hide's head and tail: JSON pages 1 and N at half the page size (byte pages for content
/// that is not one JSON value), and what lies between, from pages 2 and N - 1.
fn ends(store: &Store, tenant: &TenantOf, r: HideEndsRequest) -> Result<HideEnds, StoreError> {
    let page_size = r.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(2 * MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(StoreError::Invalid(format!(
            "page_size is {page_size}; head and tail need {} to {MAX_PAGE_SIZE} bytes (each end is half of it, at least {MIN_PAGE_SIZE})",
            2 * MIN_PAGE_SIZE
        )));
    }
    let shown = shown_bytes(r.max_path_bytes)?;
    let half = page_size / 2;
    // One open file and one layout: the pages are of one content, and a hide whose layout is
    // not kept is read once, not four times.
    let pages = store.json_ends(&tenant.name, &r.id, half)?;
    let numbered = |n: u64| pages.iter().find(|p| p.cut.page == n);
    let head = numbered(1)
        .ok_or_else(|| StoreError::Damaged(format!("hide `{}` has no page 1", r.id)))?
        .clone();
    let total = head.cut.total_pages;
    let tail = (total > 1).then(|| numbered(total).cloned()).flatten();
    let (after, before) = match total {
        0..=2 => (None, None),
        _ => (numbered(2).cloned(), numbered(total - 1).cloned()),
    };
    let place = |p: &jqjail_store::Paged| p.json.as_ref().ok().map(|j| json_place(j, shown));
    let end = |p: &jqjail_store::Paged| End {
        offset: p.cut.offset,
        length: p.cut.content.len() as u64,
        json: place(p),
    };
    let left_out = match (&after, &before) {
        (Some(a), Some(b)) => {
            let (first, last) = match (&a.json, &b.json) {
                (Ok(a), Ok(b)) => (Some(a), Some(b)),
                _ => (None, None),
            };
            let offset = a.cut.offset;
            let end = b.cut.offset + b.cut.content.len() as u64;
            Some(LeftOut {
                offset,
                bytes: end.checked_sub(offset).ok_or_else(|| {
                    StoreError::Damaged(format!("hide `{}`: its pages do not follow", r.id))
                })?,
                first: first.map(|j| shown_path(&j.first, shown)),
                last: last.map(|j| shown_path(&j.last, shown)),
                elements: first
                    .zip(last)
                    .and_then(|(a, b)| elements_left_out(a, b, shown)),
            })
        }
        _ => None,
    };
    let mut content = head.cut.content.clone();
    if let Some(tail) = &tail {
        content.extend_from_slice(&tail.cut.content);
    }
    let mut ends = HideEnds {
        hide_id: head.cut.hide_id.clone(),
        size: head.cut.size,
        page_size,
        pages: match head.json {
            Ok(_) => Pages::Json,
            Err(_) => Pages::Bytes,
        },
        head: end(&head),
        tail: tail.as_ref().map(end),
        left_out,
        not_json: head.json.as_ref().err().map(ToString::to_string),
        content: Tail::from(content),
        preface: None,
    };
    if r.hint {
        ends.preface = Some(ends_preface(&ends, page_size));
    }
    Ok(ends)
}

/// The elements of one array that the part between `first`'s start and `last`'s end touches:
/// where both are in the same array, at different indices.
fn elements_left_out(
    first: &json_page::JsonPage,
    last: &json_page::JsonPage,
    shown: usize,
) -> Option<ElementsLeftOut> {
    let (a, b) = (&first.first, &last.last);
    let common = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
    let (Some(json_page::Step::Index(from)), Some(json_page::Step::Index(to))) =
        (a.get(common), b.get(common))
    else {
        return None;
    };
    let array = &a[..common];
    let length = [&first.array, &last.array]
        .into_iter()
        .flatten()
        .find(|(path, _)| path[..] == *array)
        .map(|(_, length)| *length);
    // A path names one array unless a key is given twice (then it may name two): what does
    // not hold of one array is not said.
    if from > to || length.is_some_and(|n| *to >= n) {
        return None;
    }
    Some(ElementsLeftOut {
        array: shown_path(array, shown),
        from: *from,
        to: *to,
        length,
    })
}

/// The reflection hint of a head and tail: what is shown, what is left out, how to read on.
fn ends_preface(e: &HideEnds, page_size: u64) -> String {
    let span = |end: &End| match &end.json {
        Some(p) => format!(" ({} … {})", p.first, p.last),
        None => String::new(),
    };
    let mut out = format!(
        "[HIDE id={} head and tail, bytes={} pages={}] This output is too large to read at once. ",
        e.hide_id,
        e.size,
        match e.pages {
            Pages::Json => "json",
            Pages::Bytes => "bytes",
        }
    );
    match (&e.tail, &e.left_out) {
        (None, _) => {
            let _ = write!(out, "Shown: all {} bytes{}.", e.head.length, span(&e.head));
        }
        (Some(tail), left) => {
            let _ = write!(
                out,
                "Shown: its first {} bytes{} and its last {} bytes{}.",
                e.head.length,
                span(&e.head),
                tail.length,
                span(tail)
            );
            match left {
                None => out.push_str(" Nothing is left out between them."),
                Some(l) => {
                    let _ = write!(out, " Left out between them: {} bytes", l.bytes);
                    if let (Some(first), Some(last)) = (&l.first, &l.last) {
                        let _ = write!(out, ", {first} … {last}");
                    }
                    if let Some(el) = &l.elements {
                        let _ = write!(
                            out,
                            " (elements {} to {} of {}, in whole or in part",
                            el.from, el.to, el.array
                        );
                        if let Some(n) = el.length {
                            let _ = write!(out, "; it has {n} elements");
                        }
                        out.push(')');
                    }
                    out.push('.');
                }
            }
            out.push_str(" The two parts are fragments of the whole, not values.");
        }
    }
    let _ = write!(
        out,
        " Summarise what you need before reading further, and do not infer what the left-out part holds. \
         Read it with hide_next (from page 1, {page_size} bytes a page), hide_jump (a page number, or a path such as the ones above) \
         or hide_search, or narrow the whole output with jq over the hide."
    );
    out
}

/// The most bytes of a path an answer shows, as asked (at most [`MAX_SHOWN_PATH`]).
fn shown_bytes(asked: Option<u32>) -> Result<usize, StoreError> {
    let shown = asked.unwrap_or(MAX_SHOWN_PATH);
    if shown > MAX_SHOWN_PATH {
        return Err(StoreError::Invalid(format!(
            "max_path_bytes is {shown}; it may be at most {MAX_SHOWN_PATH}"
        )));
    }
    Ok(shown as usize)
}

/// `path` as shown in an answer: at most `max` bytes, cut in the middle with `…` (whose
/// bytes are not counted: they are not the content's).
fn shown_path(path: &[json_page::Step], max: usize) -> String {
    let full = json_page::render(path);
    if full.len() <= max {
        return full;
    }
    let mut head = max / 2;
    while !full.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = full.len() - (max - head);
    while !full.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{}", &full[..head], &full[tail..])
}

/// A JSON page (or the byte page of a hide that is not JSON) as its answer.
fn json_reply(paged: jqjail_store::Paged, page_size: u64, hint: bool, shown: usize) -> HidePage {
    let c = paged.cut;
    let (json, not_json) = match paged.json {
        Ok(p) => (Some(json_place(&p, shown)), None),
        Err(why) => (None, Some(why.to_string())),
    };
    let preface = hint.then(|| match &json {
        Some(place) => json_preface(&c, place),
        None => format!(
            "{} (It is not one JSON value, so its pages are byte windows.)",
            preface(&c)
        ),
    });
    hide_page(c, page_size, json, not_json, preface)
}

/// Where a JSON page is, as an answer shows it (paths at most `shown` bytes).
fn json_place(p: &json_page::JsonPage, shown: usize) -> JsonPlace {
    JsonPlace {
        first: shown_path(&p.first, shown),
        last: shown_path(&p.last, shown),
        array: p.array.as_ref().map(|(path, length)| ArrayPlace {
            path: shown_path(path, shown),
            length: *length,
        }),
        depth: p.depth as u64,
        starts_in_string: p.starts_in_string,
        ends_in_string: p.ends_in_string,
    }
}

/// A page as `hide_page` answers it: a JSON page where `json` says where it is, else a byte
/// page (`not_json`: why, when JSON pages were asked for).
fn hide_page(
    c: jqjail_store::Cut,
    page_size: u64,
    json: Option<JsonPlace>,
    not_json: Option<String>,
    preface: Option<String>,
) -> HidePage {
    HidePage {
        hide_id: c.hide_id,
        page: c.page,
        total_pages: c.total_pages,
        page_size,
        offset: c.offset,
        size: c.size,
        pages: if json.is_some() {
            Pages::Json
        } else {
            Pages::Bytes
        },
        json,
        not_json,
        content: Tail::from(c.content),
        preface,
    }
}

/// The reflection hint of a JSON page: where it is, by path, and that it is a fragment.
fn json_preface(c: &jqjail_store::Cut, place: &JsonPlace) -> String {
    let mut out = format!(
        "[HIDE id={} page={}/{} bytes={} pages=json] This output is too large to read at once; this is page {} of {}. \
         It holds {} through {}",
        c.hide_id, c.page, c.total_pages, c.size, c.page, c.total_pages, place.first, place.last
    );
    if let Some(array) = &place.array {
        let _ = write!(
            out,
            ", inside {} (an array of {} elements)",
            array.path, array.length
        );
    }
    out.push('.');
    if let Some(at) = place.starts_in_string {
        let _ = write!(
            out,
            " It begins {at} bytes into the string at {}.",
            place.first
        );
    }
    if let Some(at) = place.ends_in_string {
        let _ = write!(
            out,
            " It stops {at} bytes into the string at {}.",
            place.last
        );
    }
    let split = place.starts_in_string.is_some() || place.ends_in_string.is_some();
    if c.total_pages > 1 && !split {
        out.push_str(
            " It starts and ends between JSON values: a fragment of the whole, not one value.",
        );
    } else if split {
        out.push_str(" It is a fragment of the whole, not one value.");
    }
    out.push_str(
        " Summarise what you need from this page before paging further, and do not infer what unseen pages hold. \
         Read on with hide_next, hide_jump (a page number, or a path such as the ones above) or hide_search, \
         or narrow the whole output with jq over the hide.",
    );
    out
}

/// The reflection hint: tells a model where it is and to summarise before paging.
fn preface(c: &jqjail_store::Cut) -> String {
    format!(
        "[HIDE id={} page={}/{} bytes={}] This output is too large to read at once; this is page {} of {}. \
         Summarise what you need from this page before paging further, and do not infer what unseen pages hold. \
         Read on with hide_next, hide_jump or hide_search, or narrow the whole output with jq over the hide.",
        c.hide_id, c.page, c.total_pages, c.size, c.page, c.total_pages
    )
}

fn clip(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn entry(e: jqjail_store::Entry) -> HideEntry {
    HideEntry {
        id: e.id,
        kind: e.kind,
        source: e.source,
        size: e.size,
        sha256: e.sha256,
        meta: e.meta.into_iter().collect(),
        created_ms: e.created_ms,
    }
}

fn error_reply(e: StoreError) -> ErrorReply {
    let message = e.to_string();
    match e {
        StoreError::NotFound(_) | StoreError::NoValueAt { .. } => {
            ErrorReply::new(ErrorCode::NotFound, message)
        }
        StoreError::PageOutOfRange { page, total, .. } => {
            ErrorReply::new(ErrorCode::PageOutOfRange, message).with_limit(total, page)
        }
        StoreError::QuotaExceeded { quota, used, size } => {
            ErrorReply::new(ErrorCode::QuotaExceeded, message).with_limit(quota, used + size)
        }
        StoreError::TooManyHides { max } => {
            ErrorReply::new(ErrorCode::QuotaExceeded, message).with_limit(max, max + 1)
        }
        StoreError::UploadsOverQuota {
            quota,
            pending,
            size,
        } => ErrorReply::new(ErrorCode::QuotaExceeded, message).with_limit(quota, pending + size),
        StoreError::Invalid(_) => ErrorReply::new(ErrorCode::InvalidRequest, message),
        StoreError::Unsafe { .. }
        | StoreError::InUse { .. }
        | StoreError::Io(_)
        | StoreError::Index(_)
        | StoreError::Damaged(_) => {
            tracing::error!(error = %message, "hide store failure");
            ErrorReply::new(ErrorCode::StoreUnavailable, message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Collapsed;

    fn collapse(output: &str, lines: bool) -> String {
        let c = Collapsed::of(output, lines);
        let mut out = Vec::new();
        c.write_to(|piece| {
            out.extend_from_slice(piece);
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(out.len() as u64, c.len());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_collapse_as_a_collapsed_run_answers() {
        assert_eq!(collapse("", true), "null");
        assert_eq!(collapse("[0,1,2]\n", true), "[0,1,2]");
        assert_eq!(collapse("1\n\"a\\nb\"\n{}\n", true), "[1,\"a\\nb\",{}]");
        assert_eq!(collapse("[1,\n2]", false), "[1,\n2]");
        let long = "7\n".repeat(100_000);
        let c = collapse(&long, true);
        assert_eq!(c.len(), 200_001);
        assert!(c.starts_with("[7,7,") && c.ends_with(",7]"));
    }

    #[test]
    fn a_shown_path_is_cut_in_the_middle_to_its_bound() {
        use jqjail_store::json_page::Step;
        let path: Vec<Step> = (0..100)
            .map(|i| match i % 2 {
                0 => Step::Index(i),
                _ => Step::Key("ключ".repeat(3)),
            })
            .collect();
        for max in [0, 1, 7, 64, 1024] {
            let shown = super::shown_path(&path, max);
            assert!(shown.len() - "…".len() <= max, "{max}: {shown}");
            assert!(shown.contains('…'));
        }
        assert_eq!(super::shown_path(&path[..1], 1024), "$[0]");
    }

    #[test]
    fn the_protocol_and_the_store_bound_meta_pairs_alike() {
        assert_eq!(
            jqjail_protocol::hide::MAX_META_PAIRS,
            jqjail_store::MAX_META_PAIRS
        );
    }
}
