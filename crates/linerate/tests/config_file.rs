//! `linerate serve --config FILE` as a user runs it: IPv4 + IPv6 + Unix-socket + HTTPS
//! listeners, two sites chosen by Host (and the default one for an unknown Host), redirects,
//! fields by prefix and extension, dotfiles, error pages, flags over the file, privilege drop
//! (over raw sockets, and the same with curl as the client); `--check-config`, and one test per
//! class of mistake, each a single FILE:LINE:COLUMN line.
//! Servers bind 127.0.0.1 / ::1 on ports the test picks (port 0 where the banner tells).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::bin::{BIN, run_err, serve_as as serve};
use common::{Client, Resp, free_port};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-conf-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two site roots, an error page and a certificate in `d`.
fn tree(d: &Path) {
    for (p, body) in [
        ("one/index.html", "<h1>one</h1>\n"),
        ("one/app.js", "console.log(1)\n"),
        ("one/assets/logo.svg", "<svg/>\n"),
        ("one/.env", "SECRET=1\n"),
        ("one/.well-known/security.txt", "Contact: x\n"),
        ("two/index.html", "<h1>two</h1>\n"),
        ("404.html", "<h1>nothing here</h1>\n"),
    ] {
        let path = d.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let ck = rcgen::generate_simple_self_signed(vec!["one.test".to_string()]).unwrap();
    std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
}

fn get(addr: SocketAddr, host: &str, path: &str) -> Resp {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    c.read_response()
}

const SITES: &str = r#"
[[site]]
names = ["one.test", "*.one.test"]
root = [{ prefix = "/", dir = "one" }]
error_pages = { 404 = "404.html" }

[[site.redirect]]
prefix = "/old/"
to = "/new/{rest}{query}"
status = 308

[[site.headers]]
prefix = "/assets/"
fields = { "Cache-Control" = "max-age=31536000, immutable" }

[[site.headers]]
extensions = ["js"]
fields = { "X-Content-Type-Options" = "nosniff" }

[[site]]
names = ["two.test"]
default = true
app = "demo"
compression = false
max_body_bytes = "64"
root = [{ prefix = "/files", dir = "two" }]
"#;

/// Serves [`SITES`] from `d` on every kind of listener: 127.0.0.1 and ::1 on free ports
/// (returned), the Unix socket `d/linerate.sock`, and HTTPS on 127.0.0.1 (port in the banner).
fn serve_every_listener(d: &Path) -> (common::bin::Served, u16, u16) {
    let (p4, p6) = (free_port("127.0.0.1"), free_port("::1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[[listen]]
addr = "127.0.0.1:{p4}"
[[listen]]
addr = "[::1]:{p6}"
[[listen]]
unix = "linerate.sock"
[[listen]]
addr = "127.0.0.1:0"
tls = {{ cert = "cert.pem", key = "key.pem" }}
{SITES}"#
        ),
    )
    .unwrap();
    (serve(&["--config", file.to_str().unwrap()]), p4, p6)
}

#[test]
fn sites_listeners_and_rules_from_one_file() {
    let d = dir("full");
    tree(&d);
    let sock = d.join("linerate.sock");
    let (s, p4, p6) = serve_every_listener(&d);
    let v4: SocketAddr = format!("127.0.0.1:{p4}").parse().unwrap();
    let v6: SocketAddr = format!("[::1]:{p6}").parse().unwrap();
    assert_eq!(s.addr, v4);

    // Two sites by Host, on both families; an unknown Host gets the default site.
    for addr in [v4, v6] {
        assert_eq!(get(addr, "one.test", "/").text(), "<h1>one</h1>\n");
        assert_eq!(get(addr, "www.one.test:8080", "/").text(), "<h1>one</h1>\n");
        assert_eq!(get(addr, "two.test", "/files/").text(), "<h1>two</h1>\n");
        assert_eq!(
            get(addr, "elsewhere.test", "/plaintext").text(),
            "Hello, World!"
        );
    }
    // The demo is mounted only on the site that asks for it.
    assert_eq!(get(v4, "one.test", "/plaintext").status, 404);
    // Redirect with the rest of the path and the query substituted.
    let r = get(v4, "one.test", "/old/a/b?x=1");
    assert_eq!(
        (r.status, r.header("location")),
        (308, Some("/new/a/b?x=1"))
    );
    // Fields by prefix and by extension.
    let r = get(v4, "one.test", "/assets/logo.svg");
    assert_eq!(
        r.header("cache-control"),
        Some("max-age=31536000, immutable")
    );
    assert_eq!(r.header("x-content-type-options"), None);
    let r = get(v4, "one.test", "/app.js");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("cache-control"), None);
    // Dotfiles are denied (as absent: the error page), .well-known is served.
    let r = get(v4, "one.test", "/.env");
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), "<h1>nothing here</h1>\n");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        get(v4, "one.test", "/.well-known/security.txt").text(),
        "Contact: x\n"
    );
    // Compression is off on site two (a BREACH-prone mix opts out per site).
    let mut c = Client::connect(v4);
    c.send(b"GET /json/50 HTTP/1.1\r\nHost: two.test\r\nAccept-Encoding: gzip\r\n\r\n");
    let r = c.read_response();
    assert_eq!((r.status, r.header("content-encoding")), (200, None));
    // The other site has no error page: the server's own body.
    assert_eq!(get(v4, "two.test", "/nope").text(), "Not Found\n");
    // Site two's body limit (64 bytes) against the server's (1 MiB) on site one.
    let post = |host: &str, len: usize| {
        let mut c = Client::connect(v4);
        let body = "1".repeat(len);
        c.send(
            format!("POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len}\r\n\r\n{body}")
                .as_bytes(),
        );
        c.read_response().status
    };
    assert_eq!(post("two.test", 64), 200);
    assert_eq!(post("two.test", 65), 413);
    assert_eq!(post("three.test", 65), 413, "the default site is two");
    let mut c = Client::connect(v4);
    let chunk = "1".repeat(100);
    c.send(format!("POST / HTTP/1.1\r\nHost: two.test\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n{chunk}\r\n0\r\n\r\n").as_bytes());
    assert_eq!(
        c.read_response().status,
        413,
        "a chunked body is held to it too"
    );

    // The Unix socket serves the same sites.
    let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    u.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    u.write_all(b"GET / HTTP/1.1\r\nHost: one.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    u.read_to_string(&mut out).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with("<h1>one</h1>\n"),
        "{out}"
    );

    // HTTPS on its own listener with its own certificate.
    let https: SocketAddr = s
        .banner
        .iter()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("https://")))
        .expect("https listener in the banner")
        .trim_start_matches("https://")
        .parse()
        .unwrap();
    let body = https_get(https, &d.join("cert.pem"), "one.test", "/");
    assert!(body.ends_with("<h1>one</h1>\n"), "{body}");
    let mut s = s;
    common::bin::signal(&s.child, rustix::process::Signal::TERM);
    assert!(common::bin::wait_exit(&mut s.child, std::time::Duration::from_secs(15)).success());
    assert!(!sock.exists(), "the Unix socket file is removed at exit");
    let _ = std::fs::remove_dir_all(&d);
}

fn https_get(addr: SocketAddr, ca: &Path, host: &str, path: &str) -> String {
    https_try(addr, ca, host, path).expect("HTTPS request")
}

/// [`https_get`], or the error when the handshake or the exchange fails.
fn https_try(addr: SocketAddr, ca: &Path, host: &str, path: &str) -> std::io::Result<String> {
    let pem = std::fs::read(ca).unwrap();
    let der = rustls::pki_types::CertificateDer::from(rcgen_pem_to_der(&pem));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let config = Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(common::READ_TIMEOUT))?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The DER bytes of the first PEM block.
fn rcgen_pem_to_der(pem: &[u8]) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem)
        .unwrap()
        .to_vec()
}

