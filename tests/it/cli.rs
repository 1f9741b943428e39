//! The `jqjail` command line: output, error format, exit statuses, and the private daemon it
//! starts on a fresh machine.

use crate::util::{CLI, DAEMON, Daemon, alive, repo_file, signal, wait_until};
use std::os::unix::net::UnixStream;
use std::process::{Command, Output};
use std::time::Duration;

fn cli(args: &[&str], socket: &std::path::Path) -> Output {
    Command::new(CLI)
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .expect("running jqjail")
}

#[test]
fn prints_the_answer_and_classifies_errors() {
    let d = Daemon::start();
    let sample = repo_file("examples/issues.json");
    let sample = sample.to_str().unwrap();
    let out = cli(&[".[0].title", sample], &d.socket);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let title = String::from_utf8(out.stdout).unwrap();
    assert!(title.starts_with('"') && title.ends_with("\"\n"), "{title}");

    let cases: [(&[&str], &str, i32); 4] = [
        (&[".[", sample], "jqjail: COMPILE_ERROR: ", 4),
        (
            &["error(\"x\")", sample],
            "jqjail: RUNTIME_ERROR: filter error: x",
            5,
        ),
        (
            &["def f: f; f", sample, "--timeout", "200ms"],
            "jqjail: TIMEOUT: ",
            6,
        ),
        (
            &[".", "/nonexistent/file.json"],
            "jqjail: INPUT_UNREADABLE: ",
            3,
        ),
    ];
    for (args, prefix, status) in cases {
        let out = cli(args, &d.socket);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with(prefix), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "printed once: {stderr}");
        assert_eq!(out.status.code(), Some(status), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn control_characters_in_messages_are_stripped() {
    let d = Daemon::start();
    let out = cli(&["error(\"a\\u001b[31mred\\u0007\")", "-"], &d.socket);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
}

#[test]
fn reads_stdin_by_default() {
    let d = Daemon::start();
    let mut child = Command::new(CLI)
        .arg("--socket")
        .arg(&d.socket)
        .args(["-c", ".a"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"a":[1,2]}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "[1,2]\n");
}

#[test]
fn unreachable_socket_is_exit_8() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(&[".", "-"], &dir.path().join("none.sock"));
    assert_eq!(out.status.code(), Some(8));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("jqjail: UNAVAILABLE: "));
}

/// build.rs links the CLI static where glibc's static archives are (BENCHMARKS.md, "A static
/// CLI"). A program it meant to link static that still names a program interpreter, or a
/// shared library, would load shared code after all, or crash as it starts or at its first
/// call into that library, since its start code is the static one.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    target_pointer_width = "64",
    target_endian = "little"
))]
#[test]
fn the_cli_is_linked_static_where_the_builder_has_glibcs_static_archives() {
    if !cfg!(jqjail_static_cli) {
        crate::util::skip(
            "build.rs linked the CLI dynamically (its warning says why): no static glibc here",
        );
        return;
    }
    let elf = std::fs::read(CLI).unwrap();
    let parts = crate::static_elf::dynamic_parts(&elf).unwrap();
    assert!(parts.is_empty(), "{CLI} is not static: it has {parts:?}");
    // The reader itself, on a dynamic program: this test's own, unless the whole build is
    // static (`+crt-static` in RUSTFLAGS).
    if !cfg!(target_feature = "crt-static") {
        let this = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let parts = crate::static_elf::dynamic_parts(&this).unwrap();
        assert!(
            parts.iter().any(|p| p == "a program interpreter")
                && parts.iter().any(|p| p.contains("needed shared librar")),
            "the test binary is linked dynamically, yet the reader found {parts:?}"
        );
    }
    assert!(crate::static_elf::dynamic_parts(b"\x7fELF\x02\x01").is_err());
    let out = Command::new(CLI).arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// The pid of the process listening on a Unix socket (SO_PEERCRED).
fn listener_pid(socket: &std::path::Path) -> i32 {
    let stream = UnixStream::connect(socket).unwrap();
    jqjail_client::trust::peer_credentials(&stream).unwrap().pid
}

#[test]
fn starts_a_private_daemon_when_none_is_running() {
    if !crate::util::no_system_daemon() {
        return;
    }
    let runtime = tempfile::tempdir().unwrap();
    let sample = repo_file("examples/issues.json");
    let run = || {
        Command::new(CLI)
            .args([".[0].number", sample.to_str().unwrap()])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env_remove("JQJAIL_SOCKET")
            .output()
            .unwrap()
    };
    let first = run();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let socket = runtime.path().join("jqjail/jqjail.sock");
    assert!(socket.exists());
    let pid = listener_pid(&socket);
    // The second run reuses the same daemon.
    let second = run();
    assert_eq!(second.stdout, first.stdout);
    assert_eq!(listener_pid(&socket), pid);
    signal(pid, libc::SIGTERM);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)));
}

