//! The `redis` engine: a Redis (or Valkey) server every node reaches. A key is the string
//! `linerate:KEY` (SET replaces it whole); a lock is `linerate:lock:NAME` taken by
//! `SET NX PX` with a random token, its fencing number `linerate:fence:NAME` raised by INCR
//! in the same script, and it is extended or released only by a script that compares the
//! token first; every put and delete PUBLISHes the key on [`CHANNEL`], which a watch's
//! thread SUBSCRIBEs to.
//!
//! A small blocking client over a std `TcpStream` and linerate-kv's RESP codec: it runs on a
//! manager's own thread, never on a worker. Every connect, read and write has a timeout
//! ([`CONNECT_TIMEOUT`], [`IO_TIMEOUT`]): a Redis that is down is an error, never a hang; the
//! connection is made again on the next call.
#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use linerate_kv::resp::{self, Reply};

use super::{Change, Lock, Storage, StorageError, Watch, check_key, token};

/// The longest wait for a connection to Redis.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest wait for a reply (or for a write to be taken).
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// The pub/sub channel on which every change's key is announced.
pub const CHANNEL: &str = "linerate:changes";
/// Before every key and lock: the fleet's names never meet another application's.
const PREFIX: &str = "linerate:";
/// The most SCAN pages one [`Storage::list`] reads (256 keys asked per page).
const MAX_SCAN_PAGES: usize = 4096;

/// `s` with the glob characters of a SCAN pattern escaped (keys are `[A-Za-z0-9._-/]`, but a
/// prefix is any string).
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// How long a watch waits before it connects again after losing Redis; also how often its
/// thread looks at its stop flag.
pub const WATCH_RETRY: Duration = Duration::from_millis(500);

/// `SET NX PX`, then INCR of the fence, as one step: `[lock, fence] [token, ms]` → the
/// fence, or 0 when the lock is held.
const LOCK_SCRIPT: &str = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
     return redis.call('incr', KEYS[2]) else return 0 end";
/// The expiry moved only while the token is the holder's: 1, else 0.
const EXTEND_SCRIPT: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
/// The lock deleted only while the token is the holder's.
const UNLOCK_SCRIPT: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('del', KEYS[1]) else return 0 end";

use super::redis_url::RedisUrl as Endpoint;

fn parse_url(url: &str) -> Result<Endpoint, StorageError> {
    super::redis_url::parse(url).map_err(|why| StorageError::Io(format!("redis URL: {why}")))
}

/// `HOST:PORT` of a `redis://` URL, without its user and password (for logs and
/// `/readyz`); `None` when it is not one.
pub fn address(url: &str) -> Option<String> {
    parse_url(url).ok().map(|e| e.addr)
}

/// One connection and the bytes read past the last reply.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(at: &Endpoint) -> Result<Conn, StorageError> {
        let io = |e: io::Error| StorageError::Io(format!("redis {}: {e}", at.addr));
        let addr = at
            .addr
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| StorageError::Io(format!("redis {}: no address", at.addr)))?;
        let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(io)?;
        stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
        stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
        let _ = stream.set_nodelay(true);
        let mut c = Conn {
            stream,
            buf: Vec::new(),
        };
        if let Some(p) = &at.password {
            match &at.user {
                Some(u) => c.call(&[b"AUTH", u, p])?,
                None => c.call(&[b"AUTH", p])?,
            };
        }
        if at.db != 0 {
            c.call(&[b"SELECT", at.db.to_string().as_bytes()])?;
        }
        Ok(c)
    }

    fn send(&mut self, args: &[&[u8]]) -> Result<(), StorageError> {
        let mut out = Vec::new();
        resp::command(&mut out, args);
        self.stream
            .write_all(&out)
            .map_err(|e| StorageError::Io(format!("redis: {e}")))
    }

    /// The next reply; `Ok(None)` when none came within the read timeout and `idle_ok`.
    fn reply(&mut self, idle_ok: bool) -> Result<Option<Reply>, StorageError> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some((r, n)) =
                resp::parse(&self.buf).map_err(|e| StorageError::Protocol(e.to_string()))?
            {
                self.buf.drain(..n);
                return Ok(Some(r));
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(StorageError::Io("redis closed the connection".into())),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if idle_ok
                        && matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(StorageError::Io(format!("redis: {e}"))),
            }
        }
    }

    /// Whether Redis still holds the connection: a kept connection that Redis closed while it
    /// was idle (it restarted, or dropped idle clients) reads end of file. Asked before each
    /// call on a kept one (storage calls are few): a dead one is replaced, not reported.
    fn alive(&self) -> bool {
        let mut byte = [0u8; 1];
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let open = match self.stream.peek(&mut byte) {
            Ok(0) => false,
            // A byte nobody asked for (a reply out of turn): not a connection to trust.
            Ok(_) => false,
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
        };
        self.stream.set_nonblocking(false).is_ok() && open
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Reply, StorageError> {
        self.send(args)?;
        match self.reply(false)? {
            Some(Reply::Error(e)) => Err(StorageError::Protocol(e)),
            Some(r) => Ok(r),
            None => Err(StorageError::Io("redis: no reply".into())),
        }
    }
}

