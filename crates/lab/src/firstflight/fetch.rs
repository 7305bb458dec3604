//! One GET over a fresh TCP connection, counted byte for byte: a minimal HTTP/1.1 client on
//! std's `TcpStream` with the framing done by [`super::frame`]; for `https://`, over a TLS
//! session whose records after the handshake are counted too ([`super::tls`]).
//!
//! Every wait is bounded (connect, each read, the whole exchange) and so is the response
//! size, so a slow or endless server cannot hang the tool. The MSS is read with
//! `TCP_MAXSEG` (socket2's `tcp_mss`): on a connected Linux socket that is the kernel's
//! current send MSS, the same number as TCP_INFO's `tcpi_snd_mss`, which neither rustix nor
//! socket2 exposes without unsafe code.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use linerate_load::tls::{TlsChoice, TlsClient, Verify};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::frame::{self, BodyReader, FrameError, Framing, Head};
use super::tls::{self, TlsFlight};
use super::url::HttpUrl;

/// Most bytes one response may take on the wire; beyond this it is not a first view.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Size of each read from the socket.
const READ_CHUNK: usize = 64 * 1024;
/// Sent as `User-Agent`.
pub(super) const USER_AGENT: &str = concat!("linerate-firstflight/", env!("CARGO_PKG_VERSION"));

/// Time limits for one exchange.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For the TCP handshake, per address tried.
    pub connect: Duration,
    /// For the request and the whole response, from the first byte written.
    pub exchange: Duration,
}

/// Why a fetch failed.
#[derive(Debug)]
pub enum FetchError {
    /// The host name did not resolve.
    Resolve { host: String, source: io::Error },
    /// No address accepted the connection (the last error is kept).
    Connect { addr: SocketAddr, source: io::Error },
    /// The server did not answer in time.
    Timeout { url: String, after: Duration },
    /// A read or write failed after connecting (e.g. a reset).
    Io { url: String, source: io::Error },
    /// The response could not be framed.
    Frame { url: String, source: FrameError },
    /// The response was larger than [`MAX_RESPONSE_BYTES`].
    TooLarge { url: String },
    /// https: the TLS client could not be set up, or the handshake failed.
    Tls { url: String, why: String },
    /// `--http3`: the QUIC connection or the HTTP/3 exchange failed.
    Quic { url: String, why: String },
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Resolve { host, source } => write!(f, "cannot resolve {host:?}: {source}"),
            FetchError::Connect { addr, source }
                if source.kind() == io::ErrorKind::ConnectionRefused =>
            {
                write!(
                    f,
                    "connection refused by {addr} (is a server listening there?)"
                )
            }
            FetchError::Connect { addr, source } if is_timeout(source) => {
                write!(f, "connecting to {addr} timed out")
            }
            FetchError::Connect { addr, source } => write!(f, "cannot connect to {addr}: {source}"),
            FetchError::Timeout { url, after } => {
                write!(
                    f,
                    "GET {url}: no complete response within {} s",
                    after.as_secs_f64()
                )
            }
            FetchError::Io { url, source } => write!(f, "GET {url}: {source}"),
            FetchError::Frame { url, source } => write!(f, "GET {url}: {source}"),
            FetchError::Tls { url, why } => write!(f, "GET {url}: TLS: {why}"),
            FetchError::Quic { url, why } => write!(f, "GET {url} over HTTP/3: {why}"),
            FetchError::TooLarge { url } => {
                write!(
                    f,
                    "GET {url}: response larger than {} MiB",
                    MAX_RESPONSE_BYTES >> 20
                )
            }
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Resolve { source, .. }
            | FetchError::Connect { source, .. }
            | FetchError::Io { source, .. } => Some(source),
            FetchError::Frame { source, .. } => Some(source),
            FetchError::Timeout { .. }
            | FetchError::TooLarge { .. }
            | FetchError::Tls { .. }
            | FetchError::Quic { .. } => None,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// One response as it came off the wire.
#[derive(Clone, Debug)]
pub struct Fetched {
    pub status: u16,
    pub fields: Vec<(String, String)>,
    /// Bytes of the final head, plus those of any 1xx interim responses before it.
    pub head_bytes: u64,
    /// Bytes of the body as framed on the wire (chunk sizes, CRLFs and trailers included).
    pub body_bytes: u64,
    pub framing: Framing,
    /// The body with chunk framing removed, content-coding as sent.
    pub content: Vec<u8>,
    /// TCP_MAXSEG of the connection after the response, if the kernel reported it.
    pub mss: Option<u32>,
    /// https: the TLS records the response came in.
    pub tls: Option<TlsFlight>,
}

impl Fetched {
    /// Every byte of the response as TCP carried it: heads and framed body, or for https the
    /// TLS records after the handshake (see [`super::tls`]).
    pub fn wire_bytes(&self) -> u64 {
        match &self.tls {
            Some(t) => t.bytes,
            None => self.head_bytes + self.body_bytes,
        }
    }

