//! The entry's server: TechEmpower's seven endpoints on every CPU, one pinned worker each,
//! each worker driving its own database connection.
//!
//!     linerate-techempower [--addr ADDR] [--workers N] [--no-pin]
//!
//! ADDR is 0.0.0.0:8080 by default (TechEmpower's port); the database is `$DATABASE_URL`, or
//! TechEmpower's own where that is unset, and `$DATABASE_MAX_CONN` connections in all (one
//! per worker by default). Answers are never compressed (TechEmpower's tests measure
//! uncompressed ones). Prints one line, `linerate-techempower on http://ADDR`, once it
//! serves; a start that fails is one line on stderr and exit status 1.

use std::sync::Arc;
use std::time::Duration;

use linerate_postgres::{Driver, Pool};
use linerate_server::config::Compression;
use linerate_server::{Config, Server};
use linerate_techempower::{Database, TFB_DATABASE_URL, Worlds, redact, world};

/// How long a worker waits for its database connections before it serves anyway (they are
/// retried per request, with backoff, after that).
const WORKER_DB_START: Duration = Duration::from_secs(5);

const USAGE: &str = "usage: linerate-techempower [--addr ADDR] [--workers N] [--no-pin]";

/// The pool and what the endpoints keep beside it.
struct App {
    pool: Pool,
    worlds: Worlds,
}

impl Database for App {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn worlds(&self) -> &Worlds {
        &self.worlds
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run() {
        eprintln!("linerate-techempower: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut config = Config {
        addr: "0.0.0.0:8080".parse().expect("a valid address"),
        compression: Compression {
            enabled: false,
            ..Compression::default()
        },
        // TechEmpower's load comes from one client machine, 512 connections at its highest
        // concurrency: more than the default per-client limit.
        max_conns_per_client: 0,
        ..Config::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value; {USAGE}"));
        match arg.as_str() {
            "--addr" => {
                let v = value("--addr")?;
                config.addr = v.parse().map_err(|e| format!("--addr {v}: {e}"))?;
            }
            "--workers" => {
                let v = value("--workers")?;
                config.workers = v.parse().map_err(|e| format!("--workers {v}: {e}"))?;
            }
            "--no-pin" => config.pin = false,
            _ => return Err(format!("unknown argument {arg:?}; {USAGE}")),
        }
    }
    let url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| TFB_DATABASE_URL.to_string());
    let connections = match std::env::var("DATABASE_MAX_CONN") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("DATABASE_MAX_CONN must be a whole number (got {v:?})"))?,
        Err(_) => 0, // one per worker
    };
    let fail = |e: &dyn std::fmt::Display| format!("database {}: {e}", redact(&url));

    // The start-up connection reads the cache on this runtime; the workers then each open
    // their own, driven by their own loop.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let mut builder = Pool::builder(&url);
    builder.driver(Driver::Worker).connections(connections);
    let statements = world::Statements::register(&mut builder);
    let pool = builder.connect(runtime.handle()).map_err(|e| fail(&e))?;
    let worlds = runtime
        .block_on(Worlds::load(&pool, statements))
        .map_err(|e| match e {
            world::DbError::Query(e) => fail(&linerate_postgres::describe(&e)),
            e => fail(&e),
        })?;
    pool.close();
    let app = Arc::new(App { pool, worlds });

    let router = linerate_techempower::mount(
        linerate_techempower::plain_routes(linerate_server::Router::new()),
        app.clone(),
    );
    let mut server = Server::bind(config, router).map_err(|e| e.to_string())?;
    if let Some(start) = app.pool.worker_start(server.workers(), WORKER_DB_START) {
        server = server.with_worker_start(start);
    }
    println!("linerate-techempower on http://{}", server.local_addr());
    server.run_until_signal().map_err(|e| e.to_string())
}
