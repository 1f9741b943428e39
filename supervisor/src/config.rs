//! The daemon's configuration: built-in defaults, then a TOML file, then flags.
//! Every limit is configurable; the effective set is logged at start-up.

use jqjail_protocol::Limits;
use jqjail_protocol::worker::Isolation;
use jqjail_store::{OnFull, Retention};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default worker stack (RLIMIT_STACK): deep enough that every input within the nesting limit
/// parses and serialises, small enough that runaway recursion dies in a fraction of a second.
pub const DEFAULT_STACK_BYTES: u64 = 64 * 1024 * 1024;

/// The effective configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Request limits (a request may lower them).
    pub limits: Limits,
    /// Worker stack size (RLIMIT_STACK, set before exec).
    pub stack_bytes: u64,
    /// Worker CPU-time soft limit in seconds; the hard limit is one more. Defaults to the
    /// wall-clock limit rounded up, plus one: a backstop that fires only if the supervisor's
    /// wall-clock kill does not.
    pub cpu_seconds: u64,
    /// Workers kept started and ready.
    pub prestart: usize,
    /// Jobs evaluated at once.
    pub max_concurrent: usize,
    /// Requests of one tenant waiting for a slot beyond which its new ones get `OVERLOADED`
    /// (a tenant rule may set its own).
    pub max_queue: usize,
    /// A connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A frame that has started must be complete within this long.
    pub frame_timeout: Duration,
    /// On SIGTERM, in-flight requests get this long to finish.
    pub drain_timeout: Duration,
    /// Open connections beyond which new ones are closed at once.
    pub max_connections: usize,
    /// Open connections of one uid beyond which its new ones are closed at once, so that one
    /// uid cannot hold every connection slot.
    pub max_connections_per_uid: usize,
    /// Runs of one tenant whose inline input may be arriving at once; each holds a worker
    /// (not an evaluation slot, which it takes once all but its input's last byte came) while
    /// it does, so stalled uploads of one tenant cannot hold every worker. A run over it is
    /// answered `OVERLOADED`.
    pub max_uploads_per_tenant: usize,
    /// Exit after this long with no connection (the CLI's private daemon uses it).
    pub idle_exit: Option<Duration>,
    /// Permission bits of the socket file.
    pub socket_mode: u32,
    /// Namespaces and empty root for workers; parts the host refuses are turned off (and
    /// logged) at start-up.
    pub isolation: Isolation,
    /// Per-worker memory cgroup limit: `None` derives it (heap + stack + 64 MiB), `Some(0)`
    /// turns the cgroup off.
    pub cgroup_memory_bytes: Option<u64>,
    /// How workers are started.
    pub worker_start: WorkerStart,
    /// Where the zygote keeps its machine code (a zygote's workers only).
    pub code_pages: CodePages,
    /// The uids (and gids) that workers started by a root daemon take, one after another.
    pub worker_uids: UidRange,
    /// Who may connect, as which tenant, with which share.
    pub tenants: Tenants,
    /// Hide-store retention for each tenant (a tenant rule may set its own quota).
    pub hides: Retention,
    /// The metrics listener: off unless an address is given.
    pub metrics: Metrics,
}

/// The metrics listener (`[metrics]`): Prometheus's text format over HTTP, on a thread of its
/// own, for a scraper on this host only.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Where it listens; `None` (the default) starts no listener.
    pub listen: Option<MetricsListen>,
    /// Whether tenant names appear as labels (off by default: they may name people).
    pub tenant_labels: bool,
    /// Permission bits of a Unix socket listener (default 0600: the daemon's uid only).
    pub socket_mode: u32,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            listen: None,
            tenant_labels: false,
            socket_mode: 0o600,
        }
    }
}

/// Where the metrics listener listens.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricsListen {
    /// A loopback address and port (`127.0.0.1:9477`, `[::1]:9477`).
    Tcp(std::net::SocketAddr),
    /// A Unix socket path (`unix:/run/jqjail/metrics.sock`).
    Unix(PathBuf),
}

