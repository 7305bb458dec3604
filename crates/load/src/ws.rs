//! `--ws`: the client side of a WebSocket echo run (RFC 6455), sans I/O. Before the run it
//! encodes the upgrade request and the one message every connection sends, masked once with a
//! per-run key, so sending k messages is one `send` of a prefix, as for HTTP/1.1. During the
//! run it checks the server's 101 (status, `Upgrade`, `Connection`, `Sec-WebSocket-Accept`)
//! and counts the server's frames into messages without copying them: a message is complete
//! at its final frame, and its length must be the length sent. The server's frames are read
//! as strictly as a client must (§5.1, §5.2): unmasked, no reserved bits (no extension is
//! offered), known opcodes, whole control frames of at most 125 bytes, and continuations only
//! inside a message. Pings are answered with pongs; a close ends the connection.
#![forbid(unsafe_code)]

use std::fmt;

use base64::Engine as _;

pub use linerate_ws::accept::accept;

/// The longest 101 response head accepted.
pub const MAX_UPGRADE_HEAD: usize = 8 * 1024;
/// The largest message `--message-size` may ask for.
pub const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
/// RFC 6455 §5.5: a control frame's payload.
const MAX_CONTROL_PAYLOAD: usize = 125;

/// What every connection of a `--ws` run sends, encoded once.
#[derive(Clone, Debug)]
pub struct WsRun {
    /// The upgrade request.
    pub upgrade: Vec<u8>,
    /// The `Sec-WebSocket-Accept` value the 101 must carry.
    pub accept: String,
    /// The payload length of each message (an echo must have the same).
    pub message_len: u64,
    /// Messages are binary (otherwise text).
    pub binary: bool,
}

impl WsRun {
    /// Encodes the upgrade request for `path` (with the user's `headers`) and one masked
    /// message of `size` bytes. `nonce` makes the key and `mask` the masking key: both random
    /// per run (§4.1, §5.3), chosen by the caller.
    pub fn new(
        path: &str,
        authority: &str,
        headers: &[(String, String)],
        size: usize,
        binary: bool,
        nonce: [u8; 16],
        mask: [u8; 4],
    ) -> (WsRun, Vec<u8>) {
        let key = base64::engine::general_purpose::STANDARD.encode(nonce);
        let mut upgrade = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        );
        for (n, v) in headers {
            upgrade.push_str(&format!("{n}: {v}\r\n"));
        }
        upgrade.push_str("\r\n");
        let run = WsRun {
            upgrade: upgrade.into_bytes(),
            accept: accept(key.as_bytes()),
            message_len: size as u64,
            binary,
        };
        let message = masked_frame(if binary { 0x2 } else { 0x1 }, &payload(size), mask);
        (run, message)
    }
}

/// `size` bytes of printable ASCII (valid UTF-8 for text messages).
fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// One final frame with `opcode`, masked with `mask` (§5.2, §5.3).
pub fn masked_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode);
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= 0xffff {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// Why a server's WebSocket bytes were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsError {
    /// The upgrade was answered with another status (the code, 0 if the line was unreadable).
    Refused(u16),
    /// A 101 without `Upgrade: websocket`, `Connection: upgrade` or the right accept value, or
    /// with an extension or subprotocol nobody asked for (the header at fault).
    BadUpgrade(&'static str),
    /// The 101's head is longer than `MAX_UPGRADE_HEAD`.
    HeadTooLong,
    /// A frame a client must refuse (what is wrong with it).
    Frame(&'static str),
    /// An echoed message whose length is not the length sent.
    Length { got: u64, sent: u64 },
}

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WsError::Refused(0) => f.write_str("the upgrade was not answered with HTTP/1.1"),
            WsError::Refused(s) => write!(f, "the server refused the WebSocket upgrade: {s}"),
            WsError::BadUpgrade(h) => write!(f, "the server's 101 is not a WebSocket upgrade: {h}"),
            WsError::HeadTooLong => write!(f, "the 101's head is over {MAX_UPGRADE_HEAD} bytes"),
            WsError::Frame(why) => write!(f, "the server sent a bad frame: {why}"),
            WsError::Length { got, sent } => {
                write!(f, "an echo of {got} bytes answered a message of {sent}")
            }
        }
    }
}

impl std::error::Error for WsError {}

