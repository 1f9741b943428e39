//! The soak (issue 35): eight uids load the real daemon with a mix of everything it serves
//! for `JQJAIL_SOAK_SECS` seconds (60 unless set; CI sets 600, and an hour or more is run by
//! hand): small runs whose answers are checked, 20 MiB runs, hostile filters (endless, memory
//! hungry, failing), puts, cuts, searches, lists, usage and deletes, with a SIGHUP reload every
//! 30 s. The daemon's resident memory, descriptors, threads and workers, and the store's temp
//! files, bytes and WAL, are sampled every second.
//!
//! It fails when a request goes unanswered (a connection error where the daemon owed an
//! answer), an answer is wrong, an acknowledged hide is lost, or a series grows without
//! bound: its low-water mark per twelfth of the run, in the last quarter, above the highest
//! of the first half by more than the series' slack. (Low-water marks, because a 20 MiB run
//! in flight lifts every sample it falls on; a leak lifts the floor.) The series go to
//! `target/soak.csv` (or `JQJAIL_SOAK_CSV`) for `bench/soak-plot.py`, and the figures, with the
//! fitted slopes of the floors over the second half, to `target/soak.txt` beside it.

use crate::Attack;
use crate::util::{Daemon, rss, signal};
use jqjail_client::{Client, ClientError, LimitOverrides, RunOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// `SOCKET|MODE|CONNECTIONS|SECONDS`: turns `soak_helper` into one of the soak's tenants.
const SOAK_ENV: &str = "JQJAIL_SOAK";

/// Hides a tenant keeps at most; past it, it deletes its oldest (so the store stays bounded
/// without eviction, and every hide kept can be checked at the end).
const KEEP: usize = 40;

/// One of the soak's tenants, run as another uid (ignored otherwise). Prints one report line.
#[test]
#[ignore = "run by the soak as another uid"]
fn soak_helper() {
    let Some(Attack { socket, until, .. }) = Attack::from_env(SOAK_ENV) else {
        return;
    };
    let small: String = format!(
        "[{}]",
        (0..200)
            .map(|i| format!("{{\"i\":{i}}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let big: String = format!(
        "[{}]",
        (0..400_000)
            .map(|i| format!("{{\"i\":{i},\"s\":\"{:032}\"}}", i))
            .collect::<Vec<_>>()
            .join(",")
    );
    let hostile = [
        ("def f: f; f", 300u64),
        ("[range(1e9)]", 5000),
        ("error(\"boom\")", 5000),
        ("[limit(100000; repeat(\"x\"))] | add | length", 5000),
    ];
    let mut kept: Vec<(String, String)> = Vec::new(); // (id, content)
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    let (mut sent, mut unanswered, mut wrong) = (0u64, 0u64, 0u64);
    let mut c = Client::connect(&socket).unwrap();
    let mut op = 0u64;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
    while Instant::now() < until {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        op += 1;
        sent += 1;
        let outcome: Result<(), ClientError> = match op % 20 {
            0 if op.is_multiple_of(200) => c
                .run(".[123456].i", big.as_bytes(), &RunOptions::default())
                .map(|r| wrong += u64::from(r.output != "123456")),
            0 | 19 => {
                let (filter, ms) = hostile[(rng % hostile.len() as u64) as usize];
                let opts = RunOptions {
                    limits: LimitOverrides {
                        timeout_ms: Some(ms),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                c.run(filter, b"null", &opts).map(|_| ())
            }
            1..=6 => {
                let i = rng % 200;
                c.run(
                    &format!(".[{i}].i"),
                    small.as_bytes(),
                    &RunOptions::default(),
                )
                .map(|r| wrong += u64::from(r.output != i.to_string()))
            }
            7..=9 => {
                let content = format!(
                    "{{\"op\":{op},\"pad\":\"{}\"}}",
                    "p".repeat((rng % 200_000) as usize)
                );
                c.hide_put("soak", "soak", content.as_bytes(), &BTreeMap::new())
                    .map(|put| {
                        if put.created {
                            kept.push((put.entry.id, content));
                        }
                    })
            }
            10 | 11 if !kept.is_empty() => {
                let id = &kept[(rng % kept.len() as u64) as usize].0;
                c.hide_cut(id, 1, Some(4096), rng.is_multiple_of(2))
                    .map(|_| ())
            }
            12 if !kept.is_empty() => {
                let id = kept[(rng % kept.len() as u64) as usize].0.clone();
                c.hide_search(jqjail_client::HideSearchRequest {
                    id,
                    query: "pad".into(),
                    ignore_case: rng.is_multiple_of(2),
                    page_size: None,
                    max_matches: None,
                })
                .map(|_| ())
            }
            13 => c.hide_list().map(|_| ()),
            14..=16 if kept.len() > KEEP => {
                let (id, _) = kept.remove(0);
                c.hide_delete(&id).map(|_| ())
            }
            _ => c.hide_usage().map(|_| ()),
        };
        match outcome {
            Ok(()) => *outcomes.entry("ok".into()).or_default() += 1,
            Err(ClientError::Server(e)) => *outcomes.entry(e.code.to_string()).or_default() += 1,
            Err(e) => {
                unanswered += 1;
                eprintln!("unanswered: {e}");
                c = Client::connect(&socket).unwrap();
            }
        }
    }
    let lost = kept
        .iter()
        .filter(|(id, content)| {
            !c.hide_get(id)
                .is_ok_and(|h| h.content.as_bytes() == content.as_bytes())
        })
        .count();
    println!(
        "soak tenant: sent={sent} unanswered={unanswered} wrong={wrong} lost={lost} kept={} outcomes={outcomes:?}",
        kept.len()
    );
}

/// The series sampled, with the slack each floor may rise by before it counts as growth.
/// `fds` leaves out the two descriptors each worker cgroup holds (`cgroup.procs` and
/// `memory.oom_control`): emptied cgroups are kept for reuse, up to 64 of them
/// (`supervisor/src/cgroup.rs`), so their number ratchets up to the most workers ever alive
/// at once, a bounded cache that a late burst lifts. `worker_cgroups` counts them, and may
/// rise by that bound.
const SERIES: [(&str, f64); 8] = [
    ("rss_mib", 24.0),
    ("fds", 8.0),
    ("worker_cgroups", 64.0),
    ("threads", 4.0),
    ("workers", 2.0),
    ("temp_files", 2.0),
    ("store_mib", 16.0),
    ("wal_mib", 8.0),
];

fn sample(d: &Daemon) -> [f64; 8] {
    let pid = d.pid();
    let count = |dir: &str| std::fs::read_dir(dir).map_or(0, |r| r.count()) as f64;
    let threads = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    let store = d.store();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let (mut fds, mut cgroups) = (0.0, 0.0);
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        match std::fs::read_link(fd.path()) {
            Ok(to) if to.to_string_lossy().contains("/jqjail-workers-") => {
                cgroups += f64::from(u8::from(to.ends_with("cgroup.procs")));
            }
            _ => fds += 1.0,
        }
    }
    [
        mib(rss(pid)),
        fds,
        cgroups,
        threads,
        d.workers().len() as f64,
        count(store.join("tmp").to_str().unwrap()),
        mib(bytes_under(&store.join("objects"))),
        mib(std::fs::metadata(store.join("index.sqlite3-wal")).map_or(0, |m| m.len())),
    ]
}

fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => bytes_under(&e.path()),
                _ => e.metadata().map_or(0, |m| m.len()),
            })
            .sum()
    })
}

