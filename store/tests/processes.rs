//! The store and other processes (harness = false: the binary re-executes itself as the
//! child, so no test-harness entry point exists that only serves as a helper): one process
//! owns a store, and others are refused until it is gone, however it goes; a putter killed
//! with SIGKILL at random points leaves only whole hides.

use jqjail_store::{OnFull, Retention, Store, StoreError};
use sha2::{Digest, Sha256};
use std::process::{Command, ExitCode};
use std::time::Duration;

const ROOMY: Retention = Retention {
    quota_bytes: 1 << 30,
    max_age: None,
    on_full: OnFull::Refuse,
};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var("JQJAIL_STORE_CHILD") {
        child_put_loop(&spec);
        return ExitCode::SUCCESS;
    }
    if let Ok(dir) = std::env::var("JQJAIL_STORE_OPENER") {
        return match Store::open(dir.as_ref()) {
            Ok(_) => ExitCode::SUCCESS,
            Err(StoreError::InUse { .. }) => ExitCode::from(IN_USE),
            Err(e) => panic!("{e}"),
        };
    }
    let tests: [(&str, fn()); 2] = [
        (
            "one process owns a store, until it is gone",
            one_process_owns_a_store_until_it_is_gone,
        ),
        (
            "SIGKILL at random points leaves only whole hides",
            sigkill_at_random_points_leaves_only_whole_hides,
        ),
    ];
    let mut failed = 0;
    for (name, test) in tests {
        match std::panic::catch_unwind(test) {
            Ok(()) => println!("store process test {name} ... ok"),
            Err(_) => {
                println!("store process test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    println!(
        "store process tests: {} passed, {failed} failed",
        tests.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Child mode: `JQJAIL_STORE_CHILD=<dir>:<worker>:<count>` puts `count` hides and exits; with
/// count 0 it puts until killed.
fn child_put_loop(spec: &str) {
    let mut parts = spec.rsplitn(3, ':');
    let count: u64 = parts.next().unwrap().parse().unwrap();
    let worker: u64 = parts.next().unwrap().parse().unwrap();
    let dir = parts.next().unwrap();
    let store = Store::open(dir.as_ref()).unwrap();
    let mut i = 0u64;
    while count == 0 || i < count {
        let size = ((worker * 7919 + i * 104_729) % 300_000) as usize;
        let content: Vec<u8> = (0..size).map(|j| (j as u64 ^ worker ^ i) as u8).collect();
        let source = format!("w{worker}");
        store
            .put(
                "t",
                "k",
                &source,
                &content,
                &[("i".into(), i.to_string())],
                &ROOMY,
            )
            .unwrap();
        i += 1;
    }
}

fn child(dir: &std::path::Path, worker: u64, count: u64) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(
        "JQJAIL_STORE_CHILD",
        format!("{}:{worker}:{count}", dir.display()),
    );
    cmd
}

fn check_every_entry_whole(store: &Store) -> usize {
    let entries = store.list("t").unwrap();
    for e in &entries {
        let (_, bytes) = store.get("t", &e.id).unwrap();
        assert_eq!(bytes.len() as u64, e.size, "{}", e.id);
        assert_eq!(sha(&bytes), e.sha256, "{} is not what was put", e.id);
    }
    entries.len()
}

/// The exit status of an opener refused with `InUse`.
const IN_USE: u8 = 3;

/// Whether another process may open the store at `dir` now: Some(true) it did, Some(false)
/// it was refused as in use.
fn another_process_opens(dir: &std::path::Path) -> bool {
    let status = Command::new(std::env::current_exe().unwrap())
        .env("JQJAIL_STORE_OPENER", dir)
        .status()
        .unwrap();
    match status.code() {
        Some(0) => true,
        Some(c) if c == i32::from(IN_USE) => false,
        _ => panic!("the opener failed: {status}"),
    }
}

fn one_process_owns_a_store_until_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let held = Store::open(&path).unwrap();
    assert!(!another_process_opens(&path), "opened beside its owner");
    // In this process too: a second `Store` on the same directory is refused.
    assert!(matches!(Store::open(&path), Err(StoreError::InUse { .. })));
    drop(held);
    assert!(
        another_process_opens(&path),
        "still refused after its owner closed it"
    );
    // An owner killed mid-put lets go of it with its life.
    let mut putter = child(&path, 0, 0).spawn().unwrap();
    assert!(
        (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !another_process_opens(&path)
        }),
        "the putter never held the store"
    );
    putter.kill().unwrap();
    putter.wait().unwrap();
    // Opened at once (the kill released the lock), with whatever it had put whole.
    let store = Store::open(&path).unwrap();
    check_every_entry_whole(&store);
}

fn sigkill_at_random_points_leaves_only_whole_hides() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    drop(Store::open(&path).unwrap());
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..8 {
        let mut c = child(&path, round, 0).spawn().unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 120));
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let n = check_every_entry_whole(&store);
    assert!(n > 0, "no put completed in 8 rounds");
    // After the reopen's sweep, every object file on disk (but the directory's `.tenant`
    // name) is a listed hide, and nothing was set aside as lost.
    let objects: usize = std::fs::read_dir(path.join("objects"))
        .unwrap()
        .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count() - 1)
        .sum();
    assert!(!path.join("lost").exists());
    assert_eq!(objects, n);
    eprintln!("{n} whole hides after 8 SIGKILLs");
}
