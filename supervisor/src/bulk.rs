//! The daemon's bulk threads. A search over a hide (`hide_search`: it scans the whole hide,
//! 3 ms for 4 MiB) runs on one of [`SEARCHES`] threads started with the daemon at a nice value
//! [`BULK_NICE`] above its own, while the caller waits. On cores that searches keep busy, the
//! kernel then gives the daemon's other threads the larger share (weights 1024 and 110): those
//! that answer every other request, and a victim's put as it wakes from each of its fsyncs.
//! Under four uids searching a 4 MiB hide on 100 connections, a victim's put-and-cut took
//! 2.2 ms (median of six runs) with searches on the runtime's threads and 0.9 ms with them
//! here (`tests/floods/store_flood.rs`; 0.5 ms unloaded).
//!
//! Raising a thread's nice value needs no privilege, lowering it back does (CAP_SYS_NICE, or
//! an RLIMIT_NICE the daemon is not given), so these threads are the daemon's own, at their
//! nice value for good, and never the runtime's lent for a while. The threads own nothing: a
//! search's turns are its caller's. Every call that reaches them holds a search turn
//! (`tenant.rs`), and there are as many threads as turns, so a call never waits for a thread.
//!
//! What it gives up: on a machine busy at the daemon's own priority (its workers run there), a
//! search gets about a tenth of a core and takes up to ten times as long. It holds only its
//! search turn meanwhile (its hide was opened in a store read turn, given back), so what waits
//! longer is other uids' searches (one search of each uid ahead of them, as before, each
//! longer); no CPU or store turn is held by a slowed search.
//!
//! The hop costs about 0.07 ms (two wake-ups), so other calls that spend the daemon's CPU stay
//! on their caller's thread at its priority, in CPU turns: a JSON page (0.15 ms) and a put
//! read whole (at most 256 KiB). A JSON page's first layout of a hide at a page size
//! (about 40 ms for 4 MiB) is among them, and so still competes with a victim's put at the
//! daemon's priority.

use crate::tenant::SEARCHES;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel, sync_channel};
use std::sync::{Arc, Mutex};

/// How much nicer than the daemon a bulk thread runs: at 10 the kernel gives it about a
/// tenth of a core that a thread at the daemon's own value also wants (weights 110 and 1024).
/// Not `SCHED_IDLE`, which would starve it, and the turns it holds, while any other thread
/// runs.
pub const BULK_NICE: i32 = 10;

/// Work sent to a bulk thread.
type Job = Box<dyn FnOnce() + Send>;

/// The bulk threads, shared by every connection.
#[derive(Debug)]
pub struct Bulk {
    /// `None` when no thread could be started: the work then runs on the caller's thread.
    jobs: Option<Sender<Job>>,
}

impl Bulk {
    /// Starts [`SEARCHES`] bulk threads (`jqjail-bulk`). A thread that cannot be started,
    /// or made nicer, is logged: with one thread, searches take turns on it; with none, they
    /// run on their caller's thread, as before.
    pub fn start() -> Bulk {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut started = 0;
        for n in 0..SEARCHES {
            let queue = queue.clone();
            match std::thread::Builder::new()
                .name("jqjail-bulk".into())
                .spawn(move || serve(&queue))
            {
                Ok(_) => started += 1,
                Err(e) => {
                    tracing::warn!(error = %e, thread = n, "a bulk thread could not be started")
                }
            }
        }
        Bulk {
            jobs: (started > 0).then_some(jobs),
        }
    }

    /// Runs `work` on a bulk thread and waits for its result, blocking the caller's thread
    /// (call it where blocking is allowed, and in a search turn: see the module's doc). A
    /// panic in `work` is caught and returned, for the caller to answer.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::Result<T> {
        let (done, result) = sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = done.send(catch_unwind(AssertUnwindSafe(work)));
        });
        match &self.jobs {
            Some(jobs) => {
                if let Err(unsent) = jobs.send(job) {
                    (unsent.0)();
                }
            }
            None => job(),
        }
        // A job always sends (it catches its own panic), and a thread that takes one runs it:
        // `serve` returns only once every sender is gone.
        result.recv().unwrap_or_else(|_| {
            Err(Box::new(
                "a bulk thread dropped a search without running it",
            ))
        })
    }
}

/// A bulk thread: made nicer, then runs jobs until the daemon drops its [`Bulk`].
fn serve(queue: &Mutex<Receiver<Job>>) {
    if let Err(e) = be_nicer(BULK_NICE) {
        tracing::warn!(error = %e, "a bulk thread runs at the daemon's own nice value");
    }
    loop {
        // The lock is held only to take a job, never while one runs.
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match job {
            // A job catches its own panic (`Bulk::run`).
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Raises the calling thread's nice value by `by` (to 19 at most). On Linux a nice value
/// belongs to a thread, not to its process.
fn be_nicer(by: i32) -> std::io::Result<()> {
    let now = nice()?;
    // SAFETY: gettid has no preconditions; setpriority sets this thread's own nice value,
    // and raising it needs no privilege.
    if unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            libc::gettid() as libc::id_t,
            (now + by).min(19),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's nice value.
fn nice() -> std::io::Result<i32> {
    // getpriority may return -1 as a value: errno tells an error, so it is cleared first.
    // SAFETY: errno is this thread's own; gettid has no preconditions; getpriority only reads
    // the calling thread's nice value.
    let (value, errno) = unsafe {
        *libc::__errno_location() = 0;
        let value = libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t);
        (value, *libc::__errno_location())
    };
    match errno {
        0 => Ok(value),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn work_runs_on_a_nicer_thread_of_its_own_and_its_result_comes_back() {
        let bulk = Bulk::start();
        let mine = nice().unwrap();
        let (name, theirs) = bulk
            .run(|| {
                (
                    std::thread::current().name().map(String::from),
                    nice().unwrap(),
                )
            })
            .unwrap();
        assert_eq!(name.as_deref(), Some("jqjail-bulk"));
        assert_eq!(theirs, (mine + BULK_NICE).min(19));
        // The caller's own is left as it was.
        assert_eq!(nice().unwrap(), mine);
    }

    #[test]
    fn a_panic_in_the_work_comes_back_as_an_error_and_the_threads_go_on() {
        let bulk = Bulk::start();
        for _ in 0..2 * SEARCHES {
            let panic = bulk
                .run(|| -> () { panic!("broken store") })
                .expect_err("the panic was not returned");
            assert_eq!(panic.downcast_ref::<&str>(), Some(&"broken store"));
        }
        assert_eq!(bulk.run(|| 7).unwrap(), 7);
    }

    #[test]
    fn as_many_calls_as_turns_run_at_once() {
        let bulk = Bulk::start();
        let running = Arc::new(AtomicUsize::new(0));
        let together = std::thread::scope(|s| {
            let calls: Vec<_> = (0..SEARCHES)
                .map(|_| {
                    let running = running.clone();
                    // Each counts itself in, then waits (10 s at most) to see all the others.
                    s.spawn(|| {
                        bulk.run(move || {
                            running.fetch_add(1, Ordering::SeqCst);
                            let by = Instant::now() + Duration::from_secs(10);
                            while running.load(Ordering::SeqCst) < SEARCHES && Instant::now() < by {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            running.load(Ordering::SeqCst) == SEARCHES
                        })
                        .unwrap()
                    })
                })
                .collect();
            calls.into_iter().all(|c| c.join().unwrap())
        });
        assert!(together, "the calls did not run at once");
    }
}
