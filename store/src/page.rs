//! Paging and search over a hide's bytes, read through positioned reads so that a page of a
//! 20 MiB hide is served without loading the hide.
//!
//! Pages are byte windows of at most `page_size` bytes laid greedily from the start: each page
//! ends at `start + page_size`, moved back (by at most three bytes) to the start of a UTF-8
//! character, so no page splits a character. Content that is not UTF-8 is paged all the same;
//! where no character start is within reach the cut is made at `start + page_size`.
//! `total_pages` is the number of such windows (at least 1: an empty hide has one empty page).
//!
//! Search scans the whole hide in overlapping windows, so a match that crosses a page boundary
//! is found like any other; it reports every occurrence (overlapping ones too) up to a bound,
//! each with its byte offset and the page its first byte is on.

use std::io;
use std::ops::Range;

/// The smallest page size: a page must hold any UTF-8 character and some text around it.
pub const MIN_PAGE_SIZE: u64 = 64;
/// The largest page size: a page travels in one response.
pub const MAX_PAGE_SIZE: u64 = 1 << 20;
/// The page size when the caller names none (about 4,000 tokens of English text).
pub const DEFAULT_PAGE_SIZE: u64 = 16 * 1024;
/// The longest search query.
pub const MAX_QUERY_BYTES: usize = 1024;
/// The most matches one search reports.
pub const MAX_MATCHES: u32 = 10_000;
/// Matches reported when the caller names no bound.
pub const DEFAULT_MATCHES: u32 = 100;

/// Something that can be read at an offset: a file (`pread`) or bytes in memory.
pub trait ReadAt {
    /// Fills `buf` from `offset`; returns how many bytes were read (short only at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match std::os::unix::fs::FileExt::read_at(self, &mut buf[done..], offset + done as u64)
            {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// Where each page of a hide starts, for one page size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    len: u64,
    starts: Vec<u64>,
}

impl Layout {
    /// Lays out `len` bytes of `src` in pages of at most `page_size` bytes
    /// (`MIN_PAGE_SIZE..=MAX_PAGE_SIZE`, checked by the caller).
    pub fn new<R: ReadAt + ?Sized>(src: &R, len: u64, page_size: u64) -> io::Result<Layout> {
        debug_assert!(page_size >= 4, "a page must hold a whole character");
        let mut bytes = BlockReader::new(src, len);
        let mut starts = vec![0];
        let mut start = 0u64;
        while len - start > page_size {
            let nominal = start + page_size;
            let mut end = nominal;
            // Back off over continuation bytes (10xxxxxx) to a character start.
            while end > nominal - 3 && is_continuation(bytes.byte(end)?) {
                end -= 1;
            }
            if is_continuation(bytes.byte(end)?) {
                end = nominal; // not UTF-8 here: cut where the window ends
            }
            starts.push(end);
            start = end;
        }
        Ok(Layout { len, starts })
    }

    /// The number of pages (at least 1).
    pub fn total_pages(&self) -> u64 {
        self.starts.len() as u64
    }

    /// The byte range of 1-based `page`, or `None` when it is out of range.
    pub fn page(&self, page: u64) -> Option<Range<u64>> {
        let i = usize::try_from(page.checked_sub(1)?).ok()?;
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.len);
        Some(start..end)
    }

    /// The 1-based page that holds byte `offset`.
    pub fn page_of(&self, offset: u64) -> u64 {
        self.starts.partition_point(|&s| s <= offset) as u64
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Reads single bytes through a small cache, so laying out small pages costs one read per
/// block rather than one per page.
struct BlockReader<'a, R: ?Sized> {
    src: &'a R,
    len: u64,
    block_start: u64,
    block: Vec<u8>,
}

const BLOCK: u64 = 4096;

impl<'a, R: ReadAt + ?Sized> BlockReader<'a, R> {
    fn new(src: &'a R, len: u64) -> Self {
        Self {
            src,
            len,
            block_start: 0,
            block: Vec::new(),
        }
    }

