//! The metrics listener (`[metrics] listen`, off by default): the daemon's counters in
//! Prometheus's text format, over HTTP/1.1, at `GET /metrics`.
//!
//! - It listens on a loopback address or a Unix socket only (the configuration refuses any
//!   other address): the host's own scraper, or a proxy the operator runs, reads it.
//! - It runs on threads of its own, never on the runtime: an acceptor, which reads every
//!   connection's request head itself (non-blocking, `poll`), and at most [`MAX_SCRAPES`]
//!   exchanges at once, each started only once its head has come whole (beyond them, it is
//!   answered at once without blocking, or not at all). A head has
//!   [`READ_FOR`] in all (at most [`MAX_HEAD`] bytes); at most [`MAX_PENDING`] connections wait
//!   for theirs, and past that the oldest is closed. An answer has [`WRITE_FOR`]. So idle
//!   connections hold no exchange, and a scraper, which sends its head as it connects, is
//!   answered however many a local peer keeps open (issue 34: six idle connections made 0 of
//!   40 scrapes succeed).
//! - The exposition is rendered at most once per [`FRESH_FOR`]; later scrapes within it get
//!   the same text. A render reads atomics, the counters' lock for a copy (as a `stats`
//!   request does), and the hide index through a read-only connection of its own (the index
//!   is in WAL mode: it never waits for a writer nor holds one up).
//! - A request whose `Host` is not a loopback name or address is refused (403), so a web page
//!   in a local browser cannot read it by DNS rebinding.
//! - Tenant names appear as labels only with `tenant_labels = true` (read again on SIGHUP;
//!   `listen` is read at start only). Every other family is a sum over tenants, which any peer
//!   that reaches the listener sees. The bytes every tenant's hides hold are rounded up to
//!   [`HIDE_BYTES_STEP`] unless tenant labels are on: exact, two scrapes apart they told
//!   another uid the size of each hide a tenant stored.

use super::shared::Shared;
use crate::config::MetricsListen;
use jqjail_protocol::exposition::{CONTENT_TYPE, Exposition, labelled};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a peer may take to send its request head, in all.
pub const READ_FOR: Duration = Duration::from_secs(1);
/// The longest a request head may be.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// The longest a scraper may take to read the answer, in all.
pub(crate) const WRITE_FOR: Duration = Duration::from_secs(5);
/// Exchanges served at once (each once its head came); a head beyond them is closed.
pub(crate) const MAX_SCRAPES: usize = 4;
/// Connections whose head is still coming; past it the oldest is closed.
pub(crate) const MAX_PENDING: usize = 256;
/// The step `jqjail_hide_bytes` is rounded up to without tenant labels.
pub(crate) const HIDE_BYTES_STEP: u64 = 1 << 20;
/// How long a rendered exposition is served again before it is rendered anew.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(1);

