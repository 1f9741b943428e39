//! The store shared by several processes (harness = false: the binary re-executes itself as
//! the putting child, so no test-harness entry point exists that only serves as a helper):
//! four processes putting at once lose and damage nothing, and a putter killed with SIGKILL
//! at random points leaves only whole hides.

use jqjail_store::{OnFull, Retention, Store};
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
    let tests: [(&str, fn()); 2] = [
        (
            "parallel puts from several processes",
            parallel_puts_from_several_processes,
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

fn parallel_puts_from_several_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    drop(Store::open(&path).unwrap());
    let children: Vec<_> = (0..4)
        .map(|w| child(&path, w, 25).spawn().unwrap())
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let store = Store::open(&path).unwrap();
    let entries = store.list("t").unwrap();
    // Each worker's contents are distinct except where a size repeats; count distinct IDs.
    let expected: std::collections::HashSet<(u64, Vec<u8>)> = (0..4u64)
        .flat_map(|w| (0..25u64).map(move |i| (w, i)))
        .map(|(w, i)| {
            let size = ((w * 7919 + i * 104_729) % 300_000) as usize;
            (w, (0..size).map(|j| (j as u64 ^ w ^ i) as u8).collect())
        })
        .collect();
    assert_eq!(entries.len(), expected.len(), "a put was lost");
    assert_eq!(check_every_entry_whole(&store), expected.len());
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
    // After the reopen's sweep, every object file on disk is a listed hide.
    let objects: usize = std::fs::read_dir(path.join("objects"))
        .unwrap()
        .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count())
        .sum();
    assert_eq!(objects, n);
    eprintln!("{n} whole hides after 8 SIGKILLs");
}
