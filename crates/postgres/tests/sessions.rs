//! Sessions against a real PostgreSQL 15 that each test starts itself, with both drivers:
//! the lost write once found (a request's transaction must never take in another request's
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

/// The lost write's repro, `PAIRS` times at once: request A opens a transaction and inserts a row;
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

/// What PostgreSQL answers (and logs) to a `ROLLBACK` outside a transaction.
const NO_TRANSACTION: &str = "there is no transaction in progress";

/// Every session given back was reset with a `ROLLBACK` first, which outside a
/// transaction PostgreSQL answers with a WARNING ("there is no transaction in progress"),
/// logged by tokio-postgres at INFO: once per transaction, and per session used at all. The
/// reset now rolls back only a transaction that is open, and still leaves none open: one
/// committed, one rolled back, statements alone, one left open by the raw client, one left
/// aborted. Each time the backend is idle before the next request gets it.
#[test]
fn a_session_reset_rolls_back_only_an_open_transaction_and_warns_of_nothing() {
    let pg = Pg::start();
    pg.psql(TODOS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| quiet_reset(&pg, driver));
    }
    assert_eq!(
        pg.log_lines(NO_TRANSACTION),
        0,
        "a ROLLBACK outside a transaction"
    );
    assert_eq!(
        pg.psql("SELECT string_agg(title, ',' ORDER BY title) FROM todos"),
        "committed,committed",
        "the committed rows stay, one per driver; the rest were rolled back"
    );
}

/// One way a request uses its session, and ends with it.
type Use = fn(
    linerate_postgres::Session,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

fn quiet_reset(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.sessions(1);
    let mut d = Driven::connect(&mut b, driver);
    let uses: [(&str, Use); 6] = [
        ("committed", |mut s| {
            Box::pin(async move {
                s.run_transaction(async |tx| {
                    tx.execute("INSERT INTO todos (title) VALUES ('committed')", &[])
                        .await?;
                    Ok::<_, Error>(())
                })
                .await
                .expect("committed");
            })
        }),
        ("rolled back", |mut s| {
            Box::pin(async move {
                let got = s
                    .run_transaction(async |tx| {
                        tx.execute("INSERT INTO todos (title) VALUES ('rolled back')", &[])
                            .await?;
                        Err::<(), _>(Error::Unavailable)
                    })
                    .await;
                assert!(got.is_err());
            })
        }),
        ("statements alone", |s| {
            Box::pin(async move {
                s.client()
                    .batch_execute("SELECT 1; SELECT 2")
                    .await
                    .unwrap();
            })
        }),
        ("a guard committed", |mut s| {
            Box::pin(async move {
                let tx = s.transaction().await.unwrap();
                tx.batch_execute("SELECT 1").await.unwrap();
                tx.commit().await.unwrap();
            })
        }),
        ("left open", |s| {
            Box::pin(async move {
                s.client()
                    .batch_execute("BEGIN; INSERT INTO todos (title) VALUES ('left open')")
                    .await
                    .unwrap();
            })
        }),
        ("left aborted", |s| {
            Box::pin(async move {
                let c = s.client();
                c.batch_execute("BEGIN").await.unwrap();
                assert!(c.batch_execute("SELECT 1 / 0").await.is_err());
            })
        }),
    ];
    for (name, use_it) in uses {
        let pool = d.pool.clone();
        let pid: i32 = d.run(async move {
            let s = pool.session().await.expect("a session");
            let pid = s
                .client()
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .unwrap()
                .get(0);
            use_it(s).await;
            pid
        });
        let pool = d.pool.clone();
        d.until("the session is reset and given back", || {
            pool.metrics().sessions_in_use == 0
        });
        assert_eq!(
            pg.psql(&format!(
                "SELECT state FROM pg_stat_activity WHERE pid = {pid}"
            )),
            "idle",
            "{driver:?} {name}: no transaction left open for the next request"
        );
    }
    assert_eq!(
        d.pool.metrics().sessions_open,
        1,
        "{driver:?}: one kept throughout"
    );
}

/// During an outage every request that wanted a session tried a fresh connect
/// and logged "session connection did not open" (61,937 lines in 5 s). Now the outage is
/// said (and counted) once, and the tries back off as the shared connections' do, while the
/// requests meanwhile are told `Unavailable` at once; the first session that opens ends it.
#[test]
fn an_outage_is_said_once_and_session_connects_back_off() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| outage(&pg, driver));
    }
}

/// Requests for a session during an outage.
const DURING_OUTAGE: usize = 300;

fn outage(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.sessions(2);
    let mut d = Driven::connect(&mut b, driver);
    pg.down();
    let pool = d.pool.clone();
    let refused = d.run(async move {
        let mut refused = 0;
        for _ in 0..DURING_OUTAGE {
            if let Err(Error::Unavailable) = pool.session().await {
                refused += 1;
            }
        }
        refused
    });
    assert_eq!(
        refused, DURING_OUTAGE,
        "{driver:?}: every one told Unavailable"
    );
    let m = d.pool.metrics();
    assert_eq!(
        m.session_outages, 1,
        "{driver:?}: one outage, said once: {m:?}"
    );
    // Backed off: the tries are those the waits (50 ms doubling to 2 s) let through, a
    // handful in any run, never one per request.
    assert!(
        (1..=DURING_OUTAGE / 10).contains(&(m.session_open_failures as usize)),
        "{driver:?}: {m:?}"
    );

    pg.up();
    assert!(
        ask_until(&mut d, |got| got.is_ok()),
        "{driver:?}: a session opens once the database is back"
    );
    let m = d.pool.metrics();
    assert_eq!(m.session_outages, 1, "{driver:?}: {m:?}");

    // A second outage is said again, once.
    pg.down();
    assert!(
        ask_until(&mut d, |got| matches!(got, Err(Error::Unavailable))),
        "{driver:?}: Unavailable in the second outage"
    );
    for _ in 0..DURING_OUTAGE {
        let pool = d.pool.clone();
        d.run(async move { pool.session().await.map(|_| ()) })
            .unwrap_err();
    }
    let m = d.pool.metrics();
    assert_eq!(m.session_outages, 2, "{driver:?}: {m:?}");
    pg.up();
}

/// Asks for a session until `done` holds for the outcome (the session dropped at once), a
/// turn of the worker between asks; false if it never does within [`support::EVENTUALLY`].
fn ask_until(d: &mut Driven, done: impl Fn(&Result<(), Error>) -> bool) -> bool {
    let deadline = std::time::Instant::now() + support::EVENTUALLY;
    while std::time::Instant::now() < deadline {
        let pool = d.pool.clone();
        let got = d.run(async move { pool.session().await.map(|_| ()) });
        if done(&got) {
            return true;
        }
        d.turn();
    }
    false
}
