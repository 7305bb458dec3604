//! linerate's entry in TechEmpower's Framework Benchmarks: the seven test types' endpoints
//! (`/json`, `/plaintext`, `/db`, `/queries`, `/fortunes`, `/updates`, `/cached-queries`) as
//! routes on linerate-server, their rows on PostgreSQL through linerate-postgres.
//!
//! Owns the endpoints and TechEmpower's rules for them, not the process: `main.rs` makes the
//! server the entry runs, and `linerate serve`'s demo mounts the same routes beside its own,
//! so the two answer alike. Handlers make no syscalls; the database's futures run where the
//! pool drives its connections ([`mount`]).
#![forbid(unsafe_code)]

pub mod world;

use std::sync::Arc;

use linerate_postgres::Pool;
use linerate_server::{OwnedRequest, Response, Router};

use world::{DbError, Random, Statements, WorldCache, error_response, query_count};

/// PostgreSQL as TechEmpower's database container serves it (`tfb-database`).
pub const TFB_DATABASE_URL: &str =
    "postgres://benchmarkdbuser:benchmarkdbpass@tfb-database/hello_world";

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

#[derive(serde::Serialize)]
struct Message<'a> {
    message: &'a str,
}

/// `router` with `/json` and `/plaintext`, the tests without a database.
pub fn plain_routes(router: Router) -> Router {
    router
        .get("/json", |_| {
            Response::json(&Message {
                message: "Hello, World!",
            })
        })
        .get("/plaintext", |_| Response::text("Hello, World!"))
}

/// What the database endpoints keep beside the pool: their statements, the random ids'
/// sequence (seeded at start) and the cache `/cached-queries` reads.
pub struct Worlds {
    statements: Statements,
    random: Random,
    cache: WorldCache,
}

impl Worlds {
    /// Fills the cache from the `world` table through `pool`, whose builder registered
    /// `statements` ([`Statements::register`]).
    pub async fn load(pool: &Pool, statements: Statements) -> Result<Worlds, DbError> {
        Ok(Worlds {
            statements,
            random: Random::seeded(),
            cache: WorldCache::load(pool, &statements).await?,
        })
    }
}

/// An application that serves the database endpoints: the pool their queries run on, and
/// the [`Worlds`] read at start. The entry's binary has one of its own; the demo's holds
/// HttpArena's statements and caches as well.
pub trait Database: Send + Sync + 'static {
    /// The pool whose builder registered the [`Worlds`]' statements.
    fn pool(&self) -> &Pool;
    /// What [`Worlds::load`] read at start.
    fn worlds(&self) -> &Worlds;
}

/// `router` with `/db`, `/queries`, `/updates`, `/fortunes` (each query on the pool, their
/// futures run where the pool drives its connections) and `/cached-queries` (answered on the
/// worker, from the cache).
pub fn mount<D: Database>(router: Router, db: Arc<D>) -> Router {
    let spawn = db.pool().spawner();
    let (d_db, d_queries, d_updates, d_fortunes, d_cached) =
        (db.clone(), db.clone(), db.clone(), db.clone(), db);
    router
        .get_async("/db", spawn.clone(), move |_req: OwnedRequest| {
            let db = d_db.clone();
            async move {
                let w = db.worlds();
                let id = w.random.world_id();
                match world::worlds(db.pool(), &w.statements, &[id]).await {
                    Ok(rows) => Response::json(&rows[0]),
                    Err(e) => error_response(e),
                }
            }
        })
        .get_async("/queries", spawn.clone(), move |req: OwnedRequest| {
            let db = d_queries.clone();
            let n = query_count(req.query_param("queries").as_deref());
            async move {
                let w = db.worlds();
                let ids: Vec<i32> = (0..n).map(|_| w.random.world_id()).collect();
                match world::worlds(db.pool(), &w.statements, &ids).await {
                    Ok(rows) => Response::json(&rows),
                    Err(e) => error_response(e),
                }
            }
        })
        .get_async("/updates", spawn.clone(), move |req: OwnedRequest| {
            let db = d_updates.clone();
            let n = query_count(req.query_param("queries").as_deref());
            async move {
                let w = db.worlds();
                let ids = w.random.distinct_ids(n);
                match world::update(db.pool(), &w.statements, &w.random, &ids).await {
                    Ok(rows) => Response::json(&rows),
                    Err(e) => error_response(e),
                }
            }
        })
        .get_async("/fortunes", spawn, move |_req: OwnedRequest| {
            let db = d_fortunes.clone();
            async move {
                world::fortunes(db.pool(), &db.worlds().statements)
                    .await
                    .unwrap_or_else(error_response)
            }
        })
        .get("/cached-queries", move |req| {
            let w = d_cached.worlds();
            let n = query_count(req.query_param("count").as_deref());
            let mut rows = Vec::with_capacity(n);
            for _ in 0..n {
                let id = w.random.world_id();
                match w.cache.get(id) {
                    Some(row) => rows.push(row),
                    None => {
                        tracing::error!(id, "world row not in the cache (not in the table)");
                        return Response::text("world row missing\n").status(500);
                    }
                }
            }
            Response::json(&rows)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password() {
        assert_eq!(
            redact("postgres://u:secret@127.0.0.1:5432/d"),
            "postgres://u@127.0.0.1:5432/d"
        );
        assert_eq!(redact("postgres://127.0.0.1/d"), "postgres://127.0.0.1/d");
    }
}
