//! Attacks on the parts outside the worker sandbox, each reproduced against the real daemon as
//! an attacker on the host would mount it (issues 13 and 16). Each failed on the code before
//! its fix; each asserts that the daemon stays up and other clients stay served.

use crate::util::{Daemon, alive, configured, root, rss};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sends `body` as one frame on a fresh connection and returns the whole answer stream.
fn send_raw_frame(d: &Daemon, body: &[u8]) -> Vec<u8> {
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    reply
}

/// The report's frame: a bincode hello (`00`, protocol `01`) whose client name declares
/// 2^44 bytes. bincode allocated the declared length, and the allocation failure aborted the
/// daemon for every tenant. The same length in any other field of any request is covered by
/// `protocol/tests/bounded.rs`; here the real daemon must answer and stay up.
#[test]
fn an_eleven_byte_frame_does_not_abort_the_daemon() {
    let d = Daemon::start();
    let mut hello = vec![0x00, 0x01, 0xFD];
    hello.extend_from_slice(&(1u64 << 44).to_le_bytes());
    assert_eq!(hello.len(), 11);
    let reply = send_raw_frame(&d, &hello);
    assert!(reply.len() > 4, "no answer to the frame");
    let answer: jqjail_protocol::Response = jqjail_protocol::Encoding::Bincode
        .decode(&reply[4..])
        .unwrap();
    let jqjail_protocol::Response::Error(e) = answer else {
        panic!("expected an error, got {answer:?}")
    };
    assert_eq!(e.code, jqjail_client::ErrorCode::ProtocolError, "{e}");
    // The same length after a good hello, in a run's filter.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for body in [&[0x00, 0x02, 0x00][..], &[0x01, 0xFD]] {
        let mut frame = body.to_vec();
        if body[0] == 0x01 {
            frame.extend_from_slice(&(1u64 << 44).to_le_bytes());
        }
        s.write_all(&(frame.len() as u32).to_le_bytes()).unwrap();
        s.write_all(&frame).unwrap();
    }
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(alive(d.pid()), "the daemon died");
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// Environment variable that turns the `ptrace_attacker` test into the attacker process:
/// `DAEMON_PID:SECONDS`.
const ATTACK_ENV: &str = "JQJAIL_PTRACE_ATTACK";

/// A worker is never traceable by a process of another uid, nor by one of its own uid: a
/// helper of `nobody`'s uid (what workers ran as before) and one of the workers' own uid
/// spin on PTRACE_SEIZE of every new process and read /proc/PID/mem of any daemon child they
/// catch, while a client has hundreds of workers started. Before the fix a worker set up its
/// user namespace as `nobody` while dumpable, and such a helper caught about 1.5 a second.
#[test]
fn no_other_process_can_attach_to_a_worker_at_any_point_of_its_life() {
    if !root() {
        crate::util::skip("needs root, to run workers under their own uids and helpers as others");
        return;
    }
    const WORKER_UID: u32 = 0x7A6A_0100;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    // One uid for every worker: the helper of that uid is then the same uid as each of them.
    std::fs::write(
        &config,
        format!("[isolation]\nworker_uids = \"{WORKER_UID}+1\"\n"),
    )
    .unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    let seconds = 8;
    let helpers: Vec<_> = [65534, WORKER_UID]
        .into_iter()
        .map(|uid| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "attacks::ptrace_attacker",
                    "--ignored",
                    "--nocapture",
                ])
                .env(ATTACK_ENV, format!("{}:{seconds}", d.pid()))
                .uid(uid)
                .gid(uid)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut client = d.client();
    let mut answered = 0;
    while start.elapsed() < Duration::from_secs(seconds) {
        let secret = format!(r#"{{"user":"alice","password":"hunter2-{answered}"}}"#);
        let got = client
            .run(".password", secret.as_bytes(), &Default::default())
            .unwrap();
        assert_eq!(got.output, format!("\"hunter2-{answered}\""));
        answered += 1;
    }
    assert!(answered > 50, "only {answered} workers were started");
    for helper in helpers {
        let out = helper.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("attacker uid"))
            .unwrap_or_else(|| panic!("the helper did not report: {text}"));
        assert!(line.ends_with("seized 0, read 0"), "{line}");
    }
}

