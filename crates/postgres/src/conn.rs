//! One open connection as a request sees it: the tokio-postgres [`Client`] and the pool's
//! statements prepared on it. Several requests hold the same connection at once; their
//! queries are pipelined on it (sent without waiting for the answers before them, answered in
//! order by the server). Nothing here opens, watches or reopens connections (`reconnect.rs`
//! does).
#![forbid(unsafe_code)]

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use crate::statements::StatementId;

/// An open connection and the pool's statements prepared on it, as
/// [`Pool::get`](crate::Pool::get) hands it out (in an `Arc`: several requests share it).
pub struct Conn {
    pub(crate) client: Client,
    pub(crate) statements: Box<[Statement]>,
}

impl Conn {
    /// The tokio-postgres client, for what the pool's statements do not cover (a one-off
    /// query, a transaction, `COPY`).
    pub fn client(&self) -> &Client {
        &self.client
    }

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
