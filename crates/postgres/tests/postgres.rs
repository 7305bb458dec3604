//! linerate-postgres against a real PostgreSQL 15 that each test starts itself
//! (`scripts/pg.sh start`, stopped and removed at the end), with both drivers: the
//! application's own statements (registered, executed, rows checked, pipelined on one
//! connection; one that does not prepare named at start); a database stopped and started
//! again (requests answered `Unavailable` while it is down, never left waiting, then served
//! again on new connections with the statements prepared again); and a slow query beside fast
//! ones on one worker (answers checked by the order they complete in, never by a clock).

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use linerate_postgres::{ConnectError, Driver, Error, Pool};
use support::{DRIVERS, Driven, EVENTUALLY, Pg, on_thread};

/// The table the tests' own statements read and write (not `users`: the demo's seed,
/// scripts/pg/schema.sql, has one of its own in the same database).
const USERS: &str = "CREATE TABLE test_users (id int PRIMARY KEY, name text NOT NULL); \
     INSERT INTO test_users VALUES (1, 'ada'), (2, 'brian'), (3, 'chris'), (4, 'dana')";

#[test]
fn the_users_own_statements_return_their_rows() {
    let pg = Pg::start();
    pg.psql(USERS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| own_statements(&pg, driver));
    }
}

fn own_statements(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.connections(1);
    let by_id = b.prepare("user_by_id", "SELECT name FROM test_users WHERE id = $1");
    let ids = b.prepare_all([
        (
            "users_like",
            "SELECT id FROM test_users WHERE name LIKE $1 ORDER BY id",
        ),
        ("rename", "UPDATE test_users SET name = $2 WHERE id = $1"),
        ("backend_pid", "SELECT pg_backend_pid()"),
    ]);
    let [like, rename, pid] = ids[..] else {
        panic!("{ids:?}")
    };
    let mut d = Driven::connect(&mut b, driver);

    // Found by name too, each where it was registered.
    for (name, want) in [
        ("user_by_id", Some(by_id)),
        ("users_like", Some(like)),
        ("rename", Some(rename)),
        ("backend_pid", Some(pid)),
        ("missing", None),
    ] {
        assert_eq!(d.pool.statement_id(name), want, "{name}");
    }

    // One row, or none.
    for (id, want) in [(1, Some("ada")), (4, Some("dana")), (99, None)] {
        let pool = d.pool.clone();
        let got = d.run(async move {
            let conn = pool.get()?;
            let row = conn.query_opt(by_id, &[&id]).await?;
            Ok::<_, Error>(row.map(|r| r.get::<_, String>(0)))
        });
        assert_eq!(got.unwrap().as_deref(), want, "user {id}");
    }
    // A tokio timer and a query in one future, on either driver: the worker driver's futures
    // run on the worker's tokio runtime.
    let pool = d.pool.clone();
    let got = d.run(async move {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let conn = pool.get()?;
        let row = conn.query_one(by_id, &[&1i32]).await?;
        Ok::<_, Error>(row.get::<_, String>(0))
    });
    assert_eq!(got.unwrap(), "ada");
    // Many rows, in order.
    for (pattern, want) in [("%a%", vec![1, 2, 4]), ("c%", vec![3]), ("z%", vec![])] {
        let pool = d.pool.clone();
        let got = d.run(async move {
            let conn = pool.get()?;
            let rows = conn.query(like, &[&pattern]).await?;
            Ok::<_, Error>(rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>())
        });
        assert_eq!(got.unwrap(), want, "{pattern}");
    }
    // A write: rows changed, and the table holds it.
    let name = format!("brian-{driver:?}");
    for (id, changed) in [(2, 1), (99, 0)] {
        let (pool, name) = (d.pool.clone(), name.clone());
        let got = d.run(async move {
            let conn = pool.get()?;
            Ok::<_, Error>(conn.execute(rename, &[&id, &name]).await?)
        });
        assert_eq!(got.unwrap(), changed, "rename {id}");
    }
    assert_eq!(pg.psql("SELECT name FROM test_users WHERE id = 2"), name);

    // Pipelined: fifty queries in flight together on the one connection, each answered right.
    let pool = d.pool.clone();
    let answers = d.run(async move {
        let conn = pool.get()?;
        let queries = (0..50).map(|i| {
            let conn = conn.clone();
            async move {
                let id = i % 4 + 1;
                let name: String = conn.query_one(by_id, &[&id]).await?.get(0);
                let backend: i32 = conn.query_one(pid, &[]).await?.get(0);
                Ok::<_, Error>((id, name, backend))
            }
        });
        futures_util::future::try_join_all(queries).await
    });
    let answers = answers.unwrap();
    assert_eq!(answers.len(), 50);
    let backends: HashSet<i32> = answers.iter().map(|a| a.2).collect();
    assert_eq!(backends.len(), 1, "one connection: {backends:?}");
    for (id, got, _) in &answers {
        let want = match id {
            1 => "ada",
            2 => &name,
            3 => "chris",
            _ => "dana",
        };
        assert_eq!(got, want, "user {id}");
    }
}

