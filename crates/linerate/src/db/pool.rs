//! The database connections: a fixed number of tokio-postgres connections, each with its
//! prepared statements, handed out round-robin, and brought back after they are lost.
//!
//! Two drivers ([`Driver`]): `runtime` keeps one set of connections on the database runtime
//! beside the workers (a request crosses to that thread and back); `worker` gives every HTTP
//! worker its own set, driven by the worker's own event loop ([`super::local`]), so a request
//! never leaves its thread.
//!
//! A lost connection (the server restarted, the network dropped it) is noticed when its
//! connection task ends or when a request finds it closed. Its slot is then re-opened in the
//! background, with a backoff doubling from [`FIRST_RETRY`] to [`MAX_RETRY`], while requests
//! use the other slots, or get [`Unavailable`] at once when none is open: a request never
//! waits on a database that is down.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::{Client, NoTls, Statement};

use super::local;

/// The first wait before opening a lost connection again.
pub const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest wait between two tries.
pub const MAX_RETRY: Duration = Duration::from_secs(2);

/// No open connection: the database is down or unreachable (a try to reconnect is under way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

/// The statements every connection prepares when it opens.
pub struct Statements {
    /// `id, randomnumber` of one `world` row by id.
    pub world: Statement,
    /// Every `fortune` row.
    pub fortunes: Statement,
    /// Sets `randomnumber` of the rows whose ids are in the first array to the numbers in the
    /// second, in one statement.
    pub update_worlds: Statement,
    /// HttpArena's items with a price in `$1..=$2`, at most `$3`.
    pub items_by_price: Statement,
    /// One item by id.
    pub item: Statement,
    /// A page of one category's items, by id (`$2` rows from `$3`).
    pub items_page: Statement,
    /// Creates an item, or changes name, price and quantity of an existing one.
    pub upsert_item: Statement,
    /// Changes name, price and quantity of item `$1`; 0 rows when there is none.
    pub update_item: Statement,
}

const WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const FORTUNES: &str = "SELECT id, message FROM fortune";
const UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = v.r \
     FROM unnest($1::int[], $2::int[]) AS v(id, r) WHERE world.id = v.id";
const ITEM_COLUMNS: &str = "id, name, category, price, quantity, active, tags, \
     rating_score, rating_count";

/// An open connection and its statements.
pub struct Conn {
    pub client: Client,
    pub st: Statements,
}

struct Slot {
    conn: Mutex<Option<Arc<Conn>>>,
    reconnecting: AtomicBool,
    /// Closed for good ([`Pool::close`]): not re-opened.
    closed: AtomicBool,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            conn: Mutex::new(None),
            reconnecting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        })
    }
}

/// Where the connections live and which thread drives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// One set on the database runtime's thread, shared by the workers.
    Runtime,
    /// A set per HTTP worker, driven by the worker's own event loop.
    Worker,
}

/// The connections.
pub struct Pool {
    url: Arc<str>,
    connections: usize,
    mode: Mode,
}

enum Mode {
    Runtime {
        slots: Vec<Arc<Slot>>,
        next: AtomicUsize,
        runtime: tokio::runtime::Handle,
    },
    /// Each worker's set is in its thread's [`WORKER`].
    Worker {
        config: Arc<tokio_postgres::Config>,
        addrs: Arc<[SocketAddr]>,
    },
}

/// A worker's own connections (`--database-driver worker`).
struct WorkerSet {
    slots: Vec<Arc<Slot>>,
    next: std::cell::Cell<usize>,
    config: Arc<tokio_postgres::Config>,
    addrs: Arc<[SocketAddr]>,
}

thread_local! {
    static WORKER: RefCell<Option<std::rc::Rc<WorkerSet>>> = const { RefCell::new(None) };
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub enum OpenError {
    Io(std::io::Error),
    Db(tokio_postgres::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{e}"),
            OpenError::Db(e) => f.write_str(&super::world::describe(e)),
        }
    }
}

impl From<tokio_postgres::Error> for OpenError {
    fn from(e: tokio_postgres::Error) -> OpenError {
        OpenError::Db(e)
    }
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> OpenError {
        OpenError::Io(e)
    }
}

/// The first open slot from `start` round-robin; closed ones are emptied and `revive`d.
fn pick(
    slots: &[Arc<Slot>],
    start: usize,
    revive: impl Fn(&Arc<Slot>),
) -> Result<Arc<Conn>, Unavailable> {
    let n = slots.len();
    for i in 0..n {
        let slot = &slots[(start + i) % n];
        let mut held = slot.conn.lock().unwrap();
        if let Some(conn) = held.as_ref() {
            if !conn.client.is_closed() {
                return Ok(conn.clone());
            }
            *held = None;
        }
        drop(held);
        revive(slot);
    }
    Err(Unavailable)
}

