//! `async` handlers that use tokio, on the worker's own runtime ([`OnWorker`]): the
//! measurement pair of bench/axum-tokio (the same three handlers in axum) and the example of
//! how a handler reaches tokio's timers and a tokio-based client.
//!
//! - `GET /none`: an `async` handler that awaits nothing (answered in its first poll).
//! - `GET /timer`: awaits a 1 ms tokio timer, then answers.
//! - `GET /fetch`: awaits a reqwest GET of `http://UPSTREAM/plaintext` and answers its body.
//! - `GET /none-hop`: the `/none` handler run on a tokio runtime of its own, a thread beside
//!   the worker (the way an async handler ran before the worker had a runtime).
//! - `GET /sync`: the same answer from a plain handler.
//!
//! ```sh
//! cargo run --release -p linerate-server --example tokio_handlers -- 127.0.0.1:8080 127.0.0.1:8081
//! ```
//!
//! One worker (the lab pins the process). The reqwest client is one per worker thread: its
//! pooled connections' tasks live on the runtime that opened them, so a client shared by all
//! workers would send each request to another worker's thread.
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use linerate_server::{Config, OnWorker, OwnedRequest, Response, Router, Server};

thread_local! {
    /// This worker's HTTP client (see the module doc).
    static CLIENT: reqwest::Client = reqwest::Client::new();
}

fn parse(arg: Option<String>, default: &str) -> io::Result<SocketAddr> {
    let arg = arg.unwrap_or_else(|| default.to_string());
    arg.parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad address {arg:?}: {e}"),
        )
    })
}

fn main() -> io::Result<()> {
    let addr = parse(std::env::args().nth(1), "127.0.0.1:8080")?;
    let upstream = parse(std::env::args().nth(2), "127.0.0.1:8081")?;
    let url = format!("http://{upstream}/plaintext");
    let hop = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let hop_handle = hop.handle().clone();
    let router = Router::new()
        .get("/sync", |_| Response::text("hello"))
        .get_async("/none", OnWorker, |_req: OwnedRequest| async {
            Response::text("hello")
        })
        .get_async(
            "/none-hop",
            move |f| {
                hop_handle.spawn(f);
            },
            |_req: OwnedRequest| async { Response::text("hello") },
        )
        .get_async("/timer", OnWorker, |_req: OwnedRequest| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Response::text("hello")
        })
        .get_async("/fetch", OnWorker, move |_req: OwnedRequest| {
            let sent = CLIENT.with(|c| c.get(&url).send());
            async move {
                match sent.await {
                    Ok(r) => match r.text().await {
                        Ok(body) => Response::text_owned(body),
                        Err(_) => Response::text("upstream body failed\n").status(502),
                    },
                    Err(_) => Response::text("upstream failed\n").status(502),
                }
            }
        });
    let config = Config {
        addr,
        workers: 1,
        ..Config::default()
    };
    let server = Server::bind(config, router).map_err(|e| io::Error::other(e.to_string()))?;
    println!("tokio handlers on http://{}", server.local_addr());
    server.run_until_signal()
}
