//! The packages a user installs (issue 36), from `target/dist` as `packaging/dist` leaves them:
//! the wheel in a fresh venv, the npm tarballs in a fresh Node project, the .deb's programs,
//! each with no Rust toolchain on `PATH` and no daemon running; and every MCP configuration in
//! README.md launched as written, driven by the official MCP SDKs.
//!
//! Where `target/dist` has not been built, these tests skip and say so (strict runs fail:
//! `.ci/run` runs `packaging/dist` first).

use crate::util::{daemons_in, repo_file, signal};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Instant;

/// What `packaging/dist` built.
struct Dist {
    wheel: PathBuf,
    npm: PathBuf,
    npm_platform: PathBuf,
    deb: PathBuf,
}

fn dist() -> Option<Dist> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_file("target"))
        .join("dist");
    let find = |prefix: &str, suffix: &str| {
        std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with(prefix) && name.ends_with(suffix)
            })
    };
    let version = env!("CARGO_PKG_VERSION");
    let found = (|| {
        Some(Dist {
            wheel: find(&format!("jqjail-{version}-py3-none-manylinux_"), ".whl")?,
            npm: find(&format!("jqjail-{version}.tgz"), "")?,
            npm_platform: find(&format!("jqjail-linux-x64-{version}.tgz"), "")?,
            deb: find(&format!("jqjail_{version}-1_amd64.deb"), "")?,
        })
    })();
    if found.is_none() {
        crate::util::skip(&format!(
            "{} does not hold this version's wheel, npm tarballs and .deb: run packaging/dist first (.ci/run does)",
            dir.display()
        ));
    }
    found
}

/// A private runtime directory for one test; the daemons started in it are stopped on drop.
struct Runtime(tempfile::TempDir);

impl Runtime {
    fn new() -> Option<Runtime> {
        crate::util::no_system_daemon().then(|| Runtime(tempfile::tempdir().unwrap()))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        for pid in daemons_in(self.path()) {
            signal(pid, libc::SIGTERM);
        }
    }
}

/// A command with only the environment a user's shell would pass: `PATH` as given (no cargo
/// on it), `HOME` and `XDG_RUNTIME_DIR` in the test's runtime directory.
fn user_command(program: impl AsRef<std::ffi::OsStr>, path: &str, runtime: &Runtime) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", runtime.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("LANG", "C.UTF-8")
        .env("npm_config_update_notifier", "false");
    cmd
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A fresh venv with the wheel installed from its file alone (`--no-index`): its directory.
fn venv_with_wheel(dist: &Dist, at: &Path) -> (PathBuf, std::time::Duration) {
    let venv = at.join("venv");
    ok(
        Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .unwrap(),
        "python3 -m venv",
    );
    let started = Instant::now();
    ok(
        Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check", "--no-index"])
            .arg(&dist.wheel)
            .output()
            .unwrap(),
        "pip install the wheel",
    );
    (venv, started.elapsed())
}

#[test]
fn the_wheel_installed_with_pip_answers_with_no_toolchain_and_no_daemon() {
    let (Some(dist), Some(runtime)) = (dist(), Runtime::new()) else {
        return;
    };
    let at = tempfile::tempdir().unwrap();
    let (venv, install) = venv_with_wheel(&dist, at.path());
    let path = format!("{}:/usr/bin:/bin", venv.join("bin").display());
    let cargo = user_command("sh", &path, &runtime)
        .args(["-c", "command -v cargo rustc"])
        .output()
        .unwrap();
    assert!(!cargo.status.success(), "a Rust toolchain is on {path}");

    let started = Instant::now();
    let one = user_command(venv.join("bin/python"), &path, &runtime)
        .args([
            "-c",
            "import jqjail; print(jqjail.Client().run('.a', {'a': 1}).value())",
        ])
        .output()
        .unwrap();
    let first_answer = started.elapsed();
    assert_eq!(ok(one, "the Python client"), "1\n");
    eprintln!(
        "pip install --no-index of the wheel: {install:.2?}; the first answer, the private daemon's start included: {first_answer:.2?}"
    );

    let issues = repo_file("examples/issues.json");
    let title = user_command("jqjail", &path, &runtime)
        .arg(".[0].title")
        .arg(&issues)
        .output()
        .unwrap();
    assert_eq!(ok(title, "jqjail"), "\"Crash when parsing empty array\"\n");
    let module = user_command(venv.join("bin/python"), &path, &runtime)
        .args(["-m", "jqjail", "-n", "1 + 1"])
        .output()
        .unwrap();
    assert_eq!(ok(module, "python -m jqjail"), "2\n");
    let version = user_command("jqjail-mcp", &path, &runtime)
        .arg("--version")
        .output()
        .unwrap();
    assert!(ok(version, "jqjail-mcp --version").contains(env!("CARGO_PKG_VERSION")));
    // The one daemon is the wheel's, in the runtime directory.
    let daemons = daemons_in(runtime.path());
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let exe = std::fs::read_link(format!("/proc/{}/exe", daemons[0])).unwrap();
    assert_eq!(exe, venv.join("bin/jqjaild"));
}

