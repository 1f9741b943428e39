//! A memory cgroup per worker, where the host offers a writable cgroup-v1 memory controller:
//! a second, kernel-accounted memory bound behind RLIMIT_DATA (it also counts the stack and
//! page tables, which RLIMIT_DATA does not). Set slightly above the heap limit, so the rlimit
//! answers first with a clean `MEMORY_LIMIT` and the cgroup's OOM killer is the backstop.
//!
//! Worker cgroups are recycled: creating and removing a memory cgroup is the most expensive
//! kernel work of a worker's life (it cost a third of the small-request throughput), so an
//! emptied cgroup (its worker reaped) goes back to a free list and the next worker moves into
//! it. Its OOM-kill counter cannot be reset, so each use compares against the count it started
//! from. Memory still charged to a reused cgroup is page cache, which the kernel reclaims
//! before it would refuse the worker anything. A cgroup keeps its `cgroup.procs` and
//! `memory.oom_control` open while it is reused: each worker then costs one write and one
//! read, where opening them again cost two path walks, two opens, two closes and a stat. One
//! removed from outside while it waits is found at its next use (ENODEV) and dropped.
//!
//! cgroup v2 is not used: its no-internal-process rule means the daemon would have to move
//! itself into a leaf first, which is the service manager's job. Under systemd, MemoryMax= on
//! the service bounds the whole daemon instead.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Empty worker cgroups kept for reuse, at most.
const KEEP_FREE: usize = 64;

/// The directory under which per-worker cgroups are created.
#[derive(Debug)]
pub struct CgroupParent {
    dir: PathBuf,
    limit_bytes: u64,
    /// Empty cgroups, with the OOM-kill count each has reached.
    free: Mutex<Vec<(Slot, u64)>>,
    next: AtomicU64,
}

/// A worker cgroup and the two files of it each worker's stay uses, held open.
#[derive(Debug)]
struct Slot {
    dir: PathBuf,
    /// `cgroup.procs`, for writing: a pid written moves that process in.
    procs: File,
    /// `memory.oom_control`, for reading its OOM-kill count.
    oom_control: File,
}

impl Slot {
    /// A new cgroup in `parent` named `name`, with the limit.
    fn create(parent: &Path, name: &str, limit_bytes: u64) -> io::Result<Slot> {
        let dir = parent.join(name);
        std::fs::create_dir(&dir)?;
        let opened = std::fs::write(dir.join("memory.limit_in_bytes"), limit_bytes.to_string())
            .and_then(|()| {
                Ok((
                    File::options().write(true).open(dir.join("cgroup.procs"))?,
                    File::open(dir.join("memory.oom_control"))?,
                ))
            });
        match opened {
            Ok((procs, oom_control)) => Ok(Slot {
                dir,
                procs,
                oom_control,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// Its OOM-kill count, `None` when it cannot be read.
    fn oom_kills(&self) -> Option<u64> {
        // The file is a few dozen bytes, which the kernel writes whole into one read from its
        // start; a full buffer would mean a file this does not know.
        let mut buf = [0u8; 512];
        let len = self.oom_control.read_at(&mut buf, 0).ok()?;
        if len == buf.len() {
            return None;
        }
        std::str::from_utf8(&buf[..len])
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse::<u64>().ok())
    }

    /// Closes its files, then removes the directory (the kernel allows that only for a cgroup
    /// without processes).
    fn remove(self) -> io::Result<()> {
        let Slot {
            dir,
            procs,
            oom_control,
        } = self;
        drop((procs, oom_control));
        std::fs::remove_dir(dir)
    }
}

/// One worker's cgroup; back on the free list (or removed) once the worker is reaped.
#[derive(Debug)]
pub struct WorkerCgroup {
    slot: Slot,
    /// The OOM-kill count when this worker moved in.
    oom_base: u64,
    parent: Arc<CgroupParent>,
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
        Ok(CgroupParent {
            dir,
            limit_bytes,
            free: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        })
    }

    /// The per-worker limit.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Moves `pid` into an empty cgroup with the limit: a recycled one, or a new one. One
    /// removed from outside (an admin's clean-up, another tool's sweep), while it waited or as
    /// it was made, is dropped, and the next tried: its files then fail with ENODEV, or are
    /// not there to open.
    pub fn attach(self: &Arc<Self>, pid: i32) -> io::Result<WorkerCgroup> {
        let removed = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::ENODEV | libc::ENOENT));
        // A try that fails so drops the cgroup it took (a removed one's counter cannot be read
        // either, so it does not go back on the free list); the bound holds whatever the
        // kernel does.
        let mut gone = 0;
        let result = loop {
            if gone > KEEP_FREE {
                break Err(io::Error::other(format!(
                    "{gone} worker cgroups in {} were gone as they were to be used (removed from outside, or the directory itself)",
                    self.dir.display()
                )));
            }
            let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let taken = match reused {
                Some(free) => Ok(free),
                None => {
                    let n = self.next.fetch_add(1, Ordering::Relaxed);
                    Slot::create(&self.dir, &format!("w{n}"), self.limit_bytes).map(|s| (s, 0))
                }
            };
            let (slot, oom_base) = match taken {
                Ok(taken) => taken,
                Err(e) if removed(&e) => {
                    gone += 1;
                    continue;
                }
                Err(e) => break Err(e),
            };
            let cg = WorkerCgroup {
                slot,
                oom_base,
                parent: self.clone(),
            };
            match (&cg.slot.procs).write_all(pid.to_string().as_bytes()) {
                Ok(()) => break Ok(cg),
                Err(e) => {
                    // Nothing moved in (the process is gone, or the cgroup is): it is still
                    // empty, and goes back on the free list only if it is still there.
                    cg.finish();
                    if !removed(&e) {
                        break Err(e);
                    }
                    gone += 1;
                }
            }
        };
        if gone > 0 {
            tracing::warn!(
                gone,
                "worker cgroups were removed from outside as they were to be used; dropped"
            );
        }
        result
    }

    /// How many empty cgroups wait for reuse.
    pub fn free_count(&self) -> usize {
        self.free.lock().map_or(0, |f| f.len())
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
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (slot, _) in free {
            let _ = slot.remove();
        }
        // Succeeds once every worker cgroup under it is gone.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl WorkerCgroup {
    /// Called once the worker is reaped (the cgroup is empty): whether the kernel's OOM
    /// killer acted in it during this worker's stay. The cgroup goes back on the free list,
    /// or is removed when the list is full or its counter cannot be read.
    pub fn finish(self) -> bool {
        let count = self.slot.oom_kills();
        let killed = count.is_some_and(|n| n > self.oom_base);
        let mut free = self.parent.free.lock().unwrap_or_else(|e| e.into_inner());
        match count {
            Some(n) if free.len() < KEEP_FREE => free.push((self.slot, n)),
            _ => {
                drop(free);
                // rmdir waits for the kernel to offline the cgroup: off the runtime's
                // threads where there is a runtime.
                let slot = self.slot;
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => drop(rt.spawn_blocking(move || slot.remove())),
                    Err(_) => drop(slot.remove()),
                }
            }
        }
        killed
    }
}
