//! The arena's HTTP/2 client (RFC 9113): one request on stream 1 of a new connection, h2c by
//! prior knowledge or TLS with ALPN `h2`; the answer's head, body and trailers (gRPC's
//! status) read back through linerate-hpack's decoder. Windows are given back as data comes,
//! SETTINGS and PING answered.
//!
//! Checks only: one stream, no priorities, no server push; anything unexpected is a reason.

use std::io::{Read, Write};
use std::net::SocketAddr;

use linerate_hpack::Decoder;

use super::wire::{self, ALPN_H2, MAX_REPLY, Reply, Stream};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Largest DATA frame the client sends (the initial SETTINGS_MAX_FRAME_SIZE, RFC 9113 §6.5.2).
const MAX_FRAME: usize = 16_384;
/// Largest frame the client accepts (it announces nothing larger than the default).
const MAX_READ_FRAME: usize = 16_384;

// Frame types and flags (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Where an HTTP/2 request goes.
#[derive(Clone, Copy, Debug)]
pub enum H2 {
    /// Cleartext, prior knowledge.
    Clear(SocketAddr),
    /// TLS, ALPN `h2`.
    Tls(SocketAddr),
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Sends `method target` with `fields` and `body` on a new connection; reads the answer.
pub fn request(
    to: H2,
    method: &str,
    target: &str,
    fields: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Reply, String> {
    let (addr, alpn, scheme) = match to {
        H2::Clear(a) => (a, None, "http"),
        H2::Tls(a) => (a, Some(ALPN_H2), "https"),
    };
    let mut s = wire::connect(addr, alpn)?;
    if let Stream::Tls(t) = &s
        && t.conn.alpn_protocol() != Some(ALPN_H2)
    {
        return Err("the server did not choose ALPN h2".into());
    }
    let mut block = Vec::new();
    linerate_hpack::field(&mut block, b":method", method.as_bytes());
    linerate_hpack::field(&mut block, b":scheme", scheme.as_bytes());
    linerate_hpack::field(&mut block, b":authority", addr.to_string().as_bytes());
    linerate_hpack::field(&mut block, b":path", target.as_bytes());
    for (n, v) in fields {
        linerate_hpack::field(&mut block, n.to_ascii_lowercase().as_bytes(), v.as_bytes());
    }
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    let body = body.unwrap_or_default();
    let head_flags = END_HEADERS | if body.is_empty() { END_STREAM } else { 0 };
    frame(&mut out, HEADERS, head_flags, 1, &block);
    let mut chunks = body.chunks(MAX_FRAME).peekable();
    while let Some(c) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            END_STREAM
        } else {
            0
        };
        frame(&mut out, DATA, flags, 1, c);
    }
    s.write_all(&out).map_err(|e| format!("write: {e}"))?;
    s.flush().map_err(|e| format!("write: {e}"))?;
    read_answer(&mut s)
}