#[test]
fn flags_given_override_the_file() {
    let d = dir("override");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[limits]\nmax_head_bytes = \"16KiB\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n{SITES}"
        ),
    )
    .unwrap();
    // The file's limit lets a 300-byte request line through; the flag's does not.
    let long = format!("/{}", "a".repeat(300));
    let s = serve(&["--config", file.to_str().unwrap()]);
    assert_eq!(get(s.addr, "one.test", &long).status, 404);
    drop(s);
    let s = serve(&[
        "--config",
        file.to_str().unwrap(),
        "--max-head-bytes",
        "200",
    ]);
    assert_eq!(get(s.addr, "one.test", &long).status, 414);
    drop(s);
    // --addr replaces the file's listeners.
    let port = free_port("127.0.0.1");
    let addr = format!("127.0.0.1:{port}");
    let s = serve(&["--config", file.to_str().unwrap(), "--addr", &addr]);
    assert_eq!(s.addr.to_string(), addr);
    assert_eq!(get(s.addr, "one.test", "/").text(), "<h1>one</h1>\n");
    drop(s);
    // Sites come from the file only.
    let (code, stderr) = run_err(&["serve", "--config", file.to_str().unwrap(), "--root", "."]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--root cannot be combined with --config"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A `tls = "acme"` site with a wildcard was refused whatever the
/// challenge; with `challenge = "dns-01"` (and BIND's key file) it is taken, and with the
/// default HTTP-01 it is still refused, now pointing at DNS-01.
#[test]
fn a_wildcard_acme_site_is_taken_with_dns01_only() {
    let d = dir("dns01");
    std::fs::write(
        d.join("tsig.key"),
        "key \"linerate.\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\";\n};\n",
    )
    .unwrap();
    let site = "[[listen]]\naddr = \"127.0.0.1:8443\"\ntls = {}\n[[site]]\nnames = [\"fleet.test\", \"*.fleet.test\"]\ntls = \"acme\"\n";
    let check = |acme: &str| {
        let file = d.join("linerate.toml");
        std::fs::write(&file, format!("[acme]\nstorage = \"store\"\n{acme}{site}")).unwrap();
        std::process::Command::new(BIN)
            .args(["serve", "--check-config"])
            .arg(&file)
            .output()
            .unwrap()
    };
    let out = check(
        "challenge = \"dns-01\"\ndns = { server = \"127.0.0.1:53\", key_file = \"tsig.key\" }\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = check("");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "cannot cover the wildcard \"*.fleet.test\" with this challenge (it needs DNS-01"
        ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn check_config_says_ok_with_a_summary() {
    let d = dir("check");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!("[[listen]]\naddr = \"127.0.0.1:8080\"\n[[listen]]\naddr = \"[::]:8443\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n[[listen]]\naddr = \"127.0.0.1:8443\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\nquic = true\n{SITES}"),
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["serve", "--check-config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(": ok (3 listeners: 127.0.0.1:8080, [::]:8443 (TLS), 127.0.0.1:8443 (TLS, HTTP/3); 2 sites: one.test *.one.test; two.test [default])"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn every_mistake_is_one_line_with_file_line_and_column() {
    let d = dir("errors");
    tree(&d);
    let listen = "[[listen]]\naddr = \"127.0.0.1:0\"\n";
    let site = "[[site]]\nnames = [\"a.test\"]\n";
    let tls_listen = "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {}\n";
    let taken = free_port("127.0.0.1");
    // A FIFO where a certificate should be: refused, never waited on.
    let fifo = std::process::Command::new("mkfifo")
        .arg(d.join("fifo.pem"))
        .status()
        .expect("mkfifo runs");
    assert!(fifo.success());
    // TLS ticket keys, one of nginx's size (80 bytes) and one too short.
    std::fs::write(d.join("good.key"), [7u8; 80]).unwrap();
    std::fs::write(d.join("short.key"), [7u8; 32]).unwrap();
    // (file text, line:column, message)
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!("{listen}{site}bogus = 1\n"),
            "5:1",
            "unknown field `bogus`",
        ),
        (
            format!("{listen}{site}[[site.proxy]]\nprefix = \"/api\"\nupstream = \"app\"\n"),
            "7:12",
            "no upstream named \"app\"",
        ),
        (
            format!("{listen}[[upstream]]\nname = \"app\"\nservers = [\"localhost\"]\n{site}"),
            "5:12",
            "upstream server: localhost: expected HOST:PORT",
        ),
        (
            // Regression: a URL was looked up in DNS ("failed to lookup address").
            format!("{listen}[[upstream]]\nname = \"app\"\nservers = [\"http://127.0.0.1:9000\"]\n{site}"),
            "5:12",
            "upstream server: http://127.0.0.1:9000: not HOST:PORT",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1 weight=0\"]\n{site}"
            ),
            "5:12",
            "expected weight=N",
        ),
        (
            format!("{listen}[[upstream]]\nname = \"app\"\nservers = []\n{site}"),
            "5:11",
            "upstream \"app\" has no server",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\ntimeout = \"soon\"\n{site}"
            ),
            "6:11",
            "timeout: invalid duration",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nbalance = \"random\"\n{site}"
            ),
            "6:11",
            "balance \"random\": expected \"round_robin\", \"least_conn\" or \"hash\"",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nbalance = \"hash\"\n{site}"
            ),
            "6:11",
            "balance = \"hash\" needs a hash_key",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nbalance = \"hash\"\nhash_key = \"header:\"\n{site}"
            ),
            "7:12",
            "hash_key \"header:\": expected",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nhash_key = \"client\"\n{site}"
            ),
            "6:12",
            "hash_key needs balance = \"hash\"",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nprotocol = \"h2\"\ntls_ca = \"no-such-ca.pem\"\n{site}"
            ),
            "7:10",
            "tls_ca",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nprotocol = \"h2\"\ntls_server_name = \"bad name!\"\n{site}"
            ),
            "7:19",
            "tls_server_name \"bad name!\": not a DNS name or an IP address",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nprotocol = \"h2c\"\ntls_server_name = \"api.test\"\n{site}"
            ),
            "7:19",
            "tls_server_name and tls_ca are for an upstream over TLS (protocol = \"h2\")",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"unix:/run/app.sock\"]\nprotocol = \"h2\"\n{site}"
            ),
            "5:12",
            "a Unix-socket server over TLS needs tls_server_name",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ path = \"/h\" }}\nprotocol = \"h2\"\n{site}"
            ),
            "6:25",
            "health_check path is for HTTP/1.1 upstreams; an HTTP/2 upstream's check is gRPC's health service",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n{site}[[site.proxy]]\nupstream = \"app\"\ngrpc_web = true\n"
            ),
            "10:12",
            "grpc_web translates to gRPC, which needs an HTTP/2 upstream: upstream \"app\" speaks HTTP/1.1",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nprotocol = \"http2\"\n{site}"
            ),
            "6:12",
            "protocol \"http2\": expected \"h1\", \"h2c\" or \"h2\"",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ path = \"/h\" }}\nprotocol = \"h2c\"\n{site}"
            ),
            "6:25",
            "health_check path is for HTTP/1.1 upstreams",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ grpc_service = \"\", status = 200 }}\nprotocol = \"h2c\"\n{site}"
            ),
            "6:46",
            "health_check status is for HTTP/1.1 upstreams",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ grpc_service = \"app\" }}\n{site}"
            ),
            "6:33",
            "health_check grpc_service is for HTTP/2 upstreams",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n{site}[[site.proxy]]\nupstream = \"app\"\nauth = {{ upstream = \"jwt\" }}\n"
            ),
            "10:21",
            "no upstream named \"jwt\"",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n[[upstream]]\nname = \"jwt\"\nservers = [\"127.0.0.1:2\"]\nprotocol = \"h2c\"\n{site}[[site.proxy]]\nupstream = \"app\"\nauth = {{ upstream = \"jwt\" }}\n"
            ),
            "14:21",
            "auth upstream \"jwt\" must speak HTTP/1.1",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n{site}[[site.proxy]]\nupstream = \"app\"\nauth = {{ upstream = \"app\", path = \"verify\" }}\n"
            ),
            "10:35",
            "auth path \"verify\": expected an absolute path",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ path = \"/h\", passes = 0 }}\n{site}"
            ),
            "6:40",
            "passes must be at least 1",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n{site}[[site.proxy]]\nupstream = \"app\"\nforwarded = \"x\"\n"
            ),
            "10:13",
            "forwarded must be",
        ),
        (
            format!(
                "{listen}[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n{site}[[site.proxy]]\nupstream = \"app\"\nupgrades = [\"websocket/13\"]\n"
            ),
            "10:12",
            "upgrades: \"websocket/13\" is not a protocol name",
        ),
        (
            format!("{listen}{site}[[site.root]]\ndir = 5\n"),
            "6:7",
            "invalid type: integer `5`, expected a string",
        ),
        (
            "[[listen]]\naddr = \"localhost:80\"\n".to_string() + site,
            "2:8",
            "invalid listen address \"localhost:80\"",
        ),
        (
            "[[listen]]\nport = 80\n".to_string() + site,
            "2:1",
            "unknown field `port`",
        ),
        (
            "[[listen]]\n".to_string() + site,
            "1:1",
            "a [[listen]] needs addr",
        ),
        (
            format!("[limits]\nheader_timeout = \"soon\"\n{listen}{site}"),
            "2:18",
            "header_timeout: invalid duration",
        ),
        (
            format!("[limits]\nmax_body_bytes = \"lots\"\n{listen}{site}"),
            "2:18",
            "max_body_bytes: invalid size",
        ),
        (
            format!("[limits]\nmin_send_rate = \"0\"\nmax_unsent_bytes = \"lots\"\n{listen}{site}"),
            "3:20",
            "max_unsent_bytes: invalid size \"lots\" (expected e.g. 65536, 64KiB, 1MiB, 32GiB) (or 0 for none)",
        ),
        (
            format!("{listen}{site}[[site.root]]\ndir = \"missing\"\n"),
            "6:7",
            "root ",
        ),
        (
            format!("{listen}{site}[[site.root]]\ndir = \"404.html\"\n"),
            "6:7",
            "is not a directory",
        ),
        (
            format!("{listen}{site}[[site.root]]\nprefix = \"static\"\ndir = \"one\"\n"),
            "6:10",
            "prefix must be a path starting with '/'",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"nope.pem\", key = \"key.pem\" }}\n{site}"
            ),
            "3:16",
            "certificate ",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"404.html\", key = \"key.pem\" }}\n{site}"
            ),
            "3:7",
            "certificate ",
        ),
        (
            format!("{listen}[[site]]\nnames = [\"bad name\"]\n"),
            "4:10",
            "invalid site name \"bad name\"",
        ),
        (
            format!("{listen}{site}[[site]]\nnames = [\"A.test\"]\n"),
            "6:10",
            "site name \"a.test\" is already claimed at line 4",
        ),
        (
            format!(
                "{listen}{site}default = true\n[[site]]\nnames = [\"b.test\"]\ndefault = true\n"
            ),
            "6:1",
            "more than one site says default = true",
        ),
        (
            format!("{listen}{site}app = \"wordpress\"\n"),
            "5:7",
            "app must be \"demo\" or \"none\"",
        ),
        (
            format!(
                "{listen}{site}[[site.redirect]]\nprefix = \"/a\"\nto = \"/b\"\nstatus = 200\n"
            ),
            "8:10",
            "redirect status must be 301, 302, 303, 307 or 308",
        ),
        (
            format!("{listen}{site}[[site.headers]]\nfields = {{ \"Bad Name\" = \"x\" }}\n"),
            "6:10",
            "invalid field \"Bad Name\"",
        ),
        (
            format!("{listen}{site}error_pages = {{ 200 = \"404.html\" }}\n"),
            "5:17",
            "error page status must be 400 to 599",
        ),
        (
            format!("{listen}{site}error_pages = {{ 404 = \"gone.html\" }}\n"),
            "5:23",
            "error page ",
        ),
        (
            format!("workers = 0\n{listen}{site}"),
            "1:11",
            "workers must be at least 1",
        ),
        (
            format!("log_level = \"loud\"\n{listen}{site}"),
            "1:13",
            "log_level must be error",
        ),
        (
            format!("[admin]\naddr = \"nowhere\"\n{listen}{site}"),
            "2:8",
            "invalid admin address \"nowhere\"",
        ),
        (
            format!("access_log_format = \"xml\"\n{listen}{site}"),
            "1:21",
            "access_log_format must be \"combined\", \"json\" or a template of $fields",
        ),
        // A template's mistakes: at the `$` itself when the value is spelled as is.
        (
            format!("access_log_format = '$remote_addr $bogus'\n{listen}{site}"),
            "1:35",
            "access_log_format: unknown field $bogus (fields: $remote_addr",
        ),
        (
            format!("# the log\naccess_log_format = \"$status $\"\n{listen}{site}"),
            "2:30",
            "access_log_format: \"$\" with no field name after it (a literal \"$\" is \"$$\")",
        ),
        (
            format!("access_log_format = '\"${{status\"'\n{listen}{site}"),
            "1:23",
            "access_log_format: \"${\" without its \"}\"",
        ),
        // With a TOML escape before it, the value's own place.
        (
            format!("access_log_format = \"\\\"$x\\\"\"\n{listen}{site}"),
            "1:21",
            "access_log_format: unknown field $x",
        ),
        (
            format!("access_log_format = \"$status\\n$status\"\n{listen}{site}"),
            "1:21",
            "access_log_format: a line break in the template",
        ),
        (
            format!("{listen}{site}[[site.root]]\ndir = \"one\"\ntry_files = [\"index.html\"]\n"),
            "7:13",
            "try_files: \"index.html\" is neither",
        ),
        (
            format!("{listen}{site}types = {{ md = \"markdown\" }}\n"),
            "5:16",
            "types: \"markdown\" is not a media type",
        ),
        (
            format!("[tls]\nmin_version = \"1.1\"\n{listen}{site}"),
            "2:15",
            "min_version \"1.1\": \"1.2\" or \"1.3\"",
        ),
        (
            format!("[tls]\nciphers = [\"TLS_RSA_WITH_RC4_128_MD5\"]\n{listen}{site}"),
            "2:11",
            "unknown cipher suite \"TLS_RSA_WITH_RC4_128_MD5\" (known: TLS_AES_256_GCM_SHA384",
        ),
        (
            format!("[tls]\nalpn = [\"h3\"]\n{listen}{site}"),
            "2:8",
            "alpn: \"h3\" is not served",
        ),
        (
            format!("[tls]\nclient_auth = \"optional\"\n{listen}{site}"),
            "2:15",
            "client_auth needs client_ca",
        ),
        (
            format!("[tls]\nsession_lifetime = \"200h\"\n{listen}{site}"),
            "2:20",
            "session_lifetime: more than 0 and at most 7 days",
        ),
        // A ticket key file of a size nginx does not read, at its place in
        // [tls] and in a listener's tls; no file, no key, or tickets said off beside keys.
        (
            format!("[tls]\nticket_keys = [\"good.key\", \"short.key\"]\n{listen}{site}"),
            "2:28",
            "short.key: 32 bytes; a ticket key is 80 bytes",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\", ticket_keys = [\"short.key\"] }}\n{site}"
            ),
            "3:60",
            "short.key: 32 bytes; a ticket key is 80 bytes (AES-256",
        ),
        (
            format!("[tls]\nticket_keys = [\"no-such.key\"]\n{listen}{site}"),
            "2:16",
            "ticket key ",
        ),
        (
            format!("[tls]\nticket_keys = []\n{listen}{site}"),
            "2:15",
            "ticket_keys: name at least one key file",
        ),
        (
            format!("[tls]\nsession_tickets = false\nticket_keys = [\"good.key\"]\n{listen}{site}"),
            "3:15",
            "ticket_keys turns session tickets on",
        ),
        (
            format!("[tls]\nticket_rotation = \"6h\"\n{listen}{site}"),
            "2:19",
            "ticket_rotation is for the ticket keys a fleet keeps in [storage]",
        ),
        (
            format!("[storage]\ndir = \"shared\"\n[tls]\nticket_rotation = \"30s\"\n{listen}{site}"),
            "4:19",
            "ticket_rotation: at least 1m",
        ),
        (
            format!("{tls_listen}{site}tls = \"acmee\"\n"),
            "6:7",
            "tls must be \"acme\", \"internal\" or { cert",
        ),
        (
            format!("{tls_listen}[[site]]\nnames = [\"*.a.test\"]\ntls = \"acme\"\n"),
            "6:7",
            "cannot cover the wildcard \"*.a.test\" with this challenge (it needs DNS-01: [acme] challenge = \"dns-01\"",
        ),
        (
            format!("[acme]\nchallenge = \"dns-02\"\n{tls_listen}{site}tls = \"acme\"\n"),
            "2:13",
            "challenge must be \"http-01\", \"tls-alpn-01\" or \"dns-01\", not \"dns-02\"",
        ),
        // DNS-01 needs its dns table, a key file BIND's syntax, a known
        // algorithm.
        (
            format!("[acme]\nchallenge = \"dns-01\"\n{tls_listen}{site}tls = \"acme\"\n"),
            "2:13",
            "challenge = \"dns-01\" needs a dns table",
        ),
        (
            format!(
                "[acme]\nchallenge = \"dns-01\"\ndns = {{ server = \"127.0.0.1:53\", key_file = \"cert.pem\" }}\n{tls_listen}{site}tls = \"acme\"\n"
            ),
            "3:45",
            "cert.pem: not a BIND key file: `key` expected",
        ),
        (
            format!(
                "[acme]\nchallenge = \"dns-01\"\ndns = {{ server = \"127.0.0.1:53\", key_name = \"k\", key_secret = \"AAAA\", algorithm = \"hmac-md5\" }}\n{tls_listen}{site}tls = \"acme\"\n"
            ),
            "3:83",
            "unknown TSIG algorithm \"hmac-md5\" (known: hmac-sha256, hmac-sha384, hmac-sha512)",
        ),
        (
            format!(
                "[acme]\ndns = {{ server = \"127.0.0.1:53\", key_file = \"cert.pem\" }}\n{tls_listen}{site}tls = \"acme\"\n"
            ),
            "2:7",
            "dns is for challenge = \"dns-01\"",
        ),
        (
            format!("[acme]\ndirectory = \"http://ca/dir\"\n{tls_listen}{site}tls = \"acme\"\n"),
            "2:13",
            "directory must be an https:// URL",
        ),
        (
            format!("[acme]\neab_kid = \"k\"\n{tls_listen}{site}tls = \"acme\"\n"),
            "2:11",
            "eab_kid without eab_hmac_key",
        ),
        (
            format!("[acme]\nemail = \"nobody\"\n{tls_listen}{site}tls = \"acme\"\n"),
            "2:9",
            "email \"nobody\" is not an e-mail address",
        ),
        (
            format!("[storage]\nnodes = 3\n{listen}{site}"),
            "1:1",
            "[storage] needs dir = \"…\" (a directory every node mounts) or redis",
        ),
        (
            format!("[storage]\ndir = \"s\"\nredis = \"redis://127.0.0.1:6379\"\n{listen}{site}"),
            "3:9",
            "[storage] takes dir or redis, not both",
        ),
        (
            format!("[storage]\nredis = \"127.0.0.1:6379\"\n{listen}{site}"),
            "2:9",
            "redis: not a redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] URL",
        ),
        // What serve refuses (storage::redis_url), refused here the same way, and never with
        // the password in the line.
        (
            format!("[storage]\nredis = \"redis://u:p%zz@h:6379\"\n{listen}{site}"),
            "2:9",
            "redis: the password: a '%' not followed by two hex digits (write '%' as %25)",
        ),
        (
            format!("[storage]\nredis = \"redis://h1:1,h2:2/0\"\n{listen}{site}"),
            "2:9",
            "redis: one host only: several (a cluster, or Sentinels) are not supported",
        ),
        (
            format!("[storage]\nredis = \"rediss://h:6380\"\n{listen}{site}"),
            "2:9",
            "redis: TLS to Redis (rediss://) is not supported yet",
        ),
        (
            format!("[storage]\nredis = \"redis://h:6379/x\"\n{listen}{site}"),
            "2:9",
            "redis: the database \"x\" is not a number",
        ),
        (
            format!("[storage]\nredis = \"redis://127.0.0.1:6379\"\nnodes = 0\n{listen}{site}"),
            "3:9",
            "nodes must be at least 1",
        ),
        // [tracing] and request_id_header, each mistake at its key.
        (
            format!("[tracing]\nendpoint = \"https://c:4318\"\n{listen}{site}"),
            "2:12",
            "https is not supported",
        ),
        (
            format!("[tracing]\nsampler = \"sometimes\"\n{listen}{site}"),
            "2:11",
            "\"sometimes\" is not a sampler",
        ),
        (
            format!("[tracing]\nsampler = \"traceidratio\"\nratio = 2.0\n{listen}{site}"),
            "3:9",
            "the ratio must be a number from 0 to 1",
        ),
        (
            format!("[tracing]\nmax_queue_size = 0\n{listen}{site}"),
            "2:18",
            "must be a count above 0",
        ),
        (
            format!("request_id_header = \"X Id\"\n{listen}{site}"),
            "1:21",
            "\"X Id\" is not a field name",
        ),
        // a fleet rule's counts live in [storage] redis.
        (
            format!("{listen}{site}[[site.rate_limit]]\nrate = \"5r/s\"\nscope = \"fleet\"\n"),
            "7:9",
            "scope = \"fleet\" counts in the fleet's Redis: it needs [storage] redis",
        ),
        (
            format!(
                "[storage]\ndir = \"s\"\n{listen}{site}[[site.rate_limit]]\nrate = \"5r/s\"\nscope = \"fleet\"\n"
            ),
            "9:9",
            "scope = \"fleet\" counts in the fleet's Redis: it needs [storage] redis",
        ),
        (
            format!("{listen}{site}[[site.rate_limit]]\nrate = \"5r/s\"\nscope = \"world\"\n"),
            "7:9",
            "scope must be \"node\" or \"fleet\", not \"world\"",
        ),
        (
            format!("{listen}{site}[[site.rate_limit]]\nrate = \"5r/s\"\nlocal_rate = \"1r/s\"\n"),
            "7:14",
            "local_rate is a fleet rule's rate while Redis is down: it needs scope = \"fleet\"",
        ),
        (
            format!("{tls_listen}{site}"),
            "3:7",
            "a tls listener needs cert and key",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?}, ocsp = {:?} }}\n{site}",
                d.join("cert.pem"),
                d.join("key.pem"),
                d.join("cert.pem")
            ),
            "3:7",
            "not a DER OCSP response",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?}, client_ca = {:?} }}\n{site}",
                d.join("cert.pem"),
                d.join("key.pem"),
                d.join("key.pem")
            ),
            "3:7",
            "no CERTIFICATE block found",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?}, min_version = \"1.3\", ciphers = [\"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\"] }}\n{site}",
                d.join("cert.pem"),
                d.join("key.pem")
            ),
            "3:7",
            "no TLS 1.3 suite",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?} }}\nh2c = true\n{site}",
                d.join("cert.pem"),
                d.join("key.pem")
            ),
            "4:7",
            "h2c is cleartext HTTP/2",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?} }}\nh2c_preface = true\n{site}",
                d.join("cert.pem"),
                d.join("key.pem")
            ),
            "4:15",
            "h2c_preface is for a cleartext HTTP/1.1 listener",
        ),
        (
            format!("{listen}h2c = true\nh2c_preface = true\n{site}"),
            "4:15",
            "h2c_preface is for a cleartext HTTP/1.1 listener",
        ),
        (
            format!("{listen}h2c_preface = \"yes\"\n{site}"),
            "3:15",
            "invalid type",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?} }}\nredirect_to_https = true\n{site}",
                d.join("cert.pem"),
                d.join("key.pem")
            ),
            "4:21",
            "redirect_to_https is for a cleartext HTTP/1.1 TCP listener",
        ),
        // https_port, the port a redirect names, only with redirect_to_https.
        (
            format!("{listen}https_port = 443\n{site}"),
            "3:14",
            "https_port is the port redirect_to_https names: set redirect_to_https = true",
        ),
        (
            format!("{listen}redirect_to_https = true\nhttps_port = 0\n{site}"),
            "4:14",
            "https_port must be 1 to 65535 (got 0)",
        ),
        (
            format!("{listen}redirect_to_https = true\nhttps_port = 65536\n{site}"),
            "4:14",
            "https_port must be 1 to 65535 (got 65536)",
        ),
        (
            format!("{listen}redirect_to_https = true\nhttps_port = \"443\"\n{site}"),
            "4:14",
            "invalid type",
        ),
        (
            format!(
                "{listen}{site}[[site.access]]\nrules = [\"allow 10.0.0.0/8\", \"permit all\"]\n"
            ),
            "6:30",
            "a rule is \"allow WHO\" or \"deny WHO\"",
        ),
        (
            format!("{listen}{site}[[site.access]]\nrules = [\"allow 10.0.0.1/8\"]\n"),
            "6:10",
            "has bits set past /8 (the network is 10.0.0.0/8)",
        ),
        (
            format!(
                "{listen}{site}[[site.access]]\nprefix = \"/a/../b\"\nrules = [\"deny all\"]\n"
            ),
            "6:10",
            "is matched against the decoded path",
        ),
        (
            format!("{listen}{site}[[site.access]]\nrules = []\n"),
            "6:9",
            "rules is empty",
        ),
        // A site's certificate: on a TLS listener, for its names, a pair that loads.
        (
            format!("{listen}{site}tls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n"),
            "5:7",
            "no [[listen]] has tls",
        ),
        (
            "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = { cert = \"cert.pem\", key = \"key.pem\" }\n[[site]]\ntls = { cert = \"cert.pem\", key = \"key.pem\" }\n"
                .to_string(),
            "5:7",
            "chosen by SNI from its names, and this site has none",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n{site}tls = {{ cert = \"404.html\", key = \"key.pem\" }}\n"
            ),
            "6:7",
            "certificate ",
        ),
        // What start-up would refuse, --check-config refuses, at its place.
        (
            format!(
                "{listen}{site}[[site.redirect]]\nprefix = \"/a\"\nto = \"https://{{hostname}}/\"\n"
            ),
            "7:6",
            "names {hostname}, which is not a placeholder (they are {path}, {rest}, {query}, {host})",
        ),
        (
            format!("{listen}{site}[[site.redirect]]\nprefix = \"/a\"\nto = \"https://{{host/\"\n"),
            "7:6",
            "unmatched",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:{taken}\"\n[[listen]]\naddr = \"127.0.0.1:{taken}\"\n{site}"
            ),
            "3:1",
            "overlaps the one at line 1",
        ),
        (
            format!(
                "[[listen]]\naddr = \"0.0.0.0:{taken}\"\n[[listen]]\naddr = \"127.0.0.1:{taken}\"\n{site}"
            ),
            "3:1",
            "overlaps the one at line 1 (0.0.0.0:",
        ),
        (
            format!("[[listen]]\nunix = \"a.sock\"\n[[listen]]\nunix = \"a.sock\"\n{site}"),
            "3:1",
            "overlaps the one at line 1",
        ),
        (
            format!("cpus = \"1000\"\n{listen}{site}"),
            "1:8",
            "cpus: CPU 1000 is not available to this process",
        ),
        (
            format!("[[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"0660\"\n{site}"),
            "3:8",
            "owner, group and mode are for a Unix-socket listener",
        ),
        (
            format!("[[listen]]\nunix = \"a.sock\"\nmode = \"0999\"\n{site}"),
            "3:8",
            "mode must be octal permission bits",
        ),
        (
            format!("[[listen]]\nunix = \"a.sock\"\nowner = \"no-such-user-x\"\n{site}"),
            "3:9",
            "owner: no user named \"no-such-user-x\"",
        ),
        (
            format!("[[listen]]\nunix = \"a.sock\"\ngroup = \"no-such-group-x\"\n{site}"),
            "3:9",
            "group: no group named \"no-such-group-x\"",
        ),
        (
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"fifo.pem\", key = \"key.pem\" }}\n{site}"
            ),
            "3:16",
            "fifo.pem is not a file",
        ),
        (site.to_string(), "1:1", "no [[listen]] section"),
        (listen.to_string(), "1:1", "no [[site]] section"),
        ("[[listen]\n".to_string(), "1:", ""),
    ];
    let mut wrong = Vec::new();
    for (i, (text, at, message)) in cases.iter().enumerate() {
        let file = d.join(format!("bad{i}.toml"));
        std::fs::write(&file, text).unwrap();
        for mode in ["--check-config", "--config"] {
            let (code, stderr) = run_err(&[
                "serve",
                mode,
                file.to_str().unwrap(),
                "--addr",
                "127.0.0.1:0",
            ]);
            assert_ne!(code, 0, "{text}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{text}\n{stderr}");
            let want = format!("{}:{at}", file.display());
            if !stderr.contains(&want) || !stderr.contains(message) {
                wrong.push(format!("case {i}: want {at} {message:?}, got {stderr}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join(""));
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: `timeout = "0"` on an upstream passed `--check-config`, then every
/// request got 504 at once. Every timeout refuses 0 at its place; `drain_timeout` alone
/// takes it (exit without waiting).
#[test]
fn a_zero_timeout_is_refused_at_its_place_for_every_duration_key() {
    let d = dir("zero");
    tree(&d);
    let head = "[[listen]]\naddr = \"127.0.0.1:0\"\n";
    let up = "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n";
    let site = "[[site]]\nnames = [\"a.test\"]\n";
    // (the file with a zero in it, line:column of the zero, the key named)
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!("{head}{up}timeout = \"0\"\n{site}"),
            "6:11",
            "timeout",
        ),
        (
            format!("{head}{up}connect_timeout = \"0s\"\n{site}"),
            "6:19",
            "connect_timeout",
        ),
        (
            format!("{head}{up}idle_timeout = \"0ms\"\n{site}"),
            "6:16",
            "idle_timeout",
        ),
        (
            format!("{head}{up}fail_timeout = \"0\"\n{site}"),
            "6:16",
            "fail_timeout",
        ),
        (
            format!("{head}{up}health_check = {{ path = \"/h\", timeout = \"0\" }}\n{site}"),
            "6:41",
            "health_check timeout",
        ),
        (
            format!("{head}{up}health_check = {{ path = \"/h\", interval = \"0\" }}\n{site}"),
            "6:42",
            "health_check interval",
        ),
        (
            format!("[limits]\nheader_timeout = \"0\"\n{head}{site}"),
            "2:18",
            "header_timeout",
        ),
        (
            format!("[limits]\nbody_timeout = \"0\"\n{head}{site}"),
            "2:16",
            "body_timeout",
        ),
        (
            format!("[limits]\nsend_timeout = \"0\"\n{head}{site}"),
            "2:16",
            "send_timeout",
        ),
        (
            format!("[limits]\nkeepalive_timeout = \"0\"\n{head}{site}"),
            "2:21",
            "keepalive_timeout",
        ),
        (
            format!("[tls]\nsession_lifetime = \"0\"\n{head}{site}"),
            "2:20",
            "session_lifetime",
        ),
    ];
    let mut wrong = Vec::new();
    for (i, (text, at, key)) in cases.iter().enumerate() {
        let file = d.join(format!("zero{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        let want = format!("{}:{at}: {key}: ", file.display());
        if code == 0
            || stderr.trim_end().lines().count() != 1
            || !stderr.contains(&want)
            || !stderr.contains("a timeout of 0 would expire at once")
        {
            wrong.push(format!("case {i}: want {want}…, got {code} {stderr}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // drain_timeout = 0: SIGTERM exits without waiting, a meaning of its own.
    let file = d.join("drain.toml");
    std::fs::write(
        &file,
        format!("[limits]\ndrain_timeout = \"0\"\n{head}{site}"),
    )
    .unwrap();
    let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // The flags say the same, in one line naming the flag.
    for flag in [
        "--proxy-timeout",
        "--proxy-connect-timeout",
        "--header-timeout",
    ] {
        let (code, stderr) = run_err(&["serve", "--addr", "127.0.0.1:0", flag, "0"]);
        assert_ne!(code, 0, "{flag}");
        assert!(
            stderr.contains(flag) && stderr.contains("a timeout of 0 would expire at once"),
            "{flag}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: a bad size or duration printed its example twice
/// ("(expected e.g. 65536, …) (e.g. \"1MiB\", …)").
#[test]
fn a_bad_size_or_duration_gives_its_hint_once() {
    let d = dir("hint");
    tree(&d);
    let rest = "[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\nnames = [\"a.test\"]\n";
    for (i, limit) in ["max_body_bytes = \"1mb\"", "header_timeout = \"soon\""]
        .iter()
        .enumerate()
    {
        let file = d.join(format!("hint{i}.toml"));
        std::fs::write(&file, format!("[limits]\n{limit}\n{rest}")).unwrap();
        let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        assert_ne!(code, 0);
        assert!(
            stderr.contains(&format!("{}:2:", file.display())),
            "{stderr}"
        );
        assert_eq!(stderr.matches("e.g.").count(), 1, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn user_drops_privileges_after_binding() {
    let d = dir("user");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!("user = \"nobody\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n{SITES}"),
    )
    .unwrap();
    let root = rustix::process::geteuid().is_root();
    if !root {
        // Only root can switch users: the refusal is one line naming the user.
        let (code, stderr) = run_err(&["serve", "--config", file.to_str().unwrap()]);
        assert_ne!(code, 0);
        assert!(
            stderr.contains("cannot switch to user \"nobody\": not started as root"),
            "{stderr}"
        );
        return;
    }
    // The tree must be readable by nobody.
    let _ = std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&d)
        .status();
    let s = serve(&["--config", file.to_str().unwrap()]);
    assert_eq!(get(s.addr, "one.test", "/").text(), "<h1>one</h1>\n");
    // Every thread (workers, logger, signals) runs as nobody (65534), real and effective.
    let tasks = std::fs::read_dir(format!("/proc/{}/task", s.child.id())).unwrap();
    let mut n = 0;
    for t in tasks {
        let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
        let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let ids: Vec<&str> = uid.split_whitespace().skip(1).collect();
        assert!(ids.iter().all(|i| *i == "65534"), "{uid}");
        n += 1;
    }
    assert!(n >= 2, "{n} threads");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sighup_rereads_the_file_under_load_without_a_failed_request() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = dir("hup");
    tree(&d);
    let file = d.join("linerate.toml");
    let write = |extra: &str| {
        std::fs::write(
            &file,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n{SITES}{extra}"
            ),
        )
        .unwrap()
    };
    write("");
    let s = serve(&["--config", file.to_str().unwrap()]);
    let https: SocketAddr = s
        .banner
        .iter()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("https://")))
        .unwrap()
        .trim_start_matches("https://")
        .parse()
        .unwrap();
    let old_cert = std::fs::read(d.join("cert.pem")).unwrap();
    assert!(https_get(https, &d.join("cert.pem"), "one.test", "/").ends_with("<h1>one</h1>\n"));

    // Load on two keep-alive connections while the file changes under it.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..2)
        .map(|_| {
            let (stop, addr) = (stop.clone(), s.addr);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) && n < 200_000 {
                    c.send(b"GET / HTTP/1.1\r\nHost: one.test\r\n\r\n");
                    let r = c.read_response();
                    assert_eq!((r.status, r.text().as_str()), (200, "<h1>one</h1>\n"));
                    n += 1;
                }
                n
            })
        })
        .collect();

    // A mistake first: it is refused and the sites in use stay.
    std::fs::write(&file, "[[listen]]\naddr = 5\n").unwrap();
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    // Then a new field rule, and a new certificate.
    let ck = rcgen::generate_simple_self_signed(vec!["one.test".to_string()]).unwrap();
    std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    write("\n[[site.headers]]\nfields = { \"X-Reloaded\" = \"yes\" }\n");
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    common::eventually("reload never seen", || {
        get(s.addr, "two.test", "/files/").header("x-reloaded") == Some("yes")
    });
    // The rule is the second site's (the last [[site]] in the file), not the first's.
    assert_eq!(get(s.addr, "one.test", "/").header("x-reloaded"), None);
    // The new certificate is served (the old one is no longer trusted by this client).
    assert_ne!(std::fs::read(d.join("cert.pem")).unwrap(), old_cert);
    assert!(https_get(https, &d.join("cert.pem"), "one.test", "/").ends_with("<h1>one</h1>\n"));
    stop.store(true, Ordering::Relaxed);
    let served: u32 = load
        .into_iter()
        .map(|t| t.join().expect("no failed request"))
        .sum();
    assert!(served > 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// Runs curl with `args`; its stdout. curl is a test dependency (CI's host has it; so does
/// every Debian build host with the kTLS stage's checks).
fn curl(args: &[&str]) -> String {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl is needed by this test (apt-get install curl)");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn curl_reaches_every_listener_and_site() {
    let d = dir("curl");
    tree(&d);
    // A script big enough to be compressed on the fly (no .gz/.br sibling).
    let script: String = (0..200).map(|i| format!("console.log({i});\n")).collect();
    std::fs::write(d.join("one/big.js"), &script).unwrap();
    let (s, p4, p6) = serve_every_listener(&d);
    let https = s
        .banner
        .iter()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("https://")))
        .expect("https listener in the banner")
        .trim_start_matches("https://")
        .to_string();
    let tls_port = https.rsplit(':').next().unwrap();
    let ca = d.join("cert.pem");
    let resolve = format!("one.test:{tls_port}:127.0.0.1");

    // HTTPS with the site's certificate verified by curl (OpenSSL), TLS 1.2 and 1.3.
    for v in ["--tlsv1.2", "--tlsv1.3"] {
        let url = format!("https://one.test:{tls_port}/");
        let body = curl(&[
            v,
            "--cacert",
            ca.to_str().unwrap(),
            "--resolve",
            &resolve,
            &url,
        ]);
        assert_eq!(body, "<h1>one</h1>\n", "{v}");
    }
    // Both families, two names and the default site.
    let v4 = format!("http://127.0.0.1:{p4}");
    let v6 = format!("http://[::1]:{p6}");
    for base in [&v4, &v6] {
        let one = format!("{base}/");
        assert_eq!(curl(&["-H", "Host: one.test", &one]), "<h1>one</h1>\n");
        let two = format!("{base}/files/");
        assert_eq!(curl(&["-H", "Host: two.test", &two]), "<h1>two</h1>\n");
        let demo = format!("{base}/plaintext");
        assert_eq!(curl(&["-H", "Host: other.test", &demo]), "Hello, World!");
    }
    // The Unix socket.
    let sock = d.join("linerate.sock");
    assert_eq!(
        curl(&["--unix-socket", sock.to_str().unwrap(), "http://one.test/"]),
        "<h1>one</h1>\n"
    );
    // A redirect, followed by curl's own rules: status and Location as curl reads them.
    let old = format!("{v4}/old/x?y=1");
    let seen = curl(&[
        "-H",
        "Host: one.test",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{redirect_url}",
        &old,
    ]);
    assert_eq!(seen, format!("308 {v4}/new/x?y=1"));
    // A static script gzip'd on the fly: curl decodes it back to the file's bytes; the fields.
    let js = format!("{v4}/big.js");
    let head = curl(&[
        "-H",
        "Host: one.test",
        "--compressed",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &js,
    ]);
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("content-encoding: gzip") || head.contains("content-encoding: br"),
        "{head}"
    );
    assert!(head.contains("vary: accept-encoding"), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    assert_eq!(curl(&["-H", "Host: one.test", "--compressed", &js]), script);
    // Dotfiles: the site's error page.
    let env = format!("{v4}/.env");
    let seen = curl(&["-H", "Host: one.test", "-w", "\n%{http_code}", &env]);
    assert_eq!(seen, "<h1>nothing here</h1>\n\n404");
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_h2c_listener_from_the_file_speaks_http2_only() {
    let d = dir("h2c");
    tree(&d);
    let (p1, p2) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    let file = d.join("h2c.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:{p1}\"\n[[listen]]\naddr = \"127.0.0.1:{p2}\"\n\
             h2c = true\n[[site]]\nnames = [\"one.test\"]\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    assert!(
        s.banner
            .iter()
            .any(|l| l.contains(&format!("127.0.0.1:{p2} (HTTP/2 only"))),
        "{:?}",
        s.banner
    );
    let url = format!("http://127.0.0.1:{p2}/plaintext");
    let out = curl(&["--http2-prior-knowledge", "-w", " %{http_version}", &url]);
    assert_eq!(out, "Hello, World! 2");
    let plain = format!("http://127.0.0.1:{p1}/plaintext");
    assert_eq!(
        curl(&["-w", " %{http_version}", &plain]),
        "Hello, World! 1.1"
    );
    // HTTP/1.1 on the h2c port gets no HTTP/1.1 answer.
    let mut c = TcpStream::connect(("127.0.0.1", p2)).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(b"GET /plaintext HTTP/1.1\r\nHost: one.test\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/1.1"), "{got:?}");
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// `h2c_preface` on a `[[listen]]`: that port serves HTTP/1.1 and HTTP/2 with prior
/// knowledge; a listener without it stays HTTP/1.1 only.
#[test]
fn a_listener_with_h2c_preface_serves_http11_and_http2_on_one_port() {
    let d = dir("h2c-preface");
    tree(&d);
    let (p1, p2) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    let file = d.join("h2c-preface.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:{p1}\"\nh2c_preface = true\n[[listen]]\n\
             addr = \"127.0.0.1:{p2}\"\n[[site]]\nnames = [\"one.test\"]\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let both = format!("http://127.0.0.1:{p1}/plaintext");
    let h2 = ["--http2-prior-knowledge", "-w", " %{http_version}"];
    assert_eq!(curl(&[&h2[..], &[&both]].concat()), "Hello, World! 2");
    assert_eq!(
        curl(&["-w", " %{http_version}", &both]),
        "Hello, World! 1.1"
    );
    // The other listener answers the preface as HTTP/1.1 does: 505.
    let mut c = TcpStream::connect(("127.0.0.1", p2)).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert!(got.starts_with(b"HTTP/1.1 505 "), "{got:?}");
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// The `https://` listener's address from a banner.
fn https_addr(banner: &[String]) -> SocketAddr {
    banner
        .iter()
        .find_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("https://"))
        })
        .expect("an https listener in the banner")
        .parse()
        .unwrap()
}

/// `curl` over the Unix socket `sock`, run as `uid:gid`: (exit code, body).
fn curl_unix_as(uid: u32, gid: u32, sock: &Path, host: &str) -> (i32, String) {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new("curl")
        .args(["-s", "--max-time", "10", "--unix-socket"])
        .arg(sock)
        .arg(format!("http://{host}/"))
        .uid(uid)
        .gid(gid)
        .output()
        .expect("curl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Regression: with `user = "nobody"` and root-owned keys and logs (certbot's and
/// logrotate's layout), SIGUSR1 could not reopen the log (Permission denied), SIGHUP could
/// never read the key again, and the Unix socket stayed `root:root 0755`, refusing a client
/// running as www-data. The privilege keeper forked before the drop opens exactly the files
/// named at start; the socket gets the configured group and mode.
#[test]
fn after_dropping_to_nobody_sighup_sigusr1_and_the_unix_socket_still_work() {
    if !rustix::process::geteuid().is_root() {
        // Without root there is no drop to test: the refusal is one line (see
        // user_drops_privileges_after_binding); the keeper is root's.
        let (code, stderr) = run_err(&["serve", "--check-config", "/nonexistent.toml"]);
        assert_ne!(code, 0, "{stderr}");
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let d = dir("keeper");
    tree(&d);
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m)).unwrap();
    // The sites' trees are nobody's to read; keys, the error page, the config file and the
    // log directory are root's alone.
    mode(&d, 0o755);
    for sub in ["one", "two"] {
        let _ = std::process::Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(d.join(sub))
            .status();
    }
    for f in ["cert.pem", "key.pem", "404.html"] {
        mode(&d.join(f), 0o600);
    }
    std::fs::create_dir(d.join("logs")).unwrap();
    mode(&d.join("logs"), 0o700);
    let sock = d.join("s.sock");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"user = "nobody"
access_log = "logs/access.log"
[[listen]]
addr = "127.0.0.1:0"
[[listen]]
addr = "127.0.0.1:0"
tls = {{ cert = "cert.pem", key = "key.pem" }}
[[listen]]
unix = "s.sock"
group = "www-data"
mode = "0660"
{SITES}"#
        ),
    )
    .unwrap();
    mode(&file, 0o600);
    let mut s = serve(&["--config", file.to_str().unwrap()]);
    let tls = https_addr(&s.banner);
    assert_eq!(get(s.addr, "one.test", "/").text(), "<h1>one</h1>\n");

    // The socket: group www-data, rw for owner and group only.
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!((meta.gid(), meta.mode() & 0o777), (33, 0o660));
    let (code, body) = curl_unix_as(33, 33, &sock, "one.test");
    assert_eq!((code, body.as_str()), (0, "<h1>one</h1>\n"), "as www-data");
    let (code, _) = curl_unix_as(65534, 65534, &sock, "one.test");
    assert_eq!(code, 7, "nobody (not in www-data) cannot connect");

    // SIGUSR1 after logrotate renamed the log: a new file in root's directory.
    let log = d.join("logs/access.log");
    common::eventually("the first line logged", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("GET / HTTP/1.1"))
    });
    std::fs::rename(&log, d.join("logs/access.log.1")).unwrap();
    common::bin::signal(&s.child, rustix::process::Signal::USR1);
    common::eventually("the log reopened", || log.exists());
    assert_eq!(get(s.addr, "one.test", "/after-usr1").status, 404);
    common::eventually("a line in the new log", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("/after-usr1"))
    });
    assert_eq!(
        std::fs::metadata(&log).unwrap().uid(),
        0,
        "the keeper made it"
    );

    // SIGHUP with a new root-only key: the new certificate is served, and the error page
    // (root-only too) still replaces the 404 body.
    let fresh = rcgen::generate_simple_self_signed(vec!["one.test".to_string()]).unwrap();
    std::fs::write(d.join("new-ca.pem"), fresh.cert.pem()).unwrap();
    std::fs::write(d.join("cert.pem"), fresh.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), fresh.signing_key.serialize_pem()).unwrap();
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    common::eventually("the new certificate served", || {
        https_try(tls, &d.join("new-ca.pem"), "one.test", "/")
            .is_ok_and(|r| r.starts_with("HTTP/1.1 200"))
    });
    assert_eq!(
        get(s.addr, "one.test", "/missing").text(),
        "<h1>nothing here</h1>\n"
    );
    // The server itself runs as nobody.
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid.split_whitespace().skip(1).all(|i| i == "65534"),
        "{uid}"
    );
    common::bin::signal(&s.child, rustix::process::Signal::TERM);
    assert!(common::bin::wait_exit(&mut s.child, common::EVENTUALLY).success());
    let _ = std::fs::remove_dir_all(&d);
}

