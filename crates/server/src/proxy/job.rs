//! A request on its way to an upstream: what the application layer hands the driver once it
//! has decided a request is proxied. A body that came whole with the head goes in `body`; one
//! still arriving goes up as it arrives, through `pipe` (nginx's `proxy_request_buffering
//! off`): the upstream connection is taken at once and the body streams with bounded room.
#![forbid(unsafe_code)]

use super::forward::Forwarded;
use crate::app::deferred::LogMeta;

/// One proxied request, owned.
#[derive(Debug)]
pub(crate) struct Job {
    /// The client's connection (the driver's token) and the request's number on it.
    pub client: u64,
    pub id: u64,
    /// The site and its proxy route that took it.
    pub site: usize,
    pub route: usize,
    /// Index into the sites' upstreams.
    pub upstream: usize,
    /// The upstream request's head, framed by us.
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// The body still arriving (then `body` is empty and `forwarded.body` says how the
    /// upstream request frames it).
    pub pipe: Option<super::pipe::PipeOut>,
    pub forwarded: Forwarded,
    /// Another try may follow a failure after the request went out (a method that means
    /// the same done twice).
    pub idempotent: bool,
    /// Tries made so far.
    pub tries: u32,
    /// Send it on a new connection, not a pooled one (it is the retry after a pooled
    /// connection the upstream had closed).
    pub fresh: bool,
    /// The server the last try failed on (the next try goes elsewhere when it can).
    pub failed_server: Option<usize>,
    /// Tries an HTTP/2 upstream did not process (refused, or never sent): not counted in
    /// `tries`, bounded by `driver::upstream_h2::UNPROCESSED_TRIES`.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub unprocessed: u32,
    /// The HTTP/2 upstream connection (driver token) that refused the last try: the next
    /// goes on another.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub avoid_conn: Option<u64>,
    /// The hash of its balancing key, when its upstream balances by hash and it has one.
    pub key: Option<u64>,
    /// When the request's head was in (µs; 0 unless timing).
    pub started: u64,
    /// The access-log fields, when the log is on.
    pub log: Option<LogMeta>,
    /// The coding the client's Accept-Encoding chose for a compressible answer (identity:
    /// none it takes); `None` where the site does not compress (`app::compress_stream`).
    pub coding: Option<crate::files::encoding::Encoding>,
    /// The client's path, when its site's `[[site.headers]]` may add fields to the answer.
    pub path: Option<Box<[u8]>>,
    /// For a forward-auth subrequest: the request it guards, sent once the auth answers
    /// 2xx.
    pub then: Option<Box<Job>>,
    /// Its mount's HTTP cache's state for it, when the mount caches.
    pub cache: Option<Box<super::cache::Exchange>>,
    /// A validation the cache sends on its own (stale-while-revalidate): its answer goes to
    /// the store only, never to a client.
    pub background: bool,
    /// Answered from the cache in the content phase: nothing goes upstream, the driver only
    /// writes this into the client's connection.
    pub hit: Option<Box<super::cache::Hit>>,
    /// A gRPC-Web request its mount translates (`grpc_web`): sent as gRPC, answered as this.
    // Read by the HTTP/2 relay only (a gRPC-Web mount needs an HTTP/2 upstream).
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub web: Option<super::grpc_web::Web>,
    /// The reload epoch its upstream index is of (`driver/upstream.rs` stamps it when it
    /// first takes the job, and brings the index up to date when a reload came between).
    pub epoch: u32,
    /// A forward-auth subrequest's: the fields its answer sets on the request it guards.
    pub copy: Option<std::sync::Arc<[String]>>,
    /// When it stops waiting for a connection, once it has waited in its upstream's line
    /// (the wheel's ms; 0: it has not): kept when it goes to the back again, so that it
    /// waits `connect_timeout` in all (`driver/upstream/line.rs`).
    pub waits_until: u64,
}

/// Spare job boxes and upstream head buffers kept ([`Spares`]); more are freed.
const SPARES: usize = 64;
/// A head buffer grown past this is freed, not kept.
const KEPT_HEAD: usize = 8 * 1024;

/// A worker's spare job boxes and head buffers: an HTTP/1.1 exchange gives its job back once
/// the answer's head is in (no other try can follow), and the next proxied request is framed
/// into its head buffer and boxed in its box. Allocating both per request cost ~560
/// instructions of a proxied request with their frees (callgrind, docs/benchmarks.md's section on
/// a miss's instructions).
#[derive(Debug, Default)]
pub(crate) struct Spares {
    /// Boxes holding a blank job.
    #[allow(clippy::vec_box)] // The box is what is reused.
    boxes: Vec<Box<Job>>,
    /// Empty head buffers.
    heads: Vec<Vec<u8>>,
}

