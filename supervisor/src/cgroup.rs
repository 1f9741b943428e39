//! A memory cgroup per worker, where the host offers a writable cgroup-v1 memory controller:
//! a second, kernel-accounted memory bound behind RLIMIT_DATA (it also counts the stack and
//! page tables, which RLIMIT_DATA does not). Set slightly above the heap limit, so the rlimit
//! answers first with a clean `MEMORY_LIMIT` and the cgroup's OOM killer is the backstop.
//!
//! cgroup v2 is not used: its no-internal-process rule means the daemon would have to move
//! itself into a leaf first, which is the service manager's job. Under systemd, MemoryMax= on
//! the service bounds the whole daemon instead.

use std::io;
use std::path::{Path, PathBuf};

/// The directory under which per-worker cgroups are created.
#[derive(Debug)]
pub struct CgroupParent {
    dir: PathBuf,
    limit_bytes: u64,
}

/// One worker's cgroup; removed once the worker is reaped.
#[derive(Debug)]
pub struct WorkerCgroup {
    dir: PathBuf,
}

fn own_v1_memory_cgroup() -> Result<PathBuf, String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let path = text
        .lines()
        .filter_map(|l| {
            let mut fields = l.splitn(3, ':').skip(1);
            fields.next().zip(fields.next())
        })
        .find(|(controllers, _)| controllers.split(',').any(|c| c == "memory"))
        .map(|(_, path)| path.trim_start_matches('/').to_string())
        .ok_or("no cgroup-v1 memory controller for this process")?;
    let dir = Path::new("/sys/fs/cgroup/memory").join(path);
    if dir.join("memory.limit_in_bytes").is_file() {
        Ok(dir)
    } else {
        Err(format!("{} has no memory.limit_in_bytes", dir.display()))
    }
}

impl CgroupParent {
    /// Finds this process's memory cgroup and creates `jqjail-workers-<pid>` under it.
    pub fn create(limit_bytes: u64) -> Result<CgroupParent, String> {
        let own = own_v1_memory_cgroup()?;
        sweep_stale(&own);
        let dir = own.join(format!("jqjail-workers-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
        Ok(CgroupParent { dir, limit_bytes })
    }

    /// The per-worker limit.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Creates a cgroup for `pid` with the limit and moves the process into it.
    pub fn attach(&self, pid: i32) -> io::Result<WorkerCgroup> {
        let dir = self.dir.join(format!("w{pid}"));
        std::fs::create_dir(&dir)?;
        let cg = WorkerCgroup { dir };
        std::fs::write(
            cg.dir.join("memory.limit_in_bytes"),
            self.limit_bytes.to_string(),
        )?;
        std::fs::write(cg.dir.join("cgroup.procs"), pid.to_string())?;
        Ok(cg)
    }
}

/// Removes the cgroups that daemons which are gone (killed, crashed) left behind, and their
/// empty worker cgroups. A cgroup directory is removed with rmdir, which the kernel allows only
/// for a cgroup without processes, so nothing live is touched.
fn sweep_stale(own: &Path) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("jqjail-workers-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(workers) = std::fs::read_dir(entry.path()) {
            for w in workers.flatten() {
                if w.path().is_dir() {
                    let _ = std::fs::remove_dir(w.path());
                }
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        // Succeeds once every worker cgroup under it is gone.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl WorkerCgroup {
    /// Whether the kernel's OOM killer acted in this cgroup.
    pub fn oom_killed(&self) -> bool {
        std::fs::read_to_string(self.dir.join("memory.oom_control"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            })
            .is_some_and(|n| n > 0)
    }

    /// Removes the (empty) cgroup.
    pub fn remove(self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
