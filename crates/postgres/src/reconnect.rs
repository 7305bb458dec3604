//! Opening connections and bringing lost ones back: open (connect, log in, prepare the pool's
//! statements), watch (when the connection's task ends, its slot is emptied and re-opened),
//! and re-open with a backoff doubling from [`FIRST_RETRY`] to [`MAX_RETRY`], saying the
//! outage once. The same loop serves both drivers: on the runtime with tokio's socket and
//! timer, on a worker with the same on the worker's own runtime
//! (`linerate_server::runtime`).
//!
//! Never on the request path: a request that finds a slot empty only starts its re-opening
//! (at most one task per slot, [`claim`]) and goes on to the next slot or [`Unavailable`].
//!
//! [`Unavailable`]: crate::Unavailable
#![forbid(unsafe_code)]

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_postgres::NoTls;

use crate::conn::Conn;
use crate::error::{OpenError, PgOpenError, describe};
use crate::metrics::{Counters, Gauge};
use crate::pool::{Slot, Target, WorkerSet};

/// The first wait before opening a lost connection again.
pub const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest wait between two tries.
pub const MAX_RETRY: Duration = Duration::from_secs(2);

/// Claims `slot` for re-opening: false when it is closed for good or already being re-opened.
fn claim(slot: &Slot) -> bool {
    !slot.closed.load(Ordering::Acquire) && !slot.reconnecting.swap(true, Ordering::AcqRel)
}

/// The wait after a failed try that waited `wait`: doubled, at most [`MAX_RETRY`].
pub(crate) fn next_wait(wait: Duration) -> Duration {
    (wait * 2).min(MAX_RETRY)
}

/// Re-opens `slot` with `open` until it succeeds, waiting with `sleep` (false: give up) between
/// tries, the wait doubling from [`FIRST_RETRY`] to [`MAX_RETRY`]; says the outage once. A slot
/// that had a connection before counts a reconnect.
async fn reopen<E, O, S>(
    slot: Arc<Slot>,
    counters: Arc<Counters>,
    mut open: impl FnMut() -> O,
    sleep: impl Fn(Duration) -> S,
) where
    E: std::fmt::Display,
    O: std::future::Future<Output = Result<Conn, E>>,
    S: std::future::Future<Output = bool>,
{
    let mut wait = FIRST_RETRY;
    let mut said = false;
    loop {
        match open().await {
            Ok(conn) => {
                *slot.conn.lock().unwrap() = Some(Arc::new(conn));
                if slot.opened.swap(true, Ordering::AcqRel) {
                    counters.reconnected();
                }
                if said {
                    tracing::info!("database connection open again");
                }
                break;
            }
            Err(e) => {
                if !said {
                    tracing::warn!(error = %e, "database unreachable; retrying");
                    said = true;
                }
                if !sleep(wait).await {
                    break;
                }
                wait = next_wait(wait);
            }
        }
    }
    slot.reconnecting.store(false, Ordering::Release);
}

/// Starts re-opening `slot` on `runtime` unless that is already under way.
pub(crate) fn revive(runtime: &tokio::runtime::Handle, target: &Arc<Target>, slot: &Arc<Slot>) {
    if !claim(slot) {
        return;
    }
    let (target, watched) = (target.clone(), slot.clone());
    runtime.spawn(reopen(
        slot.clone(),
        target.counters.clone(),
        move || {
            let (target, watched) = (target.clone(), watched.clone());
            async move { open(&target, &watched).await }
        },
        |wait| async move {
            tokio::time::sleep(wait).await;
            true
        },
    ));
}

/// Opens one connection for `slot` on the current tokio runtime, prepares the statements, and
/// watches it: when it ends, the slot is emptied and re-opened.
pub(crate) async fn open(target: &Arc<Target>, slot: &Arc<Slot>) -> Result<Conn, PgOpenError> {
    let (watch_target, watch_slot) = (target.clone(), slot.clone());
    open_runtime(target, Gauge::SharedOpen, move || {
        forget_closed(&watch_slot);
        revive(
            &tokio::runtime::Handle::current(),
            &watch_target,
            &watch_slot,
        );
    })
    .await
}

