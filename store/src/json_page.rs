//! JSON pages (issue 37): a layout of one JSON document in pages that end between values, each
//! named by the paths where it starts and ends, so a model reading page 7 knows which element
//! of which array it holds.
//!
//! The rule, for any JSON document and any page size of at least [`MIN_PAGE_SIZE`]:
//! - the pages, concatenated, are the document, byte for byte;
//! - a page ends where a member or element begins, or at a closing bracket: the latest such
//!   place within the page size, at whatever depth it is, so a value larger than a page is
//!   split among its own children;
//! - only where no such place is within reach (a string, a key or a number longer than a page)
//!   is a token split: a string at a character, never inside an escape, and the page says at
//!   which offset of the string it starts or ends;
//! - the paths are jq's (`paths`): keys and indices from the document's root.
//!
//! Content that is not one JSON value (not UTF-8, not JSON, several values, nested deeper than
//! [`MAX_DEPTH`]) has no JSON layout: [`JsonIndex::new`] says why, and the caller pages bytes.
//!
//! The scanner holds one frame per open container and nothing per value. Laying out reads
//! each byte a fixed number of times, at most six: the UTF-8 check; the whole document's
//! check; the search for a page's end, which reads up to a page and so may read a byte again
//! for the next page (copying only the frames a page can close); the step to the page's end;
//! and a last pass for the lengths of the arrays the pages are in. What is kept is a
//! [`JsonIndex`]; describing one page reads from its mark to its end.

use std::fmt::Write as _;
use std::ops::Range;

use crate::page::MIN_PAGE_SIZE;

/// The deepest nesting laid out; deeper content is paged as bytes.
pub const MAX_DEPTH: usize = 10_000;

/// Keys longer than this are shown cut, with `…`, in rendered paths.
const MAX_SHOWN_KEY: usize = 256;

/// Of a longer key, the raw bytes decoded for a path: enough for more than [`MAX_SHOWN_KEY`]
/// bytes decoded however it is escaped (`\u0061` is six bytes for one), so a key cut here is
/// always shown cut, with `…`.
const KEPT_KEY: usize = 6 * (MAX_SHOWN_KEY + 1) + 8;

/// One step of a path: an object's key or an array's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A member of an object, by its key (decoded).
    Key(String),
    /// An element of an array.
    Index(u64),
}

/// A path from the document's root, as jq's `path(…)` gives it.
pub type Path = Vec<Step>;

/// Renders `path` for a reader: `$`, then `.key` (or `["key"]` where the key is not a plain
/// name) and `[i]`.
pub fn render(path: &[Step]) -> String {
    let mut out = String::from("$");
    for step in path {
        match step {
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
            Step::Key(key) => {
                let plain = !key.is_empty()
                    && key.len() <= MAX_SHOWN_KEY
                    && !key.starts_with(|c: char| c.is_ascii_digit())
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    let _ = write!(out, ".{key}");
                } else {
                    let shown: String = match key.len() > MAX_SHOWN_KEY {
                        true => {
                            let mut cut = MAX_SHOWN_KEY;
                            while !key.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            format!("{}…", &key[..cut])
                        }
                        false => key.clone(),
                    };
                    let _ = write!(out, "[{}]", serde_json::Value::String(shown));
                }
            }
        }
    }
    out
}

/// The path as jq writes it: a JSON array of keys and indices.
pub fn jq_path(path: &[Step]) -> serde_json::Value {
    serde_json::Value::Array(
        path.iter()
            .map(|step| match step {
                Step::Key(k) => serde_json::Value::String(k.clone()),
                Step::Index(i) => serde_json::Value::from(*i),
            })
            .collect(),
    )
}

/// One page of a JSON layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPage {
    /// Its bytes in the document.
    pub range: Range<u64>,
    /// The innermost value its first byte belongs to.
    pub first: Path,
    /// The innermost value its last byte belongs to.
    pub last: Path,
    /// Where the page starts inside a string (a string longer than a page): the byte offset
    /// in the string's JSON text, after its opening quote.
    pub starts_in_string: Option<u64>,
    /// Where the page ends inside a string: the offset, as for `starts_in_string`.
    pub ends_in_string: Option<u64>,
    /// The innermost array around the page's first byte, and how many elements it has.
    pub array: Option<(Path, u64)>,
    /// How deep the page's first byte is: the containers open around it.
    pub depth: usize,
}

/// Why content has no JSON layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not one JSON value at byte {at}: {why}")]
pub struct NotJson {
    /// Where the scanner stopped.
    pub at: u64,
    /// What it found there.
    pub why: &'static str,
}

/// The pages of one JSON document at one page size, each described in full: what
/// [`JsonIndex`] serves, for every page at once (for tests and small documents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLayout {
    pages: Vec<JsonPage>,
}

impl JsonLayout {
    /// Lays out `doc` in pages of at most `page_size` bytes (at least [`MIN_PAGE_SIZE`]).
    pub fn new(doc: &[u8], page_size: u64) -> Result<JsonLayout, NotJson> {
        Self::with_marks(doc, page_size, 0)
    }

