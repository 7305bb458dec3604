//! HttpArena's database endpoints over its `items` table: `GET /async-db?min=&max=&limit=`
//! (items in a price range; an empty list, not an error, when the database is unreachable)
//! and `/crud/items` (a page of a category, one item through a 200 ms cache-aside with
//! `X-Cache: MISS|HIT` — the library's `linerate_server::kv`, in memory and, with `serve
//! --cache`, in Redis or memcached — `POST` upsert → 201, `PUT` → 200 and the cached copy
//! dropped).
//!
//! Owns the parameter rules, the statements and the cache; an item's JSON is written from
//! its row by `item_json.rs`.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use linerate_postgres::{Builder, StatementId};
use linerate_server::kv::{Cache, TierConfig, aside};
use linerate_server::{Method, OwnedRequest, Response, Router, Spawn};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;

use super::world::{DbError, error_response};
use super::{Db, item_json};

/// How long a cached item is served (HttpArena: 200 ms from when it was read).
pub const ITEM_TTL: Duration = Duration::from_millis(200);
/// The item cache's memory tier, in bytes (an item's JSON is about 200 bytes).
pub const ITEM_CACHE_BYTES: u64 = 32 << 20;
/// The item cache's namespace in a shared tier (its keys are `crud-items:GENERATION:ID`).
pub const CACHE_NAMESPACE: &str = "crud-items";
/// `/async-db` defaults and the `limit` bound (HttpArena).
pub const ASYNC_DB_MIN: i32 = 10;
pub const ASYNC_DB_MAX: i32 = 50;
pub const MAX_LIMIT: i64 = 50;
/// `/crud/items` list defaults.
pub const LIST_CATEGORY: &str = "electronics";
pub const LIST_LIMIT: i64 = 10;

/// The columns [`item_json::write_item`] reads, in its order.
const ITEM_COLUMNS: &str = "id, name, category, price, quantity, active, tags, \
     rating_score, rating_count";

/// The statements HttpArena's endpoints run, as registered on the pool.
#[derive(Clone, Copy, Debug)]
pub struct Statements {
    /// Items with a price in `$1..=$2`, at most `$3`.
    pub items_by_price: StatementId,
    /// One item by id.
    pub item: StatementId,
    /// A page of one category's items, by id (`$2` rows from `$3`).
    pub items_page: StatementId,
    /// Creates an item, or changes name, price and quantity of an existing one.
    pub upsert_item: StatementId,
    /// Changes name, price and quantity of item `$1`; 0 rows when there is none.
    pub update_item: StatementId,
}

impl Statements {
    /// Registers them on `builder`.
    pub fn register(builder: &mut Builder) -> Statements {
        let select = format!("SELECT {ITEM_COLUMNS} FROM items");
        Statements {
            items_by_price: builder.prepare(
                "items_by_price",
                &format!("{select} WHERE price BETWEEN $1 AND $2 LIMIT $3"),
            ),
            item: builder.prepare("item", &format!("{select} WHERE id = $1")),
            items_page: builder.prepare(
                "items_page",
                &format!("{select} WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3"),
            ),
            // What the body does not give (active, tags, rating) starts as HttpArena's
            // reference sets it; an existing item keeps its category, as there.
            upsert_item: builder.prepare(
                "upsert_item",
                "INSERT INTO items (id, name, category, price, quantity, active, tags, \
                 rating_score, rating_count) VALUES ($1, $2, $3, $4, $5, true, '[\"bench\"]', 0, 0) \
                 ON CONFLICT (id) DO UPDATE SET name = $2, price = $4, quantity = $5",
            ),
            update_item: builder.prepare(
                "update_item",
                "UPDATE items SET name = $2, price = $3, quantity = $4 WHERE id = $1",
            ),
        }
    }
}

/// `POST /crud/items`'s body.
#[derive(Deserialize, Serialize)]
struct NewItem {
    id: i32,
    name: String,
    category: String,
    price: i32,
    quantity: i32,
}

/// `PUT /crud/items/{id}`'s body (a `category` is accepted and, as in HttpArena's reference,
/// not changed).
#[derive(Deserialize)]
pub(super) struct ItemChange {
    pub(super) name: String,
    pub(super) price: i32,
    pub(super) quantity: i32,
}

#[derive(Serialize)]
struct Changed<'a> {
    id: i32,
    name: &'a str,
    price: i32,
    quantity: i32,
}

/// A query parameter: `default` when absent, `Err` (a 400) when not an integer.
fn int_param(req: &OwnedRequest, name: &str, default: i64) -> Result<i64, Response> {
    match req.query_param(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| Response::text_owned(format!("{name} must be an integer\n")).status(400)),
    }
}

