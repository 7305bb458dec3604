//! The users service written as a plain axum `Router` (GET/POST/PUT/DELETE `/users[/{id}]`,
//! JSON, an in-memory store behind a `Mutex`), served unchanged by either server, so the two
//! can be compared on the same code:
//!
//! ```text
//! cargo run --release -p linerate-server --features tower --example axum_on_linerate -- --port 8080
//! cargo run --release -p linerate-server --features tower --example axum_on_linerate -- --port 8080 --hyper
//! ```
//!
//! `--hyper` serves it with `axum::serve` (hyper on tokio: a current-thread runtime with
//! `--workers 1`, else a multi-thread one of that many threads); without it linerate's engine
//! serves it (`linerate_server::tower::serve`) with that many workers, the handlers' futures on
//! each worker's own runtime (`OnWorker`). `--workers` defaults to the CPUs there are. The
//! router carries tower-http's CORS and trace layers, as the developer trial's service did, and
//! user 1 exists from the start. bench/axum_on_linerate.toml compares the two.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize)]
struct User {
    id: u64,
    name: String,
    email: String,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
    email: String,
}

#[derive(Default)]
struct Store {
    next: u64,
    users: BTreeMap<u64, User>,
}

type Db = Arc<Mutex<Store>>;

fn lock(db: &Db) -> std::sync::MutexGuard<'_, Store> {
    db.lock().unwrap_or_else(|e| e.into_inner())
}

async fn list(State(db): State<Db>) -> Json<Vec<User>> {
    Json(lock(&db).users.values().cloned().collect())
}

async fn create(State(db): State<Db>, Json(new): Json<NewUser>) -> (StatusCode, Json<User>) {
    let mut s = lock(&db);
    s.next += 1;
    let user = User {
        id: s.next,
        name: new.name,
        email: new.email,
    };
    s.users.insert(user.id, user.clone());
    (StatusCode::CREATED, Json(user))
}

async fn read(State(db): State<Db>, Path(id): Path<u64>) -> Result<Json<User>, StatusCode> {
    lock(&db)
        .users
        .get(&id)
        .cloned()
        .map(Json)
        .ok_or(StatusCode::NOT_FOUND)
}

async fn update(
    State(db): State<Db>,
    Path(id): Path<u64>,
    Json(new): Json<NewUser>,
) -> Result<Json<User>, StatusCode> {
    let mut s = lock(&db);
    let user = s.users.get_mut(&id).ok_or(StatusCode::NOT_FOUND)?;
    user.name = new.name;
    user.email = new.email;
    Ok(Json(user.clone()))
}

async fn remove(State(db): State<Db>, Path(id): Path<u64>) -> StatusCode {
    match lock(&db).users.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

/// The application: the same value whichever server runs it.
fn app() -> Router {
    let db = Db::default();
    {
        let mut s = lock(&db);
        s.next = 1;
        let ann = User {
            id: 1,
            name: "ann".into(),
            email: "ann@example.com".into(),
        };
        s.users.insert(1, ann);
    }
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(axum::http::HeaderValue::from_static("https://app.example"))
        .allow_methods([axum::http::Method::GET, axum::http::Method::POST]);
    Router::new()
        .route("/users", get(list).post(create))
        .route("/users/{id}", get(read).put(update).delete(remove))
        .with_state(db)
        .layer(cors)
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut port, mut hyper) = (8080u16, false);
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--hyper" => hyper = true,
            "--workers" => {
                workers = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| std::io::Error::other("--workers takes a number above 0"))?
            }
            "--port" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| std::io::Error::other("--port takes a port number"))?
            }
            other => return Err(std::io::Error::other(format!("unknown argument {other}"))),
        }
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    if hyper {
        let rt = if workers == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()?
        };
        println!("axum::serve (hyper) on http://{addr}");
        return rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            axum::serve(listener, app()).await
        });
    }
    let config = linerate_server::Config {
        addr,
        workers,
        ..Default::default()
    };
    println!("linerate on http://{addr}");
    linerate_server::tower::serve(config, app(), linerate_server::OnWorker)
}
