//! TechEmpower's database tests: `/db`, `/queries`, `/updates`, `/fortunes` and
//! `/cached-queries`, with their verifier's rules (shapes, the 1–500 bound, the added fortune,
//! sorting and escaping).
//!
//! Each query of a request is its own prepared statement execution, as TechEmpower asks; they
//! are issued together, so a connection carries several at once. `/updates` reads its rows
//! one by one, then writes them all in one statement (TechEmpower allows batching the writes).
//! `/cached-queries` looks each row up in a cache of `World` objects ([`WorldCache`], moka's),
//! filled from the table at start, on the HTTP worker; it never reads the database.
#![forbid(unsafe_code)]

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use askama::Template;
use futures_util::future::try_join_all;
use linerate_server::Response;

use linerate_postgres::{Builder, Pool, StatementId};

pub use linerate_postgres::Error as DbError;

/// Rows in TechEmpower's `world` table.
pub const WORLD_ROWS: u32 = 10_000;
/// Most queries one `/queries`, `/updates` or `/cached-queries` request runs (TechEmpower's
/// bound).
pub const MAX_QUERIES: usize = 500;

/// One `world` row as TechEmpower's JSON has it.
#[derive(serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// The statements TechEmpower's endpoints run, as registered on the pool.
#[derive(Clone, Copy, Debug)]
pub struct Statements {
    /// `id, randomnumber` of one `world` row by id.
    pub world: StatementId,
    /// Every `fortune` row.
    pub fortunes: StatementId,
    /// Sets `randomnumber` of the rows whose ids are in the first array to the numbers in the
    /// second, in one statement.
    pub update_worlds: StatementId,
    /// Every `world` row, by id (read once, for `/cached-queries`).
    pub all_worlds: StatementId,
}

impl Statements {
    /// Registers them on `builder`.
    pub fn register(builder: &mut Builder) -> Statements {
        Statements {
            world: builder.prepare("world", "SELECT id, randomnumber FROM world WHERE id = $1"),
            fortunes: builder.prepare("fortunes", "SELECT id, message FROM fortune"),
            update_worlds: builder.prepare(
                "update_worlds",
                "UPDATE world SET randomnumber = v.r \
                 FROM unnest($1::int[], $2::int[]) AS v(id, r) WHERE world.id = v.id",
            ),
            all_worlds: builder.prepare(
                "all_worlds",
                "SELECT id, randomnumber FROM world ORDER BY id",
            ),
        }
    }
}

/// The answer to a failed database request: 503, the database being unavailable to it.
pub fn error_response(e: DbError) -> Response {
    match e {
        DbError::Unavailable => tracing::debug!("no database connection"),
        DbError::Busy => tracing::debug!("every database session in use"),
        DbError::BadName { .. } => tracing::error!(error = %e, "database name refused"),
        DbError::Query(e) => tracing::warn!(
            error = linerate_postgres::describe(&e),
            "database query failed"
        ),
    }
    Response::text("database unavailable\n").status(503)
}

/// TechEmpower's rule for `queries` and `count`: missing or not an integer → 1; below 1 → 1;
/// above 500 (however large) → 500.
pub fn query_count(value: Option<&str>) -> usize {
    use std::num::IntErrorKind;
    match value.map(str::parse::<i64>) {
        Some(Ok(n)) if n > MAX_QUERIES as i64 => MAX_QUERIES,
        Some(Ok(n)) if n >= 1 => n as usize,
        Some(Err(e)) if *e.kind() == IntErrorKind::PosOverflow => MAX_QUERIES,
        _ => 1,
    }
}

/// Random numbers for ids and new values: splitmix64 over a shared counter (cheap; the
/// benchmark asks only for values spread over 1..=10000), seeded anew at every start.
pub struct Random(AtomicU64);

impl Random {
    /// A sequence that starts from `seed` (the same one every time: for tests).
    pub fn new(seed: u64) -> Random {
        Random(AtomicU64::new(seed))
    }

