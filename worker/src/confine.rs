//! The worker's start-up confinement: one ordered function. Each step narrows what
//! the process can do before the next; the job is read only after the last.
//!
//! Order and why:
//! 0. not dumpable: a root worker is never traceable by another uid, from its first step;
//! 1. allocation failure exits with a code (before anything can fail to allocate), and large
//!    blocks are advised into huge pages (`crate::alloc::advise_huge_pages`);
//! 2. stray fds closed: only 0, 1, 2 (null, null, stderr pipe) and 3 (the socketpair) stay;
//! 3. environment emptied (the supervisor execs with only a glibc tunable, which glibc has read
//!    by now);
//! 4. the process name (`comm`) becomes `jqjail-worker`, as `ps` and the tests see it;
//! 5. SIGXCPU handler, so the CPU limit ends in a known exit status;
//! 6. the data-segment baseline read from /proc (before the root disappears); a worker forked
//!    by the zygote takes the zygote's at the fork instead (`crate::zygote`, which measures it
//!    only when its own heap has moved), the same number at a tenth of a start's cost;
//! 7. namespaces and the empty root, as configured (`crate::isolate`);
//! 8. rlimits: DATA (heap above the baseline), CPU, CORE 0, FSIZE 0, NPROC 0, NOFILE 4 — set
//!    after the steps that open files, since NOFILE 4 forbids new fds. RLIMIT_STACK is set by
//!    the supervisor before exec, because Rust's stack-overflow guard is computed at exec;
//! 9. privileges dropped: every capability out of the bounding, ambient, effective,
//!    permitted and inheritable sets, and, when started as root, the uid and gid the
//!    supervisor drew for it from its range (`StartupArgs::uid`), with no supplementary
//!    groups, in one `setresuid`; then not dumpable again (step 0 explains);
//! 10. parent-death signal, then a check that the parent is still the supervisor. Last,
//!     because the kernel clears the parent-death signal whenever the credentials change
//!     (entering a user namespace, the switch to the worker's own uid, dropping capabilities).
//!
//! no_new_privs and the seccomp allowlist come after (`crate::seccomp::install`), once the
//! caller has its hash keys (drawn, in an exec'd worker), the last work that may still need
//! the kernel. The jaq prelude was parsed before confinement (by the zygote, or by an exec'd
//! worker first thing).

use crate::alloc::exit_on_allocation_failure;
use jqjail_protocol::worker::{EXIT_CPU, StartupArgs, WORKER_FD};
use rlimit::Resource;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// A step of the confinement failed; the worker must not run a filter.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// fd 3 is not the socketpair.
    #[error("fd {WORKER_FD} is not a socket: {0}")]
    NoSocket(io::Error),
    /// The supervisor is already gone.
    #[error("parent is pid {actual}, expected the supervisor, pid {expected}")]
    Orphaned {
        /// The supervisor's pid.
        expected: u32,
        /// The parent now.
        actual: u32,
    },
    /// A part of the isolation is not available on this host.
    #[error("isolation {part}: {source}")]
    Isolation {
        /// Which part (see [`jqjail_protocol::worker::Isolation::NAMES`]).
        part: &'static str,
        /// Why.
        source: io::Error,
    },
    /// A system call of the set-up failed.
    #[error("{step}: {source}")]
    Sys {
        /// Which step.
        step: &'static str,
        /// Why.
        source: io::Error,
    },
}

fn sys(step: &'static str) -> impl FnOnce(io::Error) -> ConfineError {
    move |source| ConfineError::Sys { step, source }
}

/// Most file descriptors a confined worker may hold: the three standard ones and fd 3.
pub const MAX_FDS: u64 = 4;

