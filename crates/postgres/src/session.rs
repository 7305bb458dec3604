//! Sessions: connections that one request holds alone ([`Pool::session`]), for what the
//! shared pipelined connections must never carry: a transaction, session state (`SET`,
//! `LISTEN`, advisory locks, temporary tables), a one-off statement. A set of them per pool
//! (runtime driver) or per worker (worker driver), at most [`Builder::sessions`] open, opened
//! when first needed and kept for the next request.
//!
//! Invariant: a connection goes back to the set only after [`RESET`] ran on it (whatever the
//! request left open is rolled back, whatever it set is undone); one whose reset fails is
//! closed. A request that finds every session in use waits its turn (first come, first
//! served) for at most [`Builder::session_wait`], then gets [`Error::Busy`].
//!
//! [`Pool::session`]: crate::Pool::session
//! [`Builder::sessions`]: crate::Builder::sessions
//! [`Builder::session_wait`]: crate::Builder::session_wait
#![forbid(unsafe_code)]

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{Either, select};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, IsolationLevel, Row, Statement};

use crate::conn::Conn;
use crate::error::{Error, OpenError};
use crate::pool::Target;
use crate::statements::StatementId;

/// Run on a session's connection before it is handed to the next request: ends any
/// transaction (committed work stays; the rest is rolled back), closes cursors, puts the
/// role and every setting back, stops listening, lets go of advisory locks, drops temporary
/// tables. `DISCARD ALL` less `DEALLOCATE ALL`: the pool's prepared statements stay.
pub const RESET: &str = "ROLLBACK; CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; \
     UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES";

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
                    let opened = crate::reconnect::open_runtime(&target, || {}).await;
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
}

impl Sessions {
    pub(crate) fn new(limit: usize, wait: Duration, place: Place) -> Arc<Sessions> {
        Arc::new(Sessions {
            permits: Arc::new(Semaphore::new(limit.max(1))),
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            wait,
            place,
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
                let acquire = Box::pin(self.permits.clone().acquire_owned());
                match select(acquire, self.place.timer(self.wait)).await {
                    Either::Left((Ok(p), _)) => p,
                    Either::Left((Err(_), _)) => return Err(Error::Unavailable),
                    Either::Right((Ok(()), _)) => return Err(Error::Busy),
                    // No timer could run here (no executor or no time driver): wait without one.
                    Either::Right((Err(_), acquire)) => match acquire.await {
                        Ok(p) => p,
                        Err(_) => return Err(Error::Unavailable),
                    },
                }
            }
        };
        let idle = {
            let mut idle = self.idle.lock().unwrap();
            idle.retain(|c| !c.client.is_closed());
            idle.pop()
        };
        let conn = match idle {
            Some(c) => c,
            None => match self.place.open().await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "session connection did not open");
                    return Err(Error::Unavailable);
                }
                Err(_) => return Err(Error::Unavailable),
            },
        };
        Ok(Session {
            conn: Some(conn),
            permit: Some(permit),
            home: self,
        })
    }

    /// Takes back `conn` after its reset; its permit is given back only then, so the next
    /// request finds it idle.
    fn give_back(self: Arc<Sessions>, conn: Conn, permit: OwnedSemaphorePermit) {
        let home = self.clone();
        let reset = async move {
            match conn.client.batch_execute(RESET).await {
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
        if !self.place.spawn(reset) {
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
    permit: Option<OwnedSemaphorePermit>,
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