/// Least-squares slope of `ys` over `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

#[test]
fn a_soak_of_mixed_load_from_eight_uids_leaks_nothing() {
    let Some((_alone, d, _dir)) = crate::daemon_to_attack() else {
        return;
    };
    let secs: u64 = std::env::var("JQJAIL_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let tenants: Vec<_> = (0..8)
        .map(|i| {
            Attack::start(
                62001 + i,
                ("soak::soak_helper", SOAK_ENV),
                &d,
                "mixed",
                1,
                secs,
            )
        })
        .collect();
    let start = Instant::now();
    let mut samples: Vec<(f64, [f64; 8])> = Vec::new();
    let mut reloads = 0;
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_secs(1));
        let t = start.elapsed().as_secs_f64();
        samples.push((t, sample(&d)));
        if samples.len().is_multiple_of(30) {
            signal(d.pid(), libc::SIGHUP);
            reloads += 1;
        }
    }
    let mut reports = Vec::new();
    for t in tenants {
        let out = t.wait_with_output().unwrap();
        reports.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let field = |r: &str, name: &str| -> u64 {
        r.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the report {r:?}"))
    };
    let total = |name: &str| reports.iter().map(|r| field(r, name)).sum::<u64>();
    let (sent, unanswered, wrong, lost, kept) = (
        total("sent"),
        total("unanswered"),
        total("wrong"),
        total("lost"),
        total("kept"),
    );
    // The series: written out, then each one's floor per twelfth of the run.
    let csv = std::env::var_os("JQJAIL_SOAK_CSV").map_or_else(
        || Path::new(env!("CARGO_TARGET_TMPDIR")).join("../soak.csv"),
        std::path::PathBuf::from,
    );
    let mut text = format!("t_s,{}\n", SERIES.map(|(n, _)| n).join(","));
    for (t, v) in &samples {
        let row: Vec<String> = v.iter().map(|x| format!("{x:.2}")).collect();
        text.push_str(&format!("{t:.1},{}\n", row.join(",")));
    }
    let _ = std::fs::write(&csv, text);
    let windows = 12;
    let per = samples.len().div_ceil(windows).max(1);
    let mut grew = Vec::new();
    let mut slopes = Vec::new();
    for (k, (name, slack)) in SERIES.iter().enumerate() {
        let floors: Vec<(f64, f64)> = samples
            .chunks(per)
            .map(|w| {
                let low = w.iter().map(|(_, v)| v[k]).fold(f64::INFINITY, f64::min);
                (w[w.len() / 2].0, low)
            })
            .collect();
        let half = floors.len() / 2;
        let first = floors[..half.max(1)]
            .iter()
            .map(|f| f.1)
            .fold(f64::MIN, f64::max);
        let last = floors[floors.len() * 3 / 4..]
            .iter()
            .map(|f| f.1)
            .fold(f64::MIN, f64::max);
        let (xs, ys): (Vec<f64>, Vec<f64>) = floors[half..].iter().copied().unzip();
        let per_hour = slope(&xs, &ys) * 3600.0;
        slopes.push(format!("{name} {first:.1}→{last:.1} ({per_hour:+.1}/h)"));
        if last > first + slack {
            grew.push(format!(
                "{name}: floor {first:.1} in the first half, {last:.1} at the end"
            ));
        }
    }
    let mut summary = format!(
        "soak of {secs} s, 8 uids, {reloads} reloads: {sent} requests, {unanswered} unanswered, \
         {wrong} wrong answers, {kept} hides kept and {lost} lost; floors first half → last \
         quarter (fitted slope of the second half): {}; series in {}\n",
        slopes.join(", "),
        csv.display()
    );
    for r in &reports {
        summary.push_str(&format!("  {r}\n"));
    }
    // Beside the series, for whoever reads the run (a passing test's output is captured).
    let _ = std::fs::write(csv.with_extension("txt"), &summary);
    eprint!("{summary}");
    assert!(sent > 0 && reports.len() == 8, "{reports:?}");
    assert_eq!(unanswered, 0, "requests went unanswered");
    assert_eq!(wrong, 0, "wrong answers");
    assert_eq!(lost, 0, "acknowledged hides lost");
    assert!(grew.is_empty(), "grew without bound: {grew:?}");
    assert!(rss(d.pid()) > 0, "the daemon is gone");
}
