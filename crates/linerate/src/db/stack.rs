//! HttpArena's production-stack app endpoints: `GET /api/items/{id}` (cache-aside, `X-Cache:
//! MISS|HIT`, kept [`API_ITEM_TTL`]), `POST /api/items/{id}` (name, price and quantity
//! changed, the cached copies dropped, 204), and `GET /api/me` (the `users` row of the bearer
//! token's `sub`, kept [`USER_TTL`]).
//!
//! Owns the routes and reading `sub`. It must not verify the token: the edge's `[[site.jwt]]`
//! rule does that before the request reaches a route (docs/config.md), so the app only
//! decodes the payload it was handed. Served without such a rule, `/api/me` trusts any token.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use linerate_postgres::{Builder, StatementId};
use linerate_server::kv::{Cache, TierConfig, aside};
use linerate_server::{Method, OwnedRequest, Response, Router, Spawn};
use serde::Serialize;
use tokio_postgres::Row;

use super::Db;
use super::items::{ItemChange, Statements as ItemStatements, bad_json, not_found, path_id};
use super::world::{DbError, error_response};

/// How long a cached item is served (HttpArena: at most 1 s).
pub const API_ITEM_TTL: Duration = Duration::from_secs(1);
/// How long a cached user is served (HttpArena: at most 30 s).
pub const USER_TTL: Duration = Duration::from_secs(30);
/// The cache's memory tier, in bytes (items of about 200 bytes, and a few users).
pub const STACK_CACHE_BYTES: u64 = 32 << 20;
/// The cache's namespace in a shared tier (keys `stack:GENERATION:item:ID`, `…:user:ID`).
pub const CACHE_NAMESPACE: &str = "stack";
/// The longest token payload read for `sub`, in bytes: the edge refuses tokens over 8 KiB,
/// so a longer one did not come through it.
pub const MAX_PAYLOAD_BYTES: usize = 8 << 10;

/// The statement these endpoints add to the pool (items use [`super::items::Statements`]).
#[derive(Clone, Copy, Debug)]
pub struct Statements {
    /// One user by id.
    pub user: StatementId,
}

impl Statements {
    /// Registers it on `builder`.
    pub fn register(builder: &mut Builder) -> Statements {
        Statements {
            user: builder.prepare(
                "user",
                "SELECT id, name, email, plan FROM users WHERE id = $1",
            ),
        }
    }
}

/// One user as HttpArena's JSON has it.
#[derive(Serialize, Debug, PartialEq)]
pub struct User {
    pub id: i32,
    pub name: String,
    pub email: String,
    pub plan: String,
}

impl User {
    fn from_row(r: &Row) -> User {
        User {
            id: r.get(0),
            name: r.get(1),
            email: r.get(2),
            plan: r.get(3),
        }
    }
}

/// The cache for items and users: memory only, or in front of `serve --cache-tier`'s tier.
pub fn stack_cache(tier: Option<TierConfig>) -> std::io::Result<Cache> {
    let mut b = Cache::builder(CACHE_NAMESPACE).memory_bytes(STACK_CACHE_BYTES);
    if let Some(t) = tier {
        b = b.tier(t);
    }
    b.build()
}

/// The cache key of item `id` (HttpArena's reference names it so).
pub fn item_key(id: i32) -> String {
    format!("item:{id}")
}

/// Why `/api/me` has no user id.
#[derive(Debug, PartialEq, Eq)]
pub enum NoSub {
    /// No `Authorization: Bearer` token, or one that is not three parts with a JSON payload
    /// (a 401: the edge lets none of these through).
    NoToken,
    /// A payload without a `sub` that is a user id (a 404: no such user).
    NotAUser,
}

/// The `sub` claim of an `Authorization` field's bearer token, as a user id (a string of
/// digits, as HttpArena's token has it, or a JSON integer). The signature is not checked: that
/// is the edge's job (RFC 6750 §2.1 for the field; the scheme name is case-insensitive, RFC
/// 9110 §11.1).
pub fn bearer_sub(authorization: Option<&[u8]>) -> Result<i32, NoSub> {
    let field = authorization.ok_or(NoSub::NoToken)?;
    let field = std::str::from_utf8(field).map_err(|_| NoSub::NoToken)?;
    let (scheme, token) = field.trim().split_once(' ').ok_or(NoSub::NoToken)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(NoSub::NoToken);
    }
    let mut parts = token.trim_start().split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(NoSub::NoToken);
    };
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(NoSub::NoToken);
    }
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| NoSub::NoToken)?;
    let claims: serde_json::Value = serde_json::from_slice(&json).map_err(|_| NoSub::NoToken)?;
    let sub = claims.as_object().ok_or(NoSub::NoToken)?.get("sub");
    match sub {
        Some(serde_json::Value::String(s)) => s.parse().map_err(|_| NoSub::NotAUser),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or(NoSub::NotAUser),
        _ => Err(NoSub::NotAUser),
    }
}

/// `GET /api/items/{id}`.
async fn read_item(db: Arc<Db>, st: ItemStatements, id: i32) -> Response {
    aside(
        &db.stack,
        &item_key(id),
        API_ITEM_TTL,
        "application/json",
        || super::items::item_json(&db, &st, id),
    )
    .await
}

/// `POST /api/items/{id}`: 204, or 404 when there is no such item.
async fn write_item(db: Arc<Db>, st: ItemStatements, id: i32, change: ItemChange) -> Response {
    match super::items::update(&db, &st, id, &change).await {
        Ok(0) => not_found(),
        Ok(_) => Response::new(204),
        Err(e) => error_response(e),
    }
}

