//! The [`Store`] on PostgreSQL (tokio-postgres, statements prepared once per connection).
//! Each worker runtime has its own connections (`PerWorker`), opened there on first use and
//! again after a failure, so a query never leaves the worker's thread: one shared connection
//! for reads (its queries pipelined) and [`WRITERS`] for transfers, each holding one
//! transaction at a time. A transfer locks both rows in id order, so two transfers between
//! the same accounts queue rather than deadlock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use linerate_server::runtime::PerWorker;
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls, Statement};

use super::store::{Account, BankError, BoxFuture, NewTransfer, Store, check_transfer};

/// Connections per worker that run transfers. A transaction holds its connection from BEGIN
/// to COMMIT, so this bounds the worker's transfers in flight; reads share one more.
pub const WRITERS: usize = 4;

/// One connection and its prepared statements.
struct Conn {
    client: Client,
    account: Statement,
    /// Both rows of a transfer, locked in id order.
    lock: Statement,
    /// `balance += $2` on account `$1` (a debit is a negative amount).
    add: Statement,
    record: Statement,
}

impl Conn {
    /// Connects; the connection's task runs on the current (worker's) runtime.
    async fn open(url: &str) -> Result<Conn, BankError> {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(unavailable)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "PostgreSQL connection ended");
            }
        });
        let account = client
            .prepare("SELECT id, owner, balance FROM accounts WHERE id = $1")
            .await
            .map_err(failed)?;
        let lock = client
            .prepare(
                "SELECT id, balance FROM accounts WHERE id = $1 OR id = $2 ORDER BY id FOR UPDATE",
            )
            .await
            .map_err(failed)?;
        let add = client
            .prepare("UPDATE accounts SET balance = balance + $2 WHERE id = $1")
            .await
            .map_err(failed)?;
        let record = client
            .prepare(
                "INSERT INTO transfers (from_id, to_id, amount) VALUES ($1, $2, $3) RETURNING id",
            )
            .await
            .map_err(failed)?;
        Ok(Conn {
            client,
            account,
            lock,
            add,
            record,
        })
    }
}

/// One worker's connections, each opened when first needed.
struct WorkerConns {
    url: Arc<str>,
    reader: Mutex<Option<Arc<Conn>>>,
    writers: Vec<Mutex<Option<Conn>>>,
    next: AtomicUsize,
}

impl WorkerConns {
    /// The read connection (opened now if there is none, or its session ended).
    async fn reader(&self) -> Result<Arc<Conn>, BankError> {
        let mut slot = self.reader.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(Conn::open(&self.url).await?);
        *slot = Some(c.clone());
        Ok(c)
    }
}

/// The [`Store`] on PostgreSQL (see the module doc).
pub struct Postgres {
    conns: PerWorker<Arc<WorkerConns>>,
}

impl Postgres {
    /// Connects to `url` (a `postgres://` URL) when each worker first needs it.
    pub fn new(url: &str) -> Postgres {
        let url: Arc<str> = url.into();
        Postgres {
            conns: PerWorker::new(move || {
                Arc::new(WorkerConns {
                    url: url.clone(),
                    reader: Mutex::new(None),
                    writers: (0..WRITERS).map(|_| Mutex::new(None)).collect(),
                    next: AtomicUsize::new(0),
                })
            }),
        }
    }
}

impl Store for Postgres {
    fn account(&self, id: i64) -> BoxFuture<Result<Option<Account>, BankError>> {
        let conns = self.conns.get();
        Box::pin(async move {
            let conn = conns.reader().await?;
            let row = conn
                .client
                .query_opt(&conn.account, &[&id])
                .await
                .map_err(failed)?;
            Ok(row.map(|r| Account {
                id: r.get(0),
                owner: r.get(1),
                balance: r.get(2),
            }))
        })
    }

    fn transfer(&self, t: NewTransfer) -> BoxFuture<Result<i64, BankError>> {
        let conns = self.conns.get();
        Box::pin(async move {
            check_transfer(&t)?;
            let i = conns.next.fetch_add(1, Ordering::Relaxed) % WRITERS;
            let mut slot = conns.writers[i].lock().await;
            if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
                *slot = Some(Conn::open(&conns.url).await?);
            }
            let Some(Conn {
                client,
                lock,
                add,
                record,
                ..
            }) = slot.as_mut()
            else {
                unreachable!("opened above");
            };
            // Dropped before COMMIT (an early return), the transaction rolls back.
            let tx = client.transaction().await.map_err(failed)?;
            let rows = tx.query(&*lock, &[&t.from, &t.to]).await.map_err(failed)?;
            let balance = |id: i64| {
                rows.iter()
                    .find(|r| r.get::<_, i64>(0) == id)
                    .map(|r| r.get::<_, i64>(1))
            };
            let have = balance(t.from).ok_or(BankError::NotFound)?;
            balance(t.to).ok_or(BankError::NotFound)?;
            if have < t.amount {
                return Err(BankError::InsufficientFunds);
            }
            tx.execute(&*add, &[&t.from, &-t.amount])
                .await
                .map_err(failed)?;
            tx.execute(&*add, &[&t.to, &t.amount])
                .await
                .map_err(failed)?;
            let id: i64 = tx
                .query_one(&*record, &[&t.from, &t.to, &t.amount])
                .await
                .map_err(failed)?
                .get(0);
            tx.commit().await.map_err(failed)?;
            Ok(id)
        })
    }
}

/// A connection that could not be made.
fn unavailable(e: tokio_postgres::Error) -> BankError {
    tracing::warn!(error = %e, "PostgreSQL unreachable");
    BankError::Unavailable("the database".into())
}

/// A query that failed: the connection is gone (unavailable, opened again next time) or the
/// query itself failed (internal).
fn failed(e: tokio_postgres::Error) -> BankError {
    if e.is_closed() {
        return unavailable(e);
    }
    tracing::error!(error = %e, "query failed");
    BankError::Internal(e.to_string())
}