impl std::str::FromStr for MetricsListen {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<MetricsListen, ConfigError> {
        if let Some(path) = text.strip_prefix("unix:") {
            return match Path::new(path).is_absolute() {
                true => Ok(MetricsListen::Unix(PathBuf::from(path))),
                false => Err(ConfigError::Invalid(format!(
                    "metrics.listen `{text}`: a Unix socket path must be absolute"
                ))),
            };
        }
        match text.parse::<std::net::SocketAddr>() {
            Ok(addr) if addr.ip().is_loopback() => Ok(MetricsListen::Tcp(addr)),
            Ok(addr) => Err(ConfigError::Invalid(format!(
                "metrics.listen `{text}`: {} is not a loopback address; the metrics listener serves this host only (127.0.0.1, ::1, or unix:PATH)",
                addr.ip()
            ))),
            Err(_) => Err(ConfigError::Invalid(format!(
                "metrics.listen `{text}` is neither IP:PORT nor unix:PATH"
            ))),
        }
    }
}

/// How each worker process is started. Either way it is a fresh process that serves one job
/// and applies the whole confinement itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerStart {
    /// Forked by a single-threaded zygote that was exec'd once and has the jaq prelude
    /// parsed: ready in about a third of an exec'd worker's time, at twice the throughput
    /// (BENCHMARKS.md). Workers share the zygote's address layout.
    #[default]
    Zygote,
    /// posix_spawn and exec of the daemon's own binary for every worker: a new address layout
    /// each time, at the cost of exec, dynamic loading and the prelude parse per worker.
    Exec,
}

impl std::str::FromStr for WorkerStart {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<WorkerStart, ConfigError> {
        match text {
            "zygote" => Ok(WorkerStart::Zygote),
            "exec" => Ok(WorkerStart::Exec),
            other => Err(ConfigError::Invalid(format!(
                "unknown worker start `{other}`; use zygote or exec"
            ))),
        }
    }
}

/// Where the zygote keeps its machine code, which every worker it forks shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodePages {
    /// Copied at its start into transparent huge pages at the same addresses (read and
    /// execute): a fork shares the code in one page-table entry per 2 MiB, and a worker
    /// neither faults it in nor tears it down (BENCHMARKS.md). Where huge pages are off or
    /// none is free, or written memory may not become executable (`MemoryDenyWriteExecute=`),
    /// the zygote says so on stderr and keeps `file`.
    #[default]
    Huge,
    /// Left in the executable's file pages, as a profiler needs to name it (perf cannot name
    /// code in anonymous memory).
    File,
}

impl std::str::FromStr for CodePages {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<CodePages, ConfigError> {
        match text {
            "huge" => Ok(CodePages::Huge),
            "file" => Ok(CodePages::File),
            other => Err(ConfigError::Invalid(format!(
                "unknown code pages `{other}`; use huge or file"
            ))),
        }
    }
}

/// The default hide quota of a tenant.
pub const DEFAULT_HIDE_QUOTA_BYTES: u64 = 1 << 30;
/// The default age after which a tenant's hides are deleted (on its next put).
pub const DEFAULT_HIDE_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The tenant policy: a connection's tenant is its peer's uid (SO_PEERCRED) mapped by these
/// rules; nothing in a request can claim another tenant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tenants {
    /// Refuse uids no rule names (otherwise each gets its own tenant `uid-<n>`).
    pub refuse_unknown: bool,
    /// The named tenants, first match wins.
    pub rules: Vec<TenantRule>,
}

/// One named tenant.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantRule {
    /// The tenant's name (in logs and stats).
    pub name: String,
    /// Peer uids that are this tenant.
    #[serde(default)]
    pub uids: Vec<u32>,
    /// Peer primary gids that are this tenant.
    #[serde(default)]
    pub gids: Vec<u32>,
    /// Evaluations this tenant may run at once (default: the daemon's max_concurrent).
    pub max_concurrent: Option<usize>,
    /// Requests of this tenant that may wait (default: the daemon's max_queue).
    pub max_queue: Option<usize>,
    /// Bytes of hides this tenant may keep (default: `[store] quota_bytes`).
    pub hide_quota_bytes: Option<u64>,
}