/// A Redis server as storage.
pub struct RedisStorage {
    at: Endpoint,
    conn: Mutex<Option<Conn>>,
}

impl std::fmt::Debug for RedisStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStorage")
            .field("addr", &self.at.addr)
            .finish_non_exhaustive()
    }
}

impl RedisStorage {
    /// The storage at `url` (`redis://…`); nothing is connected until the first call.
    pub fn open(url: &str) -> Result<RedisStorage, StorageError> {
        Ok(RedisStorage {
            at: parse_url(url)?,
            conn: Mutex::new(None),
        })
    }

    /// One command on the shared connection (made when there is none; dropped after an
    /// error, so the next call starts clean).
    fn call(&self, args: &[&[u8]]) -> Result<Reply, StorageError> {
        let mut slot = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|c| !c.alive()) {
            *slot = None;
        }
        let conn = match slot.as_mut() {
            Some(c) => c,
            None => slot.insert(Conn::open(&self.at)?),
        };
        let got = conn.call(args);
        if got.is_err() {
            *slot = None;
        }
        got
    }

    fn int(&self, args: &[&[u8]]) -> Result<i64, StorageError> {
        match self.call(args)? {
            Reply::Integer(n) => Ok(n),
            other => Err(StorageError::Protocol(format!("{other:?}"))),
        }
    }
}

fn ms(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

impl Storage for RedisStorage {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let k = format!("{PREFIX}{}", check_key(key)?);
        match self.call(&[b"GET", k.as_bytes()])? {
            Reply::Bulk(v) => Ok(v),
            other => Err(StorageError::Protocol(format!("{other:?}"))),
        }
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        let k = format!("{PREFIX}{}", check_key(key)?);
        self.call(&[b"SET", k.as_bytes(), value])?;
        self.int(&[b"PUBLISH", CHANNEL.as_bytes(), key.as_bytes()])?;
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<(), StorageError> {
        let k = format!("{PREFIX}{}", check_key(key)?);
        if self.int(&[b"DEL", k.as_bytes()])? > 0 {
            self.int(&[b"PUBLISH", CHANNEL.as_bytes(), key.as_bytes()])?;
        }
        Ok(())
    }

    fn lock(&self, name: &str, ttl: Duration) -> Result<Option<Lock>, StorageError> {
        let name = check_key(name)?;
        let (lock, fence) = (
            format!("{PREFIX}lock:{name}"),
            format!("{PREFIX}fence:{name}"),
        );
        let mine = token();
        let got = self.int(&[
            b"EVAL",
            LOCK_SCRIPT.as_bytes(),
            b"2",
            lock.as_bytes(),
            fence.as_bytes(),
            mine.as_bytes(),
            ms(ttl).as_bytes(),
        ])?;
        Ok((got > 0).then(|| Lock {
            name: name.to_string(),
            token: mine,
            fence: got as u64,
        }))
    }

    fn extend(&self, lock: &Lock, ttl: Duration) -> Result<bool, StorageError> {
        let key = format!("{PREFIX}lock:{}", check_key(&lock.name)?);
        let got = self.int(&[
            b"EVAL",
            EXTEND_SCRIPT.as_bytes(),
            b"1",
            key.as_bytes(),
            lock.token.as_bytes(),
            ms(ttl).as_bytes(),
        ])?;
        Ok(got == 1)
    }

    fn unlock(&self, lock: &Lock) -> Result<(), StorageError> {
        let key = format!("{PREFIX}lock:{}", check_key(&lock.name)?);
        self.int(&[
            b"EVAL",
            UNLOCK_SCRIPT.as_bytes(),
            b"1",
            key.as_bytes(),
            lock.token.as_bytes(),
        ])?;
        Ok(())
    }

    /// Subscribed before it returns when Redis answers (a put made after it is seen); a
    /// Redis that is down is logged and the watch starts anyway: a lost (or never made)
    /// connection is made again every [`WATCH_RETRY`], and then announces [`Change::All`].
    fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        // SCAN, not KEYS: the server answers other clients between two pages.
        let pattern = format!("{PREFIX}{}*", glob_escape(prefix));
        let mut keys = Vec::new();
        let mut cursor = b"0".to_vec();
        for _ in 0..MAX_SCAN_PAGES {
            let page = self.call(&[
                b"SCAN",
                &cursor,
                b"MATCH",
                pattern.as_bytes(),
                b"COUNT",
                b"256",
            ])?;
            let Reply::Array(Some(mut parts)) = page else {
                return Err(StorageError::Protocol(format!("SCAN: {page:?}")));
            };
            let (Some(Reply::Array(Some(found))), Some(Reply::Bulk(Some(next)))) =
                (parts.pop(), parts.pop())
            else {
                return Err(StorageError::Protocol("SCAN: not [cursor, keys]".into()));
            };
            for k in found {
                if let Reply::Bulk(Some(k)) = k
                    && let Some(k) = k.strip_prefix(PREFIX.as_bytes())
                    && let Ok(k) = std::str::from_utf8(k)
                {
                    keys.push(k.to_string());
                }
            }
            if next == b"0" {
                keys.sort_unstable();
                keys.dedup();
                return Ok(keys);
            }
            cursor = next;
        }
        Err(StorageError::Protocol(format!(
            "SCAN of {prefix:?} did not end within {MAX_SCAN_PAGES} pages"
        )))
    }

    fn watch(&self) -> Result<Watch, StorageError> {
        let at = self.at.clone();
        let mut conn = match subscribe(&at) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!("storage watch: {e}; subscribing again every {WATCH_RETRY:?}");
                None
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("linerate-storage-watch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    let Some(c) = conn.as_mut() else {
                        std::thread::sleep(WATCH_RETRY);
                        match subscribe(&at) {
                            Ok(c) => {
                                conn = Some(c);
                                if tx.send(Change::All).is_err() {
                                    return;
                                }
                            }
                            Err(e) => tracing::debug!("storage watch: {e}"),
                        }
                        continue;
                    };
                    match c.reply(true) {
                        Ok(None) => {}
                        Ok(Some(Reply::Array(Some(parts)))) => {
                            if let [Reply::Bulk(Some(kind)), _, Reply::Bulk(Some(key))] =
                                parts.as_slice()
                                && kind == b"message"
                                && tx
                                    .send(Change::Key(String::from_utf8_lossy(key).into_owned()))
                                    .is_err()
                            {
                                return;
                            }
                        }
                        Ok(Some(_)) => {}
                        Err(e) => {
                            tracing::warn!("storage watch: {e}; subscribing again");
                            conn = None;
                        }
                    }
                }
            })
            .map_err(|e| StorageError::Io(format!("the watch's thread: {e}")))?;
        Ok(Watch::new(rx, stop))
    }

    fn watch_delay(&self) -> Duration {
        // Pub/sub delivers as the change is made; a round trip's worth for the subscriber.
        Duration::from_millis(100)
    }
}

