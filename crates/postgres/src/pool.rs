//! The connections: a fixed number of tokio-postgres connections, each with the pool's
//! prepared statements, handed out round-robin ([`Pool::get`]); where their futures run
//! ([`Pool::spawner`]); and the worker driver's per-worker set-up ([`Pool::worker_start`]).
//!
//! Two drivers ([`Driver`]): `Runtime` keeps one set of connections on a tokio runtime beside
//! the workers (a request crosses to that thread and back); `Worker` gives every HTTP worker
//! its own set, driven by the worker's own tokio runtime (`linerate_server::runtime`, which the
//! worker's loop drives), so a request never leaves
//! its thread. A lost connection's slot is emptied and re-opened in the background
//! (`reconnect.rs`); a request that finds no open slot gets [`Unavailable`] at once. Each set
//! also has its sessions, connections one request holds alone ([`Pool::session`],
//! `session.rs`; [`Pool::transaction`] on one). Listeners ([`Pool::listen`], `listen.rs`) have
//! connections of their own on the runtime; [`Pool::metrics`] reads the counters
//! (`metrics.rs`).
//!
//! The request path ([`Pool::get`]) takes one uncontended lock and clones one `Arc`; it never
//! allocates and never waits on the network.
#![forbid(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use linerate_server::{BoxFuture, Spawn, WorkerStart};

use crate::conn::Conn;
use crate::error::{Error, OpenError, Unavailable};
use crate::metrics::{Counters, Gauge, Metrics};
use crate::reconnect::{revive, revive_local};
use crate::session::{Place, Session, Sessions, Transaction};
use crate::statements::{Specs, StatementId};

/// Where the connections live and which thread drives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// One set on a tokio runtime's threads, shared by the workers: a query's future runs
    /// there, and its answer crosses back to the worker.
    Runtime,
    /// A set per HTTP worker, on the worker's own tokio runtime, which its event loop drives
    /// (opened by [`Pool::worker_start`]): a query never leaves the worker's thread.
    Worker,
}

/// What a connection is opened to, and prepares when it opens; how many sessions a set keeps.
pub(crate) struct Target {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) specs: Specs,
    /// Sessions open at once per set ([`Builder::sessions`](crate::Builder::sessions)).
    pub(crate) sessions: usize,
    /// How long a request waits for a session when all are in use.
    pub(crate) session_wait: Duration,
    /// The pool's counters, shared by all its sets.
    pub(crate) counters: Arc<Counters>,
    /// The sessions' outage, shared by all its sets: said once, and tried once at a time,
    /// for the pool (each worker's set used to say it, and try, on its own).
    pub(crate) session_outage: Arc<Mutex<Option<crate::session::Outage>>>,
}

/// One connection's place: the open connection, if any, and its reconnection state.
pub(crate) struct Slot {
    pub(crate) conn: Mutex<Option<Arc<Conn>>>,
    /// A task is re-opening this slot.
    pub(crate) reconnecting: AtomicBool,
    /// Closed for good ([`Pool::close`]): not re-opened.
    pub(crate) closed: AtomicBool,
    /// Has had a connection: opening it again is a reconnect ([`Metrics::reconnects`]).
    pub(crate) opened: AtomicBool,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            conn: Mutex::new(None),
            reconnecting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            opened: AtomicBool::new(false),
        })
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.conn.lock().unwrap().take();
    }
}

/// Connections on a tokio runtime: the runtime driver's, and the worker driver's start-up
/// connection.
pub(crate) struct RuntimeSet {
    slots: Vec<Arc<Slot>>,
    sessions: Arc<Sessions>,
    next: AtomicUsize,
    runtime: tokio::runtime::Handle,
    target: Arc<Target>,
}

