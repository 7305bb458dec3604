//! The demo's database endpoints (TechEmpower `/db` and `/queries`), first step of issue H:
//! tokio-postgres on a runtime beside the HTTP workers, reached through `route_async`, so a
//! query never blocks a worker.
//!
//! Owns the connections (several, used round-robin; tokio-postgres sends the queries in
//! flight on one connection without waiting for each answer — the round trips per request
//! are still to be measured), the prepared statement, the query-count rule and the JSON
//! shapes.
//! Not yet here (issue H): reconnecting after the database restarts, the other endpoints,
//! and the comparison with a client driven by the worker's own event loop.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use futures_util::future::try_join_all;
use linerate_server::{OwnedRequest, Response, Router};
use tokio_postgres::{Client, NoTls, Statement};

/// Rows in TechEmpower's `world` table.
pub const WORLD_ROWS: u32 = 10_000;
/// Most queries one `/queries` request runs (TechEmpower's bound).
pub const MAX_QUERIES: usize = 500;

/// The database the demo's `/db` and `/queries` read.
pub struct Db {
    clients: Vec<(Client, Statement)>,
    next: AtomicUsize,
    seed: AtomicU64,
}

/// Why the database could not be used at start.
#[derive(Debug)]
pub struct DbError(String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

impl Db {
    /// Opens `connections` connections to `url` on `runtime` and prepares the statements.
    pub fn connect(
        url: &str,
        connections: usize,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Db, DbError> {
        let fail = |e: tokio_postgres::Error| DbError(format!("database {}: {e}", redact(url)));
        let clients = runtime.block_on(async {
            let mut clients = Vec::with_capacity(connections);
            for _ in 0..connections.max(1) {
                let (client, connection) =
                    tokio_postgres::connect(url, NoTls).await.map_err(fail)?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::error!(error = %e, "database connection ended");
                    }
                });
                let world = client
                    .prepare("SELECT id, randomnumber FROM world WHERE id = $1")
                    .await
                    .map_err(fail)?;
                clients.push((client, world));
            }
            Ok::<_, DbError>(clients)
        })?;
        Ok(Db {
            clients,
            next: AtomicUsize::new(0),
            seed: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        })
    }

    /// The next connection (round-robin) and its statement.
    fn client(&self) -> &(Client, Statement) {
        &self.clients[self.next.fetch_add(1, Relaxed) % self.clients.len()]
    }

    /// A random `world` id, 1..=10000 (splitmix64 over a shared counter: cheap, and the
    /// benchmark asks only for ids spread over the table).
    fn random_id(&self) -> i32 {
        let mut z = self.seed.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % WORLD_ROWS as u64) as i32 + 1
    }

    /// `n` random rows as `{"id":…,"randomNumber":…}` objects, queried together.
    async fn worlds(&self, n: usize) -> Result<Vec<World>, tokio_postgres::Error> {
        let queries = (0..n).map(|_| {
            let (client, statement) = self.client();
            let id = self.random_id();
            async move {
                let row = client.query_one(statement, &[&id]).await?;
                Ok::<_, tokio_postgres::Error>(World {
                    id: row.get(0),
                    random_number: row.get(1),
                })
            }
        });
        try_join_all(queries).await
    }
}

#[derive(serde::Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

/// TechEmpower's rule for `queries`: missing or not an integer → 1; below 1 → 1; above 500
/// (however large) → 500.
pub fn query_count(value: Option<&str>) -> usize {
    use std::num::IntErrorKind;
    match value.map(str::parse::<i64>) {
        Some(Ok(n)) if n > MAX_QUERIES as i64 => MAX_QUERIES,
        Some(Ok(n)) if n >= 1 => n as usize,
        Some(Err(e)) if *e.kind() == IntErrorKind::PosOverflow => MAX_QUERIES,
        _ => 1,
    }
}

fn database_error(e: tokio_postgres::Error) -> Response {
    tracing::warn!(error = %e, "database query failed");
    Response::text("database error\n").status(503)
}

/// `router` with `/db` and `/queries` answered from `db`, their futures run on `runtime`.
pub fn mount(router: Router, db: Arc<Db>, runtime: tokio::runtime::Handle) -> Router {
    let spawn = move |f: linerate_server::BoxFuture| {
        runtime.spawn(f);
    };
    let (d1, d2) = (db.clone(), db);
    router
        .get_async("/db", spawn.clone(), move |_req: OwnedRequest| {
            let db = d1.clone();
            async move {
                match db.worlds(1).await {
                    Ok(rows) => Response::json(&rows[0]),
                    Err(e) => database_error(e),
                }
            }
        })
        .get_async("/queries", spawn, move |req: OwnedRequest| {
            let db = d2.clone();
            let n = query_count(req.query_param("queries").as_deref());
            async move {
                match db.worlds(n).await {
                    Ok(rows) => Response::json(&rows),
                    Err(e) => database_error(e),
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_count_follows_techempower() {
        for (value, want) in [
            (None, 1),
            (Some(""), 1),
            (Some("foo"), 1),
            (Some("0"), 1),
            (Some("-5"), 1),
            (Some("1"), 1),
            (Some("20"), 20),
            (Some("500"), 500),
            (Some("501"), 500),
            (Some("99999999999999999999"), 500),
            (Some("-99999999999999999999"), 1),
            (Some("2.5"), 1),
        ] {
            assert_eq!(query_count(value), want, "{value:?}");
        }
    }

    #[test]
    fn redact_hides_the_password() {
        assert_eq!(
            redact("postgres://u:secret@127.0.0.1:5432/d"),
            "postgres://u@127.0.0.1:5432/d"
        );
        assert_eq!(redact("postgres://127.0.0.1/d"), "postgres://127.0.0.1/d");
    }

    #[test]
    fn random_ids_cover_the_table_and_stay_in_it() {
        let db = Db {
            clients: Vec::new(),
            next: AtomicUsize::new(0),
            seed: AtomicU64::new(1),
        };
        let ids: Vec<i32> = (0..100_000).map(|_| db.random_id()).collect();
        assert!(ids.iter().all(|&i| (1..=WORLD_ROWS as i32).contains(&i)));
        assert_eq!(*ids.iter().min().unwrap(), 1);
        assert_eq!(*ids.iter().max().unwrap(), WORLD_ROWS as i32);
    }
}