/// A connection subscribed to [`CHANNEL`] (the confirmation read), whose reads time out
/// every [`WATCH_RETRY`] so its thread sees its stop flag.
fn subscribe(at: &Endpoint) -> Result<Conn, StorageError> {
    let mut c = Conn::open(at)?;
    c.send(&[b"SUBSCRIBE", CHANNEL.as_bytes()])?;
    match c.reply(false)? {
        Some(Reply::Array(Some(_))) => {}
        other => return Err(StorageError::Protocol(format!("SUBSCRIBE: {other:?}"))),
    }
    c.stream
        .set_read_timeout(Some(WATCH_RETRY))
        .map_err(|e| StorageError::Io(format!("redis: {e}")))?;
    Ok(c)
}

/// A redis-server for tests (this module's and the fleet's).
#[cfg(test)]
pub(crate) mod test_server {
    use std::net::TcpStream;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    /// A redis-server on a free port of 127.0.0.1, killed by PID when dropped; `None` (with
    /// a NOT RUN line) where it is not installed.
    pub(crate) struct Server {
        child: Child,
        port: u16,
    }

    impl Server {
        pub(crate) fn start() -> Option<Server> {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port();
            Server::start_on(port)
        }

        pub(crate) fn start_on(port: u16) -> Option<Server> {
            let child = match Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("NOT RUN: redis storage: no redis-server ({e})");
                    return None;
                }
            };
            let s = Server { child, port };
            for _ in 0..200 {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(s);
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            panic!("redis-server did not listen on {port}");
        }

