//! The demo's database endpoints (issue H): TechEmpower's `/db`, `/queries`, `/updates`,
//! `/fortunes` and `/cached-queries` ([`world`]) and HttpArena's `/async-db` and `/crud/items`
//! ([`items`]), on PostgreSQL through tokio-postgres.
//!
//! The queries run on a runtime beside the HTTP workers (one thread, "linerate-db"), reached
//! through issue E's `route_async`: a worker hands the request over and goes on serving, so a
//! query never blocks it. [`pool`] owns the connections and their reconnection.
#![forbid(unsafe_code)]

pub mod items;
pub mod pool;
pub mod world;

use std::sync::Arc;

use linerate_server::{BoxFuture, OwnedRequest, Response, Router};

use pool::Pool;
use world::{DbError, Random, WorldCache, query_count};

/// Why the database could not be used at start.
#[derive(Debug)]
pub struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

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

/// The database and what the endpoints keep beside it.
pub struct Db {
    pool: Pool,
    random: Random,
    cache: WorldCache,
    items: items::ItemCache,
}

impl Db {
    /// Opens `connections` connections to `url` on `runtime`, prepares the statements and
    /// reads the `world` cache. A database that is down or refuses is an error here (said at
    /// start); later outages are answered per request and the connections come back.
    pub fn connect(
        url: &str,
        connections: usize,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Db, StartError> {
        let fail = |e: &dyn std::fmt::Display| StartError(format!("database {}: {e}", redact(url)));
        let pool =
            Pool::connect(url, connections, runtime).map_err(|e| fail(&world::describe(&e)))?;
        let cache = runtime
            .block_on(WorldCache::load(&pool))
            .map_err(|e| match e {
                DbError::Unavailable => fail(&"no connection"),
                DbError::Query(e) => fail(&world::describe(&e)),
            })?;
        Ok(Db {
            pool,
            random: Random::new(0x9e37_79b9_7f4a_7c15),
            cache,
            items: items::ItemCache::new(),
        })
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.pool.open_connections()
    }
}

/// `router` with the database endpoints, their futures run on `runtime`.
pub fn mount(router: Router, db: Arc<Db>, runtime: tokio::runtime::Handle) -> Router {
    let spawn = move |f: BoxFuture| {
        runtime.spawn(f);
    };
    let on = |db: &Arc<Db>| db.clone();
    let (d_db, d_queries, d_updates, d_fortunes, d_cached) =
        (on(&db), on(&db), on(&db), on(&db), on(&db));
    let router = router
        .get_async("/db", spawn.clone(), move |_req: OwnedRequest| {
            let db = d_db.clone();
            async move {
                let id = db.random.world_id();
                match world::worlds(&db.pool, &[id]).await {
                    Ok(rows) => Response::json(&rows[0]),
                    Err(e) => e.response(),
                }
            }
        })
        .get_async("/queries", spawn.clone(), move |req: OwnedRequest| {
            let db = d_queries.clone();
            let n = query_count(req.query_param("queries").as_deref());
            async move {
                let ids: Vec<i32> = (0..n).map(|_| db.random.world_id()).collect();
                match world::worlds(&db.pool, &ids).await {
                    Ok(rows) => Response::json(&rows),
                    Err(e) => e.response(),
                }
            }
        })
        .get_async("/updates", spawn.clone(), move |req: OwnedRequest| {
            let db = d_updates.clone();
            let n = query_count(req.query_param("queries").as_deref());
            async move {
                let ids = db.random.distinct_ids(n);
                match world::update(&db.pool, &db.random, &ids).await {
                    Ok(rows) => Response::json(&rows),
                    Err(e) => e.response(),
                }
            }
        })
        .get_async("/fortunes", spawn.clone(), move |_req: OwnedRequest| {
            let db = d_fortunes.clone();
            async move {
                world::fortunes(&db.pool)
                    .await
                    .unwrap_or_else(DbError::response)
            }
        })
        .get("/cached-queries", move |req| {
            let n = query_count(req.query_param("count").as_deref());
            let rows: Vec<world::World> = (0..n)
                .map(|_| d_cached.cache.get(d_cached.random.world_id()))
                .collect();
            Response::json(&rows)
        });
    items::mount(router, db, spawn)
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
