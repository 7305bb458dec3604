//! A small users service, written the way linerate's docs teach: JSON routes on PostgreSQL
//! through `linerate-postgres`, a bearer-token layer on the `/users` group, CORS, request ids
//! and tracing around everything, typed extraction with `?`, and every error (the service's,
//! the extractors' and the server's own 404/405) rendered as JSON by one `ErrorRenderer`, and
//! `GET /users/events`: server-sent events, a `user` event for every user created.
//! Its tests are `tests/users_example.rs`.
//!
//! ```sh
//! psql "$DATABASE_URL" -c 'CREATE TABLE IF NOT EXISTS users (id serial PRIMARY KEY, name text NOT NULL)'
//! DATABASE_URL=postgres://… USERS_TOKEN=secret cargo run --release -p linerate-postgres --example users [ADDR]
//! curl -H 'authorization: Bearer secret' -H 'content-type: application/json' \
//!      -d '{"name":"ann"}' http://127.0.0.1:8080/users
//! curl -N -H 'authorization: Bearer secret' http://127.0.0.1:8080/users/events
//! ```

use std::sync::{Arc, Mutex};

use linerate_postgres::{Builder, Driver, Pool, StatementId};
use linerate_server::layers::{Cors, RequestId, Trace};
use linerate_server::sse::{Event, EventWriter, Sse};
use linerate_server::{
    Config, ErrorRenderer, Extensions, IntoResponse, Json, Layer, Method, OwnedRequest, Rejection,
    Request, Response, Router, Server,
};
use serde::{Deserialize, Serialize};

/// The table the service reads and writes.
pub const SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS users (id serial PRIMARY KEY, name text NOT NULL)";

/// The origin of the browser application allowed to call the service.
pub const APP_ORIGIN: &str = "https://app.example";

#[derive(Serialize)]
struct User {
    id: i32,
    name: String,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

/// The service's prepared statements.
#[derive(Clone, Copy)]
pub struct Statements {
    by_id: StatementId,
    insert: StatementId,
}

/// Registers the statements on a pool being built.
pub fn prepare(builder: &mut Builder) -> Statements {
    Statements {
        by_id: builder.prepare("user_by_id", "SELECT id, name FROM users WHERE id = $1"),
        insert: builder.prepare(
            "user_insert",
            "INSERT INTO users (name) VALUES ($1) RETURNING id",
        ),
    }
}

/// Why a request failed; every case becomes a [`Rejection`], so the error renderer writes it.
enum ApiError {
    Rejected(Rejection),
    NotFound,
    Database(linerate_postgres::Error),
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        ApiError::Rejected(r)
    }
}

impl From<linerate_postgres::Unavailable> for ApiError {
    fn from(e: linerate_postgres::Unavailable) -> ApiError {
        ApiError::Database(e.into())
    }
}

impl From<linerate_postgres::tokio_postgres::Error> for ApiError {
    fn from(e: linerate_postgres::tokio_postgres::Error) -> ApiError {
        ApiError::Database(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let rejection = match self {
            ApiError::Rejected(r) => r,
            ApiError::NotFound => Rejection::new(404, "no such user"),
            ApiError::Database(linerate_postgres::Error::Unavailable) => {
                Rejection::new(503, "the database is unavailable")
            }
            ApiError::Database(linerate_postgres::Error::Busy) => {
                Rejection::new(503, "the database is busy")
            }
            ApiError::Database(e) => {
                tracing::error!(error = %e, "query failed");
                Rejection::new(500, "the query failed")
            }
        };
        rejection.into_response()
    }
}

/// The subscribers of `/users/events`.
#[derive(Default)]
pub struct Events {
    subscribers: Mutex<Vec<EventWriter>>,
}

impl Events {
    fn subscribe(&self) -> Response {
        let (resp, events) = Sse::new().start();
        self.subscribers.lock().unwrap().push(events);
        resp
    }

