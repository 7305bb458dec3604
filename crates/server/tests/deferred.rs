//! Deferred answers on a real server, by where they are given: at once in the handler, by the
//! worker's own local work (a [`WorkerLocal`], as the database driver's futures do), or from
//! another thread. On a worker with local work, as here, the first two wake nothing (no
//! eventfd write): the worker takes them at the end of the turn that made them, so a lone
//! request answered that way must still be answered, and pipelined ones in order.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use linerate_server::testing::TestServer;
use linerate_server::{Method, Responder, Response, Router, Server, WorkerLocal};

/// Longest a read from the server may wait (a bound on a hang).
const READ_TIMEOUT: Duration = Duration::from_secs(10);

thread_local! {
    /// Answers the worker's local work gives on its next run (the worker's thread only).
    static LATER: RefCell<Vec<(Responder, String)>> = const { RefCell::new(Vec::new()) };
}

/// Local work that answers what `/later` left, each time the worker runs it. Its fd is one
/// end of a socket pair nobody writes to: it is never readable, so only the end of a turn
/// runs it.
struct Later {
    quiet: UnixStream,
    _other: UnixStream,
}

impl WorkerLocal for Later {
    fn fd(&self) -> BorrowedFd<'_> {
        self.quiet.as_fd()
    }
    fn run(&mut self, _fd_ready: bool) {
        for (res, body) in LATER.with(|l| std::mem::take(&mut *l.borrow_mut())) {
            res.send(Response::text_owned(body));
        }
    }
}

fn router() -> Router {
    Router::new()
        .deferred(Method::Get, "/now/{n}", |req, res| {
            let n = req.param("n").unwrap_or("?").to_string();
            res.send(Response::text_owned(format!("now {n}")));
        })
        .deferred(Method::Get, "/later/{n}", |req, res| {
            let body = format!("later {}", req.param("n").unwrap_or("?"));
            LATER.with(|l| l.borrow_mut().push((res, body)));
        })
        .deferred(Method::Get, "/thread/{n}", |req, res| {
            let body = format!("thread {}", req.param("n").unwrap_or("?"));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                res.send(Response::text_owned(body));
            });
        })
}

/// Reads `n` answers off `s`, returning their bodies (each has a Content-Length).
fn bodies(s: &mut TcpStream, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut out = Vec::new();
    while out.len() < n {
        let k = s.read(&mut buf).expect("an answer within the read timeout");
        assert!(k > 0, "the server closed with {} of {n} answers", out.len());
        got.extend_from_slice(&buf[..k]);
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_string();
            assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .expect("a length")
                .parse()
                .unwrap();
            if got.len() < end + 4 + len {
                break;
            }
            out.push(String::from_utf8(got[end + 4..end + 4 + len].to_vec()).unwrap());
            got.drain(..end + 4 + len);
        }
    }
    out
}

fn get(s: &mut TcpStream, path: &str) {
    write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
}

#[test]
fn answers_given_on_the_workers_thread_or_another_all_go_out_in_order() {
    let server = Server::bind(TestServer::config(), router())
        .expect("bind")
        .with_worker_local(Arc::new(|_| {
            let (quiet, other) = UnixStream::pair()?;
            Ok(Box::new(Later {
                quiet,
                _other: other,
            }) as Box<dyn WorkerLocal>)
        }));
    let addr = server.local_addr();
    let handle = server.handle();
    let thread = std::thread::spawn(move || server.run());

    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    // One at a time: each answer is the only thing that happens on the server.
    for path in ["/now/1", "/later/2", "/thread/3", "/later/4"] {
        get(&mut s, path);
        let want = path[1..].replace('/', " ");
        assert_eq!(bodies(&mut s, 1), [want]);
    }
    // Pipelined: answers given in another order still leave in the requests' order, and an
    // answer given on the worker's thread can release the next request's handler.
    let paths = [
        "/thread/5",
        "/later/6",
        "/now/7",
        "/later/8",
        "/now/9",
        "/thread/10",
    ];
    for path in paths {
        get(&mut s, path);
    }
    let want: Vec<String> = paths.iter().map(|p| p[1..].replace('/', " ")).collect();
    assert_eq!(bodies(&mut s, paths.len()), want);

    handle.shutdown();
    thread.join().unwrap().expect("a clean shutdown");
}