    /// A sequence seeded from the operating system's randomness, different at every start:
    /// std's `RandomState` keys come from it (getrandom), so no other crate is needed.
    pub fn seeded() -> Random {
        Random::new(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64))
    }

    /// A value in 1..=10000.
    pub fn world_id(&self) -> i32 {
        let mut z = self.0.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % WORLD_ROWS as u64) as i32 + 1
    }

    /// `n` (≤ 10000) different ids: the rows of one `/updates` request, so that each is
    /// written once and the answer is what the table holds afterwards.
    pub fn distinct_ids(&self, n: usize) -> Vec<i32> {
        let mut seen = [0u64; WORLD_ROWS as usize / 64 + 1];
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n.min(WORLD_ROWS as usize) {
            let id = self.world_id();
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            if seen[word] & bit == 0 {
                seen[word] |= bit;
                ids.push(id);
            }
        }
        ids
    }
}

/// The rows of `ids`, one query each, issued together (round-robin over the connections).
pub async fn worlds(pool: &Pool, st: &Statements, ids: &[i32]) -> Result<Vec<World>, DbError> {
    let mut queries = Vec::with_capacity(ids.len());
    let world = st.world;
    for id in ids {
        let conn = pool.get()?;
        queries.push(async move {
            let row = conn.query_one(world, &[id]).await?;
            Ok::<_, DbError>(World {
                id: row.get(0),
                random_number: row.get(1),
            })
        });
    }
    try_join_all(queries).await
}

/// `/updates`: `ids` read one by one, each given a new random number, all written in one
/// statement; the rows as written.
pub async fn update(
    pool: &Pool,
    st: &Statements,
    random: &Random,
    ids: &[i32],
) -> Result<Vec<World>, DbError> {
    let mut rows = worlds(pool, st, ids).await?;
    for row in &mut rows {
        let old = row.random_number;
        // A new value, so that every row is really changed.
        while row.random_number == old {
            row.random_number = random.world_id();
        }
    }
    // Sorted by id: concurrent requests lock their rows in the same order.
    let mut sorted = rows.clone();
    sorted.sort_unstable_by_key(|w| w.id);
    let (ids, numbers): (Vec<i32>, Vec<i32>) =
        sorted.iter().map(|w| (w.id, w.random_number)).unzip();
    let conn = pool.get()?;
    conn.execute(st.update_worlds, &[&ids, &numbers]).await?;
    Ok(rows)
}

/// One fortune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fortune {
    pub id: i32,
    pub message: String,
}

/// The fortunes page: an askama template (templates/fortunes.html), which HTML-escapes each
/// message with [`NamedHtml`].
#[derive(Template)]
#[template(path = "fortunes.html", escape = "named-html")]
struct FortunesPage<'a> {
    fortunes: &'a [Fortune],
}

/// HTML escaping with named entities, `&lt;` `&gt;` `&amp;` `&quot;` and `&#39;` (askama's own
/// writes `&#60;` and the like): HttpArena's fortunes check looks for `&lt;script&gt;`, and
/// TechEmpower's verifier reads either (askama.toml names it).
#[derive(Clone, Copy)]
pub struct NamedHtml;

impl askama::filters::Escaper for NamedHtml {
    fn write_escaped_str<W: std::fmt::Write>(&self, mut dest: W, string: &str) -> std::fmt::Result {
        let mut last = 0;
        for (i, b) in string.bytes().enumerate() {
            let entity = match b {
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'&' => "&amp;",
                b'"' => "&quot;",
                b'\'' => "&#39;",
                _ => continue,
            };
            dest.write_str(&string[last..i])?;
            dest.write_str(entity)?;
            last = i + 1;
        }
        dest.write_str(&string[last..])
    }
}

/// The text TechEmpower's verifier expects in the fortune added at request time.
pub const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

/// `/fortunes`: every fortune plus the one added now, sorted by message, as HTML.
pub async fn fortunes(pool: &Pool, st: &Statements) -> Result<Response, DbError> {
    let conn = pool.get()?;
    let rows = conn.query(st.fortunes, &[]).await?;
    let mut list: Vec<Fortune> = rows
        .iter()
        .map(|r| Fortune {
            id: r.get(0),
            message: r.get(1),
        })
        .collect();
    Ok(fortunes_page(&mut list))
}

/// The page for `list` (the added fortune is put in here, then all are sorted).
pub fn fortunes_page(list: &mut Vec<Fortune>) -> Response {
    list.push(Fortune {
        id: 0,
        message: ADDED_FORTUNE.to_string(),
    });
    list.sort_unstable_by(|a, b| a.message.cmp(&b.message));
    match (FortunesPage { fortunes: list }).render() {
        Ok(html) => Response::text_owned(html).content_type("text/html; charset=utf-8"),
        Err(e) => {
            tracing::error!(error = %e, "fortunes template failed");
            Response::new(500)
        }
    }
}

