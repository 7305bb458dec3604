//! The demo application `linerate serve` runs by default: the TechEmpower contract
//! (`/json`, `/plaintext`) and the HttpArena contract (`/baseline11`, `/pipeline`,
//! `/json/{count}`, `/upload`).
//!
//! Owns only application behaviour, written against the public handler API like any user's
//! app. The 50-item dataset is `data/dataset.json`, compiled in and parsed once at start.
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use linerate_server::{BodySink, Request, Response, Router};

/// The dataset shipped with the binary.
pub const DATASET_JSON: &str = include_str!("../data/dataset.json");
/// Most items `/json/{count}` returns.
pub const MAX_ITEMS: usize = 50;

#[derive(Serialize)]
struct Message<'a> {
    message: &'a str,
}

/// One dataset item (all numbers are integers).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Item {
    pub id: i64,
    pub name: String,
    pub category: String,
    pub price: i64,
    pub quantity: i64,
    pub active: bool,
    pub tags: Vec<String>,
    pub rating: Rating,
}

/// An item's rating.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Rating {
    pub score: i64,
    pub count: i64,
}

#[derive(Serialize)]
struct ItemOut<'a> {
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
struct Items<'a> {
    items: Vec<ItemOut<'a>>,
    count: usize,
}

/// The demo routes.
pub fn router() -> Router {
    let dataset: Arc<Vec<Item>> =
        Arc::new(serde_json::from_str(DATASET_JSON).expect("dataset.json is valid"));
    Router::new()
        .get("/json", |_| {
            Response::json(&Message {
                message: "Hello, World!",
            })
        })
        .get("/plaintext", |_| Response::text("Hello, World!"))
        .get("/pipeline", |_| Response::text("ok"))
        .get("/baseline11", |req| baseline(req, None))
        .post("/baseline11", |req| baseline(req, Some(req.body())))
        .get("/json/{count}", move |req| items(req, &dataset))
        .streaming(linerate_http1::Method::Post, "/upload", |_| {
            Box::new(Counter(0))
        })
}

/// `a + b` from the query, plus the body's integer for POST.
fn baseline(req: &Request<'_>, body: Option<&[u8]>) -> Response {
    let int = |name: &str| {
        req.query_param(name)
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    let (Some(a), Some(b)) = (int("a"), int("b")) else {
        return bad("a and b must be integers");
    };
    let mut sum = a.checked_add(b);
    if let Some(body) = body {
        let Some(n) = std::str::from_utf8(body)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
        else {
            return bad("body must be an integer");
        };
        sum = sum.and_then(|s| s.checked_add(n));
    }
    match sum {
        Some(s) => Response::text_owned(s.to_string()),
        None => bad("overflow"),
    }
}

/// The first `count` items, each with `total = price * quantity * m`.
fn items(req: &Request<'_>, dataset: &[Item]) -> Response {
    let Some(count) = req
        .param("count")
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|c| (1..=MAX_ITEMS).contains(c))
    else {
        return bad("count must be an integer from 1 to 50");
    };
    let m = match req.query_param("m") {
        None => 1,
        Some(v) => match v.parse::<i64>() {
            Ok(m) => m,
            Err(_) => return bad("m must be an integer"),
        },
    };
    match items_page(dataset, count, m) {
        Some(page) => Response::json(&page),
        None => bad("overflow"),
    }
}

/// The `/json/{count}?m=M` answer before serialization: the first `count` items, each with
/// `total = price * quantity * m`; `None` when a total overflows. Public so benchmarks measure
/// the body the handler sends.
pub fn items_page(dataset: &[Item], count: usize, m: i64) -> Option<impl Serialize + '_> {
    let mut out = Vec::with_capacity(count);
    for it in dataset.iter().take(count) {
        let total = it.price.checked_mul(it.quantity)?.checked_mul(m)?;
        out.push(ItemOut {
            id: it.id,
            name: &it.name,
            category: &it.category,
            price: it.price,
            quantity: it.quantity,
            active: it.active,
            tags: &it.tags,
            rating: &it.rating,
            total,
        });
    }
    let count = out.len();
    Some(Items { items: out, count })
}

fn bad(why: &'static str) -> Response {
    Response::text(why).status(400)
}

/// Counts upload bytes as they stream in.
struct Counter(u64);

impl BodySink for Counter {
    fn data(&mut self, chunk: &[u8]) {
        self.0 += chunk.len() as u64;
    }
    fn finish(self: Box<Self>, _req: &Request<'_>) -> Response {
        Response::text_owned(self.0.to_string())
    }
}
