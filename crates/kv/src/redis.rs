//! The Redis (or Valkey) driver: one pipelined connection, shared by every call, made on
//! first use and again after a failure. Calls are queued to the connection's task, which
//! writes every command waiting in one `write` and hands replies back in order ([`crate::resp`]
//! frames them). Each call is one command or one short pipeline; the caller ([`crate::tier`])
//! bounds it with the timeout and keeps the health. Knows nothing of frames or namespaces.
//!
//! The URL is read by the `redis` crate (`redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]`), so
//! that what it refuses is refused at start; its connection is not used (see `resp`'s doc).

use std::collections::VecDeque;
use std::fmt;
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::endpoint::BadUrl;
use crate::resp::{self, Reply};

/// The longest TTL given to Redis (30 days, as for memcached): Redis refuses an expiry past
/// its own bound as an error, which would count as an outage; the frame's expiry still ends
/// the value on time.
pub const MAX_TTL_MS: u64 = 30 * 24 * 3600 * 1000;
/// How much the connection's task asks the socket for at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Why a call got no answer it could use.
#[derive(Clone, Debug)]
pub(crate) struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(e.to_string())
    }
}

type Replies = Result<Vec<Reply>, Error>;

/// One call: its commands' bytes, how many replies they get, and where those go.
struct Call {
    bytes: Vec<u8>,
    replies: usize,
    done: oneshot::Sender<Replies>,
}

pub(crate) struct Redis {
    host: String,
    port: u16,
    /// AUTH and SELECT, sent first on every connection, and how many replies they get.
    hello: (Vec<u8>, usize),
    /// The connection's queue, once made; `None` after a failure, so the next call connects
    /// anew (the old connection's task then ends, failing the calls it still held).
    conn: Mutex<Option<mpsc::UnboundedSender<Call>>>,
}

impl Redis {
    pub fn new(url: &str) -> Result<Redis, BadUrl> {
        let client = redis::Client::open(url).map_err(|e| BadUrl(format!("{url}: {e}")))?;
        let info = client.get_connection_info();
        let redis::ConnectionAddr::Tcp(host, port) = &info.addr else {
            return Err(BadUrl(format!("{url}: only TCP is supported")));
        };
        let mut hello = (Vec::new(), 0);
        let r = &info.redis;
        if let Some(password) = &r.password {
            match &r.username {
                Some(user) => resp::command(
                    &mut hello.0,
                    &[b"AUTH", user.as_bytes(), password.as_bytes()],
                ),
                None => resp::command(&mut hello.0, &[b"AUTH", password.as_bytes()]),
            }
            hello.1 += 1;
        }
        if r.db != 0 {
            resp::command(&mut hello.0, &[b"SELECT", r.db.to_string().as_bytes()]);
            hello.1 += 1;
        }
        Ok(Redis {
            host: host.clone(),
            port: *port,
            hello,
            conn: Mutex::new(None),
        })
    }

    /// Where the server is, and the greeting every connection sends first (AUTH, SELECT)
    /// with how many replies it gets: for a caller that connects itself ([`crate::link`]).
    pub fn endpoint(&self) -> (&str, u16, &[u8], usize) {
        (&self.host, self.port, &self.hello.0, self.hello.1)
    }

    /// Forgets the connection (after a failure or a timeout: the server may be gone).
    pub fn reset(&self) {
        self.conn.lock().unwrap().take();
    }

    /// Sends `bytes` (commands getting `replies` replies) and waits for the replies.
    async fn call(&self, bytes: Vec<u8>, replies: usize) -> Replies {
        let (done, answer) = oneshot::channel();
        let call = Call {
            bytes,
            replies,
            done,
        };
        let queued = self.conn.lock().unwrap().clone();
        let call = match queued {
            Some(q) => match q.send(call) {
                Ok(()) => return answer.await.unwrap_or_else(|_| Err(closed())),
                Err(mpsc::error::SendError(call)) => call,
            },
            None => call,
        };
        let q = self.connect().await?;
        *self.conn.lock().unwrap() = Some(q.clone());
        q.send(call).map_err(|_| closed())?;
        answer.await.unwrap_or_else(|_| Err(closed()))
    }

