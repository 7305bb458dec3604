//! Sessions: connections that one request holds alone ([`Pool::session`]), for what the
//! shared pipelined connections must never carry: a transaction, session state (`SET`,
//! `LISTEN`, advisory locks, temporary tables), a one-off statement. A set of them per pool
//! (runtime driver) or per worker (worker driver), at most [`Builder::sessions`] open, opened
//! when first needed and kept for the next request. On a session: transactions as a guard
//! ([`Session::transaction`]) or as an async closure ([`TransactionBuilder::run`]: commit on
//! `Ok`, rollback on `Err`, a panic or a drop), and savepoints ([`Transaction::savepoint`]).
//!
//! Invariant: a connection goes back to the set only after its reset ran on it (whatever the
//! request left open is rolled back, whatever it set is undone: [`RESET`]); one whose reset
//! fails is closed. The reset asks the server first whether a transaction is open, and sends
//! `ROLLBACK` only then: outside a transaction PostgreSQL answers it with a WARNING notice,
//! which tokio-postgres logs, once per session given back. A request that finds every
//! session in use waits its turn (first come, first served) for at most
//! [`Builder::session_wait`], then gets [`Error::Busy`]. While the database cannot be
//! reached, a request that needs a new connection is told [`Error::Unavailable`] at once
//! between tries, which back off as the shared connections' do ([`FIRST_RETRY`] doubling to
//! [`MAX_RETRY`]), and the outage is logged once.
//!
//! [`Pool::session`]: crate::Pool::session
//! [`Builder::sessions`]: crate::Builder::sessions
//! [`Builder::session_wait`]: crate::Builder::session_wait
//! [`FIRST_RETRY`]: crate::FIRST_RETRY
//! [`MAX_RETRY`]: crate::MAX_RETRY
#![forbid(unsafe_code)]

use std::ops::{Deref, DerefMut};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, IsolationLevel, Row, SimpleQueryMessage, Statement};

use crate::conn::Conn;
use crate::error::{Error, OpenError};
use crate::metrics::{Counters, Gauge, Held};
use crate::pool::Target;
use crate::statements::StatementId;

/// [`RESET`]'s statements, for the batches that carry them.
macro_rules! reset_sql {
    () => {
        "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; \
         SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES"
    };
}

/// Run on a session's connection before it is handed to the next request, once any
/// transaction is ended (`ROLLBACK`, sent only when one is open: committed work stays, the
/// rest is rolled back): closes cursors, puts the role and every setting back, stops
/// listening, lets go of advisory locks, drops temporary tables. `DISCARD ALL` less
/// `DEALLOCATE ALL`: the pool's prepared statements stay.
pub const RESET: &str = reset_sql!();

/// A session's reset as first sent: whether a transaction was open before it, then
/// [`RESET`]. The question is the batch's first statement, so outside a transaction block
/// it began the batch's own implicit transaction: `transaction_timestamp()` is its own
/// `statement_timestamp()` and no transaction id is held (PostgreSQL's docs on both). Inside
/// one, the answer is true; in an aborted one the batch is refused (SQLSTATE 25P02), which
/// says so too.
const ASK_THEN_RESET: &str = concat!(
    "SELECT statement_timestamp() <> transaction_timestamp() \
     OR txid_current_if_assigned() IS NOT NULL; ",
    reset_sql!()
);

/// The reset where a transaction was open: that transaction rolled back, then [`RESET`]
/// again (what the first batch did inside it is rolled back with it).
const ROLLBACK_THEN_RESET: &str = concat!("ROLLBACK; ", reset_sql!());

/// Resets a session's connection ([`RESET`]), rolling back first only a transaction that is
/// open (a `ROLLBACK` outside one is a WARNING notice, logged by tokio-postgres): one round
/// trip, two where a transaction was open.
async fn reset(client: &Client) -> Result<(), tokio_postgres::Error> {
    let open = match client.simple_query(ASK_THEN_RESET).await {
        Ok(messages) => !messages.iter().any(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0) == Some("f"),
            _ => false,
        }),
        Err(e) if e.is_closed() => return Err(e),
        // An aborted transaction refuses every statement but its end.
        Err(_) => true,
    };
    if open {
        client.batch_execute(ROLLBACK_THEN_RESET).await?;
    }
    Ok(())
}

