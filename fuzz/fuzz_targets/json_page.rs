//! JSON pages over any bytes: the layout is made for exactly the inputs serde_json takes as
//! one JSON value (valid UTF-8, within serde_json's nesting limit), and then its pages cover
//! the document exactly, in order, each non-empty and within the page size, never ending
//! inside a UTF-8 character; anything else is refused, never a panic. Pages served from marks
//! far apart are the same pages, and each page's first path finds a value on or after the
//! page's start (a path read back as shown); the document's text as a path never panics.
#![no_main]

use jqjail_store::json_page::{JsonLayout, find, parse_path, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, doc)) = data.split_first() else {
        return;
    };
    let page_size = 64 + u64::from(knob % 128);
    if let Ok(text) = std::str::from_utf8(doc) {
        let _ = parse_path(text);
    }
    let layout = JsonLayout::new(doc, page_size);
    if let Ok(text) = std::str::from_utf8(doc) {
        match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Err(e) if e.to_string().contains("recursion limit") => {}
            Ok(_) => assert!(layout.is_ok(), "serde_json takes it: {layout:?}"),
            Err(e) => assert!(layout.is_err(), "serde_json refuses it ({e})"),
        }
    }
    let Ok(layout) = layout else { return };
    let mut next = 0;
    for page in layout.pages() {
        assert_eq!(page.range.start, next);
        assert!(page.range.end > page.range.start);
        assert!(page.range.end - page.range.start <= page_size);
        if let Ok(text) = std::str::from_utf8(doc) {
            assert!(text.is_char_boundary(page.range.end as usize));
        }
        next = page.range.end;
        let shown = render(&page.first);
        if !shown.contains('…') {
            let path = parse_path(&shown).expect("a shown path reads back");
            assert_eq!(path, page.first);
            assert!(find(doc, &path).is_some(), "{shown} finds nothing");
        }
    }
    assert_eq!(next, doc.len() as u64);
    let far = JsonLayout::with_marks(doc, page_size, 1 + u64::from(knob) * 97)
        .expect("the same document");
    assert_eq!(far, layout, "marks elsewhere, other pages");
});
