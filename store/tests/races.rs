//! The breaches of issue 16 in the store: a delete or an expiry that unlinked a file after
//! releasing the lock removed the file of a hide that a concurrent put of the same content
//! had just renamed into place (listed, unreadable, and still so after a restart); and the
//! temp files of puts in progress held disk outside every quota, and survived a crash.

use jqjail_store::{OnFull, Retention, Store, StoreError};
use std::time::{Duration, Instant};

const ROOMY: Retention = Retention {
    quota_bytes: 1 << 30,
    max_age: None,
    on_full: OnFull::Refuse,
};

/// Every hide `store` lists for `tenant` reads back whole.
fn every_listed_hide_reads_back(store: &Store, tenant: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for entry in store.list(tenant).unwrap() {
        match store.get(tenant, &entry.id) {
            Ok((_, content)) if content.len() as u64 == entry.size => {}
            other => broken.push(format!("{}: {:?}", entry.id, other.map(|(e, _)| e))),
        }
    }
    broken
}

#[test]
fn deletes_and_expiry_racing_puts_of_the_same_content_never_lose_a_listed_hide() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    // One store, a remover thread and two putting threads (one process owns a store).
    let putter = Store::open(&path).unwrap();
    let remover = &putter;
    let contents: Vec<Vec<u8>> = (0..2000).map(|i| format!("[{i}]").into_bytes()).collect();
    let until = Instant::now() + Duration::from_secs(3);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut round = 0u32;
            while Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
                if round % 4 == 3 {
                    for entry in remover.list("t").unwrap() {
                        let _ = remover.delete("t", &entry.id);
                    }
                } else {
                    remover.expire(Duration::ZERO).unwrap();
                }
                round += 1;
            }
        });
        // Two clients putting the same contents over and over, in opposite orders: whatever
        // order the remover unlinks in, some of its files are put again before it gets there.
        for forward in [true, false] {
            let (putter, contents) = (&putter, &contents);
            s.spawn(move || {
                while Instant::now() < until {
                    let order: Box<dyn Iterator<Item = &Vec<u8>>> = if forward {
                        Box::new(contents.iter())
                    } else {
                        Box::new(contents.iter().rev())
                    };
                    for content in order {
                        putter.put("t", "k", "s", content, &[], &ROOMY).unwrap();
                    }
                }
            });
        }
    });
    // One more round of puts after the removals stopped: a hide listed but unreadable stays
    // so (the put answers `created: false`), a lost one is put again.
    for content in &contents {
        putter.put("t", "k", "s", content, &[], &ROOMY).unwrap();
    }
    let broken = every_listed_hide_reads_back(&putter, "t");
    assert!(broken.is_empty(), "listed but unreadable: {broken:?}");
    assert_eq!(putter.list("t").unwrap().len(), contents.len());
}

#[test]
fn opening_drops_rows_whose_file_is_gone_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = Store::open(&path).unwrap();
    let kept = store.put("t", "k", "s", b"[1]", &[], &ROOMY).unwrap().entry;
    let lost = store.put("t", "k", "s", b"[2]", &[], &ROOMY).unwrap().entry;
    let file = std::fs::read_dir(path.join("objects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join(&lost.id);
    std::fs::remove_file(file).unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.opened().broken_rows,
        vec![("t".to_string(), lost.id.clone())]
    );
    let listed: Vec<String> = store.list("t").unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(listed, vec![kept.id]);
    // The same content can be put again and reads back.
    let again = store.put("t", "k", "s", b"[2]", &[], &ROOMY).unwrap();
    assert!(again.created);
    assert_eq!(store.get("t", &again.entry.id).unwrap().1, b"[2]");
}

#[test]
fn puts_in_progress_hold_at_most_the_quota_and_give_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    let small = Retention {
        quota_bytes: 1000,
        ..ROOMY
    };
    let a = store.begin_put("t", 600, &small).unwrap();
    let refused = store.begin_put("t", 600, &small);
    assert!(
        matches!(
            refused,
            Err(StoreError::UploadsOverQuota {
                quota: 1000,
                pending: 600,
                size: 600
            })
        ),
        "{:?}",
        refused.map(|_| ())
    );
    // Another tenant has its own quota.
    let other = store.begin_put("u", 600, &small).unwrap();
    drop(a);
    let mut b = store.begin_put("t", 600, &small).unwrap();
    // No more than declared.
    b.write(&[b'1'; 600]).unwrap();
    assert!(b.write(b"1").is_err());
    drop((b, other));
    let tmp = dir.path().join("store").join("tmp");
    assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0);
}

#[test]
fn opening_removes_every_temp_file_its_owner_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    drop(Store::open(&path).unwrap());
    // One process owns a store, so at open every temp file is a put that a crash cut short,
    // whoever wrote it (its pid, this test's, is no sign that it is still being written).
    let tmp = path.join("tmp");
    std::fs::write(tmp.join("1-1-0"), b"partial").unwrap();
    std::fs::write(tmp.join("not-a-pid"), b"partial").unwrap();
    std::fs::write(tmp.join(format!("{}-1-0", std::process::id())), b"partial").unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.opened().temp_files, 3);
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}
