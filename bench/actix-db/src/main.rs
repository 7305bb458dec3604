//! `actix-db`: the peer server for the database benchmarks (TechEmpower's /db, /queries,
//! /updates, /fortunes; HttpArena's /async-db), written the way TechEmpower's actix entries
//! write it: every actix worker thread opens its own tokio-postgres connection(s) when it
//! starts and prepares its statements there; the queries of one request are issued together
//! so tokio-postgres pipelines them on the connection.
//!
//! Usage: `actix-db --addr 127.0.0.1:PORT --workers N` with `DATABASE_URL` set (and,
//! optionally, `DATABASE_CONNECTIONS_PER_WORKER`, default 1).

use std::cell::{Cell, RefCell};
use std::process;
use std::time::Duration;

use actix_web::http::header::{HeaderValue, CONTENT_TYPE, SERVER};
use actix_web::http::{KeepAlive, StatusCode};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use askama::Template;
use futures_util::future::try_join_all;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio_postgres::{Client, NoTls, Statement};

const WORLD_SQL: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const FORTUNE_SQL: &str = "SELECT id, message FROM fortune";
const UPDATE_SQL: &str = "UPDATE world SET randomnumber = v.r \
     FROM unnest($1::int[], $2::int[]) AS v(id, r) WHERE world.id = v.id";
const ITEMS_SQL: &str = "SELECT id, name, category, price, quantity, active, tags, \
     rating_score, rating_count FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3";

const WORLD_ROWS: u32 = 10_000;
const MAX_QUERIES: i64 = 500;

const SERVER_NAME: HeaderValue = HeaderValue::from_static("actix");
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain");

/// One connection with its prepared statements.
struct Conn {
    client: Client,
    world: Statement,
    fortune: Statement,
    update: Statement,
    items: Statement,
}

/// A worker's own database state: its connection(s), used in turn, and its random numbers.
/// Built once per worker thread by `App::data_factory`, never shared between threads.
struct Db {
    conns: Vec<Conn>,
    next: Cell<usize>,
    rng: RefCell<SmallRng>,
}

#[derive(Serialize, Clone, Copy)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

struct Fortune {
    id: i32,
    message: String,
}

#[derive(Template)]
#[template(
    ext = "html",
    source = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
<tr><th>id</th><th>message</th></tr>\
{% for f in fortunes %}<tr><td>{{ f.id }}</td><td>{{ f.message }}</td></tr>{% endfor %}\
</table></body></html>"
)]
struct FortunesPage<'a> {
    fortunes: &'a [Fortune],
}

#[derive(Serialize)]
struct Item {
    id: i32,
    name: String,
    category: String,
    price: i32,
    quantity: i32,
    active: bool,
    tags: serde_json::Value,
    rating: Rating,
}

#[derive(Serialize)]
struct Rating {
    score: i32,
    count: i32,
}

#[derive(Serialize)]
struct Items {
    items: Vec<Item>,
    count: usize,
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

impl Conn {
    async fn open(url: &str) -> Result<Conn, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        // The connection task lives on this worker's own runtime.
        actix_rt::spawn(async move {
            let _ = connection.await;
        });
        let (world, fortune, update, items) = futures_util::try_join!(
            client.prepare(WORLD_SQL),
            client.prepare(FORTUNE_SQL),
            client.prepare(UPDATE_SQL),
            client.prepare(ITEMS_SQL),
        )?;
        Ok(Conn {
            client,
            world,
            fortune,
            update,
            items,
        })
    }

    async fn world(&self, id: i32) -> Result<World, tokio_postgres::Error> {
        let row = self.client.query_one(&self.world, &[&id]).await?;
        Ok(World {
            id: row.get(0),
            random_number: row.get(1),
        })
    }
}

