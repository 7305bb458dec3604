//! Length-prefixed messages (PROTOCOL-HTTP2.md: `Length-Prefixed-Message → Compressed-Flag
//! Message-Length Message`): [`Decoder`], fed a body's pieces split anywhere, gives whole
//! messages, borrowing the input when a message lies whole in one piece; [`encode`] and
//! [`encode_raw`] write the prefix and message into the caller's buffer. No decompression
//! (that is [`crate::compress`]) and no protobuf decoding: a message is opaque bytes here.

use std::fmt;

use crate::code::Code;

/// The prefix: a flag byte and a 4-byte big-endian length.
pub const PREFIX_LEN: usize = 5;

/// The default limit on a received message, 4 MiB, as grpc-go's and grpc-core's servers
/// (`MaxRecvMsgSize`).
pub const DEFAULT_MAX_MESSAGE: usize = 4 << 20;

/// A body that breaks the framing; each variant names the status the call ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// A prefix announced a message longer than the limit: RESOURCE_EXHAUSTED (grpc-go:
    /// "received message larger than max"), judged on the prefix before a byte is held.
    TooLarge {
        /// The announced length.
        len: u32,
        /// The limit.
        max: usize,
    },
    /// Compressed-Flag 1 on a call without a `grpc-encoding` (or with `identity`): INTERNAL
    /// (PROTOCOL-HTTP2.md: "If the Message-Encoding header is omitted then the
    /// Compressed-Flag must be 0"; grpc-go answers INTERNAL).
    CompressedWithoutEncoding,
    /// A flag byte other than 0 or 1: INTERNAL (grpc-go: "received unexpected payload format").
    BadFlag(u8),
    /// The body ended inside a prefix or a message: INTERNAL (grpc-go turns the early EOF,
    /// `io.ErrUnexpectedEOF`, into `codes.Internal`).
    Truncated,
}

impl FrameError {
    /// The status the call ends with.
    pub const fn code(self) -> Code {
        match self {
            FrameError::TooLarge { .. } => Code::ResourceExhausted,
            FrameError::CompressedWithoutEncoding
            | FrameError::BadFlag(_)
            | FrameError::Truncated => Code::Internal,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(f, "received message larger than max ({len} vs. {max})")
            }
            FrameError::CompressedWithoutEncoding => {
                f.write_str("compressed flag set without a grpc-encoding")
            }
            FrameError::BadFlag(b) => write!(f, "unexpected message flag {b}"),
            FrameError::Truncated => f.write_str("the body ended inside a message"),
        }
    }
}

impl std::error::Error for FrameError {}

/// One whole message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// Compressed-Flag 1: `data` is compressed with the call's `grpc-encoding`.
    pub compressed: bool,
    /// A gRPC-Web trailer frame (flag bit 0x80), only from [`Decoder::web_answer`]: `data` is
    /// the trailer block ([`crate::web::trailer_fields`]).
    pub trailers: bool,
    /// The message's bytes, without the prefix.
    pub data: &'a [u8],
}

/// Where the decoder is in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between messages, or inside a prefix: `have` bytes of it in `prefix`.
    Prefix { have: u8 },
    /// Inside a message of `len` bytes, some of it in `held`.
    Body {
        compressed: bool,
        trailers: bool,
        len: usize,
    },
    /// A whole message was given from `held`; it is emptied on the next call.
    Given,
}

/// A call's incoming messages, sans I/O: feed the body's pieces in order to [`Decoder::next`]
/// until it gives `None`, then the next piece; at the body's end, [`Decoder::finish`].
///
/// A message that lies whole in one piece is given borrowed from it (the unary case: no copy,
/// no allocation); one split across pieces is collected in a buffer that grows with the bytes
/// received, never with what a prefix announces (a 5-byte prefix cannot make it reserve
/// 4 MiB), and that is kept for the next message.
#[derive(Debug)]
pub struct Decoder {
    state: State,
    prefix: [u8; PREFIX_LEN],
    held: Vec<u8>,
    max_message: usize,
    compression: bool,
    /// Flag bit 0x80 marks gRPC-Web's trailer frame (reading an answer, not a request).
    web_trailers: bool,
}

impl Decoder {
    /// A decoder refusing messages over `max_message` bytes; `compression` says whether the
    /// call has a `grpc-encoding` other than identity (so Compressed-Flag 1 is allowed).
    pub fn new(max_message: usize, compression: bool) -> Decoder {
        Decoder {
            state: State::Prefix { have: 0 },
            prefix: [0; PREFIX_LEN],
            held: Vec::new(),
            max_message,
            compression,
            web_trailers: false,
        }
    }

