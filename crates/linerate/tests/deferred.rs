//! Deferred answers over real sockets with ONE worker: slow answers never hold up fast ones,
//! answers on a connection leave in request order whatever order they come back in, and
//! every way a deferred request can end — answered, too late, never, refused at the cap,
//! abandoned by its client — ends with the right status and the right count.
//!
//! No timing is asserted: a slow request is one whose `Responder` the test holds, so "fast
//! ones are answered while 100 slow ones are outstanding" is a fact, not a measurement. Waits
//! for the server's counters are bounded.

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Client, Running, config, start};
use linerate_server::{Config, Method, Responder, Response, Router, Stats};

const SLOW: &[u8] = b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n";
const FAST: &[u8] = b"GET /fast HTTP/1.1\r\nHost: a\r\n\r\n";

/// Responders the test holds: the requests they belong to are outstanding until it answers.
#[derive(Clone, Default)]
struct Held(Arc<Mutex<Vec<Responder>>>);

impl Held {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn take(&self) -> Vec<Responder> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// `/fast` answers at once; `/slow` is held until the test answers it.
fn router(held: &Held) -> Router {
    let held = held.clone();
    Router::new()
        .get("/fast", |_| Response::text("fast"))
        .deferred(Method::Get, "/slow", move |_, res| {
            held.0.lock().unwrap().push(res)
        })
}

/// Polls until `cond` holds (at most 10 s; it normally takes milliseconds).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2_000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("gave up waiting until {what}");
}

fn stats(s: &Running) -> Stats {
    s.stats.snapshot()
}

#[test]
fn fast_requests_are_answered_while_100_slow_ones_are_outstanding() {
    let held = Held::default();
    let server = start(config(), router(&held));
    let mut slow: Vec<Client> = (0..100)
        .map(|_| {
            let mut c = Client::connect(server.addr);
            c.send(SLOW);
            c
        })
        .collect();
    wait_until("100 slow requests are outstanding", || held.len() == 100);
    assert_eq!(stats(&server).deferred_outstanding, 100);
    let mut fast = Client::connect(server.addr);
    for _ in 0..200 {
        assert_eq!(fast.get("/fast").text(), "fast");
    }
    // Still outstanding: the fast answers did not wait for them.
    assert_eq!(held.len(), 100);
    for res in held.take() {
        res.send(Response::text("slow"));
    }
    for c in &mut slow {
        assert_eq!(c.read_response().text(), "slow");
        assert_eq!(c.get("/fast").text(), "fast");
    }
    wait_until("nothing is outstanding", || {
        stats(&server).deferred_outstanding == 0
    });
    server.stop();
}

#[test]
fn pipelined_fast_slow_fast_are_answered_in_order() {
    let held = Held::default();
    let server = start(config(), router(&held));
    let mut c = Client::connect(server.addr);
    c.send(&[FAST, SLOW, FAST].concat());
    assert_eq!(c.read_response().text(), "fast");
    wait_until("the slow request is outstanding", || held.len() == 1);
    held.take().pop().unwrap().send(Response::text("slow"));
    assert_eq!(c.read_response().text(), "slow");
    assert_eq!(c.read_response().text(), "fast");
    server.stop();
}

