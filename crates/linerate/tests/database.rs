//! The demo's database endpoints against a real PostgreSQL 15 that each test starts itself
//! (`scripts/pg.sh start`: a throwaway seeded cluster on 127.0.0.1, stopped and removed at the
//! end): TechEmpower's `/db`, `/queries`, `/updates`, `/fortunes` and `/cached-queries` by
//! its verifier's rules, with rows read back from the database; HttpArena's `/async-db` and
//! `/crud/items` by its validate.sh checks (cache and anti-cheat cases included); the database
//! stopped and started again under the server; a query held by a lock while `/plaintext`
//! answers on the same worker; and a database down at start refused in one line. Each runs
//! with both drivers (the database runtime beside the worker, and the worker's own loop).

mod common;
#[path = "../../../frameworks/Rust/linerate/tests/support/mod.rs"]
mod techempower;

use common::tier::TierServer;

use std::net::SocketAddr;
use std::process::Command;

use common::Client;
use common::bin::{run_err, serve};
use techempower::{FORTUNES_PAGE, Pg, worlds};

/// `--database-driver` values: every database test runs with each.
const DRIVERS: [&str; 2] = ["runtime", "worker"];

/// The demo served from `pg` with `driver` and `connections` database connections.
fn serve_db(pg: &Pg, driver: &str, connections: usize) -> common::bin::Served {
    eprintln!("--database-driver {driver}");
    serve(&[
        "--database-url",
        &pg.url,
        "--database-connections",
        &connections.to_string(),
        "--database-driver",
        driver,
    ])
}

#[test]
fn db_and_queries_answer_from_the_database() {
    let pg = Pg::start();
    for driver in DRIVERS {
        db_and_queries(&pg, driver);
    }
    // Over the cluster's Unix socket (its directory; local logins are trusted): the runtime
    // driver serves; the worker driver, which speaks TCP only, says so in one line.
    let port = pg
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let dir: String = pg.dir.replace('/', "%2F");
    let unix = format!("postgres://linerate@{dir}:{port}/linerate");
    let s = serve(&["--database-url", &unix, "--database-driver", "runtime"]);
    assert_eq!(Client::connect(s.addr).get("/db").status, 200);
    drop(s);
    let (code, stderr) = run_err(&["serve", "--addr", "127.0.0.1:0", "--database-url", &unix]);
    assert_ne!(code, 0);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("for a Unix socket use --database-driver runtime"),
        "{stderr}"
    );
}

fn db_and_queries(pg: &Pg, driver: &str) {
    let s = serve_db(pg, driver, 2);
    let mut c = Client::connect(s.addr);

    // /db: one object, as the database holds it.
    let r = c.get("/db");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let rows = worlds(&r.text());
    assert_eq!(rows.len(), 1);
    let (id, n) = rows[0];
    assert_eq!(
        pg.value(&format!("SELECT randomnumber FROM world WHERE id = {id}")),
        n.to_string()
    );
    let body = r.text();
    assert!(
        body.starts_with('{'),
        "/db is an object, not a list: {body}"
    );

    // /queries: TechEmpower's bounds, and every row real.
    for (query, want) in [
        ("?queries=20", 20),
        ("?queries=1", 1),
        ("", 1),
        ("?queries=foo", 1),
        ("?queries=0", 1),
        ("?queries=-3", 1),
        ("?queries=501", 500),
    ] {
        let r = c.get(&format!("/queries{query}"));
        assert_eq!(r.status, 200, "{query}");
        assert!(r.text().starts_with('['), "/queries is a list: {query}");
        let rows = worlds(&r.text());
        assert_eq!(rows.len(), want, "{query}");
        if want == 20 {
            let distinct: std::collections::HashSet<_> = rows.iter().collect();
            assert_eq!(pg.worlds_held(&rows), distinct.len(), "{rows:?}");
        }
    }
    // Plain routes still answer on the same worker.
    assert_eq!(c.get("/plaintext").text(), "Hello, World!");
    // The server holds the connections asked for, no more (none left from start-up).
    common::eventually("two database connections", || pg.client_connections() == 2);
    drop(s);

    // Unset, the worker driver opens one per worker (the test servers run one).
    if driver == "worker" {
        let s = serve(&["--database-url", &pg.url, "--database-driver", driver]);
        assert_eq!(Client::connect(s.addr).get("/db").status, 200);
        common::eventually("one database connection", || pg.client_connections() == 1);
        drop(s);
    }
}

#[test]
fn a_database_that_is_down_at_start_is_one_line_without_the_password() {
    // Nothing listens on port 1 of 127.0.0.1.
    let (code, stderr) = run_err(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--database-url",
        "postgres://linerate:secret@127.0.0.1:1/linerate",
    ]);
    assert_ne!(code, 0);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("linerate: database postgres://linerate@127.0.0.1:1/linerate:"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret"), "{stderr}");
}