impl Pool {
    /// Opens `connections` connections to `url` on `runtime` (which runs their tasks); the
    /// first error is returned, so a database that is down at start is said at start.
    pub fn connect(
        url: &str,
        connections: usize,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Pool, tokio_postgres::Error> {
        let url: Arc<str> = url.into();
        let slots: Vec<Arc<Slot>> = (0..connections.max(1)).map(|_| Slot::new()).collect();
        runtime.block_on(async {
            for slot in &slots {
                let conn = open(&url, slot).await?;
                *slot.conn.lock().unwrap() = Some(Arc::new(conn));
            }
            Ok::<_, tokio_postgres::Error>(())
        })?;
        Ok(Pool {
            url,
            connections: connections.max(1),
            mode: Mode::Runtime {
                slots,
                next: AtomicUsize::new(0),
                runtime: runtime.clone(),
            },
        })
    }

    /// A pool whose connections each worker opens for itself ([`Pool::open_worker_set`]):
    /// `url` must name TCP hosts (resolved here, once).
    pub fn per_worker(url: &str, connections: usize) -> Result<Pool, String> {
        let config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
        let ports = config.get_ports();
        let mut addrs = Vec::new();
        for (i, host) in config.get_hosts().iter().enumerate() {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                tokio_postgres::config::Host::Tcp(name) => {
                    use std::net::ToSocketAddrs;
                    let found = (name.as_str(), port)
                        .to_socket_addrs()
                        .map_err(|e| format!("cannot resolve {name}: {e}"))?;
                    addrs.extend(found);
                }
                _ => {
                    return Err("the worker driver needs a TCP host; for a Unix socket use \
                                --database-driver runtime"
                        .into());
                }
            }
        }
        if addrs.is_empty() {
            return Err("no host to connect to".into());
        }
        Ok(Pool {
            url: url.into(),
            connections,
            mode: Mode::Worker {
                config: Arc::new(config),
                addrs: addrs.into(),
            },
        })
    }

    /// The connections asked for (with the worker driver: in all, shared out among workers;
    /// 0: one per worker).
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// On a worker thread with its [`local::Local`] installed: opens `count` connections for
    /// this worker (driven by `local` until they are open or `limit` passes; the ones that
    /// did not open keep trying in the background).
    pub fn open_worker_set(&self, local: &mut local::Local, count: usize, limit: Duration) {
        let Mode::Worker { config, addrs } = &self.mode else {
            return;
        };
        let set = std::rc::Rc::new(WorkerSet {
            slots: (0..count.max(1)).map(|_| Slot::new()).collect(),
            next: std::cell::Cell::new(0),
            config: config.clone(),
            addrs: addrs.clone(),
        });
        WORKER.with(|w| *w.borrow_mut() = Some(set.clone()));
        for slot in &set.slots {
            revive_local(&set, slot);
        }
        local.run_until(limit, || {
            set.slots.iter().all(|s| s.conn.lock().unwrap().is_some())
        });
    }

    /// An open connection: the next one round-robin, or the one after it when that one is
    /// lost (and its reconnection started).
    pub fn get(&self) -> Result<Arc<Conn>, Unavailable> {
        match &self.mode {
            Mode::Runtime {
                slots,
                next,
                runtime,
            } => {
                let start = next.fetch_add(1, Ordering::Relaxed);
                pick(slots, start, |slot| revive(runtime, &self.url, slot))
            }
            Mode::Worker { .. } => WORKER.with(|w| {
                let w = w.borrow();
                let Some(set) = w.as_ref() else {
                    return Err(Unavailable);
                };
                let start = set.next.get();
                set.next.set(start.wrapping_add(1));
                pick(&set.slots, start, |slot| revive_local(set, slot))
            }),
        }
    }

    /// Closes the runtime driver's connections for good (the start-up set of the worker
    /// driver, once the cache is read).
    pub fn close(self) {
        if let Mode::Runtime { slots, .. } = &self.mode {
            for slot in slots {
                slot.closed.store(true, Ordering::Release);
                slot.conn.lock().unwrap().take();
            }
        }
    }

    /// The driver of these connections.
    pub fn driver(&self) -> Driver {
        match self.mode {
            Mode::Runtime { .. } => Driver::Runtime,
            Mode::Worker { .. } => Driver::Worker,
        }
    }
}

/// Claims `slot` for re-opening: false when it is closed for good or already being re-opened.
fn claim(slot: &Slot) -> bool {
    !slot.closed.load(Ordering::Acquire) && !slot.reconnecting.swap(true, Ordering::AcqRel)
}