/// `GET /api/me`.
async fn me(db: Arc<Db>, st: Statements, id: i32) -> Response {
    aside(
        &db.stack,
        &format!("user:{id}"),
        USER_TTL,
        "application/json",
        || async {
            let result = async {
                let conn = db.pool.get()?;
                Ok::<_, DbError>(conn.query_opt(st.user, &[&id]).await?)
            }
            .await;
            match result {
                Ok(Some(row)) => {
                    serde_json::to_vec(&User::from_row(&row)).map_err(|_| Response::new(500))
                }
                Ok(None) => Err(no_user()),
                Err(e) => Err(error_response(e)),
            }
        },
    )
    .await
}

fn no_user() -> Response {
    Response::text("no such user\n").status(404)
}

/// The routes that read the `items` table here.
pub const ITEM_ROUTES: &[(Method, &str)] = &[
    (Method::Get, "/api/items/{id}"),
    (Method::Post, "/api/items/{id}"),
];

/// The route that reads the `users` table.
pub const USER_ROUTES: &[(Method, &str)] = &[(Method::Get, "/api/me")];

/// `router` with `/api/items/{id}` and `/api/me`: each answering 503 where the database has
/// not the table it reads (`tables.rs`).
pub fn mount<S: Spawn + Clone>(router: Router, db: Arc<Db>, spawn: S) -> Router {
    let router = match db.items_st {
        Some(st) => mount_items(router, db.clone(), st, spawn.clone()),
        None => super::tables::missing(router, "items", ITEM_ROUTES),
    };
    match db.stack_st {
        Some(st) => mount_me(router, db, st, spawn),
        None => super::tables::missing(router, "users", USER_ROUTES),
    }
}

/// `router` with `/api/items/{id}` (GET and POST).
fn mount_items<S: Spawn + Clone>(
    router: Router,
    db: Arc<Db>,
    st: ItemStatements,
    spawn: S,
) -> Router {
    let (d_read, d_write) = (db.clone(), db);
    router
        .get_async(
            "/api/items/{id}",
            spawn.clone(),
            move |req: OwnedRequest| {
                let db = d_read.clone();
                let id = path_id(&req);
                async move {
                    match id {
                        Some(id) => read_item(db, st, id).await,
                        None => not_found(),
                    }
                }
            },
        )
        .route_async(
            Method::Post,
            "/api/items/{id}",
            spawn.clone(),
            move |req: OwnedRequest| {
                let db = d_write.clone();
                let id = path_id(&req);
                let body = serde_json::from_slice::<ItemChange>(req.body());
                async move {
                    match (id, body) {
                        (None, _) => not_found(),
                        (Some(_), Err(e)) => bad_json(e),
                        (Some(id), Ok(c)) => write_item(db, st, id, c).await,
                    }
                }
            },
        )
}

/// `router` with `/api/me`.
fn mount_me<S: Spawn>(router: Router, db: Arc<Db>, st: Statements, spawn: S) -> Router {
    router.get_async("/api/me", spawn, move |req: OwnedRequest| {
        let db = db.clone();
        let sub = bearer_sub(req.header("authorization"));
        async move {
            match sub {
                Ok(id) => me(db, st, id).await,
                Err(NoSub::NoToken) => Response::text("a bearer token is needed\n")
                    .status(401)
                    .header("www-authenticate", "Bearer"),
                Err(NoSub::NotAUser) => no_user(),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(payload: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!(
            "Bearer {}.{}.c2ln",
            b64(r#"{"alg":"HS256","typ":"JWT"}"#),
            b64(payload)
        )
    }

    #[test]
    fn sub_from_the_bearer_payload() {
        let cases: &[(Option<String>, Result<i32, NoSub>)] = &[
            (Some(token(r#"{"sub":"42","name":"Alice Chen"}"#)), Ok(42)),
            (Some(token(r#"{"sub":7}"#)), Ok(7)),
            // RFC 9110 §11.1: the scheme is case-insensitive.
            (
                Some(token(r#"{"sub":"1"}"#).replace("Bearer", "bEaReR")),
                Ok(1),
            ),
            (Some(token(r#"{"sub":"alice"}"#)), Err(NoSub::NotAUser)),
            (Some(token(r#"{"sub":99999999999}"#)), Err(NoSub::NotAUser)),
            (Some(token(r#"{"name":"x"}"#)), Err(NoSub::NotAUser)),
            (Some(token(r#"["sub"]"#)), Err(NoSub::NoToken)),
            (None, Err(NoSub::NoToken)),
            (Some("Basic YTpi".into()), Err(NoSub::NoToken)),
            (
                Some("Bearer invalid.token.here".into()),
                Err(NoSub::NoToken),
            ),
            (Some("Bearer a.b".into()), Err(NoSub::NoToken)),
            (
                Some(format!("{}.d", token(r#"{"sub":"1"}"#))),
                Err(NoSub::NoToken),
            ),
        ];
        for (field, want) in cases {
            assert_eq!(
                &bearer_sub(field.as_deref().map(str::as_bytes)),
                want,
                "{field:?}"
            );
        }
    }

    #[test]
    fn users_serialize_as_httparena_shows_them() {
        let u = User {
            id: 42,
            name: "Alice Chen".into(),
            email: "alice@example.com".into(),
            plan: "pro".into(),
        };
        assert_eq!(
            serde_json::to_string(&u).unwrap(),
            r#"{"id":42,"name":"Alice Chen","email":"alice@example.com","plan":"pro"}"#
        );
    }
}