    /// As [`JsonLayout::new`], each page served by a [`JsonIndex`] with marks `mark_every`
    /// bytes apart (so a test can check that where the marks are does not change a page).
    pub fn with_marks(doc: &[u8], page_size: u64, mark_every: u64) -> Result<JsonLayout, NotJson> {
        let index = JsonIndex::with_marks(doc, page_size, mark_every)?;
        let pages = (1..=index.total_pages())
            .map(|page| {
                let window = index.window(page).expect("a page of the index");
                let bytes = &doc[window.start as usize..window.end as usize];
                index.page(page, bytes).expect("the index's own document")
            })
            .collect();
        Ok(JsonLayout { pages })
    }

    /// The number of pages (at least 1).
    pub fn total_pages(&self) -> u64 {
        self.pages.len() as u64
    }

    /// 1-based `page`, or `None` when it is out of range.
    pub fn page(&self, page: u64) -> Option<&JsonPage> {
        self.pages.get(usize::try_from(page.checked_sub(1)?).ok()?)
    }

    /// Every page, in order.
    pub fn pages(&self) -> &[JsonPage] {
        &self.pages
    }
}

/// Marks are at least this far apart in a [`JsonIndex::new`]: a page is described after
/// reading at most this much of the document before it (about 0.1 ms).
pub const MARK_EVERY: u64 = 64 * 1024;

/// Bytes of page `n`'s window read past its end, for a key that begins on the page.
const KEY_AHEAD: u64 = 4096 + 4;

/// Where the pages of one JSON document start at one page size, compactly: about 16 bytes a
/// page and a mark (the reader's state at a page's start) every [`MARK_EVERY`] bytes or more,
/// so a page is described by reading from its mark to its end ([`JsonIndex::window`]) rather
/// than the whole document.
///
/// A mark costs its nesting (a frame and at most about 1.5 KiB of key for each level); a
/// mark is only taken where the document since the last one is at least four times its cost,
/// so the marks of any document take at most a quarter of its size, however deep it nests
/// (the reader keeps the cost as it reads, so deciding where marks go costs nothing per page).
#[derive(Debug, Clone)]
pub struct JsonIndex {
    len: u64,
    starts: Vec<u64>,
    /// The length of the innermost array around each page's first byte ([`NO_ARRAY`]: none).
    arrays: Vec<u64>,
    /// The reader at the start of some pages, by page index, ascending; page 1's is first.
    marks: Vec<(usize, Scanner)>,
    /// Bytes the marks hold.
    mark_bytes: usize,
}

const NO_ARRAY: u64 = u64::MAX;

/// A frame's own bytes, in a mark.
const FRAME_BYTES: usize = std::mem::size_of::<Frame>();

impl JsonIndex {
    /// Lays out `doc` in pages of at most `page_size` bytes (at least [`MIN_PAGE_SIZE`]),
    /// with marks [`MARK_EVERY`] bytes apart or more.
    pub fn new(doc: &[u8], page_size: u64) -> Result<JsonIndex, NotJson> {
        Self::with_marks(doc, page_size, MARK_EVERY)
    }

    /// As [`JsonIndex::new`], with marks at least `mark_every` bytes apart.
    pub fn with_marks(doc: &[u8], page_size: u64, mark_every: u64) -> Result<JsonIndex, NotJson> {
        let page_size = usize::try_from(page_size.max(MIN_PAGE_SIZE)).unwrap_or(usize::MAX);
        // The whole document is checked first: a layout is never half made. JSON is UTF-8: a
        // string of stray continuation bytes would otherwise be split a byte a page.
        if let Err(e) = std::str::from_utf8(doc) {
            return Err(NotJson {
                at: e.valid_up_to() as u64,
                why: "not UTF-8",
            });
        }
        let mut check = Scanner::default();
        check.run(doc, 0, doc.len(), true)?;
        check.finish(doc.len())?;

        let mut starts = Vec::new();
        // The offset of each page's innermost array's `[`, for its length below.
        let mut arrays = Vec::new();
        let mut marks = vec![(0, Scanner::default())];
        let (mut mark_bytes, mut last_mark) = (0, 0usize);
        let mut at_start = Scanner::default();
        let mut start = 0usize;
        loop {
            if start > 0
                && (start - last_mark) as u64 >= mark_every
                && at_start.string_open.is_none()
                && at_start.literal.is_none()
                && start - last_mark >= 4 * at_start.mark_bytes()
            {
                let mark = at_start.kept(doc);
                mark_bytes += mark.mark_bytes();
                marks.push((starts.len(), mark));
                last_mark = start;
            }
            let nominal = start.saturating_add(page_size);
            let end = if nominal >= doc.len() {
                doc.len()
            } else {
                // The latest place in (start, nominal] where a page may end; else the latest
                // between two tokens (a member's key and its value, say); else a token is
                // longer than what is left of the page, and is split.
                // Only the frames the search can close (a byte each) are copied, not the
                // whole nesting: so a deep document costs a page, not its depth, per page.
                let mut scan = at_start.probe(page_size + 2);
                let (mut best, mut between) = (None, None);
                let mut at = start;
                loop {
                    // Inside a string no place is one: skip to its next quote or backslash.
                    let skipped = scan.skip(doc, at, nominal, false)?;
                    if skipped > at {
                        at = skipped;
                        continue;
                    }
                    let b = doc[at];
                    if at > start && scan.may_end_before(b) {
                        best = Some(at);
                    }
                    if at > start && scan.between_tokens(b) {
                        between = Some(at);
                    }
                    if at == nominal {
                        break;
                    }
                    scan.step(b, at)?;
                    at += 1;
                }
                match best.or(between) {
                    Some(at) => at,
                    None => split_token(doc, start, nominal, &scan),
                }
            };
            starts.push(start as u64);
            arrays.push(at_start.innermost_open_array());
            if end >= doc.len() {
                break;
            }
            at_start.run(doc, start, end, false)?;
            start = end;
        }
        let lengths = array_lengths(doc, arrays.iter().flatten().copied().collect())?;
        let mut arrays: Vec<u64> = arrays
            .into_iter()
            .map(|open| {
                open.and_then(|open| lengths.get(&open).copied())
                    .unwrap_or(NO_ARRAY)
            })
            .collect();
        // Kept in a cache: no room to grow (collecting in place keeps the source's room).
        starts.shrink_to_fit();
        arrays.shrink_to_fit();
        marks.shrink_to_fit();
        Ok(JsonIndex {
            len: doc.len() as u64,
            starts,
            arrays,
            marks,
            mark_bytes,
        })
    }