/// A bound listener, not yet served.
pub(crate) enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// Binds `at`. A Unix socket's directory must be writable by its owner only, and owned by
/// this uid or root; the socket is bound relative to that directory, opened once, with `mode`
/// set before the bind (`unixsock`). A socket left there by an earlier daemon (connecting is
/// refused) is replaced; one in use, one that cannot be told apart from one in use, or a path
/// that is not a socket, is an error.
pub(crate) fn bind(at: &MetricsListen, mode: u32) -> io::Result<Bound> {
    let fail = |kind: io::ErrorKind, why: String| io::Error::new(kind, why);
    match at {
        MetricsListen::Tcp(addr) => {
            std::net::TcpListener::bind(addr)
                .map(Bound::Tcp)
                .map_err(|e| {
                    fail(
                        e.kind(),
                        format!("binding the metrics listener {addr}: {e}"),
                    )
                })
        }
        MetricsListen::Unix(path) => {
            crate::unixsock::bind(path, mode, crate::unixsock::Dir::Private)
                .map(Bound::Unix)
                .map_err(|e| fail(e.kind(), format!("metrics listener {e}")))
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

/// Serves `bound` on threads of its own, for as long as the daemon lives.
pub(crate) fn spawn(bound: Bound, shared: Arc<Shared>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("jqjaild-metrics".into())
        .spawn(move || {
            let scrapes = Arc::new(Scrapes {
                // The store's counts come from a connection of this listener's own.
                observer: Mutex::new(shared.store.get().map_err(|e| jqjail_store::StoreError::Invalid(e.message)).and_then(|s| s.observer()).inspect_err(|e| tracing::warn!(error = %e, "metrics: the hide index cannot be read; store families left out")).ok()),
                shared,
                rendered: Mutex::new(None),
                in_flight: AtomicUsize::new(0),
            });
            if let Err(e) = accept_loop(&bound, &scrapes) {
                tracing::warn!(error = %e, "metrics: the listener stopped");
            }
        })?;
    Ok(())
}

/// A connection whose request head is still coming.
struct Pending {
    peer: Box<dyn Peer>,
    head: Vec<u8>,
    by: Instant,
}

/// Accepts connections and reads their heads without blocking; a whole head starts an
/// exchange on a thread of its own, if fewer than [`MAX_SCRAPES`] are running.
fn accept_loop(bound: &Bound, scrapes: &Arc<Scrapes>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let listen_fd = match bound {
        Bound::Tcp(l) => {
            l.set_nonblocking(true)?;
            l.as_raw_fd()
        }
        Bound::Unix(l) => {
            l.set_nonblocking(true)?;
            l.as_raw_fd()
        }
    };
    let mut pending: std::collections::VecDeque<Pending> = std::collections::VecDeque::new();
    loop {
        let mut fds: Vec<libc::pollfd> = std::iter::once(listen_fd)
            .chain(pending.iter().map(|p| p.peer.fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let wait = pending
            .iter()
            .map(|p| p.by.saturating_duration_since(Instant::now()))
            .min()
            .map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as i32 + 1);
        // SAFETY: `fds` is a valid array of pollfd of the length given.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                std::thread::sleep(Duration::from_millis(100));
            }
            continue;
        }
        // Heads first (the listener's new connections are read next round).
        let now = Instant::now();
        let mut kept = std::collections::VecDeque::with_capacity(pending.len());
        for (mut p, fd) in pending.drain(..).zip(&fds[1..]) {
            if fd.revents != 0 {
                match read_some_head(&mut *p.peer, &mut p.head) {
                    Ok(true) => {
                        start_exchange(p, scrapes);
                        continue;
                    }
                    Ok(false) => {}
                    Err(_) => continue,
                }
            }
            if now < p.by {
                kept.push_back(p);
            }
        }
        pending = kept;
        if fds[0].revents != 0 {
            loop {
                let accepted: io::Result<Box<dyn Peer>> = match bound {
                    Bound::Tcp(l) => l.accept().map(|(s, _)| Box::new(s) as Box<dyn Peer>),
                    Bound::Unix(l) => l.accept().map(|(s, _)| Box::new(s) as Box<dyn Peer>),
                };
                match accepted {
                    Ok(peer) => {
                        // A peer that cannot be made non-blocking is let go; the listener
                        // serves on.
                        if peer.set_nonblocking(true).is_err() {
                            continue;
                        }
                        if pending.len() >= MAX_PENDING {
                            // The oldest that has sent nothing yet, else the oldest.
                            let idle = pending.iter().position(|p| p.head.is_empty());
                            pending.remove(idle.unwrap_or(0));
                        }
                        pending.push_back(Pending {
                            peer,
                            head: Vec::new(),
                            by: Instant::now() + READ_FOR,
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::debug!(error = %e, "metrics: accept failed");
                        std::thread::sleep(Duration::from_millis(100));
                        break;
                    }
                }
            }
        }
    }
}

/// Reads what has come of a head without blocking: `Ok(true)` once it is whole, an error
/// once it cannot be (closed, too long).
fn read_some_head<S: Peer + ?Sized>(s: &mut S, head: &mut Vec<u8>) -> io::Result<bool> {
    let mut buf = [0u8; 1024];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if head_ends(&head[from..]) {
            return Ok(true);
        }
        if head.len() >= MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
    }
}

/// Whether `fresh` (the bytes new since the last read, and three before them) ends a head.
fn head_ends(fresh: &[u8]) -> bool {
    fresh.windows(4).any(|w| w == b"\r\n\r\n") || fresh.windows(2).any(|w| w == b"\n\n")
}

/// Answers a connection whose head came, on a thread of its own; while [`MAX_SCRAPES`]
/// exchanges are running, at once on this thread without blocking (the exposition is
/// rendered at most once a second and a few KiB: it fits the socket's buffer, and a peer that
/// would make the write wait gets nothing).
fn start_exchange(p: Pending, scrapes: &Arc<Scrapes>) {
    if scrapes.in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_SCRAPES {
        scrapes.in_flight.fetch_sub(1, Ordering::AcqRel);
        let Pending { mut peer, head, .. } = p;
        if let Err(e) = answer_head(&head, &mut *peer, || scrapes.exposition()) {
            tracing::debug!(error = %e, "metrics: a scrape beyond the exchanges failed");
        }
        return;
    }
    let scrapes_for = scrapes.clone();
    let started = std::thread::Builder::new()
        .name("jqjaild-scrape".into())
        .spawn(move || {
            let Pending { mut peer, head, .. } = p;
            let answered = peer
                .set_nonblocking(false)
                .and_then(|()| answer_head(&head, &mut *peer, || scrapes_for.exposition()));
            if let Err(e) = answered {
                tracing::debug!(error = %e, "metrics: a scrape failed");
            }
            scrapes_for.in_flight.fetch_sub(1, Ordering::AcqRel);
        });
    if started.is_err() {
        scrapes.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connected peer: a TCP or a Unix stream.
trait Peer: Read + Write + Send {
    fn set_timeouts(&self, read: Duration, write: Duration) -> io::Result<()>;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
    fn fd(&self) -> std::os::fd::RawFd;
}

macro_rules! peer {
    ($t:ty) => {
        impl Peer for $t {
            fn set_timeouts(&self, read: Duration, write: Duration) -> io::Result<()> {
                self.set_read_timeout(Some(read))?;
                self.set_write_timeout(Some(write))
            }
            fn set_nonblocking(&self, on: bool) -> io::Result<()> {
                <$t>::set_nonblocking(self, on)
            }
            fn fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(self)
            }
        }
    };
}

peer!(std::net::TcpStream);
peer!(std::os::unix::net::UnixStream);

/// What the scrape threads share.
struct Scrapes {
    shared: Arc<Shared>,
    observer: Mutex<Option<jqjail_store::Observer>>,
    rendered: Mutex<Option<(Instant, Arc<str>)>>,
    in_flight: AtomicUsize,
}

impl Scrapes {
    /// The exposition, rendered anew once the last is [`FRESH_FOR`] old.
    fn exposition(&self) -> Arc<str> {
        let mut rendered = self.rendered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, text)) = &*rendered
            && at.elapsed() < FRESH_FOR
        {
            return text.clone();
        }
        let mut observer = self.observer.lock().unwrap_or_else(|e| e.into_inner());
        // A store opened since (by a reload, after it could not be at start) is observed from
        // the next scrape on.
        if observer.is_none()
            && let Ok(store) = self.shared.store.get()
        {
            *observer = store.observer().ok();
        }
        let text: Arc<str> = render(&self.shared, observer.as_ref()).into();
        *rendered = Some((Instant::now(), text.clone()));
        text
    }
}

/// Reads one request head from `s` and answers it, within [`READ_FOR`] and [`WRITE_FOR`].
#[cfg(test)]
fn answer<S: Peer + ?Sized>(s: &mut S, render: impl FnOnce() -> Arc<str>) -> io::Result<()> {
    let head = read_head(s)?;
    answer_head(&head, s, render)
}

/// Answers the request whose head is `head`, within [`WRITE_FOR`].
fn answer_head<S: Peer + ?Sized>(
    head: &[u8],
    s: &mut S,
    render: impl FnOnce() -> Arc<str>,
) -> io::Result<()> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = String::from_utf8_lossy(lines.next().unwrap_or_default()).into_owned();
    let host = lines
        .filter_map(|l| std::str::from_utf8(l).ok())
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("host")
                .then(|| value.trim().to_string())
        });
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body): (&str, Arc<str>) = match (method, path) {
        _ if !host.as_deref().is_none_or(loopback_host) => (
            "403 Forbidden",
            "jqjaild serves its metrics to loopback names only\n".into(),
        ),
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
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if status.starts_with("405") {
        out.push_str("Allow: GET\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    write_within(s, out.as_bytes())
}

/// Whether a `Host` header names this host: `localhost`, a loopback address, with or
/// without a port.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            match port.bytes().all(|b| b.is_ascii_digit()) {
                true => name,
                false => host,
            }
        }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Writes `bytes` within [`WRITE_FOR`] in all.