    /// Sends `user` to every subscriber, encoded once. One that left, or cannot keep up
    /// (its stream is full), is dropped: its stream is cut and its client reconnects.
    fn publish(&self, user: &User) {
        let Ok(event) = Event::json(user) else { return };
        let event = event.event("user").id(&user.id.to_string()).encode();
        let mut subscribers = self.subscribers.lock().unwrap();
        subscribers.retain(|s| s.send_encoded(&event).is_ok());
    }
}

/// Who called, once the bearer token checked out.
pub struct Caller;

/// `Authorization: Bearer TOKEN` or a 401.
struct BearerAuth {
    token: String,
}

impl Layer for BearerAuth {
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        let sent = req
            .header("authorization")
            .and_then(|v| v.strip_prefix(b"Bearer "));
        if sent == Some(self.token.as_bytes()) {
            ext.insert(Caller);
            return None;
        }
        let mut resp = Rejection::new(401, "a bearer token is required").into_response();
        let _ = resp.set_header("WWW-Authenticate", "Bearer");
        Some(resp)
    }
}

async fn get_user(
    pool: Arc<Pool>,
    st: Statements,
    req: OwnedRequest,
) -> Result<Json<User>, ApiError> {
    let id: i32 = req.request().param_as("id")?;
    let conn = pool.get()?;
    let row = conn
        .query_opt(st.by_id, &[&id])
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(User {
        id: row.get(0),
        name: row.get(1),
    }))
}

async fn create_user(
    pool: Arc<Pool>,
    st: Statements,
    events: Arc<Events>,
    req: OwnedRequest,
) -> Result<(u16, Json<User>), ApiError> {
    let new: NewUser = req.request().json()?;
    let conn = pool.get()?;
    let row = conn.query_one(st.insert, &[&new.name]).await?;
    let user = User {
        id: row.get(0),
        name: new.name,
    };
    events.publish(&user);
    Ok((201, Json(user)))
}

/// The service's routes and layers.
pub fn app(pool: Arc<Pool>, st: Statements, token: String) -> Router {
    let (get_pool, post_pool) = (pool.clone(), pool.clone());
    let events = Arc::new(Events::default());
    let hub = events.clone();
    let users = Router::new()
        .get("/users/events", move |_| hub.subscribe())
        .get_async("/users/{id}", pool.spawner(), move |req| {
            get_user(get_pool.clone(), st, req)
        })
        .post_async("/users", pool.spawner(), move |req| {
            create_user(post_pool.clone(), st, events.clone(), req)
        })
        .post(
            "/echo",
            |req| -> Result<Json<serde_json::Value>, Rejection> { Ok(Json(req.json()?)) },
        )
        .layer(BearerAuth { token });
    Router::new()
        .get("/health", |_| "ok")
        .merge(users)
        .layer(ErrorRenderer(|status, message: &str| {
            #[derive(Serialize)]
            struct Problem<'a> {
                status: u16,
                error: &'a str,
            }
            (
                status,
                Json(Problem {
                    status,
                    error: message,
                }),
            )
                .into_response()
        }))
        .layer(
            Cors::origins([APP_ORIGIN])
                .allow_methods(&[Method::Get, Method::Post])
                .allow_headers(["authorization", "content-type"])
                .max_age(600),
        )
        .layer(RequestId)
        .layer(Trace)
}

/// `users [ADDR]` (default 127.0.0.1:8080), with `DATABASE_URL` and `USERS_TOKEN` set; logs
/// at `RUST_LOG` (default `warn`: the `Trace` layer's per-request events are `info`).
#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL")?;
    let token = std::env::var("USERS_TOKEN").map_err(|_| "set USERS_TOKEN")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let mut builder = Pool::builder(&url);
    builder.driver(Driver::Worker);
    let st = prepare(&mut builder);
    let pool = Arc::new(builder.connect(runtime.handle())?);
    let config = Config {
        addr: addr.parse()?,
        ..Config::default()
    };
    let mut server = Server::bind(config, app(pool.clone(), st, token))?;
    if let Some(start) = pool.worker_start(server.workers(), std::time::Duration::from_secs(5)) {
        server = server.with_worker_start(start);
    }
    println!("users service on http://{}", server.local_addr());
    server.run_until_signal()?;
    Ok(())
}
