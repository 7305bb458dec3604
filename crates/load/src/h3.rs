//! HTTP/3 for the load generator, the client's side, sans I/O (RFC 9114 over QUIC, RFC 9000;
//! QPACK, RFC 9204). `Client` owns one connection: its quinn-proto `Endpoint` and `Connection`
//! (the QUIC state machine), the control stream it opens with SETTINGS, the server's control
//! and QPACK streams, and request streams opened from a `Request` (encoded once before the
//! run), whose responses become `Event`s. Datagrams and the time go in; datagrams to send,
//! the next timer and events come out. No sockets, no clock: the worker owns those
//! (`worker::quic`), and each stream carries its caller's tag.
//! Invariants: the client announces QPACK_MAX_TABLE_CAPACITY 0, so every response section
//! decodes on its own (none can block) and the server's encoder stream may only set a zero
//! capacity; the client's own sections use the static table only, so it needs no encoder or
//! decoder stream (RFC 9204 §4.2 allows leaving both out).
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use linerate_h3::Code;
use linerate_h3::frame::{self, Frame, FrameReader, Role, setting, stream_type};
use linerate_h3::qpack::{self, Decoder};
use linerate_h3::varint;
use quinn_proto::crypto::rustls::{HandshakeData, QuicClientConfig};
use quinn_proto::{
    ClientConfig, ConnectError, Connection, ConnectionError, ConnectionHandle, DatagramEvent, Dir,
    Endpoint, EndpointConfig, ReadError, StreamEvent, StreamId, Transmit, TransportConfig, VarInt,
    WriteError,
};

mod message;
#[cfg(test)]
mod tests;

pub use message::{MAX_FIELD_SECTION, Request, Response};

/// The application protocol offered, alone (RFC 9114 §3.1).
pub const ALPN_H3: &[u8] = b"h3";
/// Most datagrams one `poll_transmit` may return (a GSO batch, split by the worker).
pub const MAX_DATAGRAMS: usize = 10;
/// The largest UDP payload the client accepts: QUIC's largest (RFC 9000 §18.2), which
/// receive buffers of 64 KiB hold.
pub const MAX_UDP_PAYLOAD: u16 = 65_527;
/// Unidirectional streams the server may have open: its control and two QPACK streams, and
/// room for reserved ("grease") ones, which are read and dropped.
pub const MAX_PEER_UNI_STREAMS: u32 = 16;

/// The QUIC side of the run's configuration, shared by every connection of every thread.
#[derive(Clone)]
pub struct Quic {
    /// The client's QUIC configuration: the run's rustls client (TLS 1.3, ALPN `h3`) and the
    /// transport parameters.
    pub client: ClientConfig,
    /// Every connection's endpoint configuration (its stateless-reset key).
    pub endpoint: Arc<EndpointConfig>,
    /// The TLS server name (SNI, and the name the certificate must match).
    pub server_name: String,
}

impl fmt::Debug for Quic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quic")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Quic {
    /// The QUIC client over `tls`, which must offer TLS 1.3 and ALPN `h3` only (`tls`'s
    /// `TlsChoice::http3` makes it so). Fails if its suites leave out TLS13_AES_128_GCM_SHA256,
    /// which QUIC's Initial packets need (RFC 9001 §5.2).
    pub fn new(
        tls: Arc<rustls::ClientConfig>,
        server_name: &str,
    ) -> Result<Quic, quinn_proto::crypto::rustls::NoInitialCipherSuite> {
        let crypto = QuicClientConfig::try_from(tls)?;
        let mut transport = TransportConfig::default();
        // The server opens no request streams (RFC 9114 §6.1: server push is not asked for).
        transport.max_concurrent_bidi_streams(VarInt::from_u32(0));
        transport.max_concurrent_uni_streams(VarInt::from_u32(MAX_PEER_UNI_STREAMS));
        let mut client = ClientConfig::new(Arc::new(crypto));
        client.transport_config(Arc::new(transport));
        // The server may send datagrams as large as its path carries (RFC 9000 §18.2's default
        // and largest value): on loopback or a jumbo-frame path, fewer and larger ones.
        let mut endpoint = EndpointConfig::default();
        endpoint
            .max_udp_payload_size(MAX_UDP_PAYLOAD)
            .expect("65,527 is QUIC's largest UDP payload");
        Ok(Quic {
            client,
            endpoint: Arc::new(endpoint),
            server_name: server_name.to_string(),
        })
    }
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum H3Error {
    /// quinn-proto could not start it (a server name it refuses, an address it cannot use).
    Connect(ConnectError),
    /// QUIC ended it: the peer closed it, it timed out, the handshake failed.
    Lost(ConnectionError),
    /// The server broke HTTP/3; the client closed the connection with this code.
    Protocol(Code),
    /// The handshake chose another application protocol than `h3`, or none.
    NoH3(Option<String>),
}

