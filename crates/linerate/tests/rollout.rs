//! Rollouts with zero failed requests: `shutdown_delay` (SIGTERM fails
//! `/healthz` at once and keeps serving for the delay, then drains), and a binary upgrade by
//! socket handoff (`upgrade_socket` and `--takeover`: the new process serves the old one's
//! very sockets, TCP, Unix, admin and QUIC, and the old one drains) under load.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::Client;
use common::bin::{BIN, Stopped, signal, wait_exit};
use rustix::process::Signal;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-rollout-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts `linerate serve --no-pin --log-level warn ARGS…` and waits for its banner.
fn start(args: &[&str]) -> Stopped {
    let child = Command::new(BIN)
        .args(["serve", "--no-pin", "--log-level", "warn"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Stopped(child);
    common::bin::banner(&mut child.0).expect("a banner");
    child
}

/// `GET path` on a fresh connection to the admin listener: the status.
fn admin_status(admin: SocketAddr, path: &str) -> u16 {
    let mut c = Client::connect(admin);
    c.get(path).status
}

/// SIGTERM closed the listener at once, so a balancer still sending to the
/// node (it has not yet seen `/healthz` fail) got refused connections. With
/// `shutdown_delay`, `/healthz` is 503 at once, a connection made a second after the signal
/// is still answered (a kept-alive one too, and kept alive), and the process exits 0 after
/// the delay and the drain.
#[test]
fn sigterm_with_a_shutdown_delay_keeps_serving_while_healthz_fails() {
    let d = dir("delay");
    let port = common::free_port("127.0.0.1");
    let admin: SocketAddr = format!("127.0.0.1:{}", common::free_port("127.0.0.1"))
        .parse()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "shutdown_delay = \"2s\"\n[admin]\naddr = \"{admin}\"\n[[listen]]\naddr = \"{addr}\"\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let mut child = start(&["--workers", "1", "--config", file.to_str().unwrap()]);
    let mut kept = Client::connect(addr);
    assert_eq!(kept.get("/plaintext").status, 200);
    assert_eq!(admin_status(admin, "/healthz"), 200);
    assert_eq!(admin_status(admin, "/readyz"), 200);
    let signalled = Instant::now();
    signal(&child.0, Signal::TERM);
    common::eventually("/healthz answers 503", || {
        admin_status(admin, "/healthz") == 503
    });
    assert_eq!(
        admin_status(admin, "/readyz"),
        503,
        "not ready while draining"
    );
    // A second after the signal, well inside the delay.
    std::thread::sleep(Duration::from_secs(1).saturating_sub(signalled.elapsed()));
    let mut fresh = Client::connect(addr);
    let r = fresh.get("/plaintext");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
    // The balancer moves the traffic; the node does not push its clients off yet.
    let r = kept.get("/plaintext");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), None, "{:?}", r.headers);
    assert!(
        signalled.elapsed() < Duration::from_secs(2),
        "the checks ran past the delay; nothing was shown"
    );
    drop((kept, fresh));
    let status = wait_exit(&mut child.0, common::EVENTUALLY);
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Under systemd, `STOPPING=1` goes out at the start of the delay (the flag
/// `--shutdown-delay` this time), and the server still answers new connections a second
/// later.
#[test]
fn systemd_hears_stopping_at_the_start_of_the_shutdown_delay() {
    let d = dir("notify");
    let path = d.join("notify.sock");
    let rx = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    rx.set_read_timeout(Some(common::EVENTUALLY)).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", common::free_port("127.0.0.1"))
        .parse()
        .unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--no-pin", "--log-level", "warn", "--workers", "1"])
        .args(["--addr", &addr.to_string(), "--shutdown-delay", "3s"])
        .env("NOTIFY_SOCKET", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Stopped(child);
    common::bin::banner(&mut child.0).unwrap();
    let mut buf = [0u8; 256];
    let n = rx.recv(&mut buf).expect("READY=1");
    assert!(buf[..n].starts_with(b"READY=1"));
    let signalled = Instant::now();
    signal(&child.0, Signal::TERM);
    let n = rx.recv(&mut buf).expect("a notification after SIGTERM");
    assert_eq!(&buf[..n], b"STOPPING=1");
    // A second after the signal, inside the delay: a drain begun with STOPPING=1 would
    // have closed the listener by now.
    std::thread::sleep(Duration::from_secs(1).saturating_sub(signalled.elapsed()));
    let mut c = Client::connect(addr);
    assert_eq!(
        c.get("/plaintext").status,
        200,
        "still serving after STOPPING=1"
    );
    drop(c);
    assert!(wait_exit(&mut child.0, common::EVENTUALLY).success());
    let _ = std::fs::remove_dir_all(&d);
}

/// What the load saw.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    /// A kept-alive connection the server closed (FIN, no byte of an answer) as the client
    /// sent on it: sent again on a new connection, as RFC 9112 §9.3.1 lets a client do with
    /// an idempotent request, and as every HTTP client does. Not a failure; counted to show.
    retried: AtomicU64,
    /// Everything else: a refused connection, a reset, a cut answer, a status not 200, a
    /// timeout.
    failed: AtomicU64,
    /// Why each failure failed, for the assertion's message.
    why: std::sync::Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, why: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.why.lock().unwrap().push(why);
    }
}

/// A connection to the plain listener or the Unix one.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    fn open(to: &Target) -> std::io::Result<Conn> {
        let c = match to {
            Target::Tcp(a) => {
                let s = TcpStream::connect(a)?;
                s.set_nodelay(true)?;
                Conn::Tcp(s)
            }
            Target::Unix(p) => Conn::Unix(UnixStream::connect(p)?),
        };
        let timeout = Some(Duration::from_secs(5));
        match &c {
            Conn::Tcp(s) => s.set_read_timeout(timeout)?,
            Conn::Unix(s) => s.set_read_timeout(timeout)?,
        }
        Ok(c)
    }

    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Conn::Tcp(s) => s,
            Conn::Unix(s) => s,
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[derive(Clone)]
enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// How one request on a connection went.
enum Outcome {
    /// 200 and the whole body; whether the connection stays open.
    Ok {
        open: bool,
    },
    /// A clean EOF before any byte of the answer.
    ClosedBeforeAnswer,
    Failed(String),
}

