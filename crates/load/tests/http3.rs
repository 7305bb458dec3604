//! `--http3` end to end: the load engine against a minimal HTTP/3 server written here over
//! quinn-proto and linerate-h3 (one thread, one UDP socket on 127.0.0.1, an OS-chosen port).
//! The server answers `200 hello` to `/`, `503` to `/status`, resets `/reset`, and records
//! what it saw (the client's control stream and SETTINGS, the request's fields, how many
//! request streams were open at once). Every run is bounded by `--requests` or a short
//! `--duration`.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_h3::frame::{self, Frame, FrameReader, Role, kind, stream_type};
use linerate_h3::qpack::{self, Decoder};
use linerate_load::{Config, LoadOptions, Report};
use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, ReadError,
    ServerConfig, StreamEvent, StreamId, TransportConfig, VarInt,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the server saw.
#[derive(Debug, Default)]
struct Seen {
    /// Requests answered (or reset).
    requests: u64,
    /// The most request streams that arrived on one connection between two of the server's
    /// sends: requests the client had in flight together.
    max_open: usize,
    /// The first request's fields, in order.
    fields: Vec<(String, String)>,
    /// The client's control streams that began with SETTINGS, and the QPACK table
    /// capacity they announced.
    control_settings: u64,
    qpack_capacity: Option<u64>,
}

struct Server {
    addr: SocketAddr,
    cert_pem: String,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a server allowing `max_streams` concurrent request streams per connection.
fn start(max_streams: u32) -> Server {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = u32::MAX;
    let mut transport = TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(max_streams))
        .max_concurrent_uni_streams(VarInt::from_u32(3));
    let mut server = ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()));
    server.transport_config(Arc::new(transport));
    let ep = Endpoint::new(
        Arc::new(EndpointConfig::default()),
        Some(Arc::new(server)),
        true,
        None,
    );
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (seen, stop) = (seen.clone(), stop.clone());
        std::thread::spawn(move || serve(sock, ep, &seen, &stop))
    };
    Server {
        addr,
        cert_pem: ck.cert.pem(),
        seen,
        stop,
        thread: Some(thread),
    }
}

/// A request stream being read: its frames, its fields.
struct Req {
    frames: FrameReader,
    fields: Vec<(String, String)>,
}

struct Conn {
    conn: Connection,
    reqs: HashMap<StreamId, Req>,
    /// The client's uni streams: bytes so far.
    uni: HashMap<StreamId, Vec<u8>>,
    decoder: Decoder,
    /// Request streams opened since the server last sent.
    batch: usize,
}

fn serve(sock: UdpSocket, mut ep: Endpoint, seen: &Mutex<Seen>, stop: &AtomicBool) {
    let mut conns: HashMap<ConnectionHandle, Conn> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    let mut tx = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let next = conns
            .values_mut()
            .filter_map(|c| c.conn.poll_timeout())
            .min();
        let wait = next
            .map_or(Duration::from_millis(20), |t| {
                t.saturating_duration_since(now)
            })
            .clamp(Duration::from_millis(1), Duration::from_millis(20));
        sock.set_read_timeout(Some(wait)).unwrap();
        let mut got = sock.recv_from(&mut buf).ok();
        while let Some((n, from)) = got {
            let now = Instant::now();
            tx.clear();
            match ep.handle(now, from, None, None, buf[..n].into(), &mut tx) {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    match ep.accept(incoming, now, &mut tx, None) {
                        Ok((ch, conn)) => {
                            conns.insert(
                                ch,
                                Conn {
                                    conn,
                                    reqs: HashMap::new(),
                                    uni: HashMap::new(),
                                    decoder: Decoder::new(0),
                                    batch: 0,
                                },
                            );
                        }
                        Err(e) => {
                            if let Some(t) = e.response {
                                let _ = sock.send_to(&tx[..t.size], t.destination);
                            }
                        }
                    }
                }
                Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                    if let Some(c) = conns.get_mut(&ch) {
                        c.conn.handle_event(ev);
                    }
                }
                Some(DatagramEvent::Response(t)) => {
                    let _ = sock.send_to(&tx[..t.size], t.destination);
                }
                None => {}
            }
            sock.set_nonblocking(true).unwrap();
            got = sock.recv_from(&mut buf).ok();
            sock.set_nonblocking(false).unwrap();
        }
        let now = Instant::now();
        for (&ch, c) in conns.iter_mut() {
            if c.conn.poll_timeout().is_some_and(|t| t <= now) {
                c.conn.handle_timeout(now);
            }
            while let Some(ev) = c.conn.poll() {
                on_event(c, ev, seen);
            }
            while let Some(ev) = c.conn.poll_endpoint_events() {
                if let Some(ev) = ep.handle_event(ch, ev) {
                    c.conn.handle_event(ev);
                }
            }
            c.batch = 0;
            loop {
                tx.clear();
                let Some(t) = c.conn.poll_transmit(now, 10, &mut tx) else {
                    break;
                };
                let seg = t.segment_size.unwrap_or(t.size);
                for d in tx[..t.size].chunks(seg) {
                    let _ = sock.send_to(d, t.destination);
                }
            }
        }
        conns.retain(|_, c| !c.conn.is_drained());
    }
}