/// `access_log_format` as a template (nginx's `log_format`): a served request's and a refused
/// one's lines carry each field, a user agent holding `"` is escaped so it cannot forge the
/// rest of a line, and what a request does not have is `-`.
#[test]
fn an_access_log_template_from_the_file_writes_each_field_escaped() {
    let d = dir("log-template");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"access_log = "access.log"
access_log_format = '$remote_addr [$time_local] "$request" $request_method $request_uri $server_protocol $status $body_bytes_sent "$http_referer" "$http_user_agent" ${{request_time_us}}us $request_time $$ $upstream_addr'
[[listen]]
addr = "127.0.0.1:0"
{SITES}"#
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(s.addr);
    c.send(
        b"GET /index.html?a=1 HTTP/1.1\r\nHost: one.test\r\nReferer: http://r/\r\n\
          User-Agent: evil\" 200 \"\xc3\xa9\r\n\r\n",
    );
    assert_eq!(c.read_response().status, 200);
    let mut c = Client::connect(s.addr);
    c.send(b"GET /a<b>?q=\"x\" HTTP/1.1\r\nHost: one.test\r\n\r\n");
    assert_eq!(c.read_response().status, 400);

    let log = d.join("access.log");
    let mut text = String::new();
    common::eventually("two template lines", || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().count() >= 2
    });
    let lines: Vec<&str> = text.lines().collect();
    // (line, what it starts with, what follows the request time in µs)
    for (line, head, tail) in [
        (
            lines[0],
            "\"GET /index.html?a=1 HTTP/1.1\" GET /index.html?a=1 HTTP/1.1 200 13 \"http://r/\" \"evil\\x22 200 \\x22\\xC3\\xA9\" ",
            "us 0.",
        ),
        (
            lines[1],
            "\"GET /a<b>?q=\\x22x\\x22 HTTP/1.1\" GET /a<b>?q=\\x22x\\x22 - 400 ",
            "-us - $ -",
        ),
    ] {
        let (stamp, rest) = line
            .strip_prefix("127.0.0.1 [")
            .and_then(|l| l.split_once("] "))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(stamp.ends_with(" +0000") && stamp.len() == 26, "{line}");
        assert!(rest.starts_with(head), "{line}\nwant {head}");
        assert!(rest.contains(tail), "{line}\nwant {tail}");
    }
    assert!(lines[0].ends_with(" $ -"), "{}", lines[0]);
    assert!(lines[1].contains(" \"-\" \"-\" -us"), "{}", lines[1]);
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// Whether `t` is an RFC 3339 UTC time to the millisecond: `1994-11-06T08:49:37.000+00:00`.
fn rfc3339(t: &str) -> bool {
    let digits = |r: std::ops::Range<usize>| {
        t.get(r)
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
    };
    // To the millisecond: `2026-11-29T13:18:41.052+00:00`.
    t.len() == 29
        && digits(0..4)
        && &t[4..5] == "-"
        && digits(5..7)
        && &t[7..8] == "-"
        && digits(8..10)
        && &t[10..11] == "T"
        && digits(11..13)
        && &t[13..14] == ":"
        && digits(14..16)
        && &t[16..17] == ":"
        && digits(17..19)
        && &t[19..20] == "."
        && digits(20..23)
        && &t[23..] == "+00:00"
}

