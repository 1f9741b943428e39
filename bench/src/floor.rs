//! The floor under a small request's round trip on this machine: three processes passing one
//! small message each way over Unix stream sockets and doing nothing else, in the shape of a
//! jqjail request (client → daemon → worker → daemon → client: four messages, four wake-ups).
//! A design that relays each request through a daemon to a separate worker process pays at
//! least this, after the same pause. Measured beside jqjail's own round trip (`.[0]` over the
//! 2 KiB input), in blocks that alternate, after the same pause before each request: on a VM
//! whose idle vCPUs halt, a wake-up after a pause costs more the longer the pause was. (The
//! latency table's jqjail column is measured after four CLI runs and their 10 ms pauses, some
//! 50–80 ms.)

use crate::Samples;
use jqjail_client::{Client, RunOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The messages' sizes, in bytes, about a small request's: the request, the job sent to the
/// worker, the worker's answer, the reply.
const REQUEST: usize = 32;
const JOB: usize = 32;
const ANSWER: usize = 16;
const REPLY: usize = 32;

/// One row: the pause before each request, the relay's round trips and jqjail's.
pub(crate) struct Row {
    pub(crate) pause: Duration,
    pub(crate) relay: Samples,
    pub(crate) jqjail: Samples,
}

/// Measures each `(pause, n)` of `plan`: `n` requests a side after that pause, in `blocks`
/// alternating blocks.
pub(crate) fn measure(
    client: &mut Client,
    input: &[u8],
    plan: &[(Duration, usize)],
    blocks: usize,
) -> Result<Vec<Row>, String> {
    let mut relay = Relay::start()?;
    let options = RunOptions::default();
    let mut rows = Vec::new();
    for &(pause, n) in plan {
        let mut row = Row {
            pause,
            relay: Samples::default(),
            jqjail: Samples::default(),
        };
        let per_block = n.div_ceil(blocks).max(1);
        for block in 0..blocks {
            // Which side goes first alternates, so neither always follows the other.
            for side in [block % 2, 1 - block % 2] {
                for _ in 0..per_block {
                    std::thread::sleep(pause);
                    if side == 0 {
                        let t = Instant::now();
                        relay.round_trip()?;
                        row.relay.push(t.elapsed());
                    } else {
                        let t = Instant::now();
                        let answer = client.run(".[0]", input, &options);
                        row.jqjail.push(t.elapsed());
                        answer.map_err(|e| format!("jqjail's request failed: {e}"))?;
                    }
                }
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The two forked processes and the parent's end of the first socket.
struct Relay {
    to_daemon: UnixStream,
    children: [libc::pid_t; 2],
}

impl Relay {
    fn start() -> Result<Relay, String> {
        let (to_daemon, daemon_end) = UnixStream::pair().map_err(|e| e.to_string())?;
        let (daemon_to_worker, worker_end) = UnixStream::pair().map_err(|e| e.to_string())?;
        // The "worker": reads a job, writes an answer.
        let worker = fork(&[worker_end.as_raw_fd()], || {
            let mut sock = &worker_end;
            let mut buf = [0u8; JOB];
            while sock.read_exact(&mut buf).is_ok() {
                // An answer of its own, so that a test can tell it was handed on.
                for b in &mut buf[..ANSWER] {
                    *b = b.wrapping_add(1);
                }
                if sock.write_all(&buf[..ANSWER]).is_err() {
                    break;
                }
            }
        })?;
        // The "daemon": reads a request, hands it on, reads the answer, replies.
        let daemon = match fork(
            &[daemon_end.as_raw_fd(), daemon_to_worker.as_raw_fd()],
            || {
                let (mut client, mut worker) = (&daemon_end, &daemon_to_worker);
                let mut buf = [0u8; 64];
                while client.read_exact(&mut buf[..REQUEST]).is_ok()
                    && worker.write_all(&buf[..JOB]).is_ok()
                    && worker.read_exact(&mut buf[..ANSWER]).is_ok()
                    && client.write_all(&buf[..REPLY]).is_ok()
                {}
            },
        ) {
            Ok(pid) => pid,
            Err(e) => {
                // The worker's stream ends with this function: it exits, and is reaped here.
                drop((daemon_to_worker, worker_end));
                reap(worker);
                return Err(e);
            }
        };
        Ok(Relay {
            to_daemon,
            children: [worker, daemon],
        })
    }

    /// One request through both processes; its reply.
    fn round_trip(&mut self) -> Result<[u8; REPLY], String> {
        let request = [7u8; REQUEST];
        let mut reply = [0u8; REPLY];
        self.to_daemon
            .write_all(&request)
            .and_then(|()| self.to_daemon.read_exact(&mut reply))
            .map_err(|e| format!("the relay failed: {e}"))?;
        Ok(reply)
    }
}

impl Drop for Relay {
    /// Ends the parent's stream (the children see its end and exit) and reaps both.
    fn drop(&mut self) {
        let _ = self.to_daemon.shutdown(std::net::Shutdown::Both);
        for pid in self.children {
            reap(pid);
        }
    }
}

/// Waits for the child `pid`, through interruptions.
fn reap(pid: libc::pid_t) {
    // SAFETY: waits for a child this process forked.
    while unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) } == -1
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    {}
}

/// Forks a child that closes every descriptor but `keep` (its standard ones too: it holds no
/// pipe of its parent's open, so a parent's reader is never kept waiting by it), runs `body`,
/// and exits. The child only closes, reads, writes and exits (std's `read_exact` and
/// `write_all` on a socket allocate nothing, their errors included): no allocation and no
/// lock, as a fork of a process that has threads must. A child that cannot close the rest exits at once (a copy of
/// its peer's end would keep it from ever seeing the end of its stream), and so does one whose
/// `body` panics.
fn fork(keep: &[RawFd], body: impl FnOnce()) -> Result<libc::pid_t, String> {
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    keep.push(RawFd::MAX);
    // SAFETY: the child makes only async-signal-safe calls (close_range, recv, send, _exit)
    // on memory it already has.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            /// Ends the child if `body` unwinds, before it could return into the parent's code.
            struct ExitOnUnwind;
            impl Drop for ExitOnUnwind {
                fn drop(&mut self) {
                    // SAFETY: ends the child without running the parent's exit handlers.
                    unsafe { libc::_exit(2) }
                }
            }
            let _guard = ExitOnUnwind;
            let mut from = 0;
            for &fd in &keep {
                if fd > from {
                    // SAFETY: closes the child's copies of the descriptors from `from` to
                    // `fd - 1`; the parent's are unaffected.
                    let closed = unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) };
                    if closed != 0 {
                        // SAFETY: as below.
                        unsafe { libc::_exit(1) }
                    }
                }
                from = fd.saturating_add(1);
            }
            body();
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
        pid => Ok(pid),
    }
}

