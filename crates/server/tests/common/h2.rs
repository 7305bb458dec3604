//! A raw HTTP/2 client for the tests that speak frames themselves (tests/websocket_h2.rs,
//! tests/around_ws.rs; each includes it with `#[path]`, as it needs the `http2` feature's
//! HPACK crate): prior knowledge, SETTINGS exchanged with a 1 MiB stream window and a 16 MiB
//! connection window (so the server's answers are never held by ours), frames written and read
//! whole, header blocks HPACK-coded, and RFC 8441's extended CONNECT.
#![allow(dead_code)] // each test binary uses its part

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use linerate_hpack as hpack;

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const END_STREAM: u8 = 1;
pub const END_HEADERS: u8 = 4;

/// A raw HTTP/2 client connection.
pub struct H2 {
    pub s: TcpStream,
    decoder: hpack::Decoder,
    /// The server's SETTINGS.
    pub settings: Vec<(u16, u32)>,
}

#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl H2 {
    /// Connects (reads time out after `timeout`) and exchanges SETTINGS.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> H2 {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(timeout)).unwrap();
        let mut c = H2 {
            s,
            decoder: hpack::Decoder::new(),
            settings: Vec::new(),
        };
        c.s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        let mut settings = Vec::new();
        settings.extend_from_slice(&4u16.to_be_bytes());
        settings.extend_from_slice(&(1u32 << 20).to_be_bytes());
        c.send(SETTINGS, 0, 0, &settings);
        c.send(WINDOW_UPDATE, 0, 0, &(15u32 << 20).to_be_bytes());
        loop {
            let f = c.read();
            if f.kind == SETTINGS && f.flags & 1 == 0 {
                c.settings = f
                    .payload
                    .chunks_exact(6)
                    .map(|e| {
                        (
                            u16::from_be_bytes([e[0], e[1]]),
                            u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
                        )
                    })
                    .collect();
                break;
            }
        }
        c.send(SETTINGS, 1, 0, &[]);
        c
    }

    pub fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let mut f = Vec::with_capacity(9 + payload.len());
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        self.s.write_all(&f).unwrap();
    }

    pub fn read(&mut self) -> Frame {
        let mut h = [0u8; 9];
        self.s.read_exact(&mut h).unwrap();
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut payload = vec![0u8; len];
        self.s.read_exact(&mut payload).unwrap();
        Frame {
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
            payload,
        }
    }

    /// The next frame on `stream` (others' frames, SETTINGS acks and window updates are
    /// passed over; a GOAWAY fails the test).
    pub fn next_on(&mut self, stream: u32) -> Frame {
        loop {
            let f = self.read();
            assert_ne!(f.kind, GOAWAY, "the connection ended: {f:?}");
            if f.stream == stream && f.kind != WINDOW_UPDATE {
                return f;
            }
        }
    }

    /// Opens a request on `stream` with `fields` (pseudo-headers first).
    pub fn request(&mut self, stream: u32, fields: &[(&str, &str)], end: bool) {
        let mut block = Vec::new();
        for (n, v) in fields {
            hpack::field(&mut block, n.as_bytes(), v.as_bytes());
        }
        let flags = END_HEADERS | if end { END_STREAM } else { 0 };
        self.send(HEADERS, flags, stream, &block);
    }

    /// The answer's fields on `stream`, and whether its HEADERS ended the stream.
    pub fn answer_ends(&mut self, stream: u32) -> (Vec<(String, String)>, bool) {
        let f = self.next_on(stream);
        assert_eq!(f.kind, HEADERS, "{f:?}");
        let mut fields = Vec::new();
        self.decoder
            .decode(&f.payload, |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .unwrap();
        (fields, f.flags & END_STREAM != 0)
    }

    /// The answer's fields on `stream`.
    pub fn answer(&mut self, stream: u32) -> Vec<(String, String)> {
        self.answer_ends(stream).0
    }

    /// Opens a WebSocket on `stream` at `path` (extended CONNECT): the answer's fields.
    pub fn open(
        &mut self,
        stream: u32,
        path: &str,
        extra: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        let mut fields = connect_fields(path);
        fields.extend_from_slice(extra);
        self.request(stream, &fields, false);
        self.answer(stream)
    }

    /// Reads `stream`'s DATA until its END_STREAM: what it carried.
    pub fn body(&mut self, stream: u32) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let f = self.next_on(stream);
            assert_eq!(f.kind, DATA, "{f:?}");
            body.extend_from_slice(&f.payload);
            if f.flags & END_STREAM != 0 {
                return body;
            }
        }
    }
}

/// An extended CONNECT's fields for a WebSocket at `path` (RFC 8441 §4).
pub fn connect_fields(path: &str) -> Vec<(&'static str, &str)> {
    vec![
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("sec-websocket-version", "13"),
    ]
}

/// The `:status` of an answer's fields.
pub fn status(fields: &[(String, String)]) -> &str {
    &fields.iter().find(|(n, _)| n == ":status").unwrap().1
}

/// The value of field `name`, if the answer has it.
pub fn has(fields: &[(String, String)], name: &str) -> Option<String> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}
