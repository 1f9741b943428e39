//! A live worker seen from outside: its kernel-enforced limits and privileges.

use crate::util::{Daemon, wait_until};
use std::process::Command;
use std::time::Duration;

fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name} in /proc status"))
}

#[test]
fn an_idle_worker_forked_by_the_zygote_is_confined() {
    let (d, pid) = idle_worker_confined("zygote");
    // CLONE_PARENT: the daemon's own child, which it waits for and signals directly.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(field(&status, "PPid:"), d.pid().to_string());
    let zygote = d
        .zygote()
        .unwrap_or_else(|| panic!("no zygote: {}", d.log()));
    // The heap limit's baseline is the zygote's data size at the fork, which a forked worker
    // takes from it rather than reading its own: exactly that, or the limit would be loose.
    let zygote_status = std::fs::read_to_string(format!("/proc/{zygote}/status")).unwrap();
    let kib: u64 = field(&zygote_status, "VmData:")
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let data: u64 = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max data size"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(
        data,
        100_000_000 + kib * 1024,
        "RLIMIT_DATA against the zygote's VmData"
    );
}

#[test]
fn an_idle_exec_d_worker_is_confined() {
    let (d, pid) = idle_worker_confined("exec");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--jqjail-worker"),
        "{cmdline:?}"
    );
    assert_eq!(d.zygote(), None, "no zygote with --worker-start exec");
}

/// Starts a daemon whose workers are started by `start`, and checks a ready worker's limits,
/// privileges, environment and descriptors; returns the daemon and the worker.
fn idle_worker_confined(start: &str) -> (Daemon, i32) {
    let d = Daemon::start_with(
        &[
            "--max-heap-bytes",
            "100000000",
            "--cpu-seconds",
            "3",
            "--stack-bytes",
            "33554432",
            "--worker-start",
            start,
        ],
        &[("JQJAIL_TEST_SECRET", "s3cret")],
    );
    assert!(wait_until(Duration::from_secs(5), || !d
        .workers()
        .is_empty()));
    let pid = d.workers()[0];
    // A worker is idle and ready once it blocks in read() on its socket.
    assert!(wait_until(Duration::from_secs(5), || crate::util::state(
        pid
    ) == Some('S')));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(field(&status, "NoNewPrivs:"), "1");
    assert_eq!(field(&status, "Seccomp:"), "2");
    assert_eq!(field(&status, "Threads:"), "1");
    for caps in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        assert_eq!(field(&status, caps), "0000000000000000", "{caps}");
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(field(&status, "CapBnd:"), "0000000000000000");
        // A uid of the workers' own range, not `nobody`, which other services share.
        let range = jqjail_supervisor::config::DEFAULT_WORKER_UIDS;
        let uid = field(&status, "Uid:");
        let ids: Vec<u32> = uid.split_whitespace().map(|u| u.parse().unwrap()).collect();
        assert!(
            ids.iter().all(|u| *u == ids[0])
                && (range.first..range.first + range.count).contains(&ids[0]),
            "Uid: {uid}"
        );
        let gid = field(&status, "Gid:");
        assert!(
            gid.split_whitespace().all(|g| g == ids[0].to_string()),
            "Gid: {gid}"
        );
        assert_eq!(field(&status, "Groups:"), "");
        // Not dumpable: the kernel then gives its private /proc files to root, not to its uid.
        use std::os::unix::fs::MetadataExt;
        let environ = std::fs::metadata(format!("/proc/{pid}/environ")).unwrap();
        assert_eq!(environ.uid(), 0, "the worker is dumpable");
    } else {
        eprintln!("not root: the uid switch and bounding-set drop are not exercised");
    }

    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let limit = |name: &str| -> (String, String) {
        let line = limits.lines().find(|l| l.starts_with(name)).unwrap();
        let mut cols = line[name.len()..].split_whitespace();
        (cols.next().unwrap().into(), cols.next().unwrap().into())
    };
    assert_eq!(limit("Max cpu time"), ("3".into(), "4".into()));
    assert_eq!(limit("Max file size"), ("0".into(), "0".into()));
    assert_eq!(limit("Max core file size"), ("0".into(), "0".into()));
    assert_eq!(limit("Max processes"), ("0".into(), "0".into()));
    assert_eq!(limit("Max open files"), ("4".into(), "4".into()));
    assert_eq!(limit("Max stack size").0, "33554432");
    let data: u64 = limit("Max data size").0.parse().unwrap();
    assert!(
        (100_000_000..100_000_000 + (64 << 20)).contains(&data),
        "RLIMIT_DATA {data}"
    );

    // The exec environment is the one glibc tunable and nothing of the daemon's (the worker
    // empties even that once running); four descriptors.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    // glibc splits GLIBC_TUNABLES at its colons in place while reading it.
    let environ = String::from_utf8_lossy(&environ);
    let parts: Vec<&str> = environ.split('\0').filter(|p| !p.is_empty()).collect();
    assert_eq!(parts.join(":"), jqjail_supervisor::spawn::WORKER_TUNABLES);
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .collect();
    assert_eq!(fds.len(), 4);
    let target = |fd: u32| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
    assert_eq!(target(0), std::path::Path::new("/dev/null"));
    assert_eq!(target(1), std::path::Path::new("/dev/null"));
    assert!(target(2).to_string_lossy().starts_with("pipe:"));
    assert!(target(3).to_string_lossy().starts_with("socket:"));
    (d, pid)
}