impl RuntimeSet {
    /// Opens `count` connections on `runtime`, one after the other; the first error is
    /// returned (with the index of the statement that did not prepare, if that was it).
    pub(crate) fn open(
        target: &Arc<Target>,
        count: usize,
        runtime: &tokio::runtime::Handle,
    ) -> Result<RuntimeSet, crate::error::PgOpenError> {
        let slots: Vec<Arc<Slot>> = (0..count).map(|_| Slot::new()).collect();
        runtime.block_on(async {
            for slot in &slots {
                let conn = crate::reconnect::open(target, slot).await?;
                *slot.conn.lock().unwrap() = Some(Arc::new(conn));
                slot.opened.store(true, Ordering::Release);
            }
            Ok::<_, crate::error::PgOpenError>(())
        })?;
        let place = Place::Runtime {
            runtime: runtime.clone(),
            target: target.clone(),
        };
        Ok(RuntimeSet {
            slots,
            sessions: Sessions::new(target, place),
            next: AtomicUsize::new(0),
            runtime: runtime.clone(),
            target: target.clone(),
        })
    }

    fn get(&self) -> Result<Arc<Conn>, Unavailable> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        pick(&self.slots, start, |slot| {
            revive(&self.runtime, &self.target, slot)
        })
    }

    fn close(&self) {
        self.slots.iter().for_each(|s| s.close());
        self.sessions.close();
    }
}

/// A worker's own connections ([`Driver::Worker`]), in its thread's [`WORKER`].
pub(crate) struct WorkerSet {
    /// The [`Pool::id`] these belong to.
    pool: u64,
    pub(crate) slots: Vec<Arc<Slot>>,
    sessions: Arc<Sessions>,
    next: Cell<usize>,
    pub(crate) target: Arc<Target>,
    pub(crate) addrs: Arc<[SocketAddr]>,
}

thread_local! {
    static WORKER: RefCell<Option<Rc<WorkerSet>>> = const { RefCell::new(None) };
}

/// How often a worker at start looks whether its connections are open.
const START_LOOK: Duration = Duration::from_millis(5);

/// Tells pools apart, so that a worker's set is used only by the pool that opened it.
static POOL_IDS: AtomicU64 = AtomicU64::new(1);

/// The connections, and the statements prepared on each: made by
/// [`Builder::connect`](crate::Builder::connect), shared by the handlers (in an `Arc`).
pub struct Pool {
    id: u64,
    connections: usize,
    target: Arc<Target>,
    mode: Mode,
}

enum Mode {
    Runtime(RuntimeSet),
    /// Each worker's set is in its thread's [`WORKER`]; `start` serves the threads that have
    /// none (start-up work on the main thread) until the first worker opens its own.
    Worker {
        start: RuntimeSet,
        addrs: Arc<[SocketAddr]>,
    },
}

/// The first open slot from `start` round-robin; closed ones are emptied and `revive`d.
fn pick(
    slots: &[Arc<Slot>],
    start: usize,
    revive: impl Fn(&Arc<Slot>),
) -> Result<Arc<Conn>, Unavailable> {
    let n = slots.len();
    for i in 0..n {
        let slot = &slots[(start + i) % n];
        let mut held = slot.conn.lock().unwrap();
        if let Some(conn) = held.as_ref() {
            if !conn.client.is_closed() {
                return Ok(conn.clone());
            }
            *held = None;
        }
        drop(held);
        revive(slot);
    }
    Err(Unavailable)
}

impl Pool {
    /// A builder for a pool of connections to `url` (a `postgres://` URL or a key=value
    /// string, as tokio-postgres reads them): register statements, choose the driver, connect.
    pub fn builder(url: &str) -> crate::Builder {
        crate::Builder::new(url)
    }

    pub(crate) fn runtime(connections: usize, target: Arc<Target>, set: RuntimeSet) -> Pool {
        Pool {
            id: POOL_IDS.fetch_add(1, Ordering::Relaxed),
            connections,
            target,
            mode: Mode::Runtime(set),
        }
    }

    pub(crate) fn worker(
        connections: usize,
        target: Arc<Target>,
        start: RuntimeSet,
        addrs: Arc<[SocketAddr]>,
    ) -> Pool {
        Pool {
            id: POOL_IDS.fetch_add(1, Ordering::Relaxed),
            connections,
            target,
            mode: Mode::Worker { start, addrs },
        }
    }