    /// The number of pages (at least 1).
    pub fn total_pages(&self) -> u64 {
        self.starts.len() as u64
    }

    /// The bytes of 1-based `page`, or `None` when it is out of range.
    pub fn range(&self, page: u64) -> Option<Range<u64>> {
        let i = usize::try_from(page.checked_sub(1)?).ok()?;
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.len);
        Some(start..end)
    }

    /// The 1-based page that holds byte `offset`.
    pub fn page_of(&self, offset: u64) -> u64 {
        self.starts.partition_point(|&s| s <= offset).max(1) as u64
    }

    /// The bytes of the document that [`JsonIndex::page`] needs for `page`: from the page's
    /// mark to a little past its end.
    pub fn window(&self, page: u64) -> Option<Range<u64>> {
        let range = self.range(page)?;
        let (mark, _) = self.mark_for(page)?;
        Some(self.starts[mark]..range.end.saturating_add(KEY_AHEAD).min(self.len))
    }

    /// 1-based `page` described, read from `window`: the document's bytes in
    /// [`JsonIndex::window`]`(page)`. `None` when the page is out of range or the window is
    /// not the document's.
    pub fn page(&self, page: u64, window: &[u8]) -> Option<JsonPage> {
        let range = self.range(page)?;
        let (mark, at_mark) = self.mark_for(page)?;
        let base = self.starts[mark];
        let start = usize::try_from(range.start - base).ok()?;
        let end = usize::try_from(range.end - base).ok()?;
        if window.len() < end {
            return None;
        }
        let mut at_start = at_mark.clone();
        at_start.run(window, 0, start, false).ok()?;
        let mut at_end = at_start.clone();
        at_end.run(window, start, end, false).ok()?;
        let length = self.arrays[usize::try_from(page - 1).ok()?];
        Some(JsonPage {
            first: at_start.path_from(window, start, end),
            last: at_end.path_before(window),
            starts_in_string: at_start.string_offset(start),
            ends_in_string: at_end.string_offset(end),
            array: at_start
                .innermost_array(window)
                .filter(|_| length != NO_ARRAY)
                .map(|(path, _)| (path, length)),
            depth: at_start.stack.len(),
            range,
        })
    }

    /// The heap this index holds, for a cache's budget.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * 8
            + self.arrays.capacity() * 8
            + self.marks.capacity() * std::mem::size_of::<(usize, Scanner)>()
            + self.mark_bytes
    }

    /// The last mark at or before `page`'s start: its page index and its reader.
    fn mark_for(&self, page: u64) -> Option<(usize, &Scanner)> {
        let i = usize::try_from(page.checked_sub(1)?).ok()?;
        let at = self.marks.partition_point(|(p, _)| *p <= i);
        let (p, scan) = self.marks.get(at.checked_sub(1)?)?;
        Some((*p, scan))
    }
}