impl H3Error {
    /// The peer closed the connection cleanly (H3_NO_ERROR, RFC 9114 §5.2), as a server
    /// does when it shuts down or an idle connection times out.
    pub fn is_graceful(&self) -> bool {
        match self {
            H3Error::Lost(ConnectionError::ApplicationClosed(c)) => {
                u64::from(c.error_code) == Code::NoError.value()
            }
            H3Error::Lost(ConnectionError::TimedOut) => true,
            _ => false,
        }
    }
}

impl fmt::Display for H3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // TLS alert 120 (no_application_protocol) as a QUIC crypto error (RFC 9001 §4.8).
            H3Error::Lost(ConnectionError::ConnectionClosed(c))
                if u64::from(c.error_code) == 0x100 + 120 =>
            {
                f.write_str(
                    "the server does not speak HTTP/3 here: ALPN h3 was offered and it refused it",
                )
            }
            H3Error::Connect(e) => write!(f, "cannot start a QUIC connection: {e}"),
            H3Error::Lost(e) => write!(f, "QUIC connection lost: {e}"),
            H3Error::Protocol(c) => write!(f, "HTTP/3 protocol error: {c:?}"),
            H3Error::NoH3(chosen) => {
                let answer = match chosen {
                    Some(p) => format!("it chose {p:?}"),
                    None => "it chose none".to_string(),
                };
                write!(
                    f,
                    "the server does not speak HTTP/3 here: ALPN h3 was offered and {answer}"
                )
            }
        }
    }
}

impl std::error::Error for H3Error {}

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<T> {
    /// The response is complete (its stream ended): its final status and body bytes, and
    /// the `grpc-status` it carried, if any.
    Response {
        tag: T,
        status: u16,
        body: u64,
        grpc_status: Option<u32>,
    },
    /// The server reset the stream (with this error code) before the response was complete.
    Reset { tag: T, code: u64 },
    /// The stream is at or past the id of the server's GOAWAY: it was never processed.
    Refused { tag: T },
}

/// A request stream: its request going out, its response coming in.
#[derive(Debug)]
struct Stream<T> {
    id: StreamId,
    tag: T,
    /// Request bytes written.
    written: usize,
    /// All of them were written and the stream finished (or the server stopped it).
    sent: bool,
    response: Response,
}

/// A stream the server opened (RFC 9114 §6.2), by its type.
enum Uni {
    /// Its type is not all in yet: the bytes so far.
    Typing(Vec<u8>),
    Control(Box<FrameReader>),
    /// QPACK: the server's encoder stream, read by the decoder.
    Encoder,
    /// QPACK: the server's decoder stream; an instruction split across reads.
    Decoder(Vec<u8>),
    /// An unknown or reserved type: asked to stop, read and dropped.
    Ignored,
}

/// One HTTP/3 client connection. `T` is what the caller keeps per request (its send time).
pub struct Client<T> {
    endpoint: Endpoint,
    conn: Connection,
    handle: ConnectionHandle,
    /// Streams the caller allows in flight (`--max-concurrent-streams`).
    max_streams: usize,
    /// QUIC refused to open a stream (the server's MAX_STREAMS is used up) and has not said
    /// since that more are available.
    blocked: bool,
    /// The handshake is done and the control stream open: requests may go.
    connected: bool,
    /// Open request streams in id order, which is the order they were opened.
    streams: VecDeque<Stream<T>>,
    uni: Vec<(StreamId, Uni)>,
    /// Which of the server's critical streams have arrived (control, encoder, decoder).
    seen: [bool; 3],
    /// The lowest id of the server's GOAWAYs: no stream is opened after one.
    goaway: Option<u64>,
    decoder: Decoder,
    /// HTTP/3 bytes read from request streams, not yet taken.
    bytes_read: u64,
}