    /// An open connection: the next one round-robin, or the one after it when that one is
    /// lost (its reconnection is started). [`Unavailable`] at once when none is open.
    ///
    /// With [`Driver::Worker`], call it from a future run by [`Pool::spawner`] on a worker:
    /// it hands out that worker's own connections. On any other thread it hands out the
    /// start-up connection until the first worker opens its own, then [`Unavailable`].
    pub fn get(&self) -> Result<Arc<Conn>, Unavailable> {
        match &self.mode {
            Mode::Runtime(set) => set.get(),
            Mode::Worker { start, .. } => WORKER.with(|w| {
                let w = w.borrow();
                match w.as_ref() {
                    Some(set) if set.pool == self.id => {
                        let start = set.next.get();
                        set.next.set(start.wrapping_add(1));
                        pick(&set.slots, start, |slot| revive_local(set, slot))
                    }
                    _ => start.get(),
                }
            }),
        }
    }

    /// A connection this request holds alone, for a transaction, session state (`SET`,
    /// `LISTEN`, advisory locks, temporary tables) or any one-off statement: an idle one, or
    /// a new one while fewer than [`Builder::sessions`](crate::Builder::sessions) are open in
    /// this set (with [`Driver::Worker`], this worker's). When all are in use the request
    /// waits its turn, at most [`Builder::session_wait`](crate::Builder::session_wait), then
    /// gets [`Error::Busy`]; [`Error::Unavailable`] when the database cannot be reached.
    /// Dropped, the session is reset and kept for the next request.
    ///
    /// ```no_run
    /// # async fn f(pool: &linerate_postgres::Pool) -> Result<(), linerate_postgres::Error> {
    /// let mut session = pool.session().await?;
    /// let tx = session.transaction().await?;
    /// tx.execute("INSERT INTO audit (what) VALUES ($1)", &[&"checkout"]).await?;
    /// tx.commit().await?; // acknowledged only now; dropped before this, rolled back
    /// # Ok(())
    /// # }
    /// ```
    pub fn session(&self) -> impl Future<Output = Result<Session, Error>> + Send + 'static {
        let sessions = match &self.mode {
            Mode::Runtime(set) => set.sessions.clone(),
            Mode::Worker { start, .. } => WORKER.with(|w| match w.borrow().as_ref() {
                Some(set) if set.pool == self.id => set.sessions.clone(),
                _ => start.sessions.clone(),
            }),
        };
        sessions.take()
    }

    /// The pool's counters now, every worker's set together: sessions in use, requests
    /// waiting for one, connections open by kind, reconnects and busy refusals so far. Cheap
    /// (a few atomic loads); the request path itself counts nothing.
    pub fn metrics(&self) -> Metrics {
        self.target.counters.snapshot()
    }

    /// Runs `f` in a transaction on a session of its own ([`Pool::session`], then
    /// [`Session::run_transaction`]): `COMMIT` when `f` returns `Ok`, and the value returned
    /// only once the commit is acknowledged; `ROLLBACK` when it returns `Err`, when it panics
    /// (the panic then goes on), or when this future is dropped (the client gone: the
    /// session's reset rolls back before any other request gets the connection).
    /// [`Error::Busy`] or [`Error::Unavailable`] (converted into `E`) when no session is had.
    /// For an isolation level or a read-only transaction, take the session and use
    /// [`Session::build_transaction`] and [`TransactionBuilder::run`](crate::TransactionBuilder::run).
    ///
    /// `f` is an async closure taking the transaction by `&mut`: it runs statements on it
    /// (the pool's, by id, or any SQL), and may open savepoints; it cannot commit or roll back
    /// itself, so each way out of it has one outcome. `E` is the caller's error type; it
    /// needs `From<Error>` (as [`Error`] has, with `From<tokio_postgres::Error>`), and Rust
    /// infers it from the closure's `Ok::<_, E>(…)`.
    ///
    /// ```no_run
    /// # async fn f(pool: &linerate_postgres::Pool, debit: linerate_postgres::StatementId,
    /// #     credit: linerate_postgres::StatementId) -> Result<(), linerate_postgres::Error> {
    /// use linerate_postgres::Error;
    /// let (from, to, amount) = (1i32, 2i32, 500i64);
    /// let balance: i64 = pool
    ///     .transaction(async |tx| {
    ///         let row = tx.query_id(debit, &[&from, &amount]).await?;
    ///         tx.execute_id(credit, &[&to, &amount]).await?;
    ///         Ok::<_, Error>(row[0].get(0))
    ///     })
    ///     .await?; // committed once this is Ok
    /// # Ok(())
    /// # }
    /// ```
    pub async fn transaction<T, E>(
        &self,
        f: impl AsyncFnOnce(&mut Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<Error>,
    {
        let mut session = self.session().await?;
        session.run_transaction(f).await
    }

    /// A [`Listener`](crate::Listener) on `channels` (`LISTEN`, each name quoted: taken
    /// exactly as given, as `pg_notify` takes it), listening before this returns: a stream of
    /// the notifications sent on them once their transactions commit, in order, and a
    /// [`Notice::Missed`](crate::Notice::Missed) mark where some may have been lost (the
    /// connection lost and opened again, or the reader [`LISTEN_BUFFER`](crate::LISTEN_BUFFER)
    /// behind). Each listener is one more connection to the database, opened and driven on
    /// the pool's runtime with either driver: it takes no session (it lives as long as its
    /// reader, an SSE stream say, and would hold one from transactions) and no shared
    /// connection (notifications come only between statements). Dropped, it closes its
    /// connection; many readers of the same channels are best served by one listener whose
    /// notices are passed on (a broadcast channel).
    ///
    /// [`Error::BadName`] for a channel name PostgreSQL would not keep (empty, longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES), or holding a NUL), [`Error::Unavailable`]
    /// when the database cannot be reached, [`Error::Query`] when it refuses the `LISTEN`.
    ///
    /// ```no_run
    /// # async fn f(pool: &linerate_postgres::Pool) -> Result<(), linerate_postgres::Error> {
    /// use futures_util::StreamExt;
    /// use linerate_postgres::Notice;
    /// let mut orders = pool.listen(&["orders"]).await?;
    /// while let Some(notice) = orders.next().await {
    ///     match notice {
    ///         Notice::Notification(n) => println!("{}: {}", n.channel(), n.payload()),
    ///         Notice::Missed => println!("read the orders again"),
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn listen(
        &self,
        channels: &[&str],
    ) -> impl Future<Output = Result<crate::Listener, Error>> + Send + 'static {
        let runtime = match &self.mode {
            Mode::Runtime(set) => &set.runtime,
            Mode::Worker { start, .. } => &start.runtime,
        };
        crate::listen::start(runtime, &self.target, channels)
    }

    /// The id of the statement registered as `name`, for code that did not keep the
    /// [`StatementId`] [`Builder::prepare`](crate::Builder::prepare) returned. A linear
    /// search: look names up once, not per request.
    pub fn statement_id(&self, name: &str) -> Option<StatementId> {
        self.target.specs.id(name)
    }

    /// What runs the futures that use this pool: for [`Router::get_async`] and
    /// [`Router::route_async`]. With [`Driver::Runtime`] the pool's runtime; with
    /// [`Driver::Worker`] the runtime of the worker that took the request
    /// ([`linerate_server::OnWorker`]).
    ///
    /// [`Router::get_async`]: linerate_server::Router::get_async
    /// [`Router::route_async`]: linerate_server::Router::route_async
    pub fn spawner(&self) -> Spawner {
        match &self.mode {
            Mode::Runtime(set) => Spawner(Some(set.runtime.clone())),
            Mode::Worker { .. } => Spawner(None),
        }
    }

    /// The driver of these connections.
    pub fn driver(&self) -> Driver {
        match self.mode {
            Mode::Runtime(_) => Driver::Runtime,
            Mode::Worker { .. } => Driver::Worker,
        }
    }

    /// The connections asked for: with [`Driver::Runtime`] the pool's; with
    /// [`Driver::Worker`] all the workers' together (0: one per worker).
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// Each worker's share with `workers` workers and [`Driver::Worker`]: an equal share of
    /// [`Pool::connections`] (0: one), at least one.
    pub fn per_worker(&self, workers: usize) -> usize {
        share(self.connections, workers)
    }

    /// Closes the connections on the runtime for good: all of them with [`Driver::Runtime`];
    /// the start-up connection with [`Driver::Worker`] (which the first worker to start
    /// closes anyway). Requests that use them get [`Unavailable`] from then on. Listeners
    /// ([`Pool::listen`]) are not closed: each closes its connection when dropped.
    pub fn close(&self) {
        match &self.mode {
            Mode::Runtime(set) => set.close(),
            Mode::Worker { start, .. } => start.close(),
        }
    }

    /// The worker driver's per-worker set-up, for
    /// [`Server::with_worker_start`](linerate_server::Server::with_worker_start) (`None` with
    /// [`Driver::Runtime`]): on its thread, each of the `workers` closes the start-up
    /// connection (the first one to get there does) and opens its share of the connections
    /// ([`Pool::per_worker`]) on its runtime before it serves, waiting at most `limit` for
    /// them; the ones not open by then keep trying in the background.
    ///
    /// One worker-driver pool per server: the server takes one start-up function.
    pub fn worker_start(&self, workers: usize, limit: Duration) -> Option<WorkerStart> {
        let Mode::Worker { start, addrs } = &self.mode else {
            return None;
        };
        let start_slots = start.slots.clone();
        let start_sessions = start.sessions.clone();
        let (id, target, addrs) = (self.id, self.target.clone(), addrs.clone());
        let count = self.per_worker(workers);
        Some(Arc::new(move |_worker| {
            start_slots.iter().for_each(|s| s.close());
            start_sessions.close();
            let set = Rc::new(WorkerSet {
                pool: id,
                slots: (0..count).map(|_| Slot::new()).collect(),
                sessions: Sessions::new(&target, Place::Worker { pool: id }),
                next: Cell::new(0),
                target: target.clone(),
                addrs: addrs.clone(),
            });
            WORKER.with(|w| *w.borrow_mut() = Some(set.clone()));
            for slot in &set.slots {
                revive_local(&set, slot);
            }
            // Waits, on the worker's runtime, for the connections just started (a look every
            // few milliseconds: this is start-up, once per worker).
            linerate_server::runtime::block_on(async {
                let opened = || set.slots.iter().all(|s| s.conn.lock().unwrap().is_some());
                let _ = tokio::time::timeout(limit, async {
                    while !opened() {
                        tokio::time::sleep(START_LOOK).await;
                    }
                })
                .await;
            })
            .ok_or_else(|| std::io::Error::other("no worker runtime on this thread"))?;
            Ok(())
        }))
    }
}

