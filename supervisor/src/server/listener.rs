//! The listener: accepts connections (each admitted by its uid before a byte of its is read),
//! exits after the idle-exit period, drains on shutdown; and the daemon's own timers (hide
//! expiry, configuration reload).

use super::connection::connection;
use super::reply::Session;
use super::shared::{EXPIRE_EVERY, Reload, Shared};

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
/// The listener: accepts connections (each admitted by its uid), exits after the idle-exit
/// period when configured, and on `shutdown` stops accepting and drains: in-flight requests get
/// the drain timeout, then the rest are aborted and the pool closed.
pub(crate) async fn listen(
    listener: UnixListener,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    let mut idle_since = Instant::now();
    let mut spare = reserve();
    let descriptors_log = crate::admit::Throttle::default();
    loop {
        let idle_tick = tokio::time::sleep(Duration::from_millis(250));
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _addr)) => {
                    // The peer's uid is known before any of its bytes is read; a peer whose
                    // credentials cannot be learned is not admitted at all.
                    let admitted = match stream.peer_cred() {
                        Ok(cred) => shared.admission.slots.take(cred.uid()).map(|slot| (cred, slot)).map_err(|full| (Some(cred.uid()), full)),
                        Err(_) => Err((None, crate::admit::Full::NoCredentials)),
                    };
                    match admitted {
                        Ok((cred, slot)) => {
                            let shared = shared.clone();
                            let stop = stop_rx.clone();
                            let session = Session { uid: cred.uid(), gid: cred.gid() };
                            tasks.spawn(async move {
                                connection(stream, session, &shared, stop).await;
                                drop(slot);
                            });
                        }
                        Err((uid, full)) => {
                            shared.stats.refused(match full {
                                crate::admit::Full::Total(_) => "max_connections",
                                crate::admit::Full::Uid(_) => "max_connections_per_uid",
                                crate::admit::Full::NoCredentials => "no_credentials",
                            });
                            if let Some(held_back) = shared.admission.full_log.allow() {
                                tracing::warn!(uid, ?full, held_back, "connection limit reached; closing new connections");
                            }
                            drop(stream);
                        }
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    // No descriptor for the connection: the reserve's is given up to take it
                    // and close it at once (its client sees a connection error it can retry,
                    // rather than waiting in the backlog), then taken back.
                    spare.take();
                    if let Ok(Ok((stream, _))) =
                        tokio::time::timeout(Duration::from_millis(5), listener.accept()).await
                    {
                        drop(stream);
                        shared.stats.refused("no_descriptors");
                    }
                    if let Some(held_back) = descriptors_log.allow() {
                        tracing::error!(
                            error = %e,
                            limit = open_files_limit(),
                            held_back,
                            "no file descriptor left (RLIMIT_NOFILE); closing new connections at once until some are freed"
                        );
                    }
                    spare = reserve();
                    if spare.is_none() {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Err(e) => {
                    // Anything else: back off instead of spinning.
                    if let Some(held_back) = descriptors_log.allow() {
                        tracing::error!(error = %e, held_back, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = idle_tick => {
                if shared.admission.slots.open() > 0 {
                    idle_since = Instant::now();
                } else if shared.cfg.idle_exit.is_some_and(|d| idle_since.elapsed() >= d) {
                    tracing::info!("no client for the idle-exit period; exiting");
                    break;
                }
            }
        }
    }
    drop(listener);
    crate::systemd::notify("STOPPING=1");
    let in_flight = tasks.len();
    tracing::info!(
        connections = in_flight,
        "shutting down: draining in-flight requests"
    );
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(shared.cfg.drain_timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            remaining = tasks.len(),
            "drain timeout passed; aborting remaining connections"
        );
        tasks.shutdown().await;
    }
    shared.pool.close();
}

/// The hide-expiry sweep. The age limit also applies on every put; this sweep (at start,
/// every [`EXPIRE_EVERY`] and after a reload) catches tenants that stopped putting, so their
/// old hides do not stay on disk for ever.
pub(crate) fn spawn_expiry(shared: &Arc<Shared>) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EXPIRE_EVERY);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shared.expire_now.notified() => {}
            }
            let max_age = shared
                .policy
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .hides
                .max_age;
            let Some(max_age) = max_age else { continue };
            let Ok(store) = shared.store.get() else {
                continue;
            };
            match tokio::task::spawn_blocking(move || store.expire(max_age)).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(expired = n, "hides past the age limit deleted"),
                Ok(Err(e)) => tracing::error!(error = %e, "hide expiry failed"),
                Err(e) => tracing::error!(error = %e, "hide expiry task failed"),
            }
        }
    });
}

/// SIGHUP: rereads the configuration and applies its tenant policy to new and open
/// connections; a configuration that does not load keeps the running one.
pub(crate) fn spawn_reload(shared: &Arc<Shared>, reload: Reload) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hup.recv().await.is_some() {
            let store = shared.store.clone();
            let _ = tokio::task::spawn_blocking(move || store.retry()).await;
            match reload() {
                Ok(cfg) => {
                    let tenants = cfg.tenants.rules.len();
                    *shared.policy.write().unwrap_or_else(|e| e.into_inner()) = cfg;
                    shared.expire_now.notify_one();
                    tracing::info!(
                        tenant_rules = tenants,
                        "SIGHUP: tenant configuration reloaded"
                    );
                }
                Err(why) => {
                    tracing::error!(reason = %why, "SIGHUP: configuration not reloaded; keeping the running one")
                }
            }
        }
    });
}

/// A descriptor held in reserve by the listener, given up when the process has no other so
/// that a waiting connection can still be accepted and closed.
fn reserve() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// The process's open-file limit (RLIMIT_NOFILE, soft), for the log.
fn open_files_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(0, |(soft, _)| soft)
}
