//! Running the real binary the way an operator does: a second server on a port already in use
//! is refused with one line (SO_REUSEPORT never shares with a stranger); SIGHUP swaps in a
//! new certificate under load with no failed request; SIGUSR1 reopens a renamed access log;
//! an unopenable access log fails before the banner, naming the path; no ANSI codes in a log
//! that is not a terminal. Servers bind 127.0.0.1; every wait is bounded.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::Client;
use common::bin::{BIN, run_err, serve, signal, wait_exit};
use rustix::process::Signal;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-ops-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_port_in_use_by_another_server_is_refused() {
    let first = serve(&[]);
    let addr = first.addr.to_string();
    let (code, stderr) = run_err(&["serve", "--addr", &addr, "--no-pin"]);
    assert_ne!(code, 0);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr}: already in use")),
        "{stderr}"
    );
    // The first server still has its port to itself and answers.
    let mut c = Client::connect(first.addr);
    assert_eq!(c.get("/pipeline").text(), "ok");
}

#[test]
fn a_reuseport_stranger_in_this_process_is_refused_too() {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_reuse_port(true).unwrap();
    socket.set_reuse_address(true).unwrap();
    socket
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    socket.listen(16).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let cfg = linerate_server::Config {
        addr,
        ..common::config()
    };
    let err = linerate_server::Server::bind(cfg, linerate_server::Router::new())
        .err()
        .expect("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

/// A self-signed certificate for `localhost`: (PEM cert, PEM key, DER cert).
fn cert() -> (String, String, CertificateDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    (
        ck.cert.pem(),
        ck.signing_key.serialize_pem(),
        ck.cert.der().clone(),
    )
}

/// The leaf certificate the server presents on a fresh HTTPS connection, after one request.
fn presented(addr: SocketAddr, roots: &Arc<ClientConfig>) -> CertificateDer<'static> {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(roots.clone(), name).unwrap();
    let mut s = StreamOwned::new(conn, tcp);
    s.write_all(b"GET /pipeline HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(
        out.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    s.conn.peer_certificates().unwrap()[0].clone()
}

#[test]
fn sighup_serves_a_new_certificate_under_load_without_a_failed_request() {
    let d = dir("sighup");
    let (a_pem, a_key, a_der) = cert();
    let (b_pem, b_key, b_der) = cert();
    let (cert_path, key_path) = (d.join("cert.pem"), d.join("key.pem"));
    std::fs::write(&cert_path, &a_pem).unwrap();
    std::fs::write(&key_path, &a_key).unwrap();
    let s = serve(&[
        "--tls-port",
        "0",
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ]);
    let https: SocketAddr = s
        .banner
        .iter()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("https://")))
        .expect("https URL in the banner")
        .trim_start_matches("https://")
        .parse()
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(a_der.clone()).unwrap();
    roots.add(b_der.clone()).unwrap();
    let mut client = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // A resumed session would show the certificate of the session it resumes.
    client.resumption = rustls::client::Resumption::disabled();
    let client = Arc::new(client);
    assert_eq!(presented(https, &client), a_der);

    // Load: keep-alive requests on two connections until told to stop (bounded in count).
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..2)
        .map(|_| {
            let (stop, addr) = (stop.clone(), s.addr);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let mut ok = 0u32;
                while !stop.load(Ordering::Relaxed) && ok < 200_000 {
                    let r = c.get("/plaintext");
                    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
                    ok += 1;
                }
                ok
            })
        })
        .collect();

    // A bad certificate first: the reload is refused and the old certificate stays.
    std::fs::write(&cert_path, "not a certificate").unwrap();
    signal(&s.child, Signal::HUP);
    std::fs::write(&cert_path, &b_pem).unwrap();
    std::fs::write(&key_path, &b_key).unwrap();
    signal(&s.child, Signal::HUP);
    common::eventually("new certificate never served", || {
        presented(https, &client) == b_der
    });
    stop.store(true, Ordering::Relaxed);
    let served: u32 = load
        .into_iter()
        .map(|t| t.join().expect("no failed request"))
        .sum();
    assert!(served > 0);
    // The server is still the same process, still serving.
    assert!(s.child.id() > 0);
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/pipeline").text(), "ok");
    let _ = std::fs::remove_dir_all(&d);
}

/// Waits until `path` holds a line containing `needle`.
fn wait_for_line(path: &Path, needle: &str) -> String {
    let mut text = String::new();
    common::eventually(
        &format!("{needle} never logged in {}", path.display()),
        || {
            text = std::fs::read_to_string(path).unwrap_or_default();
            text.contains(needle)
        },
    );
    text
}