/// An i64 parameter as an `i32` column value (out of range clamps: no row matches beyond).
fn clamp_i32(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// The item cache: the library's cache-aside (`linerate_server::kv`), memory only or in front
/// of the Redis/memcached tier `serve --cache` names; keys are item ids.
pub fn item_cache(tier: Option<TierConfig>) -> std::io::Result<Cache> {
    let mut b = Cache::builder(CACHE_NAMESPACE).memory_bytes(ITEM_CACHE_BYTES);
    if let Some(t) = tier {
        b = b.tier(t);
    }
    b.build()
}

pub(super) fn not_found() -> Response {
    Response::text("no such item\n").status(404)
}

pub(super) fn bad_json(e: serde_json::Error) -> Response {
    Response::text_owned(format!("not a valid item: {e}\n")).status(400)
}

/// `GET /async-db`: the rows written straight into `{"items":[…],"count":N}`
/// (`item_json.rs`).
async fn async_db(db: Arc<Db>, st: Statements, min: i32, max: i32, limit: i64) -> Response {
    let found = async {
        let conn = db.pool.get()?;
        Ok::<_, DbError>(conn.query(st.items_by_price, &[&min, &max, &limit]).await?)
    }
    .await;
    let rows = found.unwrap_or_else(|e| {
        // HttpArena's rule: an unreachable database is an empty answer, not an error.
        if let DbError::Query(e) = e {
            tracing::warn!(
                error = linerate_postgres::describe(&e),
                "async-db query failed"
            );
        }
        Vec::new()
    });
    Response::json_written(|out| {
        write_items(&rows, out);
        out.extend_from_slice(b",\"count\":");
        out.extend_from_slice(itoa::Buffer::new().format(rows.len()).as_bytes());
        out.push(b'}');
    })
}

/// Opens an answer object with its `"items"` array: `{"items":[…]`.
fn write_items(rows: &[Row], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"items\":[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item_json::write_item(row, out);
    }
    out.push(b']');
}

/// `GET /crud/items/{id}`: from the cache (`X-Cache: HIT`) or the database (`MISS`, then kept
/// for [`ITEM_TTL`]). A cache tier that is down is a miss, never an error.
async fn read(db: Arc<Db>, st: Statements, id: i32) -> Response {
    let key = id.to_string();
    aside(&db.items, &key, ITEM_TTL, "application/json", || {
        item_json(&db, &st, id)
    })
    .await
}

/// Item `id` as JSON, read from the database: what both item caches fill with (a 404
/// answer when there is no such item).
pub(super) async fn item_json(db: &Db, st: &Statements, id: i32) -> Result<Vec<u8>, Response> {
    let result = async {
        let conn = db.pool.get()?;
        Ok::<_, DbError>(conn.query_opt(st.item, &[&id]).await?)
    }
    .await;
    match result {
        Ok(Some(row)) => {
            let mut json = Vec::with_capacity(256);
            item_json::write_item(&row, &mut json);
            Ok(json)
        }
        Ok(None) => Err(not_found()),
        Err(e) => Err(error_response(e)),
    }
}

/// Writes `change` to item `id` and, when a row changed, drops the item from every cache:
/// how many rows changed (0: no such item).
pub(super) async fn update(
    db: &Db,
    st: &Statements,
    id: i32,
    change: &ItemChange,
) -> Result<u64, DbError> {
    let conn = db.pool.get()?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&id, &change.name, &change.price, &change.quantity];
    let n = conn.execute(st.update_item, &params).await?;
    if n > 0 {
        db.invalidate_item(id).await;
    }
    Ok(n)
}

async fn list(db: Arc<Db>, st: Statements, category: String, page: i64, limit: i64) -> Response {
    let offset = (page - 1) * limit;
    let result = async {
        let conn = db.pool.get()?;
        let rows = conn
            .query(st.items_page, &[&category, &limit, &offset])
            .await?;
        Ok::<_, DbError>(rows)
    }
    .await;
    match result {
        // `{"items":[…],"total":N,"page":P,"limit":L}`, as serde_json wrote it.
        Ok(rows) => Response::json_written(|out| {
            write_items(&rows, out);
            let mut n = itoa::Buffer::new();
            out.extend_from_slice(b",\"total\":");
            out.extend_from_slice(n.format(rows.len()).as_bytes());
            out.extend_from_slice(b",\"page\":");
            out.extend_from_slice(n.format(page).as_bytes());
            out.extend_from_slice(b",\"limit\":");
            out.extend_from_slice(n.format(limit).as_bytes());
            out.push(b'}');
        }),
        Err(e) => error_response(e),
    }
}

