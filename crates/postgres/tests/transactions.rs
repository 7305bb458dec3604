//! Closure transactions (`Pool::transaction`, `TransactionBuilder::run`), savepoints and the
//! pool's metrics, against a real PostgreSQL 15 that each test starts itself, with both
//! drivers. Many transactions at once beside single statements on the shared connections,
//! ending every way one can (commit, an `Err`, a failed statement, a panic, the client gone):
//! no acknowledged write is lost and no uncommitted write is ever seen. Outcomes and orders
//! are asserted, never durations.

mod support;

use std::collections::HashSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use linerate_postgres::tokio_postgres::IsolationLevel;
use linerate_postgres::tokio_postgres::error::SqlState;
use linerate_postgres::{Driver, Error, Metrics, Pool};
use support::{DRIVERS, Driven, Pg, on_thread};
use tokio::sync::oneshot;

const TODOS: &str = "CREATE TABLE todos (id serial PRIMARY KEY, title text NOT NULL)";

/// Concurrent pairs: more than the sessions, so some wait their turn.
const PAIRS: usize = 60;

/// How request A's closure transaction ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ending {
    /// The closure returns `Ok`: committed.
    Commit,
    /// The closure returns the application's own `Err`.
    Refused,
    /// A statement fails and `?` returns its error.
    Failed,
    /// The closure panics.
    Panic,
    /// The request goes away: its future is dropped mid-transaction.
    ClientGone,
}

const ENDINGS: [Ending; 5] = [
    Ending::Commit,
    Ending::Refused,
    Ending::Failed,
    Ending::Panic,
    Ending::ClientGone,
];

/// The application's error type in these tests: the pool's, or its own refusal.
#[derive(Debug)]
enum AppError {
    Db(Error),
    Refused,
}

impl From<Error> for AppError {
    fn from(e: Error) -> AppError {
        AppError::Db(e)
    }
}

impl From<linerate_postgres::tokio_postgres::Error> for AppError {
    fn from(e: linerate_postgres::tokio_postgres::Error) -> AppError {
        AppError::Db(e.into())
    }
}

/// `fut`'s output, or `Err` if it panicked (as a server's handler machinery would see it).
async fn caught<F: Future>(fut: F) -> Result<F::Output, ()> {
    let mut fut = pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    })
    .await
}

#[test]
fn closure_transactions_beside_single_statements_lose_nothing_and_show_nothing_uncommitted() {
    let pg = Pg::start();
    pg.psql(TODOS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| concurrent(&pg, driver));
        pg.psql("TRUNCATE todos");
    }
}

/// What each pair reports.
#[derive(Default)]
struct Seen {
    /// Ids B was told (acknowledged single-statement writes).
    b_acked: Vec<i32>,
    /// Ids A's `transaction` returned `Ok` for (acknowledged commits).
    a_committed: Vec<i32>,
    /// A's rows B saw while A's transaction was open (must stay empty).
    uncommitted_seen: Vec<String>,
    /// How each A ended, as the caller saw it.
    outcomes: Vec<(Ending, String)>,
    finished: usize,
}

