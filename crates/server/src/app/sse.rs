//! Server-sent events (the HTML standard's `text/event-stream`): the answer's fields, events
//! written whole, keep-alive comments while nothing is sent, and the `Last-Event-ID` a
//! reconnecting client names.
//!
//! Owns the event format and the keep-alive; the body underneath is a streamed body
//! ([`crate::streaming`]) with its backpressure and its end. Each event is one write, so a
//! keep-alive comment never lands inside an event.
//!
//! Keep-alives come from one `linerate-sse` thread shared by every event stream of the
//! process: it holds each stream weakly and writes `:` and a blank line to those idle for their
//! interval (15 s unless set), so a proxy or a browser does not drop a quiet stream, and a
//! subscriber that left is found out (its next write fails) even when no event comes.
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use crate::request::Request;
use crate::response::Response;
use crate::streaming::{BodyWriter, Chan, Gone, Ready, WriteError};

/// The keep-alive interval unless [`Sse::keep_alive`] sets another.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How often the keep-alive thread looks at most (it looks at half the shortest interval).
const MAX_TICK: Duration = Duration::from_secs(1);
/// How often it looks at least.
const MIN_TICK: Duration = Duration::from_millis(20);

/// An event stream's answer and its writer, built with its keep-alive.
#[derive(Clone, Copy, Debug)]
pub struct Sse {
    keep_alive: Option<Duration>,
}

impl Default for Sse {
    fn default() -> Self {
        Sse {
            keep_alive: Some(KEEP_ALIVE),
        }
    }
}

impl Sse {
    /// An event stream with keep-alive comments every [`KEEP_ALIVE`].
    pub fn new() -> Sse {
        Sse::default()
    }

    /// Keep-alive comments after `every` without a write; `None` for none.
    pub fn keep_alive(mut self, every: Option<Duration>) -> Sse {
        self.keep_alive = every.map(|d| d.max(MIN_TICK));
        self
    }

    /// The 200 answer (`Content-Type: text/event-stream`, `Cache-Control: no-cache`,
    /// `X-Accel-Buffering: no` so a buffering proxy passes events at once) and the writer
    /// its events go through. Return the response from any kind of handler; keep the
    /// writer (in a set of subscribers, a thread, a future).
    pub fn start(self) -> (Response, EventWriter) {
        let (resp, body) = Response::new(200)
            .content_type("text/event-stream")
            .header("Cache-Control", "no-cache")
            .header("X-Accel-Buffering", "no")
            .stream();
        if let Some(every) = self.keep_alive {
            keep_alives().add(body.chan(), every);
        }
        (resp, EventWriter { body })
    }
}

/// The `Last-Event-ID` a reconnecting client sent: the id of the last event it saw.
pub fn last_event_id<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    req.header("last-event-id")
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// One event: its data (lines split on CR, LF or CRLF, each sent as a `data:` line), and an
/// optional type, id and reconnection time.
#[derive(Clone, Debug, Default)]
pub struct Event {
    data: String,
    event: Option<String>,
    id: Option<String>,
    retry: Option<Duration>,
}

impl Event {
    /// An event carrying `data`.
    pub fn new(data: impl Into<String>) -> Event {
        Event {
            data: data.into(),
            ..Event::default()
        }
    }

    /// An event carrying `value` as JSON.
    pub fn json<T: serde::Serialize>(value: &T) -> Result<Event, serde_json::Error> {
        serde_json::to_string(value).map(Event::new)
    }

    /// Its type (`addEventListener(type, …)` in a browser; `message` when none). CR and LF,
    /// which would end the field, are left out.
    pub fn event(mut self, name: &str) -> Event {
        self.event = Some(one_line(name));
        self
    }

    /// Its id, which the client sends back as `Last-Event-ID` when it reconnects. CR, LF and
    /// NUL (which makes a browser ignore the id) are left out.
    pub fn id(mut self, id: &str) -> Event {
        self.id = Some(one_line(id).replace('\0', ""));
        self
    }

    /// How long the client waits before reconnecting.
    pub fn retry(mut self, after: Duration) -> Event {
        self.retry = Some(after);
        self
    }

