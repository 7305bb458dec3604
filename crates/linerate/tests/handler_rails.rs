//! The library's safety rails for handlers, over raw sockets against one worker: an answer
//! that would switch protocols without the API for it (101, or `Upgrade` set) is a 500 that
//! closes, from every kind of handler; a panicking `async` handler is a 500 like a sync one;
//! a body over the dynamic-compression limit goes out as it is while the worker goes on
//! serving others; and every method shortcut routes its method.

mod common;

use std::sync::OnceLock;

use common::{Client, config, start};
use linerate_server::config::COMPRESS_MAX_BYTES;
use linerate_server::{Body, Method, Response, Router};

/// The compression stall case (compressing it whole would hold the worker for seconds): a
/// 256 MB compressible answer.
const HUGE_BYTES: usize = 256 * 1024 * 1024;

/// The huge body, made once for the whole test binary.
fn huge() -> &'static [u8] {
    static HUGE: OnceLock<Vec<u8>> = OnceLock::new();
    HUGE.get_or_init(|| {
        br#"{"id":1,"name":"item","tags":["a","b"]},"#
            .iter()
            .copied()
            .cycle()
            .take(HUGE_BYTES)
            .collect()
    })
}

/// A current-thread tokio runtime on its own thread, for the async routes.
fn runtime() -> tokio::runtime::Handle {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let handle = rt.handle().clone();
    std::thread::spawn(move || rt.block_on(std::future::pending::<()>()));
    handle
}

fn router() -> Router {
    let rt = runtime();
    let spawn = move |f| {
        rt.spawn(f);
    };
    Router::new()
        .get("/health", |_| Response::text("ok"))
        .get("/switch", |_| {
            Response::new(101).header("Upgrade", "websocket")
        })
        .get("/early-hints", |_| Response::new(103))
        .get("/upgrade-field", |_| {
            Response::text("hi").header("Upgrade", "websocket")
        })
        .get("/upgrade-required", |_| {
            Response::text("use websocket")
                .status(426)
                .header("Upgrade", "websocket")
        })
        .deferred(Method::Get, "/deferred-switch", |_, res| {
            res.send(Response::new(101).header("Upgrade", "websocket"))
        })
        .get_async("/async-switch", spawn.clone(), |_| async {
            Response::new(101).header("Upgrade", "websocket")
        })
        .get_async("/async-panic", spawn.clone(), |_| async {
            if std::hint::black_box(true) {
                panic!("an async handler fails");
            }
            Response::text("never")
        })
        .get_async("/async-ok", spawn.clone(), |_| async {
            Response::text("async")
        })
        .get("/huge", |_| {
            Response::new(200)
                .content_type("application/json")
                .body(Body::Static(huge()))
        })
        .get("/at-most", |_| {
            Response::new(200)
                .content_type("application/json")
                .body(Body::Static(&huge()[..COMPRESS_MAX_BYTES]))
        })
        .put("/m", |_| Response::text("put"))
        .delete("/m", |_| Response::text("delete"))
        .patch("/m", |_| Response::text("patch"))
        .options("/m", |_| Response::new(204).header("Allow", "PUT, DELETE"))
        .head("/m", |_| Response::new(200).header("X-Head", "own"))
        .post_async("/m", spawn.clone(), |_| async { Response::text("post") })
        .put_async("/a", spawn.clone(), |_| async { Response::text("put") })
        .delete_async("/a", spawn.clone(), |_| async { Response::text("delete") })
        .patch_async("/a", spawn.clone(), |_| async { Response::text("patch") })
        .options_async("/a", spawn.clone(), |_| async {
            Response::new(204).header("X-Options", "own")
        })
        .head_async("/a", spawn, |_| async {
            Response::new(200).header("X-Head", "own")
        })
}

