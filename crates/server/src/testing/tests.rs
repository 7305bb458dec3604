//! The test client against the real dispatch, over both protocols: one table of requests and
//! the answers a client must get (handlers of every kind and the server's own statuses), then
//! what a table cannot say (files, flow control, sites, bounded waits, refusals).
#![forbid(unsafe_code)]

use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::config::{Config, FilesMount, Site};
use crate::{Body, Method, Responder, Response, Router};

const PROTOCOLS: &[Protocol] = &[
    Protocol::Http1,
    #[cfg(feature = "http2")]
    Protocol::Http2,
];

/// The deferred timeout of [`client`]: `/never`'s 503 comes after it.
const DEFERRED: Duration = Duration::from_millis(300);
/// The body limit of [`client`].
const MAX_BODY: u64 = 64;

/// Responders `/never` keeps unanswered (so the server's deferred timeout answers).
static NEVER: Mutex<Vec<Responder>> = Mutex::new(Vec::new());

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap()
}

/// Every kind of handler, on paths the table names.
fn router(rt: &tokio::runtime::Runtime) -> Router {
    let handle = rt.handle().clone();
    let text = |s: String| Response::text_owned(s);
    Router::new()
        .get("/hello", |_| Response::text("hello"))
        .get("/users/{id}", move |req| {
            text(format!("user {}", req.param("id").unwrap_or("?")))
        })
        .get("/search", move |req| {
            text(format!("q={}", req.query_param("q").unwrap_or_default()))
        })
        .get("/auth", move |req| {
            let auth = req.header("authorization").unwrap_or(b"none");
            text(String::from_utf8_lossy(auth).into_owned())
        })
        .post("/echo", |req| {
            Response::new(200)
                .content_type("application/octet-stream")
                .body(Body::Owned(req.body().to_vec()))
        })
        .post("/sum", |req| {
            match serde_json::from_slice::<Vec<i64>>(req.body()) {
                Ok(v) => Response::json(&json!({ "sum": v.iter().sum::<i64>() })),
                Err(_) => Response::text("not a list of numbers").status(422),
            }
        })
        .route(Method::Put, "/items/{id}", move |req| {
            text(format!("put {}", req.param("id").unwrap_or("?")))
        })
        .route(Method::Delete, "/items/{id}", move |req| {
            text(format!("deleted {}", req.param("id").unwrap_or("?")))
        })
        .route(Method::Patch, "/items/{id}", move |req| {
            let body = String::from_utf8_lossy(req.body()).into_owned();
            text(format!(
                "patched {}: {body}",
                req.param("id").unwrap_or("?")
            ))
        })
        .deferred(Method::Get, "/deferred", |req, res| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let n = req.query_param("n").unwrap_or_default();
                res.send(Response::text_owned(format!("later {n}")));
            });
        })
        .get_async(
            "/async/{n}",
            move |f| {
                handle.spawn(f);
            },
            |req| async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Response::text_owned(format!("async {}", req.param("n").unwrap_or("?")))
            },
        )
        .deferred(Method::Get, "/dropped", |_, res| drop(res))
        .deferred(Method::Get, "/never", |_, res| {
            NEVER.lock().unwrap().push(res);
        })
        .get("/panic", |_| -> Response {
            panic!("a handler that panics")
        })
}

fn client(rt: &tokio::runtime::Runtime) -> TestClient {
    let config = Config {
        max_body_bytes: MAX_BODY,
        deferred_timeout: DEFERRED,
        ..Config::default()
    };
    TestClient::with_config(config, router(rt)).unwrap()
}

/// One request and what its response must hold.
struct Row {
    name: &'static str,
    build: for<'c> fn(&'c TestClient) -> TestRequest<'c>,
    status: u16,
    body: &'static str,
    /// A field the response must carry, with its value.
    field: Option<(&'static str, &'static str)>,
}