/// A fresh Node project with both tarballs installed, offline: its directory.
fn npm_project(dist: &Dist) -> &'static Path {
    static PROJECT: OnceLock<tempfile::TempDir> = OnceLock::new();
    PROJECT
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join("package.json"),
                r#"{"name": "an-agent", "version": "1.0.0", "private": true, "type": "module"}"#,
            )
            .unwrap();
            ok(
                Command::new("npm")
                    .args(["install", "--offline", "--no-audit", "--no-fund"])
                    .arg(&dist.npm)
                    .arg(&dist.npm_platform)
                    .current_dir(dir.path())
                    .output()
                    .unwrap(),
                "npm install the tarballs",
            );
            dir
        })
        .path()
}

fn have(tool: &str) -> bool {
    let there = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        crate::util::skip(&format!("{tool} is not installed"));
    }
    there
}

#[test]
fn the_npm_packages_answer_with_no_toolchain_and_no_daemon() {
    let (Some(dist), Some(runtime)) = (dist(), Runtime::new()) else {
        return;
    };
    if !have("npm") {
        return;
    }
    let project = npm_project(&dist);
    let issues = repo_file("examples/issues.json");
    let title = user_command("npx", "/usr/bin:/bin", &runtime)
        .args(["--offline", "jqjail", ".[0].title"])
        .arg(&issues)
        .current_dir(project)
        .output()
        .unwrap();
    assert_eq!(
        ok(title, "npx jqjail"),
        "\"Crash when parsing empty array\"\n"
    );
    let client = user_command("node", "/usr/bin:/bin", &runtime)
        .args([
            "--input-type=module",
            "-e",
            "import { Client } from 'jqjail'; const c = await Client.connect(); console.log((await c.run('.a', '{\"a\": 1}')).output);",
        ])
        .current_dir(project)
        .output()
        .unwrap();
    assert_eq!(ok(client, "the TypeScript client"), "1\n");
    let daemons = daemons_in(runtime.path());
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let exe = std::fs::read_link(format!("/proc/{}/exe", daemons[0])).unwrap();
    assert!(
        exe.ends_with("node_modules/jqjail-linux-x64/bin/jqjaild"),
        "{}",
        exe.display()
    );
}

