//! An in-memory todo service in axum 0.8: GET/POST /todos, GET/DELETE /todos/{id}, JSON in
//! and out. The binary-size peer of `../linerate-todo` (same routes, same answers); see
//! `../measure.sh`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize)]
struct Todo {
    id: u64,
    title: String,
    done: bool,
}

#[derive(Deserialize)]
struct NewTodo {
    title: String,
}

#[derive(Default)]
struct Todos {
    next: u64,
    items: BTreeMap<u64, Todo>,
}

type Db = Arc<Mutex<Todos>>;

async fn list(State(db): State<Db>) -> Json<Vec<Todo>> {
    Json(db.lock().unwrap().items.values().cloned().collect())
}

async fn create(State(db): State<Db>, Json(new): Json<NewTodo>) -> (StatusCode, Json<Todo>) {
    let mut db = db.lock().unwrap();
    db.next += 1;
    let todo = Todo { id: db.next, title: new.title, done: false };
    db.items.insert(todo.id, todo.clone());
    (StatusCode::CREATED, Json(todo))
}

async fn one(State(db): State<Db>, Path(id): Path<u64>) -> Result<Json<Todo>, StatusCode> {
    db.lock().unwrap().items.get(&id).cloned().map(Json).ok_or(StatusCode::NOT_FOUND)
}

async fn remove(State(db): State<Db>, Path(id): Path<u64>) -> StatusCode {
    match db.lock().unwrap().items.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

#[tokio::main]
async fn main() {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let app = Router::new()
        .route("/todos", get(list).post(create))
        .route("/todos/{id}", get(one).delete(remove))
        .with_state(Db::default());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    axum::serve(listener, app).await.unwrap();
}
