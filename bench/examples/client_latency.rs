//! One small run (`.a` over `{"a":1}`) through the Rust client on one connection, timed: the
//! Rust line of `bench/clients/run.sh`, which times every client side by side.
//!
//! Usage: cargo run --release -p jqjail-bench --example client_latency -- SOCKET [N [PAUSE_US]]
//!
//! With PAUSE_US, each timed run follows a pause that long: long enough (a few ms) and the
//! daemon's pool is full again when the run comes, so the time is the round trip alone, not
//! the round trip plus the refills of the runs before it competing for the machine's cores.

use jqjail_client::{Client, RunOptions};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let socket = args
        .next()
        .expect("usage: client_latency SOCKET [N [PAUSE_US]]");
    let n: usize = args.next().map_or(2000, |n| n.parse().expect("N"));
    let pause = args
        .next()
        .map(|us| std::time::Duration::from_micros(us.parse().expect("PAUSE_US")));
    let mut c = Client::connect(&socket).unwrap();
    let options = RunOptions::default();
    for _ in 0..200 {
        c.run(".a", br#"{"a":1}"#, &options).unwrap();
    }
    let mut us: Vec<f64> = (0..n)
        .map(|_| {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            let start = Instant::now();
            let reply = c.run(".a", br#"{"a":1}"#, &options).unwrap();
            assert_eq!(reply.output, "1");
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    us.sort_by(f64::total_cmp);
    println!(
        "{{\"client\":\"rust\",\"n\":{n},\"p50_us\":{:.0},\"p90_us\":{:.0}}}",
        us[n / 2],
        us[n * 9 / 10]
    );
}