        pub(crate) fn url(&self) -> String {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_server::Server;
    use super::*;

    #[test]
    fn redis_values_are_replaced_whole_and_a_watcher_sees_each_change() {
        let Some(server) = Server::start() else {
            return;
        };
        super::super::contract::values(&RedisStorage::open(&server.url()).unwrap());
    }

    /// An ACL user whose password needs percent-encoding (`@`, `/`, `%`, `:`): the decoded
    /// password is the one sent; a wrong one is refused, not taken for the default user.
    #[test]
    fn an_acl_user_with_a_percent_encoded_password_is_who_storage_is() {
        let Some(server) = Server::start() else {
            return;
        };
        let mut admin = TcpStream::connect(server.url().trim_start_matches("redis://")).unwrap();
        let mut out = Vec::new();
        resp::command(
            &mut out,
            &[
                b"ACL",
                b"SETUSER",
                b"fleet",
                b"on",
                b">s3cr@t/x%y:z",
                b"~*",
                b"&*",
                b"+@all",
            ],
        );
        resp::command(&mut out, &[b"ACL", b"SETUSER", b"default", b"off"]);
        admin.write_all(&out).unwrap();
        let mut got = [0u8; 10];
        admin.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+OK\r\n+OK\r\n");
        let at = server.url().replace("redis://", "");
        let good = format!("redis://fleet:s3cr%40t%2Fx%25y%3Az@{at}");
        super::super::contract::values(&RedisStorage::open(&good).unwrap());
        for bad in [
            // The encoded text itself as the password (what was sent before decoding).
            format!("redis://fleet:s3cr%2540t%252Fx%2525y%253Az@{at}"),
            format!("redis://fleet:wrong@{at}"),
            format!("redis://{at}"),
        ] {
            let refused = RedisStorage::open(&bad).and_then(|s| s.get("k"));
            assert!(refused.is_err(), "{bad}");
        }
    }

    #[test]
    fn redis_locks_one_winner_expired_taken_over_with_a_larger_fence_stale_unlock_ignored() {
        let Some(server) = Server::start() else {
            return;
        };
        let a: Arc<dyn Storage> = Arc::new(RedisStorage::open(&server.url()).unwrap());
        let b: Arc<dyn Storage> = Arc::new(RedisStorage::open(&server.url()).unwrap());
        super::super::contract::locks(&a, &b);
    }

    /// A kept connection that Redis closed (a restart) is replaced before it is used: the first
    /// call after Redis is back succeeds, no "closed the connection" error.
    #[test]
    fn a_connection_redis_closed_while_idle_is_replaced_not_reported() {
        let Some(server) = Server::start() else {
            return;
        };
        let port: u16 = server.url().rsplit(':').next().unwrap().parse().unwrap();
        let storage = RedisStorage::open(&server.url()).unwrap();
        storage.put("k", b"v1").unwrap();
        drop(server);
        let Some(server) = Server::start_on(port) else {
            return;
        };
        assert_eq!(
            storage.get("k").unwrap(),
            None,
            "an empty Redis, reached at once"
        );
        storage.put("k", b"v2").unwrap();
        assert_eq!(storage.get("k").unwrap().as_deref(), Some(&b"v2"[..]));
        drop(server);
    }

    #[test]
    fn redis_down_is_an_error_not_a_hang() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let s = RedisStorage::open(&format!("redis://127.0.0.1:{port}")).unwrap();
        assert!(matches!(s.get("a"), Err(StorageError::Io(_))));
        assert!(matches!(
            s.lock("a", Duration::from_secs(1)),
            Err(StorageError::Io(_))
        ));
        // The watch starts anyway (it subscribes once Redis answers), and says nothing.
        let w = s.watch().unwrap();
        assert!(w.changes.recv_timeout(WATCH_RETRY * 2).is_err());
    }

    /// A watch started while Redis was down announces `All` once it is up, then each key.
    #[test]
    fn a_redis_watch_started_while_redis_is_down_catches_up_once_it_is_up() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("redis://127.0.0.1:{port}");
        let s = RedisStorage::open(&url).unwrap();
        let w = s.watch().unwrap();
        let Some(server) = Server::start_on(port) else {
            return;
        };
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while std::time::Instant::now() < until && !seen.contains(&Change::Key("k".into())) {
            if seen.contains(&Change::All) {
                s.put("k", b"v").unwrap();
            }
            if let Ok(c) = w.changes.recv_timeout(Duration::from_millis(200)) {
                seen.push(c);
            }
        }
        assert!(seen.contains(&Change::All), "{seen:?}");
        assert!(seen.contains(&Change::Key("k".into())), "{seen:?}");
        drop(server);
    }

    #[test]
    fn redis_urls_name_the_address_never_the_password() {
        // What /readyz names: the address, never the password (the URL forms themselves:
        // redis_url.rs's table).
        assert_eq!(
            address("redis://u:secret@cache:7/1").as_deref(),
            Some("cache:7")
        );
        assert_eq!(address("http://x"), None);
    }
}
