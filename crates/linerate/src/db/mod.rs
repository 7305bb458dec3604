//! The demo's database endpoints: TechEmpower's `/db`, `/queries`, `/updates`,
//! `/fortunes` and `/cached-queries` (the TechEmpower entry's library, `linerate-techempower`,
//! whose [`world`] module is re-exported here), HttpArena's `/async-db` and `/crud/items`
//! ([`items`]) and its production-stack app endpoints `/api/items/{id}` and `/api/me`
//! ([`stack`]), on PostgreSQL through tokio-postgres. HttpArena's tables are asked for once
//! at start ([`tables`]): against TechEmpower's own database (`world` and `fortune` only) the
//! routes of the tables it lacks answer 503 and the rest serve.
//!
//! The connections are the `linerate-postgres` crate's, used as any application would: the
//! demo registers its statements ([`world::Statements`], [`items::Statements`]) and picks a
//! driver ([`Driver`]); the futures plug in through the router's `route_async`, so a query never
//! blocks a worker. With `runtime` they run on a runtime beside the HTTP workers (one thread,
//! "linerate-db"); with `worker` on the worker's own thread, its connections driven by its
//! event loop.
#![forbid(unsafe_code)]

mod item_json;
pub mod items;
pub mod stack;
pub mod tables;
pub use linerate_techempower::world;

use std::sync::Arc;

use linerate_postgres::{ConnectError, Pool};
use linerate_server::Router;

pub use linerate_postgres::Driver;
use linerate_techempower::Worlds;
pub use linerate_techempower::redact;
use world::DbError;

/// Why the database could not be used at start.
#[derive(Debug)]
pub struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// The database and what the endpoints keep beside it.
pub struct Db {
    pool: Pool,
    /// TechEmpower's statements, random ids and `/cached-queries`' cache.
    worlds: Worlds,
    /// `None`: the database has no `items` table (its routes answer 503).
    items_st: Option<items::Statements>,
    /// `None`: the database has no `users` table (`/api/me` answers 503).
    stack_st: Option<stack::Statements>,
    items: linerate_server::kv::Cache,
    /// `/api/items/{id}` and `/api/me`'s cache.
    stack: linerate_server::kv::Cache,
}

impl Db {
    /// Opens the connections to `url` (`connections` of them in all: with the `worker` driver
    /// shared out among the workers, which open theirs when they start, 0 meaning one each),
    /// prepares
    /// the statements and reads the `world` cache, on `runtime`. A database that is down or
    /// refuses is an error here (said at start); later outages are answered per request and
    /// the connections come back. HttpArena's tables are asked for first: the statements of
    /// one the database lacks are not registered, and the log says once which routes answer
    /// 503 for it. `cache_tier`: the shared tier behind the memory caches of
    /// `/crud/items` and `/api/*` (`serve --cache-tier`); it connects on first use, and one that is down is a miss.
    pub fn connect(
        url: &str,
        connections: usize,
        driver: Driver,
        runtime: &tokio::runtime::Handle,
        cache_tier: Option<linerate_server::kv::TierConfig>,
    ) -> Result<Db, StartError> {
        let fail = |e: &dyn std::fmt::Display| StartError(format!("database {}: {e}", redact(url)));
        let have = tables::ask(url, runtime).map_err(|e| fail(&e))?;
        let mut builder = Pool::builder(url);
        builder.driver(driver).connections(connections);
        let world_st = world::Statements::register(&mut builder);
        let items_st = have
            .items
            .then(|| items::Statements::register(&mut builder));
        let stack_st = have
            .users
            .then(|| stack::Statements::register(&mut builder));
        for (table, there, routes) in [
            (
                "items",
                have.items,
                "/async-db, /crud/items and /api/items/{id}",
            ),
            ("users", have.users, "/api/me"),
        ] {
            if !there {
                tracing::warn!(
                    "database {}: no table \"{table}\": {routes} answer 503 (the other \
                     endpoints serve)",
                    redact(url)
                );
            }
        }
        let pool = builder.connect(runtime).map_err(|e| match e {
            ConnectError::UnixSocket => fail(&format_args!(
                "{e}; for a Unix socket use --database-driver runtime"
            )),
            e => fail(&e),
        })?;
        let worlds = runtime
            .block_on(Worlds::load(&pool, world_st))
            .map_err(|e| match e {
                DbError::Unavailable => fail(&"no connection"),
                DbError::Busy => fail(&"no session free"),
                e @ DbError::BadName { .. } => fail(&e),
                DbError::Query(e) => fail(&linerate_postgres::describe(&e)),
            })?;
        if driver == Driver::Worker {
            // The start-up connection has read the cache; each worker opens its own.
            pool.close();
        }
        Ok(Db {
            pool,
            worlds,
            items_st,
            stack_st,
            items: items::item_cache(cache_tier.clone())
                .map_err(|e| StartError(format!("cannot start the cache tier: {e}")))?,
            stack: stack::stack_cache(cache_tier)
                .map_err(|e| StartError(format!("cannot start the cache tier: {e}")))?,
        })
    }

    /// For the banner: the driver and the connections, with `workers` workers.
    pub fn describe(&self, workers: usize) -> String {
        let conns = match self.pool.driver() {
            Driver::Runtime => format!(
                "{} connections on the database thread (--database-driver runtime)",
                self.pool.connections()
            ),
            Driver::Worker => format!(
                "{} connection(s) per worker, driven by the worker's own loop",
                self.pool.per_worker(workers)
            ),
        };
        match self.items.tier() {
            Some(tier) => format!(
                "{conns}; /crud/items cached in memory and {} (so are /api/*)",
                tier.endpoint()
            ),
            None => conns,
        }
    }

    /// Drops item `id`'s cached copies, under `/crud/items` and `/api/items` alike, after a
    /// write through either (the next read of both is a MISS with the new row).
    async fn invalidate_item(&self, id: i32) {
        self.items.invalidate(&id.to_string()).await;
        self.stack.invalidate(&stack::item_key(id)).await;
    }

    /// The worker driver's per-worker set-up, for `Server::with_worker_start` (`None` with
    /// the runtime driver): each of the `workers` opens its share of the connections (an
    /// equal share, at least one) on its runtime before it serves, waiting at most `limit`
    /// for them.
    pub fn worker_start(
        db: &Arc<Db>,
        workers: usize,
        limit: std::time::Duration,
    ) -> Option<linerate_server::WorkerStart> {
        db.pool.worker_start(workers, limit)
    }
}

impl linerate_techempower::Database for Db {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn worlds(&self) -> &Worlds {
        &self.worlds
    }
}

/// `router` with the database endpoints, their futures run where the pool's connections are
/// driven: TechEmpower's (the entry's library), then HttpArena's.
pub fn mount(router: Router, db: Arc<Db>) -> Router {
    let spawn = db.pool.spawner();
    let router = linerate_techempower::mount(router, db.clone());
    let router = items::mount(router, db.clone(), spawn.clone());
    stack::mount(router, db, spawn)
}
