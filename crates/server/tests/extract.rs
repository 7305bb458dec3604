//! Typed extraction, `Result` handlers and the error renderer, through the in-process test
//! client over HTTP/1.1 and HTTP/2 framing: every extractor's failure with its status, `?`
//! in sync and `async` handlers, and a router whose errors (rejections and the server's own
//! answers) are rendered as JSON while a handler's own error answer is left alone.

use linerate_server::testing::{Protocol, TestClient};
use linerate_server::{
    ErrorRenderer, IntoResponse, Json, Method, Rejection, Request, Response, Router,
};
use serde::{Deserialize, Serialize};

const PROTOCOLS: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

#[derive(Deserialize)]
struct NewUser<'a> {
    name: &'a str,
    age: u8,
}

/// A form's values may be percent-encoded, so they are owned.
#[derive(Deserialize)]
struct FormUser {
    name: String,
    age: u8,
}

#[derive(Deserialize, Serialize)]
struct Page {
    page: u32,
    #[serde(default)]
    tag: Option<String>,
}

fn create(req: &Request<'_>) -> Result<(u16, String), Rejection> {
    let user: NewUser<'_> = req.json()?;
    Ok((201, format!("{} {}", user.name, user.age)))
}

fn router() -> Router {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    let handle = rt.handle().clone();
    std::mem::forget(rt);
    let spawn = move |f| {
        handle.spawn(f);
    };
    Router::new()
        .post("/users", create)
        .post("/form", |req| -> Result<String, Rejection> {
            let user: FormUser = req.form()?;
            Ok(format!("{} {}", user.name, user.age))
        })
        .get("/list", |req| -> Result<Json<Page>, Rejection> {
            Ok(Json(req.query_as()?))
        })
        .get("/items/{id}", |req| -> Result<String, Rejection> {
            let id: u32 = req.param_as("id")?;
            Ok(format!("item {id}"))
        })
        .get("/whoami", |req| -> Result<String, Rejection> {
            Ok(req.required_header("x-user")?.to_string())
        })
        .post_async("/async-users", spawn, |req| async move {
            let user: NewUser<'_> = req.request().json()?;
            Ok::<_, Rejection>(format!("{} async", user.name))
        })
        .get("/own-404", |_| Response::text("my own page").status(404))
        .route(Method::Put, "/users", |_| "put")
}

/// (method, path, content type, body, status, body wanted)
type Row = (
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    u16,
    &'static str,
);

#[test]
fn every_extractor_answers_its_failures_with_their_status() {
    let rows: &[Row] = &[
        (
            "POST",
            "/users",
            Some("application/json"),
            r#"{"name":"ann","age":7}"#,
            201,
            "ann 7",
        ),
        (
            "POST",
            "/users",
            Some("application/json; charset=utf-8"),
            r#"{"name":"ann","age":7}"#,
            201,
            "ann 7",
        ),
        (
            "POST",
            "/users",
            Some("text/plain"),
            r#"{"name":"ann","age":7}"#,
            415,
            "",
        ),
        ("POST", "/users", None, r#"{"name":"ann","age":7}"#, 415, ""),
        (
            "POST",
            "/users",
            Some("application/json"),
            r#"{"name":"ann","#,
            400,
            "",
        ),
        (
            "POST",
            "/users",
            Some("application/json"),
            r#"{"name":"ann","age":700}"#,
            422,
            "",
        ),
        (
            "POST",
            "/users",
            Some("application/json"),
            r#"{"name":"ann"}"#,
            422,
            "",
        ),
        (
            "POST",
            "/form",
            Some("application/x-www-form-urlencoded"),
            "name=b%C3%A9a&age=3",
            200,
            "béa 3",
        ),
        (
            "POST",
            "/form",
            Some("application/json"),
            "name=bea&age=3",
            415,
            "",
        ),
        (
            "POST",
            "/form",
            Some("application/x-www-form-urlencoded"),
            "name=bea&age=old",
            422,
            "",
        ),
        (
            "GET",
            "/list?page=2&tag=a+b",
            None,
            "",
            200,
            r#"{"page":2,"tag":"a b"}"#,
        ),
        ("GET", "/list?page=two", None, "", 400, ""),
        ("GET", "/list", None, "", 400, ""),
        ("GET", "/items/12", None, "", 200, "item 12"),
        ("GET", "/items/%31%32", None, "", 200, "item 12"),
        ("GET", "/items/twelve", None, "", 400, ""),
        ("GET", "/items/-1", None, "", 400, ""),
        ("GET", "/whoami", None, "", 400, ""),
        (
            "POST",
            "/async-users",
            Some("application/json"),
            r#"{"name":"cy","age":1}"#,
            200,
            "cy async",
        ),
        (
            "POST",
            "/async-users",
            Some("application/json"),
            "[]",
            422,
            "",
        ),
    ];
    for protocol in PROTOCOLS {
        let c = TestClient::new(router()).protocol(protocol);
        for &(method, path, ct, body, status, want) in rows {
            let method = match method {
                "GET" => Method::Get,
                _ => Method::Post,
            };
            let mut r = c.request(method, path);
            if let Some(ct) = ct {
                r = r.header("content-type", ct);
            }
            if !body.is_empty() {
                r = r.body(body);
            }
            let r = r.send();
            assert_eq!(
                r.status(),
                status,
                "{protocol:?} {path} {body}: {}",
                r.text()
            );
            if status < 400 {
                assert_eq!(r.text(), want, "{protocol:?} {path} {body}");
            } else {
                assert_eq!(r.header("content-type"), Some("text/plain"));
                assert!(
                    r.text().ends_with('\n') && r.text().len() > 10,
                    "a message: {}",
                    r.text()
                );
            }
        }
        // The header the handler reads, present.
        let r = c.get("/whoami").header("x-user", "dee").send();
        assert_eq!(r.text(), "dee");
    }
}

#[derive(Deserialize, Debug, PartialEq)]
struct Problem {
    status: u16,
    error: String,
}

/// The router, its errors rendered as `{"status":…,"error":…}`.
fn json_errors() -> Router {
    router().layer(ErrorRenderer(|status: u16, message: &str| {
        #[derive(Serialize)]
        struct P<'a> {
            status: u16,
            error: &'a str,
        }
        (
            status,
            Json(P {
                status,
                error: message,
            }),
        )
            .into_response()
    }))
}

