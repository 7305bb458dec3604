//! The twin of crates/server/examples/bank in axum 0.8 + tonic 0.14, written the way
//! their own examples write it: one current-thread tokio runtime serving REST and gRPC on one
//! port (tonic's `Routes` turned into an axum `Router` and merged), `from_fn_with_state` auth
//! layers (REST: 401 + `WWW-Authenticate`; gRPC: UNAUTHENTICATED, trailers-only), tower-http's
//! `CompressionLayer` on REST, tokio-postgres with prepared statements and the `redis` crate's
//! multiplexed connection. The same database access as the linerate side: one connection for
//! reads, `WRITERS` for transfers (one transaction each at a time, rows locked in id order),
//! and one Redis `GET bank:token:TOKEN` per request, failing closed after `REDIS_TIMEOUT`.
//!
//! With CACHE_MS, account reads and token owners are kept that long, the same way as the
//! linerate side's cache.rs (`Ttl`: one map under a std mutex each, only what exists kept, a
//! transfer forgetting both its accounts): bench/bank-cached.toml's cache-hit workloads.
//!
//!   bank-axum-tonic ADDR [CACHE_MS]      with DATABASE_URL and REDIS_URL set

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls, Statement};
use tower_http::compression::CompressionLayer;

mod pb {
    tonic::include_proto!("bank");
}

use pb::bank_server::{Bank, BankServer};

/// Connections that run transfers (as the linerate side's `WRITERS`).
const WRITERS: usize = 4;
/// The longest a token check waits for Redis (as the linerate side's).
const REDIS_TIMEOUT: Duration = Duration::from_secs(1);

struct Conn {
    client: Client,
    account: Statement,
    lock: Statement,
    add: Statement,
    record: Statement,
}

async fn open(url: &str) -> Result<Conn, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "PostgreSQL connection ended");
        }
    });
    Ok(Conn {
        account: client.prepare("SELECT id, owner, balance FROM accounts WHERE id = $1").await?,
        lock: client
            .prepare("SELECT id, balance FROM accounts WHERE id = $1 OR id = $2 ORDER BY id FOR UPDATE")
            .await?,
        add: client.prepare("UPDATE accounts SET balance = balance + $2 WHERE id = $1").await?,
        record: client
            .prepare("INSERT INTO transfers (from_id, to_id, amount) VALUES ($1, $2, $3) RETURNING id")
            .await?,
        client,
    })
}