#[test]
fn sigusr1_reopens_a_renamed_access_log() {
    let d = dir("usr1");
    let log = d.join("access.log");
    let rotated = d.join("access.log.1");
    let s = serve(&["--access-log", log.to_str().unwrap()]);
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/json?before").status, 200);
    wait_for_line(&log, "/json?before");
    std::fs::rename(&log, &rotated).unwrap();
    signal(&s.child, Signal::USR1);
    // The reopen is queued behind the batches before it; poll until the new file appears.
    common::eventually("log not reopened", || log.exists());
    assert_eq!(c.get("/json?after").status, 200);
    let new = wait_for_line(&log, "/json?after");
    assert!(!new.contains("/json?before"), "{new}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(
        old.contains("/json?before") && !old.contains("/json?after"),
        "{old}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_unopenable_access_log_fails_before_the_banner_naming_the_path() {
    let d = dir("badlog");
    let bad = d.join("no-such-dir/access.log");
    let out = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--no-pin", "--access-log"])
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        out.stdout.is_empty(),
        "banner printed: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("cannot open access log {}", bad.display())),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_log_that_is_not_a_terminal_has_no_ansi_codes() {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-pin",
            "--workers",
            "1",
            "--log-level",
            "info",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Signals are handled once the banner's first line is out.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // SIGHUP with nothing to reload logs a line; then SIGTERM logs the drain and ends it.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    signal(&child, Signal::HUP);
    let mut log = String::new();
    while !log.contains("SIGHUP") {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() == 0 {
            panic!("server ended: {log}");
        }
        log.push_str(&line);
    }
    signal(&child, Signal::TERM);
    stderr.read_to_string(&mut log).unwrap();
    assert!(wait_exit(&mut child, Duration::from_secs(15)).success());
    assert!(log.contains("SIGHUP: nothing to reload"), "{log}");
    assert!(log.contains("shutting down"), "{log}");
    assert!(!log.contains('\x1b'), "ANSI escape in {log:?}");
}

/// Regression: changing an upstream's `timeout` logged "workers, limits,
/// timeouts… restart to apply them", yet the new timeout applied at once. The log names each
/// key that changed, as applied now or needing a restart.
#[test]
fn sighup_names_each_changed_key_and_which_need_a_restart() {
    let d = dir("reload-log");
    let file = d.join("linerate.toml");
    let write = |timeout: &str, header_timeout: &str| {
        std::fs::write(
            &file,
            format!(
                "[limits]\nheader_timeout = \"{header_timeout}\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n\
                 [[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\ntimeout = \"{timeout}\"\n\
                 [[site]]\ndefault = true\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n"
            ),
        )
        .unwrap();
    };
    write("60s", "10s");
    let mut child = common::bin::serve_config_logged(&file);
    // Signals are handled once the banner's first line is out.
    let mut stdout = std::io::BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // The log's lines through a channel, so that a line that never comes fails the test
    // after a bounded wait instead of hanging it.
    let stderr = std::io::BufReader::new(child.0.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr) {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let until = |needle: &str| {
        let mut log = String::new();
        while !log.contains(needle) {
            match rx.recv_timeout(common::EVENTUALLY) {
                Ok(line) => log.push_str(&(line + "\n")),
                Err(e) => panic!("no {needle:?} ({e}): {log}"),
            }
        }
        log
    };
    // Only the upstream's timeout: applied now, and no restart asked for.
    write("5s", "10s");
    signal(&child.0, Signal::HUP);
    let log = until("sites and certificates reloaded");
    let log = log + &until("SIGHUP: applied now");
    assert!(
        log.contains("applied now: upstream \"app\" timeout"),
        "{log}"
    );
    // Then a key the workers were built with too: it alone waits for a restart.
    write("5s", "20s");
    signal(&child.0, Signal::HUP);
    let log = until("restart to apply");
    assert!(
        log.contains("restart to apply (in use until then): limits.header_timeout\n"),
        "{log}"
    );
    assert!(!log.contains("applied now"), "nothing else changed: {log}");
    signal(&child.0, Signal::TERM);
    assert!(wait_exit(&mut child.0, Duration::from_secs(15)).success());
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: with stderr a pipe whose reader has gone (`linerate serve 2>&1 | head
/// -1`), SIGTERM and SIGINT were ignored. tracing-subscriber reported the failed write of the
/// "shutting down" line with `eprintln!`, which panicked in the signal thread before it
/// started the drain; only SIGKILL stopped the server.
#[test]
fn sigterm_and_sigint_stop_the_server_with_stderr_closed() {
    for sig in [Signal::TERM, Signal::INT] {
        let child = Command::new(BIN)
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--no-pin",
                "--workers",
                "1",
            ])
            .args(["--log-level", "info"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = common::bin::Stopped(child);
        // The banner read with a bound; stdout keeps a reader after it (a broken stdout
        // alone never did it), while stderr loses its own.
        let lines = common::bin::banner(&mut child.0).expect("a banner");
        let addr: SocketAddr = lines[0]
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
            .expect("banner has the URL")
            .parse()
            .unwrap();
        drop(child.0.stderr.take());
        // Log lines written into the closed pipe meanwhile do not stop the serving.
        let mut c = Client::connect(addr);
        assert_eq!(c.get("/plaintext").status, 200);
        signal(&child.0, Signal::HUP);
        assert_eq!(c.get("/plaintext").status, 200);
        drop(c);
        signal(&child.0, sig);
        let status = wait_exit(&mut child.0, common::EVENTUALLY);
        assert!(status.success(), "{sig:?}: {status}");
    }
}

/// The next notification on `rx` that is not a watchdog ping; counts the pings in `pings`.
fn notification(rx: &std::os::unix::net::UnixDatagram, pings: &mut usize) -> String {
    let mut buf = [0u8; 256];
    loop {
        let n = rx.recv(&mut buf).expect("a notification in time");
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if text == "WATCHDOG=1" {
            *pings += 1;
        } else {
            return text;
        }
    }
}

#[test]
fn systemd_hears_ready_reloading_stopping_and_the_watchdog() {
    let dir = std::env::temp_dir().join(format!("linerate-sdnotify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notify.sock");
    let _ = std::fs::remove_file(&path);
    let rx = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    rx.set_read_timeout(Some(common::EVENTUALLY)).unwrap();
    let child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-pin",
            "--log-level",
            "warn",
        ])
        .args(["--workers", "1"])
        .env("NOTIFY_SOCKET", &path)
        // No WATCHDOG_PID: the watchdog is this process's. 100 ms: a ping every 50 ms.
        .env("WATCHDOG_USEC", "100000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = common::bin::Stopped(child);
    common::bin::banner(&mut child.0).unwrap();
    let pid = child.0.id();
    let mut pings = 0;
    assert_eq!(
        notification(&rx, &mut pings),
        format!("READY=1\nMAINPID={pid}")
    );
    let mut buf = [0u8; 64];
    while pings < 3 {
        let n = rx.recv(&mut buf).expect("watchdog pings keep coming");
        assert_eq!(&buf[..n], b"WATCHDOG=1");
        pings += 1;
    }
    signal(&child.0, Signal::HUP);
    let reloading = notification(&rx, &mut pings);
    let usec = reloading
        .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
        .unwrap_or_else(|| panic!("{reloading:?}"));
    assert!(usec.parse::<u64>().unwrap() > 0, "{reloading:?}");
    assert_eq!(
        notification(&rx, &mut pings),
        format!("READY=1\nMAINPID={pid}")
    );
    signal(&child.0, Signal::TERM);
    assert_eq!(notification(&rx, &mut pings), "STOPPING=1");
    assert!(wait_exit(&mut child.0, common::EVENTUALLY).success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A port nothing listens on now (see `common::free_port`).
fn free_tcp_port() -> u16 {
    common::free_port("127.0.0.1")
}

/// Waits until something listens on `addr` (the probe connection is closed at once).
fn listening_eventually(addr: SocketAddr) {
    common::eventually(&format!("something listens on {addr}"), || {
        TcpStream::connect(addr).is_ok()
    });
}

#[test]
fn a_socket_passed_by_systemd_is_served_and_a_stray_one_refused() {
    // systemd-socket-activate (from systemd) binds, waits for the first connection, then
    // runs the server with the socket as descriptor 3 and LISTEN_FDS/LISTEN_PID set.
    let port = free_tcp_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let child = Command::new("systemd-socket-activate")
        .args([
            "-l",
            &addr.to_string(),
            BIN,
            "serve",
            "--addr",
            &addr.to_string(),
        ])
        .args(["--no-pin", "--log-level", "warn", "--workers", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate (Debian's systemd package) runs");
    let mut child = common::bin::Stopped(child);
    // Two connections at once, with two workers sharing the passed socket.
    listening_eventually(addr);
    let mut a = Client::connect(addr);
    let mut b = Client::connect(addr);
    for c in [&mut a, &mut b] {
        let r = c.get("/plaintext");
        assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
    }
    signal(&child.0, Signal::TERM);
    assert!(wait_exit(&mut child.0, common::EVENTUALLY).success());

    // A passed socket that no listener names is refused, naming its address.
    let stray = free_tcp_port();
    let stray_addr: SocketAddr = format!("127.0.0.1:{stray}").parse().unwrap();
    let mut child = common::bin::Stopped(
        Command::new("systemd-socket-activate")
            .args([
                "-l",
                &stray_addr.to_string(),
                BIN,
                "serve",
                "--addr",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    listening_eventually(stray_addr);
    assert!(!wait_exit(&mut child.0, common::EVENTUALLY).success());
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains(&format!(
            "LISTEN_FDS: systemd passed a socket on {stray_addr}, which no listener names"
        )),
        "{err}"
    );
}