/// Issue 36's review: the npm client and the `jqjail` command found the platform package by
/// Node's walk up every parent's `node_modules`. Installed without its optional dependency
/// (`--omit=optional`, or on another platform), a `jqjail-linux-x64` another user put in a
/// directory above the project ran as the user. Only the copy npm installs beside the
/// package is taken now, and only if no other user could have written it.
#[test]
fn a_platform_package_planted_above_the_project_is_never_run() {
    let (Some(dist), Some(runtime)) = (dist(), Runtime::new()) else {
        return;
    };
    if !have("npm") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    // A shared directory (sticky, as /tmp) with the attacker's package in its node_modules,
    // and the user's project below it, installed without optional dependencies.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = shared.path().join("node_modules/jqjail-linux-x64");
    std::fs::create_dir_all(planted.join("bin")).unwrap();
    std::fs::write(
        planted.join("package.json"),
        r#"{"name": "jqjail-linux-x64", "version": "0.0.0"}"#,
    )
    .unwrap();
    let marker = shared.path().join("ran");
    for program in ["jqjail", "jqjaild"] {
        let script = planted.join("bin").join(program);
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho \"$0\" >> {}\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    if crate::util::root() {
        // Another user's, as it would be.
        for entry in [
            shared.path().join("node_modules"),
            planted.clone(),
            planted.join("bin"),
        ] {
            std::os::unix::fs::chown(&entry, Some(65534), Some(65534)).unwrap();
        }
    }
    let project = shared.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name": "an-agent", "version": "1.0.0", "private": true, "type": "module"}"#,
    )
    .unwrap();
    ok(
        Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--omit=optional",
            ])
            .arg(&dist.npm)
            .current_dir(&project)
            .output()
            .unwrap(),
        "npm install without optional dependencies",
    );
    let npx = user_command("npx", "/usr/bin:/bin", &runtime)
        .args(["--offline", "jqjail", "-n", "1"])
        .current_dir(&project)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&npx.stderr);
    assert_eq!(npx.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains("jqjail-linux-x64 is not installed beside jqjail"),
        "{stderr}"
    );
    let client = user_command("node", "/usr/bin:/bin", &runtime)
        .args([
            "--input-type=module",
            "-e",
            "import { Client } from 'jqjail'; await Client.connect();",
        ])
        .current_dir(&project)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert!(!client.status.success());
    assert!(
        stderr.contains("jqjaild is neither in the jqjail-linux-x64 package"),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "the planted package ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

/// One MCP server entry of README.md: the route and clients its marker names, and the command
/// it starts.
#[derive(Debug)]
struct Entry {
    route: String,
    clients: String,
    command: String,
    args: Vec<String>,
}

/// Every `<!-- mcp-config ROUTE CLIENT… -->` block of README.md, read as its client reads it:
/// `mcpServers.jqjail` or `servers.jqjail` of JSON, `mcp_servers.jqjail` of TOML, or the
/// words after `--` of `claude mcp add`.
fn readme_entries() -> Vec<Entry> {
    let readme = std::fs::read_to_string(repo_file("README.md")).unwrap();
    let mut entries = Vec::new();
    for part in readme.split("<!-- mcp-config ").skip(1) {
        let (marker, rest) = part.split_once(" -->\n").unwrap();
        let (route, clients) = marker.split_once(' ').unwrap();
        let rest = rest.strip_prefix("```").unwrap();
        let (lang, rest) = rest.split_once('\n').unwrap();
        let body = &rest[..rest.find("```").unwrap()];
        // JSON and TOML read into one value; a shell line is the words after `--`.
        let config: serde_json::Value = match lang {
            "json" => serde_json::from_str(body).unwrap(),
            "toml" => serde_json::to_value(body.parse::<toml::Table>().unwrap()).unwrap(),
            "sh" => {
                let (add, words) = body.trim().split_once(" -- ").unwrap();
                assert_eq!(add, "claude mcp add jqjail", "{body}");
                let mut words = words.split_whitespace();
                serde_json::json!({"mcpServers": {"jqjail": {
                    "command": words.next().unwrap(),
                    "args": words.collect::<Vec<_>>(),
                }}})
            }
            other => panic!("an MCP configuration in {other}: {body}"),
        };
        let server = [
            "/mcpServers/jqjail",
            "/servers/jqjail",
            "/mcp_servers/jqjail",
        ]
        .iter()
        .find_map(|at| config.pointer(at))
        .unwrap_or_else(|| panic!("no jqjail server in {body}"));
        let command = server["command"].as_str().unwrap().to_string();
        let args = server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        entries.push(Entry {
            route: route.to_string(),
            clients: clients.to_string(),
            command,
            args,
        });
    }
    entries
}

/// The `uvx` to run: `JQJAIL_TEST_UVX` (.ci/run installs uv from PyPI), else one on `PATH`.
fn uvx() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("JQJAIL_TEST_UVX") {
        let named = PathBuf::from(named);
        assert!(
            named.is_file(),
            "JQJAIL_TEST_UVX={} is not a file",
            named.display()
        );
        return Some(named);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v uvx"])
        .output()
        .ok()?;
    let found = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!found.is_empty()).then(|| PathBuf::from(found))
}