/// Where to split a token longer than a page that starts at `start`, given the scanner's
/// state at `nominal`: never inside an escape (`\x`, `\uXXXX`), never inside a UTF-8
/// character.
fn split_token(doc: &[u8], start: usize, nominal: usize, scan: &Scanner) -> usize {
    // Bytes of the escape already read at `nominal`, backslash included.
    let inside_escape = match scan.escape {
        5 => 1,
        4 => 2,
        3 => 3,
        2 => 4,
        1 => 5,
        _ => 0,
    };
    let mut end = nominal - inside_escape;
    // A character is at most four bytes: at most three to step back (the document is UTF-8).
    let floor = end.saturating_sub(3).max(start + 1);
    while end > floor && doc[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    end.max(start + 1)
}

/// The lengths of the arrays that open at `wanted` offsets.
fn array_lengths(
    doc: &[u8],
    wanted: std::collections::HashSet<usize>,
) -> Result<std::collections::HashMap<usize, u64>, NotJson> {
    let mut lengths = std::collections::HashMap::new();
    if wanted.is_empty() {
        return Ok(lengths);
    }
    let mut scan = Scanner::default();
    let mut at = 0;
    while at < doc.len() {
        let skipped = scan.skip(doc, at, doc.len(), false)?;
        if skipped > at {
            at = skipped;
            continue;
        }
        scan.step(doc[at], at)?;
        at += 1;
        if let Some((open, count)) = scan.closed.take()
            && wanted.contains(&open)
        {
            lengths.insert(open, count);
        }
    }
    if let Some((open, count)) = scan.closed.take()
        && wanted.contains(&open)
    {
        lengths.insert(open, count);
    }
    Ok(lengths)
}

/// One open container.
#[derive(Debug, Clone)]
struct Frame {
    object: bool,
    /// The offset of its `[` or `{`.
    open: usize,
    /// Members or elements begun so far.
    count: u64,
    /// The current member's key.
    key: Option<KeyAt>,
}

/// Where a member's key is: in the document, or kept (raw, at most [`KEPT_KEY`] bytes) by a
/// mark for pages read from a window that does not reach back to it.
#[derive(Debug, Clone)]
enum KeyAt {
    /// Its bytes in the document, between the quotes.
    Doc(Range<usize>),
    /// Its raw bytes, between the quotes.
    Kept(Box<[u8]>),
}

/// What the scanner expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Expect {
    /// A value (the document's, or a member's after its colon, or an element after a comma).
    #[default]
    Value,
    /// After `[`: an element or `]`.
    ElementOrClose,
    /// After `{`: a key or `}`.
    KeyOrClose,
    /// After a comma in an object.
    Key,
    /// After a key.
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    CommaOrClose,
    /// After the document's value: only whitespace.
    End,
}

/// A number, `true`, `false` or `null` being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Literal {
    /// The rest of a keyword to read.
    Word(&'static [u8]),
    /// A number, in the state of JSON's grammar for it.
    Number(Num),
}

impl Literal {
    /// The literal once `b` is read, or `None` when `b` does not continue it.
    fn next(self, b: u8) -> Option<Literal> {
        match self {
            Literal::Word([first, rest @ ..]) if b == *first => Some(Literal::Word(rest)),
            Literal::Number(num) => num.next(b).map(Literal::Number),
            Literal::Word(_) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

impl Num {
    fn next(self, b: u8) -> Option<Num> {
        use Num::*;
        Some(match (self, b) {
            (Minus, b'0') => Zero,
            (Minus, b'1'..=b'9') => Int,
            (Int, b'0'..=b'9') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => E,
            (E, b'+' | b'-') => ESign,
            (E | ESign | Exp, b'0'..=b'9') => Exp,
            _ => return None,
        })
    }

    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::Exp)
    }
}

#[derive(Debug, Clone, Default)]
struct Scanner {
    stack: Vec<Frame>,
    expect: Expect,
    /// The offset of the open string's quote.
    string_open: Option<usize>,
    /// Whether the open string is a key.
    string_is_key: bool,
    /// Inside the open string: 5 right after `\`, 4 to 1 for the hex digits of `\u` left.
    escape: u8,
    /// The literal being read.
    literal: Option<Literal>,
    /// The array the last byte closed: its `[`'s offset and its length.
    closed: Option<(usize, u64)>,
    /// Frames open below `stack` and not kept in it (a probe's: [`Scanner::probe`]).
    below: usize,
    /// What the open frames' keys would cost in a mark (at most [`KEPT_KEY`] each).
    key_bytes: usize,
}

/// What a key costs in a mark.
fn kept_len(key: &KeyAt) -> usize {
    match key {
        KeyAt::Doc(r) => r.len().min(KEPT_KEY),
        KeyAt::Kept(raw) => raw.len(),
    }
}

impl Scanner {
    /// Whether a page may end before byte `b` (the next one): where a member or element
    /// begins, or at a closing bracket, between tokens.
    fn may_end_before(&self, b: u8) -> bool {
        if self.string_open.is_some() || self.literal.is_some() {
            return false;
        }
        match self.expect {
            Expect::ElementOrClose => starts_value(b) || b == b']',
            Expect::CommaOrClose => matches!(b, b']' | b'}'),
            Expect::KeyOrClose => b == b'"' || b == b'}',
            Expect::Key => b == b'"',
            // An element after a comma; not a member's value after its colon, nor the
            // document's own value.
            Expect::Value => starts_value(b) && self.stack.last().is_some_and(|f| !f.object),
            Expect::Colon | Expect::End => false,
        }
    }

    /// Steps through `doc[from..to]`.
    fn run(&mut self, doc: &[u8], from: usize, to: usize, validate: bool) -> Result<(), NotJson> {
        let mut at = from;
        while at < to {
            let skipped = self.skip(doc, at, to, validate)?;
            if skipped > at {
                at = skipped;
                continue;
            }
            self.step(doc[at], at)?;
            at += 1;
        }
        Ok(())
    }