/// Checks a complete 101 head (through its blank line) against `run`.
pub fn check_upgrade(head: &[u8], run: &WsRun) -> Result<(), WsError> {
    let text = std::str::from_utf8(head).map_err(|_| WsError::Refused(0))?;
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("");
    let code = status
        .strip_prefix("HTTP/1.1 ")
        .and_then(|s| s.get(..3))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or(WsError::Refused(0))?;
    if code != 101 {
        return Err(WsError::Refused(code));
    }
    let (mut upgrade, mut connection, mut accept) = (false, false, false);
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(WsError::BadUpgrade("a header line without a colon"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("upgrade") {
            upgrade |= value.eq_ignore_ascii_case("websocket");
        } else if name.eq_ignore_ascii_case("connection") {
            connection |= value
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
        } else if name.eq_ignore_ascii_case("sec-websocket-accept") {
            if value != run.accept {
                return Err(WsError::BadUpgrade("Sec-WebSocket-Accept is wrong"));
            }
            accept = true;
        } else if name.eq_ignore_ascii_case("sec-websocket-extensions") {
            // §4.1: a client fails the connection on an extension it did not offer.
            return Err(WsError::BadUpgrade("an extension was not offered"));
        } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
            return Err(WsError::BadUpgrade("a subprotocol was not offered"));
        }
    }
    match (upgrade, connection, accept) {
        (false, _, _) => Err(WsError::BadUpgrade("no Upgrade: websocket")),
        (_, false, _) => Err(WsError::BadUpgrade("no Connection: upgrade")),
        (_, _, false) => Err(WsError::BadUpgrade("no Sec-WebSocket-Accept")),
        _ => Ok(()),
    }
}

/// What `Reader::feed` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole message has arrived.
    Message,
    /// A ping: its pong (masked, ready to send) is the payload.
    Pong(Vec<u8>),
    /// The server closed (the client's close, ready to send, echoes its code).
    Close(Vec<u8>),
}

/// Counts the server's frames into messages; keeps only a header's bytes across reads (at
/// most 10: a server's header has no mask) and a control frame's payload (at most 125).
#[derive(Clone, Debug, Default)]
pub struct Reader {
    /// A header's bytes so far.
    head: [u8; 10],
    head_n: usize,
    /// Inside a frame's payload (after its header).
    in_payload: bool,
    /// Payload bytes of the current frame still to skip (data) or collect (control).
    left: u64,
    /// The current frame is a control frame (its opcode), whose payload is collected.
    control: Option<u8>,
    control_payload: Vec<u8>,
    /// The current frame ends its message.
    fin: bool,
    /// Inside a message (between its first and its final frame).
    in_message: bool,
    /// Payload bytes of the message so far.
    message_len: u64,
}

impl Reader {
    /// Forgets everything (the connection is reopened).
    pub fn reset(&mut self) {
        let mut kept = std::mem::take(&mut self.control_payload);
        kept.clear();
        *self = Reader {
            control_payload: kept,
            ..Reader::default()
        };
    }

    /// Reads from `data` up to the first event; returns the bytes used and the event, if any.
    /// `run` gives the length every message must have; `mask` masks the answers.
    pub fn feed(
        &mut self,
        data: &[u8],
        run: &WsRun,
        mask: [u8; 4],
    ) -> Result<(usize, Option<Event>), WsError> {
        let mut used = 0;
        loop {
            if self.in_payload {
                let take = self.left.min((data.len() - used) as u64) as usize;
                if self.control.is_some() {
                    self.control_payload
                        .extend_from_slice(&data[used..used + take]);
                }
                self.left -= take as u64;
                used += take;
                if self.left > 0 {
                    return Ok((used, None));
                }
                self.in_payload = false;
                if let Some(ev) = self.frame_done(run, mask)? {
                    return Ok((used, Some(ev)));
                }
                continue;
            }
            if used == data.len() {
                return Ok((used, None));
            }
            let need = head_len(&self.head[..self.head_n]).unwrap_or(2);
            let take = (need - self.head_n).min(data.len() - used);
            self.head[self.head_n..self.head_n + take].copy_from_slice(&data[used..used + take]);
            self.head_n += take;
            used += take;
            let need = head_len(&self.head[..self.head_n]).unwrap_or(2);
            if self.head_n < need {
                continue;
            }
            self.head_n = 0;
            let head = self.head;
            self.header(&head[..need])?;
        }
    }