/// Reads frames until stream 1 ends.
fn read_answer(s: &mut Stream) -> Result<Reply, String> {
    let mut hpack = Decoder::new();
    let mut reply = Reply {
        version: "2",
        ..Reply::default()
    };
    let mut head_seen = false;
    let mut block: Vec<u8> = Vec::new();
    let mut block_ends_stream = false;
    loop {
        let mut h = [0u8; 9];
        read_exact(s, &mut h)?;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if len > MAX_READ_FRAME {
            return Err(format!(
                "a {len}-byte frame, over the {MAX_READ_FRAME} announced"
            ));
        }
        let mut payload = vec![0u8; len];
        read_exact(s, &mut payload)?;
        let mut ended = false;
        match kind {
            SETTINGS if flags & ACK == 0 => {
                let mut ack = Vec::new();
                frame(&mut ack, SETTINGS, ACK, 0, &[]);
                s.write_all(&ack).map_err(|e| format!("write: {e}"))?;
            }
            PING if flags & ACK == 0 => {
                let mut pong = Vec::new();
                frame(&mut pong, PING, ACK, 0, &payload);
                s.write_all(&pong).map_err(|e| format!("write: {e}"))?;
            }
            GOAWAY => {
                let code = payload
                    .get(4..8)
                    .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                return Err(format!(
                    "GOAWAY (error code {code:#x}) before the answer ended"
                ));
            }
            RST_STREAM if stream == 1 => {
                let code = payload
                    .get(..4)
                    .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                return Err(format!("the stream was reset (error code {code:#x})"));
            }
            DATA if stream == 1 => {
                let data = unpad(&payload, flags)?;
                if reply.body.len() + data.len() > MAX_REPLY {
                    return Err(format!("the answer is over {MAX_REPLY} bytes"));
                }
                reply.body.extend_from_slice(data);
                if !payload.is_empty() {
                    // Give the window back at once, connection and stream (§6.9).
                    let inc = (payload.len() as u32).to_be_bytes();
                    let mut wu = Vec::new();
                    frame(&mut wu, WINDOW_UPDATE, 0, 0, &inc);
                    frame(&mut wu, WINDOW_UPDATE, 0, 1, &inc);
                    s.write_all(&wu).map_err(|e| format!("write: {e}"))?;
                }
                ended = flags & END_STREAM != 0;
            }
            HEADERS if stream == 1 => {
                let mut frag = unpad(&payload, flags)?;
                if flags & PRIORITY != 0 {
                    frag = frag
                        .get(5..)
                        .ok_or("a HEADERS frame shorter than its priority")?;
                }
                block.clear();
                block.extend_from_slice(frag);
                block_ends_stream = flags & END_STREAM != 0;
                if flags & END_HEADERS != 0 {
                    ended = take_block(&mut hpack, &block, &mut reply, &mut head_seen)?
                        && block_ends_stream;
                }
            }
            CONTINUATION if stream == 1 => {
                block.extend_from_slice(&payload);
                if flags & END_HEADERS != 0 {
                    ended = take_block(&mut hpack, &block, &mut reply, &mut head_seen)?
                        && block_ends_stream;
                }
            }
            _ => {}
        }
        s.flush().map_err(|e| format!("write: {e}"))?;
        if ended {
            return Ok(reply);
        }
    }
}

/// Decodes a header block into the head (its `:status`) or, after a final head, the
/// trailers. Returns whether it was a final head or trailers (an interim head is not).
fn take_block(
    hpack: &mut Decoder,
    block: &[u8],
    reply: &mut Reply,
    head_seen: &mut bool,
) -> Result<bool, String> {
    let mut fields: Vec<(String, String)> = Vec::new();
    hpack
        .decode(block, |n, v| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .map_err(|_| "a header block HPACK could not decode".to_string())?;
    if *head_seen {
        reply.trailers = fields;
        return Ok(true);
    }
    let status = fields
        .iter()
        .find(|(n, _)| n == ":status")
        .and_then(|(_, v)| v.parse::<u16>().ok())
        .ok_or("a head without :status")?;
    if (100..200).contains(&status) {
        return Ok(false);
    }
    reply.status = status;
    reply.fields = fields
        .into_iter()
        .filter(|(n, _)| !n.starts_with(':'))
        .collect();
    *head_seen = true;
    Ok(true)
}

fn unpad(payload: &[u8], flags: u8) -> Result<&[u8], String> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload
        .first()
        .ok_or("a padded frame without its pad length")? as usize;
    payload
        .get(1..payload.len().saturating_sub(pad))
        .filter(|_| pad < payload.len())
        .ok_or_else(|| "padding longer than the frame".to_string())
}

fn read_exact(s: &mut Stream, buf: &mut [u8]) -> Result<(), String> {
    s.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            "the connection closed before the answer ended".to_string()
        }
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no answer within {:?}", wire::IO_TIMEOUT)
        }
        _ => format!("read: {e}"),
    })
}