/// Issue 36: clients racing on a machine with no daemon get one private daemon. Twelve CLIs
/// start at once (the start logic is the Rust client library's, `discover`), each answers,
/// and one `jqjaild` serves them all; none was left running beside it.
#[test]
fn clients_racing_to_start_the_private_daemon_get_one() {
    if !crate::util::no_system_daemon() {
        return;
    }
    let runtime = tempfile::tempdir().unwrap();
    let racers: Vec<_> = (0..12)
        .map(|i| {
            Command::new(CLI)
                .args(["-n", &format!("{i} + 1")])
                .env("XDG_RUNTIME_DIR", runtime.path())
                .env_remove("JQJAIL_SOCKET")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, racer) in racers.into_iter().enumerate() {
        let out = racer.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", i + 1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let socket = runtime.path().join("jqjail/jqjail.sock");
    let pid = listener_pid(&socket);
    // Starters wait on the start lock and find the first one's daemon: no other was started.
    assert_eq!(crate::util::daemons_in(runtime.path()), vec![pid]);
    signal(pid, libc::SIGTERM);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)));
}

/// The CLI is a client only: it starts `jqjaild` found beside it, else on `$PATH`, and
/// without either says where it looked instead of failing obscurely.
#[test]
fn a_cli_without_a_daemon_beside_it_finds_one_on_path_or_says_where_it_looked() {
    if !crate::util::no_system_daemon() {
        return;
    }
    let alone = tempfile::tempdir().unwrap();
    let cli = alone.path().join("jqjail");
    std::fs::copy(CLI, &cli).unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let run = |path: &std::ffi::OsStr| {
        Command::new(&cli)
            .args(["-n", "1"])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("PATH", path)
            // Not as under `cargo run`, where it would have cargo build the daemon.
            .env_remove("CARGO")
            .env_remove("CARGO_MANIFEST_DIR")
            .env_remove("JQJAIL_SOCKET")
            .output()
            .unwrap()
    };
    let nowhere = run(std::ffi::OsStr::new("/nonexistent"));
    let stderr = String::from_utf8_lossy(&nowhere.stderr);
    assert_eq!(nowhere.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains("jqjaild is neither beside") && stderr.contains(cli.to_str().unwrap()),
        "{stderr}"
    );

    // Neither the current directory (an empty or relative PATH entry) nor a cargo named by
    // the environment of an installed CLI is ever run.
    use std::os::unix::fs::PermissionsExt;
    let trap = tempfile::tempdir().unwrap();
    let marker = trap.path().join("ran");
    for name in ["jqjaild", "cargo"] {
        let script = trap.path().join(name);
        std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tricked = Command::new(&cli)
        .args(["-n", "1"])
        .current_dir(trap.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("PATH", ":.:/nonexistent")
        .env("CARGO", trap.path().join("cargo"))
        .env("CARGO_MANIFEST_DIR", alone.path())
        .env("CARGO_PKG_NAME", "jqjail")
        .env_remove("JQJAIL_SOCKET")
        .output()
        .unwrap();
    assert_eq!(
        tricked.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&tricked.stderr)
    );
    assert!(
        !marker.exists(),
        "the CLI ran a program from its cwd or its environment"
    );

    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(DAEMON, bin.path().join("jqjaild")).unwrap();
    let found = run(bin.path().as_os_str());
    assert_eq!(
        (found.status.code(), found.stdout.as_slice()),
        (Some(0), &b"1\n"[..]),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let socket = runtime.path().join("jqjail/jqjail.sock");
    let pid = listener_pid(&socket);
    signal(pid, libc::SIGTERM);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)));
}

/// The Python, Go and TypeScript packages ship the tool list as a file; each must be the
/// CLI's list.
#[test]
fn every_client_package_carries_the_same_tool_definitions() {
    let out = Command::new(CLI).arg("tools").output().unwrap();
    let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for copy in [
        "clients/python/src/jqjail/tools.json",
        "clients/go/tools.json",
        "clients/typescript/tools.json",
    ] {
        let shipped = std::fs::read(repo_file(copy)).unwrap();
        let shipped: serde_json::Value = serde_json::from_slice(&shipped).unwrap();
        assert_eq!(shipped, ours, "regenerate it: jqjail tools > {copy}");
    }
}