/// Opens a session connection for this thread's worker set of pool `pool`; the outcome goes to
/// `done` (dropped unsent where this thread has no such set).
pub(crate) fn open_worker_session(
    pool: u64,
    done: tokio::sync::oneshot::Sender<Result<Conn, OpenError>>,
) {
    let set = WORKER.with(|w| w.borrow().as_ref().filter(|s| s.pool == pool).cloned());
    if let Some(set) = set {
        linerate_server::runtime::spawn_local(async move {
            let opened =
                crate::reconnect::open_worker(&set.target, &set.addrs, Gauge::SessionsOpen, || {})
                    .await;
            let _ = done.send(opened);
        });
    }
}

/// Runs the futures of handlers that use a [`Pool`] where its connections are driven; from
/// [`Pool::spawner`].
#[derive(Clone, Debug)]
pub struct Spawner(Option<tokio::runtime::Handle>);

impl Spawn for Spawner {
    fn spawn(&self, fut: BoxFuture) {
        match &self.0 {
            Some(runtime) => {
                runtime.spawn(fut);
            }
            None => linerate_server::OnWorker.spawn(fut),
        }
    }
}

/// Each worker's connections: an equal share of `total` (0: one), at least one.
fn share(total: usize, workers: usize) -> usize {
    match total {
        0 => 1,
        n => (n / workers.max(1)).max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_shared_out_among_workers() {
        for (total, workers, each) in [
            (0, 4, 1),
            (1, 4, 1),
            (4, 1, 4),
            (4, 2, 2),
            (256, 16, 16),
            (5, 2, 2),
        ] {
            assert_eq!(share(total, workers), each, "{total} over {workers}");
        }
    }
}
