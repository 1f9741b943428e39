//! The metrics listener (`[metrics] listen`, off by default): the daemon's counters in
//! Prometheus's text format, over HTTP/1.1, at `GET /metrics`.
//!
//! - It listens on a loopback address or a Unix socket only (the configuration refuses any
//!   other address): the host's own scraper, or a proxy the operator runs, reads it.
//! - It runs on a thread of its own, one scrape at a time, never on the runtime: a scraper, or
//!   a local peer that connects and sends nothing, can delay the next scrape but never a
//!   request. A scrape reads atomics, the counters' lock for a copy (as a `stats` request
//!   does), and the hide index through a read-only connection of its own (the index is in WAL
//!   mode: it never waits for a writer nor holds one up).
//! - A request head is read for at most [`READ_FOR`] and [`MAX_HEAD`] bytes, then answered or
//!   dropped; the body of any request is ignored.
//! - Tenant names appear as labels only with `tenant_labels = true`.

use super::Shared;
use crate::config::MetricsListen;
use jqjail_protocol::exposition::{CONTENT_TYPE, Exposition, labelled};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The longest a peer may take to send its request head.
pub(crate) const READ_FOR: Duration = Duration::from_secs(2);
/// The longest a request head may be.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// The longest a scraper may take to read the answer.
const WRITE_FOR: Duration = Duration::from_secs(5);

/// A bound listener, not yet served.
pub(crate) enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// Binds `at`. A Unix socket path left by an earlier daemon (nothing listening) is replaced;
/// one in use, or a path that is not a socket, is an error. The socket gets `mode`.
pub(crate) fn bind(at: &MetricsListen, mode: u32) -> io::Result<Bound> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let in_context = |e: io::Error, what: String| io::Error::new(e.kind(), format!("{what}: {e}"));
    match at {
        MetricsListen::Tcp(addr) => std::net::TcpListener::bind(addr)
            .map(Bound::Tcp)
            .map_err(|e| in_context(e, format!("binding the metrics listener {addr}"))),
        MetricsListen::Unix(path) => {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                if !meta.file_type().is_socket() {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("metrics listener {}: not a socket", path.display()),
                    ));
                }
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("metrics listener {}: in use", path.display()),
                    ));
                }
                std::fs::remove_file(path)?;
            }
            let listener = std::os::unix::net::UnixListener::bind(path)
                .map_err(|e| in_context(e, format!("binding {}", path.display())))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
            Ok(Bound::Unix(listener))
        }
    }
}

impl Bound {
    /// Where it listens (a port of 0 resolved to the one the kernel chose).
    pub(crate) fn describe(&self) -> String {
        match self {
            Bound::Tcp(l) => l.local_addr().map(|a| a.to_string()),
            Bound::Unix(l) => l.local_addr().map(|a| format!("{a:?}")),
        }
        .unwrap_or_else(|e| format!("(unknown: {e})"))
    }
}

