//! Finding the daemon, and starting the user's private one when there is none: the recipe of
//! PROTOCOL.md, "Finding the socket", which the CLI, `jqjail mcp` and every library follow.
//!
//! The first of: the path the caller gave; `$JQJAIL_SOCKET`; the system service's socket
//! when something accepts there; the private daemon's socket in [`PrivateDir`], whose daemon
//! is started when nothing answers there. Every connection is checked to be the user's own
//! daemon, root's, or a trusted uid's before anything is sent (`crate::trust`).
//!
//! Starting is race-free without the lock this module takes: a daemon opens its store
//! (flock'd) before it binds, never replaces a socket something listens on, and stops at once
//! when the store is held and its socket already answers, so of two daemons started at once
//! one serves and the other exits. The lock only keeps concurrent starters from starting
//! daemons that would exit.

use crate::paths::{PrivateDir, SOCKET_ENV, SYSTEM_SOCKET};
use crate::{Client, ClientError, ErrorCode};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon's executable, which a client starts as the private daemon.
pub const DAEMON_EXECUTABLE: &str = "jqjaild";

/// Environment variable naming the daemon's executable, the last place looked (after the
/// directory of the running program, where packages install it, and `$PATH`).
pub const DAEMON_ENV: &str = "JQJAIL_DAEMON";

/// How long a private daemon lives without clients.
pub const PRIVATE_IDLE_EXIT: Duration = Duration::from_secs(600);

/// How long a client waits for a private daemon it started to accept connections: longer
/// than a daemon waits for the store's previous owner to exit (15 s), which an idle exit can
/// still be doing when the next client comes.
pub const PRIVATE_START_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether [`connect`] waits for the handshake's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Before returning.
    Awaited,
    /// With the first call's answer (`Client::connect_pipelined`), saving a round trip, for a
    /// socket that was named or is the private daemon's. The system daemon's is still awaited:
    /// a refusal there (a user outside its group) falls back to the private daemon.
    Pipelined,
}

/// Why no daemon could be reached: the message names each place tried and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// Connects to the daemon the recipe picks, starting the private one if that is the only
/// option. `notes` receives why candidate directories were passed over (the CLI prints them).
pub fn connect(
    explicit: Option<&Path>,
    handshake: Handshake,
    notes: &mut dyn FnMut(&str),
) -> Result<Client, Unavailable> {
    let connect_to = |path: &Path| match handshake {
        Handshake::Awaited => Client::connect(path),
        Handshake::Pipelined => Client::connect_pipelined(path),
    };
    if let Some(path) = explicit {
        return connect_to(path).map_err(|e| Unavailable(e.to_string()));
    }
    if let Some(path) = std::env::var_os(SOCKET_ENV).filter(|p| !p.is_empty()) {
        return connect_to(Path::new(&path))
            .map_err(|e| Unavailable(format!("{e} (from ${SOCKET_ENV})")));
    }
    match Client::connect(SYSTEM_SOCKET) {
        Ok(client) => return Ok(client),
        // A socket is there but run by a stranger: say so rather than fall back silently.
        Err(e @ ClientError::Untrusted { .. }) => return Err(Unavailable(e.to_string())),
        Err(_) => {}
    }
    let private = PrivateDir::find();
    for note in &private.skipped {
        notes(note);
    }
    prepare_private_dir(&private.path)?;
    let socket = private.socket();
    match connect_to(&socket) {
        Ok(client) => return Ok(client),
        Err(e @ ClientError::Untrusted { .. }) => return Err(Unavailable(e.to_string())),
        Err(e) if refused_at_hello(&e) => return Err(other_version(&socket, &e, true)),
        Err(_) => {}
    }
    start_private_daemon(&private)?;
    match connect_to(&socket) {
        Ok(client) => Ok(client),
        Err(e) if refused_at_hello(&e) => Err(other_version(&socket, &e, true)),
        Err(e) => Err(Unavailable(e.to_string())),
    }
}

/// Whether [`connect`], given `explicit`, connected to the private daemon when it reached
/// `socket`: no path given, none in `$JQJAIL_SOCKET`, and not the system service's.
pub fn picks_private(explicit: Option<&Path>, socket: &Path) -> bool {
    explicit.is_none()
        && std::env::var_os(SOCKET_ENV).is_none_or(|p| p.is_empty())
        && socket != Path::new(SYSTEM_SOCKET)
}