    fn byte(&mut self, at: u64) -> io::Result<u8> {
        if at < self.block_start || at >= self.block_start + self.block.len() as u64 {
            let start = at - at % BLOCK;
            let want = BLOCK.min(self.len - start) as usize;
            self.block.resize(want, 0);
            let got = self.src.read_at(&mut self.block, start)?;
            if got < want {
                return Err(truncated(self.len, start + got as u64));
            }
            self.block_start = start;
        }
        Ok(self.block[(at - self.block_start) as usize])
    }
}

fn truncated(expected: u64, got: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("hide holds {got} bytes where its index says {expected}"),
    )
}

/// Reads `range` of `src` in full.
pub fn read_range<R: ReadAt + ?Sized>(src: &R, range: Range<u64>) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; (range.end - range.start) as usize];
    let got = src.read_at(&mut buf, range.start)?;
    if got < buf.len() {
        return Err(truncated(range.end, range.start + got as u64));
    }
    Ok(buf)
}

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// Match without regard to case (Unicode simple case folding).
    pub ignore_case: bool,
    /// Report at most this many matches (`1..=MAX_MATCHES`).
    pub max_matches: u32,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            ignore_case: false,
            max_matches: DEFAULT_MATCHES,
        }
    }
}

/// The matches of one search, as byte offsets of their first byte, ascending.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Found {
    /// Byte offsets.
    pub offsets: Vec<u64>,
    /// More matches exist than were reported.
    pub truncated: bool,
}

enum Matcher {
    Exact(Box<memchr::memmem::Finder<'static>>),
    Folded(regex::bytes::Regex),
}

impl Matcher {
    fn new(query: &str, ignore_case: bool) -> Result<(Matcher, usize), regex::Error> {
        if ignore_case {
            let re = regex::bytes::RegexBuilder::new(&regex::escape(query))
                .case_insensitive(true)
                .unicode(true)
                .build()?;
            // A folded character is at most four bytes, whatever the query's own length.
            Ok((Matcher::Folded(re), 4 * query.chars().count()))
        } else {
            let finder = Box::new(memchr::memmem::Finder::new(query.as_bytes()).into_owned());
            Ok((Matcher::Exact(finder), query.len()))
        }
    }