/// `PAIRS` times at once: request A runs a closure transaction that inserts a row, then waits
/// while request B, on the shared connections, looks for A's row (it must not see it) and
/// inserts its own (acknowledged with its id); then A's closure ends in one of the
/// [`Ending`]s. Every acknowledged id (B's, and A's committed ones) must be stored; no other A
/// row may be.
fn concurrent(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.connections(2)
        .sessions(4)
        .session_wait(support::EVENTUALLY);
    let insert = b.prepare(
        "insert",
        "INSERT INTO todos (title) VALUES ($1) RETURNING id",
    );
    let count = b.prepare("count", "SELECT count(*) FROM todos WHERE title = $1");
    let mut d = Driven::connect(&mut b, driver);
    let seen = Arc::new(Mutex::new(Seen::default()));

    for i in 0..PAIRS {
        let ending = ENDINGS[i % ENDINGS.len()];
        let (began_tx, began_rx) = oneshot::channel::<()>();
        let (acked_tx, acked_rx) = oneshot::channel::<()>();
        let (gone_tx, gone_rx) = oneshot::channel::<()>();
        let (pool, seen_a) = (d.pool.clone(), seen.clone());
        d.spawn(async move {
            let a = pool.transaction(async |tx| {
                let row = tx.query_id(insert, &[&format!("a-{i}")]).await?;
                let id: i32 = row[0].get(0);
                let _ = began_tx.send(());
                let _ = acked_rx.await;
                match ending {
                    Ending::Commit => Ok(id),
                    Ending::Refused => Err(AppError::Refused),
                    Ending::Failed => {
                        tx.batch_execute("SELECT 1 / 0").await?;
                        unreachable!("division by zero")
                    }
                    Ending::Panic => panic!("a handler's bug, mid-transaction"),
                    // Held open until B's acknowledgement drops this future (below).
                    Ending::ClientGone => std::future::pending().await,
                }
            });
            let outcome = match ending {
                Ending::ClientGone => {
                    let a = pin!(a);
                    match futures_util::future::select(a, gone_rx).await {
                        futures_util::future::Either::Left(_) => "finished".to_string(),
                        futures_util::future::Either::Right(_) => "dropped".to_string(),
                    }
                }
                _ => match caught(a).await {
                    Ok(Ok(id)) => {
                        seen_a.lock().unwrap().a_committed.push(id);
                        "committed".to_string()
                    }
                    Ok(Err(AppError::Refused)) => "refused".to_string(),
                    Ok(Err(AppError::Db(Error::Query(e)))) => {
                        format!("db error {:?}", e.code().map(SqlState::code))
                    }
                    Ok(Err(AppError::Db(e))) => format!("pool error {e}"),
                    Err(()) => "panicked".to_string(),
                },
            };
            let mut s = seen_a.lock().unwrap();
            s.outcomes.push((ending, outcome));
            s.finished += 1;
        });
        let (pool, seen_b) = (d.pool.clone(), seen.clone());
        d.spawn(async move {
            began_rx.await.expect("A began");
            let conn = pool.get().expect("a shared connection");
            let a_title = format!("a-{i}");
            let visible: i64 = conn
                .query_one(count, &[&a_title])
                .await
                .expect("B's look")
                .get(0);
            let row = conn
                .query_one(insert, &[&format!("b-{i}")])
                .await
                .expect("B's insert");
            let mut s = seen_b.lock().unwrap();
            if visible != 0 {
                s.uncommitted_seen.push(a_title);
            }
            s.b_acked.push(row.get(0));
            s.finished += 1;
            drop(s);
            let _ = acked_tx.send(());
            let _ = gone_tx.send(());
        });
    }
    d.until("every request answered", || {
        seen.lock().unwrap().finished == 2 * PAIRS
    });

    let s = seen.lock().unwrap();
    for (ending, outcome) in &s.outcomes {
        let want = match ending {
            Ending::Commit => "committed",
            Ending::Refused => "refused",
            // 22012: division_by_zero, the statement's own error.
            Ending::Failed => "db error Some(\"22012\")",
            Ending::Panic => "panicked",
            Ending::ClientGone => "dropped",
        };
        assert_eq!(outcome, want, "{driver:?}: {ending:?}");
    }
    assert!(
        s.uncommitted_seen.is_empty(),
        "{driver:?}: uncommitted rows seen: {:?}",
        s.uncommitted_seen
    );
    let stored: HashSet<i32> = pg
        .psql("SELECT id FROM todos")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let b_acked: HashSet<i32> = s.b_acked.iter().copied().collect();
    assert_eq!(b_acked.len(), PAIRS, "every B acknowledged once");
    let lost: Vec<&i32> = b_acked.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "{driver:?}: acknowledged and lost: {lost:?}"
    );
    let commits = PAIRS / ENDINGS.len();
    assert_eq!(s.a_committed.len(), commits, "{driver:?}");
    for id in &s.a_committed {
        assert!(stored.contains(id), "{driver:?}: commit {id} lost");
    }
    assert_eq!(
        pg.psql("SELECT count(*) FROM todos WHERE title LIKE 'a-%'"),
        commits.to_string(),
        "{driver:?}: an uncommitted write was kept"
    );
    // Every session came back, reset (the dropped and panicked ones included).
    let pool = d.pool.clone();
    d.until("every session given back", || {
        pool.metrics().sessions_in_use == 0
    });
}

#[test]
fn a_savepoint_rolled_back_keeps_the_outer_transactions_writes() {
    let pg = Pg::start();
    pg.psql(TODOS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| savepoints(&pg, driver));
        pg.psql("TRUNCATE todos");
    }
}

fn savepoints(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    let insert = b.prepare("insert", "INSERT INTO todos (title) VALUES ($1)");
    let mut d = Driven::connect(&mut b, driver);
    let pool = d.pool.clone();
    let refused: Vec<String> = d.run(async move {
        pool.transaction(async |tx| {
            tx.execute_id(insert, &[&"outer-1"]).await?;
            {
                // A name with a quote and a semicolon is one quoted identifier.
                let sp = tx.savepoint("inner \"one\"; --").await?;
                sp.execute_id(insert, &[&"inner-undone"]).await?;
                let failed = sp.batch_execute("SELECT 1 / 0").await;
                assert!(failed.is_err(), "division by zero");
                // Dropped here with its error: rolled back to, the outer one usable again.
            }
            tx.execute_id(insert, &[&"outer-2"]).await?;
            {
                let sp = tx.savepoint("kept").await?;
                sp.execute_id(insert, &[&"inner-kept"]).await?;
                sp.commit().await?; // RELEASE: joins the outer transaction
            }
            {
                let sp = tx.savepoint("rolled").await?;
                sp.execute_id(insert, &[&"inner-rolled"]).await?;
                sp.rollback().await?;
            }
            let mut refused = Vec::new();
            for name in ["", &"x".repeat(64), "a\0b"] {
                match tx.savepoint(name).await {
                    Err(e @ Error::BadName { .. }) => refused.push(e.to_string()),
                    other => panic!("{name:?}: {:?}", other.map(|_| ())),
                }
            }
            tx.execute_id(insert, &[&"outer-3"]).await?;
            Ok::<_, Error>(refused)
        })
        .await
        .expect("the transaction")
    });
    assert_eq!(refused.len(), 3, "{driver:?}: {refused:?}");
    assert_eq!(
        pg.psql("SELECT string_agg(title, ',' ORDER BY id) FROM todos"),
        "outer-1,outer-2,inner-kept,outer-3",
        "{driver:?}"
    );
}

