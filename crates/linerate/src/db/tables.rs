//! Which of the demo's HttpArena tables the database has, asked once at start: TechEmpower's
//! own database (tfb-database) holds `world` and `fortune` only, HttpArena's adds `items` and
//! `users`. Every connection prepares every registered statement, and a statement over a
//! missing table does not prepare, so a missing table's statements are not registered, its
//! routes answer 503 ([`missing`]), and the start log names it once.
//!
//! Owns the question and the 503; not the routes (`items.rs`, `stack.rs` mount them).
#![forbid(unsafe_code)]

use linerate_server::{Method, Response, Router};

/// One question for both tables (`to_regclass`: the table as the connection's search path
/// finds it, or NULL).
const ASK: &str =
    "SELECT to_regclass('items') IS NOT NULL AS items, to_regclass('users') IS NOT NULL AS users";

/// The HttpArena tables the database has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tables {
    /// `items`: `/async-db`, `/crud/items` and `/api/items/{id}`.
    pub items: bool,
    /// `users`: `/api/me`.
    pub users: bool,
}

/// Why the tables could not be asked about (said at start as the pool's own errors are).
#[derive(Debug)]
pub enum AskError {
    /// The URL does not parse.
    Url(tokio_postgres::Error),
    /// No connection, or the question refused.
    Db(tokio_postgres::Error),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Url(e) => write!(f, "invalid URL: {e}"),
            AskError::Db(e) => f.write_str(&linerate_postgres::describe(e)),
        }
    }
}

impl std::error::Error for AskError {}

/// Asks the database at `url` which tables it has, on one connection of its own opened on
/// `runtime` and closed after (as the pool's, without TLS).
pub fn ask(url: &str, runtime: &tokio::runtime::Handle) -> Result<Tables, AskError> {
    let config: tokio_postgres::Config = url.parse().map_err(AskError::Url)?;
    runtime.block_on(async {
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(AskError::Db)?;
        let driven = tokio::spawn(connection);
        let row = client.query_one(ASK, &[]).await.map_err(AskError::Db);
        drop(client);
        let _ = driven.await;
        let row = row?;
        Ok(Tables {
            items: row.get("items"),
            users: row.get("users"),
        })
    })
}

/// `router` with each of `routes` answering 503: the database lacks `table`.
pub fn missing(router: Router, table: &'static str, routes: &[(Method, &str)]) -> Router {
    routes.iter().fold(router, |router, &(method, path)| {
        router.route(method, path, move |_| no_table(table))
    })
}

/// The answer of a route whose table the database lacks.
pub fn no_table(table: &str) -> Response {
    Response::text_owned(format!(
        "the database has no table \"{table}\", which this endpoint reads \
         (TechEmpower's database has world and fortune only)\n"
    ))
    .status(503)
}