    fn find_at(&self, hay: &[u8], at: usize) -> Option<usize> {
        match self {
            Matcher::Exact(f) => f.find(&hay[at..]).map(|i| at + i),
            Matcher::Folded(re) => re.find_at(hay, at).map(|m| m.start()),
        }
    }
}

/// The bytes scanned at a time (plus an overlap as long as the longest possible match).
const SCAN_CHUNK: u64 = 1 << 20;

/// Finds every occurrence of `query` (non-empty) in `len` bytes of `src`.
pub fn search<R: ReadAt + ?Sized>(
    src: &R,
    len: u64,
    query: &str,
    opts: SearchOptions,
) -> io::Result<Found> {
    let (matcher, longest) = Matcher::new(query, opts.ignore_case)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let overlap = longest.saturating_sub(1) as u64;
    let mut found = Found::default();
    let mut buf = Vec::new();
    let mut base = 0u64;
    while base < len {
        let accept = SCAN_CHUNK.min(len - base);
        let want = (accept + overlap).min(len - base);
        buf.resize(want as usize, 0);
        let got = src.read_at(&mut buf, base)?;
        if (got as u64) < want {
            return Err(truncated(len, base + got as u64));
        }
        // A match is counted in the window where it starts; the overlap only completes it.
        let mut at = 0usize;
        while let Some(start) = matcher.find_at(&buf, at) {
            if start as u64 >= accept {
                break;
            }
            if found.offsets.len() == opts.max_matches as usize {
                found.truncated = true;
                return Ok(found);
            }
            found.offsets.push(base + start as u64);
            at = start + 1; // overlapping occurrences count too
        }
        base += accept;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(text: &[u8], size: u64) -> Vec<Vec<u8>> {
        let layout = Layout::new(text, text.len() as u64, size).unwrap();
        (1..=layout.total_pages())
            .map(|p| read_range(text, layout.page(p).unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn ascii_pages_are_exact_windows() {
        let text = b"abcdefghij".repeat(20); // 200 bytes
        let p = pages(&text, 64);
        assert_eq!(p.iter().map(Vec::len).collect::<Vec<_>>(), [64, 64, 64, 8]);
        assert_eq!(p.concat(), text);
        let exact = b"x".repeat(128);
        assert_eq!(pages(&exact, 64).len(), 2, "no empty trailing page");
    }

    #[test]
    fn empty_content_is_one_empty_page() {
        let layout = Layout::new(&b""[..], 0, 64).unwrap();
        assert_eq!(layout.total_pages(), 1);
        assert_eq!(layout.page(1), Some(0..0));
        assert_eq!(layout.page(2), None);
        assert_eq!(layout.page(0), None);
    }

    #[test]
    fn a_character_on_the_boundary_moves_to_the_next_page() {
        // 63 ASCII bytes, then "€" (3 bytes) straddling byte 64.
        let mut text = b"a".repeat(63);
        text.extend_from_slice("€tail".as_bytes());
        let p = pages(&text, 64);
        assert_eq!(p[0].len(), 63);
        assert!(std::str::from_utf8(&p[0]).is_ok());
        assert_eq!(std::str::from_utf8(&p[1]).unwrap(), "€tail");
    }

    #[test]
    fn invalid_utf8_is_still_paged_whole() {
        let text = vec![0x80u8; 300];
        let p = pages(&text, 64);
        assert_eq!(p.concat(), text);
        assert!(p.iter().all(|page| page.len() <= 64));
    }

    #[test]
    fn page_of_offsets() {
        let text = b"x".repeat(200);
        let layout = Layout::new(&text[..], 200, 64).unwrap();
        assert_eq!(layout.page_of(0), 1);
        assert_eq!(layout.page_of(63), 1);
        assert_eq!(layout.page_of(64), 2);
        assert_eq!(layout.page_of(199), 4);
    }

    #[test]
    fn search_finds_overlapping_and_cross_chunk_matches() {
        let found = search(&b"aaaa"[..], 4, "aa", SearchOptions::default()).unwrap();
        assert_eq!(found.offsets, [0, 1, 2]);
        // A match straddling the scan chunk boundary.
        let mut big = vec![b'.'; SCAN_CHUNK as usize + 10];
        big[SCAN_CHUNK as usize - 2..SCAN_CHUNK as usize + 2].copy_from_slice(b"NEED");
        let found = search(&big[..], big.len() as u64, "NEED", SearchOptions::default()).unwrap();
        assert_eq!(found.offsets, [SCAN_CHUNK - 2]);
    }

    #[test]
    fn ignore_case_reports_offsets_in_the_original_bytes() {
        // "İ" lowercases to two characters; offsets must not shift (the seed's defect).
        let s = "İİİ Straße STRASSE straße";
        let text = s.as_bytes();
        let opts = SearchOptions {
            ignore_case: true,
            ..Default::default()
        };
        let at = |needle: &str| s.find(needle).unwrap() as u64;
        // Simple case folding: "ß" does not become "ss".
        let found = search(text, text.len() as u64, "strasse", opts).unwrap();
        assert_eq!(found.offsets, [at("STRASSE")]);
        let found = search(text, text.len() as u64, "STRAßE", opts).unwrap();
        assert_eq!(found.offsets, [at("Straße"), at("straße")]);
    }

    #[test]
    fn search_stops_at_the_bound() {
        let text = b"ab".repeat(50);
        let opts = SearchOptions {
            max_matches: 3,
            ..Default::default()
        };
        let found = search(&text[..], 100, "ab", opts).unwrap();
        assert_eq!(found.offsets, [0, 2, 4]);
        assert!(found.truncated);
    }
}
