//! Slow clients against the timeouts: each ends with the right answer and a clean close, a
//! stalled client never holds up others on the same worker, and slow readers queue little in
//! the kernel and are reset.

mod common;

use std::time::Duration;

use common::{Client, config, start};
use linerate_server::Config;

fn short_timeouts() -> Config {
    Config {
        header_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        keepalive_timeout: Duration::from_millis(300),
        ..config()
    }
}

#[test]
fn partial_head_gets_408_and_close() {
    let server = start(short_timeouts(), linerate::demo::router());
    let mut c = Client::connect(server.addr);
    c.send(b"GET /json HTTP/1.1\r\nHo");
    let r = c.read_response();
    assert_eq!(r.status, 408);
    assert_eq!(r.header("connection"), Some("close"));
    c.expect_eof();
    server.stop();
}

#[test]
fn trickled_head_is_not_kept_alive_by_each_byte() {
    // Slowloris: one byte every 100 ms never completes the head; the header timeout runs from
    // the first byte, so the server answers 408 although bytes keep coming.
    let server = start(short_timeouts(), linerate::demo::router());
    let mut c = Client::connect(server.addr);
    let mut answered_early = false;
    for b in b"GET /json HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
        c.stream.set_nonblocking(true).unwrap();
        let ready = matches!(c.stream.peek(&mut [0u8; 1]), Ok(n) if n > 0);
        c.stream.set_nonblocking(false).unwrap();
        if ready {
            answered_early = true;
            break;
        }
        if std::io::Write::write_all(&mut c.stream, std::slice::from_ref(b)).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        answered_early,
        "the server answered before the trickle ended"
    );
    let r = c.read_response();
    assert_eq!(r.status, 408);
    server.stop();
}