fn ns(pid: i32, kind: &str) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap()
}

/// What the daemon logged it applied (a host may refuse parts; the log says which).
fn applied(d: &Daemon, part: &str) -> bool {
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("worker isolation"))
        .expect("the daemon logs its worker isolation");
    line.contains(&format!("{part}=true"))
}

/// A worker that is ready and waiting: blocked in read() on its socket.
fn idle_worker(d: &Daemon) -> i32 {
    idle_worker_of(d.pid())
}

#[test]
fn default_isolation_separates_namespaces_and_empties_the_root() {
    let d = Daemon::start();
    let pid = idle_worker(&d);
    let daemon = d.pid();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        // A root daemon's worker needs no user namespace: it takes a uid of its own instead
        // (checked by the confinement tests above).
        assert_eq!(ns(pid, "user"), ns(daemon, "user"));
    }
    for (kind, part) in [
        ("user", "user_namespace"),
        ("ipc", "ipc_uts_namespaces"),
        ("uts", "ipc_uts_namespaces"),
        ("mnt", "empty_root"),
    ] {
        if kind == "user" && root {
            continue;
        }
        if applied(&d, part) {
            assert_ne!(ns(pid, kind), ns(daemon, kind), "{kind} namespace shared");
        } else {
            eprintln!("{part} was refused by this host (see the daemon log); not checked");
        }
    }
    assert_eq!(
        ns(pid, "net"),
        ns(daemon, "net"),
        "net namespace is off by default"
    );
    assert_eq!(ns(pid, "pid"), ns(daemon, "pid"), "never a PID namespace");
    if applied(&d, "empty_root") {
        let entries: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/root"))
            .unwrap()
            .collect();
        assert!(
            entries.is_empty(),
            "the worker's root is not empty: {entries:?}"
        );
        // The host's root is detached, not only out of reach by path: entering the worker's
        // mount namespace (as root, which a chroot does not stop) reaches no file of the host,
        // not even `cat`. Under a chroot the namespace's root was still a copy of the host's,
        // with every mount in it.
        if crate::util::root() {
            match Command::new("nsenter")
                .arg(format!("--mount=/proc/{pid}/ns/mnt"))
                .args(["cat", "/proc/self/mountinfo"])
                .output()
            {
                Ok(out) => assert!(
                    !out.status.success() && out.stdout.is_empty(),
                    "the worker's mount namespace still holds the host's root:\n{}",
                    String::from_utf8_lossy(&out.stdout)
                ),
                Err(e) => crate::util::skip(&format!(
                    "nsenter (util-linux) could not be run, to enter the worker's mount namespace: {e}"
                )),
            }
        } else {
            crate::util::skip("entering the worker's mount namespace needs root");
        }
        // A root daemon's zygote enters an empty root of its own first (its own mount
        // namespace, the host's tree detached), so that each worker's is a copy of one mount;
        // but each worker still has a mount namespace of its own: not the zygote's, and not
        // another worker's.
        let zygote = d
            .zygote()
            .unwrap_or_else(|| panic!("no zygote: {}", d.log()));
        if crate::util::root() {
            assert_ne!(
                ns(zygote, "mnt"),
                ns(daemon, "mnt"),
                "the zygote's namespace"
            );
            assert_eq!(
                std::fs::read_dir(format!("/proc/{zygote}/root"))
                    .unwrap()
                    .count(),
                0,
                "the zygote's root is not empty"
            );
            match Command::new("nsenter")
                .arg(format!("--mount=/proc/{zygote}/ns/mnt"))
                .args(["cat", "/proc/self/mountinfo"])
                .output()
            {
                Ok(out) => assert!(
                    !out.status.success() && out.stdout.is_empty(),
                    "the zygote's mount namespace still holds the host's root:\n{}",
                    String::from_utf8_lossy(&out.stdout)
                ),
                Err(e) => crate::util::skip(&format!(
                    "nsenter (util-linux) could not be run, to enter the zygote's mount namespace: {e}"
                )),
            }
        }
        let mut others = d.workers();
        others.retain(|&p| p != pid);
        others.push(zygote);
        let mut compared = 0;
        for other in others {
            // A worker may have exited meanwhile; as another uid, only root reads its link.
            if let Ok(theirs) = std::fs::read_link(format!("/proc/{other}/ns/mnt")) {
                assert_ne!(
                    ns(pid, "mnt"),
                    theirs,
                    "mount namespace shared with {other}"
                );
                compared += 1;
            }
        }
        assert!(
            compared > 0,
            "no other worker's or zygote's namespace could be read"
        );
    }
    // Confined workers still do their job.
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