impl Db {
    async fn open(url: &str, per_worker: usize) -> Db {
        let mut conns = Vec::with_capacity(per_worker);
        for _ in 0..per_worker {
            match Conn::open(url).await {
                Ok(c) => conns.push(c),
                Err(e) => fail(&format!("cannot connect to the database: {e}")),
            }
        }
        Db {
            conns,
            next: Cell::new(0),
            rng: RefCell::new(SmallRng::from_os_rng()),
        }
    }

    /// The next connection, round robin (one connection: always that one).
    fn conn(&self) -> &Conn {
        let i = self.next.get();
        self.next
            .set(if i + 1 == self.conns.len() { 0 } else { i + 1 });
        &self.conns[i]
    }

    fn random_id(&self) -> i32 {
        self.rng.borrow_mut().random_range(1..=WORLD_ROWS) as i32
    }

    /// `n` distinct ids in 1..=10000 (n ≤ 500).
    fn distinct_ids(&self, n: usize) -> Vec<i32> {
        let mut seen = [0u64; (WORLD_ROWS as usize).div_ceil(64) + 1];
        let mut ids = Vec::with_capacity(n);
        let mut rng = self.rng.borrow_mut();
        while ids.len() < n {
            let id = rng.random_range(1..=WORLD_ROWS) as usize;
            let (word, bit) = (id / 64, 1u64 << (id % 64));
            if seen[word] & bit == 0 {
                seen[word] |= bit;
                ids.push(id as i32);
            }
        }
        ids
    }
}

/// The value of `name` in a query string, if present.
fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

/// `queries=`: missing, not an integer or below 1 → 1; above 500 → 500.
fn query_count(req: &HttpRequest) -> usize {
    match param(req.query_string(), "queries").and_then(|v| v.parse::<i64>().ok()) {
        Some(n) => n.clamp(1, MAX_QUERIES) as usize,
        None => 1,
    }
}

fn respond(content_type: HeaderValue, body: Vec<u8>) -> HttpResponse<Vec<u8>> {
    let mut res = HttpResponse::with_body(StatusCode::OK, body);
    let headers = res.headers_mut();
    headers.insert(SERVER, SERVER_NAME);
    headers.insert(CONTENT_TYPE, content_type);
    res
}

fn json<T: Serialize>(value: &T) -> HttpResponse<Vec<u8>> {
    respond(JSON, serde_json::to_vec(value).expect("serializable"))
}

fn db_error(e: tokio_postgres::Error) -> actix_web::Error {
    actix_web::error::ErrorInternalServerError(e)
}

async fn db(db: web::Data<Db>) -> actix_web::Result<HttpResponse<Vec<u8>>> {
    let world = db.conn().world(db.random_id()).await.map_err(db_error)?;
    Ok(json(&world))
}

async fn queries(db: web::Data<Db>, req: HttpRequest) -> actix_web::Result<HttpResponse<Vec<u8>>> {
    let n = query_count(&req);
    let conn = db.conn();
    // All n queries are sent before any answer is awaited: tokio-postgres pipelines them.
    let worlds = try_join_all((0..n).map(|_| conn.world(db.random_id())))
        .await
        .map_err(db_error)?;
    Ok(json(&worlds))
}

async fn updates(db: web::Data<Db>, req: HttpRequest) -> actix_web::Result<HttpResponse<Vec<u8>>> {
    let n = query_count(&req);
    let conn = db.conn();
    let ids = db.distinct_ids(n);
    let mut worlds = try_join_all(ids.iter().map(|&id| conn.world(id)))
        .await
        .map_err(db_error)?;
    {
        let mut rng = db.rng.borrow_mut();
        for w in &mut worlds {
            w.random_number = rng.random_range(1..=WORLD_ROWS) as i32;
        }
    }
    // One statement for all rows, in id order (a fixed lock order between transactions).
    let mut sorted = worlds.clone();
    sorted.sort_unstable_by_key(|w| w.id);
    let (ids, numbers): (Vec<i32>, Vec<i32>) =
        sorted.iter().map(|w| (w.id, w.random_number)).unzip();
    conn.client
        .execute(&conn.update, &[&ids, &numbers])
        .await
        .map_err(db_error)?;
    Ok(json(&worlds))
}

