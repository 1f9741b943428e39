//! The worker's system-call allowlist. This module is the only place it is defined.
//!
//! After the allowlist is installed, a worker can read its job from fd 3, write its reply to
//! fd 3 and messages to fd 2, manage memory without ever making it executable, and exit. Any
//! other system call, or an allowed one with other arguments, kills the whole process with
//! SIGSYS (SECCOMP_RET_KILL_PROCESS). The supervisor reports that as `SANDBOX_VIOLATION`.
//!
//! Why each entry is there:
//!
//! | syscall | needed by | argument check |
//! |---|---|---|
//! | read | the job and its input | fd 3 only |
//! | write | the reply; Rust's panic and stack-overflow messages | fd 3 or fd 2 |
//! | mmap | large allocations (glibc malloc); the parse arena's region (`alloc.rs`) | never PROT_EXEC |
//! | munmap, mremap, brk | freeing and growing the heap; trimming the parse arena | – |
//! | madvise | transparent huge pages for a large heap (glibc with `glibc.malloc.hugetlb=1`, set by the supervisor with a 16 MiB top pad: a 20 MiB input parses about a third faster), for every block of 2 MiB or more (`alloc.rs`'s own advice, where glibc misreads the THP mode) and for the parse arena | MADV_HUGEPAGE only |
//! | exit_group | the end of every worker | – |
//! | sigaltstack | Rust's main-thread clean-up on a normal return from main | – |
//! | rt_sigprocmask, getpid, gettid | abort() after a stack overflow or allocation failure | – |
//! | tgkill | abort() raising SIGABRT | own pid, SIGABRT only |
//! | futex | the panic path's lock wake-up | – |
//! | close | dropping the job socket on the panic path | fd 3 only |
//! | clock_gettime | `now`, where the vDSO falls back to the system call | – |
//! | getrusage | the cost (CPU time, peak RSS) sent with the reply | RUSAGE_SELF only |
//!
//! Hash keys (std's RandomState) and the jaq prelude are drawn and parsed before
//! installation, so neither getrandom nor any file access is needed afterwards.

use jqjail_protocol::worker::WORKER_FD;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// The allowlist may not grow past this many system calls.
pub const MAX_SYSCALLS: usize = 20;