/// Applies the confinement, in order. On error the caller exits without reading a job.
pub fn confine(args: &StartupArgs) -> Result<(), ConfineError> {
    // 0. Not dumpable, before anything: no process of another uid may attach to a root
    // worker, and the uid change of step 9 keeps it so (the kernel resets dumpability on
    // every credential change, to fs.suid_dumpable, 0 by default; step 9 clears it again).
    not_dumpable()?;

    // 1.
    exit_on_allocation_failure();
    crate::alloc::advise_huge_pages();

    // 2.
    keep_only_fd3()?;

    // 3.
    clear_environment();

    // 4.
    name_process(WORKER_NAME)?;

    // 5.
    extern "C" fn on_sigxcpu(_: libc::c_int) {
        // SAFETY: _exit is async-signal-safe and never returns.
        unsafe { libc::_exit(EXIT_CPU) }
    }
    // SAFETY: the handler only calls _exit (async-signal-safe); the sigaction struct is fully
    // initialised by zeroing and then setting the handler and an empty mask.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigxcpu as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGXCPU, &action, std::ptr::null_mut()) != 0 {
            return Err(sys("sigaction(SIGXCPU)")(io::Error::last_os_error()));
        }
    }

    // 6.
    let baseline = match FORKED_BASELINE.load(Ordering::Relaxed) {
        0 => data_baseline_bytes().map_err(sys("read /proc/self/status"))?,
        forked => forked,
    };

    // 7.
    let in_user_namespace =
        crate::isolate::isolate(args.isolation).map_err(|r| ConfineError::Isolation {
            part: r.part,
            source: r.source,
        })?;

    // 8.
    let data = baseline.saturating_add(args.heap_bytes);
    let cpu = args.cpu_seconds.max(1);
    let limits = [
        ("RLIMIT_DATA", Resource::DATA, data, data),
        ("RLIMIT_CPU", Resource::CPU, cpu, cpu + 1),
        ("RLIMIT_CORE", Resource::CORE, 0, 0),
        ("RLIMIT_FSIZE", Resource::FSIZE, 0, 0),
        ("RLIMIT_NPROC", Resource::NPROC, 0, 0),
        ("RLIMIT_NOFILE", Resource::NOFILE, MAX_FDS, MAX_FDS),
    ];
    for (name, resource, soft, hard) in limits {
        resource.set(soft, hard).map_err(sys(name))?;
    }

    // 9.
    drop_privileges(in_user_namespace, args.uid)?;
    not_dumpable()?;

    // 10.
    die_with_parent(args.parent_pid)
}

/// Checks that fd 3 is a socket and closes every descriptor above it.
pub(crate) fn keep_only_fd3() -> Result<(), ConfineError> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes at most one `struct stat` into the buffer we own; fd 3 is only read.
    if unsafe { libc::fstat(WORKER_FD, stat.as_mut_ptr()) } != 0 {
        return Err(ConfineError::NoSocket(io::Error::last_os_error()));
    }
    // SAFETY: fstat returned 0, so it initialised the buffer.
    let mode = unsafe { stat.assume_init() }.st_mode;
    if mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(ConfineError::NoSocket(io::Error::other("not a socket")));
    }
    // SAFETY: close_range only closes descriptors. None above 3 is owned by live Rust code: an
    // exec'd worker has opened nothing yet, and a zygote's child holds its request's
    // descriptors only in frames it never returns to (it ends with _exit).
    if unsafe { libc::syscall(libc::SYS_close_range, WORKER_FD + 1, u32::MAX, 0) } != 0 {
        return Err(sys("close_range")(io::Error::last_os_error()));
    }
    Ok(())
}

/// Empties the environment. Call it only while the process is single-threaded.
pub(crate) fn clear_environment() {
    for (key, _) in std::env::vars_os() {
        // SAFETY: the caller is single-threaded (no thread has been spawned in a worker or
        // the zygote), so mutating the environment races with nothing.
        unsafe { std::env::remove_var(key) };
    }
}