/// A connection's tenant and share.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantOf {
    /// Its name.
    pub name: std::sync::Arc<str>,
    /// Its share of the evaluation slots.
    pub share: crate::fair::Share,
    /// Its hide-store retention.
    pub hides: Retention,
}

impl Config {
    /// The tenant of a peer, or `None` when the policy refuses it.
    pub fn tenant_of(&self, uid: u32, gid: u32) -> Option<TenantOf> {
        let default = crate::fair::Share {
            max_concurrent: self.max_concurrent,
            max_queue: self.max_queue,
        };
        if let Some(rule) = self
            .tenants
            .rules
            .iter()
            .find(|r| r.uids.contains(&uid) || r.gids.contains(&gid))
        {
            return Some(TenantOf {
                name: rule.name.as_str().into(),
                share: crate::fair::Share {
                    max_concurrent: rule.max_concurrent.unwrap_or(default.max_concurrent),
                    max_queue: rule.max_queue.unwrap_or(default.max_queue),
                },
                hides: Retention {
                    quota_bytes: rule.hide_quota_bytes.unwrap_or(self.hides.quota_bytes),
                    ..self.hides
                },
            });
        }
        (!self.tenants.refuse_unknown).then(|| TenantOf {
            name: format!("uid-{uid}").into(),
            share: default,
            hides: self.hides,
        })
    }
}

impl Config {
    /// The per-worker memory cgroup limit in effect, 0 for none.
    pub fn cgroup_limit(&self) -> u64 {
        self.cgroup_memory_bytes
            .unwrap_or(self.limits.max_heap_bytes + self.stack_bytes + (64 << 20))
    }
}

/// The default isolation: user, IPC/UTS namespaces and the empty root. The network namespace
/// is off by default: seccomp already forbids `socket`, and creating and tearing down a
/// network namespace per worker costs about 1 ms and loads the kernel's cleanup work queue at
/// hundreds of workers a second (measured when the isolation was chosen).
pub const DEFAULT_ISOLATION: Isolation = Isolation {
    user: true,
    ipc_uts: true,
    net: false,
    empty_root: true,
};

/// A range of uids that no user and no other service on the host has: a worker started by a
/// root daemon runs as one of them, so no process outside jqjail shares its uid (`nobody`
/// does: many services run as it) and none may ptrace it or read its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    /// The first uid; the gid is the same number.
    pub first: u32,
    /// How many; at least one.
    pub count: u32,
}

/// The default worker uids: 4096 from 2,053,767,168 (0x7A6A_0000), above systemd's container
/// range (524,288–1,879,048,191) and below its foreign range, where no allocator hands out ids.
pub const DEFAULT_WORKER_UIDS: UidRange = UidRange {
    first: 0x7A6A_0000,
    count: 4096,
};

impl UidRange {
    /// The uid of the `n`th worker started.
    pub fn nth(self, n: u32) -> u32 {
        self.first + n % self.count
    }

    /// Parses `FIRST+COUNT`, e.g. `2053767168+4096`.
    pub fn parse(text: &str) -> Result<UidRange, ConfigError> {
        let bad = || {
            ConfigError::Invalid(format!(
                "worker uids `{text}`: expected FIRST+COUNT, e.g. `2053767168+4096`, with COUNT at least 1, above uid 0 and below 4294967295"
            ))
        };
        let (first, count) = text.split_once('+').ok_or_else(bad)?;
        let first: u32 = first.trim().parse().map_err(|_| bad())?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let last = first.checked_add(count.checked_sub(1).ok_or_else(bad)?);
        match last {
            Some(last) if first > 0 && last < u32::MAX => Ok(UidRange { first, count }),
            _ => Err(bad()),
        }
    }
}

/// Parses `user,ipc_uts,net,empty_root` (any subset) or `none`.
pub fn parse_isolation(text: &str) -> Result<Isolation, ConfigError> {
    let mut out = Isolation::NONE;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part {
            "none" => {}
            "user" => out.user = true,
            "ipc_uts" => out.ipc_uts = true,
            "net" => out.net = true,
            "empty_root" => out.empty_root = true,
            other => {
                return Err(ConfigError::Invalid(format!(
                    "unknown isolation part `{other}`; use any of user, ipc_uts, net, empty_root, or none"
                )));
            }
        }
    }
    Ok(out)
}

