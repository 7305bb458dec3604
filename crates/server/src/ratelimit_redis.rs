//! The fleet-wide rate limits' link to Redis: one thread per configuration
//! with fleet rules, owning one connection to the `[storage] redis` server. It takes the
//! workers' asks from a bounded channel, sends every ask waiting as one pipelined write (an
//! `EVALSHA` each), and puts each answer in its key's lease; no worker ever waits on it. Each
//! exchange is bounded by [`TIMEOUT`]: an error, a timeout or bytes that are not RESP fail the
//! connection and the asks it held, and the rules fall back to their local share (logged once
//! per outage, once when Redis is back), probed every [`RETRY`].
//!
//! The count is GCRA kept in Redis by one Lua script ([`SCRIPT`]) with Redis's own clock (one
//! clock for the fleet): loaded once per connection (`SCRIPT LOAD`), called by `EVALSHA`, and
//! sent whole (`EVAL`) when the server answers `NOSCRIPT` (a `SCRIPT FLUSH`, a failover).
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use linerate_kv::health::{Admit, Change, Health};
use linerate_kv::resp::{self, Reply};

use crate::ratelimit_fleet::{Queued, Shared};

/// The longest an exchange with Redis may take (connecting, or a batch of asks answered):
/// past it Redis counts as down and every node applies its local share.
pub const TIMEOUT: Duration = Duration::from_millis(200);
/// How often a Redis that is down is tried again.
pub const RETRY: Duration = Duration::from_secs(1);
/// The most asks sent in one write.
const MAX_BATCH: usize = 256;

/// GCRA over N tokens at once. KEYS[1]: the key's theoretical arrival time (µs, Redis's
/// clock). ARGV: the interval, the tolerance (`burst` intervals), the tokens wanted, and the
/// requests to charge first whatever is free (let through by a node's local share). Answers
/// `{granted, wait}`: the tokens taken, and the µs until the next one is free (0: one is free
/// now), so that a node whose lease emptied the bucket refuses without asking again. The key
/// expires when its bucket has drained (an idle key is the same as none).
pub const SCRIPT: &str = r"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local debt = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
tat = tat + debt * interval
local free = math.floor((now + tolerance - tat) / interval) + 1
if free < 0 then free = 0 end
local granted = math.min(want, free)
tat = tat + granted * interval
local wait = tat - tolerance - now
if wait < 0 then wait = 0 end
if granted < want and wait < 1 then wait = 1 end
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1)
return {granted, wait}
";

/// Where the server is and what every connection sends first.
struct Endpoint {
    /// `HOST:PORT`.
    addr: String,
    /// AUTH and SELECT, and how many replies they get.
    greeting: Vec<u8>,
    replies: usize,
}

/// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (`storage::redis_url`: the storage's reading).
fn endpoint(url: &str) -> Result<Endpoint, String> {
    let crate::storage::redis_url::RedisUrl {
        addr,
        user,
        password,
        db,
    } = crate::storage::redis_url::parse(url).map_err(|why| format!("redis URL: {why}"))?;
    let mut greeting = Vec::new();
    let mut replies = 0;
    if let Some(pw) = &password {
        match &user {
            Some(user) => resp::command(&mut greeting, &[b"AUTH", user, pw]),
            None => resp::command(&mut greeting, &[b"AUTH", pw]),
        }
        replies += 1;
    }
    if db != 0 {
        resp::command(&mut greeting, &[b"SELECT", db.to_string().as_bytes()]);
        replies += 1;
    }
    Ok(Endpoint {
        addr,
        greeting,
        replies,
    })
}

/// Starts the link's thread.
pub(crate) fn spawn(url: &str, rx: Receiver<Queued>, shared: Arc<Shared>) -> Result<(), String> {
    let at = endpoint(url)?;
    std::thread::Builder::new()
        .name("linerate-ratelimit".into())
        .spawn(move || run(at, rx, shared))
        .map(|_| ())
        .map_err(|e| format!("cannot start the fleet rate limits' thread: {e}"))
}

