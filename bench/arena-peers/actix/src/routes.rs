//! The routes that need no database, as HttpArena's actix entries answer them
//! (`frameworks/actix/src/main.rs`: /pipeline, /baseline11, /baseline2, /json/{count},
//! /upload, and the newer entry's POST /echo; `frameworks/actix-websocket/src/main.rs`: /ws),
//! and the arena's `async` profile's `/delay/{ms}`, which no HttpArena entry serves (its
//! contract is linerate's demo's, crates/linerate/src/demo/delay.rs).
//! Every answer carries `Server: actix`, as the entry's do.

use std::path::Path;
use std::time::Duration;

use actix_web::http::header::{ContentType, HeaderValue, SERVER};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

const SERVER_NAME: HeaderValue = HeaderValue::from_static("actix");

/// A response with the entry's `Server` header.
pub fn reply(status: StatusCode) -> HttpResponseBuilder {
    let mut resp = HttpResponse::build(status);
    resp.insert_header((SERVER, SERVER_NAME));
    resp
}

/// `200 OK` with the entry's `Server` header.
pub fn ok() -> HttpResponseBuilder {
    reply(StatusCode::OK)
}

fn text(body: String) -> HttpResponse {
    ok().content_type(ContentType::plaintext()).body(body)
}

pub async fn pipeline() -> HttpResponse {
    ok().content_type(ContentType::plaintext()).body("ok")
}

#[derive(Deserialize)]
pub struct Operands {
    a: Option<i64>,
    b: Option<i64>,
}

impl Operands {
    fn sum(&self) -> i64 {
        self.a.unwrap_or(0) + self.b.unwrap_or(0)
    }
}

/// GET /baseline11 and /baseline2: `a + b`.
pub async fn baseline_get(q: web::Query<Operands>) -> HttpResponse {
    text(q.sum().to_string())
}

/// POST /baseline11: `a + b` plus the body read as an integer.
pub async fn baseline_post(q: web::Query<Operands>, body: web::Bytes) -> HttpResponse {
    let n = std::str::from_utf8(&body)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(0);
    text((q.sum() + n).to_string())
}

#[derive(Deserialize, Serialize)]
pub struct Rating {
    score: i64,
    count: i64,
}

/// One item of HttpArena's dataset.json.
#[derive(Deserialize)]
pub struct Item {
    id: i64,
    name: String,
    category: String,
    price: i64,
    quantity: i64,
    active: bool,
    tags: Vec<String>,
    rating: Rating,
}

pub type Dataset = Vec<Item>;

pub fn load_dataset(path: &Path) -> Result<Dataset, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// An item as /json answers it: the dataset's fields and `total = price × quantity × m`.
#[derive(Serialize)]
struct Priced<'a> {
    id: i64,
    name: &'a str,
    category: &'a str,
    price: i64,
    quantity: i64,
    active: bool,
    tags: &'a [String],
    rating: &'a Rating,
    total: i64,
}

#[derive(Serialize)]
struct JsonBody<'a> {
    items: Vec<Priced<'a>>,
    count: usize,
}

#[derive(Deserialize)]
pub struct Multiplier {
    m: Option<i64>,
}

/// GET /json/{count}?m=N: the first `count` items, serialized per request (the Compress
/// middleware encodes it when the client asks).
pub async fn json(
    dataset: web::Data<Dataset>,
    count: web::Path<usize>,
    q: web::Query<Multiplier>,
) -> HttpResponse {
    let m = q.m.unwrap_or(1);
    let items: Vec<Priced> = dataset
        .iter()
        .take(count.into_inner())
        .map(|d| Priced {
            id: d.id,
            name: &d.name,
            category: &d.category,
            price: d.price,
            quantity: d.quantity,
            active: d.active,
            tags: &d.tags,
            rating: &d.rating,
            total: d.price * d.quantity * m,
        })
        .collect();
    let body = JsonBody {
        count: items.len(),
        items,
    };
    match serde_json::to_vec(&body) {
        Ok(bytes) => ok().content_type(ContentType::json()).body(bytes),
        Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
    }
}

/// POST /upload: the body read as a stream, its byte count answered.
pub async fn upload(mut body: web::Payload) -> actix_web::Result<HttpResponse> {
    let mut size = 0usize;
    while let Some(chunk) = body.next().await {
        size += chunk?.len();
    }
    Ok(text(size.to_string()))
}

/// POST /echo: the body back, byte for byte.
pub async fn echo(body: web::Bytes) -> HttpResponse {
    ok().content_type(ContentType::octet_stream()).body(body)
}

/// Longest delay `/delay/{ms}` answers, as linerate's demo (`MAX_DELAY_MS`): HttpArena's
/// async profile asks for 10 to 500 ms.
pub const MAX_DELAY_MS: u64 = 10_000;

/// `{ms}`: ASCII digits only (no sign, no space), at most [`MAX_DELAY_MS`].
fn parse_ms(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().filter(|&ms| ms <= MAX_DELAY_MS)
}

/// GET /delay/{ms}: the number back as text/plain after `ms` milliseconds (a timer on the
/// worker's runtime, the task parked meanwhile); 0 answered at once; anything but 0 to
/// 10000 in digits is 400, with linerate's demo's body.
pub async fn delay(ms: web::Path<String>) -> HttpResponse {
    let Some(ms) = parse_ms(&ms) else {
        return reply(StatusCode::BAD_REQUEST)
            .content_type(ContentType::plaintext())
            .body("ms must be a whole number of milliseconds from 0 to 10000");
    };
    if ms > 0 {
        actix_web::rt::time::sleep(Duration::from_millis(ms)).await;
    }
    text(ms.to_string())
}

/// GET /ws: a WebSocket echoing text and binary messages, answering pings and closes.
pub async fn ws(req: HttpRequest, body: web::Payload) -> actix_web::Result<HttpResponse> {
    let (response, mut session, mut messages) = actix_ws::handle(&req, body)?;
    actix_web::rt::spawn(async move {
        while let Some(Ok(msg)) = messages.recv().await {
            let sent = match msg {
                actix_ws::Message::Text(t) => session.text(t).await,
                actix_ws::Message::Binary(b) => session.binary(b).await,
                actix_ws::Message::Ping(p) => session.pong(&p).await,
                actix_ws::Message::Close(reason) => {
                    let _ = session.close(reason).await;
                    return;
                }
                _ => Ok(()),
            };
            if sent.is_err() {
                return;
            }
        }
    });
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn ms_is_digits_up_to_the_limit() {
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("37", Some(37)),
            ("0010", Some(10)),
            ("10000", Some(10_000)),
            ("10001", None),
            ("99999999999999999999999", None),
            ("", None),
            ("+5", None),
            ("-1", None),
            ("1.5", None),
            (" 5", None),
            ("5ms", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_ms(input), *want, "{input:?}");
        }
    }
}
