//! HTTP/2 as a client with prior knowledge speaks it (RFC 9113): the preface, SETTINGS, the
//! request as HEADERS (HPACK literals, `linerate_hpack::field`) and DATA within the server's
//! flow-control windows, and the response read back from its frames on stream 1.
//!
//! The client opens its own windows to the largest size at once, so the server never waits
//! on it; it acknowledges SETTINGS and PING as a client must. Frames are written with the
//! server's own `h2::frame` helpers.
#![forbid(unsafe_code)]

use linerate_hpack as hpack;

use super::{DEFAULT_HOST, Outgoing, Wire};
use crate::h2::frame::{self, Head, flag, kind, setting};
use crate::testing::client::Protocol;
use crate::testing::error::TestError;
use crate::testing::response::TestResponse;

/// The one stream a test request uses.
const STREAM: u32 = 1;

/// Fields that are HTTP/1.1 connection-level: a client does not send them over HTTP/2
/// (RFC 9113 §8.2.2), and `Host` becomes `:authority`.
const NOT_SENT: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The client end of one HTTP/2 exchange.
pub(crate) struct H2Wire {
    out: Vec<u8>,
    body: Vec<u8>,
    /// Body bytes framed as DATA so far.
    body_sent: usize,
    /// END_STREAM is sent (with HEADERS, or with the last DATA).
    ended: bool,
    /// What the server lets the client send, on the connection and on the stream.
    conn_window: i64,
    stream_window: i64,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE (a change moves the stream's window).
    initial_window: i64,
    inbuf: Vec<u8>,
    decoder: hpack::Decoder,
    /// A header block arriving in HEADERS and CONTINUATION frames, and its END_STREAM.
    block: Option<(Vec<u8>, bool)>,
    status: Option<u16>,
    headers: Vec<(String, String)>,
    data: Vec<u8>,
    /// A header block after the response's head (RFC 9113 §8.1).
    trailers: Vec<(String, String)>,
    done: bool,
    taken: bool,
}

impl H2Wire {
    pub(crate) fn new(req: &Outgoing<'_>) -> H2Wire {
        let mut out = frame::PREFACE.to_vec();
        frame::settings(
            &mut out,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, frame::MAX_WINDOW as u32),
            ],
        );
        frame::window_update(
            &mut out,
            0,
            (frame::MAX_WINDOW - frame::DEFAULT_WINDOW) as u32,
        );
        let mut block = Vec::with_capacity(128);
        let authority = req.header("host").unwrap_or(DEFAULT_HOST);
        hpack::field(&mut block, b":method", req.method.as_bytes());
        hpack::field(&mut block, b":scheme", b"http");
        hpack::field(&mut block, b":authority", authority.as_bytes());
        hpack::field(&mut block, b":path", req.target.as_bytes());
        for (name, value) in req.headers {
            let name = name.to_ascii_lowercase();
            if !NOT_SENT.contains(&name.as_str()) {
                hpack::field(&mut block, name.as_bytes(), value.as_bytes());
            }
        }
        if let Some(n) = req.content_length() {
            hpack::field(&mut block, b"content-length", n.to_string().as_bytes());
        }
        let ended = req.body.is_empty();
        frame::headers(&mut out, STREAM, &block, ended, frame::DEFAULT_MAX_FRAME);
        H2Wire {
            out,
            body: req.body.to_vec(),
            body_sent: 0,
            ended,
            conn_window: frame::DEFAULT_WINDOW,
            stream_window: frame::DEFAULT_WINDOW,
            initial_window: frame::DEFAULT_WINDOW,
            inbuf: Vec::new(),
            decoder: hpack::Decoder::new(),
            block: None,
            status: None,
            headers: Vec::new(),
            data: Vec::new(),
            trailers: Vec::new(),
            done: false,
            taken: false,
        }
    }

    /// Room to send body bytes now.
    fn window(&self) -> usize {
        self.conn_window.min(self.stream_window).max(0) as usize
    }

    /// Frames as much of the body as the windows allow.
    fn frame_body(&mut self) {
        while !self.ended && !self.done {
            let n = (self.body.len() - self.body_sent)
                .min(frame::DEFAULT_MAX_FRAME)
                .min(self.window());
            let last = self.body_sent + n == self.body.len();
            if n == 0 && !last {
                return;
            }
            let flags = if last { flag::END_STREAM } else { 0 };
            frame::head(&mut self.out, n, kind::DATA, flags, STREAM);
            self.out
                .extend_from_slice(&self.body[self.body_sent..self.body_sent + n]);
            self.body_sent += n;
            self.conn_window -= n as i64;
            self.stream_window -= n as i64;
            self.ended = last;
        }
    }

    /// Reads every whole frame `inbuf` holds.
    fn read(&mut self) -> Result<(), TestError> {
        let mut pos = 0;
        while self.inbuf.len() - pos >= frame::HEAD_LEN {
            let h = Head::parse(&self.inbuf[pos..]);
            let end = pos + frame::HEAD_LEN + h.len;
            if end > self.inbuf.len() {
                break;
            }
            let payload = self.inbuf[pos + frame::HEAD_LEN..end].to_vec();
            pos = end;
            self.frame(h, &payload)?;
        }
        self.inbuf.drain(..pos);
        Ok(())
    }

    fn frame(&mut self, h: Head, p: &[u8]) -> Result<(), TestError> {
        let u32_at = |i: usize| -> Result<u32, TestError> {
            p.get(i..i + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or(TestError::Frame("payload too short"))
        };
        match h.kind {
            kind::SETTINGS if h.has(flag::ACK) => {}
            kind::SETTINGS => {
                for s in p.chunks_exact(6) {
                    let id = u16::from_be_bytes([s[0], s[1]]);
                    let value = i64::from(u32::from_be_bytes([s[2], s[3], s[4], s[5]]));
                    if id == setting::INITIAL_WINDOW_SIZE {
                        // RFC 9113 §6.9.2: the change applies to open streams' windows.
                        self.stream_window += value - self.initial_window;
                        self.initial_window = value;
                    }
                }
                frame::settings_ack(&mut self.out);
            }
            kind::PING if !h.has(flag::ACK) => frame::ping_ack(&mut self.out, p),
            kind::WINDOW_UPDATE => {
                let increment = i64::from(u32_at(0)? & 0x7fff_ffff);
                match h.stream {
                    0 => self.conn_window += increment,
                    STREAM => self.stream_window += increment,
                    _ => {}
                }
            }
            kind::HEADERS if h.stream == STREAM => {
                let mut block = unpad(&h, p)?;
                if h.has(flag::PRIORITY) {
                    block = block.get(5..).ok_or(TestError::Frame("short PRIORITY"))?;
                }
                self.block = Some((block.to_vec(), h.has(flag::END_STREAM)));
                if h.has(flag::END_HEADERS) {
                    self.end_block()?;
                }
            }
            kind::CONTINUATION if h.stream == STREAM => {
                let Some((block, _)) = self.block.as_mut() else {
                    return Err(TestError::Frame("CONTINUATION without HEADERS"));
                };
                block.extend_from_slice(p);
                if h.has(flag::END_HEADERS) {
                    self.end_block()?;
                }
            }
            kind::DATA if h.stream == STREAM => {
                if self.status.is_none() {
                    return Err(TestError::Frame("DATA before the response's HEADERS"));
                }
                self.data.extend_from_slice(unpad(&h, p)?);
                if h.has(flag::END_STREAM) {
                    self.done = true;
                }
            }
            kind::RST_STREAM if h.stream == STREAM && !self.done => {
                return Err(TestError::StreamReset(u32_at(0)?));
            }
            kind::GOAWAY if !self.done => {
                let (last, code) = (u32_at(0)? & 0x7fff_ffff, u32_at(4)?);
                if code != 0 || last < STREAM {
                    return Err(TestError::GoAway(code));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A whole header block: the response's head, an interim 1xx (skipped) or trailers.
    fn end_block(&mut self) -> Result<(), TestError> {
        let Some((block, end_stream)) = self.block.take() else {
            return Ok(());
        };
        let mut fields = Vec::new();
        self.decoder
            .decode(&block, |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .map_err(|_| TestError::Frame("header block does not decode (HPACK)"))?;
        if self.status.is_none() {
            let status = fields
                .iter()
                .find(|(n, _)| n == ":status")
                .and_then(|(_, v)| v.parse::<u16>().ok())
                .ok_or(TestError::Frame("response without :status"))?;
            if (100..200).contains(&status) && !end_stream {
                return Ok(());
            }
            self.status = Some(status);
            self.headers = fields.into_iter().filter(|(n, _)| n != ":status").collect();
        } else {
            // RFC 9113 §8.1: trailers end the stream and carry no pseudo-header.
            if !end_stream || fields.iter().any(|(n, _)| n.starts_with(':')) {
                return Err(TestError::Frame("malformed trailers"));
            }
            self.trailers = fields;
        }
        if end_stream {
            self.done = true;
        }
        Ok(())
    }
}

/// A DATA or HEADERS payload without its padding (RFC 9113 §6.1).
fn unpad<'p>(h: &Head, p: &'p [u8]) -> Result<&'p [u8], TestError> {
    if !h.has(flag::PADDED) {
        return Ok(p);
    }
    let pad = *p.first().ok_or(TestError::Frame("empty padded frame"))? as usize;
    p.get(1..p.len().saturating_sub(pad))
        .filter(|_| pad < p.len())
        .ok_or(TestError::Frame("padding longer than the frame"))
}

impl Wire for H2Wire {
    fn outgoing(&mut self) -> Vec<u8> {
        self.frame_body();
        std::mem::take(&mut self.out)
    }

    fn has_output(&self) -> bool {
        !self.out.is_empty() || (!self.ended && !self.done && self.window() > 0)
    }

    fn incoming(&mut self, bytes: &[u8]) -> Result<(), TestError> {
        self.inbuf.extend_from_slice(bytes);
        self.read()
    }

    fn closed(&mut self, reset: bool) -> Result<(), TestError> {
        if self.done {
            Ok(())
        } else {
            Err(TestError::Closed { reset })
        }
    }

    fn response(&mut self) -> Option<TestResponse> {
        if !self.done || self.taken {
            return None;
        }
        self.taken = true;
        Some(TestResponse {
            protocol: Protocol::Http2,
            status: self.status?,
            headers: std::mem::take(&mut self.headers),
            body: std::mem::take(&mut self.data),
            trailers: std::mem::take(&mut self.trailers),
        })
    }
}
