//! One open connection as a request sees it: the pool's statements prepared on it. Several
//! requests hold the same shared connection at once; their queries are pipelined on it (sent
//! without waiting for the answers before them, answered in order by the server), so a shared
//! connection runs the pool's statements and nothing else: no client is handed out, and a
//! statement that would open a transaction or leave session state is refused at start
//! (`shared_sql.rs`). A [`Session`](crate::Session) is a `Conn` held by one request alone,
//! with its client. Nothing here opens, watches or reopens connections (`reconnect.rs` does).
#![forbid(unsafe_code)]

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use crate::statements::StatementId;

/// An open connection and the pool's statements prepared on it, as
/// [`Pool::get`](crate::Pool::get) hands it out (in an `Arc`: several requests share it).
///
/// A shared connection gives out no client: a transaction there would take in the
/// statements other requests pipeline behind it, and its rollback would undo their
/// acknowledged writes. Take a [`Session`](crate::Session) for that; this does not compile:
///
/// ```compile_fail
/// # async fn f(pool: &linerate_postgres::Pool) -> Result<(), linerate_postgres::Error> {
/// pool.get()?.client().batch_execute("BEGIN").await?;
/// # Ok(())
/// # }
/// ```
pub struct Conn {
    pub(crate) client: Client,
    pub(crate) statements: Box<[Statement]>,
}

impl Conn {
    /// The statement `id` as prepared on this connection. Panics when `id` is from another
    /// pool's builder and past this pool's statements.
    pub fn statement(&self, id: StatementId) -> &Statement {
        &self.statements[id.index()]
    }

    /// Runs statement `id` with `params`; its rows.
    pub async fn query(
        &self,
        id: StatementId,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.client.query(self.statement(id), params).await
    }

    /// Runs statement `id` with `params`; its one row (an error for none or more than one).
    pub async fn query_one(
        &self,
        id: StatementId,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, tokio_postgres::Error> {
        self.client.query_one(self.statement(id), params).await
    }

    /// Runs statement `id` with `params`; its row, if any (an error for more than one).
    pub async fn query_opt(
        &self,
        id: StatementId,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        self.client.query_opt(self.statement(id), params).await
    }

    /// Runs statement `id` with `params`; the number of rows it changed.
    pub async fn execute(
        &self,
        id: StatementId,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        self.client.execute(self.statement(id), params).await
    }

    /// Whether the connection is known to be closed (the pool replaces it).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}