    /// A new connection, greeted (AUTH, SELECT), with its task started.
    async fn connect(&self) -> Result<mpsc::UnboundedSender<Call>, Error> {
        let mut stream = TcpStream::connect((self.host.as_str(), self.port)).await?;
        stream.set_nodelay(true)?;
        let mut buf = Vec::new();
        if self.hello.1 > 0 {
            stream.write_all(&self.hello.0).await?;
            let mut left = self.hello.1;
            while left > 0 {
                match resp::parse(&buf).map_err(|e| Error(e.to_string()))? {
                    Some((Reply::Error(e), _)) => return Err(Error(e)),
                    Some((_, used)) => {
                        buf.drain(..used);
                        left -= 1;
                    }
                    None => {
                        if stream.read_buf(&mut buf).await? == 0 {
                            return Err(closed());
                        }
                    }
                }
            }
        }
        let (queue, calls) = mpsc::unbounded_channel();
        tokio::spawn(run(stream, calls, buf));
        Ok(queue)
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let mut out = Vec::with_capacity(32 + key.len());
        resp::command(&mut out, &[b"GET", key.as_bytes()]);
        match one(self.call(out, 1).await?)? {
            Reply::Bulk(v) => Ok(v),
            other => Err(unexpected("GET", &other)),
        }
    }

    /// The values of `keys` in one `MGET` (one `GET` for a single key): their values in
    /// `keys`' order, `None` for a missing key. One command for the lot costs Redis 7 about
    /// half the instructions a key of pipelined `GET`s does (callgrind of redis-server, 12
    /// keys of 1.3 KB: 3,666 instructions a key for `GET`s, 1,736 for `MGET`). An
    /// error reply fails the call (the server is not one to trust).
    pub async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        if let [key] = keys {
            return Ok(vec![self.get(key).await?]);
        }
        let mut out = Vec::with_capacity(32 + keys.iter().map(|k| 16 + k.len()).sum::<usize>());
        let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
        args.push(b"MGET");
        args.extend(keys.iter().map(|k| k.as_bytes()));
        resp::command(&mut out, &args);
        match one(self.call(out, 1).await?)? {
            Reply::Array(Some(items)) if items.len() == keys.len() => items
                .into_iter()
                .map(|r| match r {
                    Reply::Bulk(v) => Ok(v),
                    other => Err(unexpected("MGET", &other)),
                })
                .collect(),
            other => Err(unexpected("MGET", &other)),
        }
    }

    /// `SET key value PX ttl`: with a `maxmemory-policy` that evicts (`allkeys-lru`, as the
    /// docs ask), a full server makes room rather than refusing.
    pub async fn set(&self, key: &str, value: &[u8], ttl_ms: u64) -> Result<(), Error> {
        let ms = ttl_ms.clamp(1, MAX_TTL_MS);
        let mut px = Vec::with_capacity(20);
        resp::push_decimal(&mut px, ms);
        let mut out = Vec::with_capacity(64 + key.len() + value.len());
        resp::command(&mut out, &[b"SET", key.as_bytes(), value, b"PX", &px]);
        match one(self.call(out, 1).await?)? {
            Reply::Simple(_) => Ok(()),
            other => Err(unexpected("SET", &other)),
        }
    }

    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        let mut out = Vec::new();
        resp::command(&mut out, &[b"DEL", key.as_bytes()]);
        match one(self.call(out, 1).await?)? {
            Reply::Integer(_) => Ok(()),
            other => Err(unexpected("DEL", &other)),
        }
    }

    /// The counter at `key`, set to `init` first where it is missing (one round trip).
    pub async fn counter(&self, key: &str, init: u64) -> Result<u64, Error> {
        self.counter_then(key, init, b"GET").await
    }

    /// The counter at `key` plus one, from `init` where it is missing (one round trip).
    pub async fn bump(&self, key: &str, init: u64) -> Result<u64, Error> {
        self.counter_then(key, init, b"INCR").await
    }

    /// `SET key init NX` then `then key` (GET or INCR), pipelined; the second's number.
    async fn counter_then(&self, key: &str, init: u64, then: &[u8]) -> Result<u64, Error> {
        let mut n = Vec::with_capacity(20);
        resp::push_decimal(&mut n, init);
        let mut out = Vec::new();
        resp::command(&mut out, &[b"SET", key.as_bytes(), &n, b"NX"]);
        resp::command(&mut out, &[then, key.as_bytes()]);
        let mut replies = self.call(out, 2).await?.into_iter();
        if let Some(Reply::Error(e)) = replies.next() {
            return Err(Error(e));
        }
        match replies.next() {
            Some(Reply::Integer(v)) => {
                u64::try_from(v).map_err(|_| Error("a negative counter".into()))
            }
            Some(Reply::Bulk(Some(v))) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| Error("a counter that is not a number".into())),
            Some(other) => Err(unexpected(std::str::from_utf8(then).unwrap_or("?"), &other)),
            None => Err(closed()),
        }
    }
}

