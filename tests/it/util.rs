//! Shared helpers: a real `jqjaild` on a socket in a temp dir, and the real client.

use jqjail_client::{Client, ClientError, ErrorCode, RunOptions, RunReply};
use jqjail_supervisor::Config;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const DAEMON: &str = env!("CARGO_BIN_EXE_jqjaild");
pub const CLI: &str = env!("CARGO_BIN_EXE_jqjail");
pub const MCP: &str = env!("CARGO_BIN_EXE_jqjail-mcp");

/// A daemon started for one test; SIGTERMed and reaped on drop.
pub struct Daemon {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    /// Its hide store's directory (in `dir` unless given).
    pub store: PathBuf,
    pub log: Arc<Mutex<String>>,
    /// Its effective configuration (defaults, its `--config` file, its flags), as the daemon's
    /// own code computes it: every wall-clock bound of a test is one of its deadlines.
    pub cfg: Config,
}

impl Daemon {
    pub fn start() -> Daemon {
        Self::start_with(&[], &[])
    }

    /// Starts `jqjaild` with extra flags and environment, and returns once it has logged
    /// that it is ready (its stderr is read, not slept on).
    pub fn start_with(flags: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::start_on(None, flags, env)
    }

    /// [`Daemon::start_with`] on the hide store at `store` (a store of its own when None).
    pub fn start_on(store: Option<&Path>, flags: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::start_after(store, flags, env, || Ok(()))
    }

    /// [`Daemon::start_on`], with `before_exec` run in the daemon's process between its fork
    /// and its exec (to give it a process attribute that the exec keeps).
    pub fn start_after(
        store: Option<&Path>,
        flags: &[&str],
        env: &[(&str, &str)],
        before_exec: fn() -> std::io::Result<()>,
    ) -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("jqjail.sock");
        let store = store.map_or_else(|| dir.path().join("store"), Path::to_path_buf);
        let mut args = vec![
            "--socket".into(),
            socket.clone().into_os_string(),
            "--store".into(),
            store.clone().into_os_string(),
        ];
        args.extend(flags.iter().map(std::ffi::OsString::from));
        let cfg = <jqjail_supervisor::daemon::Args as clap::Parser>::try_parse_from(
            std::iter::once("jqjaild".into()).chain(args.clone()),
        )
        .map(|a| a.config())
        .expect("the test's flags parse")
        .expect("the test's configuration is valid");
        let mut cmd = Command::new(DAEMON);
        cmd.args(&args)
            .env("JQJAIL_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: `before_exec` is a plain function the caller promises is safe between fork
        // and exec (no allocation, no locks).
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, before_exec) };
        let mut child = cmd.spawn().expect("spawning jqjaild");
        let stderr = child.stderr.take().expect("stderr pipe");
        let log = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                {
                    let mut log = sink.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
                // Said once the line is in the log, so that the log read after `start` holds it.
                if line.contains("jqjaild ready")
                    && let Some(tx) = ready_tx.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        if ready_rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("jqjaild did not get ready; log:\n{}", log.lock().unwrap());
        }
        Daemon {
            child,
            dir,
            socket,
            store,
            log,
            cfg,
        }
    }

    /// The wall-clock deadline of a request that sets none.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.cfg.limits.timeout_ms)
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket).expect("connecting to jqjaild")
    }

    /// Runs `filter` over `input` with default options on a new connection.
    pub fn run(&self, filter: &str, input: &str) -> Result<RunReply, ClientError> {
        self.client()
            .run(filter, input.as_bytes(), &RunOptions::default())
    }

    /// Runs and expects success; returns the output text.
    pub fn ok(&self, filter: &str, input: &str) -> String {
        match self.run(filter, input) {
            Ok(reply) => reply.output,
            Err(e) => panic!("`{filter}` failed: {e}"),
        }
    }

    /// Runs and expects the error `code`; returns the message.
    pub fn err(&self, filter: &str, input: &str, code: ErrorCode) -> String {
        expect_code(self.run(filter, input), code)
    }

    /// Everything the daemon has logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The daemon's workers: its child processes named `jqjail-worker` (a worker still
    /// starting up may not be named yet; the zygote is not one).
    pub fn workers(&self) -> Vec<i32> {
        self.children_named("jqjail-worker")
    }

    /// The daemon's worker zygote, if it has one running.
    pub fn zygote(&self) -> Option<i32> {
        self.children_named("jqjail-zygote").first().copied()
    }

    fn children_named(&self, name: &str) -> Vec<i32> {
        children_named(self.pid(), name)
    }

    pub fn store(&self) -> PathBuf {
        self.store.clone()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Already reaped (a test killed it): its pid may be another process's by now.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        signal(self.pid(), libc::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `tool --version` runs and succeeds.
pub fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// The loud skip lives apart, so that the benchmark's smoke test can include it too. (The flood
// tests include this file and use only `skip`.)
#[path = "skip.rs"]
mod skip;
#[allow(unused_imports)]
pub use skip::{skip, skip_unreachable};

pub fn expect_code(result: Result<RunReply, ClientError>, code: ErrorCode) -> String {
    match result {
        Err(ClientError::Server(e)) if e.code == code => e.message,
        Err(e) => panic!("expected {code}, got error {e}"),
        Ok(reply) => panic!("expected {code}, got output {}", reply.output),
    }
}

pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill with a pid we started (or read from /proc) and a signal number.
    unsafe { libc::kill(pid, sig) };
}

