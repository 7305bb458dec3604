//! Raw-socket protocol tests against a real server on 127.0.0.1: every parsing rule and
//! limit over the wire, pipelining, byte-at-a-time delivery, body framing, keep-alive rules.

mod common;

use common::{Client, config, start, start_demo};
use linerate_server::{Config, Response, Router};

/// (rule, request bytes, expected status). Every one of these must also close the connection.
#[rustfmt::skip]
const REJECTED: &[(&str, &[u8], u16)] = &[
    ("CL + TE (RFC 9112 §6.1)", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("CL +5", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400),
    ("CL 0x5", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", 400),
    ("CL -1", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
    ("CL overflow", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
    ("CL conflicting", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
    ("TE not chunked last (§6.3)", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400),
    ("TE unknown coding (§6.1) 501", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ("TE on HTTP/1.0", b"POST /baseline11?a=1&b=2 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("chunk size 0x5", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk size overflow", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400),
    ("chunk data longer than size", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n20\r\n0\r\n\r\n", 400),
    ("whitespace before colon (§5.1)", b"GET /json HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    ("obs-fold (§5.2)", b"GET /json HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", 400),
    ("bare CR in value", b"GET /json HTTP/1.1\r\nHost: a\r\nX: 1\r2\r\n\r\n", 400),
    ("NUL in value", b"GET /json HTTP/1.1\r\nHost: a\r\nX: 1\x002\r\n\r\n", 400),
    ("bare LF (§2.2, strict)", b"GET /json HTTP/1.1\nHost: a\n\n", 400),
    ("missing Host (§3.2)", b"GET /json HTTP/1.1\r\n\r\n", 400),
    ("duplicate Host (§3.2)", b"GET /json HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("invalid method token", b"G@T /json HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("target with control", b"GET /js\x01on HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("bad version syntax", b"GET /json HTTP/1.x\r\nHost: a\r\n\r\n", 400),
    ("HTTP/2.0 → 505", b"GET /json HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    ("HTTP/3.0 → 505", b"GET /json HTTP/3.0\r\nHost: a\r\n\r\n", 505),
    ("unknown expectation → 417", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nExpect: tea\r\nContent-Length: 1\r\n\r\n1", 417),
];

#[test]
fn rejected_requests_get_their_status_and_a_clean_close() {
    let server = start_demo();
    for (rule, bytes, status) in REJECTED {
        let mut c = Client::connect(server.addr);
        c.send(bytes);
        let r = c.read_response();
        assert_eq!(r.status, *status, "{rule}");
        assert_eq!(r.header("connection"), Some("close"), "{rule}");
        c.expect_eof();
    }
    server.stop();
}

#[test]
fn rejected_request_does_not_answer_what_was_pipelined_behind_it() {
    // A smuggling attempt: the second request must never be answered.
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().status, 400);
    c.expect_eof();
    server.stop();
}

#[test]
fn accepted_edge_cases() {
    let server = start_demo();
    let cases: &[(&str, &[u8], u16, &str)] = &[
        ("absolute-form (§3.2.2)", b"GET http://example.com/plaintext HTTP/1.1\r\nHost: example.com\r\n\r\n", 200, "Hello, World!"),
        ("one leading empty line (§2.2)", b"\r\nGET /pipeline HTTP/1.1\r\nHost: a\r\n\r\n", 200, "ok"),
        ("identical CL list", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n3", 200, "6"),
        ("chunked with extension and trailer", b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;x=y\r\n4\r\n0\r\nX-T: 1\r\n\r\n", 200, "7"),
        ("HTTP/1.0 without Host", b"GET /pipeline HTTP/1.0\r\n\r\n", 200, "ok"),
    ];
    for (name, bytes, status, body) in cases {
        let mut c = Client::connect(server.addr);
        c.send(bytes);
        let r = c.read_response();
        assert_eq!((r.status, r.text().as_str()), (*status, *body), "{name}");
    }
    server.stop();
}

#[test]
fn limits_answer_414_431_413() {
    let cfg = Config {
        limits: linerate_http1::Limits {
            max_head_bytes: 1024,
            max_headers: 5,
            ..Default::default()
        },
        max_body_bytes: 100,
        ..config()
    };
    let server = start(cfg, linerate::demo::router());
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(2000));
    let big_head = format!(
        "GET /json HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
        "b".repeat(2000)
    );
    let many = format!(
        "GET /json HTTP/1.1\r\nHost: a\r\n{}\r\n",
        "X: 1\r\n".repeat(6)
    );
    let big_body = format!(
        "POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n{}",
        "1".repeat(101)
    );
    let big_chunked = format!(
        "POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n{}\r\n0\r\n\r\n",
        "1".repeat(101)
    );
    for (name, req, status) in [
        ("request line too long", long_target, 414),
        ("head too large", big_head, 431),
        ("too many fields", many, 431),
        ("body over the limit", big_body, 413),
        ("chunked body over the limit", big_chunked, 413),
    ] {
        let mut c = Client::connect(server.addr);
        c.send(req.as_bytes());
        let r = c.read_response();
        assert_eq!(r.status, status, "{name}");
        assert_eq!(r.header("connection"), Some("close"), "{name}");
        c.expect_eof();
    }
    server.stop();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let mut batch = Vec::new();
    for i in 0..50 {
        batch.extend_from_slice(
            format!("GET /baseline11?a={i}&b=1000 HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes(),
        );
    }
    c.send(&batch);
    for i in 0..50 {
        let r = c.read_response();
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), (i + 1000).to_string());
    }
    server.stop();
}

#[test]
fn request_sent_one_byte_at_a_time() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let req = b"POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n20\r\n0\r\n\r\n";
    for b in req.iter() {
        c.send(std::slice::from_ref(b));
    }
    let r = c.read_response();
    assert_eq!((r.status, r.text().as_str()), (200, "75"));
    // The connection is still usable.
    assert_eq!(c.get("/pipeline").text(), "ok");
    server.stop();
}

#[test]
fn body_then_pipelined_get_is_framed_exactly() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    // Content-Length body, chunked body, then a GET, all in one write.
    c.send(
        b"POST /baseline11?a=1&b=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n40\
POST /baseline11?a=1&b=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n5\r\n0\r\n\r\n\
GET /pipeline HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(c.read_response().text(), "42");
    assert_eq!(c.read_response().text(), "7");
    assert_eq!(c.read_response().text(), "ok");
    server.stop();
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    let interim = c.read_response();
    assert_eq!(interim.status, 100);
    c.send(b"10");
    assert_eq!(c.read_response().text(), "13");
    server.stop();
}

#[test]
fn head_has_get_headers_and_no_body() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let get = c.get("/json");
    c.send(b"HEAD /json HTTP/1.1\r\nHost: a\r\n\r\n");
    let head = c.read_response_opt(true).unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), get.header("content-length"));
    assert_eq!(head.header("content-type"), get.header("content-type"));
    // Nothing follows the HEAD response: the next response starts right away.
    assert_eq!(c.get("/pipeline").text(), "ok");
    server.stop();
}

#[test]
fn keep_alive_rules_per_version_and_connection_close() {
    let server = start_demo();
    // HTTP/1.0 without keep-alive: closed after the response.
    let mut c = Client::connect(server.addr);
    c.send(b"GET /pipeline HTTP/1.0\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.header("connection"), Some("close"));
    c.expect_eof();
    // HTTP/1.0 with keep-alive: stays open and says so.
    let mut c = Client::connect(server.addr);
    c.send(b"GET /pipeline HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response().header("connection"), Some("keep-alive"));
    c.send(b"GET /pipeline HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response().text(), "ok");
    // HTTP/1.1 Connection: close honoured, and nothing after it is answered.
    let mut c = Client::connect(server.addr);
    c.send(b"GET /pipeline HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /pipeline HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().header("connection"), Some("close"));
    c.expect_eof();
    server.stop();
}

#[test]
fn not_found_method_not_allowed_not_implemented() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    assert_eq!(c.get("/nope").status, 404);
    c.send(b"DELETE /json HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    c.send(b"BREW /json HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().status, 501);
    // A refused request whose body is fully present keeps the connection.
    c.send(b"POST /nope HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.read_response().status, 404);
    assert_eq!(c.get("/pipeline").text(), "ok");
    server.stop();
}

#[test]
fn max_requests_per_connection_closes_after_the_last() {
    let server = start(
        Config {
            max_requests_per_conn: 3,
            ..config()
        },
        linerate::demo::router(),
    );
    let mut c = Client::connect(server.addr);
    assert_eq!(c.get("/pipeline").header("connection"), None);
    assert_eq!(c.get("/pipeline").header("connection"), None);
    assert_eq!(c.get("/pipeline").header("connection"), Some("close"));
    c.expect_eof();
    server.stop();
}

#[test]
fn handler_api_params_query_headers_trailers() {
    let router = Router::new()
        .get("/p/{a}/q/{b}", |req| {
            let ua = String::from_utf8_lossy(req.header("x-who").unwrap_or(b"?")).into_owned();
            Response::text_owned(format!(
                "{}|{}|{}|{}",
                req.param("a").unwrap(),
                req.param("b").unwrap(),
                req.query_param("k").unwrap_or_default(),
                ua
            ))
        })
        .post("/t", |req| {
            let t = req
                .trailer("x-sum")
                .map(|v| String::from_utf8_lossy(v).into_owned());
            let merged = req.header("x-sum").is_some();
            Response::text_owned(format!("{}|{:?}|{merged}", req.body().len(), t))
        })
        .get("/panic", |_| -> Response { panic!("handler bug") });
    let server = start(config(), router);
    let mut c = Client::connect(server.addr);
    c.send(b"GET /p/1/q/two?k=a%20b+c HTTP/1.1\r\nHost: a\r\nX-Who: me\r\n\r\n");
    assert_eq!(c.read_response().text(), "1|two|a b c|me");
    c.send(b"POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 9\r\n\r\n");
    assert_eq!(c.read_response().text(), "3|Some(\"9\")|false");
    // A panicking handler costs a 500 and its connection, not the server.
    c.send(b"GET /panic HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().status, 500);
    let mut c = Client::connect(server.addr);
    assert_eq!(c.get("/p/x/q/y").status, 200);
    server.stop();
}

#[test]
fn response_date_and_server_headers() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let r = c.get("/plaintext");
    assert_eq!(r.header("server"), Some("linerate"));
    let date = r.header("date").unwrap();
    assert_eq!(date.len(), 29);
    assert!(date.ends_with(" GMT"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    server.stop();
}
