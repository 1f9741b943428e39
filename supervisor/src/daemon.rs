//! `jqjaild`'s entry point: flags and config file, process set-up, the socket, signals.

use crate::config::{
    Config, FileConfig, FileIsolation, FileLimits, FileMetrics, FileServer, FileStore, FileTenants,
    FileWorkers, parse_isolation,
};
use crate::server::serve;
use crate::spawn::Program;
use anyhow::{Context as _, bail};
use clap::Parser;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::UnixListener;

/// jqjaild: evaluates untrusted jq filters in confined worker processes.
#[derive(Debug, Clone, Parser)]
#[command(name = "jqjaild", version)]
pub struct Args {
    /// Path of the Unix socket to listen on.
    #[arg(long)]
    pub socket: PathBuf,
    /// Directory of the hide store (created 0700 if missing).
    #[arg(long)]
    pub store: PathBuf,
    /// TOML configuration file; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Limits (each also a `[limits]` key of the file).
    #[command(flatten)]
    pub limits: FileLimits,
    /// Workers (each also a `[workers]` key of the file).
    #[command(flatten)]
    pub workers: FileWorkers,
    /// The server (each also a `[server]` key of the file).
    #[command(flatten)]
    pub server: FileServer,
    /// Hide retention (each also a `[store]` key of the file).
    #[command(flatten)]
    pub retention: FileStore,
    /// The metrics listener (each also a `[metrics]` key of the file).
    #[command(flatten)]
    pub metrics: FileMetrics,
    /// Exit after this many milliseconds without a connection.
    #[arg(long)]
    pub idle_exit_ms: Option<u64>,
    /// Worker isolation beyond rlimits and seccomp: a comma-separated subset of
    /// user, ipc_uts, net, empty_root, or `none` (default: user,ipc_uts,empty_root).
    #[arg(long)]
    pub isolation: Option<String>,
}

impl Args {
    /// The effective configuration: defaults, then the file, then the flags.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut cfg = Config::default();
        if let Some(path) = &self.config {
            cfg = FileConfig::load(path)?.apply(cfg)?;
        }
        // Flags are one more layer of the same shape as the file.
        let isolation = match &self.isolation {
            Some(list) => {
                let parts = parse_isolation(list)?;
                FileIsolation {
                    user: Some(parts.user),
                    ipc_uts: Some(parts.ipc_uts),
                    net: Some(parts.net),
                    empty_root: Some(parts.empty_root),
                    worker_uids: None,
                }
            }
            None => FileIsolation::default(),
        };
        let flags = FileConfig {
            limits: self.limits.clone(),
            workers: self.workers.clone(),
            server: self.server.clone(),
            isolation,
            tenants: FileTenants::default(),
            store: self.retention.clone(),
            metrics: self.metrics.clone(),
        };
        cfg = flags.apply(cfg)?;
        cfg.idle_exit = self
            .idle_exit_ms
            .map(Duration::from_millis)
            .or(cfg.idle_exit);
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Runs the daemon with these command-line arguments (argv\[0\] first).
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    init_logging();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("jqjaild: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("JQJAIL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // Under systemd, stderr goes to the journal, which stamps each line itself: no second
    // timestamp, and the level as a syslog priority prefix (`<3>`) that journald reads.
    let _ = match to_journal() {
        true => builder.with_ansi(false).event_format(Journal).try_init(),
        false => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
}

/// Whether stderr is the journal's stream: `JOURNAL_STREAM` (set by systemd) names stderr's
/// device and inode, so a child that inherited the variable but not the stream is not fooled.
fn to_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.split_once(':') else {
        return false;
    };
    let stderr = std::fs::metadata("/proc/self/fd/2");
    matches!(stderr, Ok(m) if dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}

/// Log lines for the journal: `<PRIORITY>message key=value…` (sd-daemon(3)), no timestamp.
struct Journal;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Journal
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing::Level;
        let priority = match *event.metadata().level() {
            Level::ERROR => 3,
            Level::WARN => 4,
            Level::INFO => 6,
            Level::DEBUG | Level::TRACE => 7,
        };
        write!(writer, "<{priority}>")?;
        tracing_subscriber::fmt::format()
            .without_time()
            .with_level(false)
            .with_target(false)
            .with_ansi(false)
            .format_event(ctx, writer, event)
    }
}

