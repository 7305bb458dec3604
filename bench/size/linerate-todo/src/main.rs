//! An in-memory todo service on linerate-server built with `default-features = false`:
//! GET/POST /todos, GET/DELETE /todos/{id}, JSON in and out. The binary-size peer of
//! `../axum-todo` (same routes, same answers); see `../measure.sh`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use linerate_server::{Config, Json, Rejection, Request, Response, Router, Server};
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

fn not_found() -> Rejection {
    Rejection::new(404, "no such todo")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let db = Db::default();
    let (d1, d2, d3, d4) = (db.clone(), db.clone(), db.clone(), db);
    let router = Router::new()
        .get("/todos", move |_: &Request| {
            Json(d1.lock().unwrap().items.values().cloned().collect::<Vec<_>>())
        })
        .post("/todos", move |req: &Request| -> Result<_, Rejection> {
            let new: NewTodo = req.json()?;
            let mut db = d2.lock().unwrap();
            db.next += 1;
            let todo = Todo { id: db.next, title: new.title, done: false };
            db.items.insert(todo.id, todo.clone());
            Ok((201, Json(todo)))
        })
        .get("/todos/{id}", move |req: &Request| -> Result<_, Rejection> {
            let id: u64 = req.param_as("id")?;
            d3.lock().unwrap().items.get(&id).cloned().map(Json).ok_or_else(not_found)
        })
        .delete("/todos/{id}", move |req: &Request| -> Result<_, Rejection> {
            let id: u64 = req.param_as("id")?;
            d4.lock().unwrap().items.remove(&id).map(|_| Response::new(204)).ok_or_else(not_found)
        });
    let config = Config { addr: addr.parse()?, ..Config::default() };
    Server::bind(config, router)?.run()?;
    Ok(())
}
