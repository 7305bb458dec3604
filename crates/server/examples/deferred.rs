//! Handlers that wait, served by ONE worker.
//!
//! - `GET /slow?ms=N` (1 ≤ N ≤ 10000): an `async` handler on a tokio runtime awaits a timer
//!   and answers after N ms, from the runtime's thread.
//! - `GET /fast`: answered at once (`fast`) — and still at once while hundreds of `/slow`
//!   requests are outstanding on the same worker.
//! - `GET /json`: `{"message":"Hello, World!"}` answered through a `Responder` from a second
//!   thread (the deferred path whose cost docs/benchmarks.md gives); `GET /json-direct` is the
//!   same answer from a plain handler.
//!
//! ```sh
//! cargo run --release -p linerate-server --example deferred -- 127.0.0.1:8080 [MAX_DEFERRED_PER_CONN]
//! ```
//!
//! The optional second argument sets `Config::max_deferred_per_conn` (default 16): how many
//! pipelined deferred requests of one connection are dispatched before their answers are in
//! (1 makes requests behind a deferred one wait for it); docs/benchmarks.md compares the two.
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use linerate_server::{Config, Method, Responder, Response, Router, Server};
use serde::Serialize;

/// Longest `/slow` wait accepted, in milliseconds.
const MAX_SLOW_MS: u64 = 10_000;

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

fn main() -> io::Result<()> {
    let arg = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let addr: SocketAddr = arg.parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad address {arg:?}: {e}"),
        )
    })?;
    let per_conn = match std::env::args().nth(2) {
        None => linerate_server::config::MAX_DEFERRED_PER_CONN,
        Some(n) => n.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad MAX_DEFERRED_PER_CONN {n:?} (an integer, at least 1)"),
            )
        })?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()?;
    let handle = runtime.handle().clone();

    // The second thread of `/json`: it answers every Responder it is sent.
    let (to_json, responders) = mpsc::channel::<Responder>();
    std::thread::Builder::new()
        .name("json-answers".into())
        .spawn(move || {
            for res in responders {
                res.send(Response::json(&Message {
                    message: "Hello, World!",
                }));
            }
        })?;

    let router = Router::new()
        .get("/fast", |_| Response::text("fast"))
        .get_async(
            "/slow",
            move |f| {
                handle.spawn(f);
            },
            |req| async move {
                let Some(ms) = req
                    .query_param("ms")
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|ms| (1..=MAX_SLOW_MS).contains(ms))
                else {
                    return Response::text("ms must be an integer from 1 to 10000\n").status(400);
                };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Response::text_owned(format!("slow {ms}\n"))
            },
        )
        .deferred(Method::Get, "/json", move |_req, res| {
            // A closed channel drops the Responder: the client gets a 500, never a hang.
            let _ = to_json.send(res);
        })
        .get("/json-direct", |_| {
            Response::json(&Message {
                message: "Hello, World!",
            })
        });
    let config = Config {
        addr,
        workers: 1,
        pin: false,
        max_deferred_per_conn: per_conn,
        ..Config::default()
    };
    let server = Server::bind(config, router)?;
    println!(
        "deferred example on http://{} (1 worker): /fast, /slow?ms=N, /json, /json-direct",
        server.local_addr()
    );
    server.run_until_signal()
}