    /// Takes in one whole header.
    fn header(&mut self, h: &[u8]) -> Result<(), WsError> {
        let (b0, b1) = (h[0], h[1]);
        if b0 & 0x70 != 0 {
            return Err(WsError::Frame("a reserved bit is set"));
        }
        if b1 & 0x80 != 0 {
            return Err(WsError::Frame("it is masked"));
        }
        let len = match b1 & 0x7f {
            126 => u64::from(u16::from_be_bytes([h[2], h[3]])),
            127 => u64::from_be_bytes(h[2..10].try_into().expect("8 bytes")),
            n => u64::from(n),
        };
        let fin = b0 & 0x80 != 0;
        let opcode = b0 & 0x0f;
        match opcode {
            0x0 if !self.in_message => {
                return Err(WsError::Frame("a continuation outside a message"));
            }
            0x1 | 0x2 if self.in_message => {
                return Err(WsError::Frame("a new message inside a fragmented one"));
            }
            0x0..=0x2 => {
                self.control = None;
                self.in_message = true;
                self.message_len += len;
            }
            0x8..=0xa => {
                if !fin || len > MAX_CONTROL_PAYLOAD as u64 {
                    return Err(WsError::Frame(
                        "a control frame is fragmented or over 125 bytes",
                    ));
                }
                self.control = Some(opcode);
                self.control_payload.clear();
            }
            _ => return Err(WsError::Frame("an unknown opcode")),
        }
        self.fin = fin;
        self.left = len;
        self.in_payload = true;
        Ok(())
    }

    /// The current frame's payload is all in.
    fn frame_done(&mut self, run: &WsRun, mask: [u8; 4]) -> Result<Option<Event>, WsError> {
        match self.control.take() {
            Some(0x9) => Ok(Some(Event::Pong(masked_frame(
                0xa,
                &self.control_payload,
                mask,
            )))),
            Some(0x8) => {
                let code = self.control_payload.get(..2).unwrap_or(&[]).to_vec();
                Ok(Some(Event::Close(masked_frame(0x8, &code, mask))))
            }
            Some(_) => Ok(None),
            None if self.fin => {
                let got = std::mem::take(&mut self.message_len);
                self.in_message = false;
                if got != run.message_len {
                    return Err(WsError::Length {
                        got,
                        sent: run.message_len,
                    });
                }
                Ok(Some(Event::Message))
            }
            None => Ok(None),
        }
    }
}

