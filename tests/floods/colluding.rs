//! Issue 34's admission attacks by several uids together. Each budget kept one uid to its
//! share, but a few uids together held all of one with bytes that never came or were never
//! read, for the whole frame timeout (30 s), and took it again at once:
//! - four uids sending a 512 KiB frame's length prefix alone on 8 connections each held all
//!   request memory (a victim got 2 tiny runs answered in 45 s);
//! - two uids trickling a byte every 4 s into one upload each held both upload turns (99 of 99
//!   victim runs over 256 KiB answered `OVERLOADED`);
//! - four uids not reading a 20 MiB `hide_get` each held every large-answer turn (a victim's
//!   `hide_cut` waited up to 28.7 s).
//!
//! Bytes now move at a minimum pace or lose what they hold (`supervisor/src/pace.rs`), and an
//! upload waits for a turn in turn with other tenants. With 2, 4, 8 and 16 attacking uids, a
//! victim's small run, large-input run and `hide_cut` are each answered within the frame
//! timeout. The attackers are the test binary again, as `colluding_helper`, as other uids.

use crate::Attack;
use crate::util::Daemon;
use jqjail_client::{Client, RunOptions};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// `SOCKET|MODE|CONNECTIONS|SECONDS`.
const ENV: &str = "JQJAIL_COLLUDING";

fn attack_as(
    uid: u32,
    d: &Daemon,
    mode: &str,
    connections: usize,
    secs: u64,
) -> std::process::Child {
    Attack::start(
        uid,
        ("colluding::colluding_helper", ENV),
        d,
        mode,
        connections,
        secs,
    )
}

/// A raw connection after the hello.
fn hello(socket: &str) -> Option<UnixStream> {
    let mut s = UnixStream::connect(socket).ok()?;
    let hello = [0x00, 0x02, 0x00];
    s.write_all(&(hello.len() as u32).to_le_bytes()).ok()?;
    s.write_all(&hello).ok()?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(s)
}

/// Whether the daemon has closed `s` (its answer, if any, left unread).
fn closed_by_daemon(s: &UnixStream) -> bool {
    let mut fd = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut fd, 1, 0) };
    fd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// The attacker, run by the tests below as another uid (ignored otherwise). Modes:
