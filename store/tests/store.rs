//! The store against a real directory: round trips, IDs, permissions, retention, paging and
//! search, and their properties. Several processes at once, and SIGKILL at random points, are
//! in `processes.rs`.

use jqjail_store::page::{self, Layout, SearchOptions};
use jqjail_store::{OnFull, Retention, Store, StoreError};
use proptest::prelude::*;
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const ROOMY: Retention = Retention {
    quota_bytes: 1 << 30,
    max_age: None,
    on_full: OnFull::Refuse,
};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    (dir, store)
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn put_then_get_round_trips_bytes_exactly() {
    let (_dir, store) = store();
    let binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let big: Vec<u8> = (0..20 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    for content in [&b""[..], &binary, &big] {
        let put = store
            .put("t", "tool_output", "Bytes!", content, &[], &ROOMY)
            .unwrap();
        assert!(put.created);
        assert_eq!(put.entry.size, content.len() as u64);
        assert_eq!(put.entry.sha256, sha(content));
        assert!(put.entry.id.starts_with("bytes-"));
        let (entry, back) = store.get("t", &put.entry.id).unwrap();
        assert_eq!(entry, put.entry);
        assert!(
            back == content,
            "bytes differ for a {}-byte hide",
            content.len()
        );
    }
}

#[test]
fn same_content_same_id_and_meta_kept() {
    let (_dir, store) = store();
    let meta = vec![
        ("tool".to_string(), "gh".to_string()),
        ("turn".to_string(), "3".to_string()),
    ];
    let a = store
        .put("t", "k", "GitHub", b"[1,2]", &meta, &ROOMY)
        .unwrap();
    let b = store
        .put("t", "k", "GitHub", b"[1,2]", &[], &ROOMY)
        .unwrap();
    assert!(a.created && !b.created);
    assert_eq!(a.entry, b.entry);
    assert_eq!(a.entry.id, format!("github-{}", &sha(b"[1,2]")[..8]));
    assert_eq!(store.entry("t", &a.entry.id).unwrap().meta, meta);
    let other = store
        .put("t", "k", "GitHub", b"[1,2,3]", &[], &ROOMY)
        .unwrap();
    assert_ne!(other.entry.id, a.entry.id);
    assert_eq!(store.list("t").unwrap().len(), 2);
}

/// Finds two contents whose sha256 share the first 8 hex digits (a 32-bit birthday search:
/// about 80,000 hashes) and stores both: the second gets a longer ID, the first is untouched.
#[test]
fn a_real_prefix_collision_gets_a_longer_id_never_an_overwrite() {
    let mut seen = std::collections::HashMap::new();
    let (first, second) = (0u64..)
        .find_map(|i| {
            let content = format!("{{\"n\":{i}}}");
            let prefix = sha(content.as_bytes())[..8].to_string();
            seen.insert(prefix, content.clone())
                .map(|earlier| (earlier, content))
        })
        .unwrap();
    let (_dir, store) = store();
    let a = store
        .put("t", "k", "src", first.as_bytes(), &[], &ROOMY)
        .unwrap();
    let b = store
        .put("t", "k", "src", second.as_bytes(), &[], &ROOMY)
        .unwrap();
    assert_eq!(a.entry.id.len(), "src-".len() + 8);
    assert_eq!(
        b.entry.id.len(),
        "src-".len() + 12,
        "{} vs {}",
        a.entry.id,
        b.entry.id
    );
    assert!(b.entry.id.starts_with(&a.entry.id));
    assert_eq!(store.get("t", &a.entry.id).unwrap().1, first.as_bytes());
    assert_eq!(store.get("t", &b.entry.id).unwrap().1, second.as_bytes());
    // Putting either again finds it rather than minting a third ID.
    assert_eq!(
        store
            .put("t", "k", "src", second.as_bytes(), &[], &ROOMY)
            .unwrap()
            .entry
            .id,
        b.entry.id
    );
    // Another tenant with the second content gets the short ID: IDs are per tenant.
    let other = store
        .put("u", "k", "src", second.as_bytes(), &[], &ROOMY)
        .unwrap();
    assert_eq!(other.entry.id.len(), "src-".len() + 8);
    // A put whose eviction frees the short ID does not take it in the same transaction (its
    // file is still there until the commit): a tenant whose quota holds one of the two.
    let one = Retention {
        quota_bytes: (first.len().max(second.len()) + "k".len() + "src".len()) as u64,
        max_age: None,
        on_full: OnFull::EvictOldest,
    };
    let short = store
        .put("w", "k", "src", first.as_bytes(), &[], &one)
        .unwrap();
    let longer = store
        .put("w", "k", "src", second.as_bytes(), &[], &one)
        .unwrap();
    assert_eq!(longer.evicted, vec![short.entry.id.clone()]);
    assert_ne!(longer.entry.id, short.entry.id);
    assert_eq!(
        store.get("w", &longer.entry.id).unwrap().1,
        second.as_bytes()
    );
}

#[test]
fn a_put_can_arrive_in_pieces_and_be_abandoned() {
    let (dir, store) = store();
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut writing = store.begin_put("t", content.len() as u64, &ROOMY).unwrap();
    for piece in content.chunks(65_536) {
        writing.write(piece).unwrap();
    }
    assert_eq!(writing.written(), content.len() as u64);
    let put = writing.finish("k", "s", &[], &ROOMY).unwrap();
    assert_eq!(put.entry.sha256, sha(&content));
    assert_eq!(store.get("t", &put.entry.id).unwrap().1, content);
    // Abandoned: nothing listed, no temp file left.
    let mut writing = store.begin_put("t", 100, &ROOMY).unwrap();
    writing.write(b"half of something").unwrap();
    drop(writing);
    assert_eq!(store.list("t").unwrap().len(), 1);
    let tmp = dir.path().join("store").join("tmp");
    assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0);
}

