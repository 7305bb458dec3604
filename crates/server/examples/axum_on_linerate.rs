//! The users service written as a plain axum `Router` (GET/POST/PUT/DELETE `/users[/{id}]`,
//! JSON, an in-memory store behind a `Mutex`), served unchanged by either server, so the two
//! can be compared on the same code:
//!
//! ```text
//! cargo run --release -p linerate-server --features tower --example axum_on_linerate -- --port 8080
//! cargo run --release -p linerate-server --features tower --example axum_on_linerate -- --port 8080 --hyper
//! ```
//!
//! `--hyper` serves it with `axum::serve` (hyper on a tokio multi-thread runtime); without it
//! linerate's engine serves it (`linerate_server::tower::serve`), the handlers' futures on a
//! tokio multi-thread runtime of the same size.

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
    Router::new()
        .route("/users", get(list).post(create))
        .route("/users/{id}", get(read).put(update).delete(remove))
        .with_state(Db::default())
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut port, mut hyper) = (8080u16, false);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--hyper" => hyper = true,
            "--port" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| std::io::Error::other("--port takes a port number"))?
            }
            other => return Err(std::io::Error::other(format!("unknown argument {other}"))),
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    if hyper {
        println!("axum::serve (hyper) on http://{addr}");
        return rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            axum::serve(listener, app()).await
        });
    }
    let handle = rt.handle().clone();
    let config = linerate_server::Config {
        addr,
        ..Default::default()
    };
    println!("linerate on http://{addr}");
    linerate_server::tower::serve(config, app(), move |f| {
        handle.spawn(f);
    })
}