/// - `prefixes`: each connection sends the length prefix of a 512 KiB frame and nothing more;
/// - `trickle`: each starts a run whose 1 MiB input streams, and sends a byte of it a second;
/// - `unread`: stores a 20 MiB hide, then each connection asks for it whole and never reads;
/// - `burst`: starts a run whose 16 MiB input streams, sends half of it at once, then a byte a
///   second (credit banked by the burst must not pay for the trickle);
/// - `slowread`: asks for its 20 MiB hide whole and reads 64 KiB of it every 250 ms (a pace
///   of 256 KiB/s, which an answer's turn must not be held at for the frame timeout).
///
/// A connection the daemon closes is opened again at once, until the time is up.
#[test]
#[ignore = "run by the colluding-uid tests as another uid"]
fn colluding_helper() {
    let Some(Attack {
        socket,
        mode,
        connections,
        until,
    }) = Attack::from_env(ENV)
    else {
        return;
    };
    let (socket, mode) = (socket.as_str(), mode.as_str());
    let hide_id = (mode == "unread" || mode == "slowread").then(|| {
        let mut c = Client::connect(socket).unwrap();
        let big = vec![b'7'; 20 << 20];
        c.hide_put("attack", "big", &big, &BTreeMap::new())
            .unwrap()
            .entry
            .id
    });
    let open = |mode: &str| -> Option<UnixStream> {
        let mut s = hello(socket)?;
        match mode {
            "prefixes" => s.write_all(&(512u32 << 10).to_le_bytes()).ok()?,
            "trickle" => {
                let frame = crate::util::run_frame(".", 1 << 20);
                s.write_all(&(frame.len() as u32).to_le_bytes()).ok()?;
                s.write_all(&frame).ok()?;
            }
            "burst" => {
                let frame = crate::util::run_frame(".", 16 << 20);
                s.write_all(&(frame.len() as u32).to_le_bytes()).ok()?;
                s.write_all(&frame).ok()?;
                s.write_all(b"[").ok()?;
                s.write_all(&vec![b' '; 8 << 20]).ok()?;
            }
            _ => {
                use jqjail_protocol::{Encoding, HideRef, Request};
                let id = hide_id.clone().unwrap();
                let frame = Encoding::Bincode
                    .encode(&Request::HideGet(HideRef { id }))
                    .unwrap();
                s.write_all(&(frame.len() as u32).to_le_bytes()).ok()?;
                s.write_all(&frame).ok()?;
            }
        }
        Some(s)
    };
    let mut held: Vec<Option<UnixStream>> = (0..connections).map(|_| open(mode)).collect();
    let mut reopened = 0u64;
    let (mut last_trickle, mut last_read) = (Instant::now(), Instant::now());
    let mut chunk = vec![0u8; 64 << 10];
    while Instant::now() < until {
        let trickle =
            matches!(mode, "trickle" | "burst") && last_trickle.elapsed() >= Duration::from_secs(1);
        if trickle {
            last_trickle = Instant::now();
        }
        let read = mode == "slowread" && last_read.elapsed() >= Duration::from_millis(250);
        if read {
            last_read = Instant::now();
        }
        for slot in &mut held {
            let gone = slot.as_ref().is_none_or(closed_by_daemon);
            if gone {
                *slot = open(mode);
                reopened += 1;
            } else if let Some(s) = slot {
                if trickle {
                    let _ = s.write_all(b" ");
                }
                if read {
                    s.set_nonblocking(true).unwrap();
                    let _ = s.read(&mut chunk);
                    s.set_nonblocking(false).unwrap();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "colluding ({mode}): {connections} held, {reopened} reopened after the daemon closed them"
    );
}

/// What the victim is answered, and how long each took.
fn victim_is_served(d: &Daemon, hide: &str, limit: Duration) -> Vec<(&'static str, Duration)> {
    let mut took = Vec::new();
    let start = Instant::now();
    assert_eq!(
        d.client()
            .run(".a", br#"{"a":1}"#, &RunOptions::default())
            .unwrap()
            .output,
        "1"
    );
    took.push(("small run", start.elapsed()));
    let start = Instant::now();
    let input = format!("{{\"a\":5,\"pad\":\"{}\"}}", "x".repeat(300 << 10));
    let out = d
        .client()
        .run(".a", input.as_bytes(), &RunOptions::default());
    assert_eq!(out.expect("the large-input run").output, "5");
    took.push(("large-input run", start.elapsed()));
    let start = Instant::now();
    let mut c: Client = d.client();
    c.hide_cut(hide, 1, None, false).expect("the hide_cut");
    took.push(("hide_cut", start.elapsed()));
    for (what, t) in &took {
        assert!(
            t < &limit,
            "the victim's {what} took {t:?}, over half the frame timeout, {limit:?}"
        );
    }
    took
}

#[test]
fn colluding_uids_cannot_hold_a_budget_against_another_tenant() {
    // The defaults on a host of this size; the frame timeout is the bound.
    let Some((_alone, d, _dir)) = crate::daemon_to_attack() else {
        return;
    };
    // Half the frame timeout: a budget held until the frame timeout (as before the pace)
    // makes a victim wait up to all of it.
    let limit = d.cfg.frame_timeout / 2;
    let hide = d
        .client()
        .hide_put("victim", "page", &vec![b'x'; 100_000], &BTreeMap::new())
        .unwrap()
        .entry
        .id;
    for mode in ["prefixes", "trickle", "burst", "unread", "slowread"] {
        for uids in [2u32, 4, 8, 16] {
            // Each uid as many connections as the attack used (8), or its share of 32.
            let each = match mode {
                "prefixes" => 8,
                _ => (32 / uids as usize).max(1),
            };
            let attack: Vec<_> = (0..uids)
                .map(|i| attack_as(63000 + i, &d, mode, each, 8))
                .collect();
            // Let them take what they can (the `unread` attackers store their hide first).
            let stores = matches!(mode, "unread" | "slowread");
            std::thread::sleep(Duration::from_secs(if stores { 4 } else { 2 }));
            let took = victim_is_served(&d, &hide, limit);
            let mut reports = String::new();
            for a in attack {
                reports.push_str(&String::from_utf8_lossy(
                    &a.wait_with_output().unwrap().stdout,
                ));
            }
            let reports: Vec<&str> = reports
                .lines()
                .filter(|l| l.starts_with("colluding"))
                .collect();
            assert_eq!(reports.len(), uids as usize, "{reports:?}");
            eprintln!("{mode}, {uids} uids: victim {took:?}; {}", reports[0]);
        }
    }
}