async fn fortunes(db: web::Data<Db>) -> actix_web::Result<HttpResponse<Vec<u8>>> {
    let conn = db.conn();
    let rows = conn
        .client
        .query(&conn.fortune, &[])
        .await
        .map_err(db_error)?;
    let mut fortunes = Vec::with_capacity(rows.len() + 1);
    fortunes.extend(rows.iter().map(|r| Fortune {
        id: r.get(0),
        message: r.get(1),
    }));
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.".to_owned(),
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(&b.message));
    let page = FortunesPage {
        fortunes: &fortunes,
    };
    let mut body = Vec::with_capacity(2048);
    page.write_into(&mut body)
        .map_err(actix_web::error::ErrorInternalServerError)?;
    Ok(respond(HTML, body))
}

async fn async_db(db: web::Data<Db>, req: HttpRequest) -> HttpResponse<Vec<u8>> {
    let q = req.query_string();
    let min = param(q, "min")
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(10);
    let max = param(q, "max")
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(50);
    let limit = param(q, "limit")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(50)
        .clamp(1, 50);
    let conn = db.conn();
    let items = match conn.client.query(&conn.items, &[&min, &max, &limit]).await {
        Ok(rows) => rows
            .iter()
            .map(|r| Item {
                id: r.get(0),
                name: r.get(1),
                category: r.get(2),
                price: r.get(3),
                quantity: r.get(4),
                active: r.get(5),
                tags: r.get(6),
                rating: Rating {
                    score: r.get(7),
                    count: r.get(8),
                },
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let count = items.len();
    json(&Items { items, count })
}

async fn plaintext() -> HttpResponse<Vec<u8>> {
    respond(TEXT, b"Hello, World!".to_vec())
}

async fn json_hello() -> HttpResponse<Vec<u8>> {
    json(&Message {
        message: "Hello, World!",
    })
}

fn fail(msg: &str) -> ! {
    eprintln!("actix-db: {msg}");
    process::exit(1)
}

fn usage() -> ! {
    fail("usage: actix-db --addr HOST:PORT [--workers N]  (env DATABASE_URL required)")
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mut addr = None;
    let mut workers = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--addr" => addr = Some(args.next().unwrap_or_else(|| usage())),
            "--workers" => {
                workers = match args.next().and_then(|v| v.parse().ok()) {
                    Some(n) if n >= 1 => n,
                    _ => usage(),
                }
            }
            "-h" | "--help" => usage(),
            _ => usage(),
        }
    }
    let addr = addr.unwrap_or_else(|| usage());
    let url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| fail("DATABASE_URL is not set"));
    let per_worker = match std::env::var("DATABASE_CONNECTIONS_PER_WORKER") {
        Err(_) => 1,
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => fail("DATABASE_CONNECTIONS_PER_WORKER must be an integer ≥ 1"),
        },
    };

    // Fail fast, with one line, when the database cannot be reached (or the tables are
    // missing): open and drop one connection before any worker starts.
    drop(
        Conn::open(&url)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot connect to the database: {e}"))),
    );

    let server = HttpServer::new(move || {
        let url = url.clone();
        App::new()
            .data_factory(move || {
                let url = url.clone();
                async move { Ok::<_, ()>(Db::open(&url, per_worker).await) }
            })
            .route("/db", web::get().to(db))
            .route("/queries", web::get().to(queries))
            .route("/updates", web::get().to(updates))
            .route("/fortunes", web::get().to(fortunes))
            .route("/async-db", web::get().to(async_db))
            .route("/plaintext", web::get().to(plaintext))
            .route("/json", web::get().to(json_hello))
    })
    .workers(workers)
    .backlog(1024)
    .keep_alive(KeepAlive::Os)
    .client_request_timeout(Duration::ZERO)
    .bind(&addr)
    .unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")));
    println!("actix-db: listening on http://{addr} ({workers} workers, {per_worker} database connection(s) each)");
    server.run().await
}