/// Where a set's connections are opened, and its small tasks (a reset, a wait) run.
pub(crate) enum Place {
    /// On a tokio runtime, with tokio-postgres's own sockets.
    Runtime {
        runtime: tokio::runtime::Handle,
        target: Arc<Target>,
    },
    /// On the worker thread of pool `pool`, on the worker's runtime (`linerate_server::runtime`).
    Worker { pool: u64 },
}

impl Place {
    /// Runs `fut` here; false where it cannot (a worker place off its worker's thread).
    fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) -> bool {
        match self {
            Place::Runtime { runtime, .. } => {
                runtime.spawn(fut);
                true
            }
            Place::Worker { .. } => linerate_server::runtime::spawn_local(fut),
        }
    }

    /// Opens a connection here; its outcome arrives on the receiver (dropped unsent where this
    /// thread cannot open one).
    fn open(&self) -> oneshot::Receiver<Result<Conn, OpenError>> {
        let (tx, rx) = oneshot::channel();
        match self {
            Place::Runtime { runtime, target } => {
                let target = target.clone();
                runtime.spawn(async move {
                    let opened =
                        crate::reconnect::open_runtime(&target, Gauge::SessionsOpen, || {}).await;
                    let _ = tx.send(opened.map_err(OpenError::Pg));
                });
            }
            Place::Worker { pool } => {
                crate::pool::open_worker_session(*pool, tx);
            }
        }
        rx
    }

    /// Fires after `wait` (or never, where no timer can run here).
    fn timer(&self, wait: Duration) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let ring = async move {
            let _ = tx.send(());
        };
        let ok = match self {
            Place::Runtime { runtime, .. } => {
                runtime.spawn(async move {
                    tokio::time::sleep(wait).await;
                    ring.await;
                });
                true
            }
            Place::Worker { .. } => linerate_server::runtime::spawn_local(async move {
                tokio::time::sleep(wait).await;
                ring.await;
            }),
        };
        if !ok {
            tracing::error!("no executor on this thread for the session wait");
        }
        rx
    }
}

/// One set of session connections: the idle ones, and a permit for each that may be in use.
pub(crate) struct Sessions {
    permits: Arc<Semaphore>,
    idle: Mutex<Vec<Conn>>,
    closed: AtomicBool,
    wait: Duration,
    place: Place,
    counters: Arc<Counters>,
    /// Set while new connections cannot be opened: when the next may be tried. One for the
    /// pool, shared by every worker's set ([`Target::session_outage`]), so an outage is said
    /// once and tried once at a time, not once per worker.
    outage: Arc<Mutex<Option<Outage>>>,
}

/// The pool's outage: session connections could not be opened. It began with one log line;
/// it ends with the first connection opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outage {
    /// No connection is tried before this: requests meanwhile are told `Unavailable` at once.
    retry_at: Instant,
    /// The wait after the next failed try's: doubled from [`FIRST_RETRY`](crate::FIRST_RETRY)
    /// after each, at most [`MAX_RETRY`](crate::MAX_RETRY).
    wait: Duration,
    /// A try is under way (a connect to a host that drops SYNs takes minutes): no other
    /// starts meanwhile, whatever the wait says.
    trying: bool,
}

/// Whether a request that needs a new connection at `now` may try to open one: not while an
/// outage waits or one try of it is under way; the one that may claims the try.
fn may_try(outage: &mut Option<Outage>, now: Instant) -> bool {
    match outage {
        None => true,
        Some(o) if o.trying || now < o.retry_at => false,
        Some(o) => {
            o.retry_at = now + o.wait;
            o.trying = true;
            true
        }
    }
}

/// A try to open a connection failed at `now`: the outage begins (true: say it) or goes on,
/// its wait doubled.
fn failed(outage: &mut Option<Outage>, now: Instant) -> bool {
    match outage {
        None => {
            let wait = crate::reconnect::FIRST_RETRY;
            *outage = Some(Outage {
                retry_at: now + wait,
                wait: crate::reconnect::next_wait(wait),
                trying: false,
            });
            true
        }
        Some(o) => {
            o.retry_at = now + o.wait;
            o.wait = crate::reconnect::next_wait(o.wait);
            o.trying = false;
            false
        }
    }
}

/// A try claimed by [`may_try`]: however it ends (a request that gives up drops it
/// mid-connect), the next one may start.
struct Try<'a>(&'a Mutex<Option<Outage>>);

impl Drop for Try<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            o.trying = false;
        }
    }
}

