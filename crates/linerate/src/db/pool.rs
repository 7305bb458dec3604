//! The database connections: a fixed number of tokio-postgres connections on the database
//! runtime, each with its prepared statements, handed out round-robin, and brought back after
//! they are lost.
//!
//! A lost connection (the server restarted, the network dropped it) is noticed when its
//! connection task ends or when a request finds it closed. Its slot is then re-opened in the
//! background, with a backoff doubling from [`FIRST_RETRY`] to [`MAX_RETRY`], while requests
//! use the other slots, or get [`Unavailable`] at once when none is open: a request never
//! waits on a database that is down.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::{Client, NoTls, Statement};

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
}

/// The connections.
pub struct Pool {
    url: Arc<str>,
    slots: Vec<Arc<Slot>>,
    next: AtomicUsize,
    runtime: tokio::runtime::Handle,
}

impl Pool {
    /// Opens `connections` connections to `url` (on `runtime`, which runs their tasks); the
    /// first error is returned, so a database that is down at start is said at start.
    pub fn connect(
        url: &str,
        connections: usize,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Pool, tokio_postgres::Error> {
        let url: Arc<str> = url.into();
        let slots: Vec<Arc<Slot>> = (0..connections.max(1))
            .map(|_| {
                Arc::new(Slot {
                    conn: Mutex::new(None),
                    reconnecting: AtomicBool::new(false),
                })
            })
            .collect();
        runtime.block_on(async {
            for slot in &slots {
                let conn = open(&url, slot).await?;
                *slot.conn.lock().unwrap() = Some(Arc::new(conn));
            }
            Ok::<_, tokio_postgres::Error>(())
        })?;
        Ok(Pool {
            url,
            slots,
            next: AtomicUsize::new(0),
            runtime: runtime.clone(),
        })
    }

    /// An open connection: the next one round-robin, or the one after it when that one is
    /// lost (and its reconnection started).
    pub fn get(&self) -> Result<Arc<Conn>, Unavailable> {
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let slot = &self.slots[(start + i) % n];
            let mut held = slot.conn.lock().unwrap();
            if let Some(conn) = held.as_ref() {
                if !conn.client.is_closed() {
                    return Ok(conn.clone());
                }
                *held = None;
            }
            drop(held);
            self.revive(slot);
        }
        Err(Unavailable)
    }

    /// Starts re-opening `slot` unless that is already under way.
    fn revive(&self, slot: &Arc<Slot>) {
        revive(&self.runtime, &self.url, slot);
    }

    /// How many connections are open now.
    pub fn open_connections(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                s.conn
                    .lock()
                    .unwrap()
                    .as_ref()
                    .is_some_and(|c| !c.client.is_closed())
            })
            .count()
    }
}

fn revive(runtime: &tokio::runtime::Handle, url: &Arc<str>, slot: &Arc<Slot>) {
    if slot.reconnecting.swap(true, Ordering::AcqRel) {
        return;
    }
    let (url, slot) = (url.clone(), slot.clone());
    runtime.spawn(async move {
        let mut wait = FIRST_RETRY;
        let mut said = false;
        loop {
            match open(&url, &slot).await {
                Ok(conn) => {
                    *slot.conn.lock().unwrap() = Some(Arc::new(conn));
                    if said {
                        tracing::info!("database connection open again");
                    }
                    break;
                }
                Err(e) => {
                    if !said {
                        tracing::warn!(
                            error = super::world::describe(&e),
                            "database unreachable; retrying"
                        );
                        said = true;
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_RETRY);
                }
            }
        }
        slot.reconnecting.store(false, Ordering::Release);
    });
}

/// Opens one connection for `slot`, prepares the statements, and watches it: when it ends,
/// the slot is emptied and re-opened.
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
        let mut held = watch_slot.conn.lock().unwrap();
        if held.as_ref().is_some_and(|c| c.client.is_closed()) {
            *held = None;
        }
        drop(held);
        revive(&tokio::runtime::Handle::current(), &watch_url, &watch_slot);
    });
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