const ROWS: &[Row] = &[
    Row {
        name: "buffered route",
        build: |c| c.get("/hello"),
        status: 200,
        body: "hello",
        field: Some(("content-type", "text/plain")),
    },
    Row {
        name: "path parameter",
        build: |c| c.get("/users/42"),
        status: 200,
        body: "user 42",
        field: None,
    },
    Row {
        name: "query, percent- and plus-decoded",
        build: |c| c.get("/search?q=a+b%21"),
        status: 200,
        body: "q=a b!",
        field: None,
    },
    Row {
        name: "request field reaches the handler",
        build: |c| c.get("/auth").header("Authorization", "Bearer x"),
        status: 200,
        body: "Bearer x",
        field: None,
    },
    Row {
        name: "POST body",
        build: |c| c.post("/echo").body("ping"),
        status: 200,
        body: "ping",
        field: Some(("content-length", "4")),
    },
    Row {
        name: "JSON body in, JSON out",
        build: |c| c.post("/sum").json(&[1, 2, 3]),
        status: 200,
        body: r#"{"sum":6}"#,
        field: Some(("content-type", "application/json")),
    },
    Row {
        name: "PUT",
        build: |c| c.put("/items/7"),
        status: 200,
        body: "put 7",
        field: None,
    },
    Row {
        name: "DELETE",
        build: |c| c.delete("/items/7"),
        status: 200,
        body: "deleted 7",
        field: None,
    },
    Row {
        name: "PATCH with a body",
        build: |c| c.patch("/items/7").body("x"),
        status: 200,
        body: "patched 7: x",
        field: None,
    },
    Row {
        name: "deferred handler answers from another thread",
        build: |c| c.get("/deferred?n=3"),
        status: 200,
        body: "later 3",
        field: None,
    },
    Row {
        name: "async handler on a tokio runtime",
        build: |c| c.get("/async/5"),
        status: 200,
        body: "async 5",
        field: None,
    },
    // RFC 9110 §15.5.5.
    Row {
        name: "the server's 404",
        build: |c| c.get("/nope"),
        status: 404,
        body: "Not Found\n",
        field: None,
    },
    // RFC 9110 §15.5.6: a 405 names the methods the path takes.
    Row {
        name: "the server's 405 with Allow",
        build: |c| c.delete("/hello"),
        status: 405,
        body: "Method Not Allowed\n",
        field: Some(("allow", "GET, HEAD, OPTIONS")),
    },
    // RFC 9110 §9.3.2: HEAD is GET without the body, with GET's Content-Length.
    Row {
        name: "HEAD served by the GET route",
        build: |c| c.head("/hello"),
        status: 200,
        body: "",
        field: Some(("content-length", "5")),
    },
    // RFC 9110 §9.3.7.
    Row {
        name: "OPTIONS answered by the server",
        build: |c| c.options("/hello"),
        status: 204,
        body: "",
        field: Some(("allow", "GET, HEAD, OPTIONS")),
    },
    // RFC 9110 §15.5.14.
    Row {
        name: "a body over max_body_bytes is 413",
        build: |c| c.post("/echo").body(vec![b'x'; MAX_BODY as usize + 1]),
        status: 413,
        body: "Content Too Large\n",
        field: None,
    },
    Row {
        name: "a dropped Responder is 500",
        build: |c| c.get("/dropped"),
        status: 500,
        body: "500 Internal Server Error: the handler did not answer\n",
        field: None,
    },
    Row {
        name: "a handler that panics is 500",
        build: |c| c.get("/panic"),
        status: 500,
        body: "Internal Server Error\n",
        field: None,
    },
    Row {
        name: "an answer past the deferred timeout is the server's 503",
        build: |c| c.get("/never"),
        status: 503,
        body: "503 Service Unavailable: the answer did not come in time\n",
        field: None,
    },
];

#[test]
fn every_row_over_both_protocols() {
    let rt = runtime();
    let client = client(&rt);
    for row in ROWS {
        for &protocol in PROTOCOLS {
            let what = format!("{} over {protocol:?}", row.name);
            let res = (row.build)(&client)
                .protocol(protocol)
                .try_send()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(res.protocol(), protocol, "{what}");
            assert_eq!(res.status(), row.status, "{what}: {res:?}");
            assert_eq!(res.text(), row.body, "{what}");
            if let Some((name, value)) = row.field {
                assert_eq!(res.header(name), Some(value), "{what}: {res:?}");
            }
        }
    }
}