/// A session's right to be in use: its semaphore permit, counted in
/// [`Metrics::sessions_in_use`](crate::Metrics::sessions_in_use) until given back.
struct Permit {
    _permit: OwnedSemaphorePermit,
    _in_use: Held,
}

impl Sessions {
    /// The set `target` asks for ([`Target::sessions`] of them at most, waited on for
    /// [`Target::session_wait`]), opened and run at `place`.
    pub(crate) fn new(target: &Arc<Target>, place: Place) -> Arc<Sessions> {
        Arc::new(Sessions {
            permits: Arc::new(Semaphore::new(target.sessions.max(1))),
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            wait: target.session_wait,
            place,
            counters: target.counters.clone(),
            outage: target.session_outage.clone(),
        })
    }

    /// Closes the set for good: idle connections now, those in use when they come back.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.idle.lock().unwrap().clear();
    }

    /// A session: an idle connection or a new one, once a permit is free.
    pub(crate) async fn take(self: Arc<Sessions>) -> Result<Session, Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Unavailable);
        }
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // Counted until this request has its permit, gives up, or goes away.
                let _waiting = self.counters.hold(Gauge::SessionsWaiting);
                let acquire = Box::pin(self.permits.clone().acquire_owned());
                match select(acquire, self.place.timer(self.wait)).await {
                    Either::Left((Ok(p), _)) => p,
                    Either::Left((Err(_), _)) => return Err(Error::Unavailable),
                    Either::Right((Ok(()), _)) => {
                        self.counters.busy();
                        return Err(Error::Busy);
                    }
                    // No timer could run here (no executor or no time driver): wait without one.
                    Either::Right((Err(_), acquire)) => match acquire.await {
                        Ok(p) => p,
                        Err(_) => return Err(Error::Unavailable),
                    },
                }
            }
        };
        let permit = Permit {
            _permit: permit,
            _in_use: self.counters.hold(Gauge::SessionsInUse),
        };
        let idle = {
            let mut idle = self.idle.lock().unwrap();
            idle.retain(|c| !c.client.is_closed());
            idle.pop()
        };
        let conn = match idle {
            Some(c) => c,
            None => self.open().await?,
        };
        Ok(Session {
            conn: Some(conn),
            permit: Some(permit),
            home: self,
        })
    }

    /// A new connection for a session, unless an outage is waiting between tries
    /// ([`Error::Unavailable`] at once then). An outage is logged when it begins and when it
    /// ends, once each.
    async fn open(&self) -> Result<Conn, Error> {
        if !may_try(&mut self.outage.lock().unwrap(), Instant::now()) {
            return Err(Error::Unavailable);
        }
        let _try = Try(&self.outage);
        match self.place.open().await {
            Ok(Ok(c)) => {
                if self.outage.lock().unwrap().take().is_some() {
                    tracing::info!("database reachable again: session connections open");
                }
                Ok(c)
            }
            Ok(Err(e)) => {
                self.counters.session_open_failed();
                if failed(&mut self.outage.lock().unwrap(), Instant::now()) {
                    self.counters.session_outage();
                    tracing::warn!(
                        error = %e,
                        "session connection did not open; sessions are unavailable until \
                         one does (tries back off up to {:?})",
                        crate::reconnect::MAX_RETRY
                    );
                }
                Err(Error::Unavailable)
            }
            Err(_) => Err(Error::Unavailable),
        }
    }

    /// Takes back `conn` after its reset; its permit is given back only then, so the next
    /// request finds it idle.
    fn give_back(self: Arc<Sessions>, conn: Conn, permit: Permit) {
        let home = self.clone();
        let job = async move {
            match reset(&conn.client).await {
                Ok(()) if !home.closed.load(Ordering::Acquire) => {
                    home.idle.lock().unwrap().push(conn);
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(error = crate::describe(&e), "session reset failed; closed")
                }
            }
            drop(permit);
        };
        if !self.place.spawn(job) {
            tracing::error!("no executor on this thread for the session reset; closed");
        }
    }
}

/// A connection one request holds alone, from [`Pool::session`](crate::Pool::session): the
/// pool's statements ([`Conn`]'s methods, through `Deref`), the client itself for anything
/// else, and transactions. When dropped, it is reset ([`RESET`]: an unfinished transaction
/// rolled back, session state undone) and kept for the next request.
pub struct Session {
    conn: Option<Conn>,
    permit: Option<Permit>,
    home: Arc<Sessions>,
}