/// Asks for SIGKILL when the parent dies, then checks that the parent is still `expected`
/// (it may have died before the request took effect).
pub(crate) fn die_with_parent(expected: u32) -> Result<(), ConfineError> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(sys("prctl(PR_SET_PDEATHSIG)")(io::Error::last_os_error()));
    }
    let parent = std::os::unix::process::parent_id();
    if parent != expected {
        return Err(ConfineError::Orphaned {
            expected,
            actual: parent,
        });
    }
    Ok(())
}

/// A worker's process name (`/proc/PID/comm`), whether exec'd or forked by the zygote (whose
/// children keep the zygote's command line).
pub const WORKER_NAME: &std::ffi::CStr = c"jqjail-worker";

/// Sets the calling process's name (`comm`, at most 15 bytes).
pub(crate) fn name_process(name: &std::ffi::CStr) -> Result<(), ConfineError> {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string, which `name` is, for the call only.
    if unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) } != 0 {
        return Err(sys("prctl(PR_SET_NAME)")(io::Error::last_os_error()));
    }
    Ok(())
}

/// Makes the process not dumpable: no core dump, and no ptrace or /proc/PID/mem by a process
/// of the same uid that lacks CAP_SYS_PTRACE.
pub(crate) fn not_dumpable() -> Result<(), ConfineError> {
    // SAFETY: PR_SET_DUMPABLE takes a flag and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(sys("prctl(PR_SET_DUMPABLE)")(io::Error::last_os_error()));
    }
    Ok(())
}

/// Highest capability number any kernel defines so far; PR_CAPBSET_READ and PR_CAPBSET_DROP
/// answer EINVAL past the running kernel's own last one, which ends their loops.
const MAX_CAP: libc::c_ulong = 63;

/// The capability bounding set a worker forked by the zygote starts with (bit `n`:
/// capability `n`), recorded by the zygote once it has narrowed its own, and inherited with
/// its memory. `u64::MAX`: not recorded (the worker reads its own).
static FORKED_BOUNDING_SET: AtomicU64 = AtomicU64::new(u64::MAX);

/// Records the calling process's bounding set as the one its forks start with. Called by
/// the zygote after it narrowed its own, which it never changes again.
pub(crate) fn record_forked_bounding_set() -> Result<(), ConfineError> {
    FORKED_BOUNDING_SET.store(bounding_set()?, Ordering::Relaxed);
    Ok(())
}

/// The calling process's capability bounding set (bit `n`: capability `n`).
fn bounding_set() -> Result<u64, ConfineError> {
    let mut held = 0;
    for cap in 0..=MAX_CAP {
        // SAFETY: PR_CAPBSET_READ takes a capability number and touches no memory.
        match unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } {
            0 => {}
            1 => held |= 1 << cap,
            // EINVAL past the kernel's last capability. Every kernel has capability 0, so
            // EINVAL there is the call refused (a filter), and the set unknown: no start.
            _ => match io::Error::last_os_error() {
                e if e.raw_os_error() == Some(libc::EINVAL) && cap > 0 => break,
                e => return Err(sys("prctl(PR_CAPBSET_READ)")(e)),
            },
        }
    }
    Ok(held)
}

