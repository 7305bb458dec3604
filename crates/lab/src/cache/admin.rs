//! The counters the lab reads from a server between runs, over a short blocking connection of
//! its own: Redis's `INFO`, memcached's `stats`. Framing and parsing are the codecs'; this
//! file only does the socket, with a deadline on every read.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use super::client::Protocol;
use super::codec::{Decoded, Reply};
use super::{meta, resp};

/// How long a counters query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// What a server says it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Objects stored (Redis: db0's keys; memcached: `curr_items`).
    pub items: u64,
    /// Objects evicted for memory since start (`evicted_keys`; `evictions`).
    pub evictions: u64,
    /// Bytes the server counts as used by data (`used_memory`; `bytes`).
    pub used_bytes: u64,
}

/// Reads `addr`'s counters.
pub fn counters(addr: SocketAddr, protocol: Protocol) -> anyhow::Result<Counters> {
    let mut s = TcpStream::connect_timeout(&addr, QUERY_TIMEOUT)
        .with_context(|| format!("cannot connect to {addr} for its counters"))?;
    s.set_read_timeout(Some(QUERY_TIMEOUT))?;
    let mut req = Vec::new();
    match protocol {
        Protocol::Resp => resp::command(&mut req, &[b"INFO", b"everything"]),
        Protocol::Meta => req.extend_from_slice(b"stats\r\n"),
    }
    s.write_all(&req)?;
    let deadline = Instant::now() + QUERY_TIMEOUT;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let parsed = match protocol {
            Protocol::Resp => match resp::decode(&buf)? {
                Decoded::Reply(Reply::Value(span), _) => {
                    let info = String::from_utf8_lossy(&buf[span]);
                    let num = |name| {
                        resp::info_field(&info, name)
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0)
                    };
                    Some(Counters {
                        items: resp::info_keys(&info),
                        evictions: num("evicted_keys"),
                        used_bytes: num("used_memory"),
                    })
                }
                Decoded::Reply(other, _) => bail!("INFO answered {other:?}"),
                Decoded::Incomplete => None,
            },
            Protocol::Meta => meta::stats(&buf)?.map(|(pairs, _)| {
                let num = |name: &str| {
                    pairs
                        .iter()
                        .find(|(k, _)| k == name)
                        .and_then(|(_, v)| v.parse().ok())
                        .unwrap_or(0)
                };
                Counters {
                    items: num("curr_items"),
                    evictions: num("evictions"),
                    used_bytes: num("bytes"),
                }
            }),
        };
        if let Some(c) = parsed {
            return Ok(c);
        }
        if Instant::now() >= deadline {
            bail!("{addr} did not send its counters within {QUERY_TIMEOUT:?}");
        }
        let n = s.read(&mut chunk).context("reading the counters")?;
        if n == 0 {
            bail!("{addr} closed the connection before sending its counters");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