/// The child processes of `pid` whose name (`/proc/PID/comm`) is `name`.
pub fn children_named(pid: i32, name: &str) -> Vec<i32> {
    children(pid)
        .into_iter()
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .collect()
}

/// Children of `pid`, from /proc (all threads' children lists).
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The one-letter state of a process (R, S, Z, …), if it exists.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.trim_start().chars().next()
}

/// CPU time (user + system) a process has used, in clock ticks (10 ms on Linux).
pub fn cpu_ticks(pid: i32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some((_, after)) = stat.rsplit_once(')') else {
        return 0;
    };
    // Fields after the command: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    tick(11) + tick(12)
}

/// Waits until one of the daemon's workers is busy evaluating (running, with at least
/// 50 ms of CPU: far more than a worker's start-up), and returns it.
pub fn busy_worker(d: &Daemon) -> Option<i32> {
    let mut found = None;
    wait_until(Duration::from_secs(5), || {
        found = d
            .workers()
            .into_iter()
            .find(|&p| state(p) == Some('R') && cpu_ticks(p) >= 5);
        found.is_some()
    });
    found
}

pub fn alive(pid: i32) -> bool {
    matches!(state(pid), Some(s) if s != 'Z' && s != 'X')
}

/// Polls `cond` every 2 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

/// The README's shell block after the comment `<!-- marker …`, as a script.
pub fn readme_block(marker: &str) -> String {
    let readme = std::fs::read_to_string(repo_file("README.md")).unwrap();
    let start = readme
        .find(&format!("<!-- {marker}"))
        .unwrap_or_else(|| panic!("the README marks a block `{marker}`"));
    let block = &readme[start..];
    let body = &block[block.find("```sh\n").unwrap() + 6..];
    body[..body.find("```").unwrap()].to_string()
}

pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A process's peak resident memory (VmHWM), in bytes.
pub fn peak_rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Whether the tests run as root (and can act as other uids).
pub fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A raw bincode connection after the hello (so that its frames may stream), on which a frame
/// of `header` plus `tail_len` bytes has been announced and `header` sent.
pub fn begin_stream(d: &Daemon, frame: &[u8]) -> std::os::unix::net::UnixStream {
    use std::io::Write;
    let mut s = raw_bincode(d);
    s.write_all(&(frame.len() as u32).to_le_bytes()).unwrap();
    s.write_all(frame).unwrap();
    s
}

/// A raw bincode connection after the hello.
pub fn raw_bincode(d: &Daemon) -> std::os::unix::net::UnixStream {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let hello = [0x00, 0x02, 0x00];
    s.write_all(&(hello.len() as u32).to_le_bytes()).unwrap();
    s.write_all(&hello).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    s
}