/// Opens one connection on the current tokio runtime and prepares the statements; it counts
/// under `gauge` while open, and `ended` runs there when the connection's task ends.
pub(crate) async fn open_runtime(
    target: &Arc<Target>,
    gauge: Gauge,
    ended: impl FnOnce() + Send + 'static,
) -> Result<Conn, PgOpenError> {
    let (client, connection) = target.config.connect(NoTls).await?;
    let open = target.counters.hold(gauge);
    tokio::spawn(async move {
        let _open = open;
        if let Err(e) = connection.await {
            tracing::warn!(error = describe(&e), "database connection ended");
        }
        ended();
    });
    let statements = target.specs.prepare(&client).await?;
    Ok(Conn { client, statements })
}

/// Empties `slot` if its connection is closed.
fn forget_closed(slot: &Slot) {
    let mut held = slot.conn.lock().unwrap();
    if held.as_ref().is_some_and(|c| c.client.is_closed()) {
        *held = None;
    }
}

/// Starts re-opening a worker's `slot` on its thread unless that is already under way.
pub(crate) fn revive_local(set: &Rc<WorkerSet>, slot: &Arc<Slot>) {
    if !claim(slot) {
        return;
    }
    let (set, target) = (set.clone(), slot.clone());
    linerate_server::runtime::spawn_local(reopen(
        slot.clone(),
        set.target.counters.clone(),
        move || {
            let (set, target) = (set.clone(), target.clone());
            async move { open_local(&set, &target).await }
        },
        |wait| async move {
            tokio::time::sleep(wait).await;
            true
        },
    ));
}

/// Opens one connection for a worker's `slot` on the worker's runtime, prepares the
/// statements and watches it: when it ends, the slot is emptied and re-opened.
async fn open_local(set: &Rc<WorkerSet>, slot: &Arc<Slot>) -> Result<Conn, OpenError> {
    let (watch_set, watch_slot) = (set.clone(), slot.clone());
    open_worker(&set.target, &set.addrs, Gauge::SharedOpen, move || {
        forget_closed(&watch_slot);
        revive_local(&watch_set, &watch_slot);
    })
    .await
}

/// Opens one connection on this worker's runtime (the first of `addrs` that answers) and
/// prepares the statements; it counts under `gauge` while open, and `ended` runs on this
/// thread when the connection's task ends.
pub(crate) async fn open_worker(
    target: &Target,
    addrs: &[std::net::SocketAddr],
    gauge: Gauge,
    ended: impl FnOnce() + 'static,
) -> Result<Conn, OpenError> {
    let mut last = None;
    let mut tcp = None;
    for addr in addrs {
        match tokio::net::TcpStream::connect(*addr).await {
            Ok(t) => {
                // Queries are small messages answered one by one: no Nagle wait.
                t.set_nodelay(true)?;
                tcp = Some(t);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = match tcp {
        Some(t) => t,
        None => {
            return Err(last.map_or_else(|| std::io::Error::other("no address").into(), Into::into));
        }
    };
    let (client, connection) = target.config.connect_raw(tcp, NoTls).await?;
    let open = target.counters.hold(gauge);
    linerate_server::runtime::spawn_local(async move {
        let _open = open;
        if let Err(e) = connection.await {
            tracing::warn!(error = describe(&e), "database connection ended");
        }
        ended();
    });
    let statements = target.specs.prepare(&client).await?;
    Ok(Conn { client, statements })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_the_cap() {
        let mut wait = FIRST_RETRY;
        let mut seen = vec![wait];
        while wait < MAX_RETRY {
            wait = next_wait(wait);
            seen.push(wait);
        }
        let ms: Vec<u128> = seen.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [50, 100, 200, 400, 800, 1600, 2000]);
        assert_eq!(next_wait(MAX_RETRY), MAX_RETRY);
    }
}