/// What opening the store found and mended, for the operator.
pub(crate) fn log_sweep(sweep: &jqjail_store::Sweep) {
    if let Some(aside) = &sweep.index_set_aside {
        tracing::error!(
            moved_to = %aside.display(),
            "hide store: the index was damaged or its WAL had no database; it was set aside and \
             a new one made, and every whole hide is listed again from its file"
        );
    }
    if sweep.temp_files > 0 {
        tracing::info!(
            temp_files = sweep.temp_files,
            "hide store: removed the temp files of puts a crash or a kill cut short"
        );
    }
    if sweep.deletes_finished > 0 {
        tracing::info!(
            files = sweep.deletes_finished,
            "hide store: unlinked the files of deletes a crash or a failed unlink left"
        );
    }
    if !sweep.adopted.is_empty() {
        tracing::warn!(
            hides = sweep.adopted.len(),
            "hide store: listed again whole hides the index did not name (a put cut short \
             before its commit, or an index lost or behind); their ID and content are kept, \
             their kind is `recovered` and their meta lost"
        );
    }
    for path in &sweep.quarantined {
        tracing::warn!(
            path = %path.display(),
            "hide store: moved a file that is not a tenant's hide out of objects/"
        );
    }
    for (tenant, id) in &sweep.broken_rows {
        tracing::warn!(%tenant, %id, "hide store: dropped a hide whose file was missing or damaged");
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let cfg = args.config()?;
    fixed_mmap_threshold();
    ensure_std_fds_open()?;
    set_worker_stack(cfg.stack_bytes)?;
    let program = Program::current_exe().context("resolving the worker executable")?;
    // Another daemon serves the socket this one would bind (never so for a socket the
    // service manager passes: it accepts before any daemon runs).
    let activated = crate::systemd::socket_activated();
    let serving = || !activated && std::os::unix::net::UnixStream::connect(&args.socket).is_ok();
    let store = crate::server::store::StoreSlot::open(&args.store, &serving)
        .with_context(|| format!("opening the hide store {}", args.store.display()))?;
    let store = std::sync::Arc::new(store);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS + 2 * cfg.max_concurrent)
        .thread_name("jqjaild")
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async {
        let mut bound_here = false;
        let listener = match crate::systemd::listener_from_env()
            .context("taking the socket passed by the service manager")?
        {
            Some(inherited) => {
                tracing::info!("using the socket passed by the service manager (LISTEN_FDS)");
                UnixListener::from_std(inherited).context("registering the inherited socket")?
            }
            None => {
                bound_here = true;
                bind(&args.socket, cfg.socket_mode)?
            }
        };
        tracing::info!(socket = %args.socket.display(), "listening");
        if let Some(every) = crate::systemd::watchdog_interval() {
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    crate::systemd::notify("WATCHDOG=1");
                }
            });
        }
        let reload_args = args.clone();
        let reload: crate::server::Reload =
            Box::new(move || reload_args.config().map_err(|e| format!("{e:#}")));
        // On a runtime thread, not this one: a connection's task is then spawned onto the
        // thread that accepted it and starts there at once, instead of being handed from the
        // blocking main thread to a runtime thread that must first be woken (connect and
        // handshake measured 0.16 ms p50 that way, 0.12 ms this way).
        let served = tokio::spawn(serve(
            listener,
            cfg,
            program,
            store,
            shutdown_signal(),
            Some(reload),
        ))
        .await;
        let result = served.context("the listener task failed")?;
        // A socket the service manager passed is its to remove.
        if bound_here {
            let _ = std::fs::remove_file(&args.socket);
        }
        result.context("serving")
    })
}

/// Request frames of up to tens of MiB pass through the daemon. glibc raises its mmap
/// threshold after freeing a large mmapped block, so later frames would come from (and stay
/// in) the heap arenas of whichever runtime threads handled them; with a fixed threshold
/// every large buffer is its own mapping and goes back to the kernel when freed.
fn fixed_mmap_threshold() {
    // SAFETY: mallopt only adjusts allocator tuning; called before any other thread exists.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024) };
    if ok != 1 {
        tracing::warn!("mallopt(M_MMAP_THRESHOLD) failed; large buffers may stay in heap arenas");
    }
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}

/// Workers are spawned with fds 0–2 replaced; if the daemon itself was started with one of
/// them closed, a socket could land there and be clobbered. Fill any gap with /dev/null.
fn ensure_std_fds_open() -> anyhow::Result<()> {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?;
            // SAFETY: dup2 onto a closed standard descriptor; `null` stays owned and is closed
            // when dropped, the duplicate lives for the process.
            if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) } == -1 {
                bail!(
                    "cannot reopen fd {fd} on /dev/null: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
    Ok(())
}

/// RLIMIT_STACK must be in place before a worker's exec (Rust computes its stack guard at
/// start-up), and posix_spawn cannot set it in the child: set it on the daemon, whose workers
/// inherit it. The daemon's own threads have fixed stack sizes and are unaffected.
fn set_worker_stack(bytes: u64) -> anyhow::Result<()> {
    let (_, hard) = rlimit::Resource::STACK
        .get()
        .context("reading RLIMIT_STACK")?;
    let soft = bytes.min(hard);
    if soft < bytes {
        tracing::warn!(
            wanted = bytes,
            hard,
            "worker stack limited by the hard RLIMIT_STACK"
        );
    }
    rlimit::Resource::STACK
        .set(soft, hard)
        .context("setting RLIMIT_STACK for workers")
}

/// The runtime's threads for blocking work (store calls, file reads, cgroup moves), beside
/// two per evaluation slot (a run over a hide reads its file on them): few and fixed. Store
/// calls are bounded by their turns too (`tenant::STORE_READS`, `STORE_WRITES`), but a
/// blocking section moves the runtime's worker to a new thread each time, and at thousands of
/// calls a second the default pool (512) grew to 140 threads for one flooding uid (issue 34:
/// threads are pids, and the container's `--pids-limit` then stopped the zygote from forking).
/// Past this many, blocking work waits for a thread.
const BLOCKING_THREADS: usize = 16;

/// Binds the socket in a directory no other user can change entries of, with its mode set
/// before the bind (`unixsock`), replacing a stale socket but never a live daemon's.
fn bind(path: &Path, mode: u32) -> anyhow::Result<UnixListener> {
    let listener = crate::unixsock::bind(path, mode, crate::unixsock::Dir::PrivateOrSticky)
        .with_context(|| format!("binding the socket {}", path.display()))?;
    listener
        .set_nonblocking(true)
        .context("making the socket non-blocking")?;
    UnixListener::from_std(listener).context("registering the socket")
}