impl Default for Config {
    fn default() -> Self {
        let limits = Limits::default();
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Config {
            limits,
            stack_bytes: DEFAULT_STACK_BYTES,
            cpu_seconds: default_cpu_seconds(limits.timeout_ms),
            // Twice the cores: a ready worker is also a start that can be under way, and
            // under load the starts, not the CPU, bounded two cores at two (issue 38,
            // BENCHMARKS.md: +16 % requests/s at 4 clients with 4 against 2).
            prestart: (2 * cpus).clamp(4, 16),
            max_concurrent: 2 * cpus,
            max_queue: 1024,
            idle_timeout: Duration::from_secs(300),
            frame_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_connections_per_uid: 128,
            max_uploads_per_tenant: cpus.max(1),
            idle_exit: None,
            socket_mode: 0o600,
            isolation: DEFAULT_ISOLATION,
            cgroup_memory_bytes: None,
            worker_start: WorkerStart::default(),
            code_pages: CodePages::default(),
            worker_uids: DEFAULT_WORKER_UIDS,
            tenants: Tenants::default(),
            hides: Retention {
                quota_bytes: DEFAULT_HIDE_QUOTA_BYTES,
                max_age: Some(DEFAULT_HIDE_MAX_AGE),
                on_full: OnFull::EvictOldest,
            },
            metrics: Metrics::default(),
        }
    }
}

fn default_cpu_seconds(timeout_ms: u64) -> u64 {
    timeout_ms.div_ceil(1000) + 1
}

/// The TOML file. Every key is optional; unknown keys are an error, so a typo is not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `[limits]`
    #[serde(default)]
    pub limits: FileLimits,
    /// `[workers]`
    #[serde(default)]
    pub workers: FileWorkers,
    /// `[server]`
    #[serde(default)]
    pub server: FileServer,
    /// `[isolation]`
    #[serde(default)]
    pub isolation: FileIsolation,
    /// `[tenants]`
    #[serde(default)]
    pub tenants: FileTenants,
    /// `[store]`
    #[serde(default)]
    pub store: FileStore,
    /// `[metrics]`
    #[serde(default)]
    pub metrics: FileMetrics,
}

/// `[metrics]` of the TOML file, and the same flags.
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FileMetrics {
    /// Serve Prometheus metrics over HTTP at this loopback IP:PORT or unix:PATH (default: off)
    #[arg(long = "metrics-listen")]
    pub listen: Option<String>,
    /// Label the metrics' per-tenant counters with tenant names (default: false)
    #[arg(long = "metrics-tenant-labels")]
    pub tenant_labels: Option<bool>,
    /// Permission bits of a unix:PATH metrics socket, octal (default 0600)
    #[arg(long = "metrics-socket-mode", id = "metrics_socket_mode")]
    pub socket_mode: Option<String>,
}

/// `[store]` of the TOML file, and the same flags: hide retention per tenant.
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FileStore {
    /// Bytes of hides each tenant may keep.
    #[arg(long)]
    pub quota_bytes: Option<u64>,
    /// Hides older than this are deleted on the tenant's next put; 0 keeps them forever.
    #[arg(long)]
    pub max_age_secs: Option<u64>,
    /// `"evict"` (default: delete the oldest hides to make room) or `"refuse"`
    /// (`QUOTA_EXCEEDED`).
    #[arg(long)]
    pub on_full: Option<String>,
}

/// `[tenants]` of the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTenants {
    /// `"allow"` (default: each unknown uid is its own tenant) or `"refuse"`.
    pub unknown: Option<String>,
    /// `[[tenants.tenant]]` rules.
    #[serde(default)]
    pub tenant: Vec<TenantRule>,
}

/// `[isolation]` of the TOML file: each part on or off.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct FileIsolation {
    pub user: Option<bool>,
    pub ipc_uts: Option<bool>,
    pub net: Option<bool>,
    pub empty_root: Option<bool>,
    /// `FIRST+COUNT`: the uids workers of a root daemon take.
    pub worker_uids: Option<String>,
}