impl Session {
    fn conn_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a session holds its connection until dropped")
    }

    /// The tokio-postgres client: any statement, held by this request alone.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client, for tokio-postgres's own `transaction()` and `build_transaction()`.
    pub fn client_mut(&mut self) -> &mut Client {
        &mut self.conn_mut().client
    }

    /// Runs `f` in a transaction (`BEGIN`; `COMMIT` on `Ok`, `ROLLBACK` on `Err`, a panic, or
    /// this future dropped): [`TransactionBuilder::run`] with the default options.
    pub async fn run_transaction<T, E>(
        &mut self,
        f: impl AsyncFnOnce(&mut Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<Error>,
    {
        self.build_transaction().run(f).await
    }

    /// Starts a transaction (`BEGIN`): committed by [`Transaction::commit`]; rolled back by
    /// [`Transaction::rollback`], or when it is dropped unfinished (an error returned with
    /// `?`, a panic, the client gone).
    pub async fn transaction(&mut self) -> Result<Transaction<'_>, tokio_postgres::Error> {
        self.build_transaction().start().await
    }

    /// A transaction with an isolation level, read-only or deferrable: set them, then
    /// [`TransactionBuilder::start`].
    pub fn build_transaction(&mut self) -> TransactionBuilder<'_> {
        let Conn { client, statements } = self.conn_mut();
        TransactionBuilder {
            inner: client.build_transaction(),
            statements,
        }
    }
}

impl Deref for Session {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a session holds its connection until dropped")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let (Some(conn), Some(permit)) = (self.conn.take(), self.permit.take())
            && !conn.client.is_closed()
        {
            self.home.clone().give_back(conn, permit);
        }
    }
}

/// A transaction's options, from [`Session::build_transaction`].
pub struct TransactionBuilder<'a> {
    inner: tokio_postgres::TransactionBuilder<'a>,
    statements: &'a [Statement],
}

impl<'a> TransactionBuilder<'a> {
    /// The isolation level (PostgreSQL's default: read committed).
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.inner = self.inner.isolation_level(level);
        self
    }

    /// A read-only transaction: any write in it is an error.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.inner = self.inner.read_only(read_only);
        self
    }

    /// Deferrable (with serializable and read-only: waits for a snapshot that cannot fail).
    pub fn deferrable(mut self, deferrable: bool) -> Self {
        self.inner = self.inner.deferrable(deferrable);
        self
    }

    /// Sends `BEGIN` with the options.
    pub async fn start(self) -> Result<Transaction<'a>, tokio_postgres::Error> {
        Ok(Transaction {
            inner: self.inner.start().await?,
            statements: self.statements,
        })
    }

    /// Runs `f` in a transaction with these options: `BEGIN`, then `f`, then `COMMIT` when it
    /// returns `Ok` (its value is returned once the commit is acknowledged) or `ROLLBACK` when
    /// it returns `Err` (that error is returned once the rollback is done). A panic in `f` is
    /// caught, the transaction rolled back, and the panic resumed: it stays a bug, answered as
    /// any handler's panic. When this future is dropped mid-way (the client gone, a timeout),
    /// the transaction is rolled back by the session's reset before any other request gets
    /// the connection. The pool's errors (`BEGIN` or `COMMIT` refused, the connection lost)
    /// reach the caller as `E` ([`Error`] converts into it), so `f` may use its own error
    /// type, with `?` on both tokio-postgres's errors and the pool's where `E` converts from
    /// them (as [`Error`] itself does).
    ///
    /// ```no_run
    /// # async fn f(pool: &linerate_postgres::Pool) -> Result<(), linerate_postgres::Error> {
    /// use linerate_postgres::{Error, tokio_postgres::IsolationLevel};
    /// let mut session = pool.session().await?;
    /// let total: i64 = session
    ///     .build_transaction()
    ///     .isolation_level(IsolationLevel::Serializable)
    ///     .read_only(true)
    ///     .run(async |tx| {
    ///         let row = tx.query_one("SELECT sum(amount) FROM ledger", &[]).await?;
    ///         Ok::<_, Error>(row.get(0))
    ///     })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<T, E>(
        self,
        f: impl AsyncFnOnce(&mut Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<Error>,
    {
        let mut tx = self.start().await.map_err(|e| E::from(Error::Query(e)))?;
        match caught(f(&mut tx)).await {
            Ok(Ok(value)) => {
                tx.commit().await.map_err(|e| E::from(Error::Query(e)))?;
                Ok(value)
            }
            Ok(Err(e)) => {
                // A rollback that fails leaves a broken connection, which the reset closes.
                if let Err(rb) = tx.rollback().await {
                    tracing::debug!(error = crate::describe(&rb), "rollback failed");
                }
                Err(e)
            }
            Err(panic) => {
                let _ = tx.rollback().await;
                std::panic::resume_unwind(panic)
            }
        }
    }
}