    /// Where the next byte that changes the state is, from `at` up to `to`: inside a string
    /// (not in an escape), the next quote or backslash; between tokens, the next byte that is
    /// not whitespace. `at` itself when the byte there may change the state. What is skipped
    /// is checked when `validate` (no control character in a string).
    fn skip(&mut self, doc: &[u8], at: usize, to: usize, validate: bool) -> Result<usize, NotJson> {
        if self.string_open.is_some() {
            if self.escape > 0 {
                return Ok(at);
            }
            let run = &doc[at..to];
            let n = memchr::memchr2(b'"', b'\\', run).unwrap_or(run.len());
            let plain = &run[..n];
            if validate && let Some(i) = plain.iter().position(|&b| b < 0x20) {
                return Err(NotJson {
                    at: (at + i) as u64,
                    why: "a control character in a string",
                });
            }
            return Ok(at + n);
        }
        if self.literal.is_some() || at >= to || !matches!(doc[at], b' ' | b'\t' | b'\n' | b'\r') {
            return Ok(at);
        }
        let run = &doc[at..to];
        let n = run
            .iter()
            .position(|&b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .unwrap_or(run.len());
        Ok(at + n)
    }

    /// Whether byte `b`, the next one, begins a token or a bracket (no token open).
    fn between_tokens(&self, b: u8) -> bool {
        self.string_open.is_none()
            && self.literal.is_none()
            && !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b',' | b':')
    }

    fn step(&mut self, b: u8, at: usize) -> Result<(), NotJson> {
        let bad = |why| Err(NotJson { at: at as u64, why });
        self.closed = None;
        if self.string_open.is_some() {
            if self.escape > 0 {
                if self.escape == 5 {
                    match b {
                        b'u' => self.escape = 4,
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.escape = 0,
                        _ => return bad("an unknown escape"),
                    }
                } else if b.is_ascii_hexdigit() {
                    self.escape -= 1;
                } else {
                    return bad("a \\u escape without four hex digits");
                }
                return Ok(());
            }
            match b {
                b'"' => {
                    if self.string_is_key {
                        let open = self.string_open.take().unwrap_or(at);
                        if let Some(frame) = self.stack.last_mut() {
                            let key = KeyAt::Doc(open + 1..at);
                            self.key_bytes += kept_len(&key);
                            frame.key = Some(key);
                        }
                        self.expect = Expect::Colon;
                    } else {
                        self.string_open = None;
                        self.value_done();
                    }
                }
                b'\\' => self.escape = 5,
                0..=0x1f => return bad("a control character in a string"),
                _ => {}
            }
            return Ok(());
        }
        if let Some(literal) = self.literal {
            match literal.next(b) {
                Some(next) => {
                    self.literal = Some(next);
                    return Ok(());
                }
                None => self.end_literal(at)?,
            }
        }
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return Ok(());
        }
        match self.expect {
            Expect::ElementOrClose if b == b']' => self.close(b, at),
            Expect::Value | Expect::ElementOrClose => self.begin_value(b, at),
            Expect::KeyOrClose | Expect::Key => match b {
                b'"' => {
                    if let Some(frame) = self.stack.last_mut() {
                        frame.count += 1;
                        if let Some(old) = frame.key.take() {
                            self.key_bytes = self.key_bytes.saturating_sub(kept_len(&old));
                        }
                    }
                    self.string_open = Some(at);
                    self.string_is_key = true;
                    Ok(())
                }
                b'}' if self.expect == Expect::KeyOrClose => self.close(b, at),
                _ => bad("expected a key"),
            },
            Expect::Colon => match b {
                b':' => {
                    self.expect = Expect::Value;
                    Ok(())
                }
                _ => bad("expected a colon"),
            },
            Expect::CommaOrClose => match (b, self.stack.last().map(|f| f.object)) {
                (b',', Some(true)) => {
                    self.expect = Expect::Key;
                    Ok(())
                }
                (b',', Some(false)) => {
                    self.expect = Expect::Value;
                    Ok(())
                }
                (b']' | b'}', Some(_)) => self.close(b, at),
                _ => bad("expected a comma or a closing bracket"),
            },
            Expect::End => bad("a second value after the document"),
        }
    }

    fn end_literal(&mut self, at: usize) -> Result<(), NotJson> {
        let complete = match self.literal.take() {
            Some(Literal::Word(rest)) => rest.is_empty(),
            Some(Literal::Number(num)) => num.complete(),
            None => true,
        };
        if !complete {
            return Err(NotJson {
                at: at as u64,
                why: "a number, true, false or null cut short",
            });
        }
        self.value_done();
        Ok(())
    }

    fn begin_value(&mut self, b: u8, at: usize) -> Result<(), NotJson> {
        if let Some(frame) = self.stack.last_mut()
            && !frame.object
        {
            frame.count += 1;
        }
        match b {
            b'{' | b'[' => {
                if self.below + self.stack.len() >= MAX_DEPTH {
                    return Err(NotJson {
                        at: at as u64,
                        why: "nested deeper than a layout follows",
                    });
                }
                self.stack.push(Frame {
                    object: b == b'{',
                    open: at,
                    count: 0,
                    key: None,
                });
                self.expect = match b {
                    b'{' => Expect::KeyOrClose,
                    _ => Expect::ElementOrClose,
                };
                Ok(())
            }
            b'"' => {
                self.string_open = Some(at);
                self.string_is_key = false;
                Ok(())
            }
            b't' => self.start_literal(Literal::Word(b"rue")),
            b'f' => self.start_literal(Literal::Word(b"alse")),
            b'n' => self.start_literal(Literal::Word(b"ull")),
            b'-' => self.start_literal(Literal::Number(Num::Minus)),
            b'0' => self.start_literal(Literal::Number(Num::Zero)),
            b'1'..=b'9' => self.start_literal(Literal::Number(Num::Int)),
            _ => Err(NotJson {
                at: at as u64,
                why: "expected a value",
            }),
        }
    }

