//! The PostgreSQL routes of HttpArena's actix entry (`frameworks/actix/src/main.rs`):
//! `/async-db` on a deadpool-postgres pool (`RecyclingMethod::Fast`, `prepare_cached`), and
//! the newer entry's crud API (`/crud/items`, `/crud/items/{id}`) with an in-process DashMap
//! cache-aside on single-item reads (200 ms absolute TTL, `X-Cache: HIT`/`MISS`, dropped on
//! PUT and POST), as HttpArena's crud implementation page asks. And `/fortunes`, which no
//! HttpArena entry serves: TechEmpower's fortunes test on the `fortune` table of the database
//! given (the arena's holds HttpArena's 200 rows), with linerate's demo's contract
//! (frameworks/Rust/linerate/src/world.rs): the rows plus id 0 added at request time, sorted by
//! message, as TechEmpower's HTML page with `& < > " '` escaped by name.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use actix_web::error::ErrorInternalServerError;
use actix_web::http::header::ContentType;
use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use dashmap::DashMap;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use serde::{Deserialize, Serialize};
use tokio_postgres::{NoTls, Row};

use crate::routes::{ok, reply};

/// How long a cached single-item read is served (HttpArena: 200 ms absolute expiration).
const CACHE_TTL: Duration = Duration::from_millis(200);
/// Pool connections per worker when `DATABASE_MAX_CONN` is not set: HttpArena's harness gives
/// 256 to a server on 62 CPUs, about four per CPU.
const CONNS_PER_WORKER: usize = 4;

const COLUMNS: &str =
    "id, name, category, price, quantity, active, tags, rating_score, rating_count";

/// The pool and the crud cache, shared by every worker.
pub struct Db {
    pool: Pool,
    cache: DashMap<i32, (Instant, Bytes)>,
}

impl Db {
    /// A pool on `url` (opened lazily), sized from `DATABASE_MAX_CONN`, else
    /// [`CONNS_PER_WORKER`] per worker.
    pub fn new(url: &str, workers: usize) -> Result<Db, String> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|e| format!("--database-url: {e}"))?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let size = std::env::var("DATABASE_MAX_CONN")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(CONNS_PER_WORKER * workers);
        let pool = Pool::builder(manager)
            .max_size(size)
            .build()
            .map_err(|e| format!("database pool: {e}"))?;
        Ok(Db {
            pool,
            cache: DashMap::new(),
        })
    }

    async fn client(&self) -> actix_web::Result<Object> {
        self.pool.get().await.map_err(ErrorInternalServerError)
    }

    /// `sql` prepared (once per connection) and run with `params`.
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> actix_web::Result<Vec<Row>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(sql)
            .await
            .map_err(ErrorInternalServerError)?;
        client
            .query(&stmt, params)
            .await
            .map_err(ErrorInternalServerError)
    }
}

#[derive(Serialize)]
struct Rating {
    score: i32,
    count: i32,
}

/// A row of `items`, its rating nested as HttpArena's JSON has it.
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

impl From<&Row> for Item {
    fn from(row: &Row) -> Item {
        Item {
            id: row.get(0),
            name: row.get(1),
            category: row.get(2),
            price: row.get(3),
            quantity: row.get(4),
            active: row.get(5),
            tags: row.get(6),
            rating: Rating {
                score: row.get(7),
                count: row.get(8),
            },
        }
    }
}

fn json(status: StatusCode, body: &impl Serialize) -> actix_web::Result<HttpResponse> {
    let bytes = serde_json::to_vec(body).map_err(ErrorInternalServerError)?;
    Ok(reply(status).content_type(ContentType::json()).body(bytes))
}

