//! The flood attacks: several uids at once keeping both cores busy for minutes against a
//! victim, through the real `jqjaild`. A test binary of their own, so that cargo runs them
//! after (never beside) the `it` tests, whose deadlines assume a machine not already flooded;
//! here they run one at a time (`util::exclusive`).

// `util.rs` is the `it` tests' helpers, of which these use a part.
#![allow(unreachable_pub, dead_code)]

mod colluding;
mod soak;
mod store_flood;
#[path = "../it/util.rs"]
mod util;

use std::process::Child;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};
use util::{Daemon, helper_as};

/// What a helper run as another uid is to do: its daemon's socket, a mode of its own, how
/// many connections, until when. Passed in one environment variable as
/// `SOCKET|MODE|CONNECTIONS|SECONDS`.
pub struct Attack {
    /// The daemon's socket.
    pub socket: String,
    /// What to do, in the helper's own words.
    pub mode: String,
    /// Connections to hold at once.
    pub connections: usize,
    /// When to stop.
    pub until: Instant,
}

impl Attack {
    /// Runs `helper` as `uid` against `d`, told `mode`, `connections` and `secs` in `env`.
    pub fn start(
        uid: u32,
        (helper, env): (&str, &str),
        d: &Daemon,
        mode: &str,
        connections: usize,
        secs: u64,
    ) -> Child {
        let spec = format!("{}|{mode}|{connections}|{secs}", d.socket.display());
        helper_as(uid, helper, env, spec)
    }

    /// The attack a helper was told in `env`, or `None` (said on stderr) outside such a run.
    pub fn from_env(env: &str) -> Option<Attack> {
        let Ok(spec) = std::env::var(env) else {
            eprintln!("not a helper run: {env} is not set");
            return None;
        };
        let parts: Vec<&str> = spec.split('|').collect();
        Some(Attack {
            socket: parts[0].to_string(),
            mode: parts[1].to_string(),
            connections: parts[2].parse().unwrap(),
            until: Instant::now() + Duration::from_secs(parts[3].parse().unwrap()),
        })
    }
}

/// The daemon an attack runs against (the defaults, its socket open to every uid), with the
/// machine to itself: `None` (skipped, loudly) where the test cannot act as other uids. Bound
/// as `let (_alone, d, _dir)`, the daemon is stopped before the machine is let go.
pub fn daemon_to_attack() -> Option<(MutexGuard<'static, ()>, Daemon, tempfile::TempDir)> {
    if !util::root() {
        util::skip("needs root, to attack as other uids");
        return None;
    }
    let alone = util::exclusive();
    let (d, dir) = util::configured("");
    Some((alone, d, dir))
}