/// The connection's task: writes what callers queue, batching what is waiting, and hands
/// each reply to its call in order. Ends when the socket fails (the calls it still holds then
/// get an error), or once the queue has closed (the connection was forgotten) and every call
/// it holds is answered.
async fn run(stream: TcpStream, mut calls: mpsc::UnboundedReceiver<Call>, mut input: Vec<u8>) {
    let (mut rd, mut wr) = stream.into_split();
    let mut waiting: VecDeque<(usize, Vec<Reply>, oneshot::Sender<Replies>)> = VecDeque::new();
    let mut out = Vec::new();
    // Whether calls may still come: a forgotten connection answers what it holds, then ends.
    let mut open = true;
    let failed = loop {
        if !open && waiting.is_empty() {
            return;
        }
        tokio::select! {
            call = calls.recv(), if open => {
                let Some(call) = call else {
                    open = false;
                    continue;
                };
                queue(&mut out, &mut waiting, call);
                while let Ok(call) = calls.try_recv() {
                    queue(&mut out, &mut waiting, call);
                }
                if let Err(e) = wr.write_all(&out).await {
                    break e.into();
                }
                out.clear();
            }
            read = rd.read_buf(&mut input), if !waiting.is_empty() => {
                match read {
                    Ok(0) => break closed(),
                    Err(e) => break e.into(),
                    Ok(_) => {}
                }
                if let Err(e) = deliver(&mut input, &mut waiting) {
                    break e;
                }
                if input.capacity() - input.len() < READ_CHUNK / 4 {
                    input.reserve(READ_CHUNK);
                }
            }
        }
    };
    for (_, _, done) in waiting {
        let _ = done.send(Err(failed.clone()));
    }
}

fn queue(
    out: &mut Vec<u8>,
    waiting: &mut VecDeque<(usize, Vec<Reply>, oneshot::Sender<Replies>)>,
    call: Call,
) {
    out.extend_from_slice(&call.bytes);
    waiting.push_back((call.replies, Vec::with_capacity(call.replies), call.done));
}

/// Hands every whole reply in `input` to its call; keeps the part of one not yet whole.
fn deliver(
    input: &mut Vec<u8>,
    waiting: &mut VecDeque<(usize, Vec<Reply>, oneshot::Sender<Replies>)>,
) -> Result<(), Error> {
    let mut at = 0;
    while let Some((reply, used)) = resp::parse(&input[at..]).map_err(|e| Error(e.to_string()))? {
        at += used;
        let Some((left, got, _)) = waiting.front_mut() else {
            return Err(Error("a reply to no command".into()));
        };
        got.push(reply);
        *left -= 1;
        if *left == 0 {
            let (_, got, done) = waiting.pop_front().expect("front exists");
            // A call that gave up (its timeout) no longer listens: its reply is dropped.
            let _ = done.send(Ok(got));
        }
    }
    input.drain(..at);
    Ok(())
}

fn one(replies: Vec<Reply>) -> Result<Reply, Error> {
    match replies.into_iter().next() {
        Some(Reply::Error(e)) => Err(Error(e)),
        Some(r) => Ok(r),
        None => Err(closed()),
    }
}

fn unexpected(command: &str, reply: &Reply) -> Error {
    Error(format!("unexpected reply to {command}: {reply:?}"))
}

fn closed() -> Error {
    Error("the connection to the server closed".into())
}