#[derive(Deserialize)]
pub struct PriceRange {
    min: Option<i32>,
    max: Option<i32>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct Items {
    items: Vec<Item>,
    count: usize,
}

/// GET /async-db?min&max&limit: items priced in [min, max] (defaults 10, 50), at most
/// `limit` (default 50, clamped to 1..=50).
pub async fn async_db(
    db: web::Data<Db>,
    q: web::Query<PriceRange>,
) -> actix_web::Result<HttpResponse> {
    let (min, max) = (q.min.unwrap_or(10), q.max.unwrap_or(50));
    let limit = q.limit.unwrap_or(50).clamp(1, 50);
    let sql = format!("SELECT {COLUMNS} FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3");
    let rows = db.query(&sql, &[&min, &max, &limit]).await?;
    let items: Vec<Item> = rows.iter().map(Item::from).collect();
    json(
        StatusCode::OK,
        &Items {
            count: items.len(),
            items,
        },
    )
}

#[derive(Deserialize)]
pub struct Page {
    category: Option<String>,
    page: Option<i64>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct PageBody {
    items: Vec<Item>,
    total: usize,
    page: i64,
    limit: i64,
}

/// GET /crud/items?category&page&limit: one page of a category by id (defaults
/// electronics, 1, 10; limit at most 50); `total` is the page's item count.
pub async fn list(db: web::Data<Db>, q: web::Query<Page>) -> actix_web::Result<HttpResponse> {
    let category = q.category.as_deref().unwrap_or("electronics");
    let page = q.page.unwrap_or(1).max(1);
    let limit = q.limit.unwrap_or(10).clamp(1, 50);
    let offset = (page - 1) * limit;
    let sql =
        format!("SELECT {COLUMNS} FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3");
    let rows = db.query(&sql, &[&category, &limit, &offset]).await?;
    let items: Vec<Item> = rows.iter().map(Item::from).collect();
    json(
        StatusCode::OK,
        &PageBody {
            total: items.len(),
            items,
            page,
            limit,
        },
    )
}

/// GET /crud/items/{id}: cache-aside, `X-Cache: HIT` within the TTL, else read, cached and
/// `X-Cache: MISS`; 404 for no such item (not cached).
pub async fn read(db: web::Data<Db>, id: web::Path<i32>) -> actix_web::Result<HttpResponse> {
    let id = id.into_inner();
    let cached = db
        .cache
        .get(&id)
        .filter(|e| e.0 > Instant::now())
        .map(|e| e.1.clone());
    if let Some(body) = cached {
        return Ok(ok()
            .content_type(ContentType::json())
            .insert_header(("X-Cache", "HIT"))
            .body(body));
    }
    let sql = format!("SELECT {COLUMNS} FROM items WHERE id = $1");
    let rows = db.query(&sql, &[&id]).await?;
    let Some(row) = rows.first() else {
        return Ok(reply(StatusCode::NOT_FOUND).finish());
    };
    let body = Bytes::from(serde_json::to_vec(&Item::from(row)).map_err(ErrorInternalServerError)?);
    db.cache
        .insert(id, (Instant::now() + CACHE_TTL, body.clone()));
    Ok(ok()
        .content_type(ContentType::json())
        .insert_header(("X-Cache", "MISS"))
        .body(body))
}

#[derive(Deserialize)]
pub struct NewItem {
    id: i32,
    name: String,
    category: String,
    price: i32,
    quantity: i32,
}

/// POST /crud/items: an upsert on id (a new row active, untagged, unrated); 201 with the row.
pub async fn create(
    db: web::Data<Db>,
    item: web::Json<NewItem>,
) -> actix_web::Result<HttpResponse> {
    let sql = format!(
        "INSERT INTO items ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, true, '[]', 0, 0) \
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, category = EXCLUDED.category, \
         price = EXCLUDED.price, quantity = EXCLUDED.quantity RETURNING {COLUMNS}"
    );
    let rows = db
        .query(
            &sql,
            &[
                &item.id,
                &item.name,
                &item.category,
                &item.price,
                &item.quantity,
            ],
        )
        .await?;
    db.cache.remove(&item.id);
    match rows.first() {
        Some(row) => json(StatusCode::CREATED, &Item::from(row)),
        None => Err(ErrorInternalServerError("the upsert returned no row")),
    }
}

#[derive(Deserialize)]
pub struct Changes {
    name: String,
    price: i32,
    quantity: i32,
}

/// PUT /crud/items/{id}: name, price and quantity updated, the cached copy dropped; 200 with
/// the row, 404 for no such item.
pub async fn update(
    db: web::Data<Db>,
    id: web::Path<i32>,
    changes: web::Json<Changes>,
) -> actix_web::Result<HttpResponse> {
    let id = id.into_inner();
    let sql = format!(
        "UPDATE items SET name = $1, price = $2, quantity = $3 WHERE id = $4 RETURNING {COLUMNS}"
    );
    let rows = db
        .query(
            &sql,
            &[&changes.name, &changes.price, &changes.quantity, &id],
        )
        .await?;
    db.cache.remove(&id);
    match rows.first() {
        Some(row) => json(StatusCode::OK, &Item::from(row)),
        None => Ok(reply(StatusCode::NOT_FOUND).finish()),
    }
}

/// The fortune TechEmpower's verifier expects added at request time (id 0).
const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

/// `s` with `& < > " '` written as `&amp; &lt; &gt; &quot; &#39;` (named entities, as
/// linerate's demo writes them: HttpArena's check looks for `&lt;script&gt;`).
fn escape_html(out: &mut String, s: &str) {
    let mut last = 0;
    for (i, b) in s.bytes().enumerate() {
        let entity = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&s[last..i]);
        out.push_str(entity);
        last = i + 1;
    }
    out.push_str(&s[last..]);
}

/// TechEmpower's fortunes page for `fortunes`, in the order given.
fn fortunes_page(fortunes: &[(i32, String)]) -> String {
    let mut html = String::with_capacity(160 + fortunes.len() * 96);
    html.push_str(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
         <tr><th>id</th><th>message</th></tr>",
    );
    for (id, message) in fortunes {
        let _ = write!(html, "<tr><td>{id}</td><td>");
        escape_html(&mut html, message);
        html.push_str("</td></tr>");
    }
    html.push_str("</table></body></html>");
    html
}

/// GET /fortunes: every row of `fortune` (a prepared statement) and the one added now,
/// sorted by message, as HTML.
pub async fn fortunes(db: web::Data<Db>) -> actix_web::Result<HttpResponse> {
    let rows = db.query("SELECT id, message FROM fortune", &[]).await?;
    let mut list: Vec<(i32, String)> = Vec::with_capacity(rows.len() + 1);
    for row in &rows {
        list.push((
            row.try_get(0).map_err(ErrorInternalServerError)?,
            row.try_get(1).map_err(ErrorInternalServerError)?,
        ));
    }
    list.push((0, ADDED_FORTUNE.to_string()));
    list.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    Ok(ok()
        .content_type(ContentType::html())
        .body(fortunes_page(&list)))
}

#[cfg(test)]
mod tests {
    use super::{escape_html, fortunes_page};

    #[test]
    fn html_is_escaped_by_name() {
        let mut out = String::new();
        escape_html(&mut out, "<script>alert(\"a & b's\")</script> ok");
        assert_eq!(
            out,
            "&lt;script&gt;alert(&quot;a &amp; b&#39;s&quot;)&lt;/script&gt; ok"
        );
    }

    #[test]
    fn the_page_is_techempowers() {
        let page = fortunes_page(&[(0, "a<b".into()), (7, "フレームワーク".into())]);
        assert_eq!(
            page,
            "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
             <tr><th>id</th><th>message</th></tr><tr><td>0</td><td>a&lt;b</td></tr>\
             <tr><td>7</td><td>フレームワーク</td></tr></table></body></html>"
        );
    }
}
