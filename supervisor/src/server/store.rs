//! The hide store as the daemon holds it: open, or the reason it could not be opened. A
//! store that cannot be opened for a fault of the machine (a read-only or full disk, an
//! I/O error) does not stop the daemon: runs are served, every hide request is answered
//! `STORE_UNAVAILABLE` with that reason, and a reload (SIGHUP) tries again. A store that is
//! not safe to use (another uid's, readable by others) or that another daemon owns stops the
//! daemon at start instead: that is a mistake to fix, not a fault to ride out.

use jqjail_protocol::{ErrorCode, ErrorReply};
use jqjail_store::{Store, StoreError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// The daemon's hide store, or why it has none.
pub struct StoreSlot {
    path: PathBuf,
    open: RwLock<Result<Arc<Store>, String>>,
}

impl StoreSlot {
    /// Opens the store at `path`. Errs (the daemon should not start) only when the directory
    /// is unsafe or owned by another process; any other failure leaves the slot empty, with
    /// its reason, and logged. `serving` tells whether another daemon already serves the
    /// socket this one would bind: while the store is in use and it does, the start stops at
    /// once rather than wait for an owner that is not exiting (clients racing to start the
    /// private daemon each start one; all but one stop here).
    pub fn open(path: &Path, serving: &dyn Fn() -> bool) -> Result<StoreSlot, StoreError> {
        let open = match open_after_its_owner(path, serving) {
            Ok(store) => Ok(opened(store, "hide store open")),
            Err(e @ (StoreError::Unsafe { .. } | StoreError::InUse { .. })) => return Err(e),
            Err(e) => Err(unavailable(path, &e)),
        };
        Ok(StoreSlot {
            path: path.to_owned(),
            open: RwLock::new(open),
        })
    }

    /// The open store, or the `STORE_UNAVAILABLE` answer that says why there is none.
    pub fn get(&self) -> Result<Arc<Store>, Box<ErrorReply>> {
        match &*self.open.read().unwrap_or_else(|e| e.into_inner()) {
            Ok(store) => Ok(store.clone()),
            Err(why) => Err(Box::new(ErrorReply::new(
                ErrorCode::StoreUnavailable,
                why.clone(),
            ))),
        }
    }

    /// When there is no store, tries to open it again (a reload); says what came of it.
    /// Blocking (an open may list every hide again from its files): called on a blocking
    /// thread, and the slot is locked only to look and to put the store in, so hide requests
    /// meanwhile are answered at once.
    pub fn retry(&self) {
        if self.get().is_ok() {
            return;
        }
        let now = match Store::open(&self.path) {
            Ok(store) => Ok(opened(store, "hide store open at last")),
            Err(e) => Err(unavailable(&self.path, &e)),
        };
        let mut open = self.open.write().unwrap_or_else(|e| e.into_inner());
        if open.is_err() {
            *open = now;
        }
    }
}

/// How long a start waits for the process that owns the store to let it go: a daemon that is
/// exiting (its idle exit, a drain) holds it until its last request is answered, after its
/// socket is gone, and the CLI starts the next one meanwhile.
const OWNER_EXITS_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// [`open_telling_systemd`], waiting up to [`OWNER_EXITS_WITHIN`] while another process
/// owns the store.
fn open_after_its_owner(path: &Path, serving: &dyn Fn() -> bool) -> Result<Store, StoreError> {
    let since = std::time::Instant::now();
    let mut said = false;
    loop {
        match open_telling_systemd(path) {
            Err(StoreError::InUse { .. }) if since.elapsed() < OWNER_EXITS_WITHIN && !serving() => {
                if !said {
                    tracing::info!(
                        store = %path.display(),
                        "the hide store is in use by another process; waiting up to 15 s for it to exit"
                    );
                    said = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            opened => return opened,
        }
    }
}

/// [`Store::open`], telling systemd every 10 s that start-up goes on: an open that lists a
/// large store again from its files (its index lost) can take longer than the unit's start
/// timeout, and a start killed for it would begin again from the start.
fn open_telling_systemd(path: &Path) -> Result<Store, StoreError> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let ticker = std::thread::spawn(move || {
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            wait.recv_timeout(std::time::Duration::from_secs(10))
        {
            crate::systemd::notify("EXTEND_TIMEOUT_USEC=30000000");
        }
    });
    let opened = Store::open(path);
    drop(done);
    let _ = ticker.join();
    opened
}

/// A store just opened, logged with what its opening mended.
fn opened(store: Store, said: &str) -> Arc<Store> {
    tracing::info!(store = %store.root().display(), "{said}");
    crate::daemon::log_sweep(store.opened());
    Arc::new(store)
}

/// The reason given to every hide request while the store cannot be opened, and logged.
fn unavailable(path: &Path, e: &StoreError) -> String {
    let why = format!(
        "the hide store {} could not be opened ({e}); runs are served, hides are not until it is repaired and the daemon reloaded (SIGHUP)",
        path.display()
    );
    tracing::error!("{why}");
    why
}