    /// The event as it goes on the wire, ending in the blank line that dispatches it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() + 16);
        if let Some(e) = &self.event {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(e.as_bytes());
            out.push(b'\n');
        }
        if let Some(id) = &self.id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(id.as_bytes());
            out.push(b'\n');
        }
        if let Some(r) = self.retry {
            out.extend_from_slice(format!("retry: {}\n", r.as_millis()).as_bytes());
        }
        let data = self.data.replace("\r\n", "\n").replace('\r', "\n");
        for line in data.split('\n') {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
        out
    }
}

fn one_line(s: &str) -> String {
    s.chars().filter(|c| *c != '\r' && *c != '\n').collect()
}

/// Writes an event stream (see [`Sse::start`]). Dropping it cuts the stream off, as
/// [`EventWriter::end`] would not: a client reconnects either way, but only an end says the
/// server meant it.
#[derive(Debug)]
pub struct EventWriter {
    body: BodyWriter,
}

impl EventWriter {
    /// Sends an event, whole, when there is room ([`WriteError::Full`] leaves it unsent).
    pub fn send(&self, event: &Event) -> Result<(), WriteError> {
        self.body.write(event.encode())
    }

    /// Sends an event already encoded with [`Event::encode`] (a fan-out encodes once).
    pub fn send_encoded(&self, event: &[u8]) -> Result<(), WriteError> {
        self.body.write(event)
    }

    /// Sends an event once there is room (async).
    pub async fn send_async(&self, event: &Event) -> Result<(), Gone> {
        self.body.send(event.encode()).await
    }

    /// A comment line (ignored by clients; a keep-alive of the application's own).
    pub fn comment(&self, text: &str) -> Result<(), WriteError> {
        self.body.write(format!(":{}\n\n", one_line(text)))
    }

    /// Blocks until there is room (or the client is gone).
    pub fn wait_room(&self) -> Result<(), Gone> {
        self.body.wait_room()
    }

    /// Waits, without blocking a thread, until there is room.
    pub fn ready(&self) -> Ready<'_> {
        self.body.ready()
    }

    /// Whether the client is gone.
    pub fn is_gone(&self) -> bool {
        self.body.is_gone()
    }

    /// Ends the stream cleanly.
    pub fn end(self) {
        self.body.end();
    }
}

/// The keep-alive thread's list: every event stream with a keep-alive, held weakly.
struct KeepAlives {
    streams: Mutex<Vec<(Weak<Chan>, Duration)>>,
}

impl KeepAlives {
    fn add(&self, chan: &Arc<Chan>, every: Duration) {
        let mut s = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        s.push((Arc::downgrade(chan), every));
    }

    /// Writes a comment to each stream idle for its interval; forgets those that are over.
    /// Returns how long to sleep.
    fn tick(&self) -> Duration {
        let mut s = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = MAX_TICK;
        s.retain(|(weak, every)| {
            let Some(chan) = weak.upgrade() else {
                return false;
            };
            if chan.over() {
                return false;
            }
            if chan.idle_for(*every) {
                // Full: the stream is busy, which keeps it alive as well.
                let _ = chan.write(b":\n\n");
            }
            next = next.min(*every / 2);
            true
        });
        next.max(MIN_TICK)
    }
}

fn keep_alives() -> &'static KeepAlives {
    static LIST: OnceLock<KeepAlives> = OnceLock::new();
    LIST.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("linerate-sse".into())
            .spawn(|| {
                loop {
                    let sleep = keep_alives().tick();
                    std::thread::sleep(sleep);
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the SSE keep-alive thread");
        }
        KeepAlives {
            streams: Mutex::new(Vec::new()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_encode_as_the_html_standard_reads_them() {
        let cases: &[(Event, &str)] = &[
            (Event::new("hi"), "data: hi\n\n"),
            (Event::new(""), "data: \n\n"),
            (
                Event::new("a\nb\r\nc\rd"),
                "data: a\ndata: b\ndata: c\ndata: d\n\n",
            ),
            (
                Event::new("x").event("user").id("7"),
                "event: user\nid: 7\ndata: x\n\n",
            ),
            (
                Event::new("x").event("bad\r\nname").id("a\nb\0c"),
                "event: badname\nid: abc\ndata: x\n\n",
            ),
            (
                Event::new("x").retry(Duration::from_millis(2500)),
                "retry: 2500\ndata: x\n\n",
            ),
        ];
        for (event, wire) in cases {
            assert_eq!(String::from_utf8(event.encode()).unwrap(), *wire);
        }
    }
}
