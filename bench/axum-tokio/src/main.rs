//! crates/server/examples/tokio_handlers.rs in axum, as axum's examples write handlers: the
//! same `/none`, `/timer` and `/fetch` (a reqwest GET of `http://UPSTREAM/plaintext`) and
//! `/sync` (axum has only async handlers: the same as `/none`), served by `axum::serve` on a
//! current-thread tokio runtime (one thread; the lab pins the process to one CPU).
//!
//!   axum-tokio ADDR UPSTREAM

use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

async fn hello() -> &'static str {
    "hello"
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let upstream = args.next().unwrap_or_else(|| "127.0.0.1:8081".into());
    let url = format!("http://{upstream}/plaintext");
    let client = reqwest::Client::new();
    let app = Router::new()
        .route("/sync", get(hello))
        .route("/none", get(hello))
        .route(
            "/timer",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                "hello"
            }),
        )
        .route(
            "/fetch",
            get(move || {
                let sent = client.get(&url).send();
                async move {
                    match sent.await {
                        Ok(r) => match r.text().await {
                            Ok(body) => Ok(body),
                            Err(_) => Err(StatusCode::BAD_GATEWAY),
                        },
                        Err(_) => Err(StatusCode::BAD_GATEWAY),
                    }
                }
            }),
        );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let listener = tokio::net::TcpListener::bind(&addr).await?;
            println!("axum on http://{}", listener.local_addr()?);
            axum::serve(listener, app).await
        })
}