/// A failure to build or install the filter.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// This architecture has no allowlist.
    #[error("no seccomp allowlist for architecture {0}")]
    UnsupportedArch(&'static str),
    /// seccompiler refused the rules or the kernel refused the program.
    #[error("seccomp: {0}")]
    Seccomp(#[from] seccompiler::Error),
    /// The program is longer than the kernel takes.
    #[error("seccomp program of {0} instructions is too long")]
    TooLong(usize),
    /// The kernel refused the program.
    #[error("seccomp: {0}")]
    Install(std::io::Error),
    /// seccompiler's backend refused the rules.
    #[error("seccomp rules: {0}")]
    Backend(#[from] seccompiler::BackendError),
    /// The program's per-process constant could not be found ([`Template`]).
    #[error("seccomp program template: {0}")]
    Template(&'static str),
}

fn arg_eq(index: u8, value: u64) -> SeccompCondition {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
        .expect("argument index below 6")
}

fn rule(conditions: Vec<SeccompCondition>) -> SeccompRule {
    SeccompRule::new(conditions).expect("a rule with at least one condition")
}

/// The allowlist: name, number, and the argument rules (empty: any arguments; several: any
/// one of them). `pid` is the worker's own pid, the only target tgkill may name.
pub fn allowlist(pid: u32) -> Vec<(&'static str, i64, Vec<SeccompRule>)> {
    let fd = |n: i32| arg_eq(0, n as u64);
    let no_exec = SeccompCondition::new(
        2,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64),
        0,
    )
    .expect("argument index below 6");
    vec![
        ("read", libc::SYS_read, vec![rule(vec![fd(WORKER_FD)])]),
        (
            "write",
            libc::SYS_write,
            vec![rule(vec![fd(WORKER_FD)]), rule(vec![fd(2)])],
        ),
        ("mmap", libc::SYS_mmap, vec![rule(vec![no_exec])]),
        ("munmap", libc::SYS_munmap, vec![]),
        ("mremap", libc::SYS_mremap, vec![]),
        ("brk", libc::SYS_brk, vec![]),
        (
            "madvise",
            libc::SYS_madvise,
            vec![rule(vec![arg_eq(2, libc::MADV_HUGEPAGE as u64)])],
        ),
        ("exit_group", libc::SYS_exit_group, vec![]),
        ("sigaltstack", libc::SYS_sigaltstack, vec![]),
        ("rt_sigprocmask", libc::SYS_rt_sigprocmask, vec![]),
        ("getpid", libc::SYS_getpid, vec![]),
        ("gettid", libc::SYS_gettid, vec![]),
        (
            "tgkill",
            libc::SYS_tgkill,
            vec![rule(vec![
                arg_eq(0, u64::from(pid)),
                arg_eq(2, libc::SIGABRT as u64),
            ])],
        ),
        ("futex", libc::SYS_futex, vec![]),
        ("close", libc::SYS_close, vec![rule(vec![fd(WORKER_FD)])]),
        ("clock_gettime", libc::SYS_clock_gettime, vec![]),
        (
            "getrusage",
            libc::SYS_getrusage,
            vec![rule(vec![arg_eq(0, libc::RUSAGE_SELF as u64)])],
        ),
    ]
}

/// The compiled BPF program for this process.
pub fn program(pid: u32) -> Result<BpfProgram, SeccompError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::UnsupportedArch(std::env::consts::ARCH))?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = allowlist(pid)
        .into_iter()
        .map(|(_, nr, rules)| (nr, rules))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// The zygote's allowlist: what it needs to fork workers on request, and what those children
/// need before they install their own, stricter allowlist (a filter is inherited, and filters
/// stack: a call must pass both). A call outside it fails with EPERM instead of killing the
/// zygote: a step that needed it fails, and its worker reports the failure typed.
pub fn zygote_allowlist() -> Vec<(&'static str, i64, Vec<SeccompRule>)> {
    let any = |name: &'static str, nr: i64| (name, nr, Vec::new());
    let mut list: Vec<_> = [
        // The zygote's loop: a request with its descriptors, the fork, the answer.
        any("recvmsg", libc::SYS_recvmsg),
        any("sendto", libc::SYS_sendto),
        any("fcntl", libc::SYS_fcntl),
        // The children's set-up (`crate::enter`, `crate::confine`, `crate::isolate`).
        any("dup2", libc::SYS_dup2),
        any("close_range", libc::SYS_close_range),
        any("openat", libc::SYS_openat),
        any("newfstatat", libc::SYS_newfstatat),
        any("statx", libc::SYS_statx),
        any("fstat", libc::SYS_fstat),
        any("lseek", libc::SYS_lseek),
        any("rt_sigaction", libc::SYS_rt_sigaction),
        any("rt_sigreturn", libc::SYS_rt_sigreturn),
        any("unshare", libc::SYS_unshare),
        any("mount", libc::SYS_mount),
        any("chdir", libc::SYS_chdir),
        any("chroot", libc::SYS_chroot),
        any("pivot_root", libc::SYS_pivot_root),
        // Only the zygote's way back to its mount namespace, root and working directory: tried
        // before it makes its own empty root, and taken where that fails part way
        // (`crate::isolate::enter_zygote_root`).
        (
            "setns",
            libc::SYS_setns,
            vec![rule(vec![arg_eq(1, libc::CLONE_NEWNS as u64)])],
        ),
        any("fchdir", libc::SYS_fchdir),
        // Only the detach of the host's root (`crate::isolate`).
        (
            "umount2",
            libc::SYS_umount2,
            vec![rule(vec![arg_eq(1, libc::MNT_DETACH as u64)])],
        ),
        any("prlimit64", libc::SYS_prlimit64),
        any("setgroups", libc::SYS_setgroups),
        any("setresgid", libc::SYS_setresgid),
        any("setresuid", libc::SYS_setresuid),
        any("capget", libc::SYS_capget),
        any("capset", libc::SYS_capset),
        any("prctl", libc::SYS_prctl),
        any("seccomp", libc::SYS_seccomp),
        any("getppid", libc::SYS_getppid),
        any("getuid", libc::SYS_getuid),
        any("geteuid", libc::SYS_geteuid),
        any("getgid", libc::SYS_getgid),
        any("getegid", libc::SYS_getegid),
        any("getrandom", libc::SYS_getrandom),
        any("exit", libc::SYS_exit),
        any("sched_yield", libc::SYS_sched_yield),
        // Only the fork the zygote makes: a copy of itself as the supervisor's child.
        (
            "clone",
            libc::SYS_clone,
            vec![rule(vec![arg_eq(
                0,
                (libc::CLONE_PARENT | libc::SIGCHLD) as u64,
            )])],
        ),
    ]
    .into();
    // Everything a worker's own allowlist permits, without its argument rules (those apply
    // once it installs it).
    for (name, nr, _) in allowlist(0) {
        if !list.iter().any(|(_, n, _)| *n == nr) {
            list.push(any(name, nr));
        }
    }
    list
}

/// Installs [`zygote_allowlist`] on the calling (only) thread of the zygote.
pub fn install_zygote() -> Result<(), SeccompError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::UnsupportedArch(std::env::consts::ARCH))?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = zygote_allowlist()
        .into_iter()
        .map(|(_, nr, rules)| (nr, rules))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )?;
    let prog: BpfProgram = filter.try_into()?;
    // With SECCOMP_FILTER_FLAG_SPEC_ALLOW: a filter installed without it makes the kernel
    // force its speculative-store-bypass mitigation on the zygote and on every worker from its
    // fork on, which cost about 6 ms of a 20 MiB request's 42 (side by side with the same
    // daemon without this filter). Workers get what their own allowlist gives them, as they
    // did before the zygote had a filter.
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| SeccompError::TooLong(prog.len()))?,
        // seccompiler's `sock_filter` is the kernel's `struct sock_filter`, as libc's is.
        filter: prog.as_ptr().cast_mut().cast::<libc::sock_filter>(),
    };
    // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER) reads the `len` instructions `fprog` points at,
    // which `prog` owns for the duration of the call; no_new_privs was set by the zygote's
    // least_privilege step, so no privilege is needed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(SeccompError::Install(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The worker's program with its one per-process constant, the pid tgkill may name, left to