#[cfg(feature = "http2")]
#[test]
fn json_helpers_round_trip() {
    let rt = runtime();
    let client = client(&rt).http2();
    let res = client.post("/sum").json(&json!([4, 5])).send();
    assert_eq!(res.protocol(), Protocol::Http2);
    assert_eq!(
        res.json::<serde_json::Value>().unwrap(),
        json!({ "sum": 9 })
    );
    let res = client.post("/sum").body("{").send();
    assert_eq!(
        (res.status(), res.text().as_str()),
        (422, "not a list of numbers")
    );
}

/// What a response says whatever the protocol: the status, the body, and the fields but
/// the Date, with lowercase names.
#[cfg(feature = "http2")]
fn comparable(res: &TestResponse) -> (u16, Vec<u8>, Vec<(String, String)>) {
    let mut fields: Vec<_> = res
        .headers()
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    fields.sort();
    (res.status(), res.body().to_vec(), fields)
}

#[cfg(feature = "http2")]
#[test]
fn both_protocols_get_the_same_answer() {
    let rt = runtime();
    let client = client(&rt);
    for target in ["/hello", "/users/9", "/nope", "/async/1"] {
        let one = client.get(target).send();
        let two = client.get(target).http2().send();
        assert_eq!(comparable(&one), comparable(&two), "{target}");
    }
}

/// A temporary static root, removed on drop.
struct Root(std::path::PathBuf);