#[test]
fn cache_tier_is_refused_in_one_line_without_a_database_or_with_a_bad_url() {
    let no_db = run_err(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--cache-tier",
        "redis://127.0.0.1:1",
    ]);
    assert_ne!(no_db.0, 0);
    assert!(
        no_db.1.contains("--cache-tier needs --database-url"),
        "{}",
        no_db.1
    );
    // Refused at start, before any connection: nothing listens on port 1.
    for (url, why) in [
        ("http://127.0.0.1:1", "the scheme must be"),
        ("memcached://127.0.0.1:port", "the port is not a number"),
        ("rediss://127.0.0.1:1", "not supported"),
    ] {
        let (code, stderr) = run_err(&[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--database-url",
            "postgres://u@127.0.0.1:1/d",
            "--cache-tier",
            url,
        ]);
        assert_ne!(code, 0);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(
            lines[0].contains(why) && lines[0].contains(url),
            "{url}: {stderr}"
        );
    }
}

#[test]
fn database_url_needs_the_demo() {
    let (code, stderr) = run_err(&[
        "serve",
        "--app",
        "none",
        "--database-url",
        "postgres://u@127.0.0.1:1/d",
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--database-url needs the demo app"),
        "{stderr}"
    );
}

fn send(c: &mut Client, method: &str, path: &str, body: &str) -> common::Resp {
    c.send(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    c.read_response()
}

fn json(r: &common::Resp) -> serde_json::Value {
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

#[test]
fn fortunes_updates_and_cached_queries_follow_techempower() {
    let pg = Pg::start();
    for driver in DRIVERS {
        techempower(&pg, driver);
    }
}

fn techempower(pg: &Pg, driver: &str) {
    let s = serve_db(pg, driver, 3);
    let mut c = Client::connect(s.addr);

    // /fortunes: the page byte for byte, as UTF-8 HTML, with the headers the verifier needs.
    let r = c.get("/fortunes");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.header("server").is_some() && r.header("date").is_some());
    assert_eq!(r.text(), FORTUNES_PAGE);
    // The added fortune is not stored.
    assert_eq!(pg.value("SELECT count(*) FROM fortune"), "12");

    // /cached-queries: the bounds, and rows equal to the table's (read before any update).
    for (query, want) in [
        ("?count=20", 20),
        ("", 1),
        ("?count=foo", 1),
        ("?count=0", 1),
        ("?count=501", 500),
    ] {
        let r = c.get(&format!("/cached-queries{query}"));
        assert_eq!(r.status, 200, "{query}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let rows = worlds(&r.text());
        assert_eq!(rows.len(), want, "{query}");
        for (id, n) in rows.iter().take(20) {
            assert_eq!(
                pg.value(&format!("SELECT randomnumber FROM world WHERE id = {id}")),
                n.to_string()
            );
        }
    }

    // /updates: the bounds; each answered row is what the table now holds, each id once.
    let before = pg.value("SELECT sum(randomnumber::bigint) || ':' || count(*) FROM world");
    for (query, want) in [
        ("?queries=20", 20),
        ("?queries=2", 2),
        ("", 1),
        ("?queries=foo", 1),
        ("?queries=0", 1),
        ("?queries=501", 500),
    ] {
        let r = c.get(&format!("/updates{query}"));
        assert_eq!(r.status, 200, "{query}");
        assert!(r.text().starts_with('['), "/updates is a list: {query}");
        let rows = worlds(&r.text());
        assert_eq!(rows.len(), want, "{query}");
        let ids: std::collections::HashSet<i64> = rows.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), rows.len(), "each row once: {query}");
        assert_eq!(pg.worlds_held(&rows), want, "persisted: {query}");
    }
    let after = pg.value("SELECT sum(randomnumber::bigint) || ':' || count(*) FROM world");
    assert_ne!(before, after, "the table changed");
    assert!(after.ends_with(":10000"), "{after}");
    drop(s);
}

/// Against TechEmpower's own database (tfb-database: `world` and `fortune`, no
/// HttpArena `items` or `users`) the demo did not start: `statement "items_by_price": ERROR:
/// relation "items" does not exist`. Now TechEmpower's endpoints serve, each route of a
/// missing table answers 503 saying which table, and the start log names each table once.
#[test]
fn techempowers_own_database_serves_and_the_missing_tables_routes_answer_503() {
    let pg = Pg::start();
    pg.value("DROP TABLE items, users");
    for driver in DRIVERS {
        techempower_schema(&pg, driver);
    }
}

fn techempower_schema(pg: &Pg, driver: &str) {
    let log =
        std::env::temp_dir().join(format!("linerate-tfb-{}-{driver}.log", std::process::id()));
    let mut child = std::process::Command::new(common::bin::BIN)
        .args(["serve", "--no-pin", "--log-level", "warn", "--workers", "1"])
        .args(["--addr", "127.0.0.1:0", "--database-url", &pg.url])
        .args(["--database-driver", driver])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let served = common::bin::banner(&mut child);
    let child = common::bin::Stopped(child);
    let banner = served.unwrap_or_else(|out| {
        panic!(
            "{driver}: did not start: {out:?} {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let addr: SocketAddr = banner[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .expect("the banner's URL")
        .parse()
        .unwrap();
    let mut c = Client::connect(addr);

    for path in [
        "/db",
        "/queries?queries=3",
        "/fortunes",
        "/updates?queries=2",
    ] {
        let r = c.get(path);
        assert_eq!(r.status, 200, "{driver} {path}: {}", r.text());
    }
    assert_eq!(worlds(&c.get("/queries?queries=3").text()).len(), 3);

    let token = format!("Bearer {}", stack_token("42"));
    let item = r#"{"id":1,"name":"x","category":"c","price":1,"quantity":1}"#;
    let missing: [(&str, &str, Option<&str>, &str, &str); 8] = [
        ("GET", "/async-db?min=10&max=50&limit=5", None, "", "items"),
        ("GET", "/crud/items/1", None, "", "items"),
        ("GET", "/crud/items?category=electronics", None, "", "items"),
        ("POST", "/crud/items", None, item, "items"),
        ("PUT", "/crud/items/1", None, item, "items"),
        ("GET", "/api/items/1", None, "", "items"),
        ("POST", "/api/items/1", None, item, "items"),
        ("GET", "/api/me", Some(token.as_str()), "", "users"),
    ];
    for _round in 0..2 {
        for (method, path, auth, body, table) in missing {
            let r = if method == "PUT" {
                send(&mut c, method, path, body)
            } else {
                authed(&mut c, method, path, auth, body)
            };
            assert_eq!(r.status, 503, "{driver} {method} {path}: {}", r.text());
            assert!(
                r.text()
                    .contains(&format!("the database has no table \"{table}\"")),
                "{driver} {method} {path}: {}",
                r.text()
            );
        }
    }
    // TechEmpower's endpoints still serve after them.
    assert_eq!(c.get("/db").status, 200);
    drop(c);
    drop(child);
    let stderr = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    for table in ["items", "users"] {
        let named = stderr
            .lines()
            .filter(|l| l.contains(&format!("no table \"{table}\"")))
            .count();
        assert_eq!(named, 1, "{driver}: {table} named once: {stderr}");
    }
    assert!(
        !stderr.contains("secret") && !stderr.contains(":linerate@"),
        "{stderr}"
    );
}

/// One item of HttpArena's shape: the fields and their JSON types.
fn check_item(item: &serde_json::Value) {
    let o = item.as_object().expect("an item object");
    for name in ["id", "price", "quantity"] {
        assert!(o[name].is_i64(), "{name}: {item}");
    }
    assert!(o["name"].is_string() && o["category"].is_string(), "{item}");
    assert!(o["active"].is_boolean(), "{item}");
    assert!(o["tags"].is_array(), "{item}");
    assert!(
        o["rating"]["score"].is_i64() && o["rating"]["count"].is_i64(),
        "{item}"
    );
    assert_eq!(o.len(), 8, "{item}");
}

/// The item JSON is written from the row (`db/item_json.rs`), not by serde_json from a built
/// item: its bytes must still be serde_json's, for rows whose text needs escaping and whose
/// jsonb PostgreSQL prints otherwise (an object's keys, a number), on `/async-db`, the list
/// and one item.
fn items_are_serde_jsons_bytes(pg: &Pg, c: &mut Client) {
    pg.value(
        "INSERT INTO items VALUES \
         (900001, E'Quote \" back \\\\ tab\\t é', 'bytes-odd', 70001, 3, false, \
          '{\"b\": 1.50, \"aa\": [2, \"x\\\"y\"]}', -5, 0), \
         (900002, 'Plain Name', 'bytes-odd', 70002, 1, true, \
          '[\"a b\", \"c,d\", \"e: f\", true, null]', 1, 2) \
         ON CONFLICT (id) DO NOTHING",
    );
    let odd = r#"{"id":900001,"name":"Quote \" back \\ tab\t é","category":"bytes-odd","price":70001,"quantity":3,"active":false,"tags":{"aa":[2,"x\"y"],"b":1.5},"rating":{"score":-5,"count":0}}"#;
    let plain = r#"{"id":900002,"name":"Plain Name","category":"bytes-odd","price":70002,"quantity":1,"active":true,"tags":["a b","c,d","e: f",true,null],"rating":{"score":1,"count":2}}"#;
    let mut body = |path: &str| {
        let r = c.get(path);
        assert_eq!(r.status, 200, "{path}");
        r.text()
    };
    assert_eq!(
        body("/async-db?min=70001&max=70001&limit=5"),
        format!(r#"{{"items":[{odd}],"count":1}}"#)
    );
    assert_eq!(
        body("/async-db?min=70002&max=70002&limit=5"),
        format!(r#"{{"items":[{plain}],"count":1}}"#)
    );
    assert_eq!(
        body("/crud/items?category=bytes-odd&limit=5"),
        format!(r#"{{"items":[{odd},{plain}],"total":2,"page":1,"limit":5}}"#)
    );
    assert_eq!(body("/crud/items/900001"), odd);
}

#[test]
fn async_db_and_crud_follow_httparena() {
    let pg = Pg::start();
    for driver in DRIVERS {
        httparena(&pg, driver);
    }
}

fn httparena(pg: &Pg, driver: &str) {
    let s = serve_db(pg, driver, 2);
    let mut c = Client::connect(s.addr);

    // /async-db: validate.sh's ranges; count = limit, items in the range; the empty range.
    for (min, max, limit) in [(5, 80, 7), (20, 150, 18), (100, 400, 33), (10, 50, 50)] {
        let r = c.get(&format!("/async-db?min={min}&max={max}&limit={limit}"));
        assert_eq!(r.status, 200);
        let v = json(&r);
        assert_eq!(v["count"], limit, "{v}");
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), limit as usize);
        for item in items {
            check_item(item);
            let price = item["price"].as_i64().unwrap();
            assert!((min..=max).contains(&price), "{item}");
        }
    }
    let v = json(&c.get("/async-db?min=9999&max=9999&limit=50"));
    assert_eq!(v, serde_json::json!({"items": [], "count": 0}));
    // Defaults (10..=50, 50) and the limit bound.
    assert_eq!(json(&c.get("/async-db"))["count"], 50);
    assert_eq!(json(&c.get("/async-db?limit=500"))["count"], 50);
    assert_eq!(json(&c.get("/async-db?limit=0"))["count"], 1);
    assert_eq!(c.get("/async-db?min=ten").status, 400);
    items_are_serde_jsons_bytes(pg, &mut c);

    // List: a page of a category, by id.
    let v = json(&c.get("/crud/items?category=electronics&page=1&limit=5"));
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    assert_eq!(
        (v["total"].as_i64(), v["page"].as_i64(), v["limit"].as_i64()),
        (Some(5), Some(1), Some(5))
    );
    items.iter().for_each(check_item);
    assert!(items.iter().all(|i| i["category"] == "electronics"));
    let ids: Vec<i64> = items.iter().map(|i| i["id"].as_i64().unwrap()).collect();
    let want = pg.value(
        "SELECT string_agg(id::text, ',') FROM (SELECT id FROM items \
         WHERE category = 'electronics' ORDER BY id LIMIT 5 OFFSET 0) p",
    );
    assert_eq!(
        ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","),
        want
    );
    let page2 = json(&c.get("/crud/items?category=electronics&page=2&limit=5"));
    assert!(page2["items"][0]["id"].as_i64().unwrap() > *ids.last().unwrap());
    assert_eq!(json(&c.get("/crud/items"))["limit"], 10);
    assert_eq!(c.get("/crud/items?page=0").status, 400);

    // One item: what the table holds; MISS, then HIT from another connection; 404.
    let v = json(&c.get("/crud/items/1"));
    assert_eq!(v["id"], 1);
    check_item(&v);
    assert_eq!(
        v["price"].to_string(),
        pg.value("SELECT price FROM items WHERE id = 1")
    );
    let first = Client::connect(s.addr).get("/crud/items/42");
    let second = Client::connect(s.addr).get("/crud/items/42");
    assert_eq!(first.header("x-cache"), Some("MISS"));
    assert_eq!(second.header("x-cache"), Some("HIT"));
    assert_eq!(first.body, second.body);
    assert_eq!(c.get("/crud/items/999999").status, 404);
    assert_eq!(c.get("/crud/items/abc").status, 404);

    // Create (201), read it back, from the table too.
    let r = send(
        &mut c,
        "POST",
        "/crud/items",
        r#"{"id":200001,"name":"ValidateItem","category":"test","price":42,"quantity":7}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let r = c.get("/crud/items/200001");
    assert_eq!(r.header("x-cache"), Some("MISS"));
    // Read again at once (well within the 200 ms): from the cache.
    assert_eq!(c.get("/crud/items/200001").header("x-cache"), Some("HIT"));
    let v = json(&r);
    assert_eq!(
        (v["id"].as_i64(), v["name"].as_str()),
        (Some(200001), Some("ValidateItem"))
    );
    assert_eq!(
        pg.value("SELECT name || ':' || price || ':' || quantity FROM items WHERE id = 200001"),
        "ValidateItem:42:7"
    );

    // Change (200): the cached copy is dropped, the next read sees the change.
    c.get("/crud/items/200001"); // cached now
    let r = send(
        &mut c,
        "PUT",
        "/crud/items/200001",
        r#"{"name":"UpdatedItem","category":"test","price":99,"quantity":1}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.get("/crud/items/200001");
    assert_eq!(r.header("x-cache"), Some("MISS"));
    let v = json(&r);
    assert_eq!(
        (v["name"].as_str(), v["price"].as_i64()),
        (Some("UpdatedItem"), Some(99))
    );
    // An upsert of an existing item changes it, and its cached copy goes too.
    let r = send(
        &mut c,
        "POST",
        "/crud/items",
        r#"{"id":200001,"name":"Again","category":"test","price":5,"quantity":3}"#,
    );
    assert_eq!(r.status, 201);
    assert_eq!(json(&c.get("/crud/items/200001"))["name"], "Again");

    // Mistakes: no such item to change; bodies that are not items.
    let r = send(
        &mut c,
        "PUT",
        "/crud/items/999999",
        r#"{"name":"x","category":"test","price":1,"quantity":1}"#,
    );
    assert_eq!(r.status, 404);
    assert_eq!(send(&mut c, "POST", "/crud/items", "{").status, 400);
    assert_eq!(
        send(&mut c, "POST", "/crud/items", r#"{"id":1}"#).status,
        400
    );
    assert_eq!(
        send(
            &mut c,
            "PUT",
            "/crud/items/1",
            r#"{"name":"x","price":"cheap","quantity":1}"#
        )
        .status,
        400
    );
    drop(s);
}

#[test]
fn a_database_restart_fails_requests_cleanly_then_they_recover() {
    let pg = Pg::start();
    for driver in DRIVERS {
        restart(&pg, driver);
    }
}

fn restart(pg: &Pg, driver: &str) {
    let s = serve_db(pg, driver, 3);
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/queries?queries=6").status, 200);

    pg.down();
    // Every database request gets an answer on the same keep-alive connection: 503 (or, for
    // /async-db, HttpArena's empty list); nothing hangs, and the other routes answer.
    for _ in 0..3 {
        assert_eq!(c.get("/db").status, 503);
        assert_eq!(c.get("/queries?queries=5").status, 503);
        assert_eq!(c.get("/fortunes").status, 503);
        assert_eq!(c.get("/crud/items/1").status, 503);
        let r = c.get("/async-db");
        assert_eq!(r.status, 200);
        assert_eq!(json(&r), serde_json::json!({"items": [], "count": 0}));
        assert_eq!(c.get("/plaintext").text(), "Hello, World!");
        assert_eq!(c.get("/cached-queries?count=3").status, 200);
    }

    pg.up();
    // The connections come back by themselves.
    common::eventually("/queries answers again after the restart", || {
        c.get("/queries?queries=6").status == 200
    });
    // All of them: requests spread over every connection succeed.
    for _ in 0..10 {
        assert_eq!(c.get("/queries?queries=3").status, 200);
        assert_eq!(c.get("/fortunes").text(), FORTUNES_PAGE);
    }
    assert_eq!(json(&c.get("/async-db?limit=5"))["count"], 5);
    drop(s);
}

#[test]
fn a_slow_query_does_not_delay_plaintext_on_the_same_worker() {
    let pg = Pg::start();
    for driver in DRIVERS {
        slow_query(&pg, driver);
    }
}

fn slow_query(pg: &Pg, driver: &str) {
    use std::io::Write;
    // One worker (the test servers run one).
    let s = serve_db(pg, driver, 1);

    // The server's connections are open and their statements prepared (preparing would
    // wait on the lock too) before the lock is taken.
    assert_eq!(Client::connect(s.addr).get("/db").status, 200);

    // Another session holds a lock on `world`: the next /db waits for it in the database.
    let mut locker = Command::new("/usr/lib/postgresql/15/bin/psql")
        .args(["-X", "-q", &pg.url])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = locker.stdin.take().unwrap();
    stdin
        .write_all(b"BEGIN;\nLOCK TABLE world IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n")
        .unwrap();
    stdin.flush().unwrap();
    let mut out = std::io::BufReader::new(locker.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "locked");

    let mut slow = Client::connect(s.addr);
    slow.send(b"GET /db HTTP/1.1\r\nHost: t\r\n\r\n");
    // The query is waiting on the lock in the database (seen there), …
    common::eventually("the /db query waits on the lock", || {
        pg.value("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") == "1"
    });
    // … and the same worker answers other connections meanwhile.
    let mut fast = Client::connect(s.addr);
    for _ in 0..20 {
        assert_eq!(fast.get("/plaintext").text(), "Hello, World!");
        assert_eq!(fast.get("/json").status, 200);
    }
    // The slow request has had no answer yet.
    slow.stream.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 1];
    let pending = matches!(
        std::io::Read::read(&mut slow.stream, &mut probe),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    slow.stream.set_nonblocking(false).unwrap();
    assert!(pending, "/db answered while the table was locked");

    // The lock goes: the slow request is answered.
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    let r = slow.read_response();
    assert_eq!(r.status, 200);
    worlds(&r.text());
    let _ = locker.wait();
    drop(s);
}

/// HttpArena's crud profile with its cache sidecar: `serve --cache-tier` with Redis and with
/// memcached. An item is a MISS, then a HIT; a PUT drops it from both tiers (the next read is
/// a MISS with the change); a second linerate on the same tier answers HIT for what the first
/// stored (production-stack's `/api/items/{id}` too, and its POST drops the tier's copy); the
/// tier killed mid-run leaves every read a 200 (a MISS), and once it is back it
/// is used again.
#[test]
fn crud_items_with_a_redis_or_memcached_tier() {
    let mut tiers: Vec<TierServer> = ["redis-server", "memcached"]
        .into_iter()
        .filter_map(TierServer::start)
        .collect();
    if tiers.is_empty() {
        return;
    }
    let pg = Pg::start();
    for tier in &mut tiers {
        crud_with_tier(&pg, tier);
    }
}

/// The demo's item TTL (`ITEM_TTL`, crates/linerate/src/db/items.rs: HttpArena's 200 ms).
const ITEM_TTL: std::time::Duration = std::time::Duration::from_millis(200);

/// An item read through edge `a` (a MISS: it is stored in the shared tier), then on edge `b`:
/// a HIT with the same bytes, from the tier. Only a check whose two reads both fell within
/// the item's TTL, counted from before `a`'s read, says anything (later, the tier's copy has
/// expired, as it should): one that took longer (a loaded machine) is made again on another
/// item, ten at most.
fn shared_within_the_ttl(a: SocketAddr, b: SocketAddr, first_id: u32, program: &str) {
    for id in first_id..first_id + 10 {
        let path = format!("/crud/items/{id}");
        let start = std::time::Instant::now();
        let on_a = Client::connect(a).get(&path);
        let on_b = Client::connect(b).get(&path);
        let within = start.elapsed() < ITEM_TTL;
        assert_eq!(on_a.header("x-cache"), Some("MISS"), "{program}");
        if !within {
            eprintln!("{program}: item {id} read on both edges in over {ITEM_TTL:?}; again");
            continue;
        }
        assert_eq!(
            on_b.header("x-cache"),
            Some("HIT"),
            "{program}: B did not find A's item"
        );
        assert_eq!(on_b.body, on_a.body);
        return;
    }
    panic!("{program}: ten reads on both edges each took over {ITEM_TTL:?}");
}

fn crud_with_tier(pg: &Pg, tier: &mut TierServer) {
    eprintln!("--cache-tier {}", tier.url());
    let url = tier.url();
    // Edge A with the worker driver (the tier awaited on the worker's own runtime), B with
    // the database runtime.
    let edge = |driver: &str| {
        serve(&[
            "--database-url",
            &pg.url,
            "--database-connections",
            "2",
            "--database-driver",
            driver,
            "--cache-tier",
            &url,
            "--cache-tier-timeout-ms",
            "1000",
        ])
    };
    let (a, b) = (edge("worker"), edge("runtime"));
    assert!(
        a.banner
            .iter()
            .any(|l| l.contains("/crud/items cached in memory and")),
        "{:?}",
        a.banner
    );
    let mut c = Client::connect(a.addr);
    let get = |c: &mut Client, id: u32| c.get(&format!("/crud/items/{id}"));

    // MISS, then HIT; the same bytes.
    let first = get(&mut c, 77);
    let second = get(&mut c, 77);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-cache"), Some("MISS"), "{}", tier.program);
    assert_eq!(second.header("x-cache"), Some("HIT"));
    assert_eq!(first.body, second.body);
    // Stored through A, a HIT on B: from the shared tier.
    shared_within_the_ttl(a.addr, b.addr, 600, tier.program);

    // PUT: dropped from both tiers; the next read is a MISS with the change, then a HIT.
    get(&mut c, 300001);
    let r = send(
        &mut c,
        "POST",
        "/crud/items",
        r#"{"id":300001,"name":"Tiered","category":"test","price":1,"quantity":1}"#,
    );
    assert_eq!(r.status, 201);
    assert_eq!(get(&mut c, 300001).header("x-cache"), Some("MISS"));
    assert_eq!(get(&mut c, 300001).header("x-cache"), Some("HIT"));
    let r = send(
        &mut c,
        "PUT",
        "/crud/items/300001",
        r#"{"name":"Changed","category":"test","price":2,"quantity":2}"#,
    );
    assert_eq!(r.status, 200);
    let r = get(&mut c, 300001);
    assert_eq!(r.header("x-cache"), Some("MISS"));
    assert_eq!(json(&r)["name"], "Changed");
    assert_eq!(get(&mut c, 300001).header("x-cache"), Some("HIT"));

    // production-stack's /api/items/{id} through the same tier: stored through A, a HIT on
    // B; a POST on A drops the tier's copy, so B's first read after it is a MISS with it.
    let api = |addr, id: u32| Client::connect(addr).get(&format!("/api/items/{id}"));
    assert_eq!(api(a.addr, 88).header("x-cache"), Some("MISS"));
    assert_eq!(
        api(b.addr, 88).header("x-cache"),
        Some("HIT"),
        "{}",
        tier.program
    );
    assert_eq!(api(a.addr, 89).header("x-cache"), Some("MISS"));
    let r = send(
        &mut c,
        "POST",
        "/api/items/89",
        r#"{"name":"TierPost","price":4,"quantity":4}"#,
    );
    assert_eq!(r.status, 204);
    let r = api(b.addr, 89);
    assert_eq!(r.header("x-cache"), Some("MISS"), "{}", tier.program);
    assert_eq!(json(&r)["name"], "TierPost");

    // The tier killed: every read is still a 200 (from the database, a MISS where the memory
    // tier has nothing); writes go on too.
    tier.kill();
    for id in 1..=20 {
        let r = get(&mut c, 1000 + id);
        assert_eq!(r.status, 200, "{}: {}", tier.program, r.text());
        assert_eq!(r.header("x-cache"), Some("MISS"));
    }
    let r = send(
        &mut c,
        "PUT",
        "/crud/items/300001",
        r#"{"name":"WhileDown","category":"test","price":3,"quantity":3}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(json(&get(&mut c, 300001))["name"], "WhileDown");
    // Back: what A stores, B finds again (bounded: the tier is probed again after a pause).
    tier.restart();
    let mut shared = false;
    for i in 0..400 {
        let id = 2000 + i;
        get(&mut c, id);
        if Client::connect(b.addr)
            .get(&format!("/crud/items/{id}"))
            .header("x-cache")
            == Some("HIT")
        {
            shared = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(shared, "{}: the tier was not used again", tier.program);
    drop((a, b));
}

/// HttpArena production-stack's `JWT_SECRET` (over the edge's 32-byte minimum).
const STACK_SECRET: &str = "httparena-bench-secret-do-not-use-in-production";

/// HttpArena's production-stack app endpoints behind the edge's `[[site.jwt]]` on `/api`, by
/// its validation checks: no token or a bad one is the edge's 401 (also for POST, and the
/// table keeps its row); `/api/items/{id}` answers the row, MISS then HIT; POST is a 204 that
/// drops the cached copy (the next read is a MISS with the change), under `/crud/items` too
/// and the other way round; `/api/me` is the row of the token's `sub`, cached; `/public/*`
/// needs no token. Each driver; then `/api/me` without an edge rule or a token: 401.
#[test]
fn production_stack_app_endpoints() {
    let pg = Pg::start();
    let d = std::env::temp_dir().join(format!("linerate-stack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("secret"), format!("{STACK_SECRET}\n")).unwrap();
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\
         [[site]]\ndefault = true\napp = \"demo\"\n\
         [[site.jwt]]\nprefix = \"/api\"\nsecret_file = \"secret\"\nrequire = [\"sub\"]\n",
    )
    .unwrap();
    for (n, driver) in DRIVERS.into_iter().enumerate() {
        production_stack(&pg, &file, driver, n as i32 * 100);
    }
    let _ = std::fs::remove_dir_all(&d);
    // Without an edge rule, `/api/me` still needs a bearer token to read a `sub` from.
    let s = serve_db(&pg, "worker", 1);
    let r = Client::connect(s.addr).get("/api/me");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
}

/// A token the edge takes: HS256 with [`STACK_SECRET`], `sub` and an `exp` an hour on.
fn stack_token(sub: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    linerate_server::jwt::sign_hs256(
        r#"{"alg":"HS256","typ":"JWT"}"#,
        &format!(r#"{{"sub":"{sub}","name":"Alice Chen","exp":{exp}}}"#),
        STACK_SECRET.as_bytes(),
    )
}

/// `method path` with `authorization` (none: no field) and a JSON `body` for POST.
fn authed(
    c: &mut Client,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: &str,
) -> common::Resp {
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let body_fields = if method == "POST" {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    } else {
        String::new()
    };
    c.send(
        format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{auth}{body_fields}\r\n{body}").as_bytes(),
    );
    c.read_response()
}

fn production_stack(pg: &Pg, file: &std::path::Path, driver: &str, base: i32) {
    eprintln!("--database-driver {driver}");
    let s = common::bin::serve_as(&[
        "--config",
        file.to_str().unwrap(),
        "--database-url",
        &pg.url,
        "--database-connections",
        "2",
        "--database-driver",
        driver,
    ]);
    let bearer = format!("Bearer {}", stack_token("42"));
    let ok = Some(bearer.as_str());
    let mut c = Client::connect(s.addr);
    let row = |id: i32| {
        pg.value(&format!(
            "SELECT name || ':' || price || ':' || quantity FROM items WHERE id = {id}"
        ))
    };

    // The auth wall (validation checks 7-10): the edge's 401, for reads and writes; the
    // refused POST changed nothing.
    let before = row(1);
    for auth in [None, Some("Bearer invalid.token.here")] {
        let r = authed(&mut c, "GET", "/api/items/1", auth, "");
        assert_eq!(r.status, 401, "{auth:?}");
        assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
        let r = authed(
            &mut c,
            "POST",
            "/api/items/1",
            auth,
            r#"{"name":"unauth","price":1,"quantity":1}"#,
        );
        assert_eq!(r.status, 401, "{auth:?}");
        let r = authed(&mut c, "GET", "/api/me", auth, "");
        assert_eq!(r.status, 401, "{auth:?}");
    }
    assert_eq!(row(1), before);

    // One item, as the table has it (check 11).
    let r = authed(&mut c, "GET", "/api/items/1", ok, "");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r);
    assert_eq!(v["id"], 1);
    check_item(&v);
    assert_eq!(
        format!(
            "{}:{}:{}",
            v["name"].as_str().unwrap(),
            v["price"],
            v["quantity"]
        ),
        row(1)
    );

    // Cache-aside (check 12): MISS, then HIT from another connection; the same bytes.
    let id = 7 + base;
    let path = format!("/api/items/{id}");
    let first = authed(&mut Client::connect(s.addr), "GET", &path, ok, "");
    let second = authed(&mut Client::connect(s.addr), "GET", &path, ok, "");
    assert_eq!(first.header("x-cache"), Some("MISS"));
    assert_eq!(second.header("x-cache"), Some("HIT"));
    assert_eq!(first.body, second.body);
    assert_eq!(
        authed(&mut c, "GET", "/api/items/999999", ok, "").status,
        404
    );
    assert_eq!(authed(&mut c, "GET", "/api/items/abc", ok, "").status, 404);

    // POST (checks 13-14): 204, the row changed, the cached copy dropped: the next read is a
    // MISS with the change, then a HIT.
    let id = 3 + base;
    let path = format!("/api/items/{id}");
    authed(&mut c, "GET", &path, ok, "");
    assert_eq!(
        authed(&mut c, "GET", &path, ok, "").header("x-cache"),
        Some("HIT")
    );
    let r = authed(
        &mut c,
        "POST",
        &path,
        ok,
        r#"{"name":"validate-invalidated","price":111,"quantity":22}"#,
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty());
    assert_eq!(row(id), "validate-invalidated:111:22");
    let r = authed(&mut c, "GET", &path, ok, "");
    assert_eq!(r.header("x-cache"), Some("MISS"));
    let v = json(&r);
    assert_eq!(
        (
            v["name"].as_str(),
            v["price"].as_i64(),
            v["quantity"].as_i64()
        ),
        (Some("validate-invalidated"), Some(111), Some(22))
    );
    assert_eq!(
        authed(&mut c, "GET", &path, ok, "").header("x-cache"),
        Some("HIT")
    );

    // One item, two caches: a POST here drops /crud/items' copy, a PUT there drops this one.
    let id = 5 + base;
    c.get(&format!("/crud/items/{id}"));
    assert_eq!(
        c.get(&format!("/crud/items/{id}")).header("x-cache"),
        Some("HIT")
    );
    let r = authed(
        &mut c,
        "POST",
        &format!("/api/items/{id}"),
        ok,
        r#"{"name":"via-api","price":5,"quantity":6}"#,
    );
    assert_eq!(r.status, 204);
    let r = c.get(&format!("/crud/items/{id}"));
    assert_eq!(r.header("x-cache"), Some("MISS"));
    assert_eq!(json(&r)["name"], "via-api");
    authed(&mut c, "GET", &format!("/api/items/{id}"), ok, "");
    let r = send(
        &mut c,
        "PUT",
        &format!("/crud/items/{id}"),
        r#"{"name":"via-crud","price":7,"quantity":8}"#,
    );
    assert_eq!(r.status, 200);
    let r = authed(&mut c, "GET", &format!("/api/items/{id}"), ok, "");
    assert_eq!(r.header("x-cache"), Some("MISS"));
    assert_eq!(json(&r)["name"], "via-crud");

    // Bad writes: not JSON of the three fields (400), no such item (404); nothing changed.
    let before = row(1);
    assert_eq!(authed(&mut c, "POST", "/api/items/1", ok, "{").status, 400);
    assert_eq!(
        authed(&mut c, "POST", "/api/items/1", ok, r#"{"name":"x"}"#).status,
        400
    );
    assert_eq!(row(1), before);
    let r = authed(
        &mut c,
        "POST",
        "/api/items/999999",
        ok,
        r#"{"name":"x","price":1,"quantity":1}"#,
    );
    assert_eq!(r.status, 404);

    // /api/me (check 15): the token's sub's row, cached; another sub, another row; a sub
    // with no row, 404.
    let r = authed(&mut c, "GET", "/api/me", ok, "");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-cache"), Some("MISS"));
    let v = json(&r);
    assert_eq!(v["id"], 42);
    assert_eq!(
        format!(
            "{}|{}|{}",
            v["name"].as_str().unwrap(),
            v["email"].as_str().unwrap(),
            v["plan"].as_str().unwrap()
        ),
        pg.value("SELECT name || '|' || email || '|' || plan FROM users WHERE id = 42")
    );
    assert_eq!(v.as_object().unwrap().len(), 4, "{v}");
    let r = authed(&mut c, "GET", "/api/me", ok, "");
    assert_eq!(r.header("x-cache"), Some("HIT"));
    assert_eq!(json(&r)["id"], 42);
    let seven = format!("Bearer {}", stack_token("7"));
    assert_eq!(
        json(&authed(&mut c, "GET", "/api/me", Some(&seven), ""))["id"],
        7
    );
    let nobody = format!("Bearer {}", stack_token("5"));
    assert_eq!(
        authed(&mut c, "GET", "/api/me", Some(&nobody), "").status,
        404
    );

    // /public/* (checks 4-6): no token needed.
    let r = c.get("/public/baseline?a=13&b=42");
    assert_eq!((r.status, r.text()), (200, "55".to_string()));
    let v = json(&c.get("/public/json/25"));
    let items = v["items"].as_array().unwrap();
    assert_eq!((items.len(), v["count"].as_i64()), (25, Some(25)));
    for item in items {
        assert_eq!(
            item["total"].as_i64(),
            Some(item["price"].as_i64().unwrap() * item["quantity"].as_i64().unwrap()),
            "{item}"
        );
    }
    drop(s);
}