/// The table, with jqjail's excess over the floor.
pub(crate) fn render(rows: &[Row]) -> String {
    let mut r = String::from(
        "| pause before each request | relay, no work: median / p99 ms | jqjail, `.[0]` over 2 KiB: median / p99 ms | jqjail − relay, medians |\n|---|---|---|---|\n",
    );
    for row in rows {
        r.push_str(&format!(
            "| {} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} |\n",
            match row.pause.as_millis() {
                0 => "none (back to back)".to_string(),
                ms => format!("{ms} ms"),
            },
            row.relay.median(),
            row.relay.p99(),
            row.jqjail.median(),
            row.jqjail.p99(),
            row.jqjail.median() - row.relay.median(),
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_passes_each_message_on_and_its_children_end_with_it() {
        let mut relay = Relay::start().expect("relay");
        // The worker's answer (each byte of the job plus one), then the rest of the daemon's
        // copy of the request.
        let mut expected = [7u8; REPLY];
        expected[..ANSWER].fill(8);
        for _ in 0..50 {
            assert_eq!(relay.round_trip().expect("round trip"), expected);
        }
        let children = relay.children;
        // A child that never sees the end of its stream would hang the drop: fail instead,
        // and end the children.
        let (done, dropped) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(relay);
            let _ = done.send(());
        });
        if dropped.recv_timeout(Duration::from_secs(10)).is_err() {
            for pid in children {
                // SAFETY: a child this process forked, not yet reaped (the drop waits for it).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            panic!("the relay's processes did not end within 10 s of its drop");
        }
        for pid in children {
            // SAFETY: asks about a child this process forked; it was reaped by the drop.
            let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
            assert_eq!(rc, -1, "child {pid} was not reaped");
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::ECHILD)
            );
        }
    }
}
