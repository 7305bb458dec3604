//! The users service of crates/postgres/examples/users.rs in axum, written the way axum's
//! examples write it (`from_fn_with_state` for the token check, tower-http for CORS, request
//! ids and tracing, `Json` and `Path` extractors, one error type into a JSON response), with
//! the same database access as the linerate side: tokio-postgres clients with the statements
//! prepared at start, taken round-robin (axum's own example uses a bb8 pool instead; this keeps
//! the comparison about the frameworks). `GET /users/events` is axum's `Sse` over a tokio
//! broadcast channel, each created user published once (axum's sse example, with the channel
//! its chat example uses).
//!
//!   axum-users ADDR [--linerate]
//!                        with DATABASE_URL and USERS_TOKEN set; one tokio worker thread
//!                        (the lab pins the process to one CPU). With --linerate the same
//!                        Router is served by linerate's engine (linerate_server::tower, one
//!                        worker, the handlers on the worker's runtime) instead of axum::serve,
//!                        and each worker opens its own database connections on its runtime
//!                        when it starts (`Server::with_worker_start`), so a query never
//!                        leaves the worker's thread, as it never leaves axum's one thread.

use std::cell::Cell;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio_postgres::{Client, NoTls, Statement};
use tower_http::cors::CorsLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

const CONNECTIONS: usize = 1;

type Conn = (Client, Statement, Statement);

struct Db {
    /// The connections on the application's runtime (axum::serve); none with --linerate,
    /// where each worker uses its own (`WORKER_CLIENTS`).
    clients: Vec<Conn>,
    next: AtomicUsize,
}

thread_local! {
    /// With --linerate: this worker's connections, opened on its runtime when it started
    /// (kept for the worker's life, hence leaked).
    static WORKER_CLIENTS: Cell<Option<&'static [Conn]>> = const { Cell::new(None) };
}

impl Db {
    fn get(&self) -> &Conn {
        let clients = WORKER_CLIENTS.get().unwrap_or(&self.clients);
        &clients[self.next.fetch_add(1, Ordering::Relaxed) % clients.len()]
    }
}

/// Opens `CONNECTIONS` connections to `url` with the statements prepared; each connection's
/// task goes to `spawn`.
async fn connect(url: &str, spawn: fn(tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>)) -> Vec<Conn> {
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await.expect("connect");
        spawn(conn);
        let by_id = client.prepare("SELECT id, name FROM users WHERE id = $1").await.expect("prepare");
        let insert = client
            .prepare("INSERT INTO users (name) VALUES ($1) RETURNING id")
            .await
            .expect("prepare");
        clients.push((client, by_id, insert));
    }
    clients
}

#[derive(Clone)]
struct AppState {
    db: Arc<Db>,
    token: Arc<str>,
    /// Created users, as (id, JSON), to every `/users/events` subscriber.
    events: broadcast::Sender<(i32, Arc<str>)>,
}

#[derive(Serialize)]
struct User {
    id: i32,
    name: String,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

enum ApiError {
    NotFound,
    Database(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        ApiError::Database(e)
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    status: u16,
    error: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error) = match self {
            ApiError::NotFound => (StatusCode::NOT_FOUND, "no such user"),
            ApiError::Database(e) => {
                tracing::error!(error = %e, "query failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "the query failed")
            }
        };
        (status, Json(Problem { status: status.as_u16(), error })).into_response()
    }
}

async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let expected = format!("Bearer {}", state.token);
    match req.headers().get(header::AUTHORIZATION) {
        Some(v) if v.as_bytes() == expected.as_bytes() => next.run(req).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(Problem { status: 401, error: "a bearer token is required" }),
        )
            .into_response(),
    }
}

async fn get_user(State(state): State<AppState>, Path(id): Path<i32>) -> Result<Json<User>, ApiError> {
    let (client, by_id, _) = state.db.get();
    let row = client.query_opt(by_id, &[&id]).await?.ok_or(ApiError::NotFound)?;
    Ok(Json(User { id: row.get(0), name: row.get(1) }))
}

async fn create_user(
    State(state): State<AppState>,
    Json(new): Json<NewUser>,
) -> Result<(StatusCode, Json<User>), ApiError> {
    let (client, _, insert) = state.db.get();
    let row = client.query_one(insert, &[&new.name]).await?;
    let user = User { id: row.get(0), name: new.name };
    if let Ok(json) = serde_json::to_string(&user) {
        let _ = state.events.send((user.id, json.into()));
    }
    Ok((StatusCode::CREATED, Json(user)))
}

async fn events(State(state): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = stream::unfold(state.events.subscribe(), |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok((id, json)) => {
                    let event = Event::default().event("user").id(id.to_string()).data(&*json);
                    return Some((Ok(event), rx));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn echo(Json(value): Json<serde_json::Value>) -> Json<serde_json::Value> {
    Json(value)
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".into());
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let token: Arc<str> = std::env::var("USERS_TOKEN").expect("USERS_TOKEN").into();
    let linerate = std::env::args().nth(2).as_deref() == Some("--linerate");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    // The application, built on the runtime that drives its database connections (with
    // --linerate, each worker's runtime drives its own: see below).
    let app_url = url.clone();
    let app = rt.block_on(async move {
        let clients = if linerate {
            Vec::new()
        } else {
            connect(&app_url, |conn| {
                tokio::spawn(conn);
            })
            .await
        };
        let (events_tx, _) = broadcast::channel(1024);
        let state =
            AppState { db: Arc::new(Db { clients, next: AtomicUsize::new(0) }), token, events: events_tx };
        let users = Router::new()
            .route("/users/events", get(events))
            .route("/users/{id}", get(get_user))
            .route("/users", post(create_user))
            .route("/echo", post(echo))
            .route_layer(middleware::from_fn_with_state(state.clone(), auth));
        let app = Router::new()
            .route("/health", get(|| async { "ok" }))
            .merge(users)
            .layer(
                CorsLayer::new()
                    .allow_origin(HeaderValue::from_static("https://app.example"))
                    .allow_methods([Method::GET, Method::POST])
                    .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
                    .max_age(std::time::Duration::from_secs(600)),
            )
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(TraceLayer::new_for_http())
            .with_state(state);
        app
    });
    if linerate {
        // The same Router on linerate's engine: one worker, the handlers on its own runtime,
        // and the worker's database connections opened on that runtime as it starts (their
        // tasks run there too), so the handlers' queries stay on the worker's thread.
        let config = linerate_server::Config { addr: addr.parse().expect("address"), workers: 1, ..Default::default() };
        let start: linerate_server::WorkerStart = Arc::new(move |_| {
            let clients = linerate_server::runtime::block_on(connect(&url, |conn| {
                linerate_server::runtime::spawn_local(async move {
                    if let Err(e) = conn.await {
                        tracing::error!(error = %e, "database connection failed");
                    }
                });
            }))
            .ok_or_else(|| std::io::Error::other("not on a worker's thread"))?;
            WORKER_CLIENTS.set(Some(Vec::leak(clients)));
            Ok(())
        });
        let router = linerate_server::tower::router(app, linerate_server::OnWorker);
        let server = linerate_server::Server::bind(config, router).expect("bind").with_worker_start(start);
        println!("axum-users on linerate on http://{addr}");
        return server.run_until_signal().expect("serve");
    }
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
        axum::serve(listener, app).await.expect("serve");
    });
}
