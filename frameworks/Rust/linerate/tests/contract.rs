//! The entry's binary against TechEmpower's rules, as its verifier checks them, on a
//! throwaway PostgreSQL seeded with TechEmpower's tables (`scripts/pg.sh start`): each of the
//! seven test types' URLs from benchmark_config.json, the fields every answer needs (Server,
//! Date, Content-Type, Content-Length), no compression whatever the client offers, rows
//! read back from the database, the 1–500 bound, the fortunes page byte for byte, updates
//! persisted, and random ids drawn afresh at every start.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{FORTUNES_PAGE, Pg, worlds};

/// The entry's binary serving `pg`'s database on a port the OS picks; killed when dropped.
struct Entry {
    child: Child,
    addr: SocketAddr,
}

impl Entry {
    fn start(pg: &Pg) -> Entry {
        let mut child = Command::new(env!("CARGO_BIN_EXE_linerate-techempower"))
            .args(["--addr", "127.0.0.1:0", "--workers", "2", "--no-pin"])
            .env("DATABASE_URL", &pg.url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start linerate-techempower");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("linerate-techempower on http://")
            .unwrap_or_else(|| panic!("not the start line: {line:?} (exit {:?})", child.wait()))
            .parse()
            .unwrap();
        Entry { child, addr }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer: status, fields (names lowercased) and body.
#[derive(Debug)]
struct Resp {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("UTF-8")
    }
}

/// A keep-alive HTTP/1.1 connection; every answer must carry Content-Length.
struct Client(BufReader<TcpStream>);

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client(BufReader::new(s))
    }

    /// GET `target`, as TechEmpower's load generator sends it: asking for compression.
    fn get(&mut self, target: &str) -> Resp {
        self.send(target, 1);
        self.read()
    }

    /// `n` GETs of `target` in one write (pipelined, as the plaintext test sends them).
    fn send(&mut self, target: &str, n: usize) {
        let req = format!(
            "GET {target} HTTP/1.1\r\nHost: tfb-server\r\nAccept: */*\r\n\
             Accept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\n\r\n"
        );
        self.0
            .get_mut()
            .write_all(req.repeat(n).as_bytes())
            .unwrap();
    }

    fn read(&mut self) -> Resp {
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        let status = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|l| l.get(..3))
            .unwrap_or_else(|| panic!("status line {line:?}"))
            .parse()
            .unwrap();
        let mut fields = Vec::new();
        loop {
            line.clear();
            self.0.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            let (n, v) = line.split_once(':').expect("a field");
            fields.push((n.to_ascii_lowercase(), v.trim().to_string()));
        }
        let mut r = Resp {
            status,
            fields,
            body: Vec::new(),
        };
        let len: usize = r
            .field("content-length")
            .expect("Content-Length")
            .parse()
            .unwrap();
        r.body = vec![0; len];
        self.0.read_exact(&mut r.body).unwrap();
        r
    }
}

/// What every answer carries: 200, Server and Date (TechEmpower's verifier requires both), the
/// content type, and no content coding though the client offered three.
fn check(r: &Resp, path: &str, content_type: &str) {
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.field("server"), Some("linerate"), "{path}");
    let date = r.field("date").unwrap_or_else(|| panic!("{path}: no Date"));
    assert!(
        date.ends_with(" GMT") && date.len() == 29,
        "{path}: Date {date:?}"
    );
    assert_eq!(r.field("content-type"), Some(content_type), "{path}");
    assert_eq!(r.field("content-encoding"), None, "{path}: compressed");
    assert_eq!(r.field("vary"), None, "{path}");
}

/// The rows of a list answer (`/queries`, `/cached-queries`, `/updates`): checked as [`check`]
/// does, a JSON array of `want` well-formed rows, and every row as the table holds it.
fn list(c: &mut Client, pg: &Pg, path: &str, want: usize) -> Vec<(i64, i64)> {
    let r = c.get(path);
    check(&r, path, "application/json");
    assert!(r.text().starts_with('['), "{path} is a list");
    let rows = worlds(&r.text());
    assert_eq!(rows.len(), want, "{path}");
    let distinct: std::collections::HashSet<_> = rows.iter().collect();
    assert_eq!(pg.worlds_held(&rows), distinct.len(), "{path}: {rows:?}");
    rows
}

#[test]
fn the_entry_passes_techempowers_contract() {
    let pg = Pg::start();
    let entry = Entry::start(&pg);
    let mut c = Client::connect(entry.addr);

    // json: the object, serialized per request.
    let r = c.get("/json");
    check(&r, "/json", "application/json");
    assert_eq!(r.text(), r#"{"message":"Hello, World!"}"#);

    // plaintext: pipelined 16 deep, every answer in order.
    c.send("/plaintext", 16);
    for _ in 0..16 {
        let r = c.read();
        check(&r, "/plaintext", "text/plain");
        assert_eq!(r.text(), "Hello, World!");
    }

    // db: one object, as the table holds it.
    let r = c.get("/db");
    check(&r, "/db", "application/json");
    assert!(r.text().starts_with('{'), "/db is an object: {}", r.text());
    let rows = worlds(&r.text());
    assert_eq!(rows.len(), 1);
    assert_eq!(
        pg.worlds_held(&rows),
        1,
        "/db as the table holds it: {rows:?}"
    );

    // query: the 1–500 bound, and every row as the table holds it.
    for (query, want) in [
        ("20", 20),
        ("1", 1),
        ("", 1),
        ("foo", 1),
        ("0", 1),
        ("-3", 1),
        ("501", 500),
    ] {
        list(&mut c, &pg, &format!("/queries?queries={query}"), want);
    }

    // fortune: the page byte for byte (the added fortune, sorted, escaped), none stored.
    let r = c.get("/fortunes");
    check(&r, "/fortunes", "text/html; charset=utf-8");
    assert_eq!(r.text(), FORTUNES_PAGE);
    assert_eq!(pg.value("SELECT count(*) FROM fortune"), "12");

    // cached-query: the bound, and rows equal to the table's (read before any update).
    for (query, want) in [("20", 20), ("", 1), ("foo", 1), ("0", 1), ("501", 500)] {
        list(&mut c, &pg, &format!("/cached-queries?count={query}"), want);
    }

    // update: the bound; each row once, and what the table holds afterwards.
    let before = pg.value("SELECT sum(randomnumber::bigint) FROM world");
    for (query, want) in [("20", 20), ("2", 2), ("", 1), ("foo", 1), ("501", 500)] {
        // Each id once: `list` found every distinct row as answered, so all were written.
        let path = format!("/updates?queries={query}");
        let ids: std::collections::HashSet<i64> = list(&mut c, &pg, &path, want)
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(ids.len(), want, "each row once: {path}");
    }
    assert_ne!(
        before,
        pg.value("SELECT sum(randomnumber::bigint) FROM world")
    );
    assert_eq!(pg.value("SELECT count(*) FROM world"), "10000");

    // A route TechEmpower does not name is not served.
    assert_eq!(c.get("/baseline11?a=1&b=2").status, 404);
}

/// The demo once seeded its ids the same way at every start (the first `/db` after two
/// starts returned id 7536 both times). Two starts of the entry draw different ids.
#[test]
fn each_start_draws_other_ids() {
    let pg = Pg::start();
    let first_ids = || {
        let entry = Entry::start(&pg);
        let r = Client::connect(entry.addr).get("/queries?queries=20");
        worlds(&r.text())
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>()
    };
    let (one, two) = (first_ids(), first_ids());
    assert_eq!(one.len(), 20);
    assert_ne!(one, two, "the same ids after a restart");
}