enum BankError {
    Unauthenticated,
    NotFound,
    InsufficientFunds,
    Invalid(&'static str),
    Unavailable(&'static str),
    Internal,
}

impl BankError {
    fn message(&self) -> String {
        match self {
            BankError::Unauthenticated => "a valid bearer token is required".into(),
            BankError::NotFound => "no such account".into(),
            BankError::InsufficientFunds => "insufficient funds".into(),
            BankError::Invalid(why) => (*why).into(),
            BankError::Unavailable(what) => format!("{what} is unavailable"),
            BankError::Internal => "the query failed".into(),
        }
    }
}

impl From<tokio_postgres::Error> for BankError {
    fn from(e: tokio_postgres::Error) -> BankError {
        if e.is_closed() {
            tracing::warn!(error = %e, "PostgreSQL unreachable");
            return BankError::Unavailable("the database");
        }
        tracing::error!(error = %e, "query failed");
        BankError::Internal
    }
}

#[derive(Serialize)]
struct Problem {
    status: u16,
    error: String,
}

impl IntoResponse for BankError {
    fn into_response(self) -> Response {
        let status = match self {
            BankError::Unauthenticated => StatusCode::UNAUTHORIZED,
            BankError::NotFound => StatusCode::NOT_FOUND,
            BankError::InsufficientFunds => StatusCode::CONFLICT,
            BankError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            BankError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            BankError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = Json(Problem { status: status.as_u16(), error: self.message() });
        if matches!(self, BankError::Unauthenticated) {
            return (status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response();
        }
        (status, body).into_response()
    }
}

impl From<BankError> for tonic::Status {
    fn from(e: BankError) -> tonic::Status {
        let code = match e {
            BankError::Unauthenticated => tonic::Code::Unauthenticated,
            BankError::NotFound => tonic::Code::NotFound,
            BankError::InsufficientFunds => tonic::Code::FailedPrecondition,
            BankError::Invalid(_) => tonic::Code::InvalidArgument,
            BankError::Unavailable(_) => tonic::Code::Unavailable,
            BankError::Internal => tonic::Code::Internal,
        };
        tonic::Status::new(code, e.message())
    }
}

/// The most entries one cache map holds (as the linerate side's).
const MAX_ENTRIES: usize = 100_000;

/// Values kept for `ttl` after they were put (the linerate side's `cache::Ttl`).
struct Ttl<K, V> {
    ttl: Duration,
    map: std::sync::Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Ttl<K, V> {
    fn new(ttl: Duration) -> Ttl<K, V> {
        Ttl { ttl, map: std::sync::Mutex::new(HashMap::new()) }
    }

    fn get<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, value) = map.get(key)?;
        (at.elapsed() < self.ttl).then(|| value.clone())
    }

    fn put(&self, key: K, value: V) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(key, (Instant::now(), value));
    }

    fn forget(&self, key: &K) {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }
}

#[derive(Serialize, Clone)]
struct Account {
    id: i64,
    owner: String,
    balance: i64,
}

#[derive(Deserialize, Clone, Copy)]
struct NewTransfer {
    from: i64,
    to: i64,
    amount: i64,
}

#[derive(Serialize)]
struct Created {
    id: i64,
}

/// The database and the token store, shared by REST and gRPC.
struct Ledger {
    reader: Conn,
    writers: Vec<Mutex<Conn>>,
    next: AtomicUsize,
    redis: redis::Client,
    /// The Redis connection and its number: a failed call drops the one it used, never a
    /// newer one (as the linerate side's `Slot`).
    tokens: Mutex<(u64, Option<MultiplexedConnection>)>,
    /// With CACHE_MS: account reads, and token owners.
    cache: Option<(Ttl<i64, Account>, Ttl<String, String>)>,
}

type AppState = Arc<Ledger>;

impl Ledger {
    async fn account(&self, id: i64) -> Result<Account, BankError> {
        if let Some(a) = self.cache.as_ref().and_then(|(accounts, _)| accounts.get(&id)) {
            return Ok(a);
        }
        let c = &self.reader;
        let row = c.client.query_opt(&c.account, &[&id]).await?.ok_or(BankError::NotFound)?;
        let a = Account { id: row.get(0), owner: row.get(1), balance: row.get(2) };
        if let Some((accounts, _)) = &self.cache {
            accounts.put(id, a.clone());
        }
        Ok(a)
    }

    async fn transfer(&self, t: NewTransfer) -> Result<i64, BankError> {
        let done = self.run_transfer(t).await;
        if let Some((accounts, _)) = &self.cache {
            accounts.forget(&t.from);
            accounts.forget(&t.to);
        }
        done
    }

    async fn run_transfer(&self, t: NewTransfer) -> Result<i64, BankError> {
        if t.amount <= 0 {
            return Err(BankError::Invalid("the amount must be above zero"));
        }
        if t.from == t.to {
            return Err(BankError::Invalid("an account cannot pay itself"));
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % WRITERS;
        let mut conn = self.writers[i].lock().await;
        let Conn { client, lock, add, record, .. } = &mut *conn;
        let tx = client.transaction().await?;
        let rows = tx.query(&*lock, &[&t.from, &t.to]).await?;
        let balance = |id: i64| rows.iter().find(|r| r.get::<_, i64>(0) == id).map(|r| r.get::<_, i64>(1));
        let have = balance(t.from).ok_or(BankError::NotFound)?;
        balance(t.to).ok_or(BankError::NotFound)?;
        if have < t.amount {
            return Err(BankError::InsufficientFunds);
        }
        tx.execute(&*add, &[&t.from, &-t.amount]).await?;
        tx.execute(&*add, &[&t.to, &t.amount]).await?;
        let id: i64 = tx.query_one(&*record, &[&t.from, &t.to, &t.amount]).await?.get(0);
        tx.commit().await?;
        Ok(id)
    }

    /// The owner of the bearer token in `field`: one Redis GET, failing closed.
    async fn authenticate(&self, field: Option<&[u8]>) -> Result<String, BankError> {
        let token = field
            .and_then(|f| std::str::from_utf8(f).ok())
            .and_then(|f| f.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim_start_matches(' '))
            .filter(|t| !t.is_empty())
            .ok_or(BankError::Unauthenticated)?;
        if let Some(owner) = self.cache.as_ref().and_then(|(_, owners)| owners.get(token)) {
            return Ok(owner);
        }
        let key = format!("bank:token:{token}");
        let mut used = None;
        let ask = async {
            let (number, mut conn) = {
                let mut slot = self.tokens.lock().await;
                match &slot.1 {
                    Some(c) => (slot.0, c.clone()),
                    None => {
                        let c = self.redis.get_multiplexed_async_connection().await?;
                        slot.0 += 1;
                        slot.1 = Some(c.clone());
                        (slot.0, c)
                    }
                }
            };
            used = Some(number);
            redis::cmd("GET").arg(&key).query_async::<Option<String>>(&mut conn).await
        };
        let failed = match tokio::time::timeout(REDIS_TIMEOUT, ask).await {
            Ok(Ok(Some(owner))) => {
                if let Some((_, owners)) = &self.cache {
                    owners.put(token.to_string(), owner.clone());
                }
                return Ok(owner);
            }
            Ok(Ok(None)) => return Err(BankError::Unauthenticated),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer in time".to_string(),
        };
        tracing::warn!(error = %failed, "Redis failed");
        let mut slot = self.tokens.lock().await;
        if used == Some(slot.0) {
            slot.1 = None;
        }
        Err(BankError::Unavailable("the token store"))
    }
}

async fn get_account(State(bank): State<AppState>, Path(id): Path<i64>) -> Result<Json<Account>, BankError> {
    Ok(Json(bank.account(id).await?))
}

async fn create_transfer(
    State(bank): State<AppState>,
    Json(t): Json<NewTransfer>,
) -> Result<(StatusCode, Json<Created>), BankError> {
    let id = bank.transfer(t).await?;
    Ok((StatusCode::CREATED, Json(Created { id })))
}

/// REST's bearer check.
async fn rest_auth(State(bank): State<AppState>, req: Request, next: Next) -> Response {
    let field = req.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes());
    match bank.authenticate(field).await {
        Ok(_owner) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// gRPC's bearer check: the same, its refusal a gRPC status (HTTP 200, trailers-only).
async fn grpc_auth(State(bank): State<AppState>, req: Request, next: Next) -> Response {
    let field = req.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes());
    match bank.authenticate(field).await {
        Ok(_owner) => next.run(req).await,
        Err(e) => tonic::Status::from(e).into_http::<axum::body::Body>(),
    }
}

struct Service(AppState);

#[tonic::async_trait]
impl Bank for Service {
    async fn get_account(
        &self,
        req: tonic::Request<pb::GetAccountRequest>,
    ) -> Result<tonic::Response<pb::Account>, tonic::Status> {
        let a = self.0.account(req.get_ref().id).await?;
        Ok(tonic::Response::new(pb::Account { id: a.id, owner: a.owner, balance: a.balance }))
    }

    async fn transfer(
        &self,
        req: tonic::Request<pb::TransferRequest>,
    ) -> Result<tonic::Response<pb::TransferReply>, tonic::Status> {
        let m = req.into_inner();
        let id = self.0.transfer(NewTransfer { from: m.from, to: m.to, amount: m.amount }).await?;
        Ok(tonic::Response::new(pb::TransferReply { id }))
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".into());
    let cache = std::env::args()
        .nth(2)
        .map(|ms| Duration::from_millis(ms.parse().expect("CACHE_MS is a number")))
        .map(|ttl| (Ttl::new(ttl), Ttl::new(ttl)));
    let database = std::env::var("DATABASE_URL").expect("set DATABASE_URL");
    let redis = redis::Client::open(std::env::var("REDIS_URL").expect("set REDIS_URL")).expect("REDIS_URL");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let mut writers = Vec::new();
        for _ in 0..WRITERS {
            writers.push(Mutex::new(open(&database).await.expect("connect to PostgreSQL")));
        }
        let state: AppState = Arc::new(Ledger {
            reader: open(&database).await.expect("connect to PostgreSQL"),
            writers,
            next: AtomicUsize::new(0),
            redis,
            tokens: Mutex::new((0, None)),
            cache,
        });
        let rest = Router::new()
            .route("/accounts/{id}", get(get_account))
            .route("/transfers", post(create_transfer))
            .route_layer(middleware::from_fn_with_state(state.clone(), rest_auth))
            .layer(CompressionLayer::new())
            .with_state(state.clone());
        let grpc = tonic::service::Routes::new(BankServer::new(Service(state.clone())))
            .into_axum_router()
            .layer(middleware::from_fn_with_state(state, grpc_auth));
        let app = rest.merge(grpc);
        let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
        println!("bank-axum-tonic on http://{addr} (REST and h2c gRPC)");
        axum::serve(listener, app).await.expect("serve");
    });
}