/// Regression: a `[[site]]` could not have its own access log (the key was
/// refused). Its requests go to its own file, in its own format, instead of the server's
/// log; the other site's requests and a refused one (the default site's) go to the server's
/// JSON log, whose `time` is RFC 3339 (it was `06/Nov/1994:08:49:37 +0000`).
#[test]
fn a_site_logs_to_its_own_access_log_instead_of_the_servers() {
    let d = dir("site-log");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        r#"access_log = "access.log"
access_log_format = "json"
[[listen]]
addr = "127.0.0.1:0"
[[site]]
names = ["one.test"]
root = [{ prefix = "/", dir = "one" }]
access_log = "one.log"
access_log_format = '$host $scheme "$request" $status $http_x_request_id $upstream_status'
[[site]]
names = ["two.test"]
default = true
root = [{ prefix = "/", dir = "two" }]
"#,
    )
    .unwrap();
    let mut s = serve(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(s.addr);
    c.send(b"GET /index.html HTTP/1.1\r\nHost: ONE.test:8080\r\nX-Request-ID: r-1\r\n\r\n");
    assert_eq!(c.read_response().status, 200);
    assert_eq!(get(s.addr, "two.test", "/").status, 200);
    let mut c = Client::connect(s.addr);
    c.send(b"GET /a<b> HTTP/1.1\r\nHost: one.test\r\n\r\n");
    assert_eq!(c.read_response().status, 400);

    // Stopped gracefully, the server writes every line before it exits.
    common::bin::signal(&s.child, rustix::process::Signal::TERM);
    assert!(common::bin::wait_exit(&mut s.child, common::EVENTUALLY).success());
    let (one, all) = (d.join("one.log"), d.join("access.log"));
    let site = std::fs::read_to_string(&one).unwrap();
    assert_eq!(
        site, "one.test http \"GET /index.html HTTP/1.1\" 200 r-1 -\n",
        "the site's log"
    );
    let text = std::fs::read_to_string(&all).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        (&lines[0]["target"], &lines[0]["status"]),
        (&serde_json::json!("/"), &serde_json::json!(200))
    );
    assert_eq!(
        (&lines[1]["target"], &lines[1]["status"]),
        (&serde_json::json!("/a<b>"), &serde_json::json!(400))
    );
    for l in &lines {
        let time = l["time"].as_str().unwrap_or_default();
        assert!(rfc3339(time), "{l}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: a start-up refusal of a configured value named no place in the file (a
/// port another process holds; `cpus` blamed `--cpus`, a flag never given). Each names
/// FILE:LINE:COLUMN now, in one line; so does a root the server could not search (it once
/// started, then answered every request 403 with nothing to say why).
#[test]
fn start_up_refusals_name_the_file_line_and_column() {
    let d = dir("startup");
    tree(&d);
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    let site = "[[site]]\nnames = [\"a.test\"]\n";
    let listen = "[[listen]]\naddr = \"127.0.0.1:0\"\n";
    // An unreadable root: as root, one nobody cannot search, with a drop to nobody; as
    // another user, one with no permissions at all.
    let locked = d.join("locked");
    std::fs::create_dir(&locked).unwrap();
    let root = rustix::process::geteuid().is_root();
    let perms = if root { 0o700 } else { 0o000 };
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(perms)).unwrap();
    let (user, line) = if root {
        let _ = std::process::Command::new("chmod")
            .args(["a+rx"])
            .arg(&d)
            .status();
        ("user = \"nobody\"\n", 7)
    } else {
        ("", 6)
    };
    let cases: Vec<(String, String, &str)> = vec![
        (
            format!("{listen}[[listen]]\naddr = \"127.0.0.1:{taken}\"\n{site}"),
            "3:1".into(),
            "already",
        ),
        (
            format!("[admin]\naddr = \"127.0.0.1:{taken}\"\n{listen}{site}"),
            "2:8".into(),
            "already",
        ),
        (
            format!("{user}{listen}{site}[[site.root]]\ndir = \"locked\"\n"),
            format!("{line}:7"),
            "cannot be read",
        ),
        // A site's own access log that cannot be opened names its place.
        (
            format!("{listen}{site}access_log = \"no-such-dir/site.log\"\n"),
            "5:14".into(),
            "cannot open access log",
        ),
    ];
    let mut wrong = Vec::new();
    for (i, (text, at, message)) in cases.iter().enumerate() {
        let file = d.join(format!("start{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let (code, stderr) = run_err(&[
            "serve",
            "--no-pin",
            "--log-level",
            "warn",
            "--config",
            file.to_str().unwrap(),
        ]);
        let want = format!("{}:{at}: ", file.display());
        if code == 0
            || stderr.trim_end().lines().count() != 1
            || !stderr.contains(&want)
            || !stderr.contains(message)
        {
            wrong.push(format!(
                "case {i}: want {want}…{message}…, got {code} {stderr}"
            ));
        }
    }
    drop(holder);
    assert!(wrong.is_empty(), "{}", wrong.join(""));
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: `to = "https://{host}/{rest}"` passed the check and sent `{host}`
/// literally in Location. `{host}` is the host the request named (nginx's `$host`:
/// lowercase, no port); an unknown placeholder is refused by the check (above).
#[test]
fn a_redirect_to_host_names_the_requested_host() {
    let d = dir("redirect-host");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        r#"[[listen]]
addr = "127.0.0.1:0"
[[site]]
names = ["one.test"]
root = [{ prefix = "/", dir = "one" }]
[[site.redirect]]
prefix = "/old/"
to = "https://{host}/new/{rest}{query}"
"#,
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let r = get(s.addr, "One.Test:8080", "/old/a/{x}?q=1");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location"),
        Some("https://one.test/new/a/{x}?q=1"),
        "{r:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// An exact path (nginx's `location = / { return 302 /app/; }`):
/// `path = "/"` redirects `/` and nothing below it.
#[test]
fn a_redirect_at_an_exact_path_answers_that_path_only() {
    let d = dir("redirect-exact");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        r#"[[listen]]
addr = "127.0.0.1:0"
[[site]]
names = ["one.test"]
root = [{ prefix = "/", dir = "one" }]
[[site.redirect]]
path = "/"
to = "/app/{query}"
status = 302
"#,
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let r = get(s.addr, "one.test", "/?a=1");
    assert_eq!((r.status, r.header("location")), (302, Some("/app/?a=1")));
    for below in ["/index.html", "/app/", "/x"] {
        let r = get(s.addr, "one.test", below);
        assert_ne!(r.status, 302, "{below}: {r:?}");
    }
    // prefix and path together, or neither, is a mistake at its place.
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\n[[site.redirect]]\nprefix = \"/a\"\npath = \"/b\"\nto = \"/c\"\n",
    )
    .unwrap();
    let (code, stderr) = run_err(&["serve", "--check-config", bad.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!("{}:6:8: a redirect has prefix", bad.display())),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A fixed answer at an exact path or below a prefix (nginx's `location = /health
/// { return 200 "ok"; }`, caddy's `respond`), after the redirects; its status checked where it
/// is written.
#[test]
fn a_return_answers_its_path_with_its_status_and_body() {
    let d = dir("return-fixed");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        r#"[[listen]]
addr = "127.0.0.1:0"
[[site]]
names = ["one.test"]
root = [{ prefix = "/", dir = "one" }]
[[site.redirect]]
path = "/"
to = "/app/"
status = 302
[[site.return]]
path = "/health"
body = "ok\n"
[[site.return]]
prefix = "/internal/"
status = 403
body = '{"error":"not here"}'
content_type = "application/json"
[[site.return]]
prefix = "/"
status = 410
"#,
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let r = get(s.addr, "one.test", "/health");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"ok\n");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let r = get(s.addr, "one.test", "/internal/x");
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.body, br#"{"error":"not here"}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    // The redirect comes first; the exact path is that path only; the last rule takes the rest.
    assert_eq!(get(s.addr, "one.test", "/").status, 302);
    for (path, status) in [("/health/", 410), ("/healthz", 410), ("/other", 410)] {
        assert_eq!(get(s.addr, "one.test", path).status, status, "{path}");
    }
    // A 3xx is a redirect's (it needs a Location): refused at its place.
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\n[[site.return]]\npath = \"/a\"\nstatus = 301\n",
    )
    .unwrap();
    let (code, stderr) = run_err(&["serve", "--check-config", bad.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!("{}:6:10: return status must be", bad.display())),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: a site field `"Server" = "custom"` sent two `Server:` fields, though the
/// docs say a rule's field replaces one of the same name. One field, the site's, over
/// HTTP/1.1 and HTTP/2 (curl, h2c listener); other sites keep the server's own.
#[test]
fn a_site_server_field_replaces_the_servers_own() {
    let d = dir("server-field");
    tree(&d);
    let h2c = free_port("127.0.0.1");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"[[listen]]
addr = "127.0.0.1:0"
[[listen]]
addr = "127.0.0.1:{h2c}"
h2c = true
[[site]]
names = ["one.test"]
root = [{{ prefix = "/", dir = "one" }}]
[[site.headers]]
fields = {{ "Server" = "custom" }}
[[site]]
names = ["two.test"]
default = true
root = [{{ prefix = "/", dir = "two" }}]
"#
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let servers = |r: &Resp| -> Vec<String> {
        r.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("server"))
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(servers(&get(s.addr, "one.test", "/")), ["custom"]);
    assert_eq!(servers(&get(s.addr, "one.test", "/missing")), ["custom"]);
    assert_eq!(servers(&get(s.addr, "two.test", "/")), ["linerate"]);
    let h2 = curl(&[
        "-s",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "--http2-prior-knowledge",
        "-H",
        "Host: one.test",
        &format!("http://127.0.0.1:{h2c}/"),
    ]);
    let lines: Vec<&str> = h2
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("server:"))
        .collect();
    assert_eq!(lines, ["server: custom"], "{h2}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn access_rules_allow_and_deny_by_address_and_path_however_it_is_spelled() {
    let d = dir("access");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[[listen]]\naddr = \"[::1]:0\"\n\
         [[site]]\ndefault = true\napp = \"demo\"\n\
         [[site.access]]\nprefix = \"/plaintext\"\nrules = [\"allow 127.0.0.0/8\", \"deny all\"]\n\
         [[site.access]]\nprefix = \"/json\"\nrules = [\"deny 127.0.0.1\", \"allow ::1\"]\n",
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let v6 = s.also_on();
    // (client, path, status): the first matching rule decides; no rule for a path allows.
    #[rustfmt::skip]
    let rows: &[(SocketAddr, &str, u16)] = &[
        (s.addr, "/plaintext", 200),
        (v6, "/plaintext", 403),
        (s.addr, "/json", 403),
        (v6, "/json", 200),
        (v6, "/baseline2?a=1&b=2", 200),
        // Every spelling of a denied path is the path it means.
        (v6, "/%70laintext", 403),
        (v6, "//plaintext", 403),
        (v6, "/x/../plaintext", 403),
        (v6, "/./plaintext?x", 403),
        (v6, "/plaintext/", 403),
        // A path that cannot be decoded is not let through either.
        (v6, "/plaintext%zz", 400),
        (v6, "/%2e%2e/plaintext", 400),
    ];
    for (addr, path, status) in rows {
        assert_eq!(get(*addr, "a.test", path).status, *status, "{addr} {path}");
    }
}

/// A self-signed certificate for `names`, as `NAME.pem` and `NAME.key` in `d`.
fn cert_for(d: &Path, file: &str, names: &[&str]) {
    let ck =
        rcgen::generate_simple_self_signed(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    std::fs::write(d.join(format!("{file}.pem")), ck.cert.pem()).unwrap();
    std::fs::write(
        d.join(format!("{file}.key")),
        ck.signing_key.serialize_pem(),
    )
    .unwrap();
}

#[test]
fn sni_picks_each_sites_certificate_and_http_redirects_to_it_without_a_loop() {
    let d = dir("sni");
    // The default certificate also covers a name no site claims (c.test); a wildcard in a
    // certificate covers one label, a site's wildcard any number of them.
    cert_for(&d, "default", &["default.test", "c.test"]);
    cert_for(&d, "a", &["a.test"]);
    cert_for(&d, "b", &["*.b.test", "*.x.b.test"]);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        "[[listen]]\naddr = \"127.0.0.1:0\"\nredirect_to_https = true\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\ntls = { cert = \"default.pem\", key = \"default.key\" }\n\
         [[site]]\nnames = [\"a.test\"]\napp = \"demo\"\ntls = { cert = \"a.pem\", key = \"a.key\" }\n\
         [[site]]\nnames = [\"*.b.test\"]\napp = \"demo\"\ntls = { cert = \"b.pem\", key = \"b.key\" }\n\
         [[site]]\nnames = [\"default.test\"]\ndefault = true\napp = \"demo\"\n",
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let https = https_addr(&s.banner);
    let (hp, tp) = (s.addr.port(), https.port());
    let pem = |f: &str| d.join(format!("{f}.pem")).to_str().unwrap().to_string();
    // (name, the only certificate curl trusts): each name verifies against its own.
    for (name, cert) in [
        ("a.test", "a"),
        ("x.b.test", "b"),
        ("deep.x.b.test", "b"),
        ("c.test", "default"),
        ("default.test", "default"),
    ] {
        let resolve = format!("{name}:{tp}:127.0.0.1");
        let url = format!("https://{name}:{tp}/json");
        let body = curl(&["--cacert", &pem(cert), "--resolve", &resolve, &url]);
        assert_eq!(body, r#"{"message":"Hello, World!"}"#, "{name}");
        // Trusting another name's certificate only, the handshake fails verification.
        let other = if cert == "a" { "b" } else { "a" };
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "--cacert",
                &pem(other),
                "--resolve",
                &resolve,
                &url,
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(60),
            "{name} verified against {other}.pem"
        );
    }
    // http:// for each name: one 308 to its https:// URL, where its own certificate answers.
    for (name, cert) in [("a.test", "a"), ("x.b.test", "b"), ("c.test", "default")] {
        let out = curl(&[
            "-L",
            "--max-redirs",
            "3",
            "--cacert",
            &pem(cert),
            "--resolve",
            &format!("{name}:{hp}:127.0.0.1"),
            "--resolve",
            &format!("{name}:{tp}:127.0.0.1"),
            "-w",
            "\n%{num_redirects} %{url_effective}",
            &format!("http://{name}:{hp}/json?x=1"),
        ]);
        assert_eq!(
            out,
            format!("{{\"message\":\"Hello, World!\"}}\n1 https://{name}:{tp}/json?x=1"),
            "{name}"
        );
    }
    // SIGHUP reads the sites' certificates again: a renewed one for a.test is served.
    let old = std::fs::read(d.join("a.pem")).unwrap();
    cert_for(&d, "a", &["a.test"]);
    assert_ne!(std::fs::read(d.join("a.pem")).unwrap(), old);
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    let resolve = format!("a.test:{tp}:127.0.0.1");
    common::eventually("the renewed certificate is never served", || {
        std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "--cacert",
                &pem("a"),
                "--resolve",
                &resolve,
            ])
            .arg(format!("https://a.test:{tp}/json"))
            .output()
            .unwrap()
            .status
            .success()
    });
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: the http→https 308 carried the site's HSTS over plain HTTP (RFC 6797
/// §7.2 forbids it) and its `immutable` Cache-Control; the HTTPS answers keep both.
#[test]
fn the_https_redirect_carries_none_of_the_sites_fields() {
    let d = dir("redirect-fields");
    cert_for(&d, "one", &["one.test"]);
    std::fs::create_dir_all(d.join("root/assets")).unwrap();
    std::fs::write(d.join("root/assets/app.js"), "x\n").unwrap();
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        "[[listen]]\naddr = \"127.0.0.1:0\"\nredirect_to_https = true\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\ntls = { cert = \"one.pem\", key = \"one.key\" }\n\
         [[site]]\nnames = [\"one.test\"]\nroot = [{ prefix = \"/\", dir = \"root\" }]\n\
         [[site.headers]]\nprefix = \"/assets/\"\n\
         fields = { \"Cache-Control\" = \"public, max-age=31536000, immutable\" }\n\
         [[site.headers]]\nfields = { \"Strict-Transport-Security\" = \"max-age=63072000\" }\n",
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let r = get(s.addr, "one.test", "/assets/app.js");
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some(
            format!(
                "https://one.test:{}/assets/app.js",
                https_addr(&s.banner).port()
            )
            .as_str()
        )
    );
    assert_eq!(
        r.header("strict-transport-security"),
        None,
        "HSTS over HTTP"
    );
    assert_eq!(r.header("cache-control"), None, "an immutable redirect");
    // Over HTTPS the site's fields are there.
    let tp = https_addr(&s.banner).port();
    let out = curl(&[
        "-D",
        "-",
        "-o",
        "/dev/null",
        "--cacert",
        d.join("one.pem").to_str().unwrap(),
        "--resolve",
        &format!("one.test:{tp}:127.0.0.1"),
        &format!("https://one.test:{tp}/assets/app.js"),
    ])
    .to_ascii_lowercase();
    assert!(
        out.contains("strict-transport-security: max-age=63072000"),
        "{out}"
    );
    assert!(out.contains("immutable"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `--check-config` took a `max_object` the memory store could not keep
/// (nor did the store keep any answer over `size / 16`, yet Cache-Status said `stored`). A
/// cache whose `size` cannot hold one answer of `max_object` (with room for its head) is
/// refused at its place; 256 MiB with 64 MiB objects is taken. And
/// the former `set_cookie = "shared"`, which replayed cookies, is refused rather than kept
/// under another meaning.
#[test]
fn a_cache_that_cannot_store_its_max_object_is_refused_at_its_place() {
    let d = dir("cache-max");
    let head = "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\n\
                servers = [\"127.0.0.1:1\"]\n[[site]]\nnames = [\"a.test\"]\n\
                [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n";
    // (the cache line, line 11; line:column of the value refused, what the message says)
    let refused = [
        (
            "cache = { size = \"64MiB\", max_object = \"64MiB\" }",
            "11:40",
            "cache max_object = \"64MiB\" cannot be stored in size = \"64MiB\"",
        ),
        (
            "cache = { size = \"512KiB\", max_object = \"1MiB\" }",
            "11:41",
            "cache max_object = \"1MiB\" cannot be stored in size = \"512KiB\"",
        ),
        (
            "cache = { set_cookie = \"shared\" }",
            "11:24",
            "set_cookie = \"shared\" is gone",
        ),
    ];
    let mut wrong = Vec::new();
    for (i, (cache, at, message)) in refused.iter().enumerate() {
        let file = d.join(format!("refused{i}.toml"));
        std::fs::write(&file, format!("{head}{cache}\n")).unwrap();
        let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        let want = format!("{}:{at}: ", file.display());
        if code == 0
            || stderr.trim_end().lines().count() != 1
            || !stderr.contains(&want)
            || !stderr.contains(message)
        {
            wrong.push(format!(
                "case {i}: want {want}{message}…, got {code} {stderr}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join(""));
    // A small store with no max_object of its own keeps what it can hold (the review: the
    // default 1 MiB refused `size = "1MiB"`, always taken before).
    for (i, cache) in [
        "cache = { size = \"256MiB\", max_object = \"64MiB\" }",
        "cache = { size = \"1MiB\" }",
        "cache = { size = \"512KiB\" }",
        "cache = { size = \"64KiB\" }",
        "cache = { set_cookie = \"explicit\" }",
        "cache = { set_cookie = \"never\" }",
    ]
    .iter()
    .enumerate()
    {
        let file = d.join(format!("taken{i}.toml"));
        std::fs::write(&file, format!("{head}{cache}\n")).unwrap();
        let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{cache}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `use_stale`, `stale_max` and `client_no_cache` of a proxy cache.
/// A name nginx's `proxy_cache_use_stale` does not have here (`invalid_header`, a typo), a
/// `stale_max` that is no duration and a `client_no_cache` that is neither "ignore" nor
/// "revalidate" are refused at their place; the documented values are taken.
#[test]
fn a_caches_stale_policy_and_client_no_cache_are_refused_at_their_place_when_unknown() {
    let d = dir("cache-stale");
    let head = "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\n\
                servers = [\"127.0.0.1:1\"]\n[[site]]\nnames = [\"a.test\"]\n\
                [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n";
    let refused = [
        (
            "cache = { use_stale = [\"error\", \"invalid_header\"] }",
            "11:33",
            // The whole line: it once carried a run of spaces from a wrapped string literal.
            "cache use_stale: \"invalid_header\" is not one of \"error\", \"timeout\", \
             \"updating\", \"http_500\", \"http_502\", \"http_503\", \"http_504\"\n",
        ),
        (
            "cache = { stale_max = \"an hour\" }",
            "11:23",
            "cache stale_max",
        ),
        (
            "cache = { client_no_cache = \"bypass\" }",
            "11:29",
            "cache client_no_cache must be \"ignore\" or \"revalidate\", not \"bypass\"",
        ),
    ];
    let mut wrong = Vec::new();
    for (i, (cache, at, message)) in refused.iter().enumerate() {
        let file = d.join(format!("refused{i}.toml"));
        std::fs::write(&file, format!("{head}{cache}\n")).unwrap();
        let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        let want = format!("{}:{at}: ", file.display());
        if code == 0
            || stderr.trim_end().lines().count() != 1
            || !stderr.contains(&want)
            || !stderr.contains(message)
        {
            wrong.push(format!(
                "case {i}: want {want}{message}…, got {code} {stderr}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join(""));
    for (i, cache) in [
        "cache = { use_stale = [\"error\", \"timeout\", \"updating\", \"http_500\", \
         \"http_502\", \"http_503\", \"http_504\"], stale_max = \"1h\" }",
        "cache = { use_stale = [], stale_max = \"0s\" }",
        "cache = { client_no_cache = \"ignore\" }",
        "cache = { client_no_cache = \"revalidate\" }",
    ]
    .iter()
    .enumerate()
    {
        let file = d.join(format!("taken{i}.toml"));
        std::fs::write(&file, format!("{head}{cache}\n")).unwrap();
        let (code, stderr) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{cache}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