/// Serves `bound` on a thread of its own, for as long as the daemon lives.
pub(crate) fn spawn(bound: Bound, shared: Arc<Shared>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("jqjaild-metrics".into())
        .spawn(move || {
            // The store's counts come from a connection of this thread's own.
            let observer = shared
                .store
                .observer()
                .inspect_err(|e| tracing::warn!(error = %e, "metrics: the hide index cannot be read; store families left out"))
                .ok();
            let render = || render(&shared, observer.as_ref());
            loop {
                let answered = match &bound {
                    Bound::Tcp(l) => l.accept().and_then(|(s, _)| {
                        s.set_read_timeout(Some(READ_FOR))?;
                        s.set_write_timeout(Some(WRITE_FOR))?;
                        answer(s, render)
                    }),
                    Bound::Unix(l) => l.accept().and_then(|(s, _)| {
                        s.set_read_timeout(Some(READ_FOR))?;
                        s.set_write_timeout(Some(WRITE_FOR))?;
                        answer(s, render)
                    }),
                };
                if let Err(e) = answered {
                    tracing::debug!(error = %e, "metrics: a scrape failed");
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })?;
    Ok(())
}

/// Reads one request head from `s` and answers it.
fn answer<S: Read + Write>(mut s: S, render: impl FnOnce() -> String) -> io::Result<()> {
    let head = read_head(&mut s)?;
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", render()),
        ("GET", _) => (
            "404 Not Found",
            "jqjaild serves its metrics at /metrics\n".into(),
        ),
        _ => ("405 Method Not Allowed", "only GET /metrics\n".into()),
    };
    let kind = match status {
        "200 OK" => CONTENT_TYPE,
        _ => "text/plain; charset=utf-8",
    };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    s.flush()
}

/// The request head: bytes up to the blank line, read for at most [`READ_FOR`] in all and at
/// most [`MAX_HEAD`] bytes.
fn read_head(s: &mut impl Read) -> io::Result<Vec<u8>> {
    let until = Instant::now() + READ_FOR;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() >= MAX_HEAD || Instant::now() >= until {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long or too slow",
            ));
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

/// The exposition of this moment: a `stats` reply's families (every tenant's, labelled only
/// where the configuration allows), then what only the daemon sees.
fn render(shared: &Shared, store: Option<&jqjail_store::Observer>) -> String {
    let stats = shared.stats.snapshot(None, shared.now());
    let totals = shared.stats.totals();
    let (ready, busy) = shared.pool.workers();
    let starting = shared.pool.stats.starting.load(Ordering::Relaxed);
    let turns = shared.admission.in_use();
    let evicted = shared.store.evicted();
    let mut e = Exposition::new(&[]);
    e.stats(&stats, shared.cfg.metrics.tenant_labels)
        .family(
            "jqjail_runs_by_language_total",
            "counter",
            "Runs answered, by the filter's language (jq, path, shape).",
            labelled("language", totals.languages.iter().copied()),
        )
        .histogram(
            "jqjail_run_duration_seconds",
            "Wall time of every run since the daemon started, from its request to its answer.",
            &totals.buckets,
            totals.count,
            totals.sum_seconds,
        )
        .family(
            "jqjail_connections_refused_total",
            "counter",
            "Connections closed unread, by the limit they met.",
            labelled("limit", totals.refused.iter().copied()),
        )
        .family(
            "jqjail_workers",
            "gauge",
            "Workers now: ready (started, waiting for a job), busy (given one), starting.",
            labelled(
                "state",
                [
                    ("ready", ready as u64),
                    ("busy", busy as u64),
                    ("starting", starting),
                ],
            ),
        )
        .family(
            "jqjail_admission_in_use",
            "gauge",
            "Turns of each admission budget held now (request_memory_kib counts KiB).",
            labelled("budget", turns.iter().map(|(name, held, _)| (*name, *held))),
        )
        .family(
            "jqjail_admission_capacity",
            "gauge",
            "Turns of each admission budget in all.",
            labelled("budget", turns.iter().map(|(name, _, all)| (*name, *all))),
        )
        .family(
            "jqjail_hides_evicted_total",
            "counter",
            "Hides deleted since start: by retention on a put (quota full or past the age limit), or by the periodic expiry.",
            labelled(
                "reason",
                [("retention", evicted.retention), ("expiry", evicted.expiry)],
            ),
        );
    if let Some(rss) = resident_bytes() {
        e.scalar(
            "jqjail_resident_memory_bytes",
            "gauge",
            "The supervisor's resident set size (its workers not included).",
            rss as f64,
        );
    }
    match store.map(|o| o.totals()) {
        Some(Ok(usage)) => {
            e.scalar(
                "jqjail_hides",
                "gauge",
                "Hides kept, every tenant's.",
                usage.entries as f64,
            )
            .scalar(
                "jqjail_hide_bytes",
                "gauge",
                "Bytes of hides kept, every tenant's, as quotas count them (content and labels).",
                usage.bytes as f64,
            );
        }
        Some(Err(err)) => {
            tracing::debug!(error = %err, "metrics: the hide index could not be read")
        }
        None => {}
    }
    e.finish()
}

/// This process's resident set size, from `/proc/self/status`.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(request: &[u8]) -> (io::Result<()>, String) {
        let mut s = Duplex {
            input: io::Cursor::new(request.to_vec()),
            output: Vec::new(),
        };
        let done = answer(&mut s, || "x_total 1\n".into());
        (done, String::from_utf8(s.output).unwrap())
    }

    struct Duplex {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for &mut Duplex {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for &mut Duplex {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn get_metrics_is_answered_with_the_exposition_and_anything_else_is_not() {
        let (done, out) = ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        done.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.contains("Content-Type: text/plain; version=0.0.4"),
            "{out}"
        );
        assert!(out.contains("Content-Length: 10\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\nx_total 1\n"), "{out}");
        let (_, out) = ask(b"GET /metrics?x=1 HTTP/1.0\n\n");
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        let (_, out) = ask(b"GET / HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
        let (_, out) = ask(b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    }

    #[test]
    fn an_endless_or_unfinished_head_is_dropped_unanswered() {
        let (done, out) = ask(&vec![b'a'; MAX_HEAD + 10]);
        assert!(done.is_err());
        assert!(out.is_empty());
        let (done, out) = ask(b"GET /metrics HTTP/1.1\r\n");
        assert_eq!(done.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(out.is_empty());
    }
}