/// The cache `/cached-queries` reads: `World` objects by id in moka's concurrent cache
/// (TinyLFU admission, LRU eviction), as TechEmpower's caching test asks of an entry: a cache
/// library, each row looked up on its own per request. Room for the whole table, which is
/// read into it at start, so a lookup misses only for an id the table lacks.
pub struct WorldCache {
    // FxHash: the keys are ids this server draws, never a client's, so SipHash's flood
    // resistance buys nothing here.
    rows: moka::sync::Cache<i32, World, rustc_hash::FxBuildHasher>,
}

impl WorldCache {
    /// Reads the whole table into a new cache (at start).
    pub async fn load(pool: &Pool, st: &Statements) -> Result<WorldCache, DbError> {
        let rows = pool.get()?.query(st.all_worlds, &[]).await?;
        let cache = moka::sync::Cache::builder()
            .max_capacity(u64::from(WORLD_ROWS))
            .build_with_hasher(rustc_hash::FxBuildHasher);
        for r in rows {
            let world = World {
                id: r.get(0),
                random_number: r.get(1),
            };
            cache.insert(world.id, world);
        }
        Ok(WorldCache { rows: cache })
    }

    /// The cached row `id`; `None` where the table had no such row.
    pub fn get(&self, id: i32) -> Option<World> {
        self.rows.get(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_count_follows_techempower() {
        for (value, want) in [
            (None, 1),
            (Some(""), 1),
            (Some("foo"), 1),
            (Some("0"), 1),
            (Some("-5"), 1),
            (Some("1"), 1),
            (Some("20"), 20),
            (Some("500"), 500),
            (Some("501"), 500),
            (Some("99999999999999999999"), 500),
            (Some("-99999999999999999999"), 1),
            (Some("2.5"), 1),
        ] {
            assert_eq!(query_count(value), want, "{value:?}");
        }
    }

    #[test]
    fn random_ids_cover_the_table_and_stay_in_it() {
        let random = Random::new(1);
        let ids: Vec<i32> = (0..100_000).map(|_| random.world_id()).collect();
        assert!(ids.iter().all(|&i| (1..=WORLD_ROWS as i32).contains(&i)));
        assert_eq!(*ids.iter().min().unwrap(), 1);
        assert_eq!(*ids.iter().max().unwrap(), WORLD_ROWS as i32);
    }

    #[test]
    fn each_start_draws_its_own_ids() {
        let first: Vec<i32> = (0..20).map(|_| Random::seeded().world_id()).collect();
        let second: Vec<i32> = (0..20).map(|_| Random::seeded().world_id()).collect();
        assert_ne!(first, second);
    }

    #[test]
    fn distinct_ids_are_distinct() {
        let random = Random::new(7);
        for n in [1, 20, 500, 10_000] {
            let mut ids = random.distinct_ids(n);
            assert_eq!(ids.len(), n);
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), n);
        }
    }

    #[test]
    fn fortunes_are_sorted_escaped_and_include_the_added_one() {
        let mut list = vec![
            Fortune {
                id: 11,
                message: "<script>alert(\"x\");</script>".into(),
            },
            Fortune {
                id: 2,
                message: "A computer scientist isn't".into(),
            },
            Fortune {
                id: 12,
                message: "フレームワークのベンチマーク".into(),
            },
        ];
        let resp = fortunes_page(&mut list);
        assert_eq!(resp.status_code(), 200);
        let html = std::str::from_utf8(resp.body_bytes()).unwrap();
        let want = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
            <tr><th>id</th><th>message</th></tr>\
            <tr><td>11</td><td>&lt;script&gt;alert(&quot;x&quot;);&lt;/script&gt;</td></tr>\
            <tr><td>2</td><td>A computer scientist isn&#39;t</td></tr>\
            <tr><td>0</td><td>Additional fortune added at request time.</td></tr>\
            <tr><td>12</td><td>フレームワークのベンチマーク</td></tr>\
            </table></body></html>";
        assert_eq!(html, want);
    }
}
