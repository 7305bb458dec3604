//! WebSocket connections served by tasks on a tokio runtime (the async variant,
//! `websocket::stream`), on ONE worker:
//!
//! - `/chat`: a chat room. Each text message goes to every member, as `NAME: TEXT`
//!   (`NAME` from the query, `?name=ada`, cut to 32 bytes; "anon" without one), through a `Broadcast` that
//!   encodes it once. A member whose client stops reading misses messages rather than
//!   holding the room back.
//! - `/echo`: each message back as it came, from the task (docs/benchmarks.md compares its
//!   cost with the demo's `/ws`, echoed on the worker).
//!
//! ```sh
//! cargo run --release -p linerate-server --example ws_chat -- 127.0.0.1:8080
//! ```
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use linerate_server::websocket::{self, Broadcast, Encoded, OwnedMessage, WsStream};
use linerate_server::{Config, Response, Router, Server};

/// Longest name taken from `?name=` (in bytes, cut at a character boundary).
const MAX_NAME_BYTES: usize = 32;

async fn echo(mut ws: WsStream) {
    while let Some(msg) = ws.recv().await {
        if ws.send(msg.as_message()).await.is_err() {
            break;
        }
    }
}

async fn chat(mut ws: WsStream, name: String, room: Arc<Broadcast>) {
    let Ok(me) = ws.sender().await else {
        return;
    };
    room.join(me);
    room.send(&Encoded::text(&format!("* {name} joined")));
    while let Some(msg) = ws.recv().await {
        match msg {
            OwnedMessage::Text(text) => {
                room.send(&Encoded::text(&format!("{name}: {text}")));
            }
            OwnedMessage::Binary(_) => {
                // The room speaks text; the sender alone hears so.
                let _ = ws.text("binary messages are not passed on").await;
            }
        }
    }
    // The member leaves the set on the next send (its sender is gone).
    room.send(&Encoded::text(&format!("* {name} left")));
}

fn name_of(query: Option<&str>) -> String {
    let raw = query.filter(|n| !n.is_empty()).unwrap_or("anon");
    let mut end = raw.len().min(MAX_NAME_BYTES);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    raw[..end].to_owned()
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()?;
    let (for_chat, for_echo) = (runtime.handle().clone(), runtime.handle().clone());
    let room = Arc::new(Broadcast::new());

    let router = Router::new()
        .get("/", |_| {
            Response::text("WebSocket on /chat?name=NAME and /echo\n")
        })
        .ws("/chat", move |req, _| {
            let name = name_of(req.query_param("name").as_deref());
            let (handler, ws) = websocket::stream();
            for_chat.spawn(chat(ws, name, room.clone()));
            Ok(handler)
        })
        .ws("/echo", move |_, _| {
            let (handler, ws) = websocket::stream();
            for_echo.spawn(echo(ws));
            Ok(handler)
        });
    let config = Config {
        addr,
        workers: 1,
        pin: false,
        ..Config::default()
    };
    let server = Server::bind(config, router)?;
    println!(
        "ws_chat example on http://{} (1 worker): /chat?name=NAME, /echo",
        server.local_addr()
    );
    server.run_until_signal()
}
