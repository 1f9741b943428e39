//! Many clients, dying workers, draining and dying daemons.

use crate::util::{Daemon, alive, busy_worker, expect_code, signal, wait_until};
use jqjail_client::{Client, ErrorCode, RunOptions};
use std::time::Duration;

/// A filter that computes for a second or so and then succeeds, well inside the deadline.
const SLOW_SUM: &str = "reduce range(3000000) as $i (0; . + $i)";
const SLOW_SUM_RESULT: &str = "4499998500000";

#[test]
fn fifty_concurrent_clients_each_get_their_own_answer() {
    let d = Daemon::start();
    let socket = d.socket.clone();
    let threads: Vec<_> = (0..50)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket).unwrap();
                let input = format!(r#"{{"n":{i},"pad":"{}"}}"#, "x".repeat(i * 100));
                let mut outputs = Vec::new();
                for round in 0..3 {
                    let filter = format!(".n * 1000 + {round}");
                    let reply = c
                        .run(&filter, input.as_bytes(), &RunOptions::default())
                        .unwrap();
                    outputs.push(reply.output);
                }
                (i, outputs)
            })
        })
        .collect();
    for t in threads {
        let (i, outputs) = t.join().unwrap();
        let expected: Vec<String> = (0..3).map(|r| (i * 1000 + r).to_string()).collect();
        assert_eq!(outputs, expected, "client {i}");
    }
}

#[test]
fn a_worker_killed_mid_request_is_explained_and_replaced() {
    let d = Daemon::start();
    let socket = d.socket.clone();
    let busy = std::thread::spawn(move || {
        Client::connect(&socket)
            .unwrap()
            .run("def f: f; f", b"null", &RunOptions::default())
    });
    let victim = busy_worker(&d).expect("no busy worker found");
    signal(victim, libc::SIGKILL);
    let msg = expect_code(busy.join().unwrap(), ErrorCode::WorkerCrashed);
    assert!(msg.contains("SIGKILL"), "{msg}");
    assert!(msg.contains("not by jqjail"), "{msg}");
    assert_eq!(d.ok(".a", r#"{"a":"next"}"#), r#""next""#);
}

#[test]
fn idle_workers_killed_from_outside_do_not_fail_requests() {
    let d = Daemon::start_with(&["--prestart", "2"], &[]);
    assert!(wait_until(Duration::from_secs(5), || d.workers().len() >= 2));
    let idle = d.workers();
    for &pid in &idle {
        signal(pid, libc::SIGKILL);
    }
    // Dead (zombies until the daemon reaps them) before any request is sent.
    assert!(wait_until(Duration::from_secs(5), || idle
        .iter()
        .all(|&p| !alive(p))));
    for i in 0..5 {
        assert_eq!(d.ok(".", &i.to_string()), i.to_string());
    }
}

#[test]
fn a_killed_zygote_is_replaced_and_no_request_fails() {
    let d = Daemon::start_with(&["--prestart", "2"], &[]);
    assert!(wait_until(Duration::from_secs(5), || d.zygote().is_some()));
    let first = d.zygote().unwrap();
    signal(first, libc::SIGKILL);
    assert!(wait_until(Duration::from_secs(5), || !alive(first)));
    // More requests than the pool held when the zygote died: the rest need a new zygote.
    for i in 0..10 {
        assert_eq!(d.ok(".", &i.to_string()), i.to_string());
    }
    let second = d.zygote().expect("a zygote runs again");
    assert_ne!(first, second);
    assert!(
        crate::util::wait_until(Duration::from_secs(5), || d
            .log()
            .contains("worker zygote stopped answering; replacing it")),
        "{}",
        d.log()
    );
}

#[test]
fn sigterm_drains_in_flight_requests_then_exits() {
    // The slow request needs about 1.3 s of CPU; on a loaded 2-core CI machine it got that
    // in more than the default 5 s deadline. The drain is what is tested, not the deadline.
    let mut d = Daemon::start_with(&["--timeout-ms", "20000"], &[]);
    let socket = d.socket.clone();
    // A request that takes a while but finishes well inside its deadline.
    let slow = std::thread::spawn(move || {
        let mut c = Client::connect(&socket).unwrap();
        c.run(SLOW_SUM, b"null", &RunOptions::default())
    });
    busy_worker(&d).expect("the slow request is running");
    signal(d.pid(), libc::SIGTERM);
    let reply = slow
        .join()
        .unwrap()
        .expect("the in-flight request completes");
    assert_eq!(reply.output, SLOW_SUM_RESULT);
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!d.socket.exists(), "socket file removed on exit");
}

#[test]
fn no_worker_or_zygote_outlives_a_killed_daemon() {
    let mut d = Daemon::start_with(&["--prestart", "3"], &[]);
    // One worker busy with a filter that never ends: it reads nothing from its socket, so
    // only its parent-death signal can stop it before its CPU limit (6 s).
    let socket = d.socket.clone();
    std::thread::spawn(move || {
        let mut c = Client::connect(&socket).unwrap();
        let _ = c.run("last(range(1e15))", b"null", &RunOptions::default());
    });
    let busy = busy_worker(&d).expect("the endless request is running");
    let ready = |d: &Daemon| d.workers().len() >= 4 && d.zygote().is_some();
    assert!(wait_until(Duration::from_secs(5), || ready(&d)));
    let mut workers = d.workers();
    workers.extend(d.zygote());
    assert!(workers.contains(&busy));
    signal(d.pid(), libc::SIGKILL);
    let _ = d.child.wait();
    assert!(
        wait_until(Duration::from_secs(3), || workers
            .iter()
            .all(|&p| !alive(p))),
        "workers survived: {:?}",
        workers.iter().filter(|&&p| alive(p)).collect::<Vec<_>>()
    );
}

#[test]
fn a_live_daemon_socket_is_never_taken_over() {
    let d = Daemon::start();
    // A store of its own: one daemon owns a store (a second is refused for that first, which
    // `faults.rs` tests); this is about the socket.
    let store = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::util::DAEMON)
        .arg("--socket")
        .arg(&d.socket)
        .arg("--store")
        .arg(store.path().join("store"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already listening"), "{stderr}");
    assert_eq!(d.ok(".", "1"), "1");
}