/// `POST /crud/items`.
async fn create(db: Arc<Db>, st: Statements, item: NewItem) -> Response {
    let result = async {
        let conn = db.pool.get()?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] = [
            &item.id,
            &item.name,
            &item.category,
            &item.price,
            &item.quantity,
        ];
        Ok::<_, DbError>(conn.execute(st.upsert_item, &params).await?)
    }
    .await;
    match result {
        Ok(_) => {
            db.invalidate_item(item.id).await;
            Response::json(&item).status(201)
        }
        Err(e) => error_response(e),
    }
}

/// `PUT /crud/items/{id}`.
async fn change(db: Arc<Db>, st: Statements, id: i32, change: ItemChange) -> Response {
    match update(&db, &st, id, &change).await {
        Ok(0) => not_found(),
        Ok(_) => Response::json(&Changed {
            id,
            name: &change.name,
            price: change.price,
            quantity: change.quantity,
        }),
        Err(e) => error_response(e),
    }
}

/// The item id in the path: an `i32`, else no such item.
pub(super) fn path_id(req: &OwnedRequest) -> Option<i32> {
    req.param("id")?.parse().ok()
}

/// The routes that read the `items` table here (`/api/items/{id}` in `stack.rs` too).
pub const ROUTES: &[(Method, &str)] = &[
    (Method::Get, "/async-db"),
    (Method::Get, "/crud/items/{id}"),
    (Method::Get, "/crud/items"),
    (Method::Post, "/crud/items"),
    (Method::Put, "/crud/items/{id}"),
];

/// `router` with `/async-db` and `/crud/items`: answering 503 where the database has no
/// `items` table (`tables.rs`).
pub fn mount<S: Spawn + Clone>(router: Router, db: Arc<Db>, spawn: S) -> Router {
    let Some(st) = db.items_st else {
        return super::tables::missing(router, "items", ROUTES);
    };
    let dbs: [Arc<Db>; 5] = std::array::from_fn(|_| db.clone());
    let [d_async, d_read, d_list, d_create, d_change] = dbs;
    router
        .get_async("/async-db", spawn.clone(), move |req: OwnedRequest| {
            let db = d_async.clone();
            let params = (|| {
                let min = int_param(&req, "min", ASYNC_DB_MIN as i64)?;
                let max = int_param(&req, "max", ASYNC_DB_MAX as i64)?;
                let limit = int_param(&req, "limit", MAX_LIMIT)?.clamp(1, MAX_LIMIT);
                Ok::<_, Response>((clamp_i32(min), clamp_i32(max), limit))
            })();
            async move {
                match params {
                    Ok((min, max, limit)) => async_db(db, st, min, max, limit).await,
                    Err(bad) => bad,
                }
            }
        })
        .get_async(
            "/crud/items/{id}",
            spawn.clone(),
            move |req: OwnedRequest| {
                let db = d_read.clone();
                let id = path_id(&req);
                async move {
                    match id {
                        Some(id) => read(db, st, id).await,
                        None => not_found(),
                    }
                }
            },
        )
        .get_async("/crud/items", spawn.clone(), move |req: OwnedRequest| {
            let db = d_list.clone();
            let category = req
                .query_param("category")
                .unwrap_or_else(|| LIST_CATEGORY.to_string());
            let params = (|| {
                let page = int_param(&req, "page", 1)?;
                let limit = int_param(&req, "limit", LIST_LIMIT)?.clamp(1, MAX_LIMIT);
                if !(1..=i64::MAX / MAX_LIMIT).contains(&page) {
                    return Err(Response::text("page must be at least 1\n").status(400));
                }
                Ok((page, limit))
            })();
            async move {
                match params {
                    Ok((page, limit)) => list(db, st, category, page, limit).await,
                    Err(bad) => bad,
                }
            }
        })
        .route_async(
            Method::Post,
            "/crud/items",
            spawn.clone(),
            move |req: OwnedRequest| {
                let db = d_create.clone();
                let item = serde_json::from_slice::<NewItem>(req.body());
                async move {
                    match item {
                        Ok(item) => create(db, st, item).await,
                        Err(e) => bad_json(e),
                    }
                }
            },
        )
        .route_async(
            Method::Put,
            "/crud/items/{id}",
            spawn,
            move |req: OwnedRequest| {
                let db = d_change.clone();
                let id = path_id(&req);
                let body = serde_json::from_slice::<ItemChange>(req.body());
                async move {
                    match (id, body) {
                        (None, _) => not_found(),
                        (Some(_), Err(e)) => bad_json(e),
                        (Some(id), Ok(c)) => change(db, st, id, c).await,
                    }
                }
            },
        )
}
