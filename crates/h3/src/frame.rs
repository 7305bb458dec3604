//! HTTP/3 frames (RFC 9114 §7) and stream types (§6.2): [`FrameReader`] reads one stream's
//! frames strictly, in whatever pieces the transport delivers, and the `write_*` functions
//! append the frames the server sends.
//!
//! Owns what makes a frame sequence wrong (§4.1, §7.2): on a request stream HEADERS first,
//! DATA only after it, trailers last, no control frame, no PUSH_PROMISE from a client; on a
//! control stream SETTINGS first and once, no DATA or HEADERS; HTTP/2's frame types and
//! setting identifiers refused; a payload longer or shorter than its fields (H3_FRAME_ERROR).
//! Unknown and reserved types are skipped without holding their payloads.

use crate::Code;
use crate::varint;

/// Frame types (RFC 9114 §7.2).
pub mod kind {
    pub const DATA: u64 = 0x00;
    pub const HEADERS: u64 = 0x01;
    pub const CANCEL_PUSH: u64 = 0x03;
    pub const SETTINGS: u64 = 0x04;
    pub const PUSH_PROMISE: u64 = 0x05;
    pub const GOAWAY: u64 = 0x07;
    pub const MAX_PUSH_ID: u64 = 0x0d;
}

/// Setting identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5, RFC 9220 §3, RFC 9297 §2.1.1).
pub mod setting {
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x07;
    pub const ENABLE_CONNECT_PROTOCOL: u64 = 0x08;
    pub const H3_DATAGRAM: u64 = 0x33;
}

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub mod stream_type {
    pub const CONTROL: u64 = 0x00;
    pub const PUSH: u64 = 0x01;
    pub const QPACK_ENCODER: u64 = 0x02;
    pub const QPACK_DECODER: u64 = 0x03;
}

/// The largest control frame (SETTINGS, GOAWAY, MAX_PUSH_ID, CANCEL_PUSH) held to be read: a
/// SETTINGS frame of this size already carries hundreds of settings.
pub const MAX_CONTROL_FRAME: usize = 4096;

/// A reserved ("grease") frame, stream or setting type: 0x1f * N + 0x21 (§7.2.8, §6.2.3).
pub fn is_reserved(v: u64) -> bool {
    v >= 0x21 && (v - 0x21).is_multiple_of(0x1f)
}

/// HTTP/2's frame types with no HTTP/3 meaning (§7.2.8): PRIORITY, PING, WINDOW_UPDATE,
/// CONTINUATION.
fn is_http2_frame(kind: u64) -> bool {
    matches!(kind, 0x02 | 0x06 | 0x08 | 0x09)
}

/// Which stream the frames are on: what they may be, and in what order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A client-initiated bidirectional stream: one request (§4.1).
    Request,
    /// The peer's control stream (§6.2.1).
    Control,
}

/// The peer's SETTINGS (§7.2.4): the ones this server reads; others are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub qpack_max_table_capacity: u64,
    pub qpack_blocked_streams: u64,
    /// `None` where not sent: unlimited.
    pub max_field_section_size: Option<u64>,
    pub enable_connect_protocol: bool,
    pub h3_datagram: bool,
}

impl Settings {
    /// Reads a SETTINGS payload: a repeated identifier or one of HTTP/2's is H3_SETTINGS_ERROR
    /// (§7.2.4, §7.2.4.1), as is a boolean setting other than 0 or 1 (RFC 9220 §3, RFC 9297
    /// §2.1.1); a truncated pair is H3_FRAME_ERROR.
    pub fn parse(mut p: &[u8]) -> Result<Settings, Code> {
        let mut s = Settings::default();
        let mut ids = Vec::new();
        while !p.is_empty() {
            let (id, n) = varint::read(p).ok_or(Code::FrameError)?;
            let (value, m) = varint::read(&p[n..]).ok_or(Code::FrameError)?;
            p = &p[n + m..];
            let flag = || match value {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(Code::SettingsError),
            };
            match id {
                0x02..=0x05 => return Err(Code::SettingsError),
                setting::QPACK_MAX_TABLE_CAPACITY => s.qpack_max_table_capacity = value,
                setting::QPACK_BLOCKED_STREAMS => s.qpack_blocked_streams = value,
                setting::MAX_FIELD_SECTION_SIZE => s.max_field_section_size = Some(value),
                setting::ENABLE_CONNECT_PROTOCOL => s.enable_connect_protocol = flag()?,
                setting::H3_DATAGRAM => s.h3_datagram = flag()?,
                _ => {}
            }
            ids.push(id);
        }
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(Code::SettingsError);
        }
        Ok(s)
    }
}