impl Root {
    fn new(files: &[(&str, &[u8])]) -> Root {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("linerate-testing-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        Root(dir)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn static_file_bodies_are_read_from_their_range() {
    // 300,000 bytes: more than one HTTP/2 window and many DATA frames.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let root = Root::new(&[("a.txt", b"0123456789"), ("big.bin", &big)]);
    let config = Config {
        files: Some(FilesMount {
            prefix: "/static".into(),
            root: root.0.clone(),
            try_files: Vec::new(),
            listing: false,
        }),
        ..Config::default()
    };
    let client = TestClient::with_config(config, Router::new()).unwrap();
    for &protocol in PROTOCOLS {
        let res = client.get("/static/a.txt").protocol(protocol).send();
        assert_eq!((res.status(), res.text().as_str()), (200, "0123456789"));
        // RFC 9110 §14.2: a range is the file's bytes from its offset.
        let res = client
            .get("/static/a.txt")
            .header("range", "bytes=2-5")
            .protocol(protocol)
            .send();
        assert_eq!(
            (res.status(), res.text().as_str()),
            (206, "2345"),
            "{protocol:?}"
        );
        let res = client.get("/static/big.bin").protocol(protocol).send();
        assert_eq!(res.status(), 200, "{protocol:?}");
        assert!(
            res.body() == big,
            "{protocol:?}: the big file's bytes differ"
        );
        let res = client.get("/static/missing").protocol(protocol).send();
        assert_eq!(res.status(), 404, "{protocol:?}");
    }
}

#[test]
fn a_body_larger_than_the_http2_windows_is_sent_as_the_server_opens_them() {
    // Past the default 64 KiB connection window and the server's 1 MiB stream window.
    let body: Vec<u8> = (0..1_500_000u32).map(|i| (i % 241) as u8).collect();
    let config = Config {
        max_body_bytes: 2 << 20,
        ..Config::default()
    };
    let router = Router::new().post("/len", |req| {
        Response::text_owned(format!("{} {}", req.body().len(), req.body()[1_000_000]))
    });
    let client = TestClient::with_config(config, router).unwrap();
    for &protocol in PROTOCOLS {
        let res = client
            .post("/len")
            .body(body.clone())
            .protocol(protocol)
            .send();
        let want = format!("1500000 {}", body[1_000_000]);
        assert_eq!(res.text(), want, "{protocol:?}");
    }
}

#[test]
fn a_body_streamed_to_a_handler_elsewhere_goes_through_its_room_to_the_end() {
    // Past the body's room (`incoming::INCOMING_ROOM`) many times over: the connection is held
    // and read on as the handler, a future on a runtime, takes the pieces.
    let body: Vec<u8> = (0..1_500_000u32).map(|i| (i % 241) as u8).collect();
    let rt = runtime();
    let handle = rt.handle().clone();
    let router =
        Router::new().deferred_incoming(Method::Post, "/count", move |_, mut body, res| {
            handle.spawn(async move {
                let (mut n, mut sum) = (0usize, 0u64);
                while let Some(piece) = body.chunk().await {
                    let Ok(piece) = piece else {
                        return res.send(Response::text("cut off").status(400));
                    };
                    n += piece.len();
                    sum += piece.iter().map(|&b| u64::from(b)).sum::<u64>();
                }
                res.send(Response::text_owned(format!("{n} {sum}")));
            });
        });
    let client = TestClient::with_config(Config::default(), router).unwrap();
    let want = format!(
        "{} {}",
        body.len(),
        body.iter().map(|&b| u64::from(b)).sum::<u64>()
    );
    for &protocol in PROTOCOLS {
        let res = client
            .post("/count")
            .body(body.clone())
            .protocol(protocol)
            .send();
        assert_eq!(res.text(), want, "{protocol:?}");
    }
}

#[test]
fn sites_are_chosen_by_the_host_field() {
    let config = Config {
        sites: vec![
            Site {
                names: vec!["app.test".into()],
                default: true,
                app: true,
                ..Site::default()
            },
            Site {
                names: vec!["other.test".into()],
                app: false,
                ..Site::default()
            },
        ],
        ..Config::default()
    };
    let router = Router::new().get("/hello", |_| Response::text("hello"));
    let client = TestClient::with_config(config, router).unwrap();
    // (Host, status): the routes are mounted in app.test only.
    let table = [
        (None, 200),
        (Some("app.test"), 200),
        (Some("other.test"), 404),
    ];
    for (host, status) in table {
        for &protocol in PROTOCOLS {
            let mut req = client.get("/hello").protocol(protocol);
            if let Some(h) = host {
                req = req.header("host", h);
            }
            assert_eq!(req.send().status(), status, "{host:?} over {protocol:?}");
        }
    }
}

#[test]
fn the_clients_time_limit_bounds_a_wait_for_an_answer_that_never_comes() {
    let rt = runtime();
    let config = Config {
        deferred_timeout: Duration::from_secs(30),
        ..Config::default()
    };
    let client = TestClient::with_config(config, router(&rt))
        .unwrap()
        .timeout(Duration::from_millis(100));
    for &protocol in PROTOCOLS {
        let err = client
            .get("/never")
            .protocol(protocol)
            .try_send()
            .unwrap_err();
        // The client's own limit ended the wait (the deferred timeout's 503, 30 s away, would
        // have been an answer, not this error).
        assert!(
            matches!(err, TestError::Timeout(d) if d == Duration::from_millis(100)),
            "{protocol:?}: {err}"
        );
        // The client is still usable, and the late answer is not taken for the next one.
        assert_eq!(
            client.get("/hello").protocol(protocol).send().text(),
            "hello"
        );
    }
}

#[test]
fn requests_that_would_not_frame_are_refused_before_sending() {
    let client = TestClient::new(Router::new());
    type Want = fn(&TestError) -> bool;
    let table: [(TestRequest<'_>, Want); 4] = [
        (
            client.get("/").header("x-a", "b\r\nx-b: c"),
            |e| matches!(e, TestError::InvalidHeader(n) if n == "x-a"),
        ),
        (client.get("/").header("bad name", "v"), |e| {
            matches!(e, TestError::InvalidHeader(_))
        }),
        (client.request(Method::Other, "/"), |e| {
            matches!(e, TestError::NoMethodToken)
        }),
        // JSON object keys are strings: a map keyed by pairs does not serialize.
        (
            client
                .post("/")
                .json(&std::collections::BTreeMap::from([((1, 2), 3)])),
            |e| matches!(e, TestError::Json(_)),
        ),
    ];
    for (req, want) in table {
        let what = format!("{req:?}");
        let err = req.try_send().unwrap_err();
        assert!(want(&err), "{what}: {err}");
    }
}

#[test]
fn a_malformed_target_gets_the_servers_400() {
    let client = TestClient::new(Router::new());
    // RFC 9112 §3.2 and RFC 9113 §8.3.1: a space is no part of a request target.
    for &protocol in PROTOCOLS {
        let res = client.get("/a b").protocol(protocol).send();
        assert_eq!(res.status(), 400, "{protocol:?}");
    }
}

/// Counts the trailers a layer's `after` sees, in a field of the head.
struct SeesTrailers;

impl crate::Layer for SeesTrailers {
    fn after(&self, _: &crate::Extensions, resp: &mut Response) {
        let n = resp.trailers().len();
        if n > 0 {
            resp.set_header("x-trailers-seen", n.to_string()).unwrap();
        }
    }
}

/// Every way an answer can carry trailers, and one that may not.
fn trailer_router() -> Router {
    let grpc = |body: &'static [u8]| {
        Response::new(200)
            .content_type("application/grpc")
            .body(Body::Static(body))
            .trailer("grpc-status", "0")
            .trailer("grpc-message", "ok")
    };
    Router::new()
        .get("/grpc", move |_| grpc(b"\0\0\0\0\0"))
        .get("/trailers-only", move |_| grpc(b""))
        .get("/text", |_| {
            Response::text_owned("compressible text ".repeat(100)).trailer("checksum", "abc")
        })
        .deferred(Method::Get, "/deferred", move |_, res| {
            std::thread::spawn(move || res.send(grpc(b"later")));
        })
        .get("/streamed", |_| {
            let (resp, body) = Response::new(200).stream();
            std::thread::spawn(move || {
                body.write(b"piece").unwrap();
                body.end_with_trailers(vec![("grpc-status".into(), "0".into())])
                    .unwrap();
            });
            resp
        })
        // RFC 9110 §6.5.1: framing may not be a trailer; the answer is the server's 500.
        .get("/bad", |_| {
            Response::text("x").trailer("content-length", "5")
        })
        .layer(SeesTrailers)
}

#[test]
fn trailers_reach_the_client_over_both_protocols() {
    let client = TestClient::new(trailer_router());
    for &p in PROTOCOLS {
        let send = |target: &str| {
            let req = client.get(target);
            let req = match p {
                #[cfg(feature = "http2")]
                Protocol::Http2 => req.http2(),
                _ => req,
            };
            req.header("accept-encoding", "gzip").send()
        };
        for target in ["/grpc", "/trailers-only", "/deferred"] {
            let res = send(target);
            assert_eq!(res.status(), 200, "{p:?} {target}");
            assert_eq!(res.trailer("grpc-status"), Some("0"), "{p:?} {target}");
            assert_eq!(res.trailer("Grpc-Message"), Some("ok"), "{p:?} {target}");
            assert_eq!(res.header("grpc-status"), None, "not in the head");
            assert_eq!(
                res.header("x-trailers-seen"),
                Some("2"),
                "a layer's after sees them: {p:?} {target}"
            );
        }
        assert_eq!(send("/grpc").body(), b"\0\0\0\0\0");
        assert_eq!(send("/deferred").body(), b"later");

        let res = send("/streamed");
        assert_eq!(
            (res.body(), res.trailer("grpc-status")),
            (&b"piece"[..], Some("0")),
            "{p:?}"
        );

        let res = send("/text");
        #[cfg(feature = "gzip")]
        assert_eq!(res.header("content-encoding"), Some("gzip"), "{p:?}");
        assert_eq!(
            res.trailer("checksum"),
            Some("abc"),
            "compressed, kept: {p:?}"
        );

        let res = send("/bad");
        assert_eq!(res.status(), 500, "{p:?}");
        assert!(res.trailers().is_empty(), "{p:?}");
    }
}