/// `fut`'s output, or the panic that one of its polls raised (the future is dropped then).
async fn caught<F: Future>(fut: F) -> std::thread::Result<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        // The future is never polled again after a panic, so no broken state is seen.
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}

/// A transaction on a [`Session`]: tokio-postgres's (through `Deref`: `query`, `execute`,
/// `savepoint`…) with the pool's statements at hand. Dropped unfinished, it is rolled back.
pub struct Transaction<'a> {
    inner: tokio_postgres::Transaction<'a>,
    statements: &'a [Statement],
}

impl<'a> Transaction<'a> {
    /// The pool's statement `id`, prepared on this connection.
    pub fn statement(&self, id: StatementId) -> &'a Statement {
        &self.statements[id.index()]
    }

    /// Runs statement `id` with `params`; its rows.
    pub async fn query_id(
        &self,
        id: StatementId,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.inner.query(self.statement(id), params).await
    }

    /// Runs statement `id` with `params`; the rows it changed.
    pub async fn execute_id(
        &self,
        id: StatementId,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        self.inner.execute(self.statement(id), params).await
    }

    /// Commits (`COMMIT`): the writes are acknowledged only once this returns `Ok`.
    pub async fn commit(self) -> Result<(), tokio_postgres::Error> {
        self.inner.commit().await
    }

    /// Rolls back (`ROLLBACK`).
    pub async fn rollback(self) -> Result<(), tokio_postgres::Error> {
        self.inner.rollback().await
    }

    /// A savepoint `name` in this transaction (`SAVEPOINT "name"`; the name is quoted, so any
    /// text is safe): a nested transaction, with the pool's statements, that
    /// [`Transaction::commit`] releases (`RELEASE`: its writes join this transaction's) and
    /// that is rolled back to (`ROLLBACK TO`: its writes undone, this transaction's kept and
    /// usable again) by [`Transaction::rollback`] or when it is dropped unfinished, an error
    /// returned with `?` included. [`Error::BadName`] for a name PostgreSQL would not keep.
    pub async fn savepoint(&mut self, name: &str) -> Result<Transaction<'_>, Error> {
        let name = crate::names::quote(name)?;
        Ok(Transaction {
            inner: self.inner.savepoint(name).await?,
            statements: self.statements,
        })
    }
}

impl<'a> Deref for Transaction<'a> {
    type Target = tokio_postgres::Transaction<'a>;

    fn deref(&self) -> &tokio_postgres::Transaction<'a> {
        &self.inner
    }
}

impl<'a> DerefMut for Transaction<'a> {
    fn deref_mut(&mut self) -> &mut tokio_postgres::Transaction<'a> {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outage's rule without a database. One try at a time once its wait has
    /// passed, the waits doubling as the shared connections' (50 ms to 2 s), the outage said
    /// when it begins only.
    #[test]
    fn an_outage_is_said_once_and_its_tries_back_off() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut outage = None;
        assert!(may_try(&mut outage, t0), "no outage: go");
        assert!(failed(&mut outage, t0), "it begins: say it");
        let mut at = t0;
        for wait in [50, 100, 200, 400, 800, 1600, 2000, 2000] {
            assert!(
                !may_try(&mut outage, at + ms(wait - 1)),
                "waiting {wait} ms"
            );
            assert!(
                may_try(&mut outage, at + ms(wait)),
                "the try after {wait} ms"
            );
            assert!(
                !may_try(&mut outage, at + ms(wait)),
                "one try at a time: the next request waits for its outcome"
            );
            assert!(
                !may_try(&mut outage, at + ms(10 * wait)),
                "however long that try takes (a connect that hangs)"
            );
            at += ms(wait + 3);
            assert!(!failed(&mut outage, at), "the same outage: not said again");
        }
        // A try that opens ends it (the caller takes it); the next failure is a new one.
        outage.take();
        assert!(may_try(&mut outage, at));
        assert!(failed(&mut outage, at));
    }
}