/// What a [`FrameReader`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A piece of a DATA frame's payload (never empty). A frame comes in as many pieces as
    /// its bytes arrive in.
    Data(&'a [u8]),
    /// A whole HEADERS payload: an encoded field section. The first on a request stream is
    /// the request's, a second its trailers.
    Headers(&'a [u8]),
    /// A HEADERS frame longer than the reader's limit: its payload is skipped unread.
    HeadersTooLarge(u64),
    Settings(Settings),
    Goaway(u64),
    MaxPushId(u64),
    CancelPush(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between frames, or inside a frame's type and length.
    Head,
    /// Inside a DATA payload.
    Data(u64),
    /// Inside a payload that is not read.
    Skip(u64),
    /// Collecting a payload that is read whole.
    Hold { kind: u64, len: usize },
}

/// Where a request stream is in its message (§4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seq {
    Start,
    Body,
    Trailers,
    /// A control stream before its SETTINGS.
    NoSettings,
    Control,
}

/// The longest frame head: a type and a length of eight bytes each.
const MAX_HEAD: usize = 16;

/// One stream's frames, read in any split of its bytes.
pub struct FrameReader {
    state: State,
    seq: Seq,
    /// The largest HEADERS payload held (the encoded field section).
    limit: usize,
    /// A frame head split across reads.
    head: [u8; MAX_HEAD],
    have: usize,
    /// A held payload.
    buf: Vec<u8>,
}

impl FrameReader {
    /// A reader for a stream of `role`, holding HEADERS payloads up to `limit` bytes.
    pub fn new(role: Role, limit: usize) -> FrameReader {
        FrameReader {
            state: State::Head,
            seq: match role {
                Role::Request => Seq::Start,
                Role::Control => Seq::NoSettings,
            },
            limit,
            head: [0; MAX_HEAD],
            have: 0,
            buf: Vec::new(),
        }
    }

    /// Between two frames: the stream may end here (§7.1: a frame cut by the stream's end is
    /// H3_FRAME_ERROR).
    pub fn at_boundary(&self) -> bool {
        self.state == State::Head && self.have == 0
    }

    /// A request stream's HEADERS has been read (its request began).
    pub fn has_request(&self) -> bool {
        matches!(self.seq, Seq::Body | Seq::Trailers)
    }

    /// Reads from `input`: the bytes used and at most one frame. Call it again with the rest
    /// while it uses bytes. An error is a connection error with that code (§4.1, §7).
    pub fn read<'a>(&'a mut self, input: &'a [u8]) -> Result<(usize, Option<Frame<'a>>), Code> {
        match self.state {
            State::Head => self.read_head(input),
            State::Data(left) => {
                let n = left.min(input.len() as u64) as usize;
                self.state = if n as u64 == left {
                    State::Head
                } else {
                    State::Data(left - n as u64)
                };
                Ok((n, (n > 0).then(|| Frame::Data(&input[..n]))))
            }
            State::Skip(left) => {
                let n = left.min(input.len() as u64) as usize;
                self.state = if n as u64 == left {
                    State::Head
                } else {
                    State::Skip(left - n as u64)
                };
                Ok((n, None))
            }
            State::Hold { kind, len } => {
                let n = (len - self.buf.len()).min(input.len());
                self.buf.extend_from_slice(&input[..n]);
                if self.buf.len() < len {
                    return Ok((n, None));
                }
                self.state = State::Head;
                let frame = held(kind, &self.buf)?;
                Ok((n, Some(frame)))
            }
        }
    }

    fn read_head<'a>(&'a mut self, input: &'a [u8]) -> Result<(usize, Option<Frame<'a>>), Code> {
        let parsed = if self.have == 0 {
            parse_head(input)
        } else {
            let take = (MAX_HEAD - self.have).min(input.len());
            let mut all = self.head;
            all[self.have..self.have + take].copy_from_slice(&input[..take]);
            parse_head(&all[..self.have + take]).map(|(k, l, n)| (k, l, n - self.have))
        };
        let Some((kind, len, used)) = parsed else {
            // Only part of the head: keep it (it is shorter than MAX_HEAD, or it would parse).
            self.head[self.have..self.have + input.len()].copy_from_slice(input);
            self.have += input.len();
            return Ok((input.len(), None));
        };
        self.have = 0;
        let frame = self.begin(kind, len)?;
        // A payload read whole that is all here already is read in place, not held.
        if let State::Hold { kind, len } = self.state
            && input.len() - used >= len
        {
            self.state = State::Head;
            return Ok((used + len, Some(held(kind, &input[used..used + len])?)));
        }
        Ok((used, frame))
    }

    /// A frame's head is read: what its payload will be, by the stream's rules.
    fn begin(&mut self, kind: u64, len: u64) -> Result<Option<Frame<'static>>, Code> {
        let control = matches!(self.seq, Seq::NoSettings | Seq::Control);
        if self.seq == Seq::NoSettings && kind != kind::SETTINGS {
            return Err(Code::MissingSettings); // §6.2.1
        }
        match kind {
            kind::DATA | kind::HEADERS | kind::PUSH_PROMISE if control => {
                return Err(Code::FrameUnexpected);
            }
            kind::DATA => {
                if self.seq != Seq::Body {
                    return Err(Code::FrameUnexpected); // before HEADERS or after trailers
                }
                self.state = if len == 0 {
                    State::Head
                } else {
                    State::Data(len)
                };
            }
            kind::HEADERS => {
                self.seq = match self.seq {
                    Seq::Start => Seq::Body,
                    Seq::Body => Seq::Trailers,
                    _ => return Err(Code::FrameUnexpected),
                };
                if len > self.limit as u64 {
                    self.state = if len == 0 {
                        State::Head
                    } else {
                        State::Skip(len)
                    };
                    return Ok(Some(Frame::HeadersTooLarge(len)));
                }
                return self.hold(kind, len as usize);
            }
            // §7.2.5: a client cannot push; §7.2.3, .4, .6, .7: control frames.
            kind::PUSH_PROMISE => return Err(Code::FrameUnexpected),
            kind::CANCEL_PUSH | kind::SETTINGS | kind::GOAWAY | kind::MAX_PUSH_ID => {
                if !control || (kind == kind::SETTINGS && self.seq == Seq::Control) {
                    return Err(Code::FrameUnexpected);
                }
                if len > MAX_CONTROL_FRAME as u64 {
                    return Err(Code::ExcessiveLoad);
                }
                self.seq = Seq::Control;
                return self.hold(kind, len as usize);
            }
            _ if is_http2_frame(kind) => return Err(Code::FrameUnexpected),
            _ => {
                self.state = if len == 0 {
                    State::Head
                } else {
                    State::Skip(len)
                }
            }
        }
        Ok(None)
    }

    fn hold(&mut self, kind: u64, len: usize) -> Result<Option<Frame<'static>>, Code> {
        self.buf.clear();
        if len == 0 {
            // An empty payload: the frame is whole already.
            return match held(kind, &[])? {
                Frame::Headers(_) => Ok(Some(Frame::Headers(&[]))),
                Frame::Settings(s) => Ok(Some(Frame::Settings(s))),
                _ => Err(Code::FrameError), // GOAWAY, MAX_PUSH_ID, CANCEL_PUSH need their id
            };
        }
        self.state = State::Hold { kind, len };
        Ok(None)
    }
}