    fn start_literal(&mut self, literal: Literal) -> Result<(), NotJson> {
        self.literal = Some(literal);
        Ok(())
    }

    fn close(&mut self, b: u8, at: usize) -> Result<(), NotJson> {
        match self.stack.last() {
            Some(frame) if frame.object == (b == b'}') => {
                if !frame.object {
                    self.closed = Some((frame.open, frame.count));
                }
                if let Some(key) = frame.key.as_ref() {
                    self.key_bytes = self.key_bytes.saturating_sub(kept_len(key));
                }
                self.stack.pop();
                self.value_done();
                Ok(())
            }
            _ => Err(NotJson {
                at: at as u64,
                why: "a closing bracket that matches nothing",
            }),
        }
    }

    fn value_done(&mut self) {
        self.expect = match self.stack.is_empty() && self.below == 0 {
            true => Expect::End,
            false => Expect::CommaOrClose,
        };
    }

    fn finish(&mut self, len: usize) -> Result<(), NotJson> {
        if self.literal.is_some() {
            self.end_literal(len)?;
        }
        match (self.expect, self.string_open) {
            (Expect::End, None) => Ok(()),
            _ => Err(NotJson {
                at: len as u64,
                why: "the document ends before its value does",
            }),
        }
    }

    /// The path of the containers in `frames`, each at its current member or element; an
    /// innermost container with none begun yet is itself the value (`[` and whitespace).
    fn frames_path(doc: &[u8], frames: &[Frame]) -> Path {
        let frames = match frames.split_last() {
            Some((last, outer)) if last.count == 0 => outer,
            _ => frames,
        };
        frames
            .iter()
            .map(|f| match (f.object, &f.key) {
                (true, Some(KeyAt::Doc(key))) => {
                    Step::Key(key_text(&doc[key.start..key.end.min(key.start + KEPT_KEY)]))
                }
                (true, Some(KeyAt::Kept(raw))) => Step::Key(key_text(raw)),
                (true, None) => Step::Key(String::new()),
                (false, _) => Step::Index(f.count.saturating_sub(1)),
            })
            .collect()
    }

    /// The path of the container `self.stack[..n]` ends in: the path of the value that is
    /// the `n`-th open container.
    fn container_path(&self, doc: &[u8], n: usize) -> Path {
        Self::frames_path(doc, &self.stack[..n.saturating_sub(1)])
    }

    /// The path of the innermost value that the first significant byte of `doc[at..end]`
    /// (not whitespace, a comma or a colon) belongs to.
    fn path_from(&self, doc: &[u8], at: usize, end: usize) -> Path {
        let mut scan = std::borrow::Cow::Borrowed(self);
        // A literal the page's first byte does not continue ended with the page before (a
        // number has no end of its own): the byte is the next token's, a closing bracket's
        // included.
        if at < end && scan.literal.is_some_and(|l| l.next(doc[at]).is_none()) {
            // The document was checked whole before it was laid out: the literal is complete.
            let _ = scan.to_mut().end_literal(at);
        }
        let mut at = at;
        while at < end
            && scan.string_open.is_none()
            && matches!(doc[at], b' ' | b'\t' | b'\n' | b'\r' | b',' | b':')
        {
            // Each ends a literal before it; a comma or colon moves the state on.
            if scan.to_mut().step(doc[at], at).is_err() {
                break;
            }
            at += 1;
        }
        scan.path_at(doc, at.min(end))
    }

    /// The path of the innermost value that the byte at `at` (the next one) belongs to.
    fn path_at(&self, doc: &[u8], at: usize) -> Path {
        let n = self.stack.len();
        if let Some(path) = self.inside_key(doc) {
            return path;
        }
        if self.string_open.is_some() || self.literal.is_some() {
            return Self::frames_path(doc, &self.stack);
        }
        let Some(&b) = doc.get(at) else {
            return Self::frames_path(doc, &self.stack);
        };
        match (self.expect, b) {
            // A closing bracket is its container's.
            (_, b']' | b'}') => self.container_path(doc, n),
            // An element about to begin.
            (Expect::Value | Expect::ElementOrClose, _)
                if self.stack.last().is_some_and(|f| !f.object) && starts_value(b) =>
            {
                let mut path = self.container_path(doc, n);
                path.push(Step::Index(self.stack[n - 1].count));
                path
            }
            // A member about to begin: its key, read ahead.
            (Expect::Key | Expect::KeyOrClose, b'"') => {
                let mut path = self.container_path(doc, n);
                path.push(Step::Key(key_ahead(doc, at)));
                path
            }
            _ => Self::frames_path(doc, &self.stack),
        }
    }