impl<T> fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("connected", &self.connected)
            .field("open", &self.streams.len())
            .field("blocked", &self.blocked)
            .field("goaway", &self.goaway)
            .finish_non_exhaustive()
    }
}

impl<T: Copy> Client<T> {
    /// Starts a connection to `addr` (its first datagrams come out of `transmit`); at most
    /// `max_streams` requests will be in flight on it.
    pub fn connect(
        quic: &Quic,
        now: Instant,
        addr: SocketAddr,
        max_streams: usize,
    ) -> Result<Client<T>, ConnectError> {
        let mut endpoint = Endpoint::new(quic.endpoint.clone(), None, true, None);
        let (handle, conn) = endpoint.connect(now, quic.client.clone(), addr, &quic.server_name)?;
        Ok(Client {
            endpoint,
            conn,
            handle,
            max_streams,
            blocked: false,
            connected: false,
            streams: VecDeque::new(),
            uni: Vec::new(),
            seen: [false; 3],
            goaway: None,
            decoder: Decoder::new(0),
            bytes_read: 0,
        })
    }

    /// The handshake is done: requests may be opened.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// Streams that may be opened now: ours less those open, while the server allows and no
    /// GOAWAY came.
    pub fn room(&self) -> usize {
        if !self.connected || self.blocked || self.spent() {
            return 0;
        }
        self.max_streams.saturating_sub(self.streams.len())
    }

    /// No stream can ever be opened here again (a GOAWAY came): once idle, the connection is
    /// to be reopened.
    pub fn spent(&self) -> bool {
        self.goaway.is_some()
    }

    /// Requests whose response is not complete.
    pub fn in_flight(&self) -> usize {
        self.streams.len()
    }

    pub fn is_idle(&self) -> bool {
        self.streams.is_empty()
    }

    /// The tag of the oldest open stream: the one a timeout looks at.
    pub fn oldest(&self) -> Option<&T> {
        self.streams.front().map(|s| &s.tag)
    }

    /// The oldest open request's response so far (see `Response::progress`): what a
    /// measurement that stops acknowledging mid-response can still read.
    pub fn progress(&self) -> Option<(u16, u64)> {
        self.streams.front().map(|s| s.response.progress())
    }

    /// Packets QUIC declared lost on this connection so far (each was sent again).
    pub fn lost_packets(&self) -> u64 {
        self.conn.stats().path.lost_packets
    }

    /// HTTP/3 bytes read from request streams since the last call.
    pub fn take_bytes_read(&mut self) -> u64 {
        std::mem::take(&mut self.bytes_read)
    }

