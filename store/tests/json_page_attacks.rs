//! Documents a hostile tenant keeps as hides to make JSON pages cost far more than a page, or
//! show a path that is not the value's (an attacker's review of issue 37's first version).
//! Each failed on that version.

use jqjail_store::json_page::{JsonIndex, JsonLayout, Step, find, parse_path, render};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `work` on a thread and fails if it takes over a minute: the attacks below took
/// minutes to hours on the first version and take milliseconds now.
fn within_a_minute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("over a minute: the work is not bounded by the document")
}

/// A string of stray UTF-8 continuation bytes is not JSON (it is not UTF-8): it was paged a
/// byte a page, 20 M pages and half a GB for 20 MiB.
#[test]
fn stray_continuation_bytes_are_not_json() {
    let mut doc = b"[\"".to_vec();
    doc.extend(std::iter::repeat_n(0x80u8, 1 << 20));
    doc.extend_from_slice(b"\"]");
    let refused = JsonIndex::new(&doc, 4096).unwrap_err();
    assert_eq!((refused.at, refused.why), (2, "not UTF-8"));
    // A long string of four-byte characters is split at most three bytes short of a page.
    let doc = format!("[\"{}\"]", "😀".repeat(100_000));
    let layout = JsonLayout::new(doc.as_bytes(), 4097).unwrap();
    let inside = layout.pages().iter().filter(|p| p.ends_in_string.is_some());
    assert!(inside.clone().count() > 90);
    for page in inside {
        assert!(
            page.range.end - page.range.start >= 4097 - 3,
            "{:?}",
            page.range
        );
    }
}

/// A page by path compares each key once, when it closes: the first version decoded every
/// escaped key on the way for every element at the path's depth (hours for 20 MiB).
#[test]
fn a_path_under_a_long_escaped_key_is_found_in_one_read() {
    let key = "\\u0061".repeat(20_000);
    let doc = format!("{{\"{key}\":[{}0]}}", "0,".repeat(300_000));
    let found = within_a_minute(move || {
        let at = find(
            doc.as_bytes(),
            &[Step::Key("x".into()), Step::Index(299_999)],
        );
        let end = find(
            doc.as_bytes(),
            &[Step::Key("a".repeat(20_000)), Step::Index(300_000)],
        );
        (at, end, doc.len())
    });
    assert_eq!(found.0, None);
    assert_eq!(found.1, Some(found.2 as u64 - 3), "the last element");
}

/// Deep nesting: a page is described from a mark within about four times its nesting's
/// cost, not from the document's start (the first version took no mark in a document nested
/// 5,000 deep, and read all of it for every page).
#[test]
fn a_deep_document_keeps_marks_and_reads_a_window_a_page() {
    let depth = 5_000;
    let mut doc = "[".repeat(depth);
    while doc.len() < 4 << 20 {
        doc.push_str("1,");
    }
    doc.push('1');
    doc.push_str(&"]".repeat(depth));
    let index = within_a_minute(move || (JsonIndex::new(doc.as_bytes(), 16_384), doc));
    let (index, doc) = (index.0.unwrap(), index.1);
    for page in 2..=index.total_pages() {
        let window = index.window(page).unwrap();
        let range = index.range(page).unwrap();
        assert!(
            range.start - window.start <= 1 << 20,
            "page {page} reads {} bytes before it",
            range.start - window.start
        );
    }
    let last = index.total_pages();
    let w = index.window(last).unwrap();
    let page = index
        .page(last, &doc.as_bytes()[w.start as usize..w.end as usize])
        .unwrap();
    assert_eq!(page.depth, depth);
}

/// A key longer than what a path keeps is shown cut, with `…`, never as a shorter key that
/// reads back as another path (the first version showed 172 of 200 escaped `a`s, uncut).
#[test]
fn a_long_escaped_key_is_shown_whole_or_cut_with_an_ellipsis() {
    for key in ["\\u0061".repeat(200), format!("x{}", "\\u0062".repeat(300))] {
        let doc = format!("{{\"{key}\":[{}1]}}", "1,".repeat(200));
        let decoded: String = serde_json::from_str(&format!("\"{key}\"")).unwrap();
        let layout = JsonLayout::new(doc.as_bytes(), 64).unwrap();
        for page in layout.pages() {
            for path in [&page.first, &page.last] {
                let shown = render(path);
                match path.first() {
                    Some(Step::Key(k)) if !shown.contains('…') => {
                        assert_eq!(k, &decoded, "{shown}");
                        assert_eq!(&parse_path(&shown).unwrap(), path);
                    }
                    Some(Step::Key(_)) => assert!(!shown.contains('\\'), "{shown}"),
                    _ => {}
                }
            }
        }
    }
}

/// Where a key is given twice, a path names the last member, as jq reads the object.
#[test]
fn a_key_given_twice_names_the_last_member() {
    let doc = br#"{"a":"first","\u0061":{"b":1},"a":{"b":2}}"#;
    let at = find(doc, &[Step::Key("a".into())]).unwrap() as usize;
    assert!(doc[at..].starts_with(br#"{"b":2}"#));
    let b = find(doc, &[Step::Key("a".into()), Step::Key("b".into())]).unwrap() as usize;
    assert_eq!(&doc[b..b + 1], b"2");
}