#[test]
fn an_answer_that_would_switch_protocols_is_500_and_close() {
    let s = start(config(), router());
    // (path, status sent)
    let rows: &[(&str, u16)] = &[
        ("/switch", 500),
        ("/early-hints", 500),
        ("/upgrade-field", 500),
        ("/deferred-switch", 500),
        ("/async-switch", 500),
        // RFC 9110 §15.5.22: a 426 names its protocols in Upgrade.
        ("/upgrade-required", 426),
    ];
    for &(path, status) in rows {
        let mut c = Client::connect(s.addr);
        // A WebSocket frame right behind the request: it must never be read as a request.
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        )
        .into_bytes();
        request.extend_from_slice(b"\x81\x85abcd");
        c.send(&request);
        let r = c.read_response();
        assert_eq!(r.status, status, "{path}");
        if status == 500 {
            assert_eq!(r.header("connection"), Some("close"), "{path}");
            assert_eq!(r.header("upgrade"), None, "{path}");
            c.expect_eof();
        } else {
            assert_eq!(r.header("upgrade"), Some("websocket"), "{path}");
        }
    }
    s.stop();
}

#[test]
fn a_panicking_async_handler_is_500_and_the_worker_goes_on() {
    let s = start(config(), router());
    let mut c = Client::connect(s.addr);
    let r = c.get("/async-panic");
    assert_eq!(r.status, 500);
    assert_eq!(r.header("connection"), Some("close"));
    c.expect_eof();
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/async-ok").text(), "async");
    assert_eq!(c.get("/health").text(), "ok");
    s.stop();
}

#[test]
fn a_body_over_the_compression_limit_goes_out_as_it_is_while_others_are_served() {
    let s = start(config(), router());
    // At the limit: compressed.
    let mut c = Client::connect(s.addr);
    c.send(b"GET /at-most HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(common::gunzip(&r.body), &huge()[..COMPRESS_MAX_BYTES]);

    // 256 MB: its head comes with the identity length, and while its body is still on the
    // way (this client reads nothing more), another client is answered by the same worker.
    let mut big = Client::connect(s.addr);
    big.send(b"GET /huge HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip, br\r\n\r\n");
    let head = big.read_response_opt(true).expect("the huge answer's head");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-encoding"), None);
    assert_eq!(
        head.header("vary"),
        None,
        "an answer never compressed never varies"
    );
    assert_eq!(
        head.header("content-length"),
        Some(HUGE_BYTES.to_string().as_str())
    );
    let mut other = Client::connect(s.addr);
    assert_eq!(other.get("/health").text(), "ok");
    drop(big);
    assert_eq!(other.get("/health").text(), "ok");
    s.stop();
}

#[test]
fn every_method_shortcut_routes_its_method() {
    let s = start(config(), router());
    let mut c = Client::connect(s.addr);
    // (method, path, status, body or field check)
    let rows: &[(&str, &str, u16, &str)] = &[
        ("PUT", "/m", 200, "put"),
        ("DELETE", "/m", 200, "delete"),
        ("PATCH", "/m", 200, "patch"),
        ("POST", "/m", 200, "post"),
        ("OPTIONS", "/m", 204, "allow: PUT, DELETE"),
        ("HEAD", "/m", 200, "x-head: own"),
        ("PUT", "/a", 200, "put"),
        ("DELETE", "/a", 200, "delete"),
        ("PATCH", "/a", 200, "patch"),
        ("OPTIONS", "/a", 204, "x-options: own"),
        ("HEAD", "/a", 200, "x-head: own"),
    ];
    for &(method, path, status, want) in rows {
        c.send(
            format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").as_bytes(),
        );
        let r = c.read_response_opt(method == "HEAD").expect("a response");
        assert_eq!(r.status, status, "{method} {path}");
        match want.split_once(": ") {
            Some((name, value)) => assert_eq!(r.header(name), Some(value), "{method} {path}"),
            None => assert_eq!(r.text(), want, "{method} {path}"),
        }
    }
    s.stop();
}