/// For a call on a pipelined connection whose handshake failed as another version of the
/// daemon fails it: the error naming that daemon and what to do (`private`: the socket is the
/// user's private daemon's).
pub fn other_version_at(socket: &Path, e: &ClientError, private: bool) -> Option<Unavailable> {
    (matches!(e, ClientError::Handshake(_)) && refused_at_hello(e))
        .then(|| other_version(socket, e, private))
}

/// Whether a connection failed at the handshake for a reason another version of the daemon
/// gives: it refused this protocol, or answered what this client cannot read.
fn refused_at_hello(e: &ClientError) -> bool {
    match e {
        ClientError::Handshake(inner) => refused_at_hello(inner),
        ClientError::Server(reply) => reply.code == ErrorCode::UnsupportedVersion,
        ClientError::Protocol(_) => true,
        _ => false,
    }
}

/// The error for a daemon of another version: which process it is, and what to do.
fn other_version(socket: &Path, e: &ClientError, private: bool) -> Unavailable {
    let who = std::os::unix::net::UnixStream::connect(socket)
        .ok()
        .and_then(|s| crate::trust::peer_credentials(&s).ok())
        .map(|cred| {
            let exe = std::fs::read_link(format!("/proc/{}/exe", cred.pid))
                .map(|p| format!(" ({})", p.display()))
                .unwrap_or_default();
            (cred.pid, exe)
        });
    let this = format!("this client is jqjail {}", env!("CARGO_PKG_VERSION"));
    let (pid, exe) = match who {
        Some((pid, exe)) => (pid.to_string(), exe),
        None => ("PID".to_string(), String::new()),
    };
    let todo = match private {
        true => format!(
            "It is your private daemon: stop it (`kill {pid}`: it finishes what it runs and keeps its hides), and the next call starts this version's"
        ),
        false => "Use a client of the daemon's version, or upgrade the daemon".to_string(),
    };
    Unavailable(format!(
        "the daemon at {} (pid {pid}{exe}) is another version of jqjaild: {e}; {this}. {todo}",
        socket.display()
    ))
}

/// Makes sure the private directory is ours and closed to others, creating it if need be.
fn prepare_private_dir(dir: &Path) -> Result<(), Unavailable> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Unavailable(format!("creating {}: {e}", dir.display())))?;
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    match crate::paths::unusable(dir, uid) {
        None => Ok(()),
        Some(why) => Err(Unavailable(format!(
            "refusing the private daemon's directory: {why}"
        ))),
    }
}