fn on_event(c: &mut Conn, ev: Event, seen: &Mutex<Seen>) {
    match ev {
        Event::Connected => {
            // A client that closes as soon as it connected (the preflight) leaves no room.
            let Some(id) = c.conn.streams().open(Dir::Uni) else {
                return;
            };
            let mut out = vec![stream_type::CONTROL as u8];
            frame::write_settings(&mut out, &[]);
            c.conn.send_stream(id).write(&out).unwrap();
        }
        Event::Stream(StreamEvent::Opened { dir }) => {
            while let Some(id) = c.conn.streams().accept(dir) {
                if dir == Dir::Bi {
                    c.reqs.insert(
                        id,
                        Req {
                            frames: FrameReader::new(Role::Request, 1 << 16),
                            fields: Vec::new(),
                        },
                    );
                    c.batch += 1;
                    let mut s = seen.lock().unwrap();
                    s.max_open = s.max_open.max(c.batch);
                } else {
                    c.uni.insert(id, Vec::new());
                }
                read(c, id, seen);
            }
        }
        Event::Stream(StreamEvent::Readable { id }) => read(c, id, seen),
        _ => {}
    }
}

/// Reads what stream `id` has; a whole request is answered.
fn read(c: &mut Conn, id: StreamId, seen: &Mutex<Seen>) {
    let mut data = Vec::new();
    let mut fin = false;
    {
        let mut recv = c.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => data.extend_from_slice(&chunk.bytes),
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    c.reqs.remove(&id);
                    return;
                }
            }
        }
        let _ = chunks.finalize();
    }
    if let Some(u) = c.uni.get_mut(&id) {
        u.extend_from_slice(&data);
        if u.first() == Some(&(stream_type::CONTROL as u8)) {
            let mut r = FrameReader::new(Role::Control, 0);
            let mut input = &u[1..];
            while !input.is_empty() {
                let Ok((n, f)) = r.read(input) else { break };
                input = &input[n..];
                if let Some(Frame::Settings(s)) = f {
                    let mut seen = seen.lock().unwrap();
                    seen.control_settings += 1;
                    seen.qpack_capacity = Some(s.qpack_max_table_capacity);
                    u.clear();
                    u.push(0xff); // read once
                    break;
                }
            }
        }
        return;
    }
    let Some(req) = c.reqs.get_mut(&id) else {
        return;
    };
    let mut input = &data[..];
    while !input.is_empty() {
        let (n, f) = req.frames.read(input).expect("a well-formed request");
        input = &input[n..];
        if let Some(Frame::Headers(section)) = f {
            let fields = &mut req.fields;
            c.decoder
                .decode(section, |n, v| {
                    fields.push((
                        String::from_utf8_lossy(n).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    ))
                })
                .expect("a static-only section");
        }
    }
    if !fin {
        return;
    }
    let req = c.reqs.remove(&id).expect("present");
    let path = req
        .fields
        .iter()
        .find(|(n, _)| n == ":path")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    {
        let mut s = seen.lock().unwrap();
        s.requests += 1;
        if s.fields.is_empty() {
            s.fields = req.fields.clone();
        }
    }
    let mut send = c.conn.send_stream(id);
    if path == "/reset" {
        // H3_REQUEST_REJECTED (RFC 9114 §8.1).
        let _ = send.reset(VarInt::from_u32(0x10b));
        return;
    }
    let status = if path == "/status" { 503 } else { 200 };
    let mut section = Vec::new();
    qpack::encode::prefix(&mut section);
    qpack::encode::status(&mut section, status);
    qpack::encode::field(&mut section, b"content-length", b"5");
    let mut out = Vec::new();
    frame::write_head(&mut out, kind::HEADERS, section.len() as u64);
    out.extend_from_slice(&section);
    frame::write_head(&mut out, kind::DATA, 5);
    out.extend_from_slice(b"hello");
    let n = send.write(&out).unwrap();
    assert_eq!(n, out.len(), "a response fits the stream window");
    send.finish().unwrap();
}

