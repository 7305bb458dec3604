//! The demo's database endpoints against a real PostgreSQL 15 that the test starts itself
//! (`scripts/pg.sh start`: a throwaway seeded cluster on 127.0.0.1, stopped and removed at the
//! end): `/db` and `/queries` shapes and TechEmpower's bounds, rows as the database holds
//! them, and a database that is down at start refused in one line.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Client;
use common::bin::{run_err, serve};

/// A throwaway cluster; stopped and removed when dropped.
struct Pg {
    dir: String,
    url: String,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Pg {
    fn start() -> Pg {
        let out = Command::new(repo().join("scripts/pg.sh"))
            .arg("start")
            .output()
            .expect("run scripts/pg.sh");
        assert!(
            out.status.success(),
            "this test needs PostgreSQL 15 (scripts/pg.sh start exited {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .to_string()
        };
        Pg {
            dir: field("PG_DIR="),
            url: field("DATABASE_URL="),
        }
    }

    /// One value from the database itself (psql over TCP).
    fn value(&self, sql: &str) -> String {
        let out = Command::new("/usr/lib/postgresql/15/bin/psql")
            .args(["-X", "-tA", &self.url, "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/pg.sh"))
            .args(["stop", &self.dir])
            .status();
    }
}

/// The `(id, randomNumber)` pairs of a `/db` or `/queries` body, checked for shape: objects
/// with exactly those two integer members, both in 1..=10000.
fn worlds(body: &str) -> Vec<(i64, i64)> {
    let v: serde_json::Value = serde_json::from_str(body).expect(body);
    let list = match v {
        serde_json::Value::Array(a) => a,
        one => vec![one],
    };
    list.iter()
        .map(|w| {
            let o = w.as_object().expect("an object");
            assert_eq!(o.len(), 2, "{w}");
            let id = o["id"].as_i64().expect("integer id");
            let n = o["randomNumber"].as_i64().expect("integer randomNumber");
            assert!(
                (1..=10_000).contains(&id) && (1..=10_000).contains(&n),
                "{w}"
            );
            (id, n)
        })
        .collect()
}

#[test]
fn db_and_queries_answer_from_the_database() {
    let pg = Pg::start();
    let s = serve(&["--database-url", &pg.url, "--database-connections", "2"]);
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
            let ids: Vec<String> = rows.iter().map(|(id, _)| id.to_string()).collect();
            let sql = format!(
                "SELECT count(*) FROM world WHERE (id, randomnumber) IN ({})",
                rows.iter()
                    .map(|(i, n)| format!("({i},{n})"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let distinct: std::collections::HashSet<_> = ids.iter().collect();
            assert_eq!(pg.value(&sql), distinct.len().to_string(), "{sql}");
        }
    }
    // Plain routes still answer on the same worker.
    assert_eq!(c.get("/plaintext").text(), "Hello, World!");
    drop(s);
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
