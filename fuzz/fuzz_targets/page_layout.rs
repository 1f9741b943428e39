//! Page layout over any content: pages cover the content exactly, in order, each at most the
//! page size and never empty (but for an empty hide's one page), a UTF-8 text is never cut
//! inside a character, and `page_of` names the page that holds each offset.
#![no_main]

use jqjail_store::page::Layout;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, content)) = data.split_first() else {
        return;
    };
    let page_size = 4 + u64::from(knob % 64);
    let len = content.len() as u64;
    let layout = Layout::new(content, len, page_size).unwrap();
    let mut next = 0;
    for page in 1..=layout.total_pages() {
        let range = layout.page(page).unwrap();
        assert_eq!(range.start, next);
        assert!(range.end - range.start <= page_size);
        assert!(range.end > range.start || len == 0);
        if let Ok(text) = std::str::from_utf8(content) {
            assert!(text.is_char_boundary(range.end as usize));
        }
        for offset in [range.start, range.end.saturating_sub(1)] {
            if offset < len {
                assert_eq!(layout.page_of(offset), page);
            }
        }
        next = range.end;
    }
    assert_eq!(next, len);
    assert!(layout.page(layout.total_pages() + 1).is_none());
    assert!(layout.page(0).is_none());
});