/// fill in. The zygote builds it once ([`prepare`]); a forked worker copies it and writes its
/// pid in, where it would otherwise build the rules, sort them and generate the program anew
/// (in the throughput profile, 55 % of a worker's seccomp install and 9 % of its CPU). The
/// instructions are [`program`]'s for that pid, exactly: the unit tests compare them.
#[derive(Debug)]
pub struct Template {
    prog: BpfProgram,
    /// The instructions whose immediate is the pid.
    pid_at: Vec<usize>,
}

/// Two pids no process has (above the kernel's PID_MAX_LIMIT, 2^22) and no other constant
/// of the allowlist equals: the instructions where the programs built for them differ are
/// the ones that hold the pid.
const PROBE_PIDS: [u32; 2] = [0x7A5A_0001, 0x7A5A_0002];

impl Template {
    /// Builds the program for both probe pids and finds where they differ.
    pub fn new() -> Result<Template, SeccompError> {
        let [a, b] = PROBE_PIDS.map(program);
        let (a, b) = (a?, b?);
        let odd = || SeccompError::Template("the programs of two pids differ in more than the pid");
        if a.len() != b.len() {
            return Err(odd());
        }
        let mut pid_at = Vec::new();
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            if x == y {
                // A probe's value anywhere else would be overwritten by the pid.
                if x.k == PROBE_PIDS[0] || x.k == PROBE_PIDS[1] {
                    return Err(odd());
                }
                continue;
            }
            if (x.code, x.jt, x.jf, x.k, y.k) != (y.code, y.jt, y.jf, PROBE_PIDS[0], PROBE_PIDS[1])
            {
                return Err(odd());
            }
            pid_at.push(i);
        }
        if pid_at.is_empty() {
            return Err(SeccompError::Template("the program names no pid"));
        }
        Ok(Template { prog: a, pid_at })
    }

    /// The program for `pid`.
    pub fn program(&self, pid: u32) -> BpfProgram {
        let mut prog = self.prog.clone();
        for &i in &self.pid_at {
            prog[i].k = pid;
        }
        prog
    }
}

