//! Splits a request's latency as the client, the supervisor and the worker see it:
//! `probe SOCKET N FILE [FILTER]` runs FILTER (default `.[0]`) N times over FILE, `GAP` ms
//! apart (default 3), and prints the medians and 90th percentiles of the client's round trip,
//! the supervisor's wall time and the worker's CPU time (its whole life, start-up included).

use jqjail_client::{Client, RunOptions};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(socket), Some(n), Some(file)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: probe SOCKET N FILE [FILTER]");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N is a number");
    let filter = args.next().unwrap_or_else(|| ".[0]".into());
    let gap = std::env::var("GAP").map_or(3, |v| v.parse().expect("GAP is a number"));
    let input = std::fs::read(file).expect("readable FILE");
    let mut client = Client::connect(&socket).expect("a daemon at SOCKET");
    let (mut round_trip, mut wall, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        let reply = client
            .run(&filter, &input, &RunOptions::default())
            .expect("the filter runs");
        round_trip.push(t.elapsed().as_micros() as u64);
        wall.push(reply.cost.wall_us);
        cpu.push(reply.cost.cpu_us);
        std::thread::sleep(Duration::from_millis(gap));
    }
    for (name, mut v) in [
        ("client round trip", round_trip),
        ("supervisor wall", wall),
        ("worker cpu", cpu),
    ] {
        v.sort_unstable();
        println!(
            "{name}: p50 {} us, p90 {} us",
            v[v.len() / 2],
            v[v.len() * 9 / 10]
        );
    }
}