#[test]
fn isolation_is_configurable() {
    let d = Daemon::start_with(&["--isolation", "net"], &[]);
    let pid = idle_worker(&d);
    if applied(&d, "net_namespace") {
        assert_ne!(ns(pid, "net"), ns(d.pid(), "net"));
    }
    assert_eq!(ns(pid, "mnt"), ns(d.pid(), "mnt"));
    assert_eq!(d.ok(".", "[1]"), "[1]");

    let bare = Daemon::start_with(&["--isolation", "none"], &[]);
    let pid = idle_worker(&bare);
    for kind in ["user", "ipc", "uts", "mnt", "net"] {
        assert_eq!(ns(pid, kind), ns(bare.pid(), kind), "{kind}");
    }
    // Without namespaces the worker is still confined by rlimits, privileges and seccomp.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(field(&status, "Seccomp:"), "2");
    assert_eq!(field(&status, "CapEff:"), "0000000000000000");
    assert_eq!(bare.ok(".", "[1]"), "[1]");
}

#[test]
fn each_worker_gets_a_memory_cgroup_where_the_host_allows() {
    // A heap rlimit far above the cgroup limit, so that the cgroup is what stops the filter;
    // and a deadline far past the filter's time, so that the deadline never does.
    let d = Daemon::start_with(
        &[
            "--max-heap-bytes",
            "2000000000",
            "--cgroup-memory-bytes",
            "150000000",
            "--timeout-ms",
            "20000",
        ],
        &[],
    );
    if d.log().contains("memory cgroups unavailable") {
        crate::util::skip(
            "this host offers no writable cgroup-v1 memory controller (see the daemon log)",
        );
        return;
    }
    let pid = idle_worker(&d);
    // The supervisor moves a worker into its cgroup right after spawning it, while the worker
    // starts up; on a loaded machine the worker can be ready first, so wait for the move.
    let expected = format!("/jqjail-workers-{}/w", d.pid());
    let memory_cgroup = || {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains(":memory:"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        wait_until(Duration::from_secs(5), || memory_cgroup()
            .contains(&expected)),
        "{}\n{}",
        memory_cgroup(),
        d.log()
    );
    let msg = d.err(
        "[range(1e9)]",
        "null",
        jqjail_client::ErrorCode::MemoryLimit,
    );
    assert!(msg.contains("memory cgroup"), "{msg}");
    // Cgroups are recycled, the one whose worker was OOM-killed too: the workers that use it
    // next are not taken for OOM victims (each use counts kills from its own start).
    for i in 0..12 {
        assert_eq!(d.ok(".", &i.to_string()), i.to_string());
    }
}

/// A recycled worker cgroup removed from outside while it waits on the free list (an admin's
/// clean-up, another tool's sweep): the daemon drops it and moves the worker into another, or
/// a new one, rather than start it with no memory cgroup at all.
#[test]
fn a_worker_cgroup_removed_while_free_is_replaced_not_skipped() {
    let d = Daemon::start();
    if d.log().contains("memory cgroups unavailable") {
        return crate::util::skip(
            "this host offers no writable cgroup-v1 memory controller (see the daemon log)",
        );
    }
    let own = std::fs::read_to_string(format!("/proc/{}/cgroup", d.pid())).unwrap();
    let own = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, path)| path.to_string()))
        .unwrap();
    let parent = std::path::Path::new("/sys/fs/cgroup/memory")
        .join(own.trim_start_matches('/'))
        .join(format!("jqjail-workers-{}", d.pid()));
    // Workers served and reaped: their cgroups wait, empty, for the next. rmdir succeeds only
    // for a cgroup without processes: one on the free list, or one just made for a worker
    // not yet moved in (which the daemon must then also do without).
    let mut removed = 0;
    let mut served = 0;
    assert!(
        wait_until(Duration::from_secs(10), || {
            assert_eq!(d.ok(".", &served.to_string()), served.to_string());
            served += 1;
            for slot in std::fs::read_dir(&parent).unwrap().flatten() {
                if slot.path().is_dir() && std::fs::remove_dir(slot.path()).is_ok() {
                    removed += 1;
                }
            }
            removed >= 2
        }),
        "{removed} empty cgroups removed after {served} requests:\n{}",
        d.log()
    );
    // The next workers start where those were to be reused.
    for i in 0..12 {
        assert_eq!(d.ok(".", &i.to_string()), i.to_string());
    }
    let expected = format!("/jqjail-workers-{}/w", d.pid());
    let all_in_cgroups = wait_until(Duration::from_secs(5), || {
        let workers = d.workers();
        !workers.is_empty()
            && workers.iter().all(|w| {
                std::fs::read_to_string(format!("/proc/{w}/cgroup")).is_ok_and(|c| {
                    c.lines()
                        .any(|l| l.contains(":memory:") && l.contains(&expected))
                })
            })
    });
    assert!(
        all_in_cgroups,
        "a worker is in no cgroup of its own:\n{}",
        d.log()
    );
    assert!(
        !d.log().contains("cannot put a worker in its memory cgroup"),
        "{removed} removed cgroups; a worker started without one:\n{}",
        d.log()
    );
    assert!(
        wait_until(Duration::from_secs(5), || d
            .log()
            .contains("removed from outside")),
        "no removed cgroup was come upon:\n{}",
        d.log()
    );
}

