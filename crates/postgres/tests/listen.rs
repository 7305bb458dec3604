//! `LISTEN`/`NOTIFY` (`Pool::listen`) against a real PostgreSQL 15 that each test starts
//! itself, with both drivers: notifications come in order and only once their transaction
//! commits, from a session or from psql; a listener whose connection is cut listens again and
//! says that some may have been missed; a dropped listener closes its connection; a channel
//! name PostgreSQL would not keep is refused. Outcomes and orders are asserted, never
//! durations.

mod support;

use futures_util::StreamExt;
use linerate_postgres::{Driver, Error, Listener, Notice, Pool};
use support::{DRIVERS, Driven, EVENTUALLY, Pg, on_thread};

/// The reader's side, on a runtime of its own (a listener may be read on any thread).
struct Reader {
    rt: tokio::runtime::Runtime,
    listener: Listener,
}

impl Reader {
    fn new(d: &mut Driven, channels: &[&str]) -> Reader {
        let listen = d.pool.listen(channels);
        let listener = d.run(listen).expect("a listener");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        Reader { rt, listener }
    }

    /// The next notice; panics if none comes.
    fn notice(&mut self) -> Notice {
        let Reader { rt, listener } = self;
        let next = rt.block_on(async { tokio::time::timeout(EVENTUALLY, listener.next()).await });
        next.expect("a notice in time").expect("the stream goes on")
    }

    /// The next notice as `channel:payload`, or `missed`; panics if none comes.
    fn next(&mut self) -> String {
        match self.notice() {
            Notice::Notification(n) => format!("{}:{}", n.channel(), n.payload()),
            Notice::Missed => "missed".to_string(),
        }
    }
}

/// The backends that last ran a `LISTEN` (the listeners' connections), by psql.
fn listening(pg: &Pg) -> String {
    pg.psql(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND query LIKE 'LISTEN%'",
    )
}

#[test]
fn notifications_come_in_order_once_committed_from_a_session_or_psql() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| in_order(&pg, driver));
    }
}

fn in_order(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    let mut d = Driven::connect(&mut b, driver);
    let mut reader = Reader::new(&mut d, &["jobs", "Mixed \"Case\""]);

    // From a session: a committed transaction's two, a rolled-back one's never, a channel
    // nobody listens to never.
    let pool = d.pool.clone();
    let pid = d.run(async move {
        let mut session = pool.session().await.expect("a session");
        session
            .run_transaction(async |tx| {
                tx.batch_execute(
                    "SELECT pg_notify('jobs', '1'); SELECT pg_notify('other', 'x'); \
                     SELECT pg_notify('jobs', '2')",
                )
                .await?;
                Ok::<_, Error>(())
            })
            .await
            .expect("committed");
        let rolled_back = session
            .run_transaction(async |tx| {
                tx.batch_execute("SELECT pg_notify('jobs', 'never')")
                    .await?;
                Err::<(), _>(Error::Busy)
            })
            .await;
        assert!(rolled_back.is_err());
        let row = session
            .client()
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap();
        row.get::<_, i32>(0)
    });
    match reader.notice() {
        Notice::Notification(n) => {
            assert_eq!((n.channel(), n.payload()), ("jobs", "1"), "{driver:?}");
            assert_eq!(n.process_id(), pid, "{driver:?}: the sender's pid");
        }
        Notice::Missed => panic!("{driver:?}: missed"),
    }
    assert_eq!(reader.next(), "jobs:2", "{driver:?}");

    // From psql: the channel's case and quotes are kept (pg_notify takes it as given), and a
    // NOTIFY statement folds an unquoted name to lower case.
    pg.psql("SELECT pg_notify('Mixed \"Case\"', '3')");
    pg.psql("NOTIFY JOBS, '4'");
    pg.psql("SELECT pg_notify('mixed \"case\"', 'not ours')");
    pg.psql("NOTIFY jobs, '5'");
    assert_eq!(reader.next(), "Mixed \"Case\":3", "{driver:?}");
    assert_eq!(reader.next(), "jobs:4", "{driver:?}");
    assert_eq!(reader.next(), "jobs:5", "{driver:?}");
    assert_eq!(d.pool.metrics().listeners_open, 1, "{driver:?}");
}

#[test]
fn a_listener_whose_connection_is_cut_listens_again_and_says_some_were_missed() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| cut(&pg, driver));
    }
}

fn cut(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    let mut d = Driven::connect(&mut b, driver);
    let mut reader = Reader::new(&mut d, &["jobs"]);
    pg.psql("NOTIFY jobs, 'before'");
    assert_eq!(reader.next(), "jobs:before", "{driver:?}");

    let cut = pg.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND query LIKE 'LISTEN%'",
    );
    assert_eq!(cut, "1", "{driver:?}: the listener's connection");
    // The mark comes once it listens again: from then on nothing is missed.
    assert_eq!(reader.next(), "missed", "{driver:?}");
    pg.psql("NOTIFY jobs, 'after'");
    assert_eq!(reader.next(), "jobs:after", "{driver:?}");
    let m = d.pool.metrics();
    assert_eq!(
        (m.listeners_open, m.reconnects),
        (1, 1),
        "{driver:?}: {m:?}"
    );
}

#[test]
fn a_dropped_listener_closes_its_connection() {
    let pg = Pg::start();
    for driver in DRIVERS {
        eprintln!("driver {driver:?}");
        on_thread(|| dropped(&pg, driver));
    }
}

fn dropped(pg: &Pg, driver: Driver) {
    let mut b = Pool::builder(&pg.url);
    let mut d = Driven::connect(&mut b, driver);
    let reader = Reader::new(&mut d, &["jobs"]);
    assert_eq!(listening(pg), "1", "{driver:?}");
    drop(reader);
    let pool = d.pool.clone();
    d.until("the listener's connection closed", || {
        pool.metrics().listeners_open == 0 && listening(pg) == "0"
    });
}

#[test]
fn a_channel_name_postgresql_would_not_keep_is_refused() {
    let pg = Pg::start();
    on_thread(|| {
        let mut b = Pool::builder(&pg.url);
        let mut d = Driven::connect(&mut b, Driver::Runtime);
        let long = "c".repeat(64);
        for channels in [&["jobs", ""][..], &[&long], &["a\0b"]] {
            // The names are read when `listen` is called: its future borrows none of them.
            let listen = d.pool.listen(channels);
            let got = d.run(async move { listen.await.map(|_| ()) });
            assert!(
                matches!(got, Err(Error::BadName { .. })),
                "{channels:?}: {got:?}"
            );
        }
        assert_eq!(d.pool.metrics().listeners_open, 0);
        assert_eq!(listening(&pg), "0");
    });
}