#[test]
fn a_transactions_options_hold_in_it() {
    let pg = Pg::start();
    pg.psql(TODOS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| options(&pg, driver));
    }
}

fn options(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    let insert = b.prepare("insert", "INSERT INTO todos (title) VALUES ($1)");
    let mut d = Driven::connect(&mut b, driver);
    let pool = d.pool.clone();
    let (level, read_only_write) = d.run(async move {
        let mut session = pool.session().await.expect("a session");
        let level: String = session
            .build_transaction()
            .isolation_level(IsolationLevel::Serializable)
            .read_only(true)
            .deferrable(true)
            .run(async |tx| {
                let row = tx.query_one("SHOW transaction_isolation", &[]).await?;
                Ok::<_, Error>(row.get(0))
            })
            .await
            .expect("the read");
        let write = session
            .build_transaction()
            .read_only(true)
            .run(async |tx| {
                tx.execute_id(insert, &[&"in a read-only transaction"])
                    .await?;
                Ok::<_, Error>(())
            })
            .await;
        let code = match write {
            Err(Error::Query(e)) => e.code().cloned(),
            other => panic!("{other:?}"),
        };
        (level, code)
    });
    assert_eq!(level, "serializable", "{driver:?}");
    assert_eq!(
        read_only_write,
        Some(SqlState::READ_ONLY_SQL_TRANSACTION),
        "{driver:?}"
    );
    assert_eq!(pg.psql("SELECT count(*) FROM todos"), "0", "{driver:?}");
}

#[test]
fn metrics_count_sessions_waits_refusals_connections_and_reconnects() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| metrics(&pg, driver));
    }
}

fn metrics(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.connections(2)
        .sessions(2)
        .session_wait(Duration::from_millis(300));
    let mut d = Driven::connect(&mut b, driver);
    let pool = d.pool.clone();
    let now = |want: fn(&Metrics) -> bool| {
        let pool = pool.clone();
        move || want(&pool.metrics())
    };
    // With the worker driver the start-up connection is closed once the worker has its own.
    d.until("the shared connections open", now(|m| m.shared_open == 2));
    assert_eq!(
        pool.metrics(),
        Metrics {
            shared_open: 2,
            ..Metrics::default()
        },
        "{driver:?}"
    );

    // Two requests hold both sessions until told to let go.
    let release: Vec<oneshot::Sender<()>> = (0..2)
        .map(|_| {
            let (tx, rx) = oneshot::channel::<()>();
            let pool = pool.clone();
            d.spawn(async move {
                let _session = pool.session().await.expect("a session");
                let _ = rx.await;
            });
            tx
        })
        .collect();
    // In use from the moment a request has its permit; open once its connection is.
    d.until(
        "both sessions held and open",
        now(|m| m.sessions_in_use == 2 && m.sessions_open == 2),
    );

    // A third waits, counted while it does, then is told Busy and counted so.
    let (waited_tx, waited_rx) = oneshot::channel();
    let p = pool.clone();
    d.spawn(async move {
        let _ = waited_tx.send(p.session().await.map(|_| ()));
    });
    d.until("one request waiting", now(|m| m.sessions_waiting == 1));
    let waited = Arc::new(Mutex::new(waited_rx));
    let w = waited.clone();
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    d.until("the wait is over", move || {
        if let Ok(v) = w.lock().unwrap().try_recv() {
            *g.lock().unwrap() = Some(v);
        }
        g.lock().unwrap().is_some()
    });
    assert!(
        matches!(got.lock().unwrap().take(), Some(Err(Error::Busy))),
        "{driver:?}"
    );
    let m = pool.metrics();
    assert_eq!((m.sessions_waiting, m.busy), (0, 1), "{driver:?}: {m:?}");

    // Let go: both come back (after their reset) and stay open, idle.
    release.into_iter().for_each(|r| r.send(()).unwrap());
    d.until("both sessions back", now(|m| m.sessions_in_use == 0));
    assert_eq!(pool.metrics().sessions_open, 2, "{driver:?}");

    // Every connection of the pool is cut: the sessions are gone, the shared ones come back.
    pg.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    );
    d.until(
        "the shared connections opened again",
        now(|m| m.reconnects == 2 && m.shared_open == 2 && m.sessions_open == 0),
    );
    let m = pool.metrics();
    assert_eq!(
        m,
        Metrics {
            shared_open: 2,
            reconnects: 2,
            busy: 1,
            ..Metrics::default()
        },
        "{driver:?}"
    );
}
