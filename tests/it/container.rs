//! The container image as the README's "Run in a container" builds and runs it: rootful podman
//! with runc, the image FROM scratch, the daemon as uid 65532. The block runs literally (but
//! `cargo build`: the binaries under test are staged where it would put them); then a client
//! on the host runs filters, hostile ones among them, through the container's socket as two
//! tenants, the processes are checked from the host's /proc, and the container stops cleanly.
//! Needs root, podman and runc (`.ci/run` installs them); skips, saying why, without them.

use crate::util::{CLI, DAEMON, installed, readme_block, repo_file, root, skip, wait_until};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// The names the README's block gives the container, its image and its volume, and the host
/// directory of its socket.
const NAME: &str = "jqjail";
const VOLUME: &str = "jqjail-store";
const SOCKET_DIR: &str = "/run/jqjail-container";
const SOCKET: &str = "/run/jqjail-container/jqjail.sock";
/// The daemon's uid in the image (`packaging/container/build`).
const DAEMON_UID: &str = "65532";

fn podman(args: &[&str]) -> Output {
    Command::new("podman").args(args).output().unwrap()
}

/// Whether any of the README's fixed names is already taken on this machine: the test would
/// then clobber, or be confused by, something that is not its own.
fn taken() -> Option<String> {
    let exists = |kind: &str, name: &str| podman(&[kind, "exists", name]).status.success();
    if exists("container", NAME) || exists("image", NAME) || exists("volume", VOLUME) {
        return Some(format!(
            "a podman container, image or volume named `{NAME}`/`{VOLUME}` exists on this machine, and the README's commands would clash with it"
        ));
    }
    Path::new(SOCKET_DIR)
        .exists()
        .then(|| format!("{SOCKET_DIR} exists on this machine"))
}

/// Removes what the README's block made, whatever state it is in.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        podman(&["rm", "--force", "--time", "0", NAME]);
        podman(&["volume", "rm", "--force", VOLUME]);
        podman(&["rmi", "--force", NAME]);
        let _ = std::fs::remove_dir_all(SOCKET_DIR);
    }
}

/// Runs the client on the host against the container's socket; `as_nobody` runs it as uid
/// 65534 (another tenant) through setpriv.
fn client(as_nobody: bool, args: &[&str]) -> Output {
    let mut cmd = if as_nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", CLI]);
        c
    } else {
        Command::new(CLI)
    };
    cmd.args(["--socket", SOCKET])
        .args(args)
        .env("JQJAIL_DAEMON_UIDS", DAEMON_UID)
        .output()
        .unwrap()
}

fn status_field(pid: i32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn ns(pid: i32, kind: &str) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap()
}

