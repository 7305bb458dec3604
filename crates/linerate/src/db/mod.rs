//! The demo's database endpoints (issue H): TechEmpower's `/db`, `/queries`, `/updates`,
//! `/fortunes` and `/cached-queries` ([`world`]) and HttpArena's `/async-db` and `/crud/items`
//! ([`items`]), on PostgreSQL through tokio-postgres.
//!
//! Either driver ([`pool::Driver`]) plugs in through issue E's `route_async`: a worker hands
//! the request's future over and goes on serving, so a query never blocks it. With `runtime`
//! the futures run on a runtime beside the HTTP workers (one thread, "linerate-db"); with
//! `worker` on the worker's own thread, its connections driven by its event loop
//! ([`local`]). [`pool`] owns the connections and their reconnection.
#![forbid(unsafe_code)]

pub mod items;
pub mod local;
pub mod pool;
pub mod world;

use std::sync::Arc;

use linerate_server::{BoxFuture, OwnedRequest, Response, Router};

use pool::{Driver, Pool};
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
    /// Opens the connections to `url` (`connections` of them in all: with the `worker` driver
    /// shared out among the workers, which open theirs when they start, 0 meaning one each),
    /// prepares
    /// the statements and reads the `world` cache, on `runtime`. A database that is down or
    /// refuses is an error here (said at start); later outages are answered per request and
    /// the connections come back.
    pub fn connect(
        url: &str,
        connections: usize,
        driver: Driver,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Db, StartError> {
        let fail = |e: &dyn std::fmt::Display| StartError(format!("database {}: {e}", redact(url)));
        let start_conns = if driver == Driver::Runtime {
            connections.max(1)
        } else {
            1
        };
        let pool =
            Pool::connect(url, start_conns, runtime).map_err(|e| fail(&world::describe(&e)))?;
        let cache = runtime
            .block_on(WorldCache::load(&pool))
            .map_err(|e| match e {
                DbError::Unavailable => fail(&"no connection"),
                DbError::Query(e) => fail(&world::describe(&e)),
            })?;
        let pool = match driver {
            Driver::Runtime => pool,
            Driver::Worker => {
                pool.close();
                Pool::per_worker(url, connections).map_err(|e| fail(&e))?
            }
        };
        Ok(Db {
            pool,
            random: Random::new(0x9e37_79b9_7f4a_7c15),
            cache,
            items: items::ItemCache::new(),
        })
    }

    /// For the banner: the driver and the connections, with `workers` workers.
    pub fn describe(&self, workers: usize) -> String {
        match self.pool.driver() {
            Driver::Runtime => format!(
                "{} connections on the database thread (--database-driver runtime)",
                self.pool.connections()
            ),
            Driver::Worker => format!(
                "{} connection(s) per worker, driven by the worker's own loop",
                share(self.pool.connections(), workers)
            ),
        }
    }

    /// The worker driver's per-worker set-up, for `Server::with_worker_local` (`None` with the
    /// runtime driver): each of the `workers` installs its reactor and opens its share of the
    /// connections (an equal share, at least one) before it serves, waiting at most `limit`
    /// for them.
    pub fn worker_local(
        db: &Arc<Db>,
        workers: usize,
        limit: std::time::Duration,
    ) -> Option<linerate_server::WorkerLocalFactory> {
        if db.pool.driver() != Driver::Worker {
            return None;
        }
        let db = db.clone();
        let share = share(db.pool.connections(), workers);
        Some(Arc::new(move |_worker| {
            let mut local = local::Local::install()?;
            db.pool.open_worker_set(&mut local, share, limit);
            Ok(Box::new(local) as Box<dyn linerate_server::WorkerLocal>)
        }))
    }
}

/// Each worker's connections: an equal share of `total` (0: one), at least one.
fn share(total: usize, workers: usize) -> usize {
    match total {
        0 => 1,
        n => (n / workers.max(1)).max(1),
    }
}

/// `router` with the database endpoints, their futures run on `runtime`.
pub fn mount(router: Router, db: Arc<Db>, runtime: tokio::runtime::Handle) -> Router {
    let driver = db.pool.driver();
    let spawn = move |f: BoxFuture| match driver {
        Driver::Runtime => {
            runtime.spawn(f);
        }
        Driver::Worker => {
            if !local::spawn(f) {
                tracing::error!("no worker-local executor on this thread");
            }
        }
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

    #[test]
    fn redact_hides_the_password() {
        assert_eq!(
            redact("postgres://u:secret@127.0.0.1:5432/d"),
            "postgres://u@127.0.0.1:5432/d"
        );
        assert_eq!(redact("postgres://127.0.0.1/d"), "postgres://127.0.0.1/d");
    }
}
