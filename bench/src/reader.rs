//! The model reader (issue 37): what a reader that knows only the pages it is shown can answer
//! about a large result, read in byte pages, in JSON pages, or with head and tail first.
//!
//! No model runs here, so the reader is a program: a JSON walker that reads a page from where
//! the page says it starts (a JSON page names the path of its first value; a byte page names
//! nothing, so only page 1, which starts at the document's start, can be read alone) and
//! reports every value's path. It answers three questions, each asked of every document many
//! times:
//!
//! - **owner**: a search found a value at byte X of the hide; which element of the main array
//!   holds it? (It reads the page holding X, as `hide_search` answers.)
//! - **count**: how many elements has the main array? (It reads the first answer, then the
//!   last page.)
//! - **value**: what is the value at a path, such as `$.items[812].metadata.name`? (It reads
//!   the page holding the path, as `hide_jump` answers; byte pages cannot be found by path.)
//!
//! Each answer is checked against a walk of the whole document. "Wrong" counts the answers
//! the reader gets wrong or cannot give with the first answer and at most one more page (what
//! a model does before it guesses); "pages" is what a reader that must be right reads, from
//! page 1 on when nothing else helps, the first answer counted as one page.
//!
//! The pages are the daemon's own (`hide_page`, JSON and bytes); head and tail is its
//! `hide_ends` answer (JSON page 1 and the last JSON page at half the page size, and the line
//! naming what lies between, whose array length a reader also reads).

use jqjail_client::{Client, HideEnds, HideEndsRequest, HidePage, HidePageRequest, PageAt, Pages};
use std::fmt::Write as _;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Index(u64),
    Key(String),
}

/// What the walker reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A scalar starting at this offset of the text walked, with its JSON text.
    Scalar {
        path: Vec<Step>,
        at: usize,
        text: String,
    },
    /// An array closed; its length, if the walker saw where it was counting from.
    Closed {
        path: Vec<Step>,
        length: Option<u64>,
    },
}

/// An open container: an array with the index of its current element (unknown when the walk
/// began inside it without one), or an object with its current key.
#[derive(Debug, Clone)]
enum Frame {
    Array(Option<u64>),
    Object(Option<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A value comes next.
    Value,
    /// After `[`: a value or `]`.
    ValueOrEnd,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or a closer.
    After,
    /// Inside a string begun before the walk (skip to its end).
    InString,
}

/// A JSON walker that can start anywhere a JSON page may start.
#[derive(Debug, Clone)]
pub(crate) struct Walker {
    stack: Vec<Frame>,
    mode: Mode,
    /// Bytes walked before the current text (offsets are the document's).
    base: usize,
    /// A scalar or key split across texts.
    pending: Vec<u8>,
    pending_at: usize,
}

impl Walker {
    /// At the start of a document.
    pub(crate) fn start(base: usize) -> Walker {
        Walker {
            stack: Vec::new(),
            mode: Mode::Value,
            base,
            pending: Vec::new(),
            pending_at: 0,
        }
    }

    /// At the start of a JSON page whose first significant byte is `first_byte`, belonging to
    /// the value at `first` (`starts_in_string`: the page begins inside that string).
    pub(crate) fn at(
        first: &str,
        first_byte: u8,
        starts_in_string: bool,
        base: usize,
    ) -> Option<Walker> {
        let steps = parse_path(first)?;
        let mut w = Walker::start(base);
        let frames = |steps: &[Step]| -> Vec<Frame> {
            steps
                .iter()
                .map(|s| match s {
                    Step::Index(i) => Frame::Array(Some(*i)),
                    Step::Key(k) => Frame::Object(Some(k.clone())),
                })
                .collect()
        };
        if starts_in_string {
            w.stack = frames(&steps);
            w.mode = Mode::InString;
            return Some(w);
        }
        match first_byte {
            b']' | b'}' => {
                // The page starts by closing the container at `first`.
                w.stack = frames(&steps);
                w.stack.push(match first_byte {
                    b']' => Frame::Array(None),
                    _ => Frame::Object(None),
                });
                w.mode = Mode::After;
            }
            b'"' if matches!(steps.last(), Some(Step::Key(_))) => {
                w.stack = frames(&steps[..steps.len() - 1]);
                w.stack.push(Frame::Object(None));
                w.mode = Mode::Key;
            }
            _ => {
                // The value at `first` comes next, in its parent's current place.
                w.stack = frames(&steps);
                w.mode = Mode::Value;
            }
        }
        Some(w)
    }

