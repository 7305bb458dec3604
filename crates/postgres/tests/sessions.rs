//! Sessions against a real PostgreSQL 15 that each test starts itself, with both drivers:
//! issue O's lost write (a request's transaction must never take in another request's
//! statement, so no acknowledged write is lost, whether the transaction is rolled back, fails
//! or is dropped with its client), a session's state undone before the next request gets its
//! connection, and the wait for a session when all are in use (first come, first served, then
//! `Busy`). Outcomes and orders are asserted, never durations.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use linerate_postgres::{Driver, Error, Pool};
use support::{DRIVERS, Driven, Pg, on_thread};
use tokio::sync::oneshot;

const TODOS: &str = "CREATE TABLE todos (id serial PRIMARY KEY, title text NOT NULL)";

/// Concurrent pairs in the lost-write test: more than the sessions, so some wait their turn.
const PAIRS: usize = 60;

/// How the transaction of one pair ends without committing.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// `ROLLBACK`.
    Rollback,
    /// A statement in it fails (the transaction is aborted), then it is dropped.
    Error,
    /// The request goes away: its future is dropped mid-transaction.
    ClientGone,
}

#[test]
fn a_transaction_never_takes_in_another_requests_acknowledged_write() {
    let pg = Pg::start();
    pg.psql(TODOS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| lost_write(&pg, driver));
        pg.psql("TRUNCATE todos");
    }
}

/// Issue O's repro, `PAIRS` times at once: request A opens a transaction and inserts a row;
/// while it is open, request B inserts one with the pool's shared connection and is told its
/// id; then A's transaction ends uncommitted. Every id B was told must be in the table, and
/// none of A's rows.
fn lost_write(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.connections(1)
        .sessions(4)
        .session_wait(support::EVENTUALLY);
    let insert = b.prepare(
        "insert",
        "INSERT INTO todos (title) VALUES ($1) RETURNING id",
    );
    let mut d = Driven::connect(&mut b, driver);

    let acked = Arc::new(Mutex::new(Vec::<i32>::new()));
    let finished = Arc::new(Mutex::new(0usize));
    for i in 0..PAIRS {
        let ending = [Ending::Rollback, Ending::Error, Ending::ClientGone][i % 3];
        let (began_tx, began_rx) = oneshot::channel::<()>();
        let (acked_tx, acked_rx) = oneshot::channel::<()>();
        let (pool, done) = (d.pool.clone(), finished.clone());
        let a = async move {
            let mut session = pool.session().await.expect("a session");
            let tx = session.transaction().await.expect("BEGIN");
            tx.execute_id(insert, &[&format!("a-{i}")])
                .await
                .expect("A's insert");
            let _ = began_tx.send(());
            let _ = acked_rx.await;
            match ending {
                Ending::Rollback => tx.rollback().await.expect("ROLLBACK"),
                Ending::Error => {
                    let err = tx.batch_execute("SELECT 1 / 0").await;
                    assert!(err.is_err(), "division by zero");
                }
                // Held open until B's acknowledgement drops this future (below).
                Ending::ClientGone => std::future::pending().await,
            }
        };
        let (gone_tx, gone_rx) = oneshot::channel::<()>();
        let a_done = done.clone();
        d.spawn(async move {
            match ending {
                // The handler's future is dropped while its transaction is open.
                Ending::ClientGone => {
                    let a = Box::pin(a);
                    let _ = futures_util::future::select(a, gone_rx).await;
                }
                _ => a.await,
            }
            *a_done.lock().unwrap() += 1;
        });
        let (pool, acked) = (d.pool.clone(), acked.clone());
        d.spawn(async move {
            began_rx.await.expect("A began");
            let conn = pool.get().expect("a shared connection");
            let row = conn
                .query_one(insert, &[&format!("b-{i}")])
                .await
                .expect("B's insert");
            acked.lock().unwrap().push(row.get(0));
            let _ = acked_tx.send(());
            let _ = gone_tx.send(());
            *done.lock().unwrap() += 1;
        });
    }
    d.until("every request answered", || {
        *finished.lock().unwrap() == 2 * PAIRS
    });

    let acked: HashSet<i32> = acked.lock().unwrap().iter().copied().collect();
    assert_eq!(acked.len(), PAIRS, "every B acknowledged once");
    let stored: HashSet<i32> = pg
        .psql("SELECT id FROM todos WHERE title LIKE 'b-%'")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let lost: Vec<&i32> = acked.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "{driver:?}: acknowledged and lost: {lost:?}"
    );
    assert_eq!(
        pg.psql("SELECT count(*) FROM todos WHERE title LIKE 'a-%'"),
        "0",
        "{driver:?}: an uncommitted write was kept"
    );
}

