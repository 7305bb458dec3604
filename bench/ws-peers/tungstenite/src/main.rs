//! WebSocket echo on `GET /ws`: tokio current_thread runtime + tokio-tungstenite.
//!
//! Usage: ws-echo 127.0.0.1:PORT

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::{
    handshake::server::{ErrorResponse, Request, Response},
    http::StatusCode,
};

// Handshake callback: upgrade only `/ws`; anything else gets a 404.
#[allow(clippy::result_large_err)] // the error type is fixed by tungstenite's Callback
fn only_ws_path(req: &Request, resp: Response) -> Result<Response, ErrorResponse> {
    if req.uri().path() == "/ws" {
        Ok(resp)
    } else {
        let mut not_found = ErrorResponse::new(None);
        *not_found.status_mut() = StatusCode::NOT_FOUND;
        Err(not_found)
    }
}

async fn serve(stream: TcpStream) {
    // Default config: no permessage-deflate, frames up to 16 MiB, messages up to 64 MiB.
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, only_ws_path).await else {
        return;
    };
    // tungstenite queues the pong for a ping and the reply to a close by itself.
    while let Some(Ok(msg)) = ws.next().await {
        if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
            return;
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .expect("usage: ws-echo 127.0.0.1:PORT");
    let listener = TcpListener::bind(addr).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve(stream));
    }
}
