//! The arena's HTTP/1.1 client and its connections: one exchange per connection, plain or TLS
//! (certificate not verified: the arena checks a server it was pointed at), the request sent
//! whole or in fragments with a pause between writes, the response framed by firstflight's
//! reader. Every wait is bounded by [`IO_TIMEOUT`] and every answer by [`MAX_REPLY`].
//!
//! Checks only: never a load generator, never a retry. A failure is a reason for the table.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use linerate_load::tls::{TlsChoice, TlsClient, Verify};
use rustls::{ClientConnection, StreamOwned};

use crate::firstflight::frame::{self, BodyReader};

/// Longest wait for a connection, a write or the next bytes of an answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause between two fragments of a request (HttpArena's fragmentation checks: long
/// enough that the server reads them apart on loopback).
pub const FRAGMENT_PAUSE: Duration = Duration::from_millis(30);
/// Most bytes of one answer the arena reads (the largest check body is a 20 MiB count).
pub const MAX_REPLY: usize = 32 * 1024 * 1024;

/// ALPN identifiers the arena offers.
pub const ALPN_H1: &[u8] = b"http/1.1";
pub const ALPN_H2: &[u8] = b"h2";

/// One answer, whatever the protocol: HTTP/2's trailers kept apart for gRPC.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    pub status: u16,
    pub fields: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub trailers: Vec<(String, String)>,
    /// "1.1" or "2": the protocol the answer came in.
    pub version: &'static str,
}

impl Reply {
    /// The first field named `name` (case-insensitive), trailers after the head.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .chain(&self.trailers)
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text, trimmed (HttpArena compares bodies as curl's last line).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).trim().to_string()
    }
}

/// A connected socket, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// The TLS session, if this is one.
    pub fn tls(&self) -> Option<&ClientConnection> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(s) => Some(&s.conn),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => match s.read(buf) {
                // A close without close_notify ends the answer as a plain close does.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// Connects to `addr`; with `alpn`, over TLS offering that one protocol, the handshake done.
pub fn connect(addr: SocketAddr, alpn: Option<&[u8]>) -> Result<Stream, String> {
    let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let Some(alpn) = alpn else {
        return Ok(Stream::Plain(tcp));
    };
    let choice = TlsChoice {
        http2: alpn == ALPN_H2,
        ..TlsChoice::default()
    };
    let client = TlsClient::new(&addr.ip().to_string(), Verify::Insecure, choice)
        .map_err(|e| format!("TLS client: {e}"))?;
    let conn = client.session().map_err(|e| format!("TLS client: {e}"))?;
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn
            .complete_io(&mut s.sock)
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    }
    Ok(Stream::Tls(Box::new(s)))
}

/// An HTTP/1.1 request: `Host`, `Connection: close`, the extra fields, and the body with its
/// `Content-Length` (unless a `Transfer-Encoding` is among the fields: then the body is sent
/// as one chunk).
pub fn request(
    method: &str,
    target: &str,
    fields: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    let chunked = fields
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    for (n, v) in fields {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    let mut bytes = match body {
        Some(b) if chunked => {
            out.push_str("\r\n");
            let mut bytes = out.into_bytes();
            if !b.is_empty() {
                bytes.extend_from_slice(format!("{:x}\r\n", b.len()).as_bytes());
                bytes.extend_from_slice(b);
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"0\r\n\r\n");
            return bytes;
        }
        Some(b) => {
            out.push_str(&format!("Content-Length: {}\r\n\r\n", b.len()));
            out.into_bytes()
        }
        None => {
            out.push_str("\r\n");
            out.into_bytes()
        }
    };
    if let Some(b) = body {
        bytes.extend_from_slice(b);
    }
    bytes
}

/// Sends `fragments` (a pause between each) on a new connection and reads one answer.
pub fn exchange(
    addr: SocketAddr,
    alpn: Option<&[u8]>,
    fragments: &[&[u8]],
) -> Result<Reply, String> {
    let mut s = connect(addr, alpn)?;
    for (i, f) in fragments.iter().enumerate() {
        if i > 0 {
            s.flush().map_err(|e| format!("write: {e}"))?;
            std::thread::sleep(FRAGMENT_PAUSE);
        }
        s.write_all(f).map_err(|e| format!("write: {e}"))?;
    }
    s.flush().map_err(|e| format!("write: {e}"))?;
    read_reply(&mut s)
}

/// One request, whole, on a new connection.
pub fn send(
    addr: SocketAddr,
    alpn: Option<&[u8]>,
    method: &str,
    target: &str,
    fields: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Reply, String> {
    exchange(addr, alpn, &[&request(method, target, fields, body)])
}

/// A GET with these fields, on a new connection.
pub fn get(
    addr: SocketAddr,
    alpn: Option<&[u8]>,
    target: &str,
    fields: &[(&str, &str)],
) -> Result<Reply, String> {
    send(addr, alpn, "GET", target, fields, None)
}

/// Reads one final answer (interim ones skipped) from `s`.
pub fn read_reply(s: &mut impl Read) -> Result<Reply, String> {
    let mut wire: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut start = 0;
    let head = loop {
        if let Some(head) = frame::parse_head(&wire[start..]).map_err(|e| e.to_string())? {
            if head.is_interim() {
                start += head.len;
                continue;
            }
            break head;
        }
        let n = read_more(s, &mut wire, &mut buf)?;
        if n == 0 {
            return Err(if wire.is_empty() {
                "the connection closed without an answer".into()
            } else {
                "the connection closed inside the answer's head".into()
            });
        }
    };
    let mut body = BodyReader::new(head.framing(), start + head.len);
    loop {
        if body.advance(&wire).map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if read_more(s, &mut wire, &mut buf)? == 0 {
            body.at_eof(&wire).map_err(|e| e.to_string())?;
            break;
        }
    }
    Ok(Reply {
        status: head.status,
        fields: head.fields,
        body: body.into_content(),
        trailers: Vec::new(),
        version: "1.1",
    })
}

fn read_more(s: &mut impl Read, wire: &mut Vec<u8>, buf: &mut [u8]) -> Result<usize, String> {
    let n = s.read(buf).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("no answer within {IO_TIMEOUT:?}")
        }
        _ => format!("read: {e}"),
    })?;
    if wire.len() + n > MAX_REPLY {
        return Err(format!("the answer is over {MAX_REPLY} bytes"));
    }
    wire.extend_from_slice(&buf[..n]);
    Ok(n)
}

/// Every whole answer in `wire`, in order (pipelined answers read to the connection's close).
pub fn split_replies(wire: &[u8]) -> Result<Vec<Reply>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let Some(head) = frame::parse_head(&wire[at..]).map_err(|e| e.to_string())? else {
            return Err(format!(
                "{} bytes after answer {} are not a whole head",
                wire.len() - at,
                out.len()
            ));
        };
        let mut body = BodyReader::new(head.framing(), at + head.len);
        at = match body.advance(wire).map_err(|e| e.to_string())? {
            Some(end) => end,
            None => return Err(format!("answer {} is cut short", out.len() + 1)),
        };
        if head.is_interim() {
            continue;
        }
        out.push(Reply {
            status: head.status,
            fields: head.fields,
            body: body.into_content(),
            trailers: Vec::new(),
            version: "1.1",
        });
    }
    Ok(out)
}
