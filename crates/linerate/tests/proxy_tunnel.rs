//! Upgrade passthrough (`serve --proxy`): an upgrade request goes upstream with its
//! `Upgrade` and `Connection: upgrade`; a 101 makes the client's connection and the upstream
//! connection one byte tunnel, both ways, with backpressure; either side's end ends it. Any
//! other answer closes the client's connection, since what it sent after the request was not
//! known to be HTTP. Upstreams here are std `TcpListener`s that answer 101 and then echo,
//! and `linerate serve`'s own WebSocket echo, driven through the proxy by `linerate load --ws`.
//!
//! No timing is asserted; every read has a timeout and every process started here is killed
//! when its guard drops.

mod common;
mod load_common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;

use common::READ_TIMEOUT;
use common::bin::{Served, serve};

const SWITCHING: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

fn upgrade_request(path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: keep-alive, Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// What an upstream connection saw: the request head, and how its tunnel ended.
struct Seen {
    head: String,
    /// Bytes the upstream read after the head (echoed back as they came).
    tunnelled: usize,
    /// The proxy closed its side (EOF) rather than the upstream ending first.
    eof: bool,
}

/// An upstream that answers the first request on each connection with `answer`; after a
/// 101 it echoes every byte until EOF (or until it has echoed `close_after` bytes, then
/// closes). Each connection's [`Seen`] goes to the returned channel.
fn upstream(
    answer: &'static [u8],
    close_after: Option<usize>,
) -> (SocketAddr, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 65536];
                let end = loop {
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                s.write_all(answer).unwrap();
                let mut seen = Seen {
                    head,
                    tunnelled: 0,
                    eof: false,
                };
                if !answer.starts_with(b"HTTP/1.1 101") {
                    let _ = tx.send(seen);
                    // Keep the connection (pooled by the proxy) until the proxy closes it.
                    let _ = s.read(&mut chunk);
                    return;
                }
                let mut pending = buf.split_off(end);
                loop {
                    if !pending.is_empty() {
                        let n = close_after
                            .map_or(pending.len(), |c| pending.len().min(c - seen.tunnelled));
                        s.write_all(&pending[..n]).unwrap();
                        seen.tunnelled += n;
                        pending.clear();
                        if close_after == Some(seen.tunnelled) {
                            break;
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) => {
                            seen.eof = true;
                            break;
                        }
                        Ok(n) => pending.extend_from_slice(&chunk[..n]),
                        Err(_) => break,
                    }
                }
                let _ = tx.send(seen);
            });
        }
    });
    (addr, rx)
}

fn proxy_to(addr: SocketAddr) -> Served {
    let spec = format!("/=http://{addr}");
    serve(&["--app", "none", "--proxy", &spec])
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s
}

/// Reads one response head (bytes after it are returned too).
fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(p + 4);
            return (String::from_utf8_lossy(&buf).into_owned(), rest);
        }
        let n = s.read(&mut chunk).expect("a response head");
        assert!(
            n > 0,
            "closed before a head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn read_exact_from(s: &mut TcpStream, mut have: Vec<u8>, len: usize) -> Vec<u8> {
    let mut chunk = vec![0u8; 65536];
    while have.len() < len {
        let n = s.read(&mut chunk).expect("tunnel bytes");
        assert!(n > 0, "closed after {} of {len} bytes", have.len());
        have.extend_from_slice(&chunk[..n]);
    }
    have
}

/// Whether the peer closed (EOF or reset) before anything else came.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(n) => panic!("more bytes: {:?}", String::from_utf8_lossy(&b[..n])),
        Err(e) => e.kind() == ErrorKind::ConnectionReset,
    }
}

fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn a_101_makes_a_byte_tunnel_that_carries_early_and_later_bytes_both_ways() {
    let (up, seen) = upstream(SWITCHING, None);
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    // Bytes right behind the request (a client may send them before the 101) are the
    // tunnel's, never parsed as a request here.
    let early = b"GET /not-a-request HTTP/1.1\r\nHost: x\r\n\r\n";
    c.write_all(&[upgrade_request("/chat?room=1").as_slice(), early].concat())
        .unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert_eq!(field(&head, "upgrade"), Some("websocket"));
    assert_eq!(field(&head, "connection"), Some("upgrade"));
    assert_eq!(
        field(&head, "sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert_eq!(field(&head, "content-length"), None);
    assert_eq!(field(&head, "transfer-encoding"), None);
    let echoed = read_exact_from(&mut c, rest, early.len());
    assert_eq!(echoed, early);

    // WebSocket-like frames and HTTP-looking bytes alike pass as they are.
    for msg in [
        &b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"[..],
        b"HTTP/1.1 200 OK\r\n\r\n",
    ] {
        c.write_all(msg).unwrap();
        assert_eq!(read_exact_from(&mut c, Vec::new(), msg.len()), msg);
    }

    // The client's end reaches the upstream as EOF, and the client's connection closes.
    c.shutdown(Shutdown::Write).unwrap();
    assert!(closed(&mut c));
    let seen = seen
        .recv_timeout(READ_TIMEOUT)
        .expect("the upstream saw the request");
    assert!(seen.eof, "the upstream saw the client's end");
    assert!(
        seen.head.starts_with("GET /chat?room=1 HTTP/1.1\r\n"),
        "{}",
        seen.head
    );
    assert_eq!(field(&seen.head, "upgrade"), Some("websocket"));
    let connection = field(&seen.head, "connection")
        .unwrap()
        .to_ascii_lowercase();
    assert_eq!(
        connection, "upgrade",
        "keep-alive is this hop's, upgrade is asked"
    );
    assert_eq!(
        field(&seen.head, "sec-websocket-key"),
        Some("dGhlIHNhbXBsZSBub25jZQ==")
    );
    assert_eq!(field(&seen.head, "sec-websocket-version"), Some("13"));
    assert_eq!(seen.tunnelled, early.len() + 11 + 19);
}

#[test]
fn megabytes_pass_both_ways_at_once_byte_exact() {
    let (up, _seen) = upstream(SWITCHING, None);
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    c.write_all(&upgrade_request("/bulk")).unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(rest.is_empty());
    // More than the tunnel holds either way (64 KiB), and more than the socket buffers: the
    // writer is held back while the echo is read on this thread.
    let data: Vec<u8> = (0..8 << 20)
        .map(|i: u32| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect();
    let mut w = c.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
    let got = read_exact_from(&mut c, Vec::new(), data.len());
    writer.join().unwrap();
    assert!(got == data, "the echo differs from what was sent");
}

#[test]
fn the_upstreams_end_closes_the_clients_connection_after_its_last_bytes() {
    let (up, seen) = upstream(SWITCHING, Some(5));
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    c.write_all(&upgrade_request("/")).unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    c.write_all(b"hello, and more").unwrap();
    assert_eq!(read_exact_from(&mut c, rest, 5), b"hello");
    assert!(closed(&mut c), "the upstream's end ends the tunnel");
    let seen = seen.recv_timeout(READ_TIMEOUT).unwrap();
    assert!(!seen.eof);
}

#[test]
fn an_upgrade_the_upstream_refuses_is_answered_and_the_connection_closes() {
    const REFUSED: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\nno";
    let (up, seen) = upstream(REFUSED, None);
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    c.write_all(
        &[
            upgrade_request("/"),
            b"GET /second HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ]
        .concat(),
    )
    .unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(field(&head, "connection"), Some("close"));
    assert_eq!(read_exact_from(&mut c, rest, 2), b"no");
    assert!(
        closed(&mut c),
        "what followed the upgrade request is never read"
    );
    let seen = seen.recv_timeout(READ_TIMEOUT).unwrap();
    assert!(seen.head.starts_with("GET / HTTP/1.1"));
}

#[test]
fn a_request_without_connection_upgrade_is_plain_http_and_upgrade_is_not_forwarded() {
    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (up, seen) = upstream(OK, None);
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    // RFC 9110 §7.8: Upgrade is only asked with Connection: upgrade.
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
        .unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(
        field(&head, "connection"),
        None,
        "the connection stays open"
    );
    assert_eq!(read_exact_from(&mut c, rest, 2), b"ok");
    drop(c);
    let seen = seen.recv_timeout(READ_TIMEOUT).unwrap();
    assert_eq!(field(&seen.head, "upgrade"), None, "{}", seen.head);
}

#[test]
fn linerate_websocket_behind_the_linerate_proxy_echoes_every_message() {
    // The upstream is the demo (its `/ws` echo); the proxy tunnels each upgrade to it.
    let upstream = serve(&[]);
    let proxy = proxy_to(upstream.addr);
    let url = format!("ws://{}/ws", proxy.addr);
    for (n, flags) in [
        (2000, &["-p", "4"][..]),
        (200, &["--message-size", "70000", "--binary"][..]),
    ] {
        let count = n.to_string();
        let mut line = vec!["-t", "1", "-c", "8", "-n", &count];
        line.extend_from_slice(flags);
        line.push(&url);
        load_common::assert_exact(&load_common::measure(&line), n);
    }
}

/// Regression: a refused CONNECT left the connection open, and the client's tunnel
/// bytes behind it were read as a request and proxied.
#[test]
fn bytes_after_a_refused_connect_are_never_read_as_a_request() {
    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (up, _seen) = upstream(OK, None);
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    // RFC 9110 §9.3.6: a client may send the tunnel's bytes before the answer.
    c.write_all(
        b"CONNECT internal.example:80 HTTP/1.1\r\nHost: internal.example:80\r\n\r\n\
          GET /admin HTTP/1.1\r\nHost: internal.example\r\n\r\n",
    )
    .unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 501"), "{head}");
    assert_eq!(field(&head, "connection"), Some("close"));
    let len: usize = field(&head, "content-length").unwrap().parse().unwrap();
    read_exact_from(&mut c, rest, len);
    assert!(
        closed(&mut c),
        "the bytes after the CONNECT got an answer of their own"
    );
}

const H2C_SWITCHING: &[u8] =
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n";

fn h2c_request() -> &'static [u8] {
    b"GET / HTTP/1.1\r\nHost: edge\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\
      HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
}

/// Regression: `Upgrade: h2c` went upstream, and a lenient upstream's 101 made a
/// tunnel: the client's later requests reached it raw, without Via, X-Forwarded-For or
/// forward auth. Only the mount's `upgrades` (default: websocket) go up; h2c is asked as
/// plain HTTP, so an upstream's 101 to it is refused here.
#[test]
fn an_h2c_upgrade_is_not_forwarded_unless_the_mount_allows_it() {
    let (up, seen) = upstream(H2C_SWITCHING, None);
    let proxy = proxy_to(up);
    let mut c = connect(proxy.addr);
    c.write_all(h2c_request()).unwrap();
    let (head, _) = read_head(&mut c);
    assert!(!head.starts_with("HTTP/1.1 101"), "a tunnel: {head}");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    let seen = seen.recv_timeout(READ_TIMEOUT).unwrap();
    assert_eq!(field(&seen.head, "upgrade"), None, "{}", seen.head);
    assert!(
        !seen.head.to_ascii_lowercase().contains("http2-settings"),
        "{}",
        seen.head
    );
    drop(c);

    // A mount that lists it tunnels it (`upgrades` in the config file).
    let (up, seen) = upstream(H2C_SWITCHING, None);
    let d = std::env::temp_dir().join(format!("linerate-h2c-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{up}\"]\n\
             [[site]]\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n\
             upgrades = [\"websocket\", \"H2C\"]\n"
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = connect(proxy.addr);
    c.write_all(h2c_request()).unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    assert_eq!(
        read_exact_from(&mut c, rest, 24),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    );
    c.shutdown(Shutdown::Write).unwrap();
    let seen = seen.recv_timeout(READ_TIMEOUT).unwrap();
    assert_eq!(field(&seen.head, "upgrade"), Some("h2c"), "{}", seen.head);
    let _ = std::fs::remove_dir_all(&d);
}