#[test]
fn an_error_renderer_renders_rejections_and_the_servers_own_answers() {
    for protocol in PROTOCOLS {
        let c = TestClient::new(json_errors()).protocol(protocol);
        let bad = c
            .post("/users")
            .header("content-type", "application/json")
            .body("{")
            .send();
        assert_eq!(bad.status(), 400);
        assert_eq!(bad.header("content-type"), Some("application/json"));
        let p: Problem = bad.json().expect("a JSON problem");
        assert_eq!(p.status, 400);
        assert!(p.error.starts_with("invalid JSON body"), "{}", p.error);

        let missing: Problem = c.get("/nothing").send().json().expect("JSON 404");
        assert_eq!(
            missing,
            Problem {
                status: 404,
                error: "Not Found".into()
            }
        );

        let not_allowed = c.delete("/users").send();
        assert_eq!(not_allowed.status(), 405);
        assert_eq!(not_allowed.header("allow"), Some("POST, PUT, OPTIONS"));
        let p: Problem = not_allowed.json().expect("JSON 405");
        assert_eq!(p.error, "Method Not Allowed");

        // A handler's own error answer is its own.
        let own = c.get("/own-404").send();
        assert_eq!((own.status(), own.text().as_str()), (404, "my own page"));
        // Successes pass untouched.
        assert_eq!(c.put("/users").send().text(), "put");
    }
}

/// A field that may hold an escaped string: borrowed when it can be, owned when it must.
#[derive(Deserialize)]
struct Note<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

/// `req.json::<T<'a>>()` with a `&str` field answers 422 on any escaped
/// string; a `Cow<'a, str>` field (`#[serde(borrow)]`) takes it, unescaped, and borrows
/// when there is nothing to unescape. The `&str` limit stays, documented on `json`.
#[test]
fn json_cow_fields_take_escaped_strings_and_str_fields_do_not() {
    let router = Router::new()
        .post("/cow", |req| -> Result<String, Rejection> {
            let note: Note<'_> = req.json()?;
            let kind = match note.text {
                std::borrow::Cow::Borrowed(_) => "borrowed",
                std::borrow::Cow::Owned(_) => "owned",
            };
            Ok(format!("{kind} {}", note.text))
        })
        .post("/users", create);
    let c = TestClient::new(router);
    let post = |path: &str, body: &str| {
        let res = c
            .post(path)
            .header("content-type", "application/json")
            .body(body)
            .send();
        (res.status(), res.text())
    };
    let rows: &[(&str, &str, u16, &str)] = &[
        ("/cow", r#"{"text":"plain"}"#, 200, "borrowed plain"),
        (
            "/cow",
            r#"{"text":"say \"hi\"\n"}"#,
            200,
            "owned say \"hi\"\n",
        ),
        ("/cow", r#"{"text":"caf\u00e9"}"#, 200, "owned café"),
        ("/users", r#"{"name":"ann","age":3}"#, 201, "ann 3"),
    ];
    for (path, body, status, text) in rows {
        assert_eq!(post(path, body), (*status, text.to_string()), "{body}");
    }
    let (status, text) = post("/users", r#"{"name":"a\"b","age":3}"#);
    assert_eq!(status, 422, "{text}");
}

/// Regression: a 413 read "Content Too Large" when the length was declared over the
/// limit, "413 Content Too Large: request body too large" when the body outgrew it while it
/// was read (HTTP/1.1 chunked), "413 Content Too Large" over HTTP/2. One message now, plain
/// and through an error renderer.
#[test]
fn a_413_reads_the_same_whether_the_length_was_declared_or_not() {
    let echo = || {
        Router::new().post("/echo", |req| {
            Response::text_owned(format!("{}", req.body().len()))
        })
    };
    let config = || linerate_server::Config {
        max_body_bytes: 16,
        ..Default::default()
    };
    let rendered = || {
        echo().layer(ErrorRenderer(|status: u16, message: &str| {
            Response::text_owned(format!("[{message}]")).status(status)
        }))
    };
    let big = "x".repeat(64);
    let chunked = format!("40\r\n{big}\r\n0\r\n\r\n");
    for protocol in PROTOCOLS {
        for (router, want) in [
            (echo(), "Content Too Large\n"),
            (rendered(), "[Content Too Large]"),
        ] {
            let c = TestClient::with_config(config(), router)
                .expect("client")
                .protocol(protocol);
            let declared = c.post("/echo").body(big.clone()).send();
            // No Content-Length: chunked over HTTP/1.1, DATA frames alone over HTTP/2.
            let undeclared = match protocol {
                Protocol::Http1 => c
                    .post("/echo")
                    .header("transfer-encoding", "chunked")
                    .body(chunked.clone()),
                Protocol::Http2 => c
                    .post("/echo")
                    .header("transfer-encoding", "chunked")
                    .body(big.clone()),
            }
            .send();
            for (how, res) in [("declared", declared), ("undeclared", undeclared)] {
                assert_eq!(
                    (res.status(), res.text().as_str()),
                    (413, want),
                    "{protocol:?} {how}"
                );
            }
        }
    }
}
