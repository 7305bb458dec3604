//! The "before" side of the async handler cost: how an `async` handler ran on the
//! default (worker) driver before each worker had a tokio runtime — on a futures `LocalPool`
//! the worker ran after every turn through `Server::with_worker_local`, as linerate-postgres's
//! worker driver did (crates/postgres/src/local.rs at 9f8d09f). The same `/none` and `/sync`
//! as crates/server/examples/tokio_handlers.rs. It builds against the server crate as it was:
//!
//!   git worktree add /tmp/before 9f8d09f
//!   cp bench/async_before.rs /tmp/before/crates/server/examples/
//!   (cd /tmp/before && cargo add -p linerate-server --dev futures-executor@0.3 \
//!      && cargo build --release -p linerate-server --example async_before)
//!   cp /tmp/before/target/release/examples/async_before lab-out/async-before
//!
//! It is not built here (the API it uses, a `LocalPool` through `WorkerLocal`, is gone from the
//! worker driver); bench/tokio_handlers.toml runs the binary.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use futures_executor::{LocalPool, LocalSpawner};
use futures_util::task::LocalSpawnExt;
use linerate_server::{BoxFuture, Config, OwnedRequest, Response, Router, Server, WorkerLocal};

thread_local! {
    static SPAWNER: RefCell<Option<LocalSpawner>> = const { RefCell::new(None) };
}

/// The worker's executor, run after every turn (its fd is never readable: spawned futures
/// run at the end of the turn that spawned them, as the postgres worker driver's did).
struct Local {
    pool: LocalPool,
    quiet: UnixStream,
    _other: UnixStream,
}

impl WorkerLocal for Local {
    fn fd(&self) -> BorrowedFd<'_> {
        self.quiet.as_fd()
    }
    fn run(&mut self, _fd_ready: bool) {
        self.pool.run_until_stalled();
    }
}

fn main() -> io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".into());
    let spawn = |f: BoxFuture| {
        SPAWNER.with(|s| {
            if let Some(s) = s.borrow().as_ref() {
                let _ = s.spawn_local(f);
            }
        });
    };
    let router = Router::new()
        .get("/sync", |_| Response::text("hello"))
        .get_async("/none", spawn, |_req: OwnedRequest| async {
            Response::text("hello")
        });
    let config = Config {
        addr: addr.parse().map_err(|e| io::Error::other(format!("{e}")))?,
        workers: 1,
        ..Config::default()
    };
    let server = Server::bind(config, router)
        .map_err(|e| io::Error::other(e.to_string()))?
        .with_worker_local(Arc::new(|_| {
            let pool = LocalPool::new();
            SPAWNER.with(|s| *s.borrow_mut() = Some(pool.spawner()));
            let (quiet, other) = UnixStream::pair()?;
            Ok(Box::new(Local {
                pool,
                quiet,
                _other: other,
            }) as Box<dyn WorkerLocal>)
        }));
    println!("before on http://{}", server.local_addr());
    server.run_until_signal()
}
