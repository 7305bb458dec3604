//! The proxy's HTTP/2 upstreams when the upstream does not process a request (RFC 9113 §8.7):
//! a hand-written h2c server on 127.0.0.1, raw frames over a std socket, that refuses
//! streams (RST_STREAM REFUSED_STREAM) or closes its connection with a GOAWAY naming no
//! stream, then answers on another connection by echoing the request's body. A POST (never
//! retried by the usual rules) with `tries = 1` still gets its answer, body whole.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a socket read waits before the test gives up (never a measured duration).
const WAIT: Duration = Duration::from_secs(20);

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;
const ACK: u8 = 1;
const REFUSED_STREAM: u32 = 7;

/// What the test upstream does with a request, by its number among all requests (0-based).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    /// RST_STREAM(REFUSED_STREAM) at its HEADERS.
    Refuse,
    /// GOAWAY(last stream 0, NO_ERROR) at its HEADERS, then the connection closes.
    GoAway,
    /// `200`, the request's body echoed (with its length), a trailer `x-end: yes`.
    Echo,
    /// As `Echo`, but every answer waits until this many requests are in (on any
    /// connection): only requests open at once complete.
    EchoWhenAllIn(usize),
}

/// One connection's writing half (its reader is its own thread's): answers held for
/// `EchoWhenAllIn` are written by whichever thread the last request came in on.
type Writer = Arc<Mutex<TcpStream>>;

/// An answer held by `EchoWhenAllIn`: where to write it, its stream and body, and its
/// connection's count of streams answered.
type Held = (Writer, u32, Vec<u8>, Arc<Mutex<usize>>);

/// The test upstream's state, shared by its connections.
#[derive(Default)]
struct State {
    /// Each request as it came: its connection (by accept order), stream, and act.
    seen: Vec<(usize, u32, Act)>,
    /// Answers held by `EchoWhenAllIn`: where to write them.
    held: Vec<Held>,
    /// The most streams one connection had open at once.
    most_open: usize,
}

struct RawUpstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl RawUpstream {
    /// Serves each connection on its own thread, announcing `max_streams` as its
    /// SETTINGS_MAX_CONCURRENT_STREAMS when given; request `n` (in arrival order) gets
    /// `plan(n)`.
    fn start(max_streams: Option<u32>, plan: fn(usize) -> Act) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state: Arc<Mutex<State>> = Arc::default();
        let shared = state.clone();
        std::thread::spawn(move || {
            for (conn, tcp) in listener.incoming().enumerate() {
                let Ok(tcp) = tcp else { return };
                let state = shared.clone();
                std::thread::spawn(move || serve_conn(conn, tcp, max_streams, plan, state));
            }
        });
        RawUpstream { addr, state }
    }

    fn seen(&self) -> Vec<(usize, u32, Act)> {
        self.state.lock().unwrap().seen.clone()
    }

    fn most_open(&self) -> usize {
        self.state.lock().unwrap().most_open
    }
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// The answer to stream `stream` echoing `body`: HPACK (RFC 7541) `:status: 200` is static
/// index 8 (§6.1); the length is a literal without indexing, its name static index 28, and
/// so is the trailer, its name new (§6.2.2).
fn echo(out: &mut Vec<u8>, stream: u32, body: &[u8]) {
    let length = body.len().to_string();
    let mut head = vec![0x88, 0x0f, 28 - 15, length.len() as u8];
    head.extend_from_slice(length.as_bytes());
    frame(out, HEADERS, END_HEADERS, stream, &head);
    for piece in body.chunks(16_384) {
        frame(out, DATA, 0, stream, piece);
    }
    let trailer = b"\x00\x05x-end\x03yes";
    frame(out, HEADERS, END_HEADERS | END_STREAM, stream, trailer);
}