/// `[limits]` of the TOML file, and the same flags (`--max-input-bytes`, …). Each knob is
/// declared here once, for both; its default is in [`Config::default`].
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    /// Largest inline input, bytes.
    #[arg(long)]
    pub max_input_bytes: Option<u64>,
    /// Longest filter, bytes.
    #[arg(long)]
    pub max_filter_bytes: Option<u64>,
    /// Deepest input nesting.
    #[arg(long)]
    pub max_depth: Option<u32>,
    /// Largest output text, bytes.
    #[arg(long)]
    pub max_output_bytes: Option<u64>,
    /// Wall-clock limit per request, milliseconds.
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Heap allowance per worker above its baseline, bytes.
    #[arg(long)]
    pub max_heap_bytes: Option<u64>,
    /// Worker stack size, bytes.
    #[arg(long)]
    pub stack_bytes: Option<u64>,
    /// Worker CPU-time limit, seconds.
    #[arg(long)]
    pub cpu_seconds: Option<u64>,
    /// Per-worker memory cgroup limit, bytes (0: no cgroup; default heap + stack + 64 MiB).
    #[arg(long)]
    pub cgroup_memory_bytes: Option<u64>,
}

/// `[workers]` of the TOML file, and the same flags.
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FileWorkers {
    /// How workers are started: `zygote` (forked by a zygote exec'd once; the default) or
    /// `exec` (each worker exec'd).
    #[arg(long = "worker-start")]
    pub start: Option<WorkerStart>,
    /// Where a zygote keeps its machine code: `huge` (moved into transparent huge pages that
    /// every fork shares; the default) or `file` (the executable's pages, which perf can
    /// name).
    #[arg(long)]
    pub code_pages: Option<CodePages>,
    /// Workers kept started and ready.
    #[arg(long)]
    pub prestart: Option<usize>,
    /// Jobs evaluated at once.
    #[arg(long)]
    pub max_concurrent: Option<usize>,
    /// Requests of one tenant waiting beyond which its new ones get OVERLOADED.
    #[arg(long)]
    pub max_queue: Option<usize>,
}

/// `[server]` of the TOML file, and the same flags.
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FileServer {
    /// A connection with no request for this long is closed, milliseconds (default 300,000).
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// A frame that has started, or an answer, must be through within this long,
    /// milliseconds (default 30,000).
    #[arg(long)]
    pub frame_timeout_ms: Option<u64>,
    /// On SIGTERM, in-flight requests get this long to finish, milliseconds (default 10,000).
    #[arg(long)]
    pub drain_timeout_ms: Option<u64>,
    /// Open connections beyond which new ones are closed at once (default 1024).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Open connections of one uid beyond which its new ones are closed at once (default 128).
    #[arg(long)]
    pub max_connections_per_uid: Option<usize>,
    /// Runs of one tenant whose input may be arriving at once (default: the CPU count).
    #[arg(long)]
    pub max_uploads_per_tenant: Option<usize>,
    /// Permission bits of the socket file, octal (default 0600).
    #[arg(long)]
    pub socket_mode: Option<String>,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: toml::de::Error,
    },
    /// A value is out of range.
    #[error("config: {0}")]
    Invalid(String),
}