#[test]
fn every_readme_mcp_configuration_launches_as_written() {
    let (Some(dist), Some(runtime)) = (dist(), Runtime::new()) else {
        return;
    };
    let entries = readme_entries();
    let routes: std::collections::BTreeSet<_> = entries.iter().map(|e| e.route.as_str()).collect();
    assert_eq!(
        routes.into_iter().collect::<Vec<_>>(),
        ["deb", "npx", "uvx"]
    );
    for client in ["claude-desktop", "cursor", "claude-code", "vscode", "codex"] {
        assert_eq!(
            entries
                .iter()
                .filter(|e| e.clients.split(' ').any(|c| c == client))
                .count(),
            3,
            "{client}: one entry per route"
        );
    }
    let Some(python) = crate::mcp::python_with_mcp() else {
        crate::util::skip_unreachable(
            "the MCP Python SDK is not installed (.ci/run installs it from PyPI)",
        );
        return;
    };
    let Some(uvx) = uvx() else {
        crate::util::skip(
            "uv is not installed (pip install uv; .ci/run does and names it in JQJAIL_TEST_UVX)",
        );
        return;
    };
    if !have("npm") || !have("dpkg-deb") {
        return;
    }
    let ts_sdk = std::env::var("JQJAIL_TEST_MCP_TS_SDK").ok();
    let project = npm_project(&dist);
    // The .deb's programs, unpacked as dpkg would put them (under a root of the test's own).
    let deb_root = tempfile::tempdir().unwrap();
    ok(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&dist.deb)
            .arg(deb_root.path())
            .output()
            .unwrap(),
        "dpkg-deb -x",
    );
    let uv_cache = tempfile::tempdir().unwrap();
    let dist_dir = dist.wheel.parent().unwrap();
    let uv_path = format!("{}:/usr/bin:/bin", uvx.parent().unwrap().display());
    for entry in &entries {
        let (path, cwd) = match entry.route.as_str() {
            "uvx" => (uv_path.clone(), runtime.path().to_path_buf()),
            "npx" => ("/usr/bin:/bin".to_string(), project.to_path_buf()),
            "deb" => (
                format!(
                    "{}:/usr/bin:/bin",
                    deb_root.path().join("usr/bin").display()
                ),
                runtime.path().to_path_buf(),
            ),
            other => panic!("{other}"),
        };
        let launch = |interpreter: &str, script: &str, before: &[&str]| {
            let started = Instant::now();
            let out = user_command(interpreter, &path, &runtime)
                .arg(repo_file(&format!("tests/mcp/{script}")))
                .args(before)
                .arg(&entry.command)
                .args(&entry.args)
                .current_dir(&cwd)
                // uv and npm offline: `uvx jqjail` finds the wheel in target/dist, `npx jqjail`
                // the package installed in the project.
                .env("UV_OFFLINE", "1")
                .env("UV_FIND_LINKS", dist_dir)
                .env("UV_CACHE_DIR", uv_cache.path())
                .env("npm_config_offline", "true")
                .output()
                .unwrap();
            let summary = ok(out, &format!("{script}: {entry:?}"));
            eprintln!(
                "{} {} ({}) via {script}: {:.2?}: {}",
                entry.command,
                entry.args.join(" "),
                entry.clients,
                started.elapsed(),
                summary.trim()
            );
        };
        launch(&python, "launch_client.py", &[]);
        if let Some(sdk) = &ts_sdk {
            launch("node", "launch_client.mjs", &[sdk]);
        }
    }
    // The issue's own words: `uvx --offline --from WHEEL jqjail mcp`.
    let wheel = dist.wheel.to_str().unwrap();
    let out = user_command(&python, &uv_path, &runtime)
        .arg(repo_file("tests/mcp/launch_client.py"))
        .args([
            uvx.to_str().unwrap(),
            "--offline",
            "--from",
            wheel,
            "jqjail",
            "mcp",
        ])
        .env("UV_CACHE_DIR", uv_cache.path())
        .output()
        .unwrap();
    eprintln!(
        "uvx --offline --from {wheel} jqjail mcp: {}",
        ok(out, "uvx --from the wheel").trim()
    );
    if ts_sdk.is_none() {
        crate::util::skip_unreachable(
            "the MCP TypeScript SDK is not installed: the configurations were launched with the Python SDK only",
        );
    }
}

/// One version everywhere (issue 36): the workspace's, which the wheel (maturin reads
/// Cargo.toml) and the .deb (cargo deb) take, is also the Go module's, the npm package's and
/// each client's own, every program's `--version`, and the changelogs' latest.
#[test]
fn every_package_and_program_says_the_workspace_version() {
    let version = env!("CARGO_PKG_VERSION");
    let read = |path: &str| std::fs::read_to_string(repo_file(path)).unwrap();
    let quoted = format!("\"{version}\"");
    for (file, line) in [
        ("clients/go/wire.go", format!("Version = {quoted}")),
        (
            "clients/typescript/src/wire.ts",
            format!("VERSION = {quoted}"),
        ),
        (
            "clients/python/src/jqjail/_wire.py",
            format!("CLIENT_NAME = \"jqjail-python/{version}\""),
        ),
        ("debian/changelog", format!("jqjail ({version}-1)")),
        ("CHANGELOG.md", format!("## [{version}]")),
    ] {
        assert!(read(file).contains(&line), "{file} does not say {line}");
    }
    for file in [
        "clients/typescript/package.json",
        "clients/typescript/package-lock.json",
    ] {
        let v: serde_json::Value = serde_json::from_str(&read(file)).unwrap();
        assert_eq!(v["version"], version, "{file}");
    }
    // The latest entries come first.
    assert!(read("debian/changelog").starts_with(&format!("jqjail ({version}-1)")));
    let changelog = read("CHANGELOG.md");
    let first = changelog.find("## [").unwrap();
    assert!(changelog[first..].starts_with(&format!("## [{version}]")));
    for (program, name) in [
        (crate::util::CLI, "jqjail"),
        (crate::util::DAEMON, "jqjaild"),
        (crate::util::MCP, "jqjail mcp"),
    ] {
        let out = Command::new(program).arg("--version").output().unwrap();
        assert_eq!(ok(out, program), format!("{name} {version}\n"));
    }
}
