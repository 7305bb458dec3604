//! The real client address, as `linerate serve` finds it behind an L4 balancer (PROXY
//! protocol v1 and v2, written as raw bytes) and behind trusted HTTP proxies
//! (`X-Forwarded-For`), and what uses it: the access log, the access rules and the fields a
//! proxied request carries upstream. A listener that expects a PROXY header closes a
//! connection without a valid one.
//! Servers bind 127.0.0.1 / ::1 on OS-chosen ports and are stopped when the test ends.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::bin::serve_as as serve;
use common::{Client, eventually};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-client-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `remote_addr` of each JSON access-log line in `log`, once there are `n`.
fn logged_addrs(log: &Path, n: usize) -> Vec<String> {
    let mut addrs = Vec::new();
    eventually(
        &format!("{n} access-log lines in {}", log.display()),
        || {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            addrs = text
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["remote_addr"].as_str().unwrap_or("-").to_string()
                })
                .collect();
            addrs.len() >= n
        },
    );
    addrs
}

/// A version 2 PROXY header (PROXY command, TCP over IPv4 or IPv6) from `src`.
fn v2(src: SocketAddr) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21".to_vec();
    let mut block = Vec::new();
    match src {
        SocketAddr::V4(a) => {
            h.push(0x11);
            block.extend_from_slice(&a.ip().octets());
            block.extend_from_slice(&[127, 0, 0, 1]);
            block.extend_from_slice(&a.port().to_be_bytes());
            block.extend_from_slice(&80u16.to_be_bytes());
        }
        SocketAddr::V6(a) => {
            h.push(0x21);
            block.extend_from_slice(&a.ip().octets());
            block.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
            block.extend_from_slice(&a.port().to_be_bytes());
            block.extend_from_slice(&80u16.to_be_bytes());
        }
    }
    // A TLV (PP2_TYPE_AUTHORITY), as balancers send: read past, not used.
    block.extend_from_slice(&[0x02, 0, 6]);
    block.extend_from_slice(b"a.test");
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(&block);
    h
}

fn request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n").into_bytes()
}

/// Reads until the server closes; the connection must end with no byte of an answer (a FIN,
/// or a reset where our bytes were still unread).
fn expect_closed_silently(mut s: TcpStream) {
    s.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => assert!(
            got.is_empty(),
            "answered: {:?}",
            String::from_utf8_lossy(&got)
        ),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
}