    /// The path of the innermost value the last byte read belongs to.
    fn path_before(&self, doc: &[u8]) -> Path {
        let n = self.stack.len();
        if let Some(path) = self.inside_key(doc) {
            return path;
        }
        match self.stack.last() {
            // Right after `[` or `{` (and whitespace): the container itself.
            Some(frame) if frame.count == 0 => self.container_path(doc, n),
            // After a key, before its value: the member.
            _ => Self::frames_path(doc, &self.stack),
        }
    }

    /// Inside a key: its member's path (the key read so far is not all of it: read ahead).
    fn inside_key(&self, doc: &[u8]) -> Option<Path> {
        let open = self.string_open.filter(|_| self.string_is_key)?;
        let mut path = self.container_path(doc, self.stack.len());
        path.push(Step::Key(key_ahead(doc, open)));
        Some(path)
    }

    /// The offset inside the open string where `at` is, if a string is open.
    fn string_offset(&self, at: usize) -> Option<u64> {
        self.string_open.map(|open| (at - open - 1) as u64)
    }

    /// A copy of this reader for reading at most `bytes - 2` bytes ahead: only its top
    /// `bytes` frames are kept (no byte sequence that short closes more), the rest counted.
    fn probe(&self, bytes: usize) -> Scanner {
        let keep = self.stack.len().min(bytes);
        let cut = self.stack.len() - keep;
        Scanner {
            stack: self.stack[cut..].to_vec(),
            expect: self.expect,
            string_open: self.string_open,
            string_is_key: self.string_is_key,
            escape: self.escape,
            literal: self.literal,
            closed: None,
            below: self.below + cut,
            // Not counted for a probe, which is never made a mark.
            key_bytes: 0,
        }
    }

    /// This reader as a mark: its keys kept (at most [`KEPT_KEY`] bytes each) rather than
    /// found in `doc`, for a window that starts here. Only taken outside a string or literal.
    fn kept(&self, doc: &[u8]) -> Scanner {
        let stack = self
            .stack
            .iter()
            .map(|f| Frame {
                object: f.object,
                // Offsets before a window mean nothing in it; a mark's are never read.
                open: 0,
                count: f.count,
                key: f.key.as_ref().map(|key| match key {
                    KeyAt::Doc(r) => {
                        KeyAt::Kept(doc[r.start..r.end.min(r.start + KEPT_KEY)].into())
                    }
                    KeyAt::Kept(raw) => KeyAt::Kept(raw.clone()),
                }),
            })
            .collect();
        Scanner {
            stack,
            expect: self.expect,
            key_bytes: self.key_bytes,
            ..Scanner::default()
        }
    }

    /// What this reader would cost as a mark: its frames and at most [`KEPT_KEY`] bytes of
    /// each key (kept as it reads, so asking costs nothing).
    fn mark_bytes(&self) -> usize {
        self.stack.len() * FRAME_BYTES + self.key_bytes
    }

    /// The offset of the innermost open array's `[`.
    fn innermost_open_array(&self) -> Option<usize> {
        self.stack.iter().rev().find(|f| !f.object).map(|f| f.open)
    }

    /// The innermost open array: its path and the offset of its `[`.
    fn innermost_array(&self, doc: &[u8]) -> Option<(Path, usize)> {
        let i = self.stack.iter().rposition(|f| !f.object)?;
        Some((Self::frames_path(doc, &self.stack[..i]), self.stack[i].open))
    }
}

/// The key of the member whose opening quote is at `at`, decoded (at most 4 KiB read).
fn key_ahead(doc: &[u8], at: usize) -> String {
    let mut end = at + 1;
    let limit = (at + 4096).min(doc.len());
    while end < limit && doc[end] != b'"' {
        end += if doc[end] == b'\\' { 2 } else { 1 };
    }
    key_text(&doc[at + 1..end.min(limit)])
}

fn starts_value(b: u8) -> bool {
    matches!(
        b,
        b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
    )
}

