//! tower-http's layers on native routes (`Router::tower_layer`), and what the adapter costs:
//! the same answers with and without a tower layer, for callgrind (`bench/tower_instructions.sh`).
//!
//! - `/plaintext`: a native route under no tower layer;
//! - `/noop/plaintext`: the same under a no-op tower layer (`tower_layer::Identity`: the
//!   adapter alone, both ways);
//! - `/around/plaintext`: the same under a no-op async layer (`Router::around`): the deferred
//!   chain every tower layer runs in, without the adapter;
//! - `/own/page`: a 4 KiB text answer compressed by linerate's own compression (gzip level 1);
//! - `/gz/page`: the same answer under tower-http's `CompressionLayer` at gzip level 1.
//!
//! `cargo run --example tower_layers --features tower -- --port 8080 [--workers N]`

use linerate_server::{Config, Next, OnWorker, Response, Router};
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;

/// About 4 KiB of text: above linerate's smallest compressed body (1 KiB).
fn page() -> String {
    "linerate serves this line under a tower layer, or without one.\n".repeat(64)
}

fn app() -> Router {
    let page: &'static str = page().leak();
    Router::new()
        .get("/plaintext", |_| Response::text("Hello, World!"))
        .get("/own/page", move |_| Response::text(page))
        .group(|g| {
            g.get("/noop/plaintext", |_| Response::text("Hello, World!"))
                .tower_layer(tower_layer::Identity::new())
        })
        .group(|g| {
            g.get("/around/plaintext", |_| Response::text("Hello, World!"))
                .around(|req, next: Next| next.run(req))
        })
        .group(|g| {
            g.get("/gz/page", move |_| Response::text(page))
                .tower_layer(CompressionLayer::new().quality(CompressionLevel::Precise(1)))
        })
        // An async handler, so that the worker's runtime is there as in every service.
        .get_async("/async", OnWorker, |_| async { "async" })
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut port, mut workers) = (8080u16, 1usize);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        match (arg.as_str(), value) {
            ("--port", Some(p)) => port = p as u16,
            ("--workers", Some(n)) if n > 0 => workers = n,
            _ => return Err(std::io::Error::other(format!("bad argument {arg}"))),
        }
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let config = Config {
        addr,
        workers,
        ..Default::default()
    };
    println!("linerate on http://{addr}");
    linerate_server::Server::bind(config, app())?.run_until_signal()
}
