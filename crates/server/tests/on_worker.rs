//! `async` handlers on the worker's own tokio runtime ([`OnWorker`]): tokio's timers,
//! `tokio::net`, `tokio::spawn` and reqwest work inside them, on the worker's thread (no hop),
//! on a real server and in the [`TestClient`]; and a worker that waits on its runtime still
//! serves its other connections meanwhile.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use linerate_server::testing::{TestClient, TestServer};
use linerate_server::{OnWorker, OwnedRequest, PerWorker, Response, Router};

/// Longest a read from the server may wait (a bound on a hang).
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The name of the thread a handler runs on, as the body's last word.
fn thread_name() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

fn router() -> Router {
    Router::new()
        .get("/hello", |_| Response::text("hello"))
        .get_async("/now", OnWorker, |_req: OwnedRequest| async move {
            Response::text_owned(format!("now on {}", thread_name()))
        })
        .get_async("/sleep/{ms}", OnWorker, |req: OwnedRequest| {
            let ms: u64 = req.param("ms").and_then(|v| v.parse().ok()).unwrap_or(1);
            async move {
                let before = thread_name();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Response::text_owned(format!("slept {ms} on {before} and {}", thread_name()))
            }
        })
        // A background task of the handler's, and a channel back from it.
        .get_async("/spawned", OnWorker, |_req: OwnedRequest| async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let _ = tx.send(thread_name());
            });
            let there = rx.await.unwrap_or_default();
            Response::text_owned(format!("task on {there}"))
        })
        // Over the network with tokio::net, to the address in the query (this same server).
        .get_async("/fetch", OnWorker, |req: OwnedRequest| {
            let addr = req.query_param("addr").unwrap_or_default();
            async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(&addr)
                    .await
                    .expect("connect");
                s.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    .await
                    .unwrap();
                let mut got = Vec::new();
                s.read_to_end(&mut got).await.unwrap();
                let text = String::from_utf8_lossy(&got).to_string();
                let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
                Response::text_owned(format!("fetched {body} on {}", thread_name()))
            }
        })
        // reqwest, the common tokio-based HTTP client, to this same server.
        .get_async("/reqwest", OnWorker, |req: OwnedRequest| {
            let url = format!(
                "http://{}/hello",
                req.query_param("addr").unwrap_or_default()
            );
            async move {
                let body = match reqwest::get(&url).await {
                    Ok(r) => r.text().await.unwrap_or_else(|e| format!("body: {e}")),
                    Err(e) => format!("error: {e}"),
                };
                Response::text_owned(format!("reqwest {body} on {}", thread_name()))
            }
        })
}

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the whole answer within the read timeout");
    let text = String::from_utf8(got).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    text.split("\r\n\r\n").nth(1).unwrap().to_string()
}

#[test]
fn tokio_timers_tasks_sockets_and_reqwest_work_inside_handlers_on_the_worker() {
    let server = TestServer::start(router()).expect("start");
    let addr = server.addr();
    assert_eq!(get(addr, "/now"), "now on linerate-w0");
    assert_eq!(
        get(addr, "/sleep/20"),
        "slept 20 on linerate-w0 and linerate-w0"
    );
    assert_eq!(get(addr, "/spawned"), "task on linerate-w0");
    // The one worker answers /hello while its own handler waits for that answer: it serves
    // its connections while parked in its runtime.
    assert_eq!(
        get(addr, &format!("/fetch?addr={addr}")),
        "fetched hello on linerate-w0"
    );
    assert_eq!(
        get(addr, &format!("/reqwest?addr={addr}")),
        "reqwest hello on linerate-w0"
    );
    // With no task left, the worker waits in its own loop again and still answers.
    assert_eq!(get(addr, "/hello"), "hello");
    server.stop().unwrap();
}

#[test]
fn many_waiting_handlers_on_one_worker_all_answer_and_others_are_served_meanwhile() {
    let server = TestServer::start(router()).expect("start");
    let addr = server.addr();
    let waiting: Vec<TcpStream> = (0..64)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            let ms = 50 + i % 7;
            write!(
                s,
                "GET /sleep/{ms} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            s
        })
        .collect();
    // Sync and inline answers go out while the 64 wait.
    assert_eq!(get(addr, "/hello"), "hello");
    assert_eq!(get(addr, "/now"), "now on linerate-w0");
    for (i, mut s) in waiting.into_iter().enumerate() {
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        let ms = 50 + i % 7;
        assert!(
            got.ends_with(&format!("slept {ms} on linerate-w0 and linerate-w0")),
            "{got}"
        );
    }
    server.stop().unwrap();
}

#[test]
fn the_test_client_runs_worker_futures_with_tokio() {
    let client = TestClient::new(router());
    let here = thread_name();
    assert_eq!(client.get("/now").send().text(), format!("now on {here}"));
    assert_eq!(
        client.get("/sleep/5").send().text(),
        format!("slept 5 on {here} and {here}")
    );
    assert_eq!(
        client.get("/spawned").send().text(),
        format!("task on {here}")
    );
    assert_eq!(
        client.get("/sleep/1").http2().send().text(),
        format!("slept 1 on {here} and {here}")
    );
}

/// A router whose `/up` fetches `url` with `client`'s pooled reqwest client (keep-alive: its
/// connection stays in the pool for the next request).
fn pooled(client: &PerWorker<reqwest::Client>, url: &str) -> Router {
    let (client, url) = (client.clone(), url.to_string());
    Router::new().get_async("/up", OnWorker, move |_req: OwnedRequest| {
        let (client, url) = (client.get(), url.clone());
        async move {
            let body = match client.get(&url).send().await {
                Ok(r) => r.text().await.unwrap_or_else(|e| format!("body: {e}")),
                Err(e) => format!("error: {e:?}"),
            };
            Response::text_owned(body)
        }
    })
}

/// The README kept a pooled client in a `thread_local!`; its connection stayed
/// tied to the runtime of the first `TestClient` that used it, which runs only while that
/// client is asked (and is gone with it), so a second `TestClient` on the same thread failed.
/// A `PerWorker` client is made once per worker runtime: each `TestClient` (and each worker)
/// has its own, and every one answers, in turn, side by side or after another is dropped.
#[test]
fn a_per_worker_client_serves_a_second_test_client_on_the_same_thread() {
    let upstream = TestServer::start(router()).expect("start");
    let url = format!("http://{}/hello", upstream.addr());
    // A bound on a hang: a request to a connection nobody drives never ends on its own.
    let client = PerWorker::new(|| {
        reqwest::Client::builder()
            .timeout(READ_TIMEOUT)
            .build()
            .expect("a client")
    });
    let ask = |c: &TestClient, which: &str| {
        assert_eq!(c.get("/up").send().text(), "hello", "{which}");
    };
    let first = TestClient::new(pooled(&client, &url));
    ask(&first, "first");
    let second = TestClient::new(pooled(&client, &url));
    ask(&second, "second, the first still there");
    ask(&first, "first again");
    ask(&second, "second again");
    drop((first, second));
    let third = TestClient::new(pooled(&client, &url));
    ask(&third, "third, after the others were dropped");
    drop(third);
    // On a real server's worker too.
    let server = TestServer::start(pooled(&client, &url)).expect("start");
    for _ in 0..2 {
        assert_eq!(get(server.addr(), "/up"), "hello");
    }
    server.stop().unwrap();
    upstream.stop().unwrap();
}
