//! The real binary: one-line CLI errors (HTTPS flags included), the start-up banner (with the
//! https URL), SIGTERM under load, and the access log. Servers bind 127.0.0.1 with an OS-chosen port; every wait is bounded.

mod common;

use common::bin::wait_exit;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn run_err(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn user_mistakes_are_one_line_and_nonzero() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["--bogus"], "unexpected argument"),
        (&["--addr", "not-an-address"], "invalid value"),
        (&["--cpus", "9999"], "not available"),
        (&["--cpus", "3-1"], "invalid CPU list"),
        (&["--workers", "0"], "at least 1"),
        (&["--header-timeout", "soon"], "invalid duration"),
        (&["--addr", &busy_addr], "cannot listen"),
        (&["serve", "--log-level", "loud"], "invalid --log-level"),
        (
            &["--access-log-format", "$status $bogus"],
            "'--access-log-format <FORMAT>': unknown field $bogus",
        ),
        (
            &["--access-log-format", "xml"],
            "'--access-log-format <FORMAT>': must be \"combined\", \"json\" or a template",
        ),
    ];
    for (args, needle) in cases {
        let (code, stderr) = run_err(args);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("linerate: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{stderr}"
        );
    }
}

#[test]
fn clap_hints_are_not_cut_off() {
    // Each of these used to lose everything after clap's first line: the tip, the possible
    // values, even the name of the missing argument.
    let cases: &[(&[&str], &str)] = &[
        (
            &["laod", "http://127.0.0.1/"],
            "tip: some similar subcommands exist: 'lab', 'load'",
        ),
        (
            &["lab", "compar"],
            "tip: a similar subcommand exists: 'compare'",
        ),
        (
            &["load", "--conections", "3", "http://127.0.0.1/"],
            "unexpected argument '--conections' found; tip: a similar argument exists: '--connections'",
        ),
        (
            &["load"],
            "the following required arguments were not provided: <URL>",
        ),
        (
            &["load", "--tls-version", "1.4", "https://127.0.0.1/"],
            "[possible values: 1.2, 1.3]",
        ),
    ];
    for (args, needle) in cases {
        let (code, stderr) = run_err(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("linerate: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.trim_end().ends_with("(see --help)") && !stderr.contains("Usage:"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
    }
}

#[test]
fn load_help_documents_allow_status_errors() {
    let out = Command::new(BIN).args(["load", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--allow-status-errors"), "{help}");
    assert!(help.contains("2xx/3xx"), "{help}");
}

/// Starts the binary on an OS-chosen port and returns it with its address (from the banner).
fn spawn(extra: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-pin",
            "--log-level",
            "warn",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    reader.read_line(&mut line).unwrap();
    // Keep reading the rest of stdout so the server never writes into a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("banner has the URL");
    (child, url.trim_start_matches("http://").parse().unwrap())
}

fn sigterm(child: &Child) {
    common::bin::signal(child, rustix::process::Signal::TERM);
}

#[test]
fn sigterm_under_load_loses_no_request() {
    let (mut child, addr) = spawn(&["--workers", "2"]);
    let clients: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let (mut ok, mut resets, mut partial) = (0u64, 0u64, 0u64);
                let started = Instant::now();
                let Ok(mut s) = TcpStream::connect(addr) else {
                    return (0, 0, 0);
                };
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = Vec::new();
                'outer: while started.elapsed() < Duration::from_secs(10) {
                    if s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
                        .is_err()
                    {
                        break;
                    }
                    buf.clear();
                    let mut chunk = [0u8; 4096];
                    loop {
                        match s.read(&mut chunk) {
                            Ok(0) => {
                                partial += u64::from(!buf.is_empty());
                                break 'outer;
                            }
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                                resets += 1;
                                break 'outer;
                            }
                            Err(e) => panic!("{e}"),
                        }
                        if buf.ends_with(b"Hello, World!") {
                            break;
                        }
                    }
                    ok += 1;
                    if String::from_utf8_lossy(&buf).contains("Connection: close") {
                        break;
                    }
                }
                (ok, resets, partial)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(15));
    assert!(status.success(), "exit status {status:?}");
    let (mut ok, mut resets, mut partial) = (0, 0, 0);
    for c in clients {
        let (o, r, p) = c.join().unwrap();
        ok += o;
        resets += r;
        partial += p;
    }
    assert!(ok > 100, "load ran ({ok} responses)");
    assert_eq!(
        (resets, partial),
        (0, 0),
        "no reset, no truncated response ({ok} ok)"
    );
}

#[test]
fn access_log_writes_combined_lines() {
    let dir = std::env::temp_dir().join(format!("linerate-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let (mut child, addr) = spawn(&["--workers", "1", "--access-log", log.to_str().unwrap()]);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\nUser-Agent: test/1\r\nReferer: http://r/\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"));
    sigterm(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(15)).success());
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().next().expect("one line");
    // nginx combined: $remote_addr - $remote_user [$time_local] "$request" $status $bytes "$referer" "$ua"
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(
        line.ends_with("] \"GET /plaintext HTTP/1.1\" 200 13 \"http://r/\" \"test/1\"")
            || line.contains("\"GET /plaintext HTTP/1.1\" 200 13 \"http://r/\" \"test/1\""),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression: the access line of a 400 had no request (`"-" 400 40 "-" "-"`), so an
/// operator could not see what was refused. It now carries the line as sent, escaped.
#[test]
fn a_refused_request_is_logged_with_its_request_line() {
    let dir = std::env::temp_dir().join(format!("linerate-log400-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let (child, addr) = spawn(&["--workers", "1", "--access-log", log.to_str().unwrap()]);
    let mut child = common::bin::Stopped(child);
    for request in [
        &b"GET /a<b>?q=\"x\" HTTP/1.1\r\nHost: t\r\n\r\n"[..],
        // A body refused after its head: the head's line.
        b"POST /upload?x=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
        s.write_all(request).unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    }
    sigterm(&child.0);
    assert!(wait_exit(&mut child.0, Duration::from_secs(15)).success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("] \"GET /a<b>?q=\\x22x\\x22 HTTP/1.1\" 400 "),
        "{text}"
    );
    assert!(
        lines[1].contains("] \"POST /upload?x=1 HTTP/1.1\" 400 "),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A certificate, its key and an unrelated key, as PEM files in a fresh directory.
fn pem_files(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-tlscli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.join("other.pem"), other.serialize_pem()).unwrap();
    std::fs::write(dir.join("empty.pem"), "").unwrap();
    dir
}

#[test]
fn tls_mistakes_are_one_line_and_nonzero() {
    let dir = pem_files("mistakes");
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let (cert, key, other, empty, missing) = (
        p("cert.pem"),
        p("key.pem"),
        p("other.pem"),
        p("empty.pem"),
        p("missing.pem"),
    );
    let base = [
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--no-pin",
        "--tls-port",
        "0",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--tls-cert", &cert], "go together"),
        (vec!["--tls-cert", &cert, "--tls-key", &other], "--tls-key"),
        (
            vec!["--tls-cert", &missing, "--tls-key", &key],
            "--tls-cert",
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &missing],
            "--tls-key",
        ),
        (vec!["--tls-cert", &empty, "--tls-key", &key], "--tls-cert"),
        (vec!["--tls-cert", &cert, "--tls-key", &empty], "--tls-key"),
    ];
    for (extra, needle) in &cases {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let (code, stderr) = run_err(&args);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("linerate: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // The line says why, not only which flag.
    for (key, why) in [
        (&other, "does not match --tls-cert"),
        (&missing, "No such file"),
    ] {
        let args: Vec<&str> = base
            .iter()
            .copied()
            .chain(["--tls-cert", &cert, "--tls-key", key])
            .collect();
        let (_, stderr) = run_err(&args);
        assert!(stderr.contains(why), "{stderr}");
    }
}

#[test]
fn banner_shows_the_https_url() {
    let dir = pem_files("banner");
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-pin",
            "--workers",
            "1",
        ])
        .args(["--log-level", "warn", "--tls-port", "0", "--tls-cert"])
        .arg(dir.join("cert.pem"))
        .arg("--tls-key")
        .arg(dir.join("key.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let started = Instant::now();
    let mut https = None;
    let mut line = String::new();
    while https.is_none() && started.elapsed() < Duration::from_secs(10) {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        https = line
            .split_whitespace()
            .find(|w| w.starts_with("https://127.0.0.1:"))
            .map(str::to_string);
    }
    let _ = child.kill();
    let _ = child.wait();
    let https = https.expect("banner has the https URL");
    let port: u16 = https.rsplit(':').next().unwrap().parse().unwrap();
    assert_ne!(port, 0);
}

/// A streamed gRPC answer's access-log line carries the call's final `grpc-status`, which
/// comes in its trailers after the messages (the line is written at the answer's end): OK
/// for a server-streaming call, NOT_FOUND (5) for a bidirectional one that fails after its
/// first message. Before, such a line had no `grpc_status` (it was written with the head).
#[test]
fn a_streamed_grpc_answers_access_line_has_its_final_grpc_status() {
    let dir = std::env::temp_dir().join(format!("linerate-log-grpc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let srv = common::bin::serve(&[
        "--h2c-port",
        "0",
        "--access-log",
        log.to_str().unwrap(),
        "--access-log-format",
        "json",
    ]);
    let h2c: SocketAddr = srv
        .banner
        .iter()
        .find_map(|l| l.split("(h2c, prior knowledge) on http://").nth(1))
        .expect("the banner names the h2c listener")
        .trim()
        .parse()
        .unwrap();
    // StreamingOutputCallRequest { response_parameters: [{ size: 10 }] }, and one with
    // response_status { code: 5 }, each as a gRPC frame.
    let sized: &[u8] = &[0, 0, 0, 0, 4, 0x12, 2, 0x08, 10];
    let failing: &[u8] = &[0, 0, 0, 0, 4, 0x3a, 2, 0x08, 5];
    let calls = [
        (
            "/grpc.testing.TestService/StreamingOutputCall",
            sized.to_vec(),
        ),
        (
            "/grpc.testing.TestService/FullDuplexCall",
            [sized, failing].concat(),
        ),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let statuses: Vec<Option<String>> = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(h2c).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut got = Vec::new();
        for (path, body) in &calls {
            let req = http::Request::builder()
                .method("POST")
                .uri(format!("http://t{path}"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let mut client = client.clone().ready().await.unwrap();
            let (answer, mut send) = client.send_request(req, false).unwrap();
            send.send_data(bytes::Bytes::from(body.clone()), true)
                .unwrap();
            let mut recv = answer.await.unwrap().into_body();
            let mut messages = 0;
            while let Some(piece) = recv.data().await {
                let piece = piece.unwrap();
                let _ = recv.flow_control().release_capacity(piece.len());
                messages += piece.len();
            }
            assert!(messages > 0, "{path}: its messages came first");
            let trailers = recv.trailers().await.unwrap();
            got.push(trailers.and_then(|t| {
                t.get("grpc-status")
                    .map(|v| v.to_str().unwrap().to_string())
            }));
        }
        got
    });
    assert_eq!(statuses, [Some("0".into()), Some("5".into())]);
    let mut lines = Vec::new();
    common::eventually("two access-log lines", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        lines = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect();
        lines.len() >= 2
    });
    let by_path = |p: &str| {
        lines
            .iter()
            .find(|l| l["target"].as_str().is_some_and(|t| t.contains(p)))
            .unwrap_or_else(|| panic!("a line for {p}: {lines:?}"))
            .clone()
    };
    assert_eq!(
        by_path("StreamingOutputCall")["grpc_status"],
        0,
        "{lines:?}"
    );
    assert_eq!(by_path("FullDuplexCall")["grpc_status"], 5, "{lines:?}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A proxied gRPC call's access-log line carries the upstream's `grpc-status` as linerate's
/// own services' lines do: from the trailers after a streamed answer's messages (OK, and
/// NOT_FOUND after a first message) and from a Trailers-Only answer's head (UNIMPLEMENTED
/// for an unknown method). Before, the proxy's lines had none.
#[test]
fn a_proxied_grpc_calls_access_line_has_its_upstreams_grpc_status() {
    let dir = std::env::temp_dir().join(format!("linerate-log-grpc-px-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let h2c_of = |srv: &common::bin::Served| -> SocketAddr {
        srv.banner
            .iter()
            .find_map(|l| l.split("(h2c, prior knowledge) on http://").nth(1))
            .expect("the banner names the h2c listener")
            .trim()
            .parse()
            .unwrap()
    };
    let upstream = common::bin::serve(&["--h2c-port", "0"]);
    let target = format!("/=h2c://{}", h2c_of(&upstream));
    let proxy = common::bin::serve(&[
        "--app",
        "none",
        "--h2c-port",
        "0",
        "--proxy",
        &target,
        "--access-log",
        log.to_str().unwrap(),
        "--access-log-format",
        "json",
    ]);
    let sized: &[u8] = &[0, 0, 0, 0, 4, 0x12, 2, 0x08, 10];
    let failing: &[u8] = &[0, 0, 0, 0, 4, 0x3a, 2, 0x08, 5];
    let calls = [
        (
            "/grpc.testing.TestService/StreamingOutputCall",
            sized.to_vec(),
        ),
        (
            "/grpc.testing.TestService/FullDuplexCall",
            [sized, failing].concat(),
        ),
        ("/grpc.testing.TestService/NoSuchMethod", sized.to_vec()),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let proxy_h2c = h2c_of(&proxy);
    let statuses: Vec<Option<String>> = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(proxy_h2c).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut got = Vec::new();
        for (path, body) in &calls {
            let req = http::Request::builder()
                .method("POST")
                .uri(format!("http://t{path}"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let mut client = client.clone().ready().await.unwrap();
            let (answer, mut send) = client.send_request(req, false).unwrap();
            send.send_data(bytes::Bytes::from(body.clone()), true)
                .unwrap();
            let answer = answer.await.unwrap();
            let head_status = answer
                .headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap().to_string());
            let mut recv = answer.into_body();
            while let Some(piece) = recv.data().await {
                let piece = piece.unwrap();
                let _ = recv.flow_control().release_capacity(piece.len());
            }
            let trailers = recv.trailers().await.unwrap();
            got.push(head_status.or_else(|| {
                trailers.and_then(|t| {
                    t.get("grpc-status")
                        .map(|v| v.to_str().unwrap().to_string())
                })
            }));
        }
        got
    });
    assert_eq!(
        statuses,
        [Some("0".into()), Some("5".into()), Some("12".into())]
    );
    let mut lines = Vec::new();
    common::eventually("three access-log lines", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        lines = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect();
        lines.len() >= 3
    });
    let by_path = |p: &str| {
        lines
            .iter()
            .find(|l| l["target"].as_str().is_some_and(|t| t.contains(p)))
            .unwrap_or_else(|| panic!("a line for {p}: {lines:?}"))
            .clone()
    };
    assert_eq!(
        by_path("StreamingOutputCall")["grpc_status"],
        0,
        "{lines:?}"
    );
    assert_eq!(by_path("FullDuplexCall")["grpc_status"], 5, "{lines:?}");
    assert_eq!(by_path("NoSuchMethod")["grpc_status"], 12, "{lines:?}");
    drop(proxy);
    drop(upstream);
    let _ = std::fs::remove_dir_all(&dir);
}