fn options(server: &Server, path: &str, extra: impl FnOnce(&mut LoadOptions)) -> LoadOptions {
    let mut o = LoadOptions {
        url: format!("https://{}{path}", server.addr),
        http3: true,
        insecure: true,
        threads: Some(1),
        connections: 2,
        streams: 8,
        timeout: Duration::from_secs(5),
        ..LoadOptions::default()
    };
    extra(&mut o);
    o
}

fn run(o: &LoadOptions) -> Report {
    let cfg = Config::from_options(o).expect("valid options");
    linerate_load::measure(&cfg).expect("the run")
}

#[test]
fn every_request_is_answered_and_counted() {
    let server = start(100);
    let report = run(&options(&server, "/", |o| o.requests = Some(300)));
    let r = &report.runs[0];
    assert_eq!(r.responses, 300, "{r:?}");
    assert_eq!(r.failed, 0);
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(r.status_codes.get(&200), Some(&300));
    assert!(
        r.latency.count == 300 && r.latency.p50_us > 0,
        "{:?}",
        r.latency
    );
    assert!(r.bytes_read >= 300 * 5, "{}", r.bytes_read);
    let tls = r.tls.as_ref().expect("a TLS report");
    assert!(tls.quic && tls.handshakes >= 2, "{tls:?}");
    assert_eq!(report.setup.protocol, "HTTP/3");
    assert_eq!(report.setup.streams, 8);
    let seen = server.seen.lock().unwrap();
    // The preflight's connection answers nothing, the run's two answer everything.
    assert_eq!(seen.requests, 300);
    // RFC 9114 §6.2.1: each connection opens its control stream with SETTINGS, here with no
    // QPACK dynamic table (RFC 9204 §5).
    assert!(seen.control_settings >= 2, "{seen:?}");
    assert_eq!(seen.qpack_capacity, Some(0));
    let authority = server.addr.to_string();
    let want = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", authority.as_str()),
        (":path", "/"),
    ];
    let got: Vec<(&str, &str)> = seen
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(got, want);
    // Several streams were in flight on a connection at once.
    assert!(seen.max_open > 1, "{seen:?}");
}

/// Streams per connection are capped by the server's MAX_STREAMS (RFC 9000 §4.6), as HTTP/2's
/// are by SETTINGS_MAX_CONCURRENT_STREAMS: asking for 16 gets 3, and the run still completes.
#[test]
fn streams_are_capped_by_the_servers_limit() {
    let server = start(3);
    let report = run(&options(&server, "/", |o| {
        o.requests = Some(200);
        o.connections = 1;
        o.streams = 16;
    }));
    let r = &report.runs[0];
    assert_eq!((r.responses, r.errors.total()), (200, 0), "{r:?}");
    let seen = server.seen.lock().unwrap();
    assert!(seen.max_open <= 3, "{seen:?}");
}

