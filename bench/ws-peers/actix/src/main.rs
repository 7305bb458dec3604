//! WebSocket echo on `GET /ws`: actix-web 4 + actix-ws, one worker.
//!
//! Usage: ws-echo 127.0.0.1:PORT

use actix_web::{rt, web, App, HttpRequest, HttpResponse, HttpServer};
use actix_ws::AggregatedMessage;

async fn ws(req: HttpRequest, body: web::Payload) -> actix_web::Result<HttpResponse> {
    let (response, mut session, stream) = actix_ws::handle(&req, body)?;

    // Frames up to 64 KiB (the default) are accepted; fragmented messages are
    // reassembled up to 1 MiB (the default) so whole messages are echoed.
    let mut stream = stream.aggregate_continuations();

    rt::spawn(async move {
        while let Some(Ok(msg)) = stream.recv().await {
            let sent = match msg {
                AggregatedMessage::Text(text) => session.text(text).await,
                AggregatedMessage::Binary(bin) => session.binary(bin).await,
                // actix-ws does not answer pings by itself.
                AggregatedMessage::Ping(bytes) => session.pong(&bytes).await,
                AggregatedMessage::Pong(_) => Ok(()),
                AggregatedMessage::Close(reason) => {
                    let _ = session.close(reason).await;
                    return;
                }
            };
            if sent.is_err() {
                return;
            }
        }
        let _ = session.close(None).await;
    });

    Ok(response)
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .expect("usage: ws-echo 127.0.0.1:PORT");

    HttpServer::new(|| App::new().route("/ws", web::get().to(ws)))
        .workers(1)
        // actix-web leaves TCP_NODELAY at the OS default (Nagle on) unless
        // asked; Go, Node and the tungstenite peer all run with it on.
        .tcp_nodelay(true)
        .bind(addr)?
        .run()
        .await
}