    /// A decoder for a gRPC-Web answer's body, as a client or a translating proxy reads it:
    /// as [`Decoder::new`], and a frame flagged 0x80 (0x81: compressed) is the trailer frame
    /// (PROTOCOL-WEB.md "Message framing"), given with [`Message::trailers`] set.
    pub fn web_answer(max_message: usize, compression: bool) -> Decoder {
        Decoder {
            web_trailers: true,
            ..Decoder::new(max_message, compression)
        }
    }

    /// The next whole message from `input`, advancing `input` past what it used. `Ok(None)`:
    /// `input` is used up and the message goes on in the next piece. An error is final.
    pub fn next<'s, 'i: 's>(
        &'s mut self,
        input: &mut &'i [u8],
    ) -> Result<Option<Message<'s>>, FrameError> {
        if self.state == State::Given {
            self.held.clear();
            self.state = State::Prefix { have: 0 };
        }
        if let State::Prefix { have: 0 } = self.state
            && let Some((head, rest)) = input.split_first_chunk::<PREFIX_LEN>()
        {
            // The fast path: a prefix whole in this piece, read in place.
            let (compressed, trailers, len) = self.judge(head)?;
            if let Some((data, after)) = rest.split_at_checked(len) {
                *input = after;
                return Ok(Some(Message {
                    compressed,
                    trailers,
                    data,
                }));
            }
            *input = rest;
            self.state = State::Body {
                compressed,
                trailers,
                len,
            };
        }
        if let State::Prefix { have } = self.state {
            let have = usize::from(have);
            let take = (PREFIX_LEN - have).min(input.len());
            self.prefix[have..have + take].copy_from_slice(&input[..take]);
            *input = &input[take..];
            if have + take < PREFIX_LEN {
                self.state = State::Prefix {
                    have: (have + take) as u8,
                };
                return Ok(None);
            }
            let prefix = self.prefix;
            let (compressed, trailers, len) = self.judge(&prefix)?;
            self.state = State::Body {
                compressed,
                trailers,
                len,
            };
        }
        let State::Body {
            compressed,
            trailers,
            len,
        } = self.state
        else {
            unreachable!("Given and Prefix are handled above");
        };
        let take = (len - self.held.len()).min(input.len());
        self.held.extend_from_slice(&input[..take]);
        *input = &input[take..];
        if self.held.len() < len {
            return Ok(None);
        }
        self.state = State::Given;
        Ok(Some(Message {
            compressed,
            trailers,
            data: &self.held,
        }))
    }

    /// The body has ended: an error if it ended inside a prefix or a message.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.state {
            State::Prefix { have: 0 } | State::Given => Ok(()),
            State::Prefix { .. } | State::Body { .. } => Err(FrameError::Truncated),
        }
    }

    /// Whether the decoder is between messages (nothing of a next one received).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Prefix { have: 0 } | State::Given)
    }

    /// The prefix's (compressed, trailers, length), or why the body is refused.
    fn judge(&self, prefix: &[u8; PREFIX_LEN]) -> Result<(bool, bool, usize), FrameError> {
        let flag = prefix[0];
        let trailers = flag & 0x80 != 0 && self.web_trailers;
        let compressed = match flag & if trailers { 0x7F } else { 0xFF } {
            0 => false,
            1 if self.compression => true,
            1 => return Err(FrameError::CompressedWithoutEncoding),
            _ => return Err(FrameError::BadFlag(flag)),
        };
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
        match usize::try_from(len) {
            Ok(n) if n <= self.max_message => Ok((compressed, trailers, n)),
            _ => Err(FrameError::TooLarge {
                len,
                max: self.max_message,
            }),
        }
    }
}

/// Appends `message` encoded after its prefix (flag 0) to `out`, encoding straight into
/// `out` and patching the length afterwards; returns the message's length (without the
/// prefix). A message over 4 GiB cannot be framed: the caller's limit refuses it first.
pub fn encode<M: prost::Message>(message: &M, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX_LEN]);
    // Encoding into a Vec cannot fail: it grows.
    let _ = message.encode(out);
    patch(out, start, false)
}

/// Appends already-encoded (and possibly compressed) `data` after its prefix.
pub fn encode_raw(data: &[u8], compressed: bool, out: &mut Vec<u8>) {
    out.reserve(PREFIX_LEN + data.len());
    out.push(u8::from(compressed));
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// Writes the prefix at `start` for the message that follows it to the end of `out`;
/// returns the message's length.
pub(crate) fn patch(out: &mut [u8], start: usize, compressed: bool) -> usize {
    let len = out.len() - start - PREFIX_LEN;
    out[start] = u8::from(compressed);
    out[start + 1..start + PREFIX_LEN].copy_from_slice(&(len as u32).to_be_bytes());
    len
}

#[cfg(test)]
mod tests;