fn write_within<S: Peer + ?Sized>(s: &mut S, mut bytes: &[u8]) -> io::Result<()> {
    let until = Instant::now() + WRITE_FOR;
    while !bytes.is_empty() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        s.set_timeouts(READ_FOR, left)?;
        match s.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    s.flush()
}

/// The request head: bytes up to the blank line, read within [`READ_FOR`] in all and at most
/// [`MAX_HEAD`] bytes.
#[cfg(test)]
fn read_head<S: Peer + ?Sized>(s: &mut S) -> io::Result<Vec<u8>> {
    let until = Instant::now() + READ_FOR;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if head.len() >= MAX_HEAD || left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long or too slow",
            ));
        }
        s.set_timeouts(left, WRITE_FOR)?;
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        // Only the bytes new since the last read (and three before them) are searched.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if head_ends(&head[from..]) {
            return Ok(head);
        }
    }
}

/// The exposition of this moment: a `stats` reply's families (every tenant's, labelled only
/// where the configuration allows), then what only the daemon sees.
fn render(shared: &Shared, store: Option<&jqjail_store::Observer>) -> String {
    let stats = shared.stats.snapshot(None, shared.now());
    let totals = shared.stats.totals();
    let (ready, busy) = shared.pool.workers();
    let starting = shared.pool.stats.starting.load(Ordering::Relaxed);
    let warm = shared.pool.stats.warm_starts.load(Ordering::Relaxed);
    let cold = shared.pool.stats.cold_starts.load(Ordering::Relaxed);
    let turns = shared.admission.in_use();
    let evicted = shared.store.get().map(|s| s.evicted()).unwrap_or_default();
    let mut e = Exposition::new(&[]);
    let tenant_labels = shared
        .policy
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .metrics
        .tenant_labels;
    e.stats(&stats, tenant_labels)
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
            "jqjail_worker_starts_total",
            "counter",
            "Worker starts finished (ready or failed) since the daemon started: warm (with the warm-up job) or cold (without it, begun in a pool run dry under load).",
            labelled(
                "warm_up",
                [
                    ("warm", warm),
                    ("cold", cold),
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
                "Bytes of hides kept, every tenant's, as quotas count them (content and labels); rounded up to MiB unless tenant labels are on.",
                hide_bytes_shown(usage.bytes, tenant_labels) as f64,
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

/// What `jqjail_hide_bytes` shows of `bytes`: exact only where the operator chose to label
/// tenants (and so to show each one's figures), else rounded up to [`HIDE_BYTES_STEP`], so
/// that two scrapes do not tell another uid the size of a hide a tenant stored between them.
fn hide_bytes_shown(bytes: u64, tenant_labels: bool) -> u64 {
    match tenant_labels {
        true => bytes,
        false => bytes.div_ceil(HIDE_BYTES_STEP) * HIDE_BYTES_STEP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hide_bytes_are_exact_only_with_tenant_labels() {
        assert_eq!(hide_bytes_shown(1_255, true), 1_255);
        assert_eq!(hide_bytes_shown(1_255, false), 1 << 20);
        assert_eq!(hide_bytes_shown(0, false), 0);
        assert_eq!(hide_bytes_shown((1 << 20) + 1, false), 2 << 20);
    }

    /// A peer whose request is `input`; what was answered is kept in `output`.
    struct Duplex {
        input: io::Cursor<Vec<u8>>,
        output: Arc<Mutex<Vec<u8>>>,
    }

    impl Read for Duplex {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Duplex {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.lock().unwrap().write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Peer for Duplex {
        fn set_timeouts(&self, _: Duration, _: Duration) -> io::Result<()> {
            Ok(())
        }
        fn set_nonblocking(&self, _: bool) -> io::Result<()> {
            Ok(())
        }
        fn fd(&self) -> std::os::fd::RawFd {
            -1
        }
    }

    fn ask(request: &[u8]) -> (io::Result<()>, String) {
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut peer = Duplex {
            input: io::Cursor::new(request.to_vec()),
            output: output.clone(),
        };
        let done = answer(&mut peer, || "x_total 1\n".into());
        let out = String::from_utf8(output.lock().unwrap().clone()).unwrap();
        (done, out)
    }

    #[test]
    fn get_metrics_is_answered_with_the_exposition_and_anything_else_is_not() {
        let (done, out) = ask(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9477\r\n\r\n");
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
        assert!(out.contains("Allow: GET\r\n"), "{out}");
    }

    #[test]
    fn a_host_that_is_not_loopback_is_refused_against_dns_rebinding() {
        for host in [
            "localhost",
            "LOCALHOST:80",
            "127.0.0.1",
            "127.1.2.3:9",
            "[::1]:9477",
        ] {
            let (_, out) = ask(format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
            assert!(out.starts_with("HTTP/1.1 200"), "{host}: {out}");
        }
        for host in [
            "evil.example",
            "evil.example:9477",
            "10.0.0.1",
            "localhost.evil.example",
        ] {
            let (_, out) = ask(format!("GET /metrics HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes());
            assert!(out.starts_with("HTTP/1.1 403"), "{host}: {out}");
            assert!(!out.contains("x_total"), "{out}");
        }
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

    #[test]
    fn a_unix_socket_is_bound_only_in_a_private_directory_and_a_live_one_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sock");
        let at = MetricsListen::Unix(path.clone());
        // A socket someone listens on is in use, whatever its mode.
        let live = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert_eq!(
            bind(&at, 0o600).err().unwrap().kind(),
            io::ErrorKind::AddrInUse
        );
        assert!(path.exists());
        // Once nobody listens, it is replaced, with the mode asked for.
        drop(live);
        let Bound::Unix(_l) = bind(&at, 0o640).unwrap() else {
            panic!("a Unix listener")
        };
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // Not a socket: left alone.
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = bind(&MetricsListen::Unix(file.clone()), 0o600)
            .err()
            .unwrap();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
        // A directory others may write to: refused before anything is touched.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = bind(&MetricsListen::Unix(dir.path().join("n.sock")), 0o600)
            .err()
            .unwrap();
        assert!(err.to_string().contains("writable by others"), "{err}");
    }
}