/// A non-2xx status and a reset stream are errors as in the other modes: the status is
/// counted as a response with a bad status, the reset as a lost request.
#[test]
fn bad_statuses_and_resets_are_errors() {
    let server = start(100);
    let r = &run(&options(&server, "/status", |o| o.requests = Some(50))).runs[0];
    assert_eq!((r.responses, r.errors.status), (50, 50), "{r:?}");
    assert_eq!(r.status_codes.get(&503), Some(&50));
    let r = &run(&options(&server, "/reset", |o| o.requests = Some(50))).runs[0];
    assert_eq!(
        (r.responses, r.failed, r.errors.reset),
        (0, 50, 50),
        "{r:?}"
    );
}

/// With `--rate`, requests go out on schedule and latency is measured from the intended
/// send time (so the uncorrected figures are there too).
#[test]
fn a_fixed_rate_is_kept() {
    let server = start(100);
    let r = &run(&options(&server, "/", |o| {
        o.rate = Some(200.0);
        o.duration = Some(Duration::from_millis(500));
    }))
    .runs[0];
    assert_eq!(r.errors.total(), 0, "{r:?}");
    assert!((80..=110).contains(&r.responses), "{}", r.responses);
    assert!(r.latency_uncorrected.is_some());
}

/// Certificates are checked as for `https://` with HTTP/1.1 and HTTP/2: refused by default
/// (a self-signed certificate), trusted with `--cacert`, not checked with `-k`.
#[test]
fn certificates_are_verified_as_for_https() {
    let server = start(100);
    let strict = options(&server, "/", |o| {
        o.insecure = false;
        o.requests = Some(10);
    });
    let cfg = Config::from_options(&strict).unwrap();
    let err = linerate_load::measure(&cfg).unwrap_err().to_string();
    assert!(err.contains("certificate"), "{err}");
    let dir = std::env::temp_dir().join(format!("linerate-h3-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &server.cert_pem).unwrap();
    let trusted = LoadOptions {
        cacert: Some(ca),
        ..strict
    };
    let r = &run(&trusted).runs[0];
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((r.responses, r.errors.total()), (10, 0), "{r:?}");
}

/// Nothing listening: the preflight says so at once (an ICMP refusal), no run starts.
#[test]
fn nothing_listening_is_one_error() {
    let free = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let o = LoadOptions {
        url: format!("https://{addr}/"),
        http3: true,
        insecure: true,
        requests: Some(1),
        timeout: Duration::from_secs(2),
        ..LoadOptions::default()
    };
    let cfg = Config::from_options(&o).unwrap();
    let err = linerate_load::measure(&cfg).unwrap_err().to_string();
    assert!(err.contains("cannot connect"), "{err}");
    // The ICMP refusal is reported as such, not waited out as a timeout.
    assert!(err.to_lowercase().contains("refused"), "{err}");
}

/// `--http3` is QUIC, so https:// only; and it takes streams, not a pipeline.
#[test]
fn options_that_do_not_fit_http3_are_refused() {
    let refused = |o: LoadOptions| Config::from_options(&o).unwrap_err().to_string();
    let base = LoadOptions {
        url: "https://127.0.0.1:1/".into(),
        http3: true,
        ..LoadOptions::default()
    };
    let e = refused(LoadOptions {
        url: "http://127.0.0.1:1/".into(),
        ..base.clone()
    });
    assert!(e.contains("needs an https:// URL"), "{e}");
    let e = refused(LoadOptions {
        pipeline: 4,
        ..base.clone()
    });
    assert!(e.contains("--max-concurrent-streams"), "{e}");
    let e = refused(LoadOptions {
        http2: true,
        ..base.clone()
    });
    assert!(e.contains("--http2 cannot be used with --http3"), "{e}");
    let e = refused(LoadOptions {
        tls_version: Some(linerate_load::options::TlsVersion::V12),
        ..base.clone()
    });
    assert!(e.contains("--tls-version 1.2"), "{e}");
    let e = refused(LoadOptions {
        headers: vec!["Connection: close".into()],
        ..base
    });
    assert!(e.contains("RFC 9114"), "{e}");
}