impl Spares {
    /// An empty buffer to frame an upstream head in, with room for `capacity` bytes.
    pub(crate) fn head(&mut self, capacity: usize) -> Vec<u8> {
        match self.heads.pop() {
            Some(mut h) => {
                h.reserve(capacity);
                h
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// `job`, boxed (in a spare box when there is one).
    pub(crate) fn boxed(&mut self, job: Job) -> Box<Job> {
        match self.boxes.pop() {
            Some(mut b) => {
                *b = job;
                b
            }
            None => Box::new(job),
        }
    }

    /// Takes back a job that is done with: its head buffer and its box are kept, nothing
    /// else it held (a body, a log record, a cache state) is.
    pub(crate) fn put(&mut self, mut job: Box<Job>) {
        let mut head = std::mem::take(&mut job.head);
        if head.capacity() <= KEPT_HEAD && self.heads.len() < SPARES {
            head.clear();
            self.heads.push(head);
        }
        if self.boxes.len() < SPARES {
            *job = Job::blank(0, 0, 0, 0, 0);
            self.boxes.push(job);
        }
    }
}

impl Job {
    /// A job for request `id` of connection `client` (site `site`, its proxy route `route`) to
    /// `upstream`, with nothing framed yet and every other setting at its default: each kind
    /// of job sets what it carries over this.
    pub(crate) fn blank(client: u64, id: u64, site: usize, route: usize, upstream: usize) -> Job {
        Job {
            client,
            id,
            site,
            route,
            upstream,
            head: Vec::new(),
            body: Vec::new(),
            pipe: None,
            forwarded: Forwarded {
                body: crate::h1c::ReqBody::None,
                head_request: false,
                upgrade: false,
            },
            idempotent: true,
            tries: 0,
            fresh: false,
            failed_server: None,
            unprocessed: 0,
            avoid_conn: None,
            key: None,
            started: 0,
            log: None,
            coding: None,
            path: None,
            then: None,
            cache: None,
            background: false,
            hit: None,
            web: None,
            epoch: 0,
            copy: None,
            waits_until: 0,
        }
    }

    /// A background validation for the request of `self` (a GET already answered from the
    /// store), with the upstream head `head` and its cache state.
    pub(crate) fn validation(&self, head: Vec<u8>, cache: Box<super::cache::Exchange>) -> Job {
        Job {
            head,
            key: self.key,
            started: self.started,
            cache: Some(cache),
            background: true,
            epoch: self.epoch,
            ..Job::blank(self.client, self.id, self.site, self.route, self.upstream)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_jobs_box_and_head_buffer_carry_the_next_request_and_nothing_it_held() {
        let mut spares = Spares::default();
        let mut head = spares.head(300);
        head.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let job = Job {
            head,
            body: b"the first request's body".to_vec(),
            path: Some(b"/first"[..].into()),
            ..Job::blank(1, 2, 0, 0, 0)
        };
        let boxed = spares.boxed(job);
        let (box_at, head_capacity) = (&*boxed as *const Job, boxed.head.capacity());
        spares.put(boxed);
        // Nothing the first job held stays in the spare box (a body may be large).
        let spare = spares.boxes.last().expect("the box was kept");
        assert!(spare.body.capacity() == 0 && spare.path.is_none() && spare.head.capacity() == 0);
        // The next request is framed into the same buffer (its capacity tells: a fresh
        // one would have exactly what was asked) and boxed in the same box.
        let head = spares.head(10);
        assert!(head.is_empty());
        assert_eq!(head.capacity(), head_capacity, "a new head buffer");
        let next = spares.boxed(Job {
            head,
            ..Job::blank(3, 4, 0, 0, 0)
        });
        assert!(std::ptr::eq(&*next, box_at), "a new box");
        assert_eq!((next.client, next.id), (3, 4));
        assert!(next.body.is_empty() && next.path.is_none());
        // A head buffer grown past the bound is freed, not kept.
        let mut big = spares.head(0);
        big.reserve(KEPT_HEAD + 1);
        spares.put(Box::new(Job {
            head: big,
            ..Job::blank(7, 8, 0, 0, 0)
        }));
        assert!(
            spares.head(0).capacity() <= KEPT_HEAD,
            "an oversized head was kept"
        );
    }
}