/// Starts `jqjaild` as the user's private daemon, detached, and waits until it accepts.
fn start_private_daemon(private: &PrivateDir) -> Result<(), Unavailable> {
    let dir = &private.path;
    let socket = &private.socket();
    // One starter at a time: concurrent clients wait on the lock, then find the daemon running.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("start.lock"))
        .map_err(|e| Unavailable(format!("opening the start lock: {e}")))?;
    // SAFETY: flock on a descriptor we own; released when `lock` is closed.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        return Err(Unavailable(format!(
            "locking the start lock: {}",
            std::io::Error::last_os_error()
        )));
    }
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        return Ok(());
    }
    let exe = daemon_executable()
        .map_err(|why| Unavailable(format!("cannot start a private daemon: {why}")))?;
    let log_path = dir.join("daemon.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Unavailable(format!("opening {}: {e}", log_path.display())))?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(&exe);
        for var in SERVICE_MANAGER_ENV {
            command.env_remove(var);
        }
        // SAFETY: between fork and exec only close_range (or fcntl), both async-signal-safe,
        // on descriptors of the child's own.
        unsafe {
            command.pre_exec(|| {
                mark_inherited_cloexec();
                Ok(())
            });
        }
        command
            // Not the caller's directory: nothing of the daemon's is relative to it.
            .current_dir("/")
            .arg("--socket")
            .arg(socket)
            .arg("--store")
            .arg(private.store())
            .arg("--idle-exit-ms")
            .arg(PRIVATE_IDLE_EXIT.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Its own process group: the terminal's Ctrl-C for this command does not reach it.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                Unavailable(format!(
                    "starting the private daemon {}: {e}",
                    exe.display()
                ))
            })?
    };
    let start = Instant::now();
    while start.elapsed() < PRIVATE_START_TIMEOUT {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            // Reaped by a thread, so a long-lived library user leaves no zombie when the
            // daemon exits (its idle exit). The CLI exits first; init reaps it then.
            std::thread::spawn(move || child.wait());
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Unavailable(format!(
                "the private daemon {} exited at start ({status}); see {}",
                exe.display(),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Neither left running nor a zombie in a long-lived program.
    let _ = child.kill();
    let _ = child.wait();
    Err(Unavailable(format!(
        "the private daemon {} did not accept connections within {} s; see {}",
        exe.display(),
        PRIVATE_START_TIMEOUT.as_secs(),
        log_path.display()
    )))
}

/// What a client's own service manager set for it, never for the daemon it starts: the
/// daemon would take the client's activation sockets, or notify the client's manager.
pub const SERVICE_MANAGER_ENV: [&str; 6] = [
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
    "NOTIFY_SOCKET",
    "WATCHDOG_PID",
    "WATCHDOG_USEC",
];

/// Marks every descriptor above stderr close-on-exec, in a child about to exec the daemon: a
/// descriptor the caller inherited without the flag (a `flock` job's lock, a pipe, a
/// jobserver) would otherwise stay open in the daemon for its ten idle minutes. Marked, not
/// closed: the pipe std uses to report a failed exec is among them and must live until exec.
fn mark_inherited_cloexec() {
    // SAFETY: close_range only changes this process's descriptor flags.
    if unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0
    {
        return;
    }
    // Kernels before 5.11: one by one, up to the soft limit.
    // SAFETY: sysconf and fcntl touch no memory of ours.
    let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(0, 1 << 20) as i32;
    for fd in 3..max {
        // SAFETY: as above; an fd that is not open fails with EBADF, which is fine.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// The daemon's executable: `jqjaild` beside the running program (where the .deb, the wheel
/// and the npm package install it beside `jqjail`), else the first on `$PATH`, else
/// `$JQJAIL_DAEMON`.
pub fn daemon_executable() -> Result<PathBuf, String> {
    companion_executable(DAEMON_EXECUTABLE, Some(DAEMON_ENV))
}

/// A program shipped with jqjail: `name` beside this executable, else the first on `$PATH`,
/// else the file `env` names. Run by `cargo run --bin jqjail` in a checkout where only the
/// CLI is built yet (a fresh clone), it has cargo build `name` into the same directory
/// first, once, saying so on stderr.
pub fn companion_executable(name: &str, env: Option<&str>) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let beside = exe.with_file_name(name);
    if beside.is_file() {
        return Ok(beside);
    }
    // Only for an executable that cargo built in this checkout: an installed jqjail never
    // builds anything.
    let built_here = |dir: &Path| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join("target"));
        target.is_absolute() && exe.starts_with(&target)
    };
    if let (Some(cargo), Some(manifest_dir), Some("jqjail")) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        std::env::var("CARGO_PKG_NAME").ok().as_deref(),
    ) && built_here(&manifest_dir)
    {
        build_companion(name, &cargo, &manifest_dir, &exe)?;
        if beside.is_file() {
            return Ok(beside);
        }
        return Err(format!(
            "cargo built {name}, but not at {}",
            beside.display()
        ));
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        // Absolute entries only: an empty or relative one would mean the current directory.
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    let named = env
        .and_then(std::env::var_os)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    on_path.or(named).ok_or_else(|| {
        let env = env
            .map(|e| format!(", nor named by ${e}"))
            .unwrap_or_default();
        format!(
            "{name} is neither beside {} nor on $PATH{env} \
             (install jqjail with pip, npm or the .deb, or build it with `cargo build --release`)",
            exe.display()
        )
    })
}

/// `cargo build --bin NAME` in the profile `exe` was built in.
fn build_companion(
    name: &str,
    cargo: &std::ffi::OsStr,
    manifest_dir: &Path,
    exe: &Path,
) -> Result<(), String> {
    use std::io::Write;
    let profile = exe
        .parent()
        .and_then(Path::file_name)
        .and_then(|p| p.to_str())
        .unwrap_or("debug");
    let _ = writeln!(
        std::io::stderr(),
        "jqjail: {name} is not built yet; building it (cargo build --profile {profile} --bin {name}), once"
    );
    let profile_arg = match profile {
        "debug" => "dev",
        other => other,
    };
    let status = Command::new(cargo)
        .args(["build", "--profile", profile_arg, "--bin", name])
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("running cargo to build {name}: {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("cargo could not build {name} ({status})")),
    }
}