/// The attacker of the test above, run by it as another uid (ignored otherwise).
#[test]
#[ignore = "run by no_other_process_can_attach_to_a_worker_at_any_point_of_its_life as another uid"]
fn ptrace_attacker() {
    let Ok(spec) = std::env::var(ATTACK_ENV) else {
        eprintln!("not an attack run: {ATTACK_ENV} is not set");
        return;
    };
    let (daemon, seconds) = spec.split_once(':').unwrap();
    let daemon: i32 = daemon.parse().unwrap();
    let until = Instant::now() + Duration::from_secs(seconds.parse().unwrap());
    let last_pid = std::fs::File::open("/proc/sys/kernel/ns_last_pid").unwrap();
    let (mut seized, mut read) = (0, 0);
    let mut buf = [0u8; 32];
    while Instant::now() < until {
        use std::os::unix::fs::FileExt;
        let n = last_pid.read_at(&mut buf, 0).unwrap();
        let last: i32 = std::str::from_utf8(&buf[..n])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for pid in last - 2..=last + 6 {
            // SAFETY: PTRACE_SEIZE takes a pid and no memory.
            let rc = unsafe {
                libc::ptrace(
                    libc::PTRACE_SEIZE,
                    pid,
                    std::ptr::null_mut::<libc::c_void>(),
                    0,
                )
            };
            if rc != 0 {
                continue;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if ppid != Some(daemon) {
                continue;
            }
            seized += 1;
            if let Ok(mem) = std::fs::File::open(format!("/proc/{pid}/mem")) {
                let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
                let start = maps
                    .split('-')
                    .next()
                    .and_then(|a| u64::from_str_radix(a, 16).ok())
                    .unwrap_or(0);
                let mut byte = [0u8; 1];
                if mem.read_at(&mut byte, start).is_ok() {
                    read += 1;
                }
            }
        }
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    println!("attacker uid {uid}: seized {seized}, read {read}");
}

/// Runs `program args…` as `uid` with exactly `env`.
fn command_as(uid: u32, program: &str, args: &[&str], env: &[(&str, &Path)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().uid(uid).gid(uid);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Waits until something accepts connections on `socket`.
fn accepting(socket: &Path) -> bool {
    crate::util::wait_until(Duration::from_secs(20), || {
        UnixStream::connect(socket).is_ok()
    })
}

/// Another local user pre-creates the victim's private-daemon directory in the shared temp
/// dir, open to all, with its own daemon listening there. Before the fix the victim's
/// `jqjail FILTER FILE` sent the filter and the whole input to that daemon and printed its
/// answer. Now the victim's CLI skips the directory (saying whose it is), starts its own
/// daemon in a directory of its own, and the planted one never sees a request; pointed at the
/// planted socket explicitly, it refuses before sending anything.
#[test]
fn a_planted_private_daemon_is_refused_and_does_not_lock_the_user_out() {
    if !root() {
        crate::util::skip("needs root, to act as a victim and an attacker of two other uids");
        return;
    }
    const VICTIM: u32 = 4242;
    const ATTACKER: u32 = 65534;
    use std::os::unix::fs::{PermissionsExt, chown};
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    // The attacker's directory and daemon, where the victim's CLI looks first.
    let planted = tmp.path().join(format!("jqjail-{VICTIM}"));
    std::fs::create_dir(&planted).unwrap();
    chown(&planted, Some(ATTACKER), Some(ATTACKER)).unwrap();
    // Open to the victim, but writable by its owner only: the daemon binds nowhere else.
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    let planted_socket = planted.join("jqjail.sock");
    let store = planted.join("store");
    let _attacker = KillOnDrop(
        command_as(
            ATTACKER,
            crate::util::DAEMON,
            &[
                "--socket",
                planted_socket.to_str().unwrap(),
                "--store",
                store.to_str().unwrap(),
                "--socket-mode",
                "0666",
            ],
            &[],
        )
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    assert!(
        accepting(&planted_socket),
        "the attacker's daemon did not start"
    );
    // The victim: a home of its own, the shared temp dir, no runtime dir.
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    chown(&home, Some(VICTIM), Some(VICTIM)).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = home.join("secret.json");
    std::fs::write(
        &secret,
        r#"{"user":"alice","password":"hunter2-TOPSECRET"}"#,
    )
    .unwrap();
    chown(&secret, Some(VICTIM), Some(VICTIM)).unwrap();
    let env = [("HOME", home.as_path()), ("TMPDIR", tmp.path())];
    let victim = |args: &[&str], env: &[(&str, &Path)]| {
        command_as(VICTIM, crate::util::CLI, args, env)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = victim(&[".user", secret.to_str().unwrap()], &env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Whatever happens next, stop every process the victim's uid left running.
    let _ = command_as(VICTIM, "/bin/kill", &["-KILL", "-1"], &[]).status();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"alice\"");
    assert!(
        stderr.contains(&format!("belongs to uid {ATTACKER}")),
        "{stderr}"
    );
    // Issue 34, attack 10: a service account, with no runtime dir and no home it can write
    // in, was left with only the planted directory and no daemon at all (exit 8). It now
    // makes a directory of its own, with a name no one can take first, and says where; the
    // next command finds the same one by its owner.
    let locked_home = tmp.path().join("locked-home");
    std::fs::create_dir(&locked_home).unwrap();
    std::fs::set_permissions(&locked_home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let service = [("HOME", locked_home.as_path()), ("TMPDIR", tmp.path())];
    let mut chosen = Vec::new();
    for _ in 0..2 {
        let out = victim(&[".user", secret.to_str().unwrap()], &service);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"alice\"");
        let prefix = format!("using {}/jqjail-{VICTIM}-", tmp.path().display());
        let at = stderr.find(&prefix).unwrap_or_else(|| panic!("{stderr}"));
        chosen.push(stderr[at..].split_whitespace().nth(1).unwrap().to_string());
    }
    let _ = command_as(VICTIM, "/bin/kill", &["-KILL", "-1"], &[]).status();
    assert_eq!(
        chosen[0], chosen[1],
        "the second command found another directory"
    );
    // Pointed at the planted socket, the CLI refuses before sending anything.
    let out = victim(
        &[".password", secret.to_str().unwrap()],
        &[
            ("HOME", home.as_path()),
            ("JQJAIL_SOCKET", planted_socket.as_path()),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains(&format!("run by uid {ATTACKER}")),
        "{stderr}"
    );
    // The planted daemon evaluated nothing for anyone.
    // (Asked by root, which trusts that daemon's uid for this one command.)
    let out = Command::new(crate::util::CLI)
        .args(["stats", "--socket", planted_socket.to_str().unwrap()])
        .env("JQJAIL_DAEMON_UIDS", ATTACKER.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        stats["latency"]["count"], 0,
        "the planted daemon ran a request: {stats}"
    );
}

/// A child killed and reaped when the test ends, passed or not.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Environment variable that turns `flood_helper` into a flooder: `SOCKET|CONNECTIONS|BYTES|SECONDS`.
/// It opens CONNECTIONS connections to SOCKET, sends each the length prefix of a frame of
/// 40,000,000 bytes and then up to BYTES bytes of its body (as many as the daemon takes without
/// blocking), holds them all for SECONDS and prints how many the daemon had closed by then.
const FLOOD_ENV: &str = "JQJAIL_FLOOD";

/// Runs `flood_helper` as `uid`; returns its child (its report comes on stdout).
fn flood_as(
    uid: u32,
    socket: &Path,
    connections: usize,
    bytes: usize,
    seconds: u64,
) -> std::process::Child {
    let spec = format!("{}|{connections}|{bytes}|{seconds}", socket.display());
    crate::util::helper_as(uid, "attacks::flood_helper", FLOOD_ENV, spec)
}

/// The flooder of the tests below, run by them as another uid (ignored otherwise).
#[test]
#[ignore = "run by the connection-flood tests as another uid"]
fn flood_helper() {
    let Ok(spec) = std::env::var(FLOOD_ENV) else {
        eprintln!("not a flood run: {FLOOD_ENV} is not set");
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (socket, connections, bytes, seconds) = (
        parts[0],
        parts[1].parse::<usize>().unwrap(),
        parts[2].parse::<usize>().unwrap(),
        parts[3].parse::<u64>().unwrap(),
    );
    let mut open = Vec::new();
    let mut refused = 0;
    let body = vec![b'x'; 64 * 1024];
    for _ in 0..connections {
        let Ok(mut s) = UnixStream::connect(socket) else {
            refused += 1;
            continue;
        };
        if bytes > 0 {
            let _ = s.write_all(&40_000_000u32.to_le_bytes());
            s.set_nonblocking(true).unwrap();
            let mut sent = 0;
            while sent < bytes {
                match s.write(&body[..body.len().min(bytes - sent)]) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
        }
        open.push(s);
    }
    std::thread::sleep(Duration::from_secs(seconds));
    // A connection the daemon closed reads as EOF (after any answer it sent).
    let mut closed = 0;
    for s in &mut open {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut sink = Vec::new();
        match s.read_to_end(&mut sink) {
            Ok(_) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => closed += 1,
            Err(_) => {}
        }
    }
    println!(
        "flood: {} open, {closed} closed by the daemon, {refused} not connected",
        open.len()
    );
}

/// Attack 2 of issue 13: a uid the configuration refuses sends all but the end of a maximal
/// first frame on 20 connections. The daemon read each whole (up to 42 MB) before it checked
/// the uid: 812 MB resident. Now a refused peer is answered after five bytes, and the first
/// frame of anyone is capped at a hello's size.
#[test]
fn a_refused_uid_cannot_make_the_daemon_hold_memory() {
    if !root() {
        crate::util::skip("needs root, to connect as a refused uid");
        return;
    }
    let (d, _dir) = configured(
        "[tenants]\nunknown = \"refuse\"\n[[tenants.tenant]]\nname = \"admins\"\nuids = [0]\n",
    );
    let before = rss(d.pid());
    let flood = flood_as(65534, &d.socket, 20, 8 << 20, 4);
    let mut peak = before;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        peak = peak.max(rss(d.pid()));
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = flood.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        peak < before + (64 << 20),
        "daemon RSS went from {before} to {peak} bytes; {report}"
    );
    assert!(report.contains("flood: 20 open, 20 closed"), "{report}");
    // A configured tenant's oversized first frame is refused at its length, too.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.write_all(&40_000_000u32.to_le_bytes()).unwrap();
    let mut reply = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.read_to_end(&mut reply);
    let answer: jqjail_protocol::Response = jqjail_protocol::Encoding::Bincode
        .decode(&reply[4..])
        .unwrap();
    let jqjail_protocol::Response::Error(e) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(e.code, jqjail_client::ErrorCode::FrameTooLarge);
    assert_eq!(e.limit, Some(4096));
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// Attack 4 of issue 13: a refused uid holds many silent connections. `max_connections` was
/// daemon-wide and each was kept 30 s before its peer was checked, so a configured tenant was
/// reset on every try, and every refusal was logged (2 M lines a minute). Now a uid holds at
/// most its share of the slots, a refused peer is let go within a second, and refusals are
/// logged at most once a second.
#[test]
fn a_flooding_uid_cannot_lock_out_a_tenant_or_flood_the_log() {
    if !root() {
        crate::util::skip("needs root, to connect as a refused uid");
        return;
    }
    let (d, _dir) = configured(
        "[server]\nmax_connections = 64\nmax_connections_per_uid = 16\n[tenants]\nunknown = \"refuse\"\n[[tenants.tenant]]\nname = \"admins\"\nuids = [0]\n",
    );
    let log_before = d.log().lines().count();
    let flood = flood_as(65534, &d.socket, 400, 0, 4);
    // While the flood holds what it can, the tenant is served every time.
    let start = Instant::now();
    let mut served = 0;
    while start.elapsed() < Duration::from_secs(3) {
        let mut c = d.client();
        assert_eq!(
            c.run(".a", br#"{"a":7}"#, &Default::default())
                .unwrap()
                .output,
            "7"
        );
        served += 1;
    }
    let out = flood.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(served > 10, "served {served}; {report}");
    let logged = d.log().lines().count() - log_before;
    assert!(logged < 40, "{logged} log lines for one flood");
}

/// Attack 3 of issue 13: tiny `hide_get` requests whose answers are never read. Each answer
/// (JSON escaping makes control bytes six times longer) was built whole and held with no
/// write deadline: five held 709 MB for 45 s. Now a uid's large answers are built one at a
/// time, and an answer not taken within the frame timeout ends its connection.
#[test]
fn unread_answers_cannot_pile_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    std::fs::write(&config, "[server]\nframe_timeout_ms = 2000\n").unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    let content = vec![0x01u8; 8 << 20];
    let hide = d
        .client()
        .hide_put("tool_output", "ctl", &content, &Default::default())
        .unwrap()
        .entry
        .id;
    let before = rss(d.pid());
    let request = format!(r#"{{"hide_get":{{"id":"{hide}"}}}}"#);
    let hello = br#"{"hello":{"protocol":2}}"#;
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        for body in [&hello[..], request.as_bytes()] {
            s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
            s.write_all(body).unwrap();
        }
        stalled.push(s);
    }
    let mut peak = before;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        peak = peak.max(rss(d.pid()));
        std::thread::sleep(Duration::from_millis(25));
    }
    // One 48 MiB answer at a time (and its content) at most, not eight.
    assert!(
        peak < before + (160 << 20),
        "daemon RSS went from {before} to {peak} bytes"
    );
    // The daemon stays responsive, and lets go of the unread answers: the one being written
    // when its write deadline passes (the connection is closed), the others once they have
    // waited a frame timeout for their turn (answered OVERLOADED, which is small).
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
    assert!(
        crate::util::wait_until(Duration::from_secs(30), || rss(d.pid())
            < before + (32 << 20)),
        "daemon RSS still {} bytes, from {before}",
        rss(d.pid())
    );
    drop(stalled);
}

/// Attack 5 of issue 13: a tenant's stalled uploads of large inputs each took an evaluation
/// slot and a worker before their input arrived, so four of them made another tenant's runs
/// wait for the whole frame timeout. Then (review of protocol v2) the per-tenant cap on such
/// uploads equalled the daemon's total by default, so two stalled uploads of one tenant made
/// every other tenant's large input OVERLOADED. Now no tenant holds every turn, and an upload
/// that stops sending is cut off after 5 s (`a_stalled_tail_is_cut_off_and_frees_its_turn`).
#[test]
fn stalled_uploads_of_one_tenant_leave_slots_for_another() {
    if !root() {
        crate::util::skip(
            "stalled_uploads_of_one_tenant_leave_slots_for_another: needs root, to run a second tenant as another uid",
        );
        return;
    }
    // The defaults but the frame timeout (so the stalled uploads outlive the test) and the
    // evaluation slots (four, as on a two-CPU host: two turns for streamed runs in all).
    let (d, _dir) =
        configured("[workers]\nmax_concurrent = 4\n[server]\nframe_timeout_ms = 20000\n");
    let frame = crate::util::run_frame(".", 1 << 20);
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut s = crate::util::begin_stream(&d, &frame);
        // Enough of the input that the daemon starts passing it on.
        s.write_all(b"[").unwrap();
        s.write_all(&[b' '; 128 << 10]).unwrap();
        stalled.push(s);
    }

    // Another tenant's large input (streamed too) is served at once.
    let feeder = crate::util::Feeder::start(&stalled);
    let input = format!("{{\"a\":5,\"pad\":\"{}\"}}", "x".repeat(300 << 10));
    crate::admission::nobody_is_served_meanwhile(&d, input.as_bytes(), "5", "4 stalled uploads");
    let fed = feeder.stop();
    // The uploads complete: one was evaluated; the others were over the tenant's one turn
    // (of two) and say so.
    let rest = (1 << 20) - 1 - (128 << 10);
    let mut answers = Vec::new();
    for (mut s, fed) in stalled.into_iter().zip(fed) {
        s.write_all(&vec![b' '; rest - 1 - fed]).unwrap();
        s.write_all(b"]").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        answers.push(match crate::util::read_response(&mut s) {
            jqjail_protocol::Response::Run(r) => String::from_utf8(r.output.into_bytes()).unwrap(),
            // The upload whose turn came, fed a byte a second, may have fallen behind the
            // minimum pace (issue 34) while the check above ran: cut off, as it should be.
            jqjail_protocol::Response::Error(e)
                if e.code == jqjail_protocol::ErrorCode::ProtocolError =>
            {
                assert!(e.message.contains("minimum pace"), "{e}");
                "cut off".to_string()
            }
            jqjail_protocol::Response::Error(e) => {
                assert!(e.message.contains("its limit"), "{e}");
                e.code.to_string()
            }
            other => format!("{other:?}"),
        });
    }
    answers.sort();
    assert_eq!(answers[..3], ["OVERLOADED", "OVERLOADED", "OVERLOADED"]);
    assert!(
        ["[]", "cut off"].contains(&answers[3].as_str()),
        "{answers:?}"
    );
}

/// Review of protocol v2: an upload whose client stopped sending held its turn, its slot and
/// its worker until the frame timeout (30 s), renewable by reconnecting. Now a client's tail
/// that falls behind the minimum pace (issue 34; it was: no byte for 5 s) is cut off with one
/// answer, and the turn is free again.
#[test]
fn a_stalled_tail_is_cut_off_and_frees_its_turn() {
    let d = Daemon::start();
    let mut s = crate::util::begin_stream(&d, &crate::util::run_frame(".", 1 << 20));
    s.write_all(&[b' '; 300 << 10]).unwrap();
    let start = Instant::now();
    s.set_read_timeout(Some(
        d.cfg.frame_timeout + jqjail_supervisor::server::TAIL_STALL,
    ))
    .unwrap();
    let jqjail_protocol::Response::Error(e) = crate::util::read_response(&mut s) else {
        panic!("expected an error")
    };
    let took = start.elapsed();
    assert_eq!(e.code, jqjail_client::ErrorCode::ProtocolError);
    assert!(
        e.message.contains("did not come at the minimum pace") && e.message.contains("307,200"),
        "{e}"
    );
    // 300 KiB in hand buy the grace and a little more: cut off within seconds.
    crate::util::before(
        took,
        jqjail_supervisor::pace::allowance(300 << 10) + Duration::from_secs(1),
        "the stalled tail was not cut off at the pace",
    );
    let big = format!("[{}1]", "0,".repeat(200 << 10));
    assert_eq!(d.ok("length", &big), format!("{}", (200 << 10) + 1));
}

/// Review of protocol v2: a request's frame budget was given back once the frame decoded, so
/// 128 connections of one uid each holding a maximal frame (a 500 KB filter) while its tail
/// never came made the daemon hold 75 MB (539 MB over eight uids); puts likewise held a
/// 256 KiB buffer each. Now a head that is over a limit is refused before its tail is read,
/// and a frame's budget is held until its answer is written.
#[test]
fn requests_waiting_for_their_tails_hold_no_memory_outside_the_budget() {
    let d = Daemon::start();
    let before = rss(d.pid());
    let hello = br#"{"hello":{"protocol":2}}"#;
    let filter = "a".repeat(500_000);
    let kind = "k".repeat(300_000);
    let mut open = Vec::new();
    for i in 0..100 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        let request = match i % 2 {
            0 => format!(r#"{{"run":{{"filter":"{filter}","input":{{"inline":1000}}}}}}"#),
            _ => format!(r#"{{"hide_put":{{"kind":"{kind}","content_bytes":1000000}}}}"#),
        };
        for body in [&hello[..], request.as_bytes()] {
            s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
            s.write_all(body).unwrap();
        }
        s.set_nonblocking(true).unwrap();
        open.push(s);
    }
    let mut peak = before;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        peak = peak.max(rss(d.pid()));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        peak < before + (16 << 20),
        "daemon RSS went from {before} to {peak} bytes"
    );
    // Each was refused at its head, without waiting for its tail.
    let mut codes = std::collections::BTreeSet::new();
    for mut s in open.into_iter().take(2) {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut hello_reply = [0u8; 4];
        s.read_exact(&mut hello_reply).unwrap();
        let mut body = vec![0u8; u32::from_le_bytes(hello_reply) as usize];
        s.read_exact(&mut body).unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
        s.read_exact(&mut body).unwrap();
        let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
        codes.insert(reply["error"]["code"].as_str().unwrap().to_string());
    }
    assert_eq!(
        codes,
        ["FILTER_TOO_LONG", "INVALID_REQUEST"]
            .map(String::from)
            .into()
    );
    assert!(
        std::fs::read_dir(d.store().join("tmp"))
            .unwrap()
            .next()
            .is_none()
    );
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// Review of protocol v2: the clients allocated a response's tail at the length the daemon
/// claimed (2^40: the client aborted) and followed list pages for ever. A daemon is checked
/// before anything is sent, but a trusted one can still be buggy or compromised: the clients
/// bound both.
#[test]
fn a_lying_daemon_cannot_crash_the_client_or_hold_it_in_a_loop() {
    use jqjail_protocol::{
        Encoding, HelloReply, HideContent, HideEntry, HideListReply, Limits, Response, Tail,
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("fake.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let entry = HideEntry {
        id: "x-00000000".into(),
        kind: String::new(),
        source: String::new(),
        size: 1 << 40,
        sha256: String::new(),
        meta: Default::default(),
        created_ms: 0,
    };
    let answers = [
        Response::HideContent(HideContent {
            entry: entry.clone(),
            content: Tail::pending(1 << 40),
        }),
        Response::HideList(HideListReply {
            entries: vec![entry],
            total: 5,
            next: Some(0),
        }),
    ];
    let fake = std::thread::spawn(move || {
        for answer in answers {
            let (mut s, _) = listener.accept().unwrap();
            let _ = crate::util::read_frame_raw(&mut s);
            let hello = Response::Hello(HelloReply {
                protocol: 2,
                server: "fake".into(),
                limits: Limits {
                    max_input_bytes: u64::MAX,
                    ..Limits::default()
                },
            });
            for response in [hello, answer.clone(), answer.clone(), answer] {
                let body = Encoding::Bincode.encode(&response).unwrap();
                let _ = s.write_all(&(body.len() as u32).to_le_bytes());
                let _ = s.write_all(&body);
                let _ = crate::util::read_frame_raw(&mut s);
            }
        }
    });
    let mut c = jqjail_client::Client::connect(&socket).unwrap();
    c.set_io_timeout(Some(Duration::from_secs(5))).unwrap();
    let e = c.hide_get("x-00000000").unwrap_err();
    assert!(e.to_string().contains("tail of 1099511627776 bytes"), "{e}");
    drop(c);
    let mut c = jqjail_client::Client::connect(&socket).unwrap();
    c.set_io_timeout(Some(Duration::from_secs(5))).unwrap();
    let e = c.hide_list().unwrap_err();
    assert!(e.to_string().contains("list page"), "{e}");
    drop(c);
    fake.join().unwrap();
}

/// Attack 4 of issue 16: streamed puts wrote to the store's `tmp/` before any quota applied
/// (ten stalled uploads held 190 MiB while usage said 0), and after a crash all of it stayed
/// (stale temp files were swept only when an hour old). Now a put in progress reserves its
/// declared size against its tenant's quota, so a second stalled upload that does not fit is
/// refused before it writes a byte, and a restart removes the temp files of the daemon that died.
#[test]
fn stalled_uploads_hold_at_most_the_quota_and_a_restart_removes_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    std::fs::write(
        &config,
        "[server]\nframe_timeout_ms = 20000\n[store]\nquota_bytes = 8388608\n",
    )
    .unwrap();
    let mut d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    let size = 6 << 20;
    let frame = crate::util::put_frame("stalled", size as u64);
    let tmp = d.store().join("tmp");
    let temp_files = || std::fs::read_dir(&tmp).unwrap().count();
    let mut uploads = Vec::new();
    for _ in 0..3 {
        let mut s = crate::util::begin_stream(&d, &frame);
        s.write_all(&[b'x'; 512 << 10]).unwrap();
        uploads.push(s);
    }
    // The first upload's temp file, and no other: the others do not fit beside it.
    assert!(
        crate::util::wait_until(Duration::from_secs(5), || temp_files() == 1),
        "{} temp files",
        temp_files()
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(temp_files(), 1);
    // The daemon dies mid-upload; the next one, on the same store, removes what it left.
    crate::util::signal(d.pid(), libc::SIGKILL);
    let _ = d.child.wait();
    drop(uploads);
    assert_eq!(temp_files(), 1);
    let store = d.store();
    let again = Command::new(crate::util::DAEMON)
        .args(["--socket", dir.path().join("again.sock").to_str().unwrap()])
        .args(["--store", store.to_str().unwrap()])
        .env("JQJAIL_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut again = KillOnDrop(again);
    let stderr = again.0.stderr.take().unwrap();
    let log = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .take_while(|l| !l.contains("jqjaild ready"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(log.contains("temp_files=1"), "{log}");
    assert_eq!(temp_files(), 0);
}

/// Review finding on attack 2: a tenant's JSON frames were read whole (up to 40 MB each in
/// v1), so one uid on its 128 connections could make the daemon hold gigabytes. In v2 a frame
/// is at most 512 KiB, and a frame read whole first takes its size from a budget of one
/// maximal frame per uid (four in all); the others wait, unread and unallocated. Sixty
/// connections each sending all but one byte of a maximal frame would make 30 MiB without it.
#[test]
fn one_uid_cannot_make_the_daemon_hold_many_whole_frames() {
    let d = Daemon::start();
    let before = rss(d.pid());
    let hello = br#"{"hello":{"protocol":2}}"#;
    let max = jqjail_protocol::MAX_FRAME_BYTES as usize;
    let mut open = Vec::new();
    for _ in 0..60 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.write_all(&(hello.len() as u32).to_le_bytes()).unwrap();
        s.write_all(hello).unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut reply = vec![0u8; u32::from_le_bytes(len) as usize];
        s.read_exact(&mut reply).unwrap();
        s.write_all(&(max as u32).to_le_bytes()).unwrap();
        s.set_nonblocking(true).unwrap();
        open.push((s, 0usize));
    }
    // Each connection sends all but the last byte of its frame, as fast as the daemon takes it.
    let chunk = vec![b' '; 16 << 10];
    let mut peak = before;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        for (s, sent) in open.iter_mut().filter(|(_, sent)| *sent < max - 1) {
            let want = chunk.len().min(max - 1 - *sent);
            if let Ok(n) = s.write(&chunk[..want]) {
                *sent += n;
            }
        }
        peak = peak.max(rss(d.pid()));
    }
    let taken: usize = open.iter().map(|(_, sent)| sent).sum();
    assert!(
        peak < before + (8 << 20),
        "daemon RSS went from {before} to {peak} bytes ({taken} bytes of frames taken)"
    );
    // Another tenant's requests are still served; this uid's own wait for its budget, which
    // its stalled frames hold until they time out or are dropped.
    if crate::util::root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        crate::admission::nobody_is_served_meanwhile(
            &d,
            br#"{"a":1}"#,
            "1",
            "60 maximal frames of one uid",
        );
    } else {
        crate::util::skip(
            "one_uid_cannot_make_the_daemon_hold_many_whole_frames: needs root to check another uid is served",
        );
    }
    drop(open);
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// Decoding a request's argument names is linear: one tenant's frame of 80,000 names does not
/// stall the daemon for another. (The duplicate check was a scan per name, quadratic: the
/// other tenant's request waited 8.6 s.)
#[test]
fn a_frame_of_many_argument_names_does_not_stall_the_daemon() {
    use jqjail_protocol::{Args, Encoding, Input, Named, Request, RunRequest, Tail};
    let d = Daemon::start();
    let mut other = d.client();
    let first: Vec<char> = ('a'..='z').chain('A'..='Z').chain(['_']).collect();
    let rest: Vec<char> = ('a'..='z')
        .chain('A'..='Z')
        .chain('0'..='9')
        .chain(['_'])
        .collect();
    let mut names = Vec::new();
    'all: for a in &first {
        for b in &rest {
            for c in &rest {
                names.push(format!("{a}{b}{c}"));
                if names.len() == 80_000 {
                    break 'all;
                }
            }
        }
    }
    let named: Named = names.into_iter().map(|n| (n, "1".to_string())).collect();
    assert_eq!(named.len(), 80_000);
    let frame = Encoding::Bincode
        .encode(&Request::Run(RunRequest {
            filter: ".".into(),
            lang: Default::default(),
            limits: Default::default(),
            on_oversize: Default::default(),
            input: Input::Inline(Tail::pending(1)),
            args: Args {
                named,
                positional: Vec::new(),
            },
            outputs: Default::default(),
        }))
        .unwrap();
    assert!(frame.len() < 512 * 1024, "{}", frame.len());
    let mut attacker = crate::util::begin_stream(&d, &frame);
    attacker.write_all(b"1").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    let answer = other.run(".", b"2", &Default::default()).unwrap();
    let waited = start.elapsed();
    assert_eq!(answer.output, "2");
    crate::util::before(
        waited,
        d.deadline(),
        "the other tenant waited longer than a whole request may take: the supervisor stalled",
    );
    // The attacker is answered too (its arguments are many, not wrong).
    let _ = crate::util::read_response(&mut attacker);
}
