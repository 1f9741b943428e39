//! Names of the system calls a worker makes or is probed with, for messages about a worker
//! killed by its seccomp filter (`SIGSYS`). Here, not in the worker crate, so that the
//! supervisor can explain a death without linking jaq.
//!
//! jqjail supports x86_64 Linux only: the worker's seccomp allowlist, this table and the
//! escape probes name x86_64 system call numbers, and building for anything else stops here.

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
compile_error!(
    "jqjail supports x86_64 Linux only: its seccomp allowlist and syscall table name x86_64 system call numbers"
);

/// `(name, number)` of every call in the worker's allowlist and of every call the escape
/// probes make.
pub const KNOWN: &[(&str, i64)] = &[
    // The allowlist (`jqjail_worker::seccomp::allowlist`; a test there checks this table).
    ("read", libc::SYS_read),
    ("write", libc::SYS_write),
    ("mmap", libc::SYS_mmap),
    ("munmap", libc::SYS_munmap),
    ("mremap", libc::SYS_mremap),
    ("brk", libc::SYS_brk),
    ("madvise", libc::SYS_madvise),
    ("exit_group", libc::SYS_exit_group),
    ("sigaltstack", libc::SYS_sigaltstack),
    ("rt_sigprocmask", libc::SYS_rt_sigprocmask),
    ("getpid", libc::SYS_getpid),
    ("gettid", libc::SYS_gettid),
    ("tgkill", libc::SYS_tgkill),
    ("futex", libc::SYS_futex),
    ("close", libc::SYS_close),
    ("clock_gettime", libc::SYS_clock_gettime),
    ("getrusage", libc::SYS_getrusage),
    // What the escape probes and common escapes try.
    ("open", libc::SYS_open),
    ("openat", libc::SYS_openat),
    ("openat2", libc::SYS_openat2),
    ("stat", libc::SYS_stat),
    ("newfstatat", libc::SYS_newfstatat),
    ("readlink", libc::SYS_readlink),
    ("getdents64", libc::SYS_getdents64),
    ("socket", libc::SYS_socket),
    ("connect", libc::SYS_connect),
    ("execve", libc::SYS_execve),
    ("execveat", libc::SYS_execveat),
    ("fork", libc::SYS_fork),
    ("vfork", libc::SYS_vfork),
    ("clone", libc::SYS_clone),
    ("clone3", libc::SYS_clone3),
    ("ptrace", libc::SYS_ptrace),
    ("kill", libc::SYS_kill),
    ("tkill", libc::SYS_tkill),
    ("prctl", libc::SYS_prctl),
    ("seccomp", libc::SYS_seccomp),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("mprotect", libc::SYS_mprotect),
    ("prlimit64", libc::SYS_prlimit64),
    ("setrlimit", libc::SYS_setrlimit),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("memfd_create", libc::SYS_memfd_create),
    ("ioctl", libc::SYS_ioctl),
    ("getrandom", libc::SYS_getrandom),
    ("rt_sigaction", libc::SYS_rt_sigaction),
    ("rt_sigreturn", libc::SYS_rt_sigreturn),
    ("exit", libc::SYS_exit),
    ("bpf", libc::SYS_bpf),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("chroot", libc::SYS_chroot),
    ("setuid", libc::SYS_setuid),
    ("sendmsg", libc::SYS_sendmsg),
    ("dup2", libc::SYS_dup2),
    ("pipe2", libc::SYS_pipe2),
    ("lseek", libc::SYS_lseek),
    ("fstat", libc::SYS_fstat),
    ("sched_yield", libc::SYS_sched_yield),
    ("nanosleep", libc::SYS_nanosleep),
    ("clock_nanosleep", libc::SYS_clock_nanosleep),
    ("keyctl", libc::SYS_keyctl),
];

/// The name of system call `nr`, where it is one of [`KNOWN`].
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    KNOWN.iter().find(|(_, n)| *n == nr).map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_each_listed_once() {
        for (i, (name, nr)) in KNOWN.iter().enumerate() {
            assert!(
                KNOWN[i + 1..].iter().all(|(m, n)| m != name && n != nr),
                "{name} ({nr}) twice"
            );
        }
        assert_eq!(syscall_name(libc::SYS_openat), Some("openat"));
        assert_eq!(syscall_name(99_999), None);
    }
}