/// One connection: the server's SETTINGS first, then frames answered as `plan` says. The
/// request heads are never decoded: the proxy's encoder indexes nothing, so no table is
/// needed, and the tests look at bodies only.
fn serve_conn(
    conn: usize,
    mut tcp: TcpStream,
    max_streams: Option<u32>,
    plan: fn(usize) -> Act,
    state: Arc<Mutex<State>>,
) {
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let writer: Writer = Arc::new(Mutex::new(tcp.try_clone().unwrap()));
    let write = |out: &[u8]| writer.lock().unwrap().write_all(out).is_ok();
    let mut out = Vec::new();
    let settings: Vec<u8> = max_streams.map_or(Vec::new(), |n| {
        let mut p = vec![0, 3]; // SETTINGS_MAX_CONCURRENT_STREAMS
        p.extend_from_slice(&n.to_be_bytes());
        p
    });
    frame(&mut out, SETTINGS, 0, 0, &settings);
    if !write(&out) {
        return;
    }
    // Streams of this connection answered (or refused), against those opened.
    let answered = Arc::new(Mutex::new(0usize));
    let mut opened = 0usize;
    let mut buf = Vec::new();
    let mut preface = false;
    // Bodies of the streams being echoed.
    let mut bodies: Vec<(u32, Vec<u8>, Act)> = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let Ok(n) = tcp.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if !preface {
            if buf.len() < 24 {
                continue;
            }
            buf.drain(..24);
            preface = true;
        }
        let mut out = Vec::new();
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let p: Vec<u8> = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            let mut ended = None;
            match kind {
                SETTINGS if flags & ACK == 0 => frame(&mut out, SETTINGS, ACK, 0, &[]),
                PING if flags & ACK == 0 => frame(&mut out, PING, ACK, 0, &p),
                HEADERS => {
                    opened += 1;
                    let act = {
                        let mut s = state.lock().unwrap();
                        let open = opened - *answered.lock().unwrap();
                        s.most_open = s.most_open.max(open);
                        let act = plan(s.seen.len());
                        s.seen.push((conn, stream, act));
                        act
                    };
                    match act {
                        Act::Refuse => {
                            *answered.lock().unwrap() += 1;
                            frame(
                                &mut out,
                                RST_STREAM,
                                0,
                                stream,
                                &REFUSED_STREAM.to_be_bytes(),
                            );
                        }
                        Act::GoAway => {
                            frame(&mut out, GOAWAY, 0, 0, &[0; 8]);
                            write(&out);
                            return;
                        }
                        Act::Echo | Act::EchoWhenAllIn(_) => {
                            bodies.push((stream, Vec::new(), act));
                            if flags & END_STREAM != 0 {
                                ended = Some(stream);
                            }
                        }
                    }
                }
                DATA => {
                    if !p.is_empty() {
                        // Every byte read reopens both windows (refused streams' too).
                        frame(
                            &mut out,
                            WINDOW_UPDATE,
                            0,
                            0,
                            &(p.len() as u32).to_be_bytes(),
                        );
                    }
                    if let Some((_, body, _)) = bodies.iter_mut().find(|(s, ..)| *s == stream) {
                        body.extend_from_slice(&p);
                        if !p.is_empty() && flags & END_STREAM == 0 {
                            let inc = (p.len() as u32).to_be_bytes();
                            frame(&mut out, WINDOW_UPDATE, 0, stream, &inc);
                        }
                        if flags & END_STREAM != 0 {
                            ended = Some(stream);
                        }
                    }
                }
                _ => {}
            }
            let Some(stream) = ended else { continue };
            let i = bodies.iter().position(|(s, ..)| *s == stream).unwrap();
            let (_, body, act) = bodies.swap_remove(i);
            let Act::EchoWhenAllIn(n) = act else {
                *answered.lock().unwrap() += 1;
                echo(&mut out, stream, &body);
                continue;
            };
            let mut s = state.lock().unwrap();
            s.held
                .push((writer.clone(), stream, body, answered.clone()));
            if s.held.len() == n {
                if !out.is_empty() {
                    write(&std::mem::take(&mut out));
                }
                for (w, stream, body, answered) in s.held.drain(..) {
                    *answered.lock().unwrap() += 1;
                    let mut answer = Vec::new();
                    echo(&mut answer, stream, &body);
                    let _ = w.lock().unwrap().write_all(&answer);
                }
            }
        }
        if !out.is_empty() && !write(&out) {
            return;
        }
    }
}

