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
fn sigterm_drains_in_flight_requests_then_exits() {
    let mut d = Daemon::start();
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
fn no_worker_outlives_a_killed_daemon() {
    let mut d = Daemon::start_with(&["--prestart", "3"], &[]);
    assert!(wait_until(Duration::from_secs(5), || d.workers().len() >= 3));
    let workers = d.workers();
    signal(d.pid(), libc::SIGKILL);
    let _ = d.child.wait();
    assert!(
        wait_until(Duration::from_secs(5), || workers
            .iter()
            .all(|&p| !alive(p))),
        "workers survived: {:?}",
        workers.iter().filter(|&&p| alive(p)).collect::<Vec<_>>()
    );
}

#[test]
fn a_live_daemon_socket_is_never_taken_over() {
    let d = Daemon::start();
    let out = std::process::Command::new(crate::util::DAEMON)
        .arg("--socket")
        .arg(&d.socket)
        .arg("--store")
        .arg(d.store())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already listening"), "{stderr}");
    assert_eq!(d.ok(".", "1"), "1");
}