    /// When `timeout` wants to be called next.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.conn.poll_timeout()
    }

    /// A timer came due (call `poll` and `transmit` after).
    pub fn timeout(&mut self, now: Instant) {
        self.conn.handle_timeout(now);
    }

    /// One datagram from the server (call `poll` and `transmit` after). `scratch` holds what
    /// the endpoint would answer on its own, which a client with one connection never sends.
    pub fn recv(&mut self, now: Instant, from: SocketAddr, datagram: &[u8], scratch: &mut Vec<u8>) {
        scratch.clear();
        if let Some(DatagramEvent::ConnectionEvent(h, ev)) =
            self.endpoint
                .handle(now, from, None, None, datagram.into(), scratch)
            && h == self.handle
        {
            self.conn.handle_event(ev);
        }
    }

    /// The next datagrams to send, written to `buf` (cleared first): `size` bytes, in
    /// datagrams of `segment_size` where that is set.
    pub fn transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        while let Some(ev) = self.conn.poll_endpoint_events() {
            if let Some(ev) = self.endpoint.handle_event(self.handle, ev) {
                self.conn.handle_event(ev);
            }
        }
        buf.clear();
        self.conn.poll_transmit(now, MAX_DATAGRAMS, buf)
    }

    /// Closes the connection cleanly (H3_NO_ERROR); `transmit` then sends the close.
    pub fn close(&mut self, now: Instant) {
        self.close_with(now, Code::NoError);
    }

    fn close_with(&mut self, now: Instant, code: Code) {
        let code = VarInt::from_u64(code.value()).expect("HTTP/3 codes fit a varint");
        self.conn.close(now, code, Default::default());
    }

    /// Opens a stream for `req` and writes as much of it as flow control allows. Returns
    /// false, opening nothing, when the server allows no more streams now.
    pub fn open(&mut self, req: &Request, tag: T) -> bool {
        if !self.connected || self.spent() {
            return false;
        }
        let Some(id) = self.conn.streams().open(Dir::Bi) else {
            self.blocked = true;
            return false;
        };
        let mut s = Stream {
            id,
            tag,
            written: 0,
            sent: false,
            response: Response::new(),
        };
        push(&mut self.conn, &mut s, req);
        self.streams.push_back(s);
        true
    }

    /// Takes what QUIC made of the input so far: the handshake's end, responses, resets,
    /// the server's control and QPACK streams, credit for more streams. A returned error
    /// ends the connection (a protocol error has been sent in its CONNECTION_CLOSE).
    pub fn poll(
        &mut self,
        now: Instant,
        req: &Request,
        events: &mut Vec<Event<T>>,
    ) -> Result<(), H3Error> {
        while let Some(ev) = self.conn.poll() {
            let step = match ev {
                quinn_proto::Event::Connected => self.on_connected(),
                quinn_proto::Event::ConnectionLost { reason } => {
                    return Err(H3Error::Lost(reason));
                }
                quinn_proto::Event::Stream(s) => self.on_stream(s, req, events),
                _ => Ok(()),
            };
            if let Err(e) = step {
                let code = match &e {
                    H3Error::Protocol(c) => *c,
                    _ => Code::NoError,
                };
                self.close_with(now, code);
                return Err(e);
            }
        }
        Ok(())
    }

    /// The handshake is done: the protocol must be `h3`; the control stream opens with
    /// SETTINGS (RFC 9114 §6.2.1), which say there is no dynamic table (RFC 9204 §5).
    fn on_connected(&mut self) -> Result<(), H3Error> {
        let alpn = self
            .conn
            .crypto_session()
            .handshake_data()
            .and_then(|d| d.downcast::<HandshakeData>().ok())
            .and_then(|d| d.protocol);
        if alpn.as_deref() != Some(ALPN_H3) {
            return Err(H3Error::NoH3(
                alpn.map(|p| String::from_utf8_lossy(&p).into_owned()),
            ));
        }
        // RFC 9114 §6.2: the server allows at least 3 unidirectional streams.
        let id = self
            .conn
            .streams()
            .open(Dir::Uni)
            .ok_or(H3Error::Protocol(Code::StreamCreationError))?;
        let mut out = vec![stream_type::CONTROL as u8];
        frame::write_settings(
            &mut out,
            &[
                (setting::QPACK_MAX_TABLE_CAPACITY, 0),
                (setting::QPACK_BLOCKED_STREAMS, 0),
            ],
        );
        // A few bytes, within any initial stream window (RFC 9000 §7.4 defaults aside, a
        // server that allows fewer could not take its own SETTINGS' worth either).
        match self.conn.send_stream(id).write(&out) {
            Ok(n) if n == out.len() => {}
            _ => return Err(H3Error::Protocol(Code::InternalError)),
        }
        self.connected = true;
        Ok(())
    }

    fn on_stream(
        &mut self,
        ev: StreamEvent,
        req: &Request,
        events: &mut Vec<Event<T>>,
    ) -> Result<(), H3Error> {
        match ev {
            StreamEvent::Readable { id } if id.dir() == Dir::Bi => {
                self.read_response(id, events).map_err(H3Error::Protocol)
            }
            StreamEvent::Readable { id } => self.read_uni(id, events).map_err(H3Error::Protocol),
            // A stream that arrives with its data says only that it opened: read it now.
            StreamEvent::Opened { dir: Dir::Uni } => {
                while let Some(id) = self.conn.streams().accept(Dir::Uni) {
                    self.uni.push((id, Uni::Typing(Vec::new())));
                    self.read_uni(id, events).map_err(H3Error::Protocol)?;
                }
                Ok(())
            }
            // Refused by the transport parameters already (none are allowed).
            StreamEvent::Opened { dir: Dir::Bi } => {
                Err(H3Error::Protocol(Code::StreamCreationError))
            }
            StreamEvent::Writable { id } => {
                if let Some(idx) = self.find(id) {
                    push(&mut self.conn, &mut self.streams[idx], req);
                }
                Ok(())
            }
            StreamEvent::Available { dir: Dir::Bi } => {
                self.blocked = false;
                Ok(())
            }
            // The control stream is never finished, so a stop can only mean the server
            // closed it on us (RFC 9114 §6.2.1). A stopped request stream still gets its
            // response (or a reset).
            StreamEvent::Stopped { id, .. } if id.dir() == Dir::Uni => {
                Err(H3Error::Protocol(Code::ClosedCriticalStream))
            }
            _ => Ok(()),
        }
    }

    fn find(&self, id: StreamId) -> Option<usize> {
        let id = u64::from(id);
        self.streams
            .binary_search_by_key(&id, |s| u64::from(s.id))
            .ok()
    }

    /// Reads a response stream: every chunk through its `Response`; its end completes the
    /// response, a reset loses it.
    fn read_response(&mut self, id: StreamId, events: &mut Vec<Event<T>>) -> Result<(), Code> {
        let Some(idx) = self.find(id) else {
            // Already done with (answered early, or refused): nothing more is wanted.
            return Ok(());
        };
        let Client {
            conn,
            streams,
            decoder,
            bytes_read,
            ..
        } = self;
        let s = &mut streams[idx];
        let mut recv = conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return Ok(());
        };
        // None: more to come; Some(None): the stream ended; Some(Some(code)): it was reset.
        let mut end: Option<Option<VarInt>> = None;
        let fed = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    *bytes_read += chunk.bytes.len() as u64;
                    if let Err(c) = s.response.feed(&chunk.bytes, decoder) {
                        break Err(c);
                    }
                }
                Ok(None) => {
                    end = Some(None);
                    break Ok(());
                }
                Err(ReadError::Blocked) => break Ok(()),
                Err(ReadError::Reset(code)) => {
                    end = Some(Some(code));
                    break Ok(());
                }
            }
        };
        // Whether to send flow-control credit is `transmit`'s business.
        let _ = chunks.finalize();
        fed?;
        let Some(end) = end else {
            return Ok(());
        };
        let event = match end {
            None => {
                let (status, body) = s.response.finish()?;
                Event::Response {
                    tag: s.tag,
                    status,
                    body,
                    grpc_status: s.response.grpc_status(),
                }
            }
            Some(code) => Event::Reset {
                tag: s.tag,
                code: code.into_inner(),
            },
        };
        let s = self.streams.remove(idx).expect("found");
        abandon_send(&mut self.conn, &s, None);
        events.push(event);
        Ok(())
    }

    /// Reads a stream the server opened: its type first (RFC 9114 §6.2), then by type.
    fn read_uni(&mut self, id: StreamId, events: &mut Vec<Event<T>>) -> Result<(), Code> {
        let Some(at) = self.uni.iter().position(|(u, _)| *u == id) else {
            return Ok(());
        };
        // These streams carry a few bytes per connection: copied out, then read.
        let mut data = Vec::new();
        let mut ended = false;
        {
            let mut recv = self.conn.recv_stream(id);
            let Ok(mut chunks) = recv.read(true) else {
                return Ok(());
            };
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(chunk)) => data.extend_from_slice(&chunk.bytes),
                    Ok(None) | Err(ReadError::Reset(_)) => {
                        ended = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                }
            }
            let _ = chunks.finalize();
        }
        let mut input = &data[..];
        if let Uni::Typing(head) = &mut self.uni[at].1 {
            head.extend_from_slice(input);
            let Some((kind, n)) = varint::read(head) else {
                if ended {
                    self.uni.swap_remove(at);
                }
                return Ok(());
            };
            let rest = head.split_off(n);
            data = rest;
            input = &data[..];
            let critical = match kind {
                stream_type::CONTROL => Some(0),
                stream_type::QPACK_ENCODER => Some(1),
                stream_type::QPACK_DECODER => Some(2),
                _ => None,
            };
            if let Some(k) = critical {
                // RFC 9114 §6.2.1, RFC 9204 §4.2: one of each.
                if std::mem::replace(&mut self.seen[k], true) {
                    return Err(Code::StreamCreationError);
                }
            }
            self.uni[at].1 = match kind {
                stream_type::CONTROL => Uni::Control(Box::new(FrameReader::new(Role::Control, 0))),
                stream_type::QPACK_ENCODER => Uni::Encoder,
                stream_type::QPACK_DECODER => Uni::Decoder(Vec::new()),
                // RFC 9114 §4.6: no MAX_PUSH_ID was sent, so no push may come.
                stream_type::PUSH => return Err(Code::IdError),
                _ => {
                    // RFC 9114 §6.2: an unknown type is not read.
                    let code =
                        VarInt::from_u64(Code::StreamCreationError.value()).expect("fits a varint");
                    let _ = self.conn.recv_stream(id).stop(code);
                    Uni::Ignored
                }
            };
        }
        let mut goaway = None;
        match &mut self.uni[at].1 {
            Uni::Typing(_) => unreachable!("typed above"),
            Uni::Control(reader) => {
                while !input.is_empty() {
                    let (n, f) = reader.read(input)?;
                    input = &input[n..];
                    match f {
                        None | Some(Frame::Settings(_)) => {}
                        Some(Frame::Goaway(g)) => goaway = Some(g),
                        // RFC 9114 §7.2.7: MAX_PUSH_ID is the client's to send; §7.2.3: no
                        // push was allowed, so there is none to cancel.
                        Some(Frame::MaxPushId(_)) => return Err(Code::FrameUnexpected),
                        Some(Frame::CancelPush(_)) => return Err(Code::IdError),
                        Some(_) => return Err(Code::FrameUnexpected),
                    }
                }
                if ended {
                    return Err(Code::ClosedCriticalStream);
                }
            }
            Uni::Encoder => {
                self.decoder.encoder_stream(input)?;
                if ended {
                    return Err(Code::ClosedCriticalStream);
                }
            }
            Uni::Decoder(pending) => {
                pending.extend_from_slice(input);
                let used = qpack::read_decoder_stream(pending)?;
                pending.drain(..used);
                if ended {
                    return Err(Code::ClosedCriticalStream);
                }
            }
            Uni::Ignored => {
                if ended {
                    self.uni.swap_remove(at);
                }
            }
        }
        if let Some(g) = goaway {
            self.on_goaway(g, events)?;
        }
        Ok(())
    }

    /// RFC 9114 §5.2: streams at or past `id` were not processed and may be retried; `id`
    /// names a request stream and never grows.
    fn on_goaway(&mut self, id: u64, events: &mut Vec<Event<T>>) -> Result<(), Code> {
        if !id.is_multiple_of(4) || self.goaway.is_some_and(|g| id > g) {
            return Err(Code::IdError);
        }
        self.goaway = Some(id);
        let code = VarInt::from_u64(Code::RequestCancelled.value()).expect("fits a varint");
        while self.streams.back().is_some_and(|s| u64::from(s.id) >= id) {
            let s = self.streams.pop_back().expect("checked");
            abandon_send(&mut self.conn, &s, Some(code));
            let _ = self.conn.recv_stream(s.id).stop(code);
            events.push(Event::Refused { tag: s.tag });
        }
        Ok(())
    }
}

/// Writes what stream `s` has left of `req`, and finishes it once all is written.
fn push<T>(conn: &mut Connection, s: &mut Stream<T>, req: &Request) {
    let bytes = req.bytes();
    if s.sent {
        return;
    }
    let mut send = conn.send_stream(s.id);
    match send.write(&bytes[s.written..]) {
        Ok(n) => s.written += n,
        Err(WriteError::Blocked) => {}
        // Stopped by the server (it wants no more of the request): its answer still comes.
        Err(_) => s.sent = true,
    }
    if !s.sent && s.written == bytes.len() {
        let _ = send.finish();
        s.sent = true;
    }
}

/// A stream is done with before its request was all sent (an early answer, a reset, a
/// GOAWAY): the rest is not sent (`code`, or H3_NO_ERROR after a complete response, RFC 9114
/// §4.1).
fn abandon_send<T>(conn: &mut Connection, s: &Stream<T>, code: Option<VarInt>) {
    if !s.sent {
        let code =
            code.unwrap_or_else(|| VarInt::from_u64(Code::NoError.value()).expect("fits a varint"));
        let _ = conn.send_stream(s.id).reset(code);
    }
}