    fn path(&self) -> Vec<Step> {
        self.stack
            .iter()
            .map(|f| match f {
                Frame::Array(i) => Step::Index(i.unwrap_or(u64::MAX)),
                Frame::Object(k) => Step::Key(k.clone().unwrap_or_default()),
            })
            .collect()
    }

    /// Walks `text` (the next bytes of the document), reporting to `out`; false when the text
    /// is not JSON from where the walker stands (it stops there).
    pub(crate) fn walk(&mut self, text: &[u8], out: &mut Vec<Event>) -> bool {
        let mut i = 0;
        while i < text.len() {
            if !self.pending.is_empty() {
                // Finish a token split across texts.
                let (done, used) = finish_token(&self.pending, &text[i..]);
                self.pending.extend_from_slice(&text[i..i + used]);
                i += used;
                if !done {
                    continue;
                }
                let token = std::mem::take(&mut self.pending);
                if !self.token(&token, self.pending_at, out) {
                    return false;
                }
                continue;
            }
            let b = text[i];
            if self.mode == Mode::InString {
                match b {
                    b'\\' => i += 2,
                    b'"' => {
                        self.mode = Mode::After;
                        i += 1;
                    }
                    _ => i += 1,
                }
                continue;
            }
            if b.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            let at = self.base + i;
            match (self.mode, b) {
                (Mode::After, b',') => {
                    match self.stack.last_mut() {
                        Some(Frame::Array(idx)) => {
                            *idx = idx.map(|i| i.wrapping_add(1));
                            self.mode = Mode::Value;
                        }
                        Some(Frame::Object(_)) => self.mode = Mode::Key,
                        None => return false,
                    }
                    i += 1;
                }
                (Mode::After | Mode::ValueOrEnd, b']') | (Mode::After | Mode::KeyOrEnd, b'}') => {
                    let empty = self.mode != Mode::After;
                    let path = {
                        let mut p = self.path();
                        p.pop();
                        p
                    };
                    match self.stack.pop() {
                        Some(Frame::Array(idx)) if b == b']' => {
                            let length = match (empty, idx) {
                                (true, _) => Some(0),
                                (false, Some(i)) => Some(i.wrapping_add(1)),
                                (false, None) => None,
                            };
                            out.push(Event::Closed { path, length });
                        }
                        Some(Frame::Object(_)) if b == b'}' => {}
                        _ => return false,
                    }
                    self.mode = Mode::After;
                    i += 1;
                }
                (Mode::Colon, b':') => {
                    self.mode = Mode::Value;
                    i += 1;
                }
                (Mode::Value | Mode::ValueOrEnd, b'[') => {
                    self.stack.push(Frame::Array(Some(0)));
                    self.mode = Mode::ValueOrEnd;
                    i += 1;
                }
                (Mode::Value | Mode::ValueOrEnd, b'{') => {
                    self.stack.push(Frame::Object(None));
                    self.mode = Mode::KeyOrEnd;
                    i += 1;
                }
                (Mode::Value | Mode::ValueOrEnd | Mode::Key | Mode::KeyOrEnd, _) => {
                    // A scalar or a key: read it whole (it may go on in the next text).
                    let (done, used) = finish_token(&[], &text[i..]);
                    if !done {
                        self.pending = text[i..].to_vec();
                        self.pending_at = at;
                        self.base += text.len();
                        return true;
                    }
                    let token = text[i..i + used].to_vec();
                    i += used;
                    if !self.token(&token, at, out) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        self.base += text.len();
        true
    }

    fn token(&mut self, token: &[u8], at: usize, out: &mut Vec<Event>) -> bool {
        match self.mode {
            Mode::Key | Mode::KeyOrEnd => {
                let Ok(key) = serde_json::from_slice::<String>(token) else {
                    return false;
                };
                match self.stack.last_mut() {
                    Some(Frame::Object(k)) => *k = Some(key),
                    _ => return false,
                }
                self.mode = Mode::Colon;
            }
            Mode::Value | Mode::ValueOrEnd => {
                out.push(Event::Scalar {
                    path: self.path(),
                    at,
                    text: String::from_utf8_lossy(token).into_owned(),
                });
                self.mode = Mode::After;
            }
            _ => return false,
        }
        true
    }
}

/// Whether the token begun by `begun` ends in `more`, and how many bytes of `more` it takes.
fn finish_token(begun: &[u8], more: &[u8]) -> (bool, usize) {
    let first = begun.first().or(more.first()).copied();
    if first == Some(b'"') {
        // A string: to the unescaped closing quote.
        let mut escaped = false;
        let mut quotes = usize::from(!begun.is_empty());
        if !begun.is_empty() {
            escaped = begun.iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1;
        }
        for (n, &b) in more.iter().enumerate() {
            if escaped {
                escaped = false;
                continue;
            }
            match b {
                b'\\' => escaped = true,
                b'"' => {
                    quotes += 1;
                    if quotes == 2 {
                        return (true, n + 1);
                    }
                }
                _ => {}
            }
        }
        (false, more.len())
    } else {
        // A number or a literal: to the next delimiter.
        match more
            .iter()
            .position(|b| b.is_ascii_whitespace() || b",]}:".contains(b))
        {
            Some(n) => (true, n),
            None => (false, more.len()),
        }
    }
}

/// A path as the daemon writes it: `$`, then `.key`, `."odd key"`, `["key"]` or `[n]`.
pub(crate) fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[\"").or(rest.strip_prefix(".\"")) {
            let quoted = &rest[rest.len() - r.len() - 1..];
            let mut de = serde_json::Deserializer::from_str(quoted).into_iter::<String>();
            let key = de.next()?.ok()?;
            let used = de.byte_offset();
            steps.push(Step::Key(key));
            rest = &quoted[used..];
            rest = rest.strip_prefix(']').unwrap_or(rest);
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            steps.push(Step::Index(r[..end].parse().ok()?));
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            steps.push(Step::Key(r[..end].to_string()));
            rest = &r[end..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// A path written as the daemon writes it (keys that are identifiers as `.key`).
pub(crate) fn write_path(steps: &[Step]) -> String {
    let mut out = String::from("$");
    for s in steps {
        match s {
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
            Step::Key(k)
                if !k.is_empty()
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !k.starts_with(|c: char| c.is_ascii_digit()) =>
            {
                let _ = write!(out, ".{k}");
            }
            Step::Key(k) => {
                let _ = write!(out, "[{}]", serde_json::to_string(k).unwrap_or_default());
            }
        }
    }
    out
}

/// A document the reader is asked about.
pub(crate) struct Document {
    pub(crate) name: &'static str,
    pub(crate) text: Vec<u8>,
    /// The main array's path.
    pub(crate) main: Vec<Step>,
    /// Below an element of the main array: the path of the value asked for.
    pub(crate) asked: Vec<Step>,
    pub(crate) page_size: u64,
}

/// How the reader is shown the hide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    Bytes,
    Json,
    HeadTail,
}

impl Shown {
    pub(crate) const ALL: [Shown; 3] = [Shown::Bytes, Shown::Json, Shown::HeadTail];
    fn name(self) -> &'static str {
        match self {
            Shown::Bytes => "byte pages",
            Shown::Json => "JSON pages",
            Shown::HeadTail => "head and tail (hide_ends), then JSON pages",
        }
    }
}

/// Answers counted for one question: wrong (of asked) within the first answer and one page,
/// and the pages a reader that must be right reads, summed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) asked: u64,
    pub(crate) wrong: u64,
    pub(crate) pages: u64,
}

impl Tally {
    fn add(&mut self, right_within_budget: bool, pages: u64) {
        self.asked += 1;
        self.wrong += u64::from(!right_within_budget);
        self.pages += pages;
    }
    fn cell(&self) -> String {
        format!(
            "{}/{} · {:.1}",
            self.wrong,
            self.asked,
            self.pages as f64 / self.asked.max(1) as f64
        )
    }
}

/// One row of the table.
pub(crate) struct Row {
    pub(crate) document: &'static str,
    pub(crate) size: usize,
    pub(crate) pages: u64,
    pub(crate) shown: Shown,
    pub(crate) owner: Tally,
    pub(crate) count: Tally,
    pub(crate) value: Tally,
}

impl Row {
    /// The row for the results file.
    pub(crate) fn json(&self) -> serde_json::Value {
        let tally =
            |t: &Tally| serde_json::json!({"asked": t.asked, "wrong": t.wrong, "pages": t.pages});
        serde_json::json!({
            "document": self.document, "bytes": self.size, "json_pages": self.pages,
            "shown": self.shown.name(),
            "owner": tally(&self.owner), "length": tally(&self.count), "value": tally(&self.value),
        })
    }
}

/// The hide's pages as the daemon cuts them.
struct Pages_ {
    pages: Vec<HidePage>,
}

impl Pages_ {
    fn fetch(client: &mut Client, id: &str, pages: Pages, size: u64) -> Result<Pages_, String> {
        let get = |client: &mut Client, n: u64| {
            client
                .hide_page(HidePageRequest {
                    id: id.into(),
                    at: PageAt::Page(n),
                    page_size: Some(size),
                    hint: false,
                    pages,
                    max_path_bytes: None,
                })
                .map_err(|e| format!("hide_page {n}: {e}"))
        };
        let first = get(client, 1)?;
        let mut all = vec![first];
        for n in 2..=all[0].total_pages {
            all.push(get(client, n)?);
        }
        Ok(Pages_ { pages: all })
    }

    /// The page holding byte `at`.
    fn holding(&self, at: usize) -> usize {
        self.pages
            .partition_point(|p| p.offset as usize + p.content.as_bytes().len() <= at)
            .min(self.pages.len() - 1)
    }

    /// What a reader knows from page `n` (0-based) alone, with the state the page names.
    fn read(&self, n: usize) -> Vec<Event> {
        let page = &self.pages[n];
        let bytes = page.content.as_bytes();
        let mut out = Vec::new();
        let walker = match (&page.json, n) {
            (_, 0) if page.offset == 0 => Some(Walker::start(0)),
            (Some(place), _) => {
                let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
                Walker::at(
                    &place.first,
                    first.unwrap_or(b' '),
                    place.starts_in_string.is_some(),
                    page.offset as usize,
                )
            }
            (None, _) => None,
        };
        if let Some(mut w) = walker {
            w.walk(bytes, &mut out);
        }
        out
    }

    /// The main array's length as page `n`'s header names it.
    fn header_length(&self, n: usize, main: &str) -> Option<u64> {
        let array = self.pages[n].json.as_ref()?.array.as_ref()?;
        (array.path == main).then_some(array.length)
    }

    /// The page a path's value is on (as `hide_jump` answers), for JSON pages.
    fn jump(&self, client: &mut Client, id: &str, path: &str, size: u64) -> Option<usize> {
        let page = client
            .hide_page(HidePageRequest {
                id: id.into(),
                at: PageAt::Path(path.into()),
                page_size: Some(size),
                hint: false,
                pages: Pages::Json,
                max_path_bytes: None,
            })
            .ok()?;
        Some(page.page as usize - 1)
    }
}

/// What a reader knows from a head and tail: the head walked from the document's start, the
/// tail from the path its first value has.
fn read_ends(ends: &HideEnds) -> Vec<Event> {
    let bytes = ends.content.as_bytes();
    let head = (ends.head.length as usize).min(bytes.len());
    let mut out = Vec::new();
    Walker::start(0).walk(&bytes[..head], &mut out);
    if let Some(tail) = &ends.tail {
        let rest = &bytes[head..];
        let first = rest.iter().find(|b| !b.is_ascii_whitespace()).copied();
        let walker = tail.json.as_ref().and_then(|place| {
            Walker::at(
                &place.first,
                first.unwrap_or(b' '),
                place.starts_in_string.is_some(),
                tail.offset as usize,
            )
        });
        if let Some(mut w) = walker {
            w.walk(rest, &mut out);
        }
    }
    out
}

/// The truth: every scalar and every array's length, from a walk of the whole document.
struct Truth {
    scalars: Vec<(Vec<Step>, usize, String)>,
    length: u64,
}

fn truth(doc: &Document) -> Result<Truth, String> {
    let mut out = Vec::new();
    let mut w = Walker::start(0);
    if !w.walk(&doc.text, &mut out) {
        return Err(format!(
            "{}: the walker did not read the document",
            doc.name
        ));
    }
    let mut scalars = Vec::new();
    let mut length = None;
    for e in out {
        match e {
            Event::Scalar { path, at, text } => scalars.push((path, at, text)),
            Event::Closed { path, length: l } if path == doc.main => length = l,
            Event::Closed { .. } => {}
        }
    }
    Ok(Truth {
        scalars,
        length: length.ok_or("the main array never closed")?,
    })
}

/// Asks every question of `doc` in every way of showing it.
pub(crate) fn measure(
    client: &mut Client,
    doc: &Document,
    questions: usize,
) -> Result<Vec<Row>, String> {
    let truth = truth(doc)?;
    let id = client
        .hide_put("bench", doc.name, &doc.text, &Default::default())
        .map_err(|e| format!("hide put: {e}"))?
        .entry
        .id;
    let bytes = Pages_::fetch(client, &id, Pages::Bytes, doc.page_size)?;
    let json = Pages_::fetch(client, &id, Pages::Json, doc.page_size)?;
    let ends = client
        .hide_ends(HideEndsRequest {
            id: id.clone(),
            page_size: Some(doc.page_size),
            hint: false,
            max_path_bytes: None,
        })
        .map_err(|e| format!("hide_ends: {e}"))?;
    let main = write_path(&doc.main);
    let depth = doc.main.len();
    // Values inside elements of the main array, and those at the asked path.
    let inside: Vec<&(Vec<Step>, usize, String)> = truth
        .scalars
        .iter()
        .filter(|(p, _, _)| p.len() >= depth + 2 && p[..depth] == doc.main[..])
        .collect();
    let asked: Vec<&(Vec<Step>, usize, String)> = truth
        .scalars
        .iter()
        .filter(|(p, _, _)| {
            p.len() == depth + 1 + doc.asked.len()
                && p[..depth] == doc.main[..]
                && p[depth + 1..] == doc.asked[..]
        })
        .collect();
    if inside.is_empty() || asked.is_empty() {
        return Err(format!("{}: nothing to ask", doc.name));
    }
    let pick = |all: &[&(Vec<Step>, usize, String)], q: usize| -> (Vec<Step>, usize, String) {
        // Spread over the document, never the same one twice in a row.
        let i = (q * all.len() / questions + q * 7) % all.len();
        all[i].clone()
    };
    let mut rows = Vec::new();
    for shown in Shown::ALL {
        let mut row = Row {
            document: doc.name,
            size: doc.text.len(),
            pages: json.pages.len() as u64,
            shown,
            owner: Tally::default(),
            count: Tally::default(),
            value: Tally::default(),
        };
        // The first answer: page 1, or head and tail.
        let first: Vec<Event> = match shown {
            Shown::Bytes => bytes.read(0),
            Shown::Json => json.read(0),
            Shown::HeadTail => read_ends(&ends),
        };
        let find_owner = |events: &[Event], at: usize| {
            events.iter().find_map(|e| match e {
                Event::Scalar { path, at: a, .. } if *a == at && path.len() > depth => {
                    Some(path[depth].clone())
                }
                _ => None,
            })
        };
        let find_value = |events: &[Event], want: &[Step]| {
            events.iter().find_map(|e| match e {
                Event::Scalar { path, text, .. } if path == want => Some(text.clone()),
                _ => None,
            })
        };
        let closes = |events: &[Event]| {
            events.iter().find_map(|e| match e {
                Event::Closed { path, length } if *path == doc.main => *length,
                _ => None,
            })
        };
        for q in 0..questions {
            // owner: the page holding the match, read alone; else from page 1 on.
            let (path, at, _) = pick(&inside, q);
            let right = path[depth].clone();
            let answer = match shown {
                Shown::Bytes => find_owner(&bytes.read(bytes.holding(at)), at),
                Shown::Json | Shown::HeadTail => find_owner(&json.read(json.holding(at)), at),
            };
            let ok = answer.as_ref() == Some(&right);
            let pages = match (shown, ok) {
                (_, true) => 2,
                // From page 1 to the page holding it, carrying the walk.
                (_, false) => bytes.holding(at) as u64 + 1,
            };
            row.owner.add(ok, pages);

            // value: the page holding the asked path.
            let (path, _, text) = pick(&asked, q);
            let written = write_path(&path);
            let answer = match shown {
                Shown::Bytes => find_value(&first, &path),
                Shown::Json | Shown::HeadTail => find_value(&first, &path).or_else(|| {
                    json.jump(client, &id, &written, doc.page_size)
                        .and_then(|n| find_value(&json.read(n), &path))
                }),
            };
            let ok = answer.as_ref() == Some(&text);
            let pages = match (shown, ok, find_value(&first, &path).is_some()) {
                (_, true, true) => 1,
                (_, true, false) => 2,
                (_, false, _) => {
                    let at = truth
                        .scalars
                        .iter()
                        .find(|(p, _, _)| *p == path)
                        .map_or(0, |s| s.1);
                    bytes.holding(at) as u64 + 1
                }
            };
            row.value.add(ok, pages);
        }
        // count: once per way of showing (the answer does not change with the question).
        let from_first = match shown {
            Shown::Bytes => closes(&first),
            Shown::Json => json.header_length(0, &main).or(closes(&first)),
            Shown::HeadTail => ends
                .left_out
                .as_ref()
                .and_then(|l| l.elements.as_ref())
                .filter(|el| el.array == main)
                .and_then(|el| el.length)
                .or(closes(&first)),
        };
        let last = match shown {
            Shown::Bytes => closes(&bytes.read(bytes.pages.len() - 1)),
            Shown::Json | Shown::HeadTail => json
                .header_length(json.pages.len() - 1, &main)
                .or(closes(&json.read(json.pages.len() - 1))),
        };
        let (ok, pages) = match (from_first, last) {
            (Some(n), _) => (n == truth.length, 1),
            (None, Some(n)) => (n == truth.length, 2),
            // From page 1 to where the array closes.
            (None, None) => {
                let end = truth
                    .scalars
                    .iter()
                    .rev()
                    .find(|(p, _, _)| p.len() > depth && p[..depth] == doc.main[..])
                    .map_or(0, |s| s.1);
                (false, bytes.holding(end) as u64 + 1)
            }
        };
        for _ in 0..questions {
            row.count.add(ok, pages);
        }
        rows.push(row);
    }
    let _ = client.hide_delete(&id);
    Ok(rows)
}

/// The table.
pub(crate) fn render(rows: &[Row]) -> String {
    let mut r = String::from(
        "### What a reader knows from the pages it is shown (`jqjail-bench --reader`)\n\n\
         Each cell: wrong or unanswerable within the first answer and one more page / asked · pages a reader that must be right reads (mean).\n\n\
         | document | bytes | JSON pages | shown as | owner of a match | length of the main array | value at a path |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.document,
            row.size,
            row.pages,
            row.shown.name(),
            row.owner.cell(),
            row.count.cell(),
            row.value.cell()
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> Vec<Event> {
        let mut out = Vec::new();
        assert!(Walker::start(0).walk(text.as_bytes(), &mut out));
        out
    }

    #[test]
    fn the_walker_names_every_value_as_jq_paths_does() {
        let text = r#"{"a": [1, {"b c": "x\"]"}, []], "d": {"e": null}}"#;
        let got: Vec<(String, String)> = events(text)
            .into_iter()
            .filter_map(|e| match e {
                Event::Scalar { path, text, .. } => Some((write_path(&path), text)),
                _ => None,
            })
            .collect();
        assert_eq!(
            got,
            [
                ("$.a[0]".to_string(), "1".to_string()),
                ("$.a[1][\"b c\"]".into(), r#""x\"]""#.into()),
                ("$.d.e".into(), "null".into())
            ]
        );
        let closed: Vec<(String, Option<u64>)> = events(text)
            .into_iter()
            .filter_map(|e| match e {
                Event::Closed { path, length } => Some((write_path(&path), length)),
                _ => None,
            })
            .collect();
        assert_eq!(
            closed,
            [("$.a[2]".to_string(), Some(0)), ("$.a".into(), Some(3))]
        );
    }

    #[test]
    fn a_walk_split_anywhere_reads_the_same() {
        let text = br#"[{"id": 12345, "s": "a\\b\"c"}, true, [1.5e3]]"#;
        let whole = events(std::str::from_utf8(text).unwrap());
        for cut in 0..text.len() {
            let mut out = Vec::new();
            let mut w = Walker::start(0);
            assert!(
                w.walk(&text[..cut], &mut out) && w.walk(&text[cut..], &mut out),
                "{cut}"
            );
            assert_eq!(out, whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_walk_begun_at_a_named_path_names_the_rest() {
        let text = r#"[{"a": 1, "b": [5, 6]}, {"a": 2}]"#;
        // A page starting at `"b"` of element 0, at `6`, and at the `]` closing element 0's b.
        for (first, from) in [
            ("$[0].b", r#""b": [5, 6]}, {"a": 2}]"#),
            ("$[0].b[1]", r#"6]}, {"a": 2}]"#),
            ("$[0].b", r#"]}, {"a": 2}]"#),
        ] {
            let base = text.len() - from.len();
            let mut w = Walker::at(first, from.as_bytes()[0], false, base).unwrap();
            let mut out = Vec::new();
            assert!(w.walk(from.as_bytes(), &mut out), "{first}");
            let truth: Vec<Event> = events(text)
                .into_iter()
                .filter(|e| match e {
                    Event::Scalar { at, .. } => *at >= base,
                    Event::Closed { .. } => true,
                })
                .collect();
            let scalars = |v: &[Event]| {
                v.iter()
                    .filter(|e| matches!(e, Event::Scalar { .. }))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert_eq!(scalars(&out), scalars(&truth), "{first}");
            assert!(
                out.contains(&Event::Closed {
                    path: vec![],
                    length: Some(2)
                }),
                "{first}: {out:?}"
            );
        }
    }

    #[test]
    fn paths_read_back() {
        for p in ["$", "$[3].labels[0].name", "$[\"a b\"].c", "$.x[\"\\\"]\"]"] {
            let steps = parse_path(p).unwrap();
            assert_eq!(parse_path(&write_path(&steps)).unwrap(), steps, "{p}");
        }
    }
}