/// The bincode frame of a run of `filter` whose inline input is a tail of `tail_len` bytes.
pub fn run_frame(filter: &str, tail_len: u64) -> Vec<u8> {
    args_frame(filter, tail_len, 0)
}

/// As [`run_frame`], with `count` positional arguments, each the one-byte JSON text `1`.
pub fn args_frame(filter: &str, tail_len: u64, count: usize) -> Vec<u8> {
    use jqjail_protocol::{Args, Encoding, Input, Request, RunRequest, Tail};
    Encoding::Bincode
        .encode(&Request::Run(RunRequest {
            filter: filter.into(),
            lang: Default::default(),
            limits: Default::default(),
            on_oversize: Default::default(),
            input: Input::Inline(Tail::pending(tail_len)),
            args: Args {
                named: Default::default(),
                positional: vec!["1".to_string(); count],
            },
            outputs: Default::default(),
        }))
        .unwrap()
}

/// The bincode frame of a put whose content is a tail of `tail_len` bytes.
pub fn put_frame(source: &str, tail_len: u64) -> Vec<u8> {
    use jqjail_protocol::{Encoding, HidePut, Request, Tail};
    Encoding::Bincode
        .encode(&Request::HidePut(HidePut {
            kind: "tool_output".into(),
            source: source.into(),
            meta: Default::default(),
            content: Tail::pending(tail_len),
        }))
        .unwrap()
}

/// Reads one bincode response and its tail.
pub fn read_response(s: &mut impl std::io::Read) -> jqjail_protocol::Response {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let mut response: jqjail_protocol::Response =
        jqjail_protocol::Encoding::Bincode.decode(&body).unwrap();
    if let Some(tail) = response.tail_mut() {
        let mut bytes = vec![0u8; tail.len() as usize];
        s.read_exact(&mut bytes).unwrap();
        tail.fill(bytes).unwrap();
    }
    response
}

/// On a bincode connection, sends `frame` (whose tail is `tail_len` bytes) and `sent` bytes
/// of the tail, and stalls: the daemon (with a short frame timeout)
/// must answer once, with `PROTOCOL_ERROR` saying the input did not arrive in time, and close
/// the connection before the default frame timeout would have.
pub fn assert_cut_off_when_stalled(d: &Daemon, frame: &[u8], sent: usize) {
    assert_cut_off_when_stalled_after(d, frame, sent, || ());
}

/// [`assert_cut_off_when_stalled`], running `stalled` once the `sent` bytes are written (for a
/// large `sent`, the daemon has then passed most of them on to the worker it took); returns
/// what `stalled` returned.
pub fn assert_cut_off_when_stalled_after<T>(
    d: &Daemon,
    frame: &[u8],
    sent: usize,
    stalled: impl FnOnce() -> T,
) -> T {
    use std::io::{Read, Write};
    let mut s = begin_stream(d, frame);
    s.write_all(&vec![b' '; sent]).unwrap();
    let start = Instant::now();
    let seen = stalled();
    let default = Config::default().frame_timeout;
    s.set_read_timeout(Some(2 * default)).unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    let took = start.elapsed();
    let reply: jqjail_protocol::Response = jqjail_protocol::Encoding::Bincode
        .decode(&reply[4..])
        .unwrap();
    let jqjail_protocol::Response::Error(e) = reply else {
        panic!("expected an error, got {reply:?}")
    };
    before(
        took,
        default,
        "the default frame timeout cut it off, not the configured one",
    );
    assert_eq!(e.code, ErrorCode::ProtocolError);
    assert!(
        e.message
            .contains("did not arrive within the frame timeout"),
        "{}",
        e.message
    );
    seen
}

/// A daemon whose frame timeout is `ms` (its config file lives in the returned directory).
pub fn with_frame_timeout(ms: u64) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    std::fs::write(&config, format!("[server]\nframe_timeout_ms = {ms}\n")).unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    (d, dir)
}

