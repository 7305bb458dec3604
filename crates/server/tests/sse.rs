//! Server-sent events read by real clients: curl `-N` (events arrive one at a time, as they
//! are sent; keep-alive comments while nothing is sent; `Last-Event-ID` reaches the handler),
//! over HTTP/1.1 and HTTP/2 (h2c), and Chromium's `EventSource` in headless mode, which
//! reconnects after the server ends a stream and names the last event it saw.
//!
//! A client that is missing prints "NOT RUN" and why. Waits are bounded (`LIMIT`) only so
//! that a broken server fails instead of hanging.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{Kill, chromium};
use linerate_server::sse::{self, Event, EventWriter, Sse};
use linerate_server::testing::TestServer;
use linerate_server::{Response, Router};

/// Longest any wait may take (a bound on a hang, not a measurement).
const LIMIT: Duration = Duration::from_secs(30);

fn have(cmd: &str) -> bool {
    let ok = Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("NOT RUN: no {cmd}");
    }
    ok
}

/// A server with `/events`: an event stream whose writer the test holds (sent over `subs`),
/// with keep-alives every 50 ms when `keep_alive`. The first event says which
/// `Last-Event-ID` the request carried.
fn server(keep_alive: bool, h2c: bool) -> (TestServer, mpsc::Receiver<EventWriter>) {
    let (tx, subs) = mpsc::channel();
    let tx = Mutex::new(tx);
    let every = keep_alive.then_some(Duration::from_millis(50));
    let router = Router::new().get("/events", move |req| {
        let last = sse::last_event_id(req).unwrap_or("none").to_string();
        let (resp, events) = Sse::new().keep_alive(every).start();
        events
            .send(&Event::new(format!("last={last}")).event("hello"))
            .unwrap();
        let _ = tx.lock().unwrap().send(events);
        resp
    });
    let config = linerate_server::Config {
        h2c: h2c.then(|| "127.0.0.1:0".parse().unwrap()),
        ..TestServer::config()
    };
    let server = TestServer::start_with(config, router).expect("server starts");
    (server, subs)
}

/// Reads lines from curl's output up to and including the blank line that ends a block.
fn block(r: &mut impl BufRead) -> String {
    let mut out = String::new();
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "curl's output ended: {out:?}"
        );
        out.push_str(&line);
        if line == "\n" {
            return out;
        }
    }
}

fn curl_n(url: &str, extra: &[&str]) -> (Kill, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new("curl")
        .args(["-sSN", "--max-time", "30"])
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (Kill(child), out)
}

#[test]
fn curl_n_reads_each_event_as_it_is_sent_over_http1_and_http2() {
    if !have("curl") {
        return;
    }
    let (srv, subs) = server(false, true);
    let h2c = srv.h2c_addr().unwrap();
    let urls = [
        (srv.url("/events"), vec!["-H", "Last-Event-ID: 41"]),
        (
            format!("http://{h2c}/events"),
            vec!["--http2-prior-knowledge", "-H", "Last-Event-ID: 41"],
        ),
    ];
    for (url, extra) in urls {
        let (_curl, mut out) = curl_n(&url, &extra);
        let events = subs.recv_timeout(LIMIT).expect("a subscriber");
        assert_eq!(block(&mut out), "event: hello\ndata: last=41\n\n", "{url}");
        // The next event is sent only after the first was read: each arrives on its own.
        for i in 42..45 {
            let id = i.to_string();
            events
                .send(&Event::new(format!("n={i}\nline two")).id(&id))
                .unwrap();
            let want = format!("id: {i}\ndata: n={i}\ndata: line two\n\n");
            assert_eq!(block(&mut out), want, "{url}");
        }
        events.end();
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "", "the stream ends cleanly after the last event");
    }
}

#[test]
fn keep_alive_comments_come_while_nothing_is_sent_and_a_leaver_is_found_out() {
    if !have("curl") {
        return;
    }
    let (srv, subs) = server(true, false);
    let (curl, mut out) = curl_n(&srv.url("/events"), &[]);
    let events = subs.recv_timeout(LIMIT).expect("a subscriber");
    assert_eq!(block(&mut out), "event: hello\ndata: last=none\n\n");
    // Nothing is sent: the keep-alive thread writes a comment.
    assert_eq!(block(&mut out), ":\n\n");
    drop(curl);
    // The client left; the keep-alives find it out without an event being sent.
    let mut waited = Duration::ZERO;
    while !events.is_gone() {
        assert!(waited < LIMIT, "the writer never learned the client left");
        std::thread::sleep(Duration::from_millis(20));
        waited += Duration::from_millis(20);
    }
    assert!(events.send(&Event::new("late")).is_err());
}

const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><title>sse</title>
<script>
const seen = [];
const es = new EventSource("/events");
es.addEventListener("hello", e => seen.push("hello:" + e.data));
es.onmessage = e => {
  seen.push(e.lastEventId + ":" + e.data);
  if (seen.length === 4) {
    es.close();
    fetch("/report", { method: "POST", body: seen.join("|") });
  }
};
</script>"#;

#[test]
fn chromium_event_source_reads_events_and_reconnects_with_last_event_id() {
    let (report_tx, report) = mpsc::channel::<String>();
    let report_tx = Mutex::new(report_tx);
    let (sub_tx, subs) = mpsc::channel::<(Option<String>, EventWriter)>();
    let sub_tx = Arc::new(Mutex::new(sub_tx));
    let router = Router::new()
        .get("/", |_| {
            Response::text(PAGE).content_type("text/html; charset=utf-8")
        })
        .get("/events", move |req| {
            let last = sse::last_event_id(req).map(str::to_string);
            let (resp, events) = Sse::new().start();
            let _ = sub_tx.lock().unwrap().send((last, events));
            resp
        })
        .post("/report", move |req| {
            let body = String::from_utf8_lossy(req.body()).into_owned();
            let _ = report_tx.lock().unwrap().send(body);
            Response::new(204)
        });
    let srv = TestServer::start(router).expect("server starts");
    let profile =
        std::env::temp_dir().join(format!("linerate-sse-chromium-{}", std::process::id()));
    let Some(_browser) = chromium(&srv.url("/"), &profile) else {
        return;
    };
    // The first connection: a hello, two events, then the server ends the stream.
    let (last, events) = subs.recv_timeout(LIMIT).expect("the page subscribes");
    assert_eq!(last, None);
    events.send(&Event::new("first").event("hello")).unwrap();
    events
        .send(&Event::new("one").id("1").retry(Duration::from_millis(100)))
        .unwrap();
    events.send(&Event::new("two").id("2")).unwrap();
    events.end();
    // EventSource reconnects on its own and names the last id it saw.
    let (last, events) = subs.recv_timeout(LIMIT).expect("the page reconnects");
    assert_eq!(last.as_deref(), Some("2"));
    events.send(&Event::new("three").id("3")).unwrap();
    let _ = events.send(&Event::new("four").id("4"));
    let seen = report.recv_timeout(LIMIT).expect("the page reports");
    assert_eq!(seen, "hello:first|1:one|2:two|3:three");
    drop(events);
    let _ = std::fs::remove_dir_all(&profile);
}