/// The length of the header that starts `b`, once its first two bytes are there.
fn head_len(b: &[u8]) -> Option<usize> {
    let second = *b.get(1)?;
    Some(match second & 0x7f {
        126 => 4,
        127 => 10,
        _ => 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK: [u8; 4] = [1, 2, 3, 4];

    fn run(size: usize) -> WsRun {
        WsRun::new("/ws", "h:1", &[], size, false, *b"the sample nonce", MASK).0
    }

    /// Feeds `data` in pieces of `step` bytes and collects the events.
    fn events(data: &[u8], size: usize, step: usize) -> Result<Vec<Event>, WsError> {
        let (r, mut reader, mut out) = (run(size), Reader::default(), Vec::new());
        for piece in data.chunks(step) {
            let mut at = 0;
            loop {
                let (n, ev) = reader.feed(&piece[at..], &r, MASK)?;
                at += n;
                match ev {
                    Some(e) => out.push(e),
                    None if at == piece.len() => break,
                    None => panic!("stopped early at {at} of {}", piece.len()),
                }
            }
        }
        Ok(out)
    }

    #[test]
    fn the_request_and_the_message_are_encoded_once() {
        let h = vec![("X-A".to_string(), "1".to_string())];
        let (r, msg) = WsRun::new("/ws", "h:1", &h, 5, false, *b"the sample nonce", MASK);
        assert_eq!(
            String::from_utf8(r.upgrade).unwrap(),
            "GET /ws HTTP/1.1\r\nHost: h:1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-A: 1\r\n\r\n"
        );
        assert_eq!(r.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        // "abcde" masked with 1 2 3 4.
        assert_eq!(
            msg,
            [
                0x81,
                0x85,
                1,
                2,
                3,
                4,
                b'a' ^ 1,
                b'b' ^ 2,
                b'c' ^ 3,
                b'd' ^ 4,
                b'e' ^ 1
            ]
        );
        let (_, big) = WsRun::new("/", "h", &[], 4096, true, [0; 16], MASK);
        assert_eq!(big[..4], [0x82, 0x80 | 126, 0x10, 0x00]);
        assert_eq!(big.len(), 4 + 4 + 4096);
        let (_, huge) = WsRun::new("/", "h", &[], 70_000, true, [0; 16], MASK);
        assert_eq!(huge[..2], [0x82, 0x80 | 127]);
        assert_eq!(huge[2..10], 70_000u64.to_be_bytes());
    }

    #[test]
    fn upgrade_answers_table() {
        let ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        let cases: &[(&str, Result<(), WsError>)] = &[
            (ok, Ok(())),
            (
                "HTTP/1.1 101 x\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                Ok(()),
            ),
            ("HTTP/1.1 404 Not Found\r\n\r\n", Err(WsError::Refused(404))),
            (
                "HTTP/1.1 426 Upgrade Required\r\n\r\n",
                Err(WsError::Refused(426)),
            ),
            ("junk\r\n\r\n", Err(WsError::Refused(0))),
            (
                "HTTP/1.1 101 x\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                Err(WsError::BadUpgrade("no Upgrade: websocket")),
            ),
            (
                "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                Err(WsError::BadUpgrade("no Connection: upgrade")),
            ),
            (
                "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                Err(WsError::BadUpgrade("no Sec-WebSocket-Accept")),
            ),
            (
                "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n",
                Err(WsError::BadUpgrade("Sec-WebSocket-Accept is wrong")),
            ),
            (
                "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
                Err(WsError::BadUpgrade("an extension was not offered")),
            ),
        ];
        let r = run(5);
        for (head, want) in cases {
            assert_eq!(&check_upgrade(head.as_bytes(), &r), want, "{head:?}");
        }
    }

    #[test]
    fn frames_split_anywhere_give_the_same_events() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&[0x81, 5]);
        stream.extend_from_slice(b"hello");
        // Fragmented, with a ping between the pieces.
        stream.extend_from_slice(&[
            0x01, 2, b'h', b'e', 0x89, 1, b'p', 0x80, 3, b'l', b'l', b'o',
        ]);
        // An empty continuation that ends a message started by a whole-length frame.
        stream.extend_from_slice(&[0x02, 5, 1, 2, 3, 4, 5, 0x80, 0]);
        stream.extend_from_slice(&[0x8a, 0]); // an unsolicited pong: ignored
        stream.extend_from_slice(&[0x88, 2, 0x03, 0xe8]);
        let want = vec![
            Event::Message,
            Event::Pong(masked_frame(0xa, b"p", MASK)),
            Event::Message,
            Event::Message,
            Event::Close(masked_frame(0x8, &[0x03, 0xe8], MASK)),
        ];
        for step in 1..=stream.len() {
            assert_eq!(events(&stream, 5, step).unwrap(), want, "pieces of {step}");
        }
        let mut long = vec![0x82, 126, 0x10, 0x00];
        long.extend(std::iter::repeat_n(7u8, 4096));
        for step in [1, 3, 1000, 4100] {
            assert_eq!(events(&long, 4096, step).unwrap(), vec![Event::Message]);
        }
    }

    #[test]
    fn frames_a_client_must_refuse() {
        let cases: &[(&[u8], WsError)] = &[
            (&[0xc1, 0], WsError::Frame("a reserved bit is set")),
            (&[0x81, 0x80, 0, 0, 0, 0], WsError::Frame("it is masked")),
            (
                &[0x80, 0],
                WsError::Frame("a continuation outside a message"),
            ),
            (
                &[0x01, 1, b'a', 0x81, 0],
                WsError::Frame("a new message inside a fragmented one"),
            ),
            (
                &[0x09, 0],
                WsError::Frame("a control frame is fragmented or over 125 bytes"),
            ),
            (
                &[0x89, 126, 0, 126],
                WsError::Frame("a control frame is fragmented or over 125 bytes"),
            ),
            (&[0x83, 0], WsError::Frame("an unknown opcode")),
            (&[0x81, 2, b'a', b'b'], WsError::Length { got: 2, sent: 5 }),
        ];
        for (bytes, want) in cases {
            assert_eq!(
                events(bytes, 5, bytes.len()).as_ref(),
                Err(want),
                "{bytes:?}"
            );
        }
    }
}