/// The template every worker forked after this call takes its program from: the zygote calls
/// it once, before its first fork.
static TEMPLATE: std::sync::OnceLock<Template> = std::sync::OnceLock::new();

/// Builds the [`Template`] for the workers this process forks.
pub fn prepare() -> Result<(), SeccompError> {
    let template = Template::new()?;
    let _ = TEMPLATE.set(template);
    Ok(())
}

/// Sets no_new_privs and installs the allowlist on the calling (only) thread. From here on
/// the process can do nothing but what the table above lists.
pub fn install() -> Result<(), SeccompError> {
    let pid = std::process::id();
    let prog = match TEMPLATE.get() {
        Some(template) => template.program(pid),
        None => program(pid)?,
    };
    seccompiler::apply_filter(&prog)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_does_not_grow() {
        let list = allowlist(1);
        assert!(list.len() <= MAX_SYSCALLS);
        // Growing the list is a security decision: change this number, and the table in the
        // module documentation, in the same commit, with the reason.
        assert_eq!(list.len(), 17, "allowlist changed: {:?}", names(&list));
    }

    fn names(list: &[(&'static str, i64, Vec<SeccompRule>)]) -> Vec<&'static str> {
        list.iter().map(|(n, _, _)| *n).collect()
    }

    #[test]
    fn no_duplicates_and_the_program_compiles() {
        let list = allowlist(1);
        let mut numbers: Vec<i64> = list.iter().map(|(_, n, _)| *n).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), list.len());
        let prog = program(1).unwrap();
        assert!(!prog.is_empty());
    }

    #[test]
    fn the_template_gives_exactly_the_program_built_for_each_pid() {
        let template = Template::new().unwrap();
        assert_eq!(template.pid_at.len(), 1, "tgkill names the pid once");
        for pid in [1, 2, 300, 12_345, std::process::id(), 4_194_304, u32::MAX] {
            assert_eq!(template.program(pid), program(pid).unwrap(), "pid {pid}");
        }
    }

    #[test]
    fn dangerous_calls_are_absent() {
        let names = names(&allowlist(1));
        for forbidden in [
            "open",
            "openat",
            "socket",
            "connect",
            "execve",
            "fork",
            "clone",
            "clone3",
            "ptrace",
            "kill",
            "prctl",
            "seccomp",
            "unshare",
            "mount",
            "mprotect",
            "prlimit64",
            "io_uring_setup",
            "memfd_create",
            "ioctl",
            "getrandom",
            "rt_sigaction",
        ] {
            assert!(!names.contains(&forbidden), "{forbidden} is allowed");
        }
    }

    #[test]
    fn names_are_known_for_probed_calls() {
        // Every allowlisted call has its name in the table the supervisor explains deaths
        // with.
        for (name, nr, _) in allowlist(1) {
            assert_eq!(jqjail_protocol::syscalls::syscall_name(nr), Some(name));
        }
    }
}
