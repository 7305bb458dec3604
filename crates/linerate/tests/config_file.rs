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
use common::{Client, Resp};

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

/// A free port on 127.0.0.1 and on ::1 (bound, then released for the server to take).
fn free_port(ip: &str) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
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

#[test]
fn check_config_says_ok_with_a_summary() {
    let d = dir("check");
    tree(&d);
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!("[[listen]]\naddr = \"127.0.0.1:8080\"\n[[listen]]\naddr = \"[::]:8443\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n{SITES}"),
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
        text.contains(": ok (2 listeners: 127.0.0.1:8080, [::]:8443 (TLS); 2 sites: one.test *.one.test; two.test [default])"),
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
    // (file text, line:column, message)
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!("{listen}{site}bogus = 1\n"),
            "5:1",
            "unknown field `bogus`",
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
            "access_log_format must be \"combined\" or \"json\"",
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