/// A proxy to `up` over h2c, `tries = 1` (no try again by the usual rules).
fn proxy_to(up: SocketAddr) -> common::bin::Served {
    let file = std::env::temp_dir().join(format!(
        "linerate-proxy-h2-refused-{}-{}.toml",
        std::process::id(),
        up.port()
    ));
    std::fs::write(
        &file,
        format!(
            r#"
[[listen]]
addr = "127.0.0.1:0"
[[upstream]]
name = "h2"
servers = ["{up}"]
protocol = "h2c"
tries = 1
[[site]]
default = true
app = "none"
[[site.proxy]]
prefix = "/"
upstream = "h2"
"#
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    proxy
}

/// A POST of `body` through the proxy, and its answer.
fn post(proxy: SocketAddr, body: &[u8]) -> common::Resp {
    let mut c = common::Client::connect(proxy);
    let head = format!(
        "POST /pkg.Svc/Call HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    c.send(&all);
    c.read_response()
}

/// Each try after the first went to another connection than the one before.
fn on_other_connections(seen: &[(usize, u32, Act)]) {
    for pair in seen.windows(2) {
        assert_ne!(
            pair[0].0, pair[1].0,
            "a refused try goes elsewhere: {seen:?}"
        );
    }
}

#[test]
fn refused_streams_go_again_on_another_connection_whatever_the_method() {
    // RFC 9113 §8.7: REFUSED_STREAM means nothing was processed, so even a POST goes again
    // (bounded: see the next test), and the refusal takes no server out.
    let up = RawUpstream::start(None, |n| if n < 2 { Act::Refuse } else { Act::Echo });
    let proxy = proxy_to(up.addr);
    let r = post(proxy.addr, b"hello");
    assert_eq!(r.status, 200, "{:?}", r.text());
    assert_eq!(r.body, b"hello");
    let seen = up.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    on_other_connections(&seen);
    // The next request is served at once: the refusals did not take the only server out.
    let r = post(proxy.addr, b"again");
    assert_eq!((r.status, &r.body[..]), (200, &b"again"[..]));
}

#[test]
fn a_server_refusing_everything_is_502_after_a_bounded_number_of_tries() {
    // Four more tries than the first (UNPROCESSED_RETRIES), then the client hears 502.
    let up = RawUpstream::start(None, |_| Act::Refuse);
    let proxy = proxy_to(up.addr);
    let r = post(proxy.addr, b"hello");
    assert_eq!(r.status, 502);
    assert_eq!(up.seen().len(), 5, "{:?}", up.seen());
}

#[test]
fn a_stream_above_a_goaways_last_stream_goes_to_a_new_connection() {
    // RFC 9113 §6.8: streams above the GOAWAY's last stream id were not processed.
    let up = RawUpstream::start(None, |n| if n == 0 { Act::GoAway } else { Act::Echo });
    let proxy = proxy_to(up.addr);
    let r = post(proxy.addr, b"hello");
    assert_eq!(r.status, 200, "{:?}", r.text());
    assert_eq!(r.body, b"hello");
    let seen = up.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    on_other_connections(&seen);
}

#[test]
fn a_refused_relayed_body_goes_again_whole() {
    // A body still arriving when the stream was refused: what went up of it (at most the
    // server's 65,535-byte stream window, since it never reopens a refused one) is kept and
    // sent again, then the rest.
    let up = RawUpstream::start(None, |n| if n == 0 { Act::Refuse } else { Act::Echo });
    let proxy = proxy_to(up.addr);
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let r = post(proxy.addr, &body);
    assert_eq!(r.status, 200, "{:?}", r.text());
    assert_eq!(r.body.len(), body.len());
    assert!(r.body == body, "the body came back whole and in order");
}

#[test]
fn no_connection_carries_more_streams_than_its_server_allows() {
    // RFC 9113 §5.1.2: a server announcing SETTINGS_MAX_CONCURRENT_STREAMS 1 never sees a
    // second stream on a connection while one is open, even for requests that came before
    // its SETTINGS: they wait for them, then go on another connection. The server answers
    // only once all three are in, so they are open at once.
    let up = RawUpstream::start(Some(1), |_| Act::EchoWhenAllIn(3));
    let proxy = proxy_to(up.addr);
    let mut clients: Vec<common::Client> = (0..3)
        .map(|i| {
            let mut c = common::Client::connect(proxy.addr);
            let body = format!("call {i}");
            let head = format!(
                "POST /pkg.Svc/Call HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            c.send(head.as_bytes());
            c
        })
        .collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text()),
            (200, format!("call {i}")),
            "{:?}",
            up.seen()
        );
    }
    assert_eq!(up.most_open(), 1, "{:?}", up.seen());
    let mut conns: Vec<usize> = up.seen().iter().map(|s| s.0).collect();
    conns.dedup();
    assert_eq!(conns.len(), 3, "{:?}", up.seen());
}