#[test]
fn a_statement_that_does_not_prepare_is_named_at_start() {
    let pg = Pg::start();
    for driver in DRIVERS {
        let mut b = Pool::builder(&pg.url);
        b.driver(driver);
        b.prepare("fine", "SELECT 1");
        b.prepare("broken", "SELECT nothing FROM no_such_table");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        match b.connect(runtime.handle()) {
            Err(ConnectError::Prepare { name, error }) => {
                assert_eq!(name, "broken", "{driver:?}");
                let said = linerate_postgres::describe(&error);
                assert!(said.contains("no_such_table"), "{driver:?}: {said}");
            }
            Err(e) => panic!("{driver:?}: {e}"),
            Ok(_) => panic!("{driver:?}: a broken statement was accepted"),
        }
    }
    // Nothing listens on port 1 of 127.0.0.1: a database down at start is said at start.
    for driver in DRIVERS {
        let mut b = Pool::builder("postgres://linerate:secret@127.0.0.1:1/linerate");
        b.driver(driver);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let err = b.connect(runtime.handle()).err().expect("refused");
        assert!(matches!(err, ConnectError::Connect(_)), "{driver:?}: {err}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}

#[test]
fn a_database_restart_answers_unavailable_then_serves_again() {
    let pg = Pg::start();
    pg.psql(USERS);
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| restart(&pg, driver));
    }
}

/// One request: user 1's name and the backend that answered, by the registered statements.
fn ask(
    d: &mut Driven,
    by_id: linerate_postgres::StatementId,
    pid: linerate_postgres::StatementId,
) -> Result<(String, i32), Error> {
    let pool = d.pool.clone();
    d.run(async move {
        let conn = pool.get()?;
        let name: String = conn.query_one(by_id, &[&1i32]).await?.get(0);
        let backend: i32 = conn.query_one(pid, &[]).await?.get(0);
        Ok((name, backend))
    })
}

fn restart(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    b.connections(2);
    let by_id = b.prepare("user_by_id", "SELECT name FROM test_users WHERE id = $1");
    let pid = b.prepare("backend_pid", "SELECT pg_backend_pid()");
    let mut d = Driven::connect(&mut b, driver);

    // Round-robin over both connections.
    let before: HashSet<i32> = (0..4).map(|_| ask(&mut d, by_id, pid).unwrap().1).collect();
    assert_eq!(before.len(), 2, "{before:?}");

    pg.down();
    // Every request is answered (a request on a connection not yet seen closed fails as a
    // query); once the pool has seen them go, at once with Unavailable.
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        match ask(&mut d, by_id, pid) {
            Err(Error::Unavailable) => break,
            Err(Error::Query(_)) => {}
            Err(Error::Busy) => panic!("busy: the shared connections need no session"),
            Err(e @ Error::BadName { .. }) => panic!("{e}"),
            Ok(answer) => panic!("answered while the database is down: {answer:?}"),
        }
        assert!(Instant::now() < deadline, "never Unavailable");
        d.turn();
    }
    // While it stays down, every request: Unavailable, and the pool keeps trying meanwhile.
    for _ in 0..10 {
        assert!(matches!(ask(&mut d, by_id, pid), Err(Error::Unavailable)));
        d.turn();
    }

    pg.up();
    // Both connections come back by themselves, on new backends, with the statements
    // prepared again there (the requests use them).
    let mut after = HashSet::new();
    let deadline = Instant::now() + EVENTUALLY;
    while after.len() < 2 {
        if let Ok((name, backend)) = ask(&mut d, by_id, pid) {
            assert_eq!(name, "ada");
            after.insert(backend);
        }
        assert!(Instant::now() < deadline, "reconnected: {after:?}");
        d.turn();
    }
    assert!(before.is_disjoint(&after), "{before:?} {after:?}");
    for _ in 0..10 {
        let (name, backend) = ask(&mut d, by_id, pid).expect("served again");
        assert_eq!(name, "ada");
        assert!(after.contains(&backend), "{backend} {after:?}");
    }
}