#[test]
fn stalled_body_gets_408_and_close() {
    let server = start(short_timeouts(), linerate::demo::router());
    let mut c = Client::connect(server.addr);
    c.send(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n123");
    let r = c.read_response();
    assert_eq!(r.status, 408);
    c.expect_eof();
    server.stop();
}

#[test]
fn idle_keep_alive_connection_is_closed_quietly() {
    let server = start(short_timeouts(), linerate::demo::router());
    let mut c = Client::connect(server.addr);
    assert_eq!(c.get("/pipeline").text(), "ok");
    // No 408 for an idle connection between requests: just a clean close.
    c.expect_eof();
    // A connection that never sends anything is closed the same way.
    let mut silent = Client::connect(server.addr);
    silent.expect_eof();
    server.stop();
}

#[test]
fn a_stalled_client_does_not_block_others() {
    let server = start(config(), linerate::demo::router());
    let mut stalled = Client::connect(server.addr);
    stalled.send(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n12");
    let mut other = Client::connect(server.addr);
    for _ in 0..100 {
        assert_eq!(other.get("/pipeline").text(), "ok");
    }
    drop(stalled);
    server.stop();
}

#[test]
fn client_that_does_not_read_is_bounded() {
    // Pipeline far more than the socket buffers hold without reading: the server stops
    // reading (it never buffers without bound) and everything is answered once we read.
    let server = start(config(), linerate::demo::router());
    let mut c = Client::connect(server.addr);
    let n = 4_000;
    let req = b"GET /json/50 HTTP/1.1\r\nHost: a\r\n\r\n";
    let writer = {
        let mut s = c.stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let batch: Vec<u8> = req.iter().copied().cycle().take(req.len() * 100).collect();
            for _ in 0..n / 100 {
                std::io::Write::write_all(&mut s, &batch).unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..n {
        assert_eq!(c.read_response().status, 200);
    }
    writer.join().unwrap();
    server.stop();
}

#[test]
fn a_client_that_stops_reading_a_large_file_is_reset_at_the_send_timeout() {
    // Graceful close would leave the unsent part of the file queued in the kernel, sent on
    // to a client that does not read (an orphan); a reset frees it and tells the client.
    let dir = std::env::temp_dir().join(format!("linerate-reset-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let len = 32 << 20;
    std::fs::write(dir.join("big.bin"), vec![7u8; len]).unwrap();
    let server = start(
        Config {
            send_timeout: Duration::from_millis(300),
            files: Some(linerate_server::config::FilesMount {
                prefix: String::new(),
                root: dir.clone(),
                ..Default::default()
            }),
            ..config()
        },
        linerate_server::Router::new(),
    );
    let mut c = Client::connect(server.addr);
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n");
    // Read nothing for longer than the send timeout, then read what is there.
    std::thread::sleep(Duration::from_millis(1_000));
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let end = loop {
        match std::io::Read::read(&mut c.stream, &mut buf) {
            Ok(0) => break "eof",
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break "reset",
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(end, "reset", "after {got} of {len} bytes");
    assert!(got < len);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The kernel's send queue (bytes written and not yet acknowledged) of each established
/// connection whose local port is `port`, from /proc/net/tcp.
fn send_queues(port: u16) -> Vec<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()?;
            let tx = u64::from_str_radix(f[4].split(':').next()?, 16).ok()?;
            (local == port && f[3] == "01").then_some(tx)
        })
        .collect()
}

/// A client with a 4 KiB receive buffer that asks for `/big.bin`.
fn small_window_get(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&addr.into()).unwrap();
    let mut s: std::net::TcpStream = s.into();
    std::io::Write::write_all(&mut s, b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    s
}

#[test]
fn slow_readers_queue_little_in_the_kernel_and_are_reset() {
    // A slow-read attack (slowhttptest -X): clients with a small window ask for a large file
    // and read a few bytes now and then. Each connection's send queue stays near
    // max_unsent_bytes instead of the whole send buffer (megabytes each, which is how 1,000
    // of them filled the host's TCP memory), the readers are reset once they fall behind,
    // and a client that reads gets every byte meanwhile.
    let dir = std::env::temp_dir().join(format!("linerate-slowread-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let len = 4 << 20;
    std::fs::write(dir.join("big.bin"), vec![7u8; len]).unwrap();
    let serve = |unsent: u64| {
        start(
            Config {
                send_timeout: Duration::from_millis(1_000),
                max_unsent_bytes: unsent,
                files: Some(linerate_server::config::FilesMount {
                    prefix: String::new(),
                    root: dir.clone(),
                    ..Default::default()
                }),
                ..config()
            },
            linerate_server::Router::new(),
        )
    };
    let limit = 64 << 10;
    let readers = 8;
    let queued = |port: u16| {
        let mut q = Vec::new();
        common::eventually("every reader's answer is queued", || {
            q = send_queues(port);
            q.len() == readers && q.iter().all(|&b| b >= limit)
        });
        q
    };

    // The kernel's own default, for comparison: far more is queued per reader.
    let server = serve(0);
    let _held: Vec<_> = (0..readers)
        .map(|_| small_window_get(server.addr))
        .collect();
    let q = queued(server.addr.port());
    assert!(q.iter().all(|&b| b > 4 * limit), "{q:?}");
    server.stop();

    let server = serve(limit);
    let mut slow: Vec<_> = (0..readers)
        .map(|_| small_window_get(server.addr))
        .collect();
    let q = queued(server.addr.port());
    // What is unsent, plus what the 4 KiB window lets be in flight.
    assert!(q.iter().all(|&b| b <= limit + 16 * 1024), "{q:?}");

    let mut good = Client::connect(server.addr);
    good.send(b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = good.read_response();
    assert_eq!((r.status, r.body.len()), (200, len));

    // 16 bytes every 100 ms: each reader is reset well within 30 s.
    let start_at = std::time::Instant::now();
    let mut ends = vec![None; readers];
    while ends.iter().any(Option::is_none) && start_at.elapsed() < Duration::from_secs(30) {
        for (s, end) in slow
            .iter_mut()
            .zip(ends.iter_mut())
            .filter(|(_, e)| e.is_none())
        {
            // A reset is reported once the bytes already received are read: ask for it.
            if let Ok(Some(e)) = s.take_error() {
                *end = Some(if e.kind() == std::io::ErrorKind::ConnectionReset {
                    "reset"
                } else {
                    "error"
                });
                continue;
            }
            s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            match std::io::Read::read(s, &mut [0u8; 16]) {
                Ok(0) => *end = Some("eof"),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => *end = Some("reset"),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(ends, vec![Some("reset"); readers]);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