#[test]
fn the_image_as_the_readme_builds_and_runs_it_under_podman_with_runc() {
    if !root() {
        skip("needs root: the README runs rootful podman (tenants are host uids)");
        return;
    }
    for tool in ["podman", "runc", "setpriv"] {
        if !installed(tool) {
            skip(&format!("{tool} is not installed (.ci/run installs it)"));
            return;
        }
    }
    if let Some(why) = taken() {
        skip(&why);
        return;
    }
    let _cleanup = Cleanup;

    // The repository files the block uses, and the binaries under test where `cargo build
    // --release` would have put them.
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "packaging/container/build",
        "packaging/container/Containerfile",
        "examples/issues.json",
    ] {
        let dest = dir.path().join(file);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(repo_file(file), dest).unwrap();
    }
    let release = dir.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(DAEMON, release.join("jqjaild")).unwrap();
    std::fs::copy(CLI, release.join("jqjail")).unwrap();

    let block = readme_block("run-in-a-container");
    assert!(block.starts_with("cargo build --release\n"), "{block}");
    let block = block.replacen("cargo build --release\n", "", 1);
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let logs = || String::from_utf8_lossy(&podman(&["logs", NAME]).stderr).into_owned();
    assert!(
        out.status.success(),
        "the README's block failed: {}\n{}\ncontainer log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        logs()
    );
    // Its last command printed the answer, from the daemon in the container.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.ends_with("\"Crash when parsing empty array\"\n"),
        "{stdout}"
    );

    // The daemon applied every isolation part its workers get on a host (empty_root needs
    // the block's SYS_CHROOT; net is not a default part).
    let log = logs();
    let iso = log
        .lines()
        .find(|l| l.contains("worker isolation (always"))
        .unwrap_or_else(|| panic!("the daemon logs its worker isolation:\n{log}"));
    for part in [
        "user_namespace=true",
        "ipc_uts_namespaces=true",
        "empty_root=true",
    ] {
        assert!(iso.contains(part), "{part} in {iso}");
    }

    // Hostile filters through the container's socket end as they do on a host.
    let endless = client(false, &["--timeout", "1s", "-n", "def f: f; f"]);
    let err = String::from_utf8_lossy(&endless.stderr);
    assert!(err.starts_with("jqjail: TIMEOUT"), "{err}");
    let bomb = client(
        false,
        &[
            "-n",
            r#"[limit(100000000; repeat("xxxxxxxxxxxxxxxx"))] | length"#,
        ],
    );
    let err = String::from_utf8_lossy(&bomb.stderr);
    assert!(err.starts_with("jqjail: MEMORY_LIMIT"), "{err}");

    // A second host uid is a tenant of its own: its uid crosses the container's boundary.
    let other = client(true, &["-n", "[1, 2] | add"]);
    assert_eq!(
        String::from_utf8_lossy(&other.stdout),
        "3\n",
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    let stats = client(false, &["stats"]);
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let tenants: Vec<&str> = stats["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tenants.contains(&"uid-0") && tenants.contains(&"uid-65534"),
        "{tenants:?}"
    );

    // From the host's /proc: the daemon is uid 65532 with no privilege but CAP_SYS_CHROOT
    // (whose only use is the seccomp rule that lets its workers chroot), under the
    // container's seccomp filter; each ready worker has no capability at all, its own
    // user, IPC, UTS and mount namespaces, and jqjail's seccomp filters on the container's.
    let init: i32 =
        String::from_utf8_lossy(&podman(&["inspect", "--format", "{{.State.Pid}}", NAME]).stdout)
            .trim()
            .parse()
            .unwrap();
    let daemon = crate::util::children(init)
        .into_iter()
        .find(|&p| comm(p) == "jqjaild")
        .unwrap_or_else(|| panic!("no jqjaild under the container's init {init}"));
    assert_eq!(
        status_field(daemon, "Uid:"),
        "65532\t65532\t65532\t65532",
        "the daemon's uids"
    );
    assert_eq!(status_field(daemon, "NoNewPrivs:"), "1");
    assert_eq!(status_field(daemon, "Seccomp:"), "2");
    assert_eq!(status_field(daemon, "CapEff:"), "0000000000040000");
    assert_eq!(status_field(daemon, "CapBnd:"), "0000000000040000");
    let mut worker = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            worker = crate::util::children(daemon)
                .into_iter()
                .find(|&p| comm(p) == "jqjail-worker" && crate::util::state(p) == Some('S'));
            worker.is_some()
        }),
        "no ready worker under the daemon {daemon}"
    );
    let worker = worker.unwrap();
    for caps in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(status_field(worker, caps), "0000000000000000", "{caps}");
    }
    assert_eq!(status_field(worker, "NoNewPrivs:"), "1");
    assert_eq!(status_field(worker, "Seccomp:"), "2");
    // The container's filter(s), which the daemon runs under, and jqjail's own on top.
    let filters = |pid| -> u32 { status_field(pid, "Seccomp_filters:").parse().unwrap() };
    assert!(
        filters(daemon) >= 1,
        "the daemon runs under the container's filter"
    );
    assert!(
        filters(worker) > filters(daemon),
        "the worker adds its own filter: {} on the daemon's {}",
        filters(worker),
        filters(daemon)
    );
    for kind in ["user", "ipc", "uts", "mnt"] {
        assert_ne!(
            ns(worker, kind),
            ns(daemon, kind),
            "the worker's {kind} namespace"
        );
    }

    // `podman stop` is SIGTERM: the daemon drains and exits 0.
    let stop = podman(&["stop", "--time", "20", NAME]);
    assert!(stop.status.success(), "{stop:?}");
    let code = podman(&["inspect", "--format", "{{.State.ExitCode}}", NAME]);
    assert_eq!(
        String::from_utf8_lossy(&code.stdout).trim(),
        "0",
        "{}",
        logs()
    );
}