#[test]
fn proxy_protocol_v1_and_v2_name_the_client_for_the_log_and_the_access_rules() {
    let d = dir("pp");
    let log = d.join("access.log");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        "access_log = \"access.log\"\naccess_log_format = \"json\"\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nproxy_protocol = true\n\
         [[site]]\ndefault = true\napp = \"demo\"\n\
         [[site.access]]\nprefix = \"/plaintext\"\nrules = [\"deny 192.0.2.0/24\", \"deny 2001:db8::/32\"]\n",
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);

    // (bytes before the request, path, status): each connection's header names its client.
    let v1 = b"PROXY TCP4 203.0.113.7 127.0.0.1 40000 80\r\n".to_vec();
    let v6 = "[2001:db8::5]:443".parse().unwrap();
    let rows: Vec<(Vec<u8>, &str, u16)> = vec![
        (v1.clone(), "/json", 200),
        (v2("192.0.2.9:5000".parse().unwrap()), "/plaintext", 403),
        (v2("198.51.100.3:5000".parse().unwrap()), "/plaintext", 200),
        (v2(v6), "/plaintext", 403),
        (b"PROXY TCP6 2001:db8::6 ::1 1 2\r\n".to_vec(), "/json", 200),
        // v2 LOCAL (a balancer's health check) and v1 UNKNOWN: the connection's own address.
        (
            b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00".to_vec(),
            "/json",
            200,
        ),
        (b"PROXY UNKNOWN\r\n".to_vec(), "/json", 200),
    ];
    for (header, path, status) in &rows {
        let mut c = Client::connect(s.addr);
        let mut bytes = header.clone();
        bytes.extend_from_slice(&request(path));
        c.send(&bytes);
        assert_eq!(c.read_response().status, *status, "{path} after {header:?}");
        // Later requests on the connection keep its client.
        assert_eq!(c.get("/json").status, 200);
    }
    // A header that arrives a few bytes at a time, then the request in the same write as its
    // last bytes.
    let mut c = Client::connect(s.addr);
    let header = v2("192.0.2.10:1".parse().unwrap());
    for piece in header[..20].chunks(3) {
        c.send(piece);
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut rest = header[20..].to_vec();
    rest.extend_from_slice(&request("/plaintext"));
    c.send(&rest);
    assert_eq!(c.read_response().status, 403);

    let addrs = logged_addrs(&log, 2 * rows.len() + 1);
    let want = [
        "203.0.113.7",
        "192.0.2.9",
        "198.51.100.3",
        "2001:db8::5",
        "2001:db8::6",
        "127.0.0.1",
        "127.0.0.1",
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(addrs[2 * i], *w, "line {} of {addrs:?}", 2 * i);
        assert_eq!(addrs[2 * i + 1], *w, "line {} of {addrs:?}", 2 * i + 1);
    }
    assert_eq!(addrs[2 * rows.len()], "192.0.2.10");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_listener_that_expects_a_proxy_header_closes_a_connection_without_one() {
    let s = common::bin::serve(&["--proxy-protocol"]);
    let mut too_long = b"PROXY UNKNOWN ".to_vec();
    too_long.resize(120, b'x');
    let refused: Vec<&[u8]> = vec![
        // A client that came around the balancer.
        b"GET /json HTTP/1.1\r\nHost: a\r\n\r\n",
        // Malformed: two spaces, a port with a leading zero, a bare LF, a DGRAM v2 header.
        b"PROXY TCP4  203.0.113.7 127.0.0.1 1 2\r\n",
        b"PROXY TCP4 203.0.113.7 127.0.0.1 01 2\r\n",
        b"PROXY TCP4 203.0.113.7 127.0.0.1 1 2\nGET / HTTP/1.1\r\n\r\n",
        b"\r\n\r\n\0\r\nQUIT\n\x21\x12\x00\x0c\xc0\x00\x02\x07\x7f\x00\x00\x01\x00\x01\x00\x02",
        // Longer than a v1 header can be.
        &too_long,
    ];
    for bytes in refused {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.write_all(bytes).unwrap();
        expect_closed_silently(c);
    }
    // The listener still serves a connection with a good header.
    let mut c = Client::connect(s.addr);
    c.send(b"PROXY TCP4 203.0.113.7 127.0.0.1 1 2\r\n");
    assert_eq!(c.get("/json").status, 200);
}

#[test]
fn trusted_proxies_name_the_client_for_the_log_the_rules_and_the_upstream() {
    let d = dir("xff");
    let log = d.join("access.log");
    let file = d.join("linerate.toml");
    let (up, heads) = common::recording_upstream();
    std::fs::write(
        &file,
        format!(
            "access_log = \"access.log\"\naccess_log_format = \"json\"\n\
             trusted_proxies = [\"127.0.0.0/8\", \"10.0.0.0/8\"]\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n[[listen]]\naddr = \"[::1]:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{up}\"]\n\
             [[site]]\ndefault = true\napp = \"demo\"\n\
             [[site.access]]\nprefix = \"/plaintext\"\nrules = [\"deny 192.0.2.0/24\"]\n\
             [[site.proxy]]\nprefix = \"/api\"\nupstream = \"app\"\n"
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let v6 = s.also_on();
    let get = |addr: SocketAddr, path: &str, xff: &str| {
        let mut c = Client::connect(addr);
        c.send(
            format!("GET {path} HTTP/1.1\r\nHost: a.test\r\nX-Forwarded-For: {xff}\r\n\r\n")
                .as_bytes(),
        );
        c.read_response().status
    };
    // From a trusted proxy (127.0.0.1): the rightmost address it did not add is the client,
    // whatever the client wrote on the left.
    assert_eq!(
        get(s.addr, "/plaintext", "6.6.6.6, 192.0.2.1, 10.1.1.1"),
        403
    );
    assert_eq!(get(s.addr, "/plaintext", "192.0.2.1, 198.51.100.4"), 200);
    // From ::1, which is not trusted, the field is not believed.
    assert_eq!(get(v6, "/plaintext", "192.0.2.1"), 200);
    // The upstream is told the client, not the proxy in front.
    assert_eq!(get(s.addr, "/api/x", "198.51.100.9"), 200);
    let head = heads.recv_timeout(common::READ_TIMEOUT).unwrap();
    let xff: Vec<&str> = head
        .lines()
        .filter_map(|l| l.strip_prefix("X-Forwarded-For: "))
        .collect();
    assert_eq!(xff, ["198.51.100.9"], "{head}");
    let addrs = logged_addrs(&log, 4);
    assert_eq!(addrs, ["192.0.2.1", "198.51.100.4", "::1", "198.51.100.9"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_client_over_its_connection_limit_is_closed_and_counted_by_its_proxy_header() {
    let s = common::bin::serve(&["--max-conns-per-client", "2"]);
    let mut first = Client::connect(s.addr);
    assert_eq!(first.get("/json").status, 200);
    let mut second = Client::connect(s.addr);
    assert_eq!(second.get("/json").status, 200);
    let mut third = TcpStream::connect(s.addr).unwrap();
    third.write_all(&request("/json")).unwrap();
    expect_closed_silently(third);
    // Once one closes, the client may connect again.
    drop(first);
    eventually("a connection after one of two closed", || {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
        c.write_all(&request("/json")).unwrap();
        let mut got = [0u8; 12];
        matches!(c.read_exact(&mut got), Ok(())) && got.starts_with(b"HTTP/1.1 200")
    });
    assert_eq!(second.get("/json").status, 200);

    // Behind a balancer every connection comes from its address: the header's client is
    // the one counted.
    let s = common::bin::serve(&["--max-conns-per-client", "1", "--proxy-protocol"]);
    let with_header = |client: &str| {
        let mut c = Client::connect(s.addr);
        c.send(format!("PROXY TCP4 {client} 127.0.0.1 1 2\r\n").as_bytes());
        c
    };
    let mut a = with_header("192.0.2.1");
    assert_eq!(a.get("/json").status, 200);
    let mut b = with_header("192.0.2.2");
    assert_eq!(b.get("/json").status, 200);
    let mut again = TcpStream::connect(s.addr).unwrap();
    let mut bytes = b"PROXY TCP4 192.0.2.1 127.0.0.1 3 4\r\n".to_vec();
    bytes.extend_from_slice(&request("/json"));
    again.write_all(&bytes).unwrap();
    expect_closed_silently(again);
    assert_eq!(a.get("/json").status, 200);
}