fn drop_privileges(in_user_namespace: bool, uid: libc::uid_t) -> Result<(), ConfineError> {
    // Bounding set first: it takes CAP_SETPCAP, which the uid change below would remove.
    // Without CAP_SETPCAP (a non-root daemon outside a user namespace) no drop is allowed;
    // the worker then holds at most what the daemon held, which the capset below empties.
    // Only what the set holds is dropped: each drop commits new credentials (the old ones
    // freed after an RCU grace period), even for a capability already out of the set, and a
    // forked worker holds only the zygote's few. Dropping all 41 each time was about 2 % of the
    // machine's CPU per small request (BENCHMARKS.md, the levers).
    let held = if in_user_namespace {
        // A new user namespace starts with every capability in its bounding set.
        u64::MAX
    } else {
        match FORKED_BOUNDING_SET.load(Ordering::Relaxed) {
            u64::MAX => bounding_set()?,
            forked => forked,
        }
    };
    for cap in (0..=MAX_CAP).filter(|cap| held & (1 << cap) != 0) {
        // SAFETY: PR_CAPBSET_DROP takes a capability number and touches no memory.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINVAL) => break,
                Some(libc::EPERM) => break,
                _ => return Err(sys("prctl(PR_CAPBSET_DROP)")(io::Error::last_os_error())),
            }
        }
    }
    // SAFETY: clears the ambient set; no memory involved.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    // Inside its own user namespace the worker is "root" mapped to the daemon's unprivileged
    // uid (see crate::isolate), and no other uid is mapped there.
    // SAFETY: geteuid cannot fail.
    if !in_user_namespace && unsafe { libc::geteuid() } == 0 {
        // SAFETY: setgroups with an empty list (no pointer is read), then plain id changes.
        let failed = unsafe {
            libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(uid, uid, uid) != 0
                || libc::setresuid(uid, uid, uid) != 0
        };
        if failed {
            return Err(sys("switching to the worker's uid and gid")(
                io::Error::last_os_error(),
            ));
        }
    }
    set_capabilities(0, 0).map_err(sys("capset"))
}

/// Sets the calling process's effective and permitted capability sets (bit `n` is capability
/// `n`); the inheritable set is emptied.
pub(crate) fn set_capabilities(effective: u64, permitted: u64) -> io::Result<()> {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: effective as u32,
            permitted: permitted as u32,
            inheritable: 0,
        },
        CapData {
            effective: (effective >> 32) as u32,
            permitted: (permitted >> 32) as u32,
            inheritable: 0,
        },
    ];
    // SAFETY: capset reads one header and two data structs (version 3 layout), which live on
    // this stack frame for the duration of the call.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The data segment size a forked worker starts from: its zygote's at the fork, set by the
/// zygote just before it and inherited with its memory. 0: not known (the worker measures).
static FORKED_BASELINE: AtomicU64 = AtomicU64::new(0);

/// Sets what the workers forked from now on take as their data segment's baseline (0: each
/// measures its own).
pub(crate) fn set_forked_baseline(bytes: u64) {
    // Stored only when it changes: a page the zygote writes after a fork is copied at that
    // write while the fork's child still shares it.
    if FORKED_BASELINE.load(Ordering::Relaxed) != bytes {
        FORKED_BASELINE.store(bytes, Ordering::Relaxed);
    }
}

/// The process's data segment size now (VmData), which RLIMIT_DATA counts.
pub(crate) fn data_baseline_bytes() -> io::Result<u64> {
    vm_data_bytes(&std::fs::read("/proc/self/status")?)
}

/// [`data_baseline_bytes`], read again from `status`, this process's `/proc/self/status`
/// opened earlier (the zygote's, which outlives its access to /proc once it is in its empty
/// root). The text goes into a buffer on the stack: no allocation moves the heap it measures.
/// Never inlined: its 8 KiB frame, probed page by page, would otherwise be touched at each of
/// the zygote's forks, which read it again only when the heap has moved (two more pages
/// copied a fork, `crate::zygote`'s loop says why that costs).
#[inline(never)]
pub(crate) fn data_baseline_bytes_at(status: &std::fs::File) -> io::Result<u64> {
    use std::io::{Read, Seek};
    let mut file = status;
    file.seek(io::SeekFrom::Start(0))?;
    let mut buf = [0u8; 8192];
    let mut len = 0;
    loop {
        match file.read(&mut buf[len..])? {
            0 => break,
            n => len += n,
        }
        if len == buf.len() {
            return Err(io::Error::other("/proc/self/status is over 8 KiB"));
        }
    }
    vm_data_bytes(&buf[..len])
}

/// The VmData line of a `/proc/PID/status` text, in bytes.
fn vm_data_bytes(status: &[u8]) -> io::Result<u64> {
    status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"VmData:"))
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| io::Error::other("no VmData line"))
}