/// An open connection and the script's SHA-1 on it.
struct Conn {
    stream: TcpStream,
    sha: Vec<u8>,
    buf: Vec<u8>,
}

fn run(at: Endpoint, rx: Receiver<Queued>, shared: Arc<Shared>) {
    let mut health = Health::new(RETRY);
    let mut conn: Option<Conn> = None;
    loop {
        // While down, wake to probe even with nothing asked (the workers ask nothing then).
        let first = if health.is_up() {
            match rx.recv() {
                Ok(q) => Some(q),
                Err(_) => return,
            }
        } else {
            match rx.recv_timeout(RETRY) {
                Ok(q) => Some(q),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        let mut batch: Vec<Queued> = first.into_iter().collect();
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(q) => batch.push(q),
                Err(_) => break,
            }
        }
        let now = Instant::now();
        match health.admit(now) {
            Admit::Skip => {
                fail(&batch);
                continue;
            }
            Admit::Go | Admit::Probe => {}
        }
        let outcome = match conn.as_mut() {
            Some(c) => exchange(c, &batch),
            None => match connect(&at) {
                Ok(mut c) => {
                    let r = exchange(&mut c, &batch);
                    conn = Some(c);
                    r
                }
                Err(e) => Err(e),
            },
        };
        match outcome {
            Ok(()) => {
                if health.succeeded() == Change::CameBack {
                    tracing::warn!(
                        "fleet rate limits: Redis at {} answers again: counted fleet-wide",
                        at.addr
                    );
                    shared.set_up(true);
                }
            }
            Err(why) => {
                conn = None;
                fail(&batch);
                if health.failed(Instant::now()) == Change::WentDown {
                    tracing::warn!(
                        "fleet rate limits: Redis at {} {why}: each node applies its local share until it answers",
                        at.addr
                    );
                    shared.set_up(false);
                }
            }
        }
    }
}

/// The asks of `batch` got no answer: their keys may ask again.
fn fail(batch: &[Queued]) {
    for (rule, ask) in batch {
        rule.leases.failed(&ask.key, ask.debt);
    }
}

/// A new connection: greeted, the script loaded.
fn connect(at: &Endpoint) -> Result<Conn, String> {
    let addr = at
        .addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot be resolved ({e})"))?
        .next()
        .ok_or("resolves to no address")?;
    let stream = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| format!("cannot be reached ({e})"))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut c = Conn {
        stream,
        sha: Vec::new(),
        buf: Vec::new(),
    };
    let mut out = at.greeting.clone();
    resp::command(&mut out, &[b"SCRIPT", b"LOAD", SCRIPT.as_bytes()]);
    let replies = c.call(&out, at.replies + 1)?;
    for r in &replies[..at.replies] {
        if let Reply::Error(e) = r {
            return Err(format!("refused the greeting ({e})"));
        }
    }
    match &replies[at.replies] {
        Reply::Bulk(Some(sha)) => c.sha = sha.clone(),
        other => return Err(format!("answered SCRIPT LOAD with {other:?}")),
    }
    Ok(c)
}

impl Conn {
    /// Sends `out` and reads `n` replies, all within [`TIMEOUT`].
    fn call(&mut self, out: &[u8], n: usize) -> Result<Vec<Reply>, String> {
        let deadline = Instant::now() + TIMEOUT;
        self.stream
            .write_all(out)
            .map_err(|e| format!("failed a write ({e})"))?;
        let mut replies = Vec::with_capacity(n);
        let mut chunk = [0u8; 16 * 1024];
        while replies.len() < n {
            if let Some((reply, used)) = resp::parse(&self.buf).map_err(|e| e.to_string())? {
                self.buf.drain(..used);
                replies.push(reply);
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("did not answer within {} ms", TIMEOUT.as_millis()));
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| e.to_string())?;
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("closed the connection".into()),
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(format!("did not answer within {} ms", TIMEOUT.as_millis()));
                }
                Err(e) => return Err(format!("failed a read ({e})")),
            }
        }
        Ok(replies)
    }
}