/// Reads one length-prefixed frame's body, whatever it is (`None` at the end of the stream).
pub fn read_frame_raw(s: &mut impl std::io::Read) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Held by the tests that flood the machine's CPUs and by those that time a request under a
/// flood, so that on a two-core machine one test's flood is not another's measurement.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asserts that `took` is shorter than `deadline`: one the daemon under test runs with (from
/// [`Daemon::cfg`] or the daemon's constants), or the default it would have run with had the
/// test's own setting been ignored. `meaning` says what reaching it would have shown. Every
/// wall-clock bound of these tests is of this kind, never fixed seconds: a loaded machine is
/// slow, but not so slow that one of the daemon's mechanisms passes for another.
#[track_caller]
pub fn before(took: Duration, deadline: Duration, meaning: &str) {
    assert!(
        took < deadline,
        "took {took:?}, not under {deadline:?}: {meaning}"
    );
}

/// Keeps an attack's streamed tails arriving: a byte of whitespace to each, every fifth of the
/// daemon's stall rule, until stopped. So no tail is cut off for stalling, however long the
/// check made meanwhile takes; one the daemon is reading may still be cut off for falling
/// behind the minimum pace (issue 34) once its allowance is spent.
pub struct Feeder {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<usize>>,
}

impl Feeder {
    /// Starts feeding (clones of) `streams`.
    pub fn start(streams: &[std::os::unix::net::UnixStream]) -> Feeder {
        use std::os::fd::AsRawFd;
        use std::sync::atomic::Ordering;
        let clones: Vec<_> = streams.iter().map(|s| s.try_clone().unwrap()).collect();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let every = jqjail_supervisor::server::TAIL_STALL / 5;
        let thread = std::thread::spawn(move || {
            let mut fed = vec![0; clones.len()];
            while !stopped.load(Ordering::SeqCst) {
                for (s, n) in clones.iter().zip(&mut fed) {
                    // Never blocks: a stream whose buffer is full (its tail not being read) is
                    // skipped this round.
                    // SAFETY: one byte from a live buffer to a socket this thread owns a clone of.
                    let sent = unsafe {
                        libc::send(
                            s.as_raw_fd(),
                            b" ".as_ptr().cast(),
                            1,
                            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                        )
                    };
                    if sent == 1 {
                        *n += 1;
                    }
                }
                let until = Instant::now() + every;
                while !stopped.load(Ordering::SeqCst) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            fed
        });
        Feeder { stop, thread }
    }

    /// Stops feeding; how many bytes each stream was fed.
    pub fn stop(self) -> Vec<usize> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// Asserts that `promtool check metrics` accepts `text` (the caller has checked that promtool
/// is installed, and skipped loudly if not).
#[track_caller]
pub fn assert_promtool_accepts(text: &str) {
    use std::io::Write;
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// Runs the ignored test `helper` (`module::name`) of this test binary as `uid`, with
/// `env_name` set to `spec`: how the tests act as other uids. Its report comes on stdout.
pub fn helper_as(uid: u32, helper: &str, env_name: &str, spec: String) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", helper, "--ignored", "--nocapture"])
        .env(env_name, spec)
        .uid(uid)
        .gid(uid)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A daemon started with the config `toml`, its socket open to every uid.
pub fn configured(toml: &str) -> (Daemon, tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    std::fs::write(&config, toml).unwrap();
    let d = Daemon::start_with(
        &[
            "--config",
            config.to_str().unwrap(),
            "--socket-mode",
            "0666",
        ],
        &[],
    );
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    (d, dir)
}

/// The daemon's resident memory, bytes.
pub fn rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Whether the machine has no system jqjail daemon's socket, so that a client run without
/// `--socket` falls back to the private daemon; where one is, says so and skips (loudly).
pub fn no_system_daemon() -> bool {
    let none = !Path::new(jqjail_client::paths::SYSTEM_SOCKET).exists();
    if !none {
        skip("a system jqjail daemon is installed here; a client would use it, not a private one");
    }
    none
}

/// Every running `jqjaild` (of any build or installation) whose command line names `dir`.
pub fn daemons_in(dir: &Path) -> Vec<i32> {
    let needle = dir.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "jqjaild"))
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}