#[test]
fn a_slow_query_does_not_hold_up_fast_ones_on_the_same_worker() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| slow_query(&pg, driver));
    }
}

fn slow_query(pg: &Pg, driver: Driver) {
    // Two connections for the one worker (this thread, with the worker driver).
    let mut b = Pool::builder(&pg.url);
    b.connections(2);
    let slow = b.prepare("slow", "SELECT pg_sleep(0.5)");
    let fast = b.prepare("fast", "SELECT $1::int");
    let mut d = Driven::connect(&mut b, driver);

    // Completions, in the order they happen: (label, the value answered).
    let done: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let record = |label: String, value: i32| {
        let done = done.clone();
        move || done.lock().unwrap().push((label, value))
    };

    let slow_conn = d.pool.get().unwrap();
    let finished = record("slow".into(), 0);
    let conn = slow_conn.clone();
    d.spawn(async move {
        conn.query_one(slow, &[]).await.unwrap();
        finished();
    });
    // It is running in the database before anything else is asked.
    d.until("the slow query runs", || {
        pg.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
             AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()",
        ) == "1"
    });
    // Ten fast ones after it, round-robin: half on the other connection, half pipelined
    // behind the slow one on its own (in flight together with it).
    let (mut beside, mut behind) = (HashSet::new(), HashSet::new());
    for i in 0..10 {
        let conn = d.pool.get().unwrap();
        let label = format!("fast {i}");
        if Arc::ptr_eq(&conn, &slow_conn) {
            behind.insert(label.clone());
        } else {
            beside.insert(label.clone());
        }
        let done = done.clone();
        d.spawn(async move {
            let value = match conn.query_one(fast, &[&i]).await {
                Ok(row) => row.get(0),
                Err(e) => panic!("fast {i}: {}", linerate_postgres::describe(&e)),
            };
            done.lock().unwrap().push((label, value));
        });
    }
    // And work that needs no database at all.
    let plain = record("plain".into(), 0);
    d.spawn(async move { plain() });
    assert_eq!((beside.len(), behind.len()), (5, 5));

    d.until("every query answered", || done.lock().unwrap().len() == 12);
    let done = done.lock().unwrap().clone();
    for (label, value) in &done {
        if let Some(i) = label.strip_prefix("fast ") {
            assert_eq!(i.parse::<i32>().unwrap(), *value, "{label}");
        }
    }
    let labels: Vec<&str> = done.iter().map(|(l, _)| l.as_str()).collect();
    let slow_at = labels.iter().position(|l| *l == "slow").unwrap();
    // Answered while the slow one was still running: every one on the other connection, and
    // the work that needs no database. (The ones pipelined behind the slow one on its own
    // connection are answered by the server after it, in one batch with it; which of that
    // batch's futures runs first is the executor's choice, so their place is not checked.)
    let first: HashSet<&str> = labels[..slow_at].iter().copied().collect();
    for label in beside.iter().map(String::as_str).chain(["plain"]) {
        assert!(
            first.contains(label),
            "{label} waited for the slow query: {labels:?}"
        );
    }
    assert_eq!(labels.len(), 12, "{labels:?}");
    let answered: HashSet<&str> = labels.iter().copied().collect();
    assert!(
        behind.iter().all(|l| answered.contains(l.as_str())),
        "{labels:?}"
    );
}