#[test]
fn tools_prints_definitions_in_each_shape() {
    for (format, pointer) in [
        ("neutral", "/0/parameters/properties/filter"),
        ("openai", "/0/function/parameters/properties/filter"),
        ("anthropic", "/1/input_schema/properties/query"),
    ] {
        let out = Command::new(CLI).args(["tools", format]).output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v.pointer(pointer).is_some(), "{format}: {v}");
    }
    let bad = Command::new(CLI).args(["tools", "xml"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("possible values: neutral, openai, anthropic")
    );
}

/// Issue 27: `jqjail tools --help` was "unknown tools format `--help`". Every subcommand
/// answers `--help` with its own usage, and exits 0.
#[test]
fn help_works_after_every_subcommand() {
    for sub in ["tools", "shape", "stats", "hide", "mcp"] {
        let out = Command::new(CLI).args([sub, "--help"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{sub} --help: {text}");
        assert!(text.contains("Usage:"), "{sub} --help: {text}");
    }
}

/// Issue 15: subcommands were recognised only as the first argument, so `jqjail --socket S
/// hide list` ran a filter named `hide` over a file named `list`, and `jqjail hide put
/// --help` said `Usage: jqjail put`.
#[test]
fn subcommands_take_the_socket_before_or_after_and_say_their_own_names() {
    let d = Daemon::start();
    d.client()
        .hide_put("k", "forms", b"[1]", &Default::default())
        .unwrap();
    let socket = d.socket.to_str().unwrap();
    let with = |args: &[&str], env: bool| {
        let mut c = Command::new(CLI);
        c.args(args);
        match env {
            true => c.env("JQJAIL_SOCKET", socket),
            false => c.env_remove("JQJAIL_SOCKET"),
        };
        c.output().unwrap()
    };
    let sock_eq = format!("--socket={socket}");
    // Each form, and what its output must hold: the hide's ID, or the socket that answered.
    for (args, env, shows) in [
        (vec!["--socket", socket, "hide", "list"], false, "forms-"),
        (vec![sock_eq.as_str(), "hide", "list"], false, "forms-"),
        (vec!["hide", "list", "--socket", socket], false, "forms-"),
        (vec!["hide", "--socket", socket, "list"], false, "forms-"),
        (vec!["hide", "list"], true, "forms-"),
        (vec!["--socket", socket, "stats"], false, socket),
        (vec!["stats", "--socket", socket], false, socket),
        (vec!["stats"], true, socket),
    ] {
        let out = with(&args, env);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(shows),
            "{args:?}"
        );
    }
    let help = with(&["hide", "put", "--help"], false);
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("Usage: jqjail hide put"),
        "{}",
        String::from_utf8_lossy(&help.stdout)
    );
    // A filter spelled like a subcommand is still a filter after `--`.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::write(&input, r#"{"stats":7}"#).unwrap();
    let out = with(&["--socket", socket, "--", "stats"], false);
    assert!(String::from_utf8_lossy(&out.stderr).contains("undefined filter `stats`"));
    let out = with(
        &["--socket", socket, "--", ".stats", input.to_str().unwrap()],
        false,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "7");
}

/// The CLI starts without std's runtime (`src/bin/jqjail.rs`), so it opens closed standard
/// descriptors on /dev/null itself, as std would: else its socket would take a free one, and
/// with descriptor 1 closed the answer would be written into the socket.
#[test]
fn a_cli_started_with_its_standard_descriptors_closed_keeps_its_socket_off_them() {
    use std::os::unix::process::CommandExt;
    let d = Daemon::start();
    let mut command = Command::new(CLI);
    command
        .arg("--socket")
        .arg(&d.socket)
        .args(["-n", "last(range(1e15))", "--timeout", "5s"]);
    // SAFETY: close(2) is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            for fd in 0..3 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("running jqjail");
    let fd_of = |fd: i32| std::fs::read_link(format!("/proc/{}/fd/{fd}", child.id())).ok();
    // While its request runs, the CLI holds its socket.
    let connected = wait_until(Duration::from_secs(5), || {
        (3..16).any(|fd| fd_of(fd).is_some_and(|t| t.to_string_lossy().starts_with("socket:")))
    });
    let standard: Vec<_> = (0..3).map(fd_of).collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        connected,
        "the CLI never held a socket above fd 2: {standard:?}"
    );
    for (fd, target) in standard.iter().enumerate() {
        assert_eq!(
            target.as_deref(),
            Some(std::path::Path::new("/dev/null")),
            "fd {fd}"
        );
    }
}