#[test]
fn a_session_is_reset_before_the_next_request_gets_it() {
    let pg = Pg::start();
    pg.psql(TODOS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| reset(&pg, driver));
    }
}

fn reset(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.sessions(1);
    let mut d = Driven::connect(&mut b, driver);

    // A request leaves everything behind: a setting, a channel, a session advisory lock, a
    // temporary table, a cursor, and a transaction with a write in it, never committed.
    let pool = d.pool.clone();
    let first: i32 = d.run(async move {
        let session = pool.session().await.expect("a session");
        let c = session.client();
        c.batch_execute(
            "SET application_name = 'dirty'; LISTEN jobs; SELECT pg_advisory_lock(42); \
             CREATE TEMP TABLE scratch (a int); \
             BEGIN; INSERT INTO todos (title) VALUES ('uncommitted'); \
             DECLARE c CURSOR FOR SELECT 1",
        )
        .await
        .expect("the mess");
        c.query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0)
    });

    // The next request gets the same connection (one session), clean.
    let pool = d.pool.clone();
    let (second, state) = d.run(async move {
        let session = pool.session().await.expect("a session");
        let row = session
            .client()
            .query_one(
                "SELECT pg_backend_pid(), current_setting('application_name'), \
                 (SELECT count(*) FROM pg_listening_channels()), \
                 (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                    AND pid = pg_backend_pid()), \
                 to_regclass('scratch') IS NULL, \
                 (SELECT count(*) FROM pg_cursors WHERE name <> ''), \
                 txid_current_if_assigned() IS NULL AND \
                 (SELECT count(*) FROM todos WHERE title = 'uncommitted') = 0",
                &[],
            )
            .await
            .expect("the state");
        let state: (String, i64, i64, bool, i64, bool) = (
            row.get(1),
            row.get(2),
            row.get(3),
            row.get(4),
            row.get(5),
            row.get(6),
        );
        (row.get::<_, i32>(0), state)
    });
    assert_eq!(
        first, second,
        "{driver:?}: the session's connection is kept"
    );
    assert_eq!(
        state,
        (String::new(), 0, 0, true, 0, true),
        "{driver:?}: (application_name, channels, advisory locks, temp table gone, cursors, \
         not in the first request's transaction)"
    );
    assert_eq!(
        pg.psql("SELECT count(*) FROM todos WHERE title = 'uncommitted'"),
        "0",
        "{driver:?}"
    );
}

#[test]
fn a_request_waits_its_turn_for_a_session_then_is_told_busy() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| busy(&pg, driver));
    }
}

fn busy(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.sessions(1).session_wait(Duration::from_millis(300));
    let mut d = Driven::connect(&mut b, driver);

    // One request holds the only session until told to let go.
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let (held_tx, held_rx) = oneshot::channel::<i32>();
    let pool = d.pool.clone();
    d.spawn(async move {
        let session = pool.session().await.expect("the first session");
        let pid: i32 = session
            .client()
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        let _ = held_tx.send(pid);
        let _ = release_rx.await;
    });
    let held = Arc::new(Mutex::new(held_rx));
    let pid = Arc::new(Mutex::new(None));
    let (h, p) = (held.clone(), pid.clone());
    d.until("the first request holds its session", || {
        if let Ok(v) = h.lock().unwrap().try_recv() {
            *p.lock().unwrap() = Some(v);
        }
        p.lock().unwrap().is_some()
    });

    // A second is told Busy once its wait is over: it never got the held connection.
    let pool = d.pool.clone();
    let got = d.run(async move { pool.session().await.map(|_| ()) });
    assert!(matches!(got, Err(Error::Busy)), "{driver:?}: {got:?}");

    // A third waits; when the first lets go, it gets the same connection, reset.
    let pool = d.pool.clone();
    let third = Arc::new(Mutex::new(None));
    let t = third.clone();
    d.spawn(async move {
        let got = match pool.session().await {
            Ok(s) => s
                .client()
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .map(|r| r.get::<_, i32>(0))
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        *t.lock().unwrap() = Some(got);
    });
    // Let the third queue up (it runs to its wait), then release the first.
    d.turn();
    release_tx.send(()).unwrap();
    d.until("the third request got a session", || {
        third.lock().unwrap().is_some()
    });
    let first = pid.lock().unwrap().unwrap();
    assert_eq!(
        third.lock().unwrap().clone().unwrap(),
        Ok(first),
        "{driver:?}"
    );
}