impl FileConfig {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// Applies this file over `base`.
    pub fn apply(&self, mut base: Config) -> Result<Config, ConfigError> {
        let l = &self.limits;
        let lim = &mut base.limits;
        set(&mut lim.max_input_bytes, l.max_input_bytes);
        set(&mut lim.max_filter_bytes, l.max_filter_bytes);
        set(&mut lim.max_depth, l.max_depth);
        set(&mut lim.max_output_bytes, l.max_output_bytes);
        if let Some(t) = l.timeout_ms {
            lim.timeout_ms = t;
            base.cpu_seconds = default_cpu_seconds(t);
        }
        set(&mut lim.max_heap_bytes, l.max_heap_bytes);
        set(&mut base.stack_bytes, l.stack_bytes);
        set(&mut base.cpu_seconds, l.cpu_seconds);
        if l.cgroup_memory_bytes.is_some() {
            base.cgroup_memory_bytes = l.cgroup_memory_bytes;
        }
        set(&mut base.prestart, self.workers.prestart);
        set(&mut base.worker_start, self.workers.start);
        set(&mut base.code_pages, self.workers.code_pages);
        set(&mut base.max_concurrent, self.workers.max_concurrent);
        set(&mut base.max_queue, self.workers.max_queue);
        let ms = Duration::from_millis;
        set(&mut base.idle_timeout, self.server.idle_timeout_ms.map(ms));
        set(
            &mut base.frame_timeout,
            self.server.frame_timeout_ms.map(ms),
        );
        set(
            &mut base.drain_timeout,
            self.server.drain_timeout_ms.map(ms),
        );
        set(&mut base.max_connections, self.server.max_connections);
        set(
            &mut base.max_connections_per_uid,
            self.server.max_connections_per_uid,
        );
        set(
            &mut base.max_uploads_per_tenant,
            self.server.max_uploads_per_tenant,
        );
        if base.max_connections_per_uid == 0 || base.max_uploads_per_tenant == 0 {
            return Err(ConfigError::Invalid(
                "server.max_connections_per_uid and server.max_uploads_per_tenant must be at least 1".into(),
            ));
        }
        if let Some(mode) = &self.server.socket_mode {
            base.socket_mode = parse_mode(mode)?;
        }
        match self.tenants.unknown.as_deref() {
            None => {}
            Some("allow") => base.tenants.refuse_unknown = false,
            Some("refuse") => base.tenants.refuse_unknown = true,
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "tenants.unknown is `{other}`; use \"allow\" or \"refuse\""
                )));
            }
        }
        if !self.tenants.tenant.is_empty() {
            base.tenants.rules = self.tenants.tenant.clone();
        }
        set(&mut base.hides.quota_bytes, self.store.quota_bytes);
        if let Some(secs) = self.store.max_age_secs {
            base.hides.max_age = (secs > 0).then(|| Duration::from_secs(secs));
        }
        match self.store.on_full.as_deref() {
            None => {}
            Some("evict") => base.hides.on_full = OnFull::EvictOldest,
            Some("refuse") => base.hides.on_full = OnFull::Refuse,
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "store.on_full is `{other}`; use \"evict\" or \"refuse\""
                )));
            }
        }
        if let Some(listen) = &self.metrics.listen {
            base.metrics.listen = Some(listen.parse()?);
        }
        set(&mut base.metrics.tenant_labels, self.metrics.tenant_labels);
        if let Some(mode) = &self.metrics.socket_mode {
            base.metrics.socket_mode = parse_mode(mode)?;
        }
        let iso = &self.isolation;
        set(&mut base.isolation.user, iso.user);
        set(&mut base.isolation.ipc_uts, iso.ipc_uts);
        set(&mut base.isolation.net, iso.net);
        set(&mut base.isolation.empty_root, iso.empty_root);
        if let Some(text) = &iso.worker_uids {
            base.worker_uids = UidRange::parse(text)?;
        }
        Ok(base)
    }
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// Parses an octal permission string such as `0660`.
pub fn parse_mode(text: &str) -> Result<u32, ConfigError> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            ConfigError::Invalid(format!(
                "socket mode `{text}` is not an octal mode like 0660"
            ))
        })
}