#[test]
fn answers_coming_back_in_reverse_leave_in_request_order() {
    // Sixteen pipelined deferred requests; a thread answers them last first.
    let (tx, rx) = mpsc::channel::<(String, Responder)>();
    let tx = Mutex::new(tx);
    let answerer = std::thread::spawn(move || {
        let mut all: Vec<_> = rx.iter().take(16).collect();
        while let Some((n, res)) = all.pop() {
            res.send(Response::text_owned(n));
        }
    });
    let router = Router::new().deferred(Method::Get, "/n/{i}", move |req, res| {
        let n = req.param("i").unwrap_or("?").to_string();
        tx.lock().unwrap().send((n, res)).unwrap();
    });
    let server = start(config(), router);
    let mut c = Client::connect(server.addr);
    let batch: Vec<u8> = (0..16)
        .flat_map(|i| format!("GET /n/{i} HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes())
        .collect();
    c.send(&batch);
    for i in 0..16 {
        assert_eq!(c.read_response().text(), i.to_string());
    }
    answerer.join().unwrap();
    server.stop();
}

#[test]
fn an_answer_past_the_deadline_is_503_and_close_and_the_late_one_is_dropped() {
    let held = Held::default();
    let cfg = Config {
        deferred_timeout: Duration::from_millis(200),
        ..config()
    };
    let server = start(cfg, router(&held));
    let mut c = Client::connect(server.addr);
    c.send(SLOW);
    let r = c.read_response();
    assert_eq!(r.status, 503);
    assert_eq!(r.header("connection"), Some("close"));
    c.expect_eof();
    assert_eq!(stats(&server).deferred_timed_out, 1);
    held.take().pop().unwrap().send(Response::text("too late"));
    wait_until("the late answer is counted", || {
        stats(&server).late_answers_dropped == 1
    });
    assert_eq!(stats(&server).deferred_outstanding, 0);
    server.stop();
}

#[test]
fn a_dropped_or_panicking_responder_answers_500() {
    let router = Router::new()
        .get("/fast", |_| Response::text("fast"))
        .deferred(Method::Get, "/drop", |_, res| drop(res))
        .deferred(Method::Get, "/panic", |_, _res| panic!("handler bug"))
        .deferred(Method::Get, "/thread-drop", |_, res| {
            std::thread::spawn(move || drop(res));
        });
    let server = start(config(), router);
    let mut c = Client::connect(server.addr);
    for path in ["/drop", "/panic", "/thread-drop"] {
        assert_eq!(c.get(path).status, 500, "{path}");
        // The connection goes on.
        assert_eq!(c.get("/fast").text(), "fast", "{path}");
    }
    assert_eq!(stats(&server).deferred_outstanding, 0);
    server.stop();
}

#[test]
fn beyond_the_workers_cap_deferred_requests_get_503_with_retry_after() {
    let held = Held::default();
    let cfg = Config {
        max_deferred_per_worker: 2,
        ..config()
    };
    let server = start(cfg, router(&held));
    let mut first: Vec<Client> = (0..2)
        .map(|_| {
            let mut c = Client::connect(server.addr);
            c.send(SLOW);
            c
        })
        .collect();
    wait_until("two requests are outstanding", || held.len() == 2);
    let mut third = Client::connect(server.addr);
    let r = third.get("/slow");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(stats(&server).deferred_refused, 1);
    for res in held.take() {
        res.send(Response::text("slow"));
    }
    for c in &mut first {
        assert_eq!(c.read_response().text(), "slow");
    }
    // Under the cap again.
    third.send(SLOW);
    wait_until("the retry is outstanding", || held.len() == 1);
    held.take().pop().unwrap().send(Response::text("slow"));
    assert_eq!(third.read_response().text(), "slow");
    server.stop();
}

#[test]
fn a_client_gone_before_its_answer_costs_nothing_else() {
    let held = Held::default();
    let server = start(config(), router(&held));
    let mut gone = Client::connect(server.addr);
    gone.send(SLOW);
    wait_until("the request is outstanding", || held.len() == 1);
    drop(gone);
    wait_until("the server saw the client go", || {
        stats(&server).deferred_abandoned == 1
    });
    held.take()
        .pop()
        .unwrap()
        .send(Response::text("nobody listens"));
    wait_until("the late answer is counted", || {
        stats(&server).late_answers_dropped == 1
    });
    let mut other = Client::connect(server.addr);
    assert_eq!(other.get("/fast").text(), "fast");
    assert_eq!(stats(&server).deferred_outstanding, 0);
    server.stop();
}

#[test]
fn a_deferred_handler_gets_the_body_and_trailers_and_answers_from_another_thread() {
    let router = Router::new().deferred(Method::Post, "/echo", |req, res| {
        std::thread::spawn(move || {
            let trailer = req
                .request()
                .trailer("x-t")
                .map(|v| String::from_utf8_lossy(v).into_owned());
            let body = String::from_utf8_lossy(req.body()).into_owned();
            res.send(Response::text_owned(format!("{body}|{trailer:?}")));
        });
    });
    let server = start(config(), router);
    let mut c = Client::connect(server.addr);
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.read_response().text(), "abc|None");
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\nX-T: 7\r\n\r\n");
    assert_eq!(c.read_response().text(), "de|Some(\"7\")");
    server.stop();
}

#[test]
fn an_async_handler_awaits_a_timer_on_the_callers_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    let router = Router::new().get_async(
        "/later/{ms}",
        move |f| {
            handle.spawn(f);
        },
        |req| async move {
            let ms: u64 = req.param("ms").and_then(|m| m.parse().ok()).unwrap_or(1);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Response::text_owned(format!("after {ms}"))
        },
    );
    let server = start(config(), router);
    let mut c = Client::connect(server.addr);
    // Pipelined: the 30 ms answer comes back last but is sent first.
    c.send(b"GET /later/30 HTTP/1.1\r\nHost: a\r\n\r\nGET /later/1 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().text(), "after 30");
    assert_eq!(c.read_response().text(), "after 1");
    server.stop();
}