    /// The value of the first field named `name` (case-insensitive).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The request bytes for `url`: a browser-like GET that keeps the connection open (no
/// `Connection: close`, which would add a field to the response and change its size).
pub fn request(url: &HttpUrl, accept_encoding: Option<&str>) -> String {
    let mut req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n",
        url.target,
        url.authority()
    );
    if let Some(ae) = accept_encoding {
        req.push_str(&format!("Accept-Encoding: {ae}\r\n"));
    }
    req.push_str("\r\n");
    req
}

/// The connection a fetch reads: plain, or TLS over a counting socket.
enum Conn {
    Plain(TcpStream),
    Tls(Box<tls::Stream>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock.tcp,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => match s.read(buf) {
                // A server that closes without close_notify ends the response like a plain
                // close does; framing then judges whether it was complete.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.write_all(bytes),
            Conn::Tls(s) => s.write_all(bytes).and_then(|()| s.flush()),
        }
    }
}

/// GETs `url` on a new connection and reads exactly one response; an https URL's certificate
/// is checked as `verify` says.
pub fn get(
    url: &HttpUrl,
    accept_encoding: Option<&str>,
    timeouts: Timeouts,
    verify: &Verify,
) -> Result<Fetched, FetchError> {
    let shown = url.to_string();
    let tcp = connect(url, timeouts.connect)?;
    let deadline = Instant::now() + timeouts.exchange;
    let io_err = |source: io::Error| {
        if is_timeout(&source) {
            FetchError::Timeout {
                url: shown.clone(),
                after: timeouts.exchange,
            }
        } else {
            FetchError::Io {
                url: shown.clone(),
                source,
            }
        }
    };
    let frame_err = |source: FrameError| FetchError::Frame {
        url: shown.clone(),
        source,
    };
    tcp.set_write_timeout(Some(timeouts.exchange))
        .map_err(io_err)?;
    let mut stream = if url.tls {
        let tls_err = |why: String| FetchError::Tls {
            url: shown.clone(),
            why,
        };
        let client = TlsClient::new(url.host_for_lookup(), verify.clone(), TlsChoice::default())
            .map_err(|e| tls_err(e.to_string()))?;
        tcp.set_read_timeout(Some(timeouts.exchange))
            .map_err(io_err)?;
        let s = tls::handshake(&client, tcp).map_err(|e| {
            if is_timeout(&e) {
                io_err(e)
            } else {
                tls_err(e.to_string())
            }
        })?;
        Conn::Tls(Box::new(s))
    } else {
        Conn::Plain(tcp)
    };
    stream
        .write_all(request(url, accept_encoding).as_bytes())
        .map_err(io_err)?;

    let mut wire: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut interim = 0usize;
    let mut eof = false;
    let mut read_more = |stream: &mut Conn, wire: &mut Vec<u8>| -> Result<bool, FetchError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io_err(io::ErrorKind::TimedOut.into()));
        }
        stream.tcp().set_read_timeout(Some(left)).map_err(io_err)?;
        let n = loop {
            match stream.read(&mut chunk) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other.map_err(io_err)?,
            }
        };
        if wire.len() + n > MAX_RESPONSE_BYTES {
            return Err(FetchError::TooLarge { url: shown.clone() });
        }
        wire.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    };

    // Heads: skip 1xx interim responses, counting their bytes.
    let head: Head = loop {
        match frame::parse_head(&wire[interim..]).map_err(frame_err)? {
            Some(h) if h.status == 101 => return Err(frame_err(FrameError::UnexpectedUpgrade)),
            Some(h) if h.is_interim() => interim += h.len,
            Some(h) => break h,
            None if eof => return Err(frame_err(FrameError::Truncated { have: wire.len() })),
            None => eof = !read_more(&mut stream, &mut wire)?,
        }
    };
    let framing = head.framing();
    let body_start = interim + head.len;
    let mut body = BodyReader::new(framing, body_start);
    let end = loop {
        if eof {
            break body.at_eof(&wire).map_err(frame_err)?;
        }
        if let Some(end) = body.advance(&wire).map_err(frame_err)? {
            break end;
        }
        eof = !read_more(&mut stream, &mut wire)?;
    };
    let mss = SockRef::from(stream.tcp())
        .tcp_mss()
        .ok()
        .filter(|m| *m > 0);
    let tls = match &stream {
        Conn::Tls(s) => Some(tls::flight(s)),
        Conn::Plain(_) => None,
    };
    Ok(Fetched {
        tls,
        status: head.status,
        fields: head.fields,
        head_bytes: body_start as u64,
        body_bytes: (end - body_start) as u64,
        framing,
        content: body.into_content(),
        mss,
    })
}

/// Connects to the first address of `url`'s host that accepts, within `timeout` each.
fn connect(url: &HttpUrl, timeout: Duration) -> Result<TcpStream, FetchError> {
    let host = url.host_for_lookup();
    let addrs: Vec<SocketAddr> = (host, url.port)
        .to_socket_addrs()
        .map_err(|source| FetchError::Resolve {
            host: host.to_string(),
            source,
        })?
        .collect();
    let mut last = None;
    for addr in addrs {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .map_err(|source| FetchError::Connect { addr, source })?;
        match socket.connect_timeout(&addr.into(), timeout) {
            Ok(()) => {
                // Requests are one small write; no need to wait for Nagle.
                let _ = socket.set_tcp_nodelay(true);
                return Ok(socket.into());
            }
            Err(source) => last = Some(FetchError::Connect { addr, source }),
        }
    }
    Err(last.unwrap_or_else(|| FetchError::Resolve {
        host: host.to_string(),
        source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_table() {
        let url = HttpUrl::parse("http://h:8080/a?b=1").unwrap();
        let rows: &[(Option<&str>, Option<&str>)] = &[
            (Some("gzip, br"), Some("Accept-Encoding: gzip, br\r\n")),
            (None, None),
        ];
        for &(ae, line) in rows {
            let req = request(&url, ae);
            assert!(
                req.starts_with("GET /a?b=1 HTTP/1.1\r\nHost: h:8080\r\n"),
                "{req}"
            );
            assert!(req.ends_with("\r\n\r\n"));
            assert_eq!(req.contains("Accept-Encoding"), line.is_some());
            if let Some(line) = line {
                assert!(req.contains(line));
            }
            assert!(!req.to_ascii_lowercase().contains("connection:"));
        }
    }
}