impl Config {
    /// Checks values that would make the daemon useless or unsafe.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let l = &self.limits;
        let positive = [
            ("max_input_bytes", l.max_input_bytes),
            ("max_filter_bytes", l.max_filter_bytes),
            ("max_depth", u64::from(l.max_depth)),
            ("max_output_bytes", l.max_output_bytes),
            ("timeout_ms", l.timeout_ms),
            ("max_heap_bytes", l.max_heap_bytes),
            ("stack_bytes", self.stack_bytes),
            ("cpu_seconds", self.cpu_seconds),
            ("prestart", self.prestart as u64),
            ("max_concurrent", self.max_concurrent as u64),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{name} must be positive")));
            }
        }
        // The frame length prefix is 32 bits.
        let frame = jqjail_protocol::frame::max_request_frame_bytes(l.max_filter_bytes);
        if frame > u64::from(u32::MAX) {
            return Err(ConfigError::Invalid(format!(
                "max_filter_bytes {} makes frames of {frame} bytes, over the protocol's 4 GiB",
                l.max_filter_bytes
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_listener_takes_loopback_or_an_absolute_unix_path_only() {
        for ok in [
            "127.0.0.1:9477",
            "127.0.0.2:1",
            "[::1]:9477",
            "unix:/run/x.sock",
        ] {
            assert!(ok.parse::<MetricsListen>().is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("0.0.0.0:9477", "is not a loopback address"),
            ("[::]:9477", "is not a loopback address"),
            ("[::ffff:127.0.0.1]:9477", "is not a loopback address"),
            ("10.0.0.1:9477", "is not a loopback address"),
            ("localhost:9477", "neither IP:PORT nor unix:PATH"),
            ("unix:run/x.sock", "must be absolute"),
        ] {
            let err = bad.parse::<MetricsListen>().unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    /// The shipped config file shows every key with its default: uncommented, it parses and
    /// changes nothing (but the CPU-dependent counts, which it shows for two CPUs).
    #[test]
    fn the_shipped_config_file_documents_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../systemd/jqjaild.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let shown: String = text
            .lines()
            .take_while(|l| !l.starts_with("# [[tenants.tenant]]"))
            .map(|l| match l.strip_prefix("# ") {
                Some(setting) if setting.contains(" = ") => setting,
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let file: FileConfig = toml::from_str(&shown).unwrap();
        let defaults = Config::default();
        let mut applied = file.apply(defaults.clone()).unwrap();
        applied.prestart = defaults.prestart;
        applied.max_concurrent = defaults.max_concurrent;
        applied.max_uploads_per_tenant = defaults.max_uploads_per_tenant;
        assert_eq!(format!("{applied:?}"), format!("{defaults:?}"));
        // As shipped, everything commented: the defaults.
        let file = FileConfig::load(std::path::Path::new(path)).unwrap();
        assert_eq!(
            format!("{:?}", file.apply(Config::default()).unwrap()),
            format!("{:?}", Config::default())
        );
    }

    #[test]
    fn store_retention_and_per_tenant_hide_quota() {
        let file: FileConfig = toml::from_str(
            "[store]\nquota_bytes = 5000\nmax_age_secs = 0\non_full = \"refuse\"\n\
             [[tenants.tenant]]\nname = \"big\"\nuids = [7]\nhide_quota_bytes = 9000\n",
        )
        .unwrap();
        let cfg = file.apply(Config::default()).unwrap();
        assert_eq!(cfg.hides.quota_bytes, 5000);
        assert_eq!(cfg.hides.max_age, None);
        assert_eq!(cfg.hides.on_full, OnFull::Refuse);
        let big = cfg.tenant_of(7, 7).unwrap();
        assert_eq!(big.hides.quota_bytes, 9000);
        assert_eq!(big.hides.on_full, OnFull::Refuse);
        assert_eq!(cfg.tenant_of(8, 8).unwrap().hides.quota_bytes, 5000);
        let bad: FileConfig = toml::from_str("[store]\non_full = \"panic\"\n").unwrap();
        let err = bad.apply(Config::default()).unwrap_err().to_string();
        assert!(err.contains("store.on_full is `panic`"), "{err}");
    }

    #[test]
    fn file_overrides_defaults_and_rejects_unknown_keys() {
        let file: FileConfig = toml::from_str(
            "[limits]\ntimeout_ms = 2500\nmax_output_bytes = 5000\n[workers]\nprestart = 3\n[server]\nsocket_mode = \"0660\"\n",
        )
        .unwrap();
        let cfg = file.apply(Config::default()).unwrap();
        assert_eq!(cfg.limits.timeout_ms, 2500);
        assert_eq!(cfg.cpu_seconds, 4);
        assert_eq!(cfg.limits.max_output_bytes, 5000);
        assert_eq!(cfg.prestart, 3);
        assert_eq!(cfg.socket_mode, 0o660);
        assert!(toml::from_str::<FileConfig>("[limits]\nmax_ouput_bytes = 1\n").is_err());
        let file: FileConfig = toml::from_str("[isolation]\nnet = true\nuser = false\n").unwrap();
        let cfg = file.apply(Config::default()).unwrap();
        assert!(cfg.isolation.net && !cfg.isolation.user && cfg.isolation.empty_root);
    }

    #[test]
    fn tenants_map_uids_and_gids_and_refuse_or_allow_the_rest() {
        let file: FileConfig = toml::from_str(
            "[workers]\nmax_concurrent = 8\nmax_queue = 50\n[tenants]\nunknown = \"refuse\"\n[[tenants.tenant]]\nname = \"agents\"\nuids = [1000]\nmax_concurrent = 2\n[[tenants.tenant]]\nname = \"ops\"\ngids = [27]\n",
        )
        .unwrap();
        let cfg = file.apply(Config::default()).unwrap();
        let agents = cfg.tenant_of(1000, 1000).unwrap();
        assert_eq!(&*agents.name, "agents");
        assert_eq!(agents.share.max_concurrent, 2);
        assert_eq!(agents.share.max_queue, 50);
        assert_eq!(&*cfg.tenant_of(5, 27).unwrap().name, "ops");
        assert_eq!(cfg.tenant_of(5, 5), None);
        let open = Config::default();
        assert_eq!(&*open.tenant_of(5, 5).unwrap().name, "uid-5");
        assert!(
            toml::from_str::<FileConfig>("[tenants]\nunknown = \"maybe\"\n")
                .unwrap()
                .apply(Config::default())
                .is_err()
        );
    }

    #[test]
    fn worker_uid_ranges() {
        let range = UidRange::parse("100+3").unwrap();
        assert_eq!(
            (0..4).map(|n| range.nth(n)).collect::<Vec<_>>(),
            [100, 101, 102, 100]
        );
        for bad in ["100", "0+5", "100+0", "4294967290+10", "x+1", "100+-1"] {
            assert!(UidRange::parse(bad).is_err(), "{bad}");
        }
        let file: FileConfig = toml::from_str("[isolation]\nworker_uids = \"7+1\"\n").unwrap();
        assert_eq!(file.apply(Config::default()).unwrap().worker_uids.first, 7);
    }

    #[test]
    fn isolation_lists() {
        assert_eq!(parse_isolation("none").unwrap(), Isolation::NONE);
        let all = parse_isolation("user, ipc_uts,net,empty_root").unwrap();
        assert!(all.user && all.ipc_uts && all.net && all.empty_root);
        assert!(parse_isolation("pid").is_err());
    }

    #[test]
    fn code_pages_are_huge_unless_set() {
        assert_eq!(Config::default().code_pages, CodePages::Huge);
        let file: FileConfig = toml::from_str("[workers]\ncode_pages = \"file\"\n").unwrap();
        assert_eq!(
            file.apply(Config::default()).unwrap().code_pages,
            CodePages::File
        );
        assert!(toml::from_str::<FileConfig>("[workers]\ncode_pages = \"tiny\"\n").is_err());
        let err = "tiny".parse::<CodePages>().unwrap_err().to_string();
        assert!(
            err.contains("`tiny`") && err.contains("huge or file"),
            "{err}"
        );
    }

    #[test]
    fn worker_start_is_zygote_unless_set() {
        assert_eq!(Config::default().worker_start, WorkerStart::Zygote);
        let file: FileConfig = toml::from_str("[workers]\nstart = \"exec\"\n").unwrap();
        let cfg = file.apply(Config::default()).unwrap();
        assert_eq!(cfg.worker_start, WorkerStart::Exec);
        assert!(toml::from_str::<FileConfig>("[workers]\nstart = \"vfork\"\n").is_err());
        assert_eq!(
            "zygote".parse::<WorkerStart>().unwrap(),
            WorkerStart::Zygote
        );
        let err = "spawn".parse::<WorkerStart>().unwrap_err().to_string();
        assert!(
            err.contains("`spawn`") && err.contains("zygote or exec"),
            "{err}"
        );
    }

    #[test]
    fn zero_limits_are_refused() {
        let mut cfg = Config::default();
        cfg.limits.timeout_ms = 0;
        assert!(cfg.validate().is_err());
        assert!(Config::default().validate().is_ok());
    }
}