/// A frame's type and length at the start of `b`, and the head's length.
fn parse_head(b: &[u8]) -> Option<(u64, u64, usize)> {
    let (kind, n) = varint::read(b)?;
    let (len, m) = varint::read(&b[n..])?;
    Some((kind, len, n + m))
}

/// A whole held payload, read.
fn held(kind: u64, p: &[u8]) -> Result<Frame<'_>, Code> {
    let one_id = || match varint::read(p) {
        Some((v, n)) if n == p.len() => Ok(v),
        _ => Err(Code::FrameError), // §7.1: the payload is exactly its fields
    };
    Ok(match kind {
        kind::HEADERS => Frame::Headers(p),
        kind::SETTINGS => Frame::Settings(Settings::parse(p)?),
        kind::GOAWAY => Frame::Goaway(one_id()?),
        kind::MAX_PUSH_ID => Frame::MaxPushId(one_id()?),
        _ => Frame::CancelPush(one_id()?),
    })
}

/// Appends a frame head: its type and payload length.
pub fn write_head(out: &mut Vec<u8>, kind: u64, len: u64) {
    varint::write(out, kind);
    varint::write(out, len);
}

/// Appends a SETTINGS frame with `pairs`.
pub fn write_settings(out: &mut Vec<u8>, pairs: &[(u64, u64)]) {
    let len: usize = pairs
        .iter()
        .map(|&(id, v)| varint::len(id) + varint::len(v))
        .sum();
    write_head(out, kind::SETTINGS, len as u64);
    for &(id, v) in pairs {
        varint::write(out, id);
        varint::write(out, v);
    }
}

/// Appends a GOAWAY frame naming `id`: the first request stream id not served (§5.2).
pub fn write_goaway(out: &mut Vec<u8>, id: u64) {
    write_head(out, kind::GOAWAY, varint::len(id) as u64);
    varint::write(out, id);
}

#[cfg(test)]
mod tests;
