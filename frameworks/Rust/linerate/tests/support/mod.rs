//! TechEmpower's contract as the tests check it, shared by the entry's tests
//! (frameworks/Rust/linerate/tests) and the demo's (crates/linerate/tests/database.rs, which
//! includes this file by path): a throwaway PostgreSQL seeded with TechEmpower's tables
//! (`scripts/pg.sh`), the shape of a `/db` or `/queries` answer, and the fortunes page.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// A throwaway cluster; stopped and removed when dropped.
pub struct Pg {
    pub dir: String,
    pub url: String,
}

/// The checkout: the first directory above the test's crate that holds scripts/pg.sh (the
/// product's crates/linerate and the entry's frameworks/Rust/linerate sit at different depths).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/pg.sh").is_file())
        .expect("scripts/pg.sh above the crate")
        .to_path_buf()
}

impl Pg {
    pub fn start() -> Pg {
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

    /// Stops the server, keeping the data (an outage).
    pub fn down(&self) {
        let ok = Command::new(repo().join("scripts/pg.sh"))
            .args(["down", &self.dir])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Starts it again on the same port.
    pub fn up(&self) {
        let ok = Command::new(repo().join("scripts/pg.sh"))
            .args(["up", &self.dir])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Client connections other than the one asking.
    pub fn client_connections(&self) -> usize {
        self.value(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
        )
        .parse()
        .unwrap()
    }

    /// One value from the database itself (psql over TCP).
    pub fn value(&self, sql: &str) -> String {
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

impl Pg {
    /// How many rows of `world` are as `rows` (`(id, randomNumber)` pairs) say: each row that
    /// matches counts once, however often it is listed.
    pub fn worlds_held(&self, rows: &[(i64, i64)]) -> usize {
        let list: Vec<String> = rows.iter().map(|(i, n)| format!("({i},{n})")).collect();
        let sql = format!(
            "SELECT count(*) FROM world WHERE (id, randomnumber) IN ({})",
            list.join(",")
        );
        self.value(&sql).parse().unwrap()
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
pub fn worlds(body: &str) -> Vec<(i64, i64)> {
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

/// TechEmpower's fortunes page for its twelve rows, as linerate renders it: the added fortune,
/// sorted by message, `<`, `>` and `"` escaped as named references and `'` as `&#39;` (ones
/// the verifier accepts, and the `&lt;script&gt;` HttpArena's fortunes check reads), the rest
/// raw UTF-8.
pub const FORTUNES_PAGE: &str = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>\
<table><tr><th>id</th><th>message</th></tr>\
<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td></tr>\
<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>\
<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>\
<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#39;t broken.</td></tr>\
<tr><td>8</td><td>A list is only as strong as its weakest link. — Donald Knuth</td></tr>\
<tr><td>0</td><td>Additional fortune added at request time.</td></tr>\
<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>\
<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>\
<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>\
<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen</td></tr>\
<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>\
<tr><td>1</td><td>fortune: No such file or directory</td></tr>\
<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>\
</table></body></html>";
