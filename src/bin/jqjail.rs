//! `jqjail`: the command line. A client only, so that it starts in about the time of
//! `/bin/true`: the daemon, its workers, jaq, SQLite and tokio live in `jqjaild`, which the
//! CLI starts as the user's private daemon when no daemon is running (it looks for `jqjaild`
//! beside this executable first).
//!
//! Three things keep its start-up short (BENCHMARKS.md, "The CLI's own cost" and "A static
//! CLI"):
//! - It is linked static (a static PIE) wherever the builder has glibc's static libraries
//!   (build.rs), so that it loads no shared object at all.
//! - Otherwise the unwinder is linked in, as `-static-libgcc` does for C, instead of loading
//!   `libgcc_s.so.1`: one shared object fewer to map and relocate at every start.
//! - `main` is the C entry point (`#![no_main]`), so std's runtime set-up does not run: of it,
//!   only what this program relies on is done here. What is skipped is the main thread's stack
//!   guard discovery (`pthread_getattr_np`, which reads and parses `/proc/self/maps`) and its
//!   handler naming a stack overflow; an overflow still ends the process, by SIGSEGV. A panic
//!   is caught and exits with std's status for one, 101.
// (Built as a test, the harness provides `main`.)
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
use std::io::Write;

#[link(name = "gcc_eh", kind = "static")]
unsafe extern "C" {}

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // What std does before `fn main`, and this program needs: descriptors 0-2 open (on
    // /dev/null if closed), so that the socket it opens is never taken for stdout; and SIGPIPE
    // ignored, so that a closed stdout is an error to handle rather than death.
    // SAFETY: single-threaded start-up; poll reads three pollfds we own, open and signal take
    // valid arguments.
    unsafe {
        let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        if libc::poll(fds.as_mut_ptr(), 3, 0) < 0 {
            libc::abort();
        }
        for pollfd in fds {
            if pollfd.revents & libc::POLLNVAL != 0
                && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) != pollfd.fd
            {
                libc::abort();
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // std::env::args_os works without std's runtime: glibc hands argv to std at load time.
    // A panic cannot unwind out of a C function: it ends the run with std's status for one.
    let status = std::panic::catch_unwind(|| {
        i32::from(jqjail_client::cli::main_with_args(std::env::args_os()))
    })
    .unwrap_or(PANICKED);
    // std's runtime would flush stdout at exit; returning from C `main` does not.
    let _ = std::io::stdout().flush();
    status
}

/// The exit status std gives a program whose main thread panicked.
#[cfg(not(test))]
const PANICKED: libc::c_int = 101;
