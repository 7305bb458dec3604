//! The https side of a fetch: the TLS handshake (through `linerate_load`'s rustls client, so
//! verification means what it means for `linerate load`: webpki roots, `--cacert` or
//! `--insecure`), then the bytes the server sends after it, counted on the wire.
//!
//! What is counted: every byte read from the socket once the handshake is done, and the TLS
//! records they make up (5-byte header + payload each). That is the response as TCP carries
//! it — the HTTP bytes plus each record's header, tag and padding — and, in TLS 1.3, any
//! post-handshake message the server sends in the same flight (session tickets), which are
//! records too. The handshake's own flight is not counted: the check is about the response.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use linerate_load::tls::TlsClient;
use rustls::{ClientConnection, StreamOwned};

/// Bytes of a TLS record header (type, version, length).
const RECORD_HEADER: usize = 5;

/// What the server sent after the handshake, as TLS.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TlsFlight {
    /// Bytes read from the socket after the handshake.
    pub bytes: u64,
    /// TLS records those bytes held (one partly read at the end counts).
    pub records: u64,
    /// `TLSv1_3`, `TLSv1_2`.
    pub version: String,
    pub cipher: String,
}

/// A socket that counts what is read from it, record by record, once `on`.
#[derive(Debug)]
pub struct Counting {
    pub tcp: TcpStream,
    on: bool,
    bytes: u64,
    records: u64,
    header: [u8; RECORD_HEADER],
    have: usize,
    /// Payload bytes of the current record still to come.
    left: usize,
}

impl Counting {
    pub fn new(tcp: TcpStream) -> Counting {
        Counting {
            tcp,
            on: false,
            bytes: 0,
            records: 0,
            header: [0; RECORD_HEADER],
            have: 0,
            left: 0,
        }
    }

    /// Feeds bytes read off the wire through the record framing.
    pub fn count(&mut self, mut data: &[u8]) {
        self.bytes += data.len() as u64;
        while !data.is_empty() {
            if self.left > 0 {
                let k = self.left.min(data.len());
                self.left -= k;
                data = &data[k..];
                continue;
            }
            let k = (RECORD_HEADER - self.have).min(data.len());
            self.header[self.have..self.have + k].copy_from_slice(&data[..k]);
            self.have += k;
            data = &data[k..];
            if self.have == RECORD_HEADER {
                self.records += 1;
                self.left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.have = 0;
            }
        }
    }
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        if self.on {
            self.count(&buf[..n]);
        }
        Ok(n)
    }
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

/// A TLS session over a counting socket.
pub type Stream = StreamOwned<ClientConnection, Counting>;

/// Does the handshake on `tcp` (whose timeouts are set), then starts counting.
pub fn handshake(client: &TlsClient, tcp: TcpStream) -> io::Result<Stream> {
    let mut conn = client.session().map_err(io::Error::other)?;
    let mut sock = Counting::new(tcp);
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    sock.on = true;
    Ok(StreamOwned::new(conn, sock))
}

/// What was counted on `s` so far, with the session's version and cipher.
pub fn flight(s: &Stream) -> TlsFlight {
    TlsFlight {
        bytes: s.sock.bytes,
        records: s.sock.records,
        version: s
            .conn
            .protocol_version()
            .map_or("unknown".into(), |v| format!("{v:?}")),
        cipher: s
            .conn
            .negotiated_cipher_suite()
            .map_or("unknown".into(), |c| format!("{:?}", c.suite())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_counted_across_any_split() {
        // Two records: 3 bytes of payload, then 0x0102 = 258 bytes.
        let mut wire = vec![23, 3, 3, 0, 3, 1, 2, 3, 23, 3, 3, 1, 2];
        wire.extend(std::iter::repeat_n(0u8, 258));
        for step in [1, 2, 5, 7, wire.len()] {
            let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let s = TcpStream::connect(tcp.local_addr().unwrap()).unwrap();
            let mut c = Counting::new(s);
            for piece in wire.chunks(step) {
                c.count(piece);
            }
            assert_eq!((c.records, c.bytes), (2, wire.len() as u64), "step {step}");
            assert_eq!((c.have, c.left), (0, 0), "ends on a record boundary");
        }
    }
}