fn one(c: &mut Conn, close: bool) -> Outcome {
    let req: &[u8] = if close {
        b"GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    } else {
        b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n"
    };
    let io = c.io();
    if let Err(e) = io.write_all(req) {
        // Written after the server closed: nothing of it was taken in.
        return match e.kind() {
            ErrorKind::BrokenPipe => Outcome::ClosedBeforeAnswer,
            _ => Outcome::Failed(format!("write: {e}")),
        };
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match io.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Outcome::ClosedBeforeAnswer,
            Ok(0) => return Outcome::Failed("EOF inside an answer".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Outcome::Failed(format!("read: {e}")),
        }
        let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        // "Hello, World!": 13 bytes.
        if buf.len() < p + 4 + 13 {
            continue;
        }
        let head = String::from_utf8_lossy(&buf[..p]).to_ascii_lowercase();
        if !head.starts_with("http/1.1 200") {
            return Outcome::Failed(format!("answer {head:?}"));
        }
        return Outcome::Ok {
            open: !close && !head.contains("connection: close"),
        };
    }
}

/// Requests until `stop`, at most `MAX_LOAD`: on a kept-alive connection when `keep`, else
/// each on a new connection.
fn load(to: Target, keep: bool, stop: Arc<AtomicBool>, t: Arc<Tally>) {
    const MAX_LOAD: Duration = Duration::from_secs(40);
    let started = Instant::now();
    let mut conn: Option<Conn> = None;
    let kind = match (&to, keep) {
        (Target::Tcp(_), true) => "tcp, kept alive",
        (Target::Tcp(_), false) => "tcp, a connection each",
        (Target::Unix(_), true) => "unix, kept alive",
        (Target::Unix(_), false) => "unix, a connection each",
    };
    while !stop.load(Ordering::Relaxed) && started.elapsed() < MAX_LOAD {
        let reused = conn.is_some();
        let mut c = match conn.take() {
            Some(c) => c,
            None => match Conn::open(&to) {
                Ok(c) => c,
                Err(e) => {
                    t.fail(format!("{kind}: connect: {e}"));
                    continue;
                }
            },
        };
        match one(&mut c, !keep) {
            Outcome::Ok { open } => {
                t.ok.fetch_add(1, Ordering::Relaxed);
                if open {
                    conn = Some(c);
                }
            }
            // Sent again on the next turn, on a new connection.
            Outcome::ClosedBeforeAnswer if reused => {
                t.retried.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::ClosedBeforeAnswer => {
                t.fail(format!("{kind}: a new connection closed before its answer"));
            }
            Outcome::Failed(why) => t.fail(format!("{kind}: {why}")),
        }
    }
}

/// A self-signed certificate for `localhost`, written as `d/server.pem` and `d/server.key`,
/// and a rustls client trusting it.
fn certificate(d: &Path) -> rustls::ClientConfig {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(d.join("server.pem"), cert.pem()).unwrap();
    std::fs::write(d.join("server.key"), key.serialize_pem()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A takeover of `from` by a new server with `workers` workers and `file`.
fn take_over(file: &Path, from: &Path, workers: usize) -> Stopped {
    start(&[
        "--workers",
        &workers.to_string(),
        "--config",
        file.to_str().unwrap(),
        "--takeover",
        from.to_str().unwrap(),
    ])
}

/// A binary upgrade had no listener handoff without systemd. Under load on
/// kept-alive and new connections, over TCP and a Unix socket, two upgrades in a row (2
/// workers to 1: the old group's second socket is accepted from too; then 1 to 3: new members
/// join the group) lose no request; each old process exits 0; the last one serves the same
/// TCP and Unix listeners, the admin listener (`/healthz` 200) and HTTP/3 on the handed-over
/// UDP socket.
#[test]
fn an_upgrade_by_socket_handoff_under_load_loses_no_request() {
    let d = dir("handoff");
    let client_tls = certificate(&d);
    let port = common::free_port("127.0.0.1");
    let tls_port = common::free_port("127.0.0.1");
    let admin: SocketAddr = format!("127.0.0.1:{}", common::free_port("127.0.0.1"))
        .parse()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let tls_addr: SocketAddr = format!("127.0.0.1:{tls_port}").parse().unwrap();
    let unix = d.join("app.sock");
    let upgrade = d.join("upgrade.sock");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "upgrade_socket = \"{up}\"\n[admin]\naddr = \"{admin}\"\n\
             [[listen]]\naddr = \"{addr}\"\n\
             [[listen]]\nunix = \"{unix}\"\n\
             [[listen]]\naddr = \"{tls_addr}\"\ntls = {{ cert = \"{d}/server.pem\", key = \"{d}/server.key\" }}\nquic = true\n\
             [[site]]\ndefault = true\napp = \"demo\"\n",
            up = upgrade.display(),
            unix = unix.display(),
            d = d.display(),
        ),
    )
    .unwrap();
    let mut old = start(&["--workers", "2", "--config", file.to_str().unwrap()]);
    let quic = common::h3::quic(client_tls);
    assert_eq!(
        common::h3::get(&quic, tls_addr, &["/plaintext"]).answers[0].0,
        200
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&upgrade).unwrap().permissions(),
    );
    assert_eq!(
        mode & 0o777,
        0o600,
        "the upgrade socket is its owner's only"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut loads = Vec::new();
    for (to, keep) in [
        (Target::Tcp(addr), true),
        (Target::Tcp(addr), true),
        (Target::Tcp(addr), false),
        (Target::Unix(unix.clone()), true),
        (Target::Unix(unix.clone()), false),
    ] {
        let (stop, tally) = (stop.clone(), tally.clone());
        loads.push(std::thread::spawn(move || load(to, keep, stop, tally)));
    }
    let served = |n: u64| {
        let at = tally.ok.load(Ordering::Relaxed);
        common::eventually(&format!("{n} more answers"), || {
            tally.ok.load(Ordering::Relaxed) >= at + n
        });
    };
    served(200);
    let mut new = take_over(&file, &upgrade, 1);
    let status = wait_exit(&mut old.0, common::EVENTUALLY);
    assert!(status.success(), "the old process: {status}");
    served(200);
    let mut newer = take_over(&file, &upgrade, 3);
    let status = wait_exit(&mut new.0, common::EVENTUALLY);
    assert!(status.success(), "the second process: {status}");
    served(200);
    stop.store(true, Ordering::Relaxed);
    for l in loads {
        l.join().unwrap();
    }
    let (ok, retried, failed) = (
        tally.ok.load(Ordering::Relaxed),
        tally.retried.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
    );
    eprintln!("load: {ok} answered, {retried} sent again after an idle close, {failed} failed");
    assert_eq!(
        failed,
        0,
        "{ok} answered, {retried} sent again; failures: {:?}",
        tally.why.lock().unwrap()
    );
    // A drain gives an idle kept-alive connection a grace for its next request (answered
    // with close): no request is closed under, so none needs sending again (0 to 3 a run
    // were before).
    assert_eq!(retried, 0, "requests sent again after an idle close");

    // The last process serves every listener of the first.
    assert_eq!(Client::connect(addr).get("/plaintext").status, 200);
    let mut u = Conn::open(&Target::Unix(unix.clone())).unwrap();
    assert!(matches!(one(&mut u, true), Outcome::Ok { .. }));
    assert_eq!(admin_status(admin, "/healthz"), 200);
    assert_eq!(
        common::h3::get(&quic, tls_addr, &["/plaintext"]).answers[0].0,
        200
    );
    assert!(
        upgrade.exists(),
        "the last process offers its sockets in turn"
    );
    signal(&newer.0, Signal::TERM);
    assert!(wait_exit(&mut newer.0, common::EVENTUALLY).success());
    assert!(
        !unix.exists(),
        "the last process removes the Unix socket's file"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A takeover from a path where no server offers its sockets: one line that says so, and a
/// failed exit, before anything is bound.
#[test]
fn a_takeover_from_a_socket_nobody_listens_on_fails_in_one_line() {
    let d = dir("nobody");
    let path = d.join("nobody.sock");
    let (code, stderr) = common::bin::run_err(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--no-pin",
        "--takeover",
        path.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("cannot take over from") && lines[0].contains("nobody.sock"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The copies of the listening sockets an upgrade socket offers are closed when the server
/// drains without a takeover (SIGTERM): held on, the listener would stay open with nobody
/// accepting, and new connections would wait in its queue until the process exits, then be
/// reset, instead of being refused at once. While a slow request is still in flight, a new
/// connection is refused, and the upgrade socket's file is gone.
#[test]
fn a_drain_with_an_upgrade_socket_refuses_new_connections_at_once() {
    let d = dir("offer-drain");
    let upgrade = d.join("upgrade.sock");
    let port = common::free_port("127.0.0.1");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = start(&[
        "--workers",
        "1",
        "--addr",
        &addr.to_string(),
        "--upgrade-socket",
        upgrade.to_str().unwrap(),
    ]);
    assert!(upgrade.exists());
    let mut slow = Client::connect(addr);
    slow.send(b"GET /delay/3000 HTTP/1.1\r\nHost: t\r\n\r\n");
    signal(&child.0, Signal::TERM);
    common::eventually("a new connection is refused", || {
        TcpStream::connect(addr).is_err()
    });
    // The slow request is still in flight: the refusal came from the drain, not the exit.
    slow.stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert!(
        matches!(slow.stream.peek(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "the slow request was answered before a connection was refused"
    );
    assert!(!upgrade.exists(), "the drain ends the offer");
    slow.stream.set_nonblocking(false).unwrap();
    assert_eq!(slow.read_response().status, 200);
    assert!(wait_exit(&mut child.0, common::EVENTUALLY).success());
    let _ = std::fs::remove_dir_all(&d);
}

/// While the old process drains after a handoff, both processes read the same UDP sockets,
/// and a new QUIC client's Initial may reach either. The old one refused those
/// (CONNECTION_REFUSED, as a lone draining server must): the client's connection failed.
/// Then it dropped them, and the client's resend (a second later, then 2 s, 4 s) was served
/// only if it reached the new process: a client whose Initials the old one read 4 times in
/// a row failed. It now forwards what it reads for none of its connections to the new
/// process (as Envoy's hot restart does): every fresh HTTP/3 connection made during the old
/// one's drain is answered 200, and none of its packets is lost on the way. The drain is held open by an upload whose body the test finishes only after
/// its checks, not by a timed slow request: on a busy CI host the checks outlasted a 6 s
/// delay, and the old process ended after 2 of them.
#[test]
fn quic_clients_during_the_old_process_drain_are_served() {
    let d = dir("quic-drain");
    let client_tls = certificate(&d);
    let tls_port = common::free_port("127.0.0.1");
    let tls_addr: SocketAddr = format!("127.0.0.1:{tls_port}").parse().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", common::free_port("127.0.0.1"))
        .parse()
        .unwrap();
    let upgrade = d.join("upgrade.sock");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "upgrade_socket = \"{up}\"\n[limits]\ndrain_timeout = \"120s\"\n\
             [[listen]]\naddr = \"{addr}\"\n\
             [[listen]]\naddr = \"{tls_addr}\"\ntls = {{ cert = \"{d}/server.pem\", key = \"{d}/server.key\" }}\nquic = true\n\
             [[site]]\ndefault = true\napp = \"demo\"\n",
            up = upgrade.display(),
            d = d.display(),
        ),
    )
    .unwrap();
    let mut old = start(&["--workers", "1", "--config", file.to_str().unwrap()]);
    let quic = common::h3::quic(client_tls);
    assert_eq!(
        common::h3::get(&quic, tls_addr, &["/plaintext"]).answers[0].0,
        200
    );
    // An unfinished upload on the old process keeps it draining (and reading the UDP
    // sockets) while the fresh connections below are made. A chunk of its body goes before
    // each check, so it never waits on `BODY_TIMEOUT` or `MIN_BODY_RATE`.
    const CHUNK: usize = 16 * 1024;
    const CHECKS: usize = 10;
    let mut upload = Client::connect(addr);
    upload.send(
        format!(
            "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            CHUNK * (CHECKS + 1)
        )
        .as_bytes(),
    );
    upload.send(&[b'x'; CHUNK]);
    let mut new = take_over(&file, &upgrade, 1);
    // The new process moves its upgrade socket into place once the old one drains.
    let beside = d.join("upgrade.sock.new");
    common::eventually("the old process drains", || !beside.exists());
    let (mut failed, mut resent) = (0, 0);
    for _ in 0..CHECKS {
        upload.send(&[b'x'; CHUNK]);
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            common::h3::get(&quic, tls_addr, &["/plaintext"])
        }));
        match got {
            Ok(g) if g.answers[0].0 == 200 => resent += usize::from(g.lost_packets > 0),
            _ => failed += 1,
        }
    }
    assert!(
        old.0.try_wait().unwrap().is_none(),
        "the old process ended before its upload did: the checks were not all made during its drain"
    );
    assert_eq!(
        failed, 0,
        "{failed} of {CHECKS} fresh HTTP/3 connections failed"
    );
    // Dropped, about half the clients' Initials and handshake packets were read by the
    // old process and sent again; with forwarding none is. Two clients are allowed for a
    // host so busy that an answer takes longer than a client's first timeout (about 1 s).
    assert!(
        resent <= 2,
        "{resent} of {CHECKS} fresh HTTP/3 clients lost packets to the old process"
    );
    let done = upload.read_response();
    assert_eq!(done.status, 200, "the old process finishes its upload");
    assert_eq!(
        done.body,
        (CHUNK * (CHECKS + 1)).to_string().as_bytes(),
        "the old process received the whole body"
    );
    assert!(wait_exit(&mut old.0, common::EVENTUALLY).success());
    signal(&new.0, Signal::TERM);
    assert!(wait_exit(&mut new.0, common::EVENTUALLY).success());
    let _ = std::fs::remove_dir_all(&d);
}
