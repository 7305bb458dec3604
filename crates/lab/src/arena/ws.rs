//! The arena's WebSocket client (RFC 6455): the upgrade on a new HTTP/1.1 connection, its
//! `Sec-WebSocket-Accept` recomputed (linerate-ws's `accept`), masked frames out, the server's
//! frames read whole (unmasked, as §5.1 requires of a server). Checks only: no extensions
//! offered, no fragmentation sent; a fragmented echo is reassembled.

use std::io::{Read, Write};
use std::net::SocketAddr;

use super::rng::Rng;
use super::wire::{self, Stream};

/// Opcodes (§5.2).
pub const TEXT: u8 = 0x1;
pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
pub const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;
/// Largest message the client reads back.
const MAX_MESSAGE: usize = 1024 * 1024;

/// An open WebSocket.
pub struct Ws {
    s: Stream,
    rng: Rng,
    /// Bytes read past the 101's head: the first frames, if the server sent them at once.
    pending: Vec<u8>,
}

/// One message (or control frame) from the server.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    pub opcode: u8,
    pub payload: Vec<u8>,
}

impl Ws {
    /// Upgrades `GET path` on a new connection to `addr`.
    pub fn open(addr: SocketAddr, path: &str, rng: &mut Rng) -> Result<Ws, String> {
        let mut s = wire::connect(addr, None)?;
        let key = base64(&rng.bytes(16));
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        s.write_all(req.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        s.flush().map_err(|e| format!("write: {e}"))?;
        let mut wire: Vec<u8> = Vec::new();
        let mut buf = [0u8; 4096];
        let head = loop {
            if let Some(h) =
                crate::firstflight::frame::parse_head(&wire).map_err(|e| e.to_string())?
            {
                break h;
            }
            let n = s.read(&mut buf).map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the connection closed before the upgrade's answer".into());
            }
            wire.extend_from_slice(&buf[..n]);
        };
        if head.status != 101 {
            return Err(format!(
                "the upgrade was answered {} (not 101)",
                head.status
            ));
        }
        let want = linerate_ws::accept::accept(key.as_bytes());
        match head.field("sec-websocket-accept") {
            Some(got) if got == want => {}
            got => return Err(format!("Sec-WebSocket-Accept {got:?}, expected {want:?}")),
        }
        Ok(Ws {
            s,
            rng: Rng::new(rng.next_u64()),
            pending: wire[head.len..].to_vec(),
        })
    }

    /// Sends one whole masked frame.
    pub fn send(&mut self, opcode: u8, payload: &[u8]) -> Result<(), String> {
        let mut out = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n if n <= 0xffff => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = self.rng.bytes(4);
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.s.write_all(&out).map_err(|e| format!("write: {e}"))?;
        self.s.flush().map_err(|e| format!("write: {e}"))
    }

    /// Reads the next message or control frame (continuations joined to their message).
    pub fn recv(&mut self) -> Result<Message, String> {
        let mut message: Option<Message> = None;
        loop {
            let mut h = [0u8; 2];
            self.read_exact(&mut h)?;
            let (fin, opcode) = (h[0] & 0x80 != 0, h[0] & 0x0f);
            if h[1] & 0x80 != 0 {
                return Err("a masked frame from the server (RFC 6455 §5.1)".into());
            }
            let len = match h[1] & 0x7f {
                126 => {
                    let mut l = [0u8; 2];
                    self.read_exact(&mut l)?;
                    u16::from_be_bytes(l) as usize
                }
                127 => {
                    let mut l = [0u8; 8];
                    self.read_exact(&mut l)?;
                    usize::try_from(u64::from_be_bytes(l)).unwrap_or(usize::MAX)
                }
                n => n as usize,
            };
            if len > MAX_MESSAGE {
                return Err(format!(
                    "a {len}-byte frame, over the arena's {MAX_MESSAGE}"
                ));
            }
            let mut payload = vec![0u8; len];
            self.read_exact(&mut payload)?;
            if opcode >= 0x8 {
                return Ok(Message { opcode, payload });
            }
            match (&mut message, opcode) {
                (None, 0) => return Err("a continuation frame with no message open".into()),
                (None, op) => {
                    message = Some(Message {
                        opcode: op,
                        payload,
                    })
                }
                (Some(m), 0) => m.payload.extend_from_slice(&payload),
                (Some(_), _) => return Err("a new message inside a fragmented one".into()),
            }
            if fin {
                return message.ok_or_else(|| "no message".to_string());
            }
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), String> {
        let from_pending = buf.len().min(self.pending.len());
        buf[..from_pending].copy_from_slice(&self.pending[..from_pending]);
        self.pending.drain(..from_pending);
        self.s
            .read_exact(&mut buf[from_pending..])
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "the connection closed".to_string(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("no frame within {:?}", wire::IO_TIMEOUT)
                }
                _ => format!("read: {e}"),
            })
    }
}

/// Standard base64 with padding (RFC 4648 §4), for the key.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// RFC 4648 §10's test vectors.
    #[test]
    fn base64_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(i.as_bytes()), o);
        }
    }
}