/// An input over the daemon's limit is refused whichever way the CLI sent it: a small file
/// goes with the handshake, before the limit is known, and the daemon refuses it; stdin and
/// larger files wait for the handshake, and the CLI refuses them before sending.
#[test]
fn an_input_over_the_daemons_limit_is_refused_whether_or_not_it_was_pipelined() {
    let d = Daemon::start_with(&["--max-input-bytes", "1000"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.json");
    std::fs::write(&small, format!("[{}1]", "1,".repeat(1000))).unwrap();
    let large = dir.path().join("large.json");
    std::fs::write(&large, format!("[{}1]", "1,".repeat(200_000))).unwrap();
    for file in [&small, &large] {
        let out = cli(&["length", file.to_str().unwrap()], &d.socket);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.starts_with("jqjail: INPUT_TOO_LARGE: "), "{stderr}");
        assert!(stderr.contains("1,000-byte limit"), "{stderr}");
    }
    let mut child = Command::new(CLI)
        .arg("--socket")
        .arg(&d.socket)
        .arg("length")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&small).unwrap());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("1,000-byte limit"), "{stderr}");
    // Under the limit, both ways answer.
    std::fs::write(&small, "[1,2,3]").unwrap();
    let out = cli(&["length", small.to_str().unwrap()], &d.socket);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
}

/// Attack (review of the pipelined run): with a small regular file named `-` in the working
/// directory, the CLI took `-` for that file when guessing whether its inputs were small, read
/// 256 KiB of stdin, found it too large and read the rest again: the start of stdin was lost
/// and the run answered for the tail, exit 0.
#[test]
fn stdin_as_dash_is_read_once_even_beside_a_file_named_dash() {
    use std::io::Write;
    use std::process::Stdio;
    let d = Daemon::start();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("-"), "1").unwrap();
    // 588,895 bytes: over the 256 KiB read before the handshake.
    let input: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    let mut child = Command::new(CLI)
        .current_dir(cwd.path())
        .arg("--socket")
        .arg(&d.socket)
        .args(["-s", "length, first", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "100000\n1\n");
}

/// Issue 27: `jqjail stats --format prometheus` is the daemon's counters in the exposition
/// format, counting what was asked, and `promtool check metrics` accepts it.
#[test]
fn stats_in_the_prometheus_format_count_known_requests_and_pass_promtool() {
    let d = Daemon::start();
    for _ in 0..3 {
        d.ok(".a", r#"{"a":1}"#);
    }
    let mut c = d.client();
    assert!(c.run("nope(", b"1", &Default::default()).is_err());
    let out = Command::new(CLI)
        .args(["stats", "--format", "prometheus", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let socket = d.socket.display().to_string();
    for line in [
        format!("jqjail_runs_total{{socket=\"{socket}\",outcome=\"OK\"}} 3"),
        format!("jqjail_runs_total{{socket=\"{socket}\",outcome=\"COMPILE_ERROR\"}} 1"),
        format!("jqjail_up{{socket=\"{socket}\"}} 1"),
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    if !crate::util::installed("promtool") {
        crate::util::skip(
            "promtool is not installed (Debian package `prometheus`; .ci/run installs it)",
        );
        return;
    }
    crate::util::assert_promtool_accepts(&text);
}

/// Issue 36's review: a descriptor the CLI inherited without close-on-exec (a `flock` job's
/// lock, a pipe) stayed open in the private daemon it started, for its ten idle minutes, so
/// the lock stayed held after the CLI exited. The daemon gets none of them, nor the caller's
/// directory or service manager's variables.
#[test]
fn the_private_daemon_inherits_no_descriptor_directory_or_activation_of_its_starter() {
    if !crate::util::no_system_daemon() {
        return;
    }
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let runtime = tempfile::tempdir().unwrap();
    let held = tempfile::NamedTempFile::new().unwrap();
    let fd = held.as_file().as_raw_fd();
    let mut cli = Command::new(CLI);
    cli.args(["-n", "1"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env_remove("JQJAIL_SOCKET")
        .env("NOTIFY_SOCKET", "/nonexistent/notify")
        .env("LISTEN_FDNAMES", "inherited")
        .current_dir(runtime.path());
    // SAFETY: fcntl on a descriptor of the child's own, between fork and exec.
    unsafe {
        cli.pre_exec(move || {
            libc::fcntl(fd, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let out = cli.output().unwrap();
    assert_eq!(
        out.stdout,
        b"1\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = listener_pid(&runtime.path().join("jqjail/jqjail.sock"));
    let open: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .collect();
    assert!(
        !open.contains(&held.path().to_path_buf()),
        "the daemon holds the CLI's inherited {}: {open:?}",
        held.path().display()
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        std::path::Path::new("/")
    );
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    for var in ["NOTIFY_SOCKET=", "LISTEN_FDNAMES="] {
        assert!(
            !environ
                .split(|&b| b == 0)
                .any(|kv| kv.starts_with(var.as_bytes())),
            "the daemon was given {var}"
        );
    }
    signal(pid, libc::SIGTERM);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)));
}