/// The command of one ask: `EVALSHA` when `sha` is set, else `EVAL` with the script.
fn ask_command(out: &mut Vec<u8>, sha: Option<&[u8]>, q: &Queued) {
    let (rule, ask) = q;
    let key = rule.redis_key(&ask.key);
    let interval = rule.interval_us.to_string();
    let tolerance = rule.tolerance_us.to_string();
    let want = ask.want.to_string();
    let debt = ask.debt.to_string();
    let (cmd, body): (&[u8], &[u8]) = match sha {
        Some(s) => (b"EVALSHA", s),
        None => (b"EVAL", SCRIPT.as_bytes()),
    };
    resp::command(
        out,
        &[
            cmd,
            body,
            b"1",
            &key,
            interval.as_bytes(),
            tolerance.as_bytes(),
            want.as_bytes(),
            debt.as_bytes(),
        ],
    );
}

/// `{granted, wait}` from the script.
fn grant(reply: &Reply) -> Option<(u32, u64)> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    match items.as_slice() {
        [Reply::Integer(g), Reply::Integer(w)] => {
            Some((u32::try_from(*g).ok()?, u64::try_from(*w).ok()?))
        }
        _ => None,
    }
}

/// Sends `batch`'s asks and puts their answers in their leases; an ask Redis refused (other
/// than `NOSCRIPT`, sent again whole) fails alone, an I/O failure fails the connection.
fn exchange(c: &mut Conn, batch: &[Queued]) -> Result<(), String> {
    if batch.is_empty() {
        // A probe with nothing asked: the connection (and the script) answers.
        let mut out = Vec::new();
        resp::command(&mut out, &[b"PING"]);
        return c.call(&out, 1).map(drop);
    }
    let mut out = Vec::new();
    for q in batch {
        ask_command(&mut out, Some(&c.sha), q);
    }
    let replies = c.call(&out, batch.len())?;
    let now = crate::sys::monotonic_us();
    let mut again = Vec::new();
    for (q, reply) in batch.iter().zip(&replies) {
        match (grant(reply), reply) {
            (Some((g, w)), _) => q.0.leases.answered(&q.1.key, g, w, now),
            (None, Reply::Error(e)) if e.starts_with("NOSCRIPT") => again.push(q),
            (None, other) => {
                tracing::debug!("fleet rate limit: Redis answered {other:?}");
                q.0.leases.failed(&q.1.key, q.1.debt);
            }
        }
    }
    if !again.is_empty() {
        let mut out = Vec::new();
        for q in &again {
            ask_command(&mut out, None, q);
        }
        let replies = c.call(&out, again.len())?;
        let now = crate::sys::monotonic_us();
        for (q, reply) in again.iter().zip(&replies) {
            match grant(reply) {
                Some((g, w)) => q.0.leases.answered(&q.1.key, g, w, now),
                None => q.0.leases.failed(&q.1.key, q.1.debt),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_the_address_and_the_greeting() {
        let e = endpoint("redis://127.0.0.1:6380").unwrap();
        assert_eq!((e.addr.as_str(), e.replies), ("127.0.0.1:6380", 0));
        let e = endpoint("redis://u:p@cache.internal/2").unwrap();
        assert_eq!(e.addr, "cache.internal:6379");
        assert_eq!(e.replies, 2);
        assert!(
            e.greeting
                .starts_with(b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n")
        );
        let e = endpoint("redis://[::1]:7000/0").unwrap();
        assert_eq!((e.addr.as_str(), e.replies), ("[::1]:7000", 0));
        assert!(endpoint("http://x").is_err());
        assert!(endpoint("redis://").is_err());
    }

    #[test]
    fn the_script_answers_are_read_as_grants() {
        let r = Reply::Array(Some(vec![Reply::Integer(2), Reply::Integer(0)]));
        assert_eq!(grant(&r), Some((2, 0)));
        let r = Reply::Array(Some(vec![Reply::Integer(0), Reply::Integer(150_000)]));
        assert_eq!(grant(&r), Some((0, 150_000)));
        assert_eq!(grant(&Reply::Error("NOSCRIPT".into())), None);
        assert_eq!(grant(&Reply::Array(Some(vec![Reply::Integer(-1)]))), None);
    }
}