/// Re-opens `slot` with `open` until it succeeds, waiting with `sleep` (false: give up) between
/// tries, the wait doubling from [`FIRST_RETRY`] to [`MAX_RETRY`]; says the outage once.
async fn reopen<E, O, S>(
    slot: Arc<Slot>,
    mut open: impl FnMut() -> O,
    sleep: impl Fn(Duration) -> S,
) where
    E: std::fmt::Display,
    O: std::future::Future<Output = Result<Conn, E>>,
    S: std::future::Future<Output = bool>,
{
    let mut wait = FIRST_RETRY;
    let mut said = false;
    loop {
        match open().await {
            Ok(conn) => {
                *slot.conn.lock().unwrap() = Some(Arc::new(conn));
                if said {
                    tracing::info!("database connection open again");
                }
                break;
            }
            Err(e) => {
                if !said {
                    tracing::warn!(error = %e, "database unreachable; retrying");
                    said = true;
                }
                if !sleep(wait).await {
                    break;
                }
                wait = (wait * 2).min(MAX_RETRY);
            }
        }
    }
    slot.reconnecting.store(false, Ordering::Release);
}

/// Starts re-opening `slot` on `runtime` unless that is already under way.
fn revive(runtime: &tokio::runtime::Handle, url: &Arc<str>, slot: &Arc<Slot>) {
    if !claim(slot) {
        return;
    }
    let (url, target) = (url.clone(), slot.clone());
    runtime.spawn(reopen(
        slot.clone(),
        move || {
            let (url, target) = (url.clone(), target.clone());
            async move { open(&url, &target).await.map_err(OpenError::Db) }
        },
        |wait| async move {
            tokio::time::sleep(wait).await;
            true
        },
    ));
}

/// Opens one connection for `slot` on the runtime, prepares the statements, and watches it:
/// when it ends, the slot is emptied and re-opened.
async fn open(url: &Arc<str>, slot: &Arc<Slot>) -> Result<Conn, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    let (watch_url, watch_slot) = (url.clone(), slot.clone());
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(
                error = super::world::describe(&e),
                "database connection ended"
            );
        }
        forget_closed(&watch_slot);
        revive(&tokio::runtime::Handle::current(), &watch_url, &watch_slot);
    });
    prepare(client).await
}

/// Empties `slot` if its connection is closed.
fn forget_closed(slot: &Slot) {
    let mut held = slot.conn.lock().unwrap();
    if held.as_ref().is_some_and(|c| c.client.is_closed()) {
        *held = None;
    }
}

/// Starts re-opening a worker's `slot` on its thread unless that is already under way.
fn revive_local(set: &std::rc::Rc<WorkerSet>, slot: &Arc<Slot>) {
    if !claim(slot) {
        return;
    }
    let (set, target) = (set.clone(), slot.clone());
    local::spawn(reopen(
        slot.clone(),
        move || {
            let (set, target) = (set.clone(), target.clone());
            async move { open_local(&set, &target).await }
        },
        |wait| async move { local::sleep(wait).await.is_ok() },
    ));
}

/// Opens one connection for a worker's `slot` over the worker's reactor (the first address
/// that answers), prepares the statements and watches it.
async fn open_local(set: &std::rc::Rc<WorkerSet>, slot: &Arc<Slot>) -> Result<Conn, OpenError> {
    let mut last = None;
    let mut tcp = None;
    for addr in set.addrs.iter() {
        match local::LocalTcp::connect(*addr).await {
            Ok(t) => {
                tcp = Some(t);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = match tcp {
        Some(t) => t,
        None => {
            return Err(last.map_or_else(|| std::io::Error::other("no address").into(), Into::into));
        }
    };
    let (client, connection) = set.config.connect_raw(tcp, NoTls).await?;
    let (watch_set, watch_slot) = (set.clone(), slot.clone());
    local::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(
                error = super::world::describe(&e),
                "database connection ended"
            );
        }
        forget_closed(&watch_slot);
        revive_local(&watch_set, &watch_slot);
    });
    Ok(prepare(client).await?)
}

/// Prepares every statement on `client`.
async fn prepare(client: Client) -> Result<Conn, tokio_postgres::Error> {
    let items_by_price =
        format!("SELECT {ITEM_COLUMNS} FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3");
    let item = format!("SELECT {ITEM_COLUMNS} FROM items WHERE id = $1");
    let items_page = format!(
        "SELECT {ITEM_COLUMNS} FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3"
    );
    // What the body does not give (active, tags, rating) starts as HttpArena's reference
    // sets it; an existing item keeps its category, as there.
    let upsert_item = "INSERT INTO items (id, name, category, price, quantity, active, tags, \
         rating_score, rating_count) VALUES ($1, $2, $3, $4, $5, true, '[\"bench\"]', 0, 0) \
         ON CONFLICT (id) DO UPDATE SET name = $2, price = $4, quantity = $5";
    let update_item = "UPDATE items SET name = $2, price = $3, quantity = $4 WHERE id = $1";
    let st = Statements {
        world: client.prepare(WORLD).await?,
        fortunes: client.prepare(FORTUNES).await?,
        update_worlds: client.prepare(UPDATE_WORLDS).await?,
        items_by_price: client.prepare(&items_by_price).await?,
        item: client.prepare(&item).await?,
        items_page: client.prepare(&items_page).await?,
        upsert_item: client.prepare(upsert_item).await?,
        update_item: client.prepare(update_item).await?,
    };
    Ok(Conn { client, st })
}