/// A key's text from its raw bytes (escapes decoded). A key cut short (at [`KEPT_KEY`] bytes
/// or more) keeps what decodes: an escape or a surrogate pair cut in half is left out.
fn key_text(raw: &[u8]) -> String {
    let decode = |raw: &[u8]| {
        let mut quoted = Vec::with_capacity(raw.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(raw);
        quoted.push(b'"');
        serde_json::from_slice::<String>(&quoted).ok()
    };
    let cuts = if raw.len() >= KEPT_KEY { 12 } else { 0 };
    (0..=cuts)
        .find_map(|cut| decode(&raw[..raw.len() - cut]))
        .unwrap_or_else(|| String::from_utf8_lossy(raw).into_owned())
}

/// Reads a path as [`render`] writes it (`$[130].labels`, `$["a b"]`), as a jq path
/// expression of keys and indices (`.[130].labels`, `.a."b c"`, `.["a"]`, `.`), or as jq's
/// array form (`[130,"labels"]`). A key cut short by [`render`] (ending in `…`) names no key.
pub fn parse_path(text: &str) -> Result<Path, String> {
    let text = text.trim();
    // `[130,"labels"]` as jq writes a path; `[0]` and `["a"]` read the same either way.
    if let Ok(steps) = serde_json::from_str::<Vec<serde_json::Value>>(text) {
        return array_form(steps);
    }
    let mut rest = text.strip_prefix('$').unwrap_or(text);
    let mut path = Path::new();
    if rest == "." {
        return Ok(path);
    }
    while !rest.is_empty() {
        let dotted = rest.starts_with('.');
        if dotted {
            rest = &rest[1..];
        }
        if let Some(inner) = rest.strip_prefix('[') {
            let close = match inner.strip_prefix('"') {
                Some(s) => 1 + string_end(s).ok_or("a key in `[\"…\"]` is not closed")? + 1,
                None => inner.find(']').ok_or("a `[` is not closed")?,
            };
            let step = inner[..close].trim();
            if inner.get(close..close + 1) != Some("]") {
                return Err(format!("expected `]` after `{step}`"));
            }
            path.push(match step.starts_with('"') {
                true => Step::Key(
                    serde_json::from_str(step).map_err(|e| format!("the key {step}: {e}"))?,
                ),
                false => Step::Index(step.parse().map_err(|_| {
                    format!("`[{step}]`: an index is a whole number of at least 0")
                })?),
            });
            rest = &inner[close + 1..];
        } else if dotted && rest.starts_with('"') {
            let end = 1 + string_end(&rest[1..]).ok_or("a quoted key is not closed")? + 1;
            path.push(Step::Key(
                serde_json::from_str(&rest[..end])
                    .map_err(|e| format!("the key {}: {e}", &rest[..end]))?,
            ));
            rest = &rest[end..];
        } else if dotted {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if end == 0 {
                return Err(format!("expected a key after `.` at `{rest}`"));
            }
            path.push(Step::Key(rest[..end].to_string()));
            rest = &rest[end..];
        } else {
            return Err(format!(
                "expected `.key`, `[index]` or `[\"key\"]` at `{rest}` (paths read like `$[130].labels` or `.[130].labels`)"
            ));
        }
    }
    Ok(path)
}

/// The offset of the quote that closes a string whose text starts `s` (after its opening
/// quote).
fn string_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    None
}

fn array_form(steps: Vec<serde_json::Value>) -> Result<Path, String> {
    steps
        .into_iter()
        .map(|step| match step {
            serde_json::Value::String(key) => Ok(Step::Key(key)),
            serde_json::Value::Number(n) if n.as_u64().is_some() => {
                Ok(Step::Index(n.as_u64().unwrap_or_default()))
            }
            other => Err(format!(
                "a path's steps are keys (strings) and indices (whole numbers of at least 0), not {other}"
            )),
        })
        .collect()
}

/// The offset of the first byte of the value at `path` in `doc` (one JSON value), or `None`
/// when the document has no value there. Where a key is given twice, the last member is the
/// one found, as jq reads such an object. Reads the document once; each key at most once.
pub fn find(doc: &[u8], path: &[Step]) -> Option<u64> {
    let mut scan = Scanner::default();
    // How many of the outermost open containers are at the path's step for their depth: a
    // key is compared once, when it closes; an index when its element begins.
    let mut good = 0usize;
    let mut found = None;
    let mut at = 0;
    while at < doc.len() {
        let skipped = scan.skip(doc, at, doc.len(), false).ok()?;
        if skipped > at {
            at = skipped;
            continue;
        }
        let b = doc[at];
        let depth = scan.stack.len();
        if depth == path.len()
            && scan.string_open.is_none()
            && scan.literal.is_none()
            && matches!(scan.expect, Expect::Value | Expect::ElementOrClose)
            && starts_value(b)
        {
            let here = match (scan.stack.last(), path.last()) {
                (None, _) => true,
                // The element about to begin is the array's `count`-th.
                (Some(f), Some(Step::Index(want))) => {
                    !f.object && good + 1 >= depth && f.count == *want
                }
                // A member's value: its key was compared when it closed.
                (Some(f), Some(Step::Key(_))) => f.object && good >= depth,
                (Some(_), None) => false,
            };
            if here {
                found = Some(at as u64);
            }
        }
        let count = scan.stack.last().map(|f| f.count);
        let expect = scan.expect;
        scan.step(b, at).ok()?;
        let now = scan.stack.len();
        // The container that was innermost began a member or element: its step is new.
        if now >= depth && depth > 0 && scan.stack[depth - 1].count != count.unwrap_or(0) {
            let i = depth - 1;
            let f = &scan.stack[i];
            let hit = !f.object && path.get(i) == Some(&Step::Index(f.count - 1));
            if good >= i {
                good = i + usize::from(hit);
            }
        }
        if now < depth {
            good = good.min(now);
        } else if now > depth {
            good = good.min(depth);
        }
        // A key closed: compare it, once.
        if scan.expect == Expect::Colon && expect != Expect::Colon && now > 0 && good >= now - 1 {
            let i = now - 1;
            let hit = match (path.get(i), &scan.stack[i].key) {
                (Some(Step::Key(want)), Some(KeyAt::Doc(r))) => {
                    let raw = &doc[r.clone()];
                    match raw.contains(&b'\\') {
                        false => raw == want.as_bytes(),
                        true => key_text(raw) == *want,
                    }
                }
                _ => false,
            };
            good = i + usize::from(hit);
        }
        at += 1;
    }
    found
}