#[test]
fn tenants_cannot_see_each_other() {
    let (_dir, store) = store();
    let a = store
        .put("alice", "k", "s", b"secret", &[], &ROOMY)
        .unwrap()
        .entry;
    for result in [
        store.get("bob", &a.id).map(|_| ()),
        store.cut("bob", &a.id, 1, 64).map(|_| ()),
        store
            .search("bob", &a.id, "secret", SearchOptions::default(), 64)
            .map(|_| ()),
        store.delete("bob", &a.id).map(|_| ()),
    ] {
        assert!(matches!(result, Err(StoreError::NotFound(_))), "{result:?}");
    }
    assert!(store.list("bob").unwrap().is_empty());
    assert_eq!(store.usage("bob").unwrap().entries, 0);
    assert_eq!(store.get("alice", &a.id).unwrap().1, b"secret");
}

#[test]
fn malformed_ids_are_not_found_and_never_reach_a_path() {
    let (_dir, store) = store();
    for id in ["../../etc/passwd", "x-../../a", "", "UPPER-0123abcd"] {
        assert!(
            matches!(store.get("t", id), Err(StoreError::NotFound(_))),
            "{id}"
        );
    }
}

#[test]
fn refuses_a_store_others_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    std::fs::create_dir(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(err.to_string().contains("mode is 750"), "{err}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    let store = Store::open(&path).unwrap();
    store.put("t", "k", "s", b"x", &[], &ROOMY).unwrap();
    for f in ["lock", "index.sqlite3"] {
        let mode = std::fs::metadata(path.join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
}

#[test]
fn quota_evicts_oldest_or_refuses() {
    let (_dir, store) = store();
    let evict = Retention {
        quota_bytes: 250,
        max_age: None,
        on_full: OnFull::EvictOldest,
    };
    let ids: Vec<String> = (0..3)
        .map(|i| {
            store
                .put("t", "k", "s", &[b'a' + i; 100], &[], &evict)
                .unwrap()
                .entry
                .id
        })
        .collect();
    let listed: Vec<String> = store.list("t").unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(
        listed,
        [ids[2].clone(), ids[1].clone()],
        "newest first; the oldest was evicted"
    );
    assert!(matches!(
        store.get("t", &ids[0]),
        Err(StoreError::NotFound(_))
    ));
    // The eviction is counted, and the observer (a connection of its own) sees what is left of
    // every tenant's together.
    assert_eq!(store.evicted().retention, 1);
    store.put("u", "k", "s", b"[1]", &[], &evict).unwrap();
    let totals = store.observer().unwrap().totals().unwrap();
    assert_eq!((totals.entries, totals.bytes), (3, 2 * 102 + 5));
    let refuse = Retention {
        on_full: OnFull::Refuse,
        ..evict
    };
    let err = store
        .put("t", "k", "s", &[b'z'; 100], &[], &refuse)
        .unwrap_err();
    assert!(
        matches!(
            err,
            // Each 100-byte hide counts its labels too (`k`, `s`).
            StoreError::QuotaExceeded {
                quota: 250,
                used: 204,
                size: 102
            }
        ),
        "{err}"
    );
    let err = store
        .put("t", "k", "s", &[b'z'; 251], &[], &evict)
        .unwrap_err();
    assert!(
        matches!(err, StoreError::QuotaExceeded { size: 251, .. }),
        "{err}"
    );
    assert_eq!(store.usage("t").unwrap().bytes, 204);
}

#[test]
fn meta_counts_against_the_quota_and_hides_are_counted_too() {
    let (_dir, store) = store();
    let refuse = Retention {
        quota_bytes: 10_000,
        max_age: None,
        on_full: OnFull::Refuse,
    };
    // Empty content with 64 pairs of 1,000-byte strings is 128,000 bytes, not free.
    let meta: Vec<(String, String)> = (0..64)
        .map(|i| (format!("{i:0>1000}"), "v".repeat(1000)))
        .collect();
    let err = store.put("t", "k", "s", b"", &meta, &refuse).unwrap_err();
    assert!(matches!(err, StoreError::QuotaExceeded { .. }), "{err}");
    let small: Vec<(String, String)> = vec![("a".into(), "b".into())];
    let put = store.put("t", "k", "s", b"", &small, &refuse).unwrap();
    assert_eq!(store.usage("t").unwrap().bytes, 4);
    assert!(put.created);
}

#[test]
fn age_limit_expires_on_put() {
    let (_dir, store) = store();
    let old = store
        .put("t", "k", "s", b"old", &[], &ROOMY)
        .unwrap()
        .entry
        .id;
    std::thread::sleep(Duration::from_millis(30));
    let short = Retention {
        max_age: Some(Duration::from_millis(10)),
        ..ROOMY
    };
    let put = store.put("t", "k", "s", b"new", &[], &short).unwrap();
    assert_eq!(put.evicted, std::slice::from_ref(&old));
    assert!(matches!(store.get("t", &old), Err(StoreError::NotFound(_))));
}

#[test]
fn expiry_sweeps_every_tenant() {
    let (_dir, store) = store();
    let a = store
        .put("alice", "k", "s", b"old a", &[], &ROOMY)
        .unwrap()
        .entry
        .id;
    store.put("bob", "k", "s", b"old b", &[], &ROOMY).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let fresh = store
        .put("alice", "k", "s", b"new", &[], &ROOMY)
        .unwrap()
        .entry
        .id;
    assert_eq!(store.expire(Duration::from_millis(20)).unwrap(), 2);
    assert!(matches!(
        store.get("alice", &a),
        Err(StoreError::NotFound(_))
    ));
    assert!(store.list("bob").unwrap().is_empty());
    assert_eq!(store.get("alice", &fresh).unwrap().1, b"new");
}

#[test]
fn cuts_and_searches_off_disk() {
    let (_dir, store) = store();
    // 100 lines of "line NNN é\n": 12 bytes each, with a 2-byte character.
    let text: String = (0..100).map(|i| format!("line {i:03} é\n")).collect();
    let id = store
        .put("t", "k", "s", text.as_bytes(), &[], &ROOMY)
        .unwrap()
        .entry
        .id;
    let first = store.cut("t", &id, 1, 64).unwrap();
    let mut all = Vec::new();
    for p in 1..=first.total_pages {
        let cut = store.cut("t", &id, p, 64).unwrap();
        assert!(cut.content.len() <= 64);
        assert!(
            std::str::from_utf8(&cut.content).is_ok(),
            "page {p} splits a character"
        );
        assert_eq!(cut.offset, all.len() as u64);
        all.extend(cut.content);
    }
    assert_eq!(all, text.as_bytes());
    let err = store.cut("t", &id, first.total_pages + 1, 64).unwrap_err();
    assert!(matches!(err, StoreError::PageOutOfRange { .. }), "{err}");
    assert!(matches!(
        store.cut("t", &id, 0, 64),
        Err(StoreError::PageOutOfRange { .. })
    ));
    assert!(matches!(
        store.cut("t", &id, 1, 63),
        Err(StoreError::Invalid(_))
    ));
    let hit = store
        .search("t", &id, "line 042", SearchOptions::default(), 64)
        .unwrap();
    let offset = text.find("line 042").unwrap() as u64;
    assert_eq!(hit.matches.len(), 1);
    assert_eq!(hit.matches[0].offset, offset);
    let layout = Layout::new(text.as_bytes(), text.len() as u64, 64).unwrap();
    assert!(layout.page(hit.matches[0].page).unwrap().contains(&offset));
    let miss = store
        .search("t", &id, "line 100", SearchOptions::default(), 64)
        .unwrap();
    assert!(miss.matches.is_empty(), "a miss is empty, never page 1");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn pages_concatenate_to_the_content_and_are_valid_utf8(
        text in "\\PC{0,600}", page_size in 64u64..200,
    ) {
        let bytes = text.as_bytes();
        let layout = Layout::new(bytes, bytes.len() as u64, page_size).unwrap();
        let mut all = Vec::new();
        for p in 1..=layout.total_pages() {
            let chunk = page::read_range(bytes, layout.page(p).unwrap()).unwrap();
            prop_assert!(chunk.len() as u64 <= page_size);
            prop_assert!(std::str::from_utf8(&chunk).is_ok());
            prop_assert!(p == layout.total_pages() || !chunk.is_empty());
            all.extend(chunk);
        }
        prop_assert_eq!(all, bytes);
    }

    #[test]
    fn search_reports_every_occurrence(
        parts in prop::collection::vec("[ab€]{0,6}", 1..40), needle in "[ab€]{1,3}",
    ) {
        let text = parts.concat();
        let expected: Vec<u64> = (0..text.len())
            .filter(|&i| text.is_char_boundary(i) && text[i..].starts_with(&needle))
            .map(|i| i as u64)
            .collect();
        let opts = SearchOptions { max_matches: 10_000, ..Default::default() };
        let found = page::search(text.as_bytes(), text.len() as u64, &needle, opts).unwrap();
        prop_assert_eq!(found.offsets, expected);
    }
}

#[test]
fn a_tenant_keeps_at_most_ten_thousand_hides_and_lists_them_a_page_at_a_time() {
    let (_dir, store) = store();
    let max = jqjail_store::MAX_HIDES_PER_TENANT;
    let start = std::time::Instant::now();
    for i in 0..max {
        store
            .put("t", "k", "s", i.to_string().as_bytes(), &[], &ROOMY)
            .unwrap();
    }
    eprintln!("{max} puts took {:?}", start.elapsed());
    // The 10,001st: refused under `Refuse`, the oldest evicted under `EvictOldest`.
    let err = store
        .put("t", "k", "s", b"one more", &[], &ROOMY)
        .unwrap_err();
    assert!(
        matches!(err, StoreError::TooManyHides { max: 10_000 }),
        "{err}"
    );
    let oldest = store.list_page("t", max - 1, 1, u64::MAX).unwrap().0;
    assert_eq!(oldest.len(), 1);
    let evict = Retention {
        on_full: OnFull::EvictOldest,
        ..ROOMY
    };
    let put = store.put("t", "k", "s", b"one more", &[], &evict).unwrap();
    assert_eq!(put.evicted, [oldest[0].id.clone()]);
    assert_eq!(store.usage("t").unwrap().entries, max);
    // Another tenant is not counted against this one.
    store.put("u", "k", "s", b"0", &[], &ROOMY).unwrap();
    // Pages: newest first, each ID once, ending at the total.
    let (first, total) = store.list_page("t", 0, 3, u64::MAX).unwrap();
    assert_eq!(total, max);
    assert_eq!(first[0].id, put.entry.id);
    let (last, _) = store.list_page("t", max - 2, 1000, u64::MAX).unwrap();
    assert_eq!(last.len(), 2);
    assert!(
        store
            .list_page("t", max, 10, u64::MAX)
            .unwrap()
            .0
            .is_empty()
    );
}

#[test]
fn a_list_page_ends_once_its_labels_pass_the_bound_but_holds_one() {
    let (_dir, store) = store();
    let meta: Vec<(String, String)> = vec![("k".into(), "v".repeat(1000))];
    for i in 0..10u8 {
        store
            .put("t", "k", "s", &[b'0' + i], &meta, &ROOMY)
            .unwrap();
    }
    // Each entry's labels: "k" + "s" + "k" + 1,000 bytes.
    let (page, total) = store.list_page("t", 0, 100, 2500).unwrap();
    assert_eq!((page.len(), total), (3, 10));
    let (page, _) = store.list_page("t", 0, 100, 1).unwrap();
    assert_eq!(page.len(), 1);
}

/// What a tenant holds, counted the slow way: every hide's content, labels and meta.
fn counted(store: &Store, tenant: &str) -> (u64, u64) {
    let all = store.list(tenant).unwrap();
    let bytes = all
        .iter()
        .map(|e| {
            e.size
                + (e.kind.len() + e.source.len()) as u64
                + e.meta
                    .iter()
                    .map(|(k, v)| (k.len() + v.len()) as u64)
                    .sum::<u64>()
        })
        .sum();
    (all.len() as u64, bytes)
}

/// Issue 34: usage is a counter kept by the index's triggers, not a sum per call. It must
/// stay what a sum gives through puts, repeats, deletes, evictions and expiry, for every
/// tenant, and across a reopen.
#[test]
fn usage_counters_stay_what_a_sum_over_the_hides_gives() {
    let (dir, store) = store();
    let evict = Retention {
        quota_bytes: 6_000,
        max_age: None,
        on_full: OnFull::EvictOldest,
    };
    let mut seed = 7u64;
    let mut next = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        seed >> 33
    };
    for i in 0..300 {
        let tenant = ["a", "b", "c"][(next() % 3) as usize];
        let content = vec![b'x'; (next() % 900) as usize];
        let meta: Vec<(String, String)> = (0..next() % 4)
            .map(|k| (format!("k{k}"), "v".repeat((next() % 50) as usize)))
            .collect();
        match next() % 5 {
            0 => {
                if let Some(e) = store.list(tenant).unwrap().first() {
                    store.delete(tenant, &e.id).unwrap();
                }
            }
            _ => {
                store
                    .put(
                        tenant,
                        "kind",
                        &format!("src{}", i % 7),
                        &content,
                        &meta,
                        &evict,
                    )
                    .unwrap();
            }
        }
        for t in ["a", "b", "c"] {
            let u = store.usage(t).unwrap();
            assert_eq!(
                (u.entries, u.bytes),
                counted(&store, t),
                "tenant {t} after step {i}"
            );
            assert!(u.bytes <= evict.quota_bytes);
        }
    }
    store.expire(Duration::ZERO).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    store.expire(Duration::from_millis(1)).unwrap();
    drop(store);
    let reopened = Store::open(&dir.path().join("store")).unwrap();
    for t in ["a", "b", "c"] {
        let u = reopened.usage(t).unwrap();
        assert_eq!((u.entries, u.bytes), counted(&reopened, t));
        assert_eq!(u.entries, 0, "expiry left {t}'s hides");
    }
}

/// An index made before the counters (no `charged` column, no `usage` table) and rows a build
/// from before them stored (charged 0) are counted right once the store is opened.
#[test]
fn an_index_from_before_the_counters_is_counted_at_open() {
    let (dir, store) = store();
    let meta = vec![("filter".to_string(), ".[0]".to_string())];
    for i in 0..5 {
        store
            .put(
                "t",
                "k",
                "s",
                format!("content {i}").as_bytes(),
                &meta,
                &ROOMY,
            )
            .unwrap();
    }
    let expected = counted(&store, "t");
    drop(store);
    let db = rusqlite::Connection::open(dir.path().join("store/index.sqlite3")).unwrap();
    db.execute_batch(
        "DROP TRIGGER usage_add; DROP TRIGGER usage_remove; DROP TABLE usage;
         ALTER TABLE hides DROP COLUMN charged;",
    )
    .unwrap();
    drop(db);
    let store = Store::open(&dir.path().join("store")).unwrap();
    let u = store.usage("t").unwrap();
    assert_eq!((u.entries, u.bytes), expected);
    // A row an older build inserted has no charge: it is given one at the next open.
    drop(store);
    let db = rusqlite::Connection::open(dir.path().join("store/index.sqlite3")).unwrap();
    db.execute_batch("UPDATE hides SET charged = 0").unwrap();
    drop(db);
    let store = Store::open(&dir.path().join("store")).unwrap();
    let u = store.usage("t").unwrap();
    assert_eq!((u.entries, u.bytes), expected);
}

/// A hide whose labels and meta take it over the quota even with every other hide gone is
/// refused, and the others are kept (they were all evicted for nothing).
#[test]
fn a_put_that_cannot_fit_evicts_nothing() {
    let (_dir, store) = store();
    let evict = Retention {
        quota_bytes: 100,
        max_age: None,
        on_full: OnFull::EvictOldest,
    };
    store.put("t", "k", "s", b"12345", &[], &evict).unwrap();
    let meta = vec![("m".to_string(), "v".repeat(40))];
    let err = store
        .put("t", "kind", "source", &[b'x'; 90], &meta, &evict)
        .unwrap_err();
    assert!(matches!(err, StoreError::QuotaExceeded { .. }), "{err}");
    assert_eq!(store.list("t").unwrap().len(), 1);
}

/// JSON pages through the store (issue 37): each page is the layout's, read back from disk
/// through the kept index; a page by path holds the value; text has byte pages; a path not
/// in the hide, a page out of range and a path into text are told apart.
#[test]
fn json_pages_by_number_and_by_path() {
    use jqjail_store::PageAt;
    use jqjail_store::json_page::{JsonLayout, parse_path};
    let (_dir, store) = store();
    let doc = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/issues.json"
    ))
    .unwrap();
    let id = store
        .put("t", "k", "gh", &doc, &[], &ROOMY)
        .unwrap()
        .entry
        .id;
    let layout = JsonLayout::new(&doc, 600).unwrap();
    // Twice: laid out on the first read, from the kept index on the second.
    for _ in 0..2 {
        for (n, want) in layout.pages().iter().enumerate() {
            let got = store
                .json_page("t", &id, PageAt::Number(n as u64 + 1), 600)
                .unwrap();
            assert_eq!(got.json.as_ref().unwrap(), want);
            assert_eq!(
                got.cut.content,
                &doc[want.range.start as usize..want.range.end as usize]
            );
            assert_eq!(got.cut.total_pages, layout.total_pages());
        }
    }
    for text in ["$[1].labels", ".[2].user.login", "[0]", "$"] {
        let path = parse_path(text).unwrap();
        let got = store
            .json_page("t", &id, PageAt::Path(path.clone()), 600)
            .unwrap();
        let at = jqjail_store::json_page::find(&doc, &path).unwrap();
        assert!(
            got.cut.offset <= at && at < got.cut.offset + got.cut.content.len() as u64,
            "{text}"
        );
    }
    let missing = store.json_page(
        "t",
        &id,
        PageAt::Path(parse_path("$[1].nope").unwrap()),
        600,
    );
    match missing {
        Err(StoreError::NoValueAt { path, .. }) => assert_eq!(path, "$[1].nope"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.json_page("t", &id, PageAt::Number(10_000), 600),
        Err(StoreError::PageOutOfRange { .. })
    ));
    // Another tenant's hide is not found, by number or by path.
    assert!(matches!(
        store.json_page("u", &id, PageAt::Number(1), 600),
        Err(StoreError::NotFound(_))
    ));
    // Text: byte pages, the same as `cut`, and no paths.
    let text = "not json ".repeat(200);
    let tid = store
        .put("t", "k", "txt", text.as_bytes(), &[], &ROOMY)
        .unwrap()
        .entry
        .id;
    let got = store.json_page("t", &tid, PageAt::Number(2), 64).unwrap();
    assert!(got.json.is_err());
    assert_eq!(got.cut, store.cut("t", &tid, 2, 64).unwrap());
    assert!(matches!(
        store.json_page("t", &tid, PageAt::Path(vec![]), 64),
        Err(StoreError::Invalid(_))
    ));
}