/// The zygote holds only what its children's set-up needs: no_new_privs, its own seccomp
/// allowlist, and (as root) only the five capabilities of `ZYGOTE_CAPS` in its bounding,
/// permitted and effective sets.
#[test]
fn the_zygote_holds_only_what_its_children_need() {
    let d = Daemon::start();
    assert!(wait_until(Duration::from_secs(5), || d.zygote().is_some()));
    let pid = d.zygote().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(field(&status, "NoNewPrivs:"), "1");
    assert_eq!(field(&status, "Seccomp:"), "2");
    assert_eq!(field(&status, "Threads:"), "1");
    for caps in ["CapInh:", "CapAmb:"] {
        assert_eq!(field(&status, caps), "0000000000000000", "{caps}");
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let mask: u64 = jqjail_worker::zygote::ZYGOTE_CAPS
            .iter()
            .map(|c| 1u64 << c)
            .sum();
        for caps in ["CapPrm:", "CapEff:", "CapBnd:"] {
            assert_eq!(field(&status, caps), format!("{mask:016x}"), "{caps}");
        }
    } else {
        for caps in ["CapPrm:", "CapEff:"] {
            assert_eq!(field(&status, caps), "0000000000000000", "{caps}");
        }
        eprintln!("not root: the zygote's bounding set is not checked");
    }
    // Its workers still confine themselves and work.
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// The zygote's loop writes almost nothing between two forks: a page it writes while a child
/// still shares it is copied then (a copy-on-write fault, with the page's allocation, copy and
/// memory-cgroup charge), so each page written a fork is CPU on every request's path. With
/// malloc and free in the loop that was 12–13 faults a fork; now its stack and malloc's lock
/// (`mallinfo2`, the heap's mark) are what it writes. Counted by the kernel, not timed: the
/// zygote's own minor faults (`/proc/PID/stat`; its children count theirs) over 200 requests,
/// each of which takes a worker that the zygote forks anew.
#[test]
fn the_zygote_copies_few_pages_a_fork() {
    let d = Daemon::start();
    for i in 0..20 {
        assert_eq!(d.ok(".", &i.to_string()), i.to_string());
    }
    let zygote = d.zygote().expect("a zygote");
    let faults = || {
        let stat = std::fs::read_to_string(format!("/proc/{zygote}/stat")).unwrap();
        // After the name, in parentheses (which may hold spaces): state, then fields 4 to 9;
        // minflt is the 10th field of the line.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name
            .split(' ')
            .nth(7)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let before = faults();
    let requests = 200;
    for i in 0..requests {
        assert_eq!(d.ok(".", &i.to_string()), i.to_string());
    }
    let per_fork = (faults() - before) as f64 / f64::from(requests);
    assert_eq!(
        d.zygote(),
        Some(zygote),
        "the zygote was replaced:\n{}",
        d.log()
    );
    assert!(
        per_fork <= 8.0,
        "the zygote took {per_fork:.1} page faults a fork (at most 8)"
    );
}

/// A zygote moves its machine code into transparent huge pages (`--code-pages huge`, the
/// default): one anonymous mapping, read and execute, wholly in huge pages, which each worker
/// it forks shares from its first instruction. Nothing in either process is ever writable and
/// executable. `--code-pages file` leaves the code in the executable's pages.
#[test]
fn the_zygote_shares_its_code_with_its_workers_in_huge_pages() {
    if !huge_pages_on() {
        crate::util::skip(
            "transparent huge pages are off here: the zygote keeps its code in file pages",
        );
        return;
    }
    let d = Daemon::start();
    let [zygote, worker] = zygote_and_worker(&d);
    if let Some(why) = d.log().lines().find(|l| l.contains("the code stays")) {
        // A host with no huge page to give (fragmented memory, a kernel before 6.1): the
        // zygote says so and keeps the code where it was.
        assert_code_in_file_pages([zygote, worker], why);
        crate::util::skip(&format!("the zygote could not move its code: {why}"));
        return;
    }
    for (who, pid) in [("the zygote", zygote), ("a ready worker", worker)] {
        let mappings = mappings(pid);
        let code: Vec<_> = mappings.iter().filter(|m| m.is_anonymous_code()).collect();
        assert!(
            matches!(code[..], [m] if m.size_kib >= 2048 && m.huge_kib == m.size_kib),
            "{who} ({pid}) should have one anonymous r-xp mapping, all in huge pages: {code:?}\n{}",
            d.log()
        );
        let wx: Vec<_> = mappings
            .iter()
            .filter(|m| m.perms.contains('w') && m.perms.contains('x'))
            .collect();
        assert!(
            wx.is_empty(),
            "{who} ({pid}) has writable and executable memory: {wx:?}"
        );
    }
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");

    let d = Daemon::start_with(&["--code-pages", "file"], &[]);
    assert_code_in_file_pages(zygote_and_worker(&d), "--code-pages file");
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// Under systemd's `MemoryDenyWriteExecute=` (here its kernel form, PR_SET_MDWE, which the
/// daemon's exec keeps), memory that was written may not become executable: a zygote told to
/// move its code says why it cannot, keeps it in the executable's pages, and serves as before.
#[test]
fn a_zygote_denied_write_then_execute_memory_keeps_its_code_and_serves() {
    fn deny_write_then_execute() -> std::io::Result<()> {
        const PR_SET_MDWE: libc::c_int = 65;
        const PR_MDWE_REFUSE_EXEC_GAIN: libc::c_ulong = 1;
        // SAFETY: prctl sets a flag of this process; async-signal-safe.
        if unsafe { libc::prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    let d = Daemon::start_after(None, &[], &[], deny_write_then_execute);
    assert_code_in_file_pages(zygote_and_worker(&d), "under MDWE");
    // Unless the host has no huge pages at all, which the zygote checks first.
    let why = if huge_pages_on() {
        "the code stays in the executable's pages: memory once writable may not become executable here"
    } else {
        "the code stays in the executable's pages"
    };
    // Written before the daemon's "ready" (the zygote starts for the isolation's
    // negotiation), and so in the log already; in one piece since 8fc7fde.
    assert!(
        d.log().contains(why),
        "the zygote did not say why its code stays: {}",
        d.log()
    );
    assert_eq!(d.ok(".a", r#"{"a":1}"#), "1");
}

/// Whether this host offers transparent huge pages (to a process that asks, at least).
fn huge_pages_on() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|modes| !modes.contains("[never]"))
}

/// The daemon's zygote and one of its ready workers, once both are there.
fn zygote_and_worker(d: &Daemon) -> [i32; 2] {
    assert!(
        wait_until(Duration::from_secs(5), || d.zygote().is_some()
            && !d.workers().is_empty()),
        "no zygote and ready worker: {}",
        d.log()
    );
    [d.zygote().unwrap(), d.workers()[0]]
}

/// Each of `pids` has no anonymous executable memory: its code is in the executable's pages.
fn assert_code_in_file_pages(pids: [i32; 2], context: &str) {
    for pid in pids {
        let code: Vec<_> = mappings(pid)
            .into_iter()
            .filter(Mapping::is_anonymous_code)
            .collect();
        assert!(
            code.is_empty(),
            "{context}: {pid} has anonymous code: {code:?}"
        );
    }
}

/// A mapping of `/proc/PID/smaps`.
#[derive(Debug)]
struct Mapping {
    header: String,
    perms: String,
    size_kib: u64,
    huge_kib: u64,
}

impl Mapping {
    /// Executable, and backed by no file (the header names no path and inode 0).
    fn is_anonymous_code(&self) -> bool {
        let fields: Vec<_> = self.header.split_ascii_whitespace().collect();
        self.perms.contains('x') && fields.len() == 5 && fields[4] == "0"
    }
}

fn mappings(pid: i32) -> Vec<Mapping> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/smaps: {e}"));
    let kib = |line: &str| -> u64 { line.trim().trim_end_matches("kB").trim().parse().unwrap() };
    let mut out: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_ascii_whitespace();
        let first = fields.next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c == '-' || c.is_ascii_hexdigit()) {
            out.push(Mapping {
                header: line.to_string(),
                perms: fields.next().unwrap_or("").to_string(),
                size_kib: 0,
                huge_kib: 0,
            });
        } else if let Some(last) = out.last_mut() {
            if let Some(v) = line.strip_prefix("Size:") {
                last.size_kib = kib(v);
            } else if let Some(v) = line.strip_prefix("AnonHugePages:") {
                last.huge_kib = kib(v);
            }
        }
    }
    assert!(!out.is_empty(), "no mappings in /proc/{pid}/smaps");
    out
}

/// What holds for a daemon that is not root (the systemd unit's DynamicUser, or a user's
/// private daemon): its workers are in a user namespace whose root is the daemon's own uid,
/// with no capabilities, no_new_privs, the allowlist, and not dumpable once set up (their
/// private /proc files belong to root). The few microseconds in which a worker writes its
/// own uid map, dumpable, are open only to processes of the daemon's own uid.
#[test]
fn a_non_root_daemon_confines_its_workers_in_a_user_namespace() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        crate::util::skip("needs root, to start a daemon as another, unprivileged uid");
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    const UID: u32 = 65534;
    let dir = tempfile::tempdir().unwrap();
    // The daemon's own directory: it binds its socket only where no other user can change
    // entries.
    std::os::unix::fs::chown(dir.path(), Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.path().join("s.sock");
    let mut daemon = std::process::Command::new(crate::util::DAEMON)
        .args(["--socket", socket.to_str().unwrap()])
        .args(["--store", dir.path().join("store").to_str().unwrap()])
        .uid(UID)
        .gid(UID)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = daemon.id() as i32;
    let worker = || {
        crate::util::children(pid).into_iter().find(|w| {
            std::fs::read_to_string(format!("/proc/{w}/comm"))
                .is_ok_and(|c| c.trim() == "jqjail-worker")
                && crate::util::state(*w) == Some('S')
        })
    };
    let found = wait_until(Duration::from_secs(10), || worker().is_some());
    let checks = found.then(|| {
        let w = worker().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{w}/status")).unwrap();
        let uid_map = std::fs::read_to_string(format!("/proc/{w}/uid_map")).unwrap();
        let environ_owner = std::fs::metadata(format!("/proc/{w}/environ"))
            .unwrap()
            .uid();
        let user_ns = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/user")).unwrap();
        (status, uid_map, environ_owner, user_ns(w) != user_ns(pid))
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    let (status, uid_map, environ_owner, own_namespace) = checks.expect("no idle worker");
    assert!(
        own_namespace,
        "the worker shares the daemon's user namespace"
    );
    assert_eq!(
        uid_map.split_whitespace().collect::<Vec<_>>(),
        ["0", "65534", "1"]
    );
    let uids = field(&status, "Uid:");
    assert!(uids.split_whitespace().all(|u| u == "65534"), "Uid: {uids}");
    assert_eq!(field(&status, "NoNewPrivs:"), "1");
    assert_eq!(field(&status, "Seccomp:"), "2");
    // The bounding set too: a new user namespace starts with a full one, which the worker
    // must empty itself (the set the zygote recorded for its forks does not apply there).
    for caps in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(field(&status, caps), "0000000000000000", "{caps}");
    }
    assert_eq!(environ_owner, 0, "the worker is dumpable");
}

/// A root daemon started in a chroot, where the empty root cannot be made (its root is not a
/// mount point). The zygote's own attempt fails part way, and it must go back to where it
/// was: the daemon's mount namespace, and its root and working directory too, which entering a
/// namespace would otherwise move to the namespace's root, outside the chroot. Its workers
/// then run without an empty root, as the daemon logs, inside the chroot.
#[test]
fn a_zygote_whose_empty_root_fails_stays_in_its_daemons_chroot() {
    let Some((d, jail)) = chrooted_daemon(None) else {
        return;
    };
    d.serves_twice_with_one_zygote();
    d.zygote_stayed_in(&jail);
    assert!(!d.log().contains("could not go back"), "{}", d.log());
}

/// A chroot again, under a filter that refuses `chroot` (the daemon holds CAP_SYS_CHROOT, as
/// a container's profile may have it): the zygote's way back, which must choose the chroot
/// again after entering its namespace, fails in its dry run, with the zygote already out of
/// the chroot. It exits lost; the daemon replaces it within the same start by a zygote that
/// leaves the empty root to its workers, and every later one does the same. (Before, every
/// zygote was lost at its first request, and no worker ever started.)
#[test]
fn a_zygote_lost_on_its_way_back_is_replaced_by_one_that_leaves_the_root_to_workers() {
    let Some((d, jail)) = chrooted_daemon(Some("chroot")) else {
        return;
    };
    d.serves_twice_with_one_zygote();
    d.zygote_stayed_in(&jail);
    let log = d.log();
    assert_eq!(
        log.matches("could not go back from a failed entry into its empty root")
            .count(),
        1,
        "one zygote lost, no more:\n{log}"
    );
    assert_eq!(log.matches("worker zygote started").count(), 2, "{log}");
}

/// A root daemon in a chroot (its libraries copied in, itself bind-mounted) in a mount
/// namespace of its own; with `refusing`, a system call [`exec_daemon_refusing`] refuses it,
/// from after its chroot. Returns it and its jail; `None`: skipped.
fn chrooted_daemon(refusing: Option<&str>) -> Option<(OwnDaemon, std::path::PathBuf)> {
    if !crate::util::root() {
        crate::util::skip("a daemon in a chroot and a mount namespace needs root");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let jail = tmp.path().join("jail");
    for dir in ["proc", "dev"] {
        std::fs::create_dir_all(jail.join(dir)).unwrap();
    }
    std::fs::write(jail.join("dev/null"), "").unwrap();
    std::fs::write(jail.join("jqjaild"), "").unwrap();
    // The daemon's libraries, copied; the daemon itself is bind-mounted (it is large).
    let ldd = match Command::new("ldd").arg(crate::util::DAEMON).output() {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        other => {
            crate::util::skip(&format!(
                "ldd (libc-bin) lists the daemon's libraries to copy into the chroot: {other:?}"
            ));
            return None;
        }
    };
    for lib in ldd.split_whitespace().filter(|w| w.starts_with('/')) {
        let to = jail.join(lib.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(lib, &to).unwrap();
    }
    // unshare, sh and chroot (or the helper, which chroots itself) each exec the next: the
    // child is the daemon.
    let start = match refusing {
        None => "exec chroot \"$1\" /jqjaild --socket /jqjail.sock --store /store",
        Some(_) => "exec \"$3\" --exact confinement::exec_daemon_refusing --ignored --nocapture",
    };
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t proc proc \"$1/proc\" && mount --bind /dev/null \"$1/dev/null\" && \
             mount --bind \"$2\" \"$1/jqjaild\" && {start}"
        ))
        .args([std::ffi::OsStr::new("sh"), jail.as_os_str()])
        .arg(crate::util::DAEMON)
        .arg(std::env::current_exe().unwrap());
    if let Some(syscall) = refusing {
        command
            .env(REFUSING_ENV, format!("/:{syscall}"))
            .env(JAIL_ENV, &jail);
    }
    let socket = jail.join("jqjail.sock");
    let jail = jail.canonicalize().unwrap();
    match OwnDaemon::spawn(command, tmp, socket) {
        Ok(d) => {
            assert_eq!(link(d.pid(), "root"), jail);
            Some((d, jail))
        }
        Err(e) => {
            crate::util::skip(&format!(
                "unshare (util-linux) could not be run, to start a daemon in a chroot: {e}"
            ));
            None
        }
    }
}

/// `/proc/PID/WHAT`'s link.
fn link(pid: i32, what: &str) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/{pid}/{what}")).unwrap()
}

/// Set, to the daemon's directory and the system call to refuse (`DIR:NAME`), for
/// [`exec_daemon_refusing`].
const REFUSING_ENV: &str = "JQJAIL_TEST_DAEMON_REFUSING";

/// Set, for [`exec_daemon_refusing`], to a directory to chroot into before the filter (the
/// daemon's directory is then inside it, and the daemon is its `/jqjaild`).
const JAIL_ENV: &str = "JQJAIL_TEST_DAEMON_JAIL";

/// A root daemon this file starts its own way (in a chroot, under a filter), logging into its
/// directory; killed on drop.
struct OwnDaemon {
    child: std::process::Child,
    dir: tempfile::TempDir,
    socket: std::path::PathBuf,
}

impl OwnDaemon {
    /// Runs `command`, whose process becomes the daemon (by exec), with its stderr in `dir`,
    /// and waits until it is ready; an error is the command's own failure to run.
    fn spawn(
        mut command: Command,
        dir: tempfile::TempDir,
        socket: std::path::PathBuf,
    ) -> std::io::Result<OwnDaemon> {
        let child = command
            .env("JQJAIL_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("daemon.log"))?)
            .spawn()?;
        let mut d = OwnDaemon { child, dir, socket };
        let ready = wait_until(Duration::from_secs(30), || {
            d.log().contains("jqjaild ready") || d.child.try_wait().unwrap().is_some()
        });
        assert!(
            ready && d.log().contains("jqjaild ready"),
            "the daemon did not start:\n{}",
            d.log()
        );
        Ok(d)
    }

    /// A daemon under a filter that answers `syscall` with EPERM, as a container's profile
    /// may ([`exec_daemon_refusing`]); `None`: skipped.
    fn refusing(syscall: &str) -> Option<OwnDaemon> {
        if !crate::util::root() {
            crate::util::skip("a daemon that makes its workers' empty root needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("jqjail.sock");
        // The helper execs the daemon: the child is the daemon.
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "confinement::exec_daemon_refusing",
                "--ignored",
                "--nocapture",
            ])
            .env(REFUSING_ENV, format!("{}:{syscall}", dir.path().display()))
            .current_dir(dir.path());
        Some(OwnDaemon::spawn(command, dir, socket).unwrap())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn zygote(&self) -> i32 {
        crate::util::children_named(self.pid(), "jqjail-zygote")
            .first()
            .copied()
            .unwrap_or_else(|| panic!("no zygote:\n{}", self.log()))
    }

    /// Runs `.a` over `{"a":1}` and checks the answer.
    fn answers(&self) {
        let mut client = jqjail_client::Client::connect(&self.socket).unwrap();
        client
            .set_io_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reply = client
            .run(".a", br#"{"a":1}"#, &jqjail_client::RunOptions::default())
            .unwrap();
        assert_eq!(reply.output, "1");
    }

    /// Answers two requests, and checks that one zygote forked both (none was lost and
    /// replaced); returns it.
    fn serves_twice_with_one_zygote(&self) -> i32 {
        let zygote = self.zygote();
        self.answers();
        self.answers();
        assert_eq!(
            self.zygote(),
            zygote,
            "the zygote was replaced:\n{}",
            self.log()
        );
        zygote
    }

    /// Checks that the zygote is where the daemon is (its mount namespace, root and working
    /// directory, in `jail`), that the workers run without an empty root, as logged, and
    /// that no child of the daemon left the jail.
    fn zygote_stayed_in(&self, jail: &std::path::Path) {
        let (daemon, _) = self.zygote_is_where_the_daemon_is();
        assert_eq!(link(daemon, "root"), jail);
        assert!(
            self.log().contains("empty_root=false"),
            "the workers' empty root is logged as applied:\n{}",
            self.log()
        );
        for child in crate::util::children(daemon) {
            if let Ok(root) = std::fs::read_link(format!("/proc/{child}/root")) {
                assert_eq!(root, jail, "a child of the daemon left the chroot");
            }
        }
    }

    /// Checks that the zygote is where the daemon is: its mount namespace, root and working
    /// directory; returns both pids.
    fn zygote_is_where_the_daemon_is(&self) -> (i32, i32) {
        let (daemon, zygote) = (self.pid(), self.zygote());
        for what in ["ns/mnt", "root", "cwd"] {
            assert_eq!(
                link(zygote, what),
                link(daemon, what),
                "the zygote's {what}"
            );
        }
        (daemon, zygote)
    }

    /// Checks that the zygote is where the daemon is, and that each worker made an empty root
    /// of its own.
    fn zygote_stayed_and_workers_made_their_own(&self) {
        let (daemon, zygote) = self.zygote_is_where_the_daemon_is();
        assert!(self.log().contains("empty_root=true"), "{}", self.log());
        let worker = idle_worker_of(daemon);
        assert_eq!(
            std::fs::read_dir(format!("/proc/{worker}/root"))
                .unwrap()
                .count(),
            0,
            "the worker's root is not empty"
        );
        assert_ne!(link(worker, "ns/mnt"), link(daemon, "ns/mnt"));
        assert_ne!(link(worker, "ns/mnt"), link(zygote, "ns/mnt"));
    }
}

impl Drop for OwnDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `pivot_root` refused: the zygote's own attempt fails after it mounted the empty root in a
/// namespace of its own and moved into it, and it must return to the daemon's mount
/// namespace, root and working directory. Its workers then make their empty root
/// themselves, chrooting into it, as before.
#[test]
fn a_zygote_refused_pivot_root_returns_to_the_daemons_namespace() {
    let Some(d) = OwnDaemon::refusing("pivot_root") else {
        return;
    };
    d.answers();
    assert!(
        d.log()
            .contains("pivot_root or the detach of the host's root refused"),
        "the zygote did not get as far as pivot_root:\n{}",
        d.log()
    );
    d.zygote_stayed_and_workers_made_their_own();
}

/// `setns` refused: the zygote tries its way back before it changes anything, finds it
/// refused, and never leaves the daemon's namespace; its workers make their own empty root
/// (with `pivot_root`), and the same zygote serves on.
#[test]
fn a_zygote_refused_setns_stays_where_it_is() {
    let Some(d) = OwnDaemon::refusing("setns") else {
        return;
    };
    d.serves_twice_with_one_zygote();
    assert!(
        d.log().contains("each worker enters its own empty root"),
        "{}",
        d.log()
    );
    d.zygote_stayed_and_workers_made_their_own();
}

/// `chroot` refused (where the zygote holds CAP_SYS_CHROOT, as a filter may): outside a
/// chroot the zygote's way back needs none, so it still makes its empty root, and keeps
/// serving, rather than be replaced at every start.
#[test]
fn a_zygote_refused_chroot_outside_a_chroot_still_makes_its_empty_root() {
    let Some(d) = OwnDaemon::refusing("chroot") else {
        return;
    };
    let zygote = d.serves_twice_with_one_zygote();
    assert_ne!(link(zygote, "ns/mnt"), link(d.pid(), "ns/mnt"));
    assert_eq!(
        std::fs::read_dir(format!("/proc/{zygote}/root"))
            .unwrap()
            .count(),
        0,
        "the zygote's root is not empty"
    );
}

/// A ready worker of the daemon `pid`: blocked in read() on its socket.
fn idle_worker_of(daemon: i32) -> i32 {
    let mut found = None;
    assert!(wait_until(Duration::from_secs(5), || {
        found = crate::util::children_named(daemon, "jqjail-worker")
            .into_iter()
            .find(|&p| crate::util::state(p) == Some('S'));
        found.is_some()
    }));
    found.unwrap()
}

/// The daemon of [`OwnDaemon::refusing`] and [`chrooted_daemon`], under a filter that answers
/// one system call with EPERM (run by them; ignored otherwise): chroots into [`JAIL_ENV`]'s
/// directory where that is set, installs the filter, then execs `jqjaild` on the directory
/// given.
#[test]
#[ignore = "run by the tests of a daemon refused a system call, as that daemon"]
fn exec_daemon_refusing() {
    use std::os::unix::process::CommandExt;
    let Some(spec) = std::env::var_os(REFUSING_ENV) else {
        eprintln!("not a daemon run: {REFUSING_ENV} is not set");
        return;
    };
    let spec = spec.into_string().unwrap();
    let (dir, syscall) = spec.rsplit_once(':').unwrap();
    let nr = match syscall {
        "pivot_root" => libc::SYS_pivot_root,
        "setns" => libc::SYS_setns,
        "chroot" => libc::SYS_chroot,
        other => panic!("no number for {other}"),
    };
    let dir = std::path::PathBuf::from(dir);
    let daemon = match std::env::var_os(JAIL_ENV) {
        Some(jail) => {
            std::os::unix::fs::chroot(jail).unwrap();
            std::env::set_current_dir("/").unwrap();
            std::path::PathBuf::from("/jqjaild")
        }
        None => std::path::PathBuf::from(crate::util::DAEMON),
    };
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    // The numbers are this build's architecture's, which is the only one it runs on.
    let program = [
        // The system call's number (seccomp_data.nr, at offset 0).
        op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, nr as u32),
        op(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        op(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with a flag, then with a program that lives on this frame for the call.
    // This process is a child of the test run, which execs the daemon next.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &fprog as *const libc::sock_fprog
            ),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
    }
    let err = Command::new(daemon)
        .arg("--socket")
        .arg(dir.join("jqjail.sock"))
        .arg("--store")
        .arg(dir.join("store"))
        .exec();
    panic!("exec of jqjaild: {err}");
}
