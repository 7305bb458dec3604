//! The proxy's HTTP cache at work (RFC 9111; the rules are linerate-cache's, `docs/cache.md`):
//! a mount's store and flights, shared by the workers; the client's request as the cache
//! reads it, owned so that it outlives the connection's buffer; and one request's cache state
//! from its plan to its stored answer ([`Exchange`]), which turns linerate-cache's decisions
//! into what the driver does: answer from the store, forward (with validators), wait on
//! another request's flight, store the answer as it streams. A fresh whole hit for an
//! HTTP/1.1 client is written by its connection instead ([`Fresh`]), from what each entry's
//! answers read of it, derived once ([`Entry::rendered`]).
//!
//! Owns no socket and no clock: the driver (`driver/upstream.rs`) passes the time in and
//! writes what comes out. A flight is landed whenever its leader's [`Exchange`] ends, stored
//! or not, however it ends (its `Drop`), so no waiter is left behind a leader that is gone.
#![forbid(unsafe_code)]

use std::ops::Range;
use std::sync::{Arc, Mutex};

use linerate_cache::collapse::{FlightId, Flights, Role};
use linerate_cache::fields::OwnedField;
use linerate_cache::range::{RangeAnswer, range};
use linerate_cache::status::{CacheStatus, Fwd};
use linerate_cache::store::{Event, Limits, Store};
use linerate_cache::{After, Entry, Key, Plan, Time, Timing, Variant, validate};
use linerate_http1::{FieldSpan, RequestHead};

use crate::access_log::CacheOutcome;
use crate::app::compress_stream::{self, Plan as CodingPlan};
use crate::app::deferred::Inbox;
use crate::config::{Compression, ProxyCache};
use crate::files::encoding::Encoding;

/// Request fields that some applications and frameworks read in place of the URL, the
/// method, the host or the scheme, and that no cache key holds: a request carrying one could
/// make the upstream answer something else under the same key, stored for everyone (web
/// cache poisoning, the "unkeyed input" class). A caching mount never forwards them; the
/// `X-Forwarded-*` fields this server writes itself are the client's only when the mount
/// trusts them (`trust_forwarded`).
pub(crate) const UNKEYED_OVERRIDES: &[&str] = &[
    "x-original-url",
    "x-rewrite-url",
    "x-forwarded-scheme",
    "x-forwarded-server",
    "x-forwarded-prefix",
    "x-host",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// A request waiting on another's flight: the worker that holds it, and its place there.
pub(crate) struct Waiter {
    pub inbox: Arc<Inbox>,
    pub park: u64,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Waiter({})", self.park)
    }
}

/// A mount's cache: one store and its flights, shared by every worker.
#[derive(Debug)]
pub(crate) struct MountCache {
    pub store: Store,
    pub flights: Mutex<Flights<Waiter>>,
    pub opts: linerate_cache::Options,
    /// The name in `Cache-Status`, when the field is sent.
    pub status: Option<Box<str>>,
    /// The start of a hit's `Cache-Status` value (`name; hit; ttl=`), written once.
    hit_status: Option<Box<[u8]>>,
    /// The largest body stored.
    max_object: usize,
    /// Requests parked on a flight now (for `/metrics`).
    pub waiting: std::sync::atomic::AtomicU64,
    /// The shared second tier (Redis, memcached), when the mount has one.
    pub tier: Option<super::tier::SharedTier>,
    /// The settings it was made with (a reload keeps a cache whose settings did not change).
    pub(super) conf: ProxyCache,
}

impl MountCache {
    /// The cache `conf` describes; its second tier's client started when it names one (an
    /// error: the tier's URL is not one linerate-kv takes).
    pub(crate) fn start(conf: &ProxyCache) -> Result<Arc<MountCache>, String> {
        let tier = match conf.tier.as_deref() {
            Some(url) => Some(
                super::tier::SharedTier::start(url, conf.tier_timeout)
                    .map_err(|e| format!("cache tier {url:?}: {e}"))?,
            ),
            None => None,
        };
        let cache = Arc::new(MountCache {
            tier,
            ..MountCache::new(conf)
        });
        if let Some(t) = &cache.tier {
            t.watch(
                Arc::downgrade(&cache),
                |m: &MountCache, what: super::tier::Forget<'_>| {
                    match what {
                        // A URL purged on some edge (this one's own purges come back too).
                        super::tier::Forget::Key(key) => {
                            m.store.remove(key);
                        }
                        // A tag purged on some edge.
                        super::tier::Forget::Tag(tag) => {
                            m.store.remove_tagged(tag);
                        }
                        // A purge by prefix on some edge, or a purge log this edge could not
                        // follow: everything this one holds may be what was purged.
                        super::tier::Forget::All => {
                            m.store.remove_prefix(b"");
                        }
                        // A soft purge on some edge: stale here too, not gone.
                        super::tier::Forget::SoftKey(key) => {
                            m.soften(key);
                        }
                        super::tier::Forget::SoftTag(tag) => {
                            m.soften_tagged(tag);
                        }
                    }
                },
            );
        }
        Ok(cache)
    }

    fn new(conf: &ProxyCache) -> MountCache {
        MountCache {
            store: Store::new(Limits {
                capacity: usize::try_from(conf.size).unwrap_or(usize::MAX),
                max_object: usize::try_from(conf.max_object).unwrap_or(usize::MAX),
                ..Limits::default()
            }),
            flights: Mutex::new(Flights::new(conf.lock_timeout.as_secs().max(1))),
            opts: linerate_cache::Options {
                heuristic: conf.heuristic.then(linerate_cache::Heuristic::default),
                set_cookie: if conf.set_cookie_explicit {
                    linerate_cache::SetCookie::Explicit
                } else {
                    linerate_cache::SetCookie::Never
                },
                // Names the configuration checked; one it did not know adds nothing.
                use_stale: (conf.use_stale.iter())
                    .filter_map(|n| linerate_cache::UseStale::named(n))
                    .fold(
                        linerate_cache::UseStale::NONE,
                        linerate_cache::UseStale::with,
                    ),
                stale_max: conf
                    .stale_max
                    .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX)),
                client_no_cache: if conf.client_no_cache_revalidate {
                    linerate_cache::ClientNoCache::Revalidate
                } else {
                    linerate_cache::ClientNoCache::Ignore
                },
                // Checked when the configuration was read.
                key: conf.key_rules().ok().flatten().map(Arc::new),
                valid: (!conf.valid.is_empty() || conf.valid_any.is_some()).then(|| {
                    Arc::new(linerate_cache::Valid {
                        by_status: conf.valid.clone(),
                        any: conf.valid_any,
                    })
                }),
                ignore: linerate_cache::Ignore {
                    cache_control: conf.ignore.iter().any(|f| f == "cache-control"),
                    expires: conf.ignore.iter().any(|f| f == "expires"),
                    set_cookie: conf.ignore.iter().any(|f| f == "set-cookie"),
                    vary: conf.ignore.iter().any(|f| f == "vary"),
                },
                rules: (!conf.bypass.is_empty() || !conf.no_store.is_empty()).then(|| {
                    Arc::new(linerate_cache::RequestRules {
                        bypass: conf.bypass.iter().map(rule).collect(),
                        no_store: conf.no_store.iter().map(rule).collect(),
                    })
                }),
            },
            status: conf.status.as_deref().map(Into::into),
            hit_status: conf
                .status
                .as_deref()
                .map(|n| CacheStatus::hit_prefix(n).into_boxed_slice()),
            max_object: usize::try_from(conf.max_object).unwrap_or(usize::MAX),
            waiting: std::sync::atomic::AtomicU64::new(0),
            tier: None,
            conf: conf.clone(),
        }
    }

    fn flights(&self) -> std::sync::MutexGuard<'_, Flights<Waiter>> {
        self.flights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Releases the waiters of flights past their deadline (they go upstream alone).
    pub(crate) fn expire(&self, now: Time) {
        let expired = self.flights().expired(now);
        for (_, waiters) in expired {
            wake(waiters);
        }
    }
}

/// A configured rule as linerate-cache matches it.
fn rule(r: &crate::config::CacheRule) -> linerate_cache::Rule {
    use crate::config::CacheRule as C;
    use linerate_cache::Rule;
    let bytes = |s: &str| s.as_bytes().into();
    match r {
        C::Cookie(name) => Rule::Cookie(bytes(name)),
        C::AnyCookie => Rule::AnyCookie,
        C::Header(name, value) => Rule::Header(bytes(name), value.as_deref().map(bytes)),
        C::Path(prefix) => Rule::Path(bytes(prefix)),
        C::Method(m) => Rule::Method(bytes(m)),
    }
}

/// Wakes waiters: each looks in the store again on its own worker.
fn wake(waiters: Vec<Waiter>) {
    for w in waiters {
        w.inbox.push_landed(w.park);
    }
}

/// The wall clock in whole seconds, as HTTP dates count.
pub(crate) fn now() -> Time {
    Time(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// The client's request as the cache reads it, in one buffer.
#[derive(Clone, Debug)]
pub(crate) struct CacheReq {
    buf: Vec<u8>,
    method: Range<usize>,
    scheme: &'static [u8],
    authority: Range<usize>,
    target: Range<usize>,
    fields: Vec<(Range<usize>, Range<usize>)>,
    /// The request carries content ([`linerate_cache::Request::body`]).
    body: bool,
    /// A HEAD that goes upstream as GET (`convert_head`): the cache reads
    /// it as the GET it sent, whose answer it stores.
    as_get: bool,
}

impl CacheReq {
    /// Copies what the cache reads of `head` (the target as received: the key is the
    /// client's URL, whatever the mount rewrites upstream). The authority is Host (HTTP/2
    /// and HTTP/3 give `:authority` as Host); none makes the request unkeyed. `body`: the
    /// request carries content ([`has_body`]).
    pub(crate) fn copy(head: &RequestHead, buf: &[u8], tls: bool, body: bool) -> CacheReq {
        let mut out = Vec::with_capacity(256);
        let mut put = |b: &[u8]| {
            let start = out.len();
            out.extend_from_slice(b);
            start..out.len()
        };
        let method = put(head.method_bytes(buf));
        let authority = put(head.host(buf).unwrap_or_default());
        let target = put(head.target_bytes(buf));
        let fields = head.headers(buf).map(|(n, v)| (put(n), put(v))).collect();
        CacheReq {
            buf: out,
            method,
            scheme: if tls { b"https" } else { b"http" },
            authority,
            target,
            fields,
            body,
            as_get: false,
        }
    }

    fn fields(&self) -> Vec<(&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|(n, v)| (&self.buf[n.clone()], &self.buf[v.clone()]))
            .collect()
    }

    /// Calls `f` with the request as linerate-cache takes it.
    /// Its fields listed by [`listed`] (a tier hit plans twice).
    fn with<R>(&self, f: impl FnOnce(&linerate_cache::Request<'_>) -> R) -> R {
        let fields = self
            .fields
            .iter()
            .map(|(n, v)| (&self.buf[n.clone()], &self.buf[v.clone()]));
        listed(self.fields.len(), fields, |fields| {
            f(&linerate_cache::Request {
                method: if self.as_get {
                    b"GET"
                } else {
                    &self.buf[self.method.clone()]
                },
                scheme: self.scheme,
                authority: &self.buf[self.authority.clone()],
                target: &self.buf[self.target.clone()],
                fields,
                body: self.body,
            })
        })
    }

    fn is_head(&self) -> bool {
        &self.buf[self.method.clone()] == b"HEAD"
    }

    /// The request as its forward auth let it go upstream: the fields `copy` names are the
    /// auth answer's (`given`), never the client's, so that the store's variants (`Vary`)
    /// and §3.5's `Authorization` rule read what the upstream read.
    fn authorized<'a>(
        &mut self,
        copy: &[String],
        given: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        let buf = &self.buf;
        self.fields.retain(|(n, _)| {
            let name = &buf[n.clone()];
            !copy.iter().any(|c| c.as_bytes().eq_ignore_ascii_case(name))
        });
        for (n, v) in given {
            let start = self.buf.len();
            self.buf.extend_from_slice(n);
            let mid = self.buf.len();
            self.buf.extend_from_slice(v);
            self.fields.push((start..mid, mid..self.buf.len()));
        }
    }

    fn is_get(&self) -> bool {
        &self.buf[self.method.clone()] == b"GET"
    }
}

/// An answer from the store.
#[derive(Clone, Debug)]
pub(crate) struct Hit {
    pub entry: Arc<Entry>,
    pub status: u16,
    /// The Age value's digits (`age_len` of them), kept inline: no allocation per hit.
    age: [u8; 20],
    age_len: u8,
    /// Content-Range for a 206 or 416, and the Cache-Status value.
    content_range: Option<String>,
    cache_status: StatusValue,
    /// The part of the stored body sent (none for a 304, a 416 or HEAD).
    pub body: Range<usize>,
    /// Only the fields a 304 carries (RFC 9110 §15.4.5).
    pub not_modified: bool,
    /// What the access log says of it (`$upstream_cache_status`).
    pub outcome: CacheOutcome,
}

impl Hit {
    /// The answer's fields, in order: the stored ones this server does not write itself
    /// (framing, Date, Server) less those `drop` names, then the extra ones.
    pub(crate) fn fields(&self, room: usize, drop: impl Fn(&[u8]) -> bool) -> Vec<(&[u8], &[u8])> {
        let mut out: Vec<(&[u8], &[u8])> = Vec::with_capacity(self.entry.fields.len() + 3 + room);
        let ranged = self.status != 200;
        let keep = |(n, _): &&OwnedField| {
            !(written_here(n) || drop(n) || (ranged && n.eq_ignore_ascii_case(b"content-range")))
        };
        if self.not_modified {
            out.extend(
                validate::not_modified_fields(&self.entry)
                    .filter(keep)
                    .map(|(n, v)| (&n[..], &v[..])),
            );
        } else {
            // The stored Age is replaced by the current one (RFC 9111 §5.1): `written_here`
            // names it too.
            out.extend(
                self.entry
                    .fields
                    .iter()
                    .filter(keep)
                    .map(|(n, v)| (&n[..], &v[..])),
            );
        }
        out.push((b"Age", &self.age[..usize::from(self.age_len)]));
        if let Some(cr) = &self.content_range {
            out.push((b"Content-Range", cr.as_bytes()));
        }
        match &self.cache_status {
            StatusValue::None => {}
            StatusValue::Inline(b, n) => out.push((b"Cache-Status", &b[..usize::from(*n)])),
            StatusValue::Heap(v) => out.push((b"Cache-Status", v)),
        }
        out
    }

    /// The body's bytes.
    pub(crate) fn body(&self) -> &[u8] {
        &self.entry.body[self.body.clone()]
    }

    /// `compress_stream::plan`'s rule for a stored answer, from the facts its entry keeps
    /// (read once, when it was stored): the general plan's pass over the fields cost ~500
    /// instructions a hit (callgrind).
    pub(crate) fn coding_plan(&self, coding: Encoding, cfg: &Compression) -> CodingPlan {
        let e = &self.entry;
        // The stored body's whole length (a HEAD hit sends none of it).
        let length = Some(e.body.len() as u64);
        if !compress_stream::worth_reading(self.status, length, cfg)
            || e.facts.encoded
            || e.facts.no_transform
        {
            return CodingPlan::AsIs;
        }
        compress_stream::plan_for(e.rendered(render).compressible, coding)
    }

    /// The stored body encoded with `coding` at `cfg`'s level, made once per entry and
    /// coding (every compressed hit used to encode it again) and kept with the
    /// entry and counted in its `store`'s bytes (when the hit knows it); `None` for a part
    /// of the body (a range), or a coding with no encoder.
    pub(crate) fn encoded(
        &self,
        coding: Encoding,
        cfg: &Compression,
        store: Option<&Store>,
    ) -> Option<&[u8]> {
        let slot = match coding {
            Encoding::Identity => return None,
            Encoding::Gzip => 0,
            Encoding::Brotli => 1,
        };
        if self.body != (0..self.entry.body.len()) {
            return None;
        }
        let mut made = 0;
        let kept = self.entry.derived(slot, |body| {
            let mut e = compress_stream::StreamEncoder::new(coding, Some(body.len() as u64), cfg)?;
            let mut bytes = e.push(body).to_vec();
            bytes.extend_from_slice(&e.finish());
            BODIES_ENCODED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            made = bytes.len();
            Some(bytes.into_boxed_slice())
        });
        if let Some(store) = store.filter(|_| made > 0) {
            store.grow(&self.entry, made);
        }
        kept
    }

    /// Whether the stored answer's own `Vary` names `Accept-Encoding`.
    pub(crate) fn varies_on_coding(&self) -> bool {
        matches!(&self.entry.facts.vary, linerate_cache::Vary::Fields(names)
            if names.iter().any(|n| &n[..] == b"accept-encoding"))
    }

    /// The stored answer whole, as it is stored: not a 304, a part or a 416 (only such a hit
    /// is a [`Fresh`]).
    pub(crate) fn whole(&self) -> bool {
        !self.not_modified && self.content_range.is_none() && self.status == self.entry.status
    }

    /// Whether this hit, for a client of `site`'s proxy route `route`, can be a [`Fresh`]
    /// answer, and if so whether that adds `Vary: Accept-Encoding`: when nothing about it
    /// needs the streamed hit's path (`driver/cache.rs`, `send_hit`) — the stored answer
    /// whole (no 304, range or 416), no field the mount removes or sets or the site adds, no
    /// coding to apply. `coding` is the one the client's Accept-Encoding chose on a site that
    /// compresses (`None`: compression is off there). The content phase's hits and the
    /// driver's (after forward auth, a flight or the second tier) follow this one rule.
    pub(crate) fn fresh_vary(
        &self,
        site: &crate::app::sites::SiteApp,
        route: usize,
        coding: Option<Encoding>,
    ) -> Option<bool> {
        let policy = &site.proxies.get(route)?.response;
        if !self.whole()
            || !policy.set.is_empty()
            || !policy.remove.is_empty()
            || site.adds_proxied_fields()
        {
            return None;
        }
        // A client that takes no coding gets the stored bytes and learns that answers vary
        // on it; one that takes a coding gets the streamed hit's coded body.
        match coding {
            None => Some(false),
            Some(coding) => match self.coding_plan(coding, &site.compression) {
                CodingPlan::AsIs => Some(false),
                CodingPlan::Vary => Some(!self.varies_on_coding()),
                CodingPlan::Encode(_) => None,
            },
        }
    }
}

/// A fresh, whole hit answered in the content phase as an ordinary answer
/// ([`Body::Cached`](crate::response::Body::Cached)) and written by the HTTP/1.1 connection:
/// the status line, `Server`, the stored `Date`, the entry's other stored fields rendered
/// once per entry ([`Entry::rendered`]), then this answer's own (`Age`, `Cache-Status`,
/// `Via`, a `Vary` a compressing site adds) and the framing. The fields and their order are the
/// streamed hit's (`driver/cache.rs`), which answers every other hit.
#[derive(Clone, Debug)]
pub(crate) struct Fresh {
    hit: Hit,
    /// `Vary: Accept-Encoding` goes out (a compressing site's answer sent as stored).
    vary: bool,
}

impl Fresh {
    /// `hit` as an ordinary answer; it must be the stored answer whole ([`Hit::whole`]: a
    /// 304, a range or a 416 is the driver's), since only the stored head is written.
    pub(crate) fn new(hit: Hit, vary: bool) -> Fresh {
        debug_assert!(hit.whole());
        Fresh { hit, vary }
    }

    pub(crate) fn status(&self) -> u16 {
        self.hit.status
    }

    /// What the access log says of it.
    pub(crate) fn outcome(&self) -> CacheOutcome {
        self.hit.outcome
    }

    /// The body's bytes (none for HEAD).
    pub(crate) fn body(&self) -> &[u8] {
        self.hit.body()
    }

    /// Appends the answer for an HTTP/1.1 connection: `head_request` sends no body (its
    /// Content-Length says what GET's would, RFC 9110 §8.6), `close` and `keep_alive_10` say
    /// what `Connection` says; `stamp` is the server's `Server`, the current `Date` (used
    /// only when the stored answer has none) and the `Alt-Svc` port.
    pub(crate) fn write_h1(
        &self,
        out: &mut Vec<u8>,
        head_request: bool,
        close: bool,
        keep_alive_10: bool,
        stamp: crate::h1::Stamp<'_>,
    ) {
        use linerate_http1::{literal_field, reason, status_has_no_body};
        let hit = &self.hit;
        let entry = &hit.entry;
        let rendered = entry.rendered(render);
        let (date, stored) = rendered.head.split_at(rendered.first_line);
        let status = hit.status;
        out.reserve(stored.len() + entry.body.len() + 256);
        if status == 200 {
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        } else {
            let mut digits = itoa::Buffer::new();
            out.extend_from_slice(b"HTTP/1.1 ");
            out.extend_from_slice(digits.format(status).as_bytes());
            out.push(b' ');
            out.extend_from_slice(reason(status).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        // A stored Server is never sent (`written_here`): the server's own goes out.
        if let Some(server) = stamp.server {
            literal_field(out, b"Server", server);
        }
        // A cache does not update the stored Date (RFC 9110 §6.6.1): with Age, it tells how
        // old the answer is. Rendered with the stored fields; the current one only where the
        // stored answer had none.
        if date.is_empty() {
            literal_field(out, b"Date", stamp.date);
        } else {
            out.extend_from_slice(date);
        }
        if let Some(port) = stamp.alt_svc
            && entry.field(b"alt-svc").is_none()
        {
            literal_field(out, b"Alt-Svc", crate::h1::AltSvc::h3(port).as_bytes());
        }
        out.extend_from_slice(stored);
        // RFC 9111 §5.1: the current age, never the stored one.
        literal_field(out, b"Age", &hit.age[..usize::from(hit.age_len)]);
        match &hit.cache_status {
            StatusValue::None => {}
            StatusValue::Inline(b, n) => literal_field(out, b"Cache-Status", &b[..usize::from(*n)]),
            StatusValue::Heap(v) => literal_field(out, b"Cache-Status", v),
        }
        literal_field(
            out,
            b"Via",
            super::reply::via(linerate_http1::Version::Http11).as_bytes(),
        );
        if self.vary {
            literal_field(out, b"Vary", b"Accept-Encoding");
        }
        let no_body = status_has_no_body(status);
        if !no_body {
            let mut digits = itoa::Buffer::new();
            let length = digits.format(entry.body.len()).as_bytes();
            literal_field(out, b"Content-Length", length);
        }
        if close {
            literal_field(out, b"Connection", b"close");
        } else if keep_alive_10 {
            literal_field(out, b"Connection", b"keep-alive");
        }
        out.extend_from_slice(b"\r\n");
        if !head_request && !no_body {
            out.extend_from_slice(&entry.body);
        }
    }
}

/// What every answer from `entry` reads of it, made once per entry: its stored Date's
/// line, then its other stored fields as HTTP/1.1 field lines, less those a fresh hit writes
/// itself (`written_here`) and a stored
/// Content-Range unless the stored answer is a 200 (the streamed hit's rule, `Hit::fields`);
/// whether this server compresses its Content-Type (`compress_stream::compressible_type`,
/// ~300 instructions a hit when read each time, callgrind).
fn render(entry: &Entry) -> linerate_cache::Rendered {
    use super::eq_lower;
    let ranged = entry.status != 200;
    // One pass finds the first Date and Content-Type and sizes the head (a lookup each and
    // a pass to size cost ~400 instructions an entry, callgrind: a second tier's entry is
    // rendered on every hit).
    let (mut date, mut content_type, mut size) = (None, None, 0);
    for (n, v) in &entry.fields {
        size += n.len() + v.len() + 4;
        match n.len() {
            4 if date.is_none() && eq_lower(n, b"date") => date = Some(&v[..]),
            12 if content_type.is_none() && eq_lower(n, b"content-type") => {
                content_type = Some(&v[..]);
            }
            _ => {}
        }
    }
    // Sized once for every stored field (those left out are few and short), and kept as
    // it is: never grown, never shrunk (a `realloc` to fit cost ~250 instructions an entry).
    let size = size + date.map_or(0, |d| d.len() + 8);
    let mut head = Vec::with_capacity(size);
    // The stored Date first: a cache does not update it (RFC 9110 §6.6.1), and the head
    // writes it before the server's Alt-Svc.
    if let Some(date) = date {
        linerate_http1::literal_field(&mut head, b"Date", date);
    }
    let first_line = head.len();
    for (n, v) in &entry.fields {
        if !(written_here(n) || (ranged && n.eq_ignore_ascii_case(b"content-range"))) {
            linerate_http1::write_field(&mut head, n, v);
        }
    }
    linerate_cache::Rendered {
        head,
        first_line,
        compressible: compress_stream::compressible_type(content_type),
    }
}

/// Stored bodies the hits encoded ([`Hit::encoded`]): once per entry and coding.
static BODIES_ENCODED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many stored bodies the hits have encoded so far, for /metrics.
pub(crate) fn bodies_encoded() -> u64 {
    BODIES_ENCODED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Bytes of a hit's `Cache-Status` value kept in the [`Hit`] itself.
const INLINE_STATUS: usize = 64;

/// A hit's `Cache-Status` value: a fresh hit's (the mount's prefix and the TTL) inline when
/// it fits, so that a hit allocates none.
#[derive(Clone, Debug)]
enum StatusValue {
    None,
    Inline([u8; INLINE_STATUS], u8),
    Heap(Vec<u8>),
}

impl StatusValue {
    /// `prefix` (`name; hit; ttl=`) and `ttl`'s digits.
    fn hit(prefix: &[u8], ttl: i64) -> StatusValue {
        let mut digits = itoa::Buffer::new();
        let ttl = digits.format(ttl).as_bytes();
        let len = prefix.len() + ttl.len();
        if len > INLINE_STATUS {
            return StatusValue::Heap([prefix, ttl].concat());
        }
        let mut b = [0u8; INLINE_STATUS];
        b[..prefix.len()].copy_from_slice(prefix);
        b[prefix.len()..len].copy_from_slice(ttl);
        StatusValue::Inline(b, len as u8)
    }
}

/// Whether a stored field is one this server writes itself on every answer (framing, Date,
/// Server, and the hit's own Age) or one no client gets (the origin's tags, kept stored for
/// a purge by tag): the names told apart by length first, then compared a
/// word at a time (a byte loop cost ~70 instructions a stored field, callgrind).
fn written_here(name: &[u8]) -> bool {
    use super::eq_lower;
    match name.len() {
        3 => eq_lower(name, b"age"),
        4 => eq_lower(name, b"date"),
        6 => eq_lower(name, b"server"),
        14 => eq_lower(name, b"content-length"),
        17 => eq_lower(name, b"transfer-encoding"),
        // The origin's tags are the cache's, never the client's.
        9 => eq_lower(name, b"cache-tag"),
        13 => eq_lower(name, b"surrogate-key"),
        _ => false,
    }
}

/// The answer from `entry`, `age` seconds old, for `req`: a 304 when `not_modified`, a
/// range cut from the stored whole for a GET that asks for one, no body for HEAD.
fn answer(
    req: &linerate_cache::Request<'_>,
    entry: Arc<Entry>,
    age: u64,
    not_modified: bool,
    status_field: StatusValue,
    outcome: CacheOutcome,
) -> Hit {
    let mut digits = [0u8; 20];
    let mut itoa = itoa::Buffer::new();
    let a = itoa.format(age).as_bytes();
    digits[..a.len()].copy_from_slice(a);
    let mut content_range = None;
    let len = entry.body.len();
    let (status, body) = if not_modified {
        (304, 0..0)
    } else if req.method == b"GET" {
        let answer = range(req.fields, entry.status, len as u64);
        content_range = answer.content_range(len as u64);
        match answer {
            RangeAnswer::Whole => (entry.status, 0..len),
            RangeAnswer::Part { start, end } => (206, start as usize..end as usize + 1),
            RangeAnswer::Unsatisfiable => (416, 0..0),
        }
    } else {
        (entry.status, 0..0)
    };
    Hit {
        entry,
        status,
        age: digits,
        age_len: a.len() as u8,
        content_range,
        cache_status: status_field,
        body,
        not_modified,
        outcome,
    }
}

/// Request fields [`listed`] lists on the stack; a head with more lists them in a `Vec`.
const STACK_FIELDS: usize = 32;

/// Calls `f` with the `count` request `fields` as linerate-cache reads them: on the stack for
/// all but unusually long heads, in a `Vec` past [`STACK_FIELDS`] (a `Vec` each plan cost
/// ~200 instructions, callgrind).
fn listed<'a, R>(
    count: usize,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    f: impl FnOnce(&[(&'a [u8], &'a [u8])]) -> R,
) -> R {
    if count > STACK_FIELDS {
        let heap: Vec<(&[u8], &[u8])> = fields.collect();
        return f(&heap);
    }
    let mut stack: [(&[u8], &[u8]); STACK_FIELDS] = [(&[], &[]); STACK_FIELDS];
    let mut n = 0;
    for (slot, field) in stack.iter_mut().zip(fields) {
        *slot = field;
        n += 1;
    }
    f(&stack[..n])
}

/// What the content phase did with a request below a caching mount without forward auth:
/// answered it from the store, or planned it for the driver (which then need not look
/// again).
pub(crate) enum Here {
    Hit(Hit),
    Planned(Box<Exchange>),
}

/// Whether a request carries content, as the content phase sees it: a body that came with
/// its head (`whole`, not empty), one still to come (`following`: HTTP/1.1 bytes not read
/// yet, or HTTP/2 and HTTP/3 DATA after a HEADERS without END_STREAM), or a framing that
/// declares one (Content-Length over 0, Transfer-Encoding). A GET or HEAD with content
/// bypasses the cache ([`linerate_cache::Request::body`]).
pub(crate) fn has_body(head: &RequestHead, whole: &[u8], following: bool) -> bool {
    following || !whole.is_empty() || head.framing() != linerate_http1::Framing::None
}

/// Plans `head` (in `buf`) below `mount` in the content phase, before the upstream request
/// is framed: a fresh hit needs no job framed, no copy of the request and no second look.
/// A hit that also revalidates in the background, and every other plan, go to the driver.
/// Only for a request without content ([`has_body`]): one with content bypasses the cache,
/// which the driver's plan says (the hit's path carries no flag for it).
pub(crate) fn plan_here(
    mount: &Arc<MountCache>,
    head: &RequestHead,
    buf: &[u8],
    tls: bool,
) -> Here {
    listed(head.header_count(), head.headers(buf), |fields| {
        plan_listed(mount, head, buf, tls, fields)
    })
}

/// [`plan_here`] with the request's fields listed.
fn plan_listed(
    mount: &Arc<MountCache>,
    head: &RequestHead,
    buf: &[u8],
    tls: bool,
    fields: &[(&[u8], &[u8])],
) -> Here {
    let req = linerate_cache::Request {
        method: head.method_bytes(buf),
        scheme: if tls { b"https" } else { b"http" },
        authority: head.host(buf).unwrap_or_default(),
        target: head.target_bytes(buf),
        fields,
        body: false,
    };
    let now = now();
    let plan = linerate_cache::plan(&req, &mount.store, now, &mount.opts);
    if let Plan::Answer {
        entry,
        age,
        ttl,
        not_modified,
        revalidate: false,
        ..
    } = plan
    {
        let counters = mount.store.counters();
        counters.record(if ttl > 0 { Event::Hit } else { Event::Stale });
        let status = mount
            .hit_status
            .as_deref()
            .map_or(StatusValue::None, |prefix| StatusValue::hit(prefix, ttl));
        let outcome = CacheOutcome::of_answer(ttl, false);
        return Here::Hit(answer(&req, entry, age, not_modified, status, outcome));
    }
    let mut x = Exchange::new(Arc::clone(mount), CacheReq::copy(head, buf, tls, false));
    x.pending = Some((plan, now));
    Here::Planned(Box::new(x))
}

/// What to do with a request before it goes upstream.
#[derive(Debug)]
pub(crate) enum Before {
    /// Answer from the store; with a stale answer within `stale-while-revalidate` (RFC 5861
    /// §3), also send this validation up in the background, unless one is on its way.
    Answer(Hit, Option<Box<Exchange>>),
    /// Send it (its head was changed for validation where that applies).
    Forward,
    /// Wait on another request's flight: the waiter went in, the caller parks the request.
    Wait,
    /// `only-if-cached` with nothing usable stored (RFC 9111 §5.2.1.7).
    GatewayTimeout,
    /// A leader's miss in memory: ask the second tier first ([`Exchange::tier_fetch`]); the
    /// caller parks the request until [`Exchange::tier_answer`].
    Tier,
}

/// What to do with an upstream answer's head.
#[derive(Debug)]
pub(crate) enum AfterHead {
    /// Relay it, with these extra fields (Cache-Status); its body is stored if `storing`.
    Relay(Vec<(&'static [u8], Vec<u8>)>),
    /// Answer the client from the store instead (a 304 freshened it, or it failed and a stale
    /// answer may be used); the upstream's body is read and dropped.
    Answer(Hit),
    /// A 304 for another representation: send the request again without validators.
    Refetch,
}

/// The answer being stored while it streams.
#[derive(Debug)]
struct Storing {
    key: Key,
    variant: Variant,
    status: u16,
    /// Its fields as an entry keeps them (RFC 9111 §3.1), copied once when the head came.
    fields: Vec<OwnedField>,
    fill: linerate_cache::fill::Fill,
    timing: Timing,
}

/// What the memory store will do with an answer it may keep, known from its head: what its
/// Cache-Status says (RFC 9211 §2.6: `stored` only when it was).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keeps {
    /// Its length is known and it fits: stored once its body is whole (`stored`).
    Yes,
    /// Its body is over `max_object`: streamed through, stored nowhere (`detail=too-big`).
    TooBig,
    /// Its length is not known yet (chunked, or to the close), or the memory store's shard
    /// cannot hold its entry (a second tier still may): stored if it turns out to fit, but
    /// the head, already sent, does not say so.
    Unsaid,
}

/// One proxied request's cache state, from its plan to the end of its answer.
#[derive(Debug)]
pub(crate) struct Exchange {
    pub mount: Arc<MountCache>,
    req: CacheReq,
    /// The plan was made (a request that waited is planned again).
    pub planned: bool,
    /// It waited on a flight that landed without a usable answer: it goes up alone.
    alone: bool,
    collapsed: bool,
    /// Why it went forward, for Cache-Status (`None`: the cache does not handle it).
    fwd: Option<Fwd>,
    /// Why the store was not consulted, when it was not ([`Exchange::bypassed`]).
    bypass: Option<linerate_cache::Bypass>,
    validate: Option<Arc<Entry>>,
    /// The flight it leads.
    flight: Option<(Key, FlightId)>,
    request_time: Time,
    storing: Option<Storing>,
    /// The second tier was asked (a leader asks once).
    tier_checked: bool,
    /// The key a request that goes alone (it waited on a flight that landed without an
    /// answer memory kept) asks the second tier under, with no flight of its own.
    asking: Option<Key>,
    /// The second tier's entry for this request, planned from even when the memory store
    /// could not keep it (a store smaller than the working set).
    tier_entry: Option<Arc<Entry>>,
    /// The tier's fence when it was asked (`SharedTier::usable`).
    tier_fence: u64,
    /// The plan the content phase made, and when (the driver acts on it without a second
    /// look).
    pending: Option<(Plan, Time)>,
    /// When it joined another request's flight to wait: an entry received since is that
    /// flight's answer, the validation a client's no-cache asked for.
    waited_since: Option<Time>,
}

impl Drop for Exchange {
    fn drop(&mut self) {
        if let Some((key, id)) = self.flight.take() {
            let waiters = self.mount.flights().land(&key, id);
            wake(waiters);
        }
    }
}

impl Exchange {
    /// The request's forward auth allowed it, setting the fields `copy` names from its
    /// answer (`given`): the cache reads them as the upstream will ([`CacheReq::authorized`]).
    pub(crate) fn authorized<'a>(
        &mut self,
        copy: &[String],
        given: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        debug_assert!(
            !self.planned,
            "a mount with forward auth plans after the check"
        );
        self.req.authorized(copy, given);
    }

    pub(crate) fn new(mount: Arc<MountCache>, req: CacheReq) -> Exchange {
        Exchange {
            mount,
            req,
            planned: false,
            alone: false,
            collapsed: false,
            fwd: None,
            bypass: None,
            validate: None,
            flight: None,
            request_time: Time(0),
            storing: None,
            tier_checked: false,
            asking: None,
            tier_entry: None,
            tier_fence: 0,
            pending: None,
            waited_since: None,
        }
    }

    /// Why the request was not answered from the store, when it was not: the method, no
    /// key, preconditions, a body, or a mount's `bypass` rule (`Bypass::Rule`:
    /// its Cache-Status says `fwd=bypass`, and a log may say BYPASS).
    #[allow(dead_code)] // for the access log's cache status
    pub(crate) fn bypassed(&self) -> Option<linerate_cache::Bypass> {
        self.bypass
    }

    /// A HEAD that goes upstream as GET: the driver sends GET, reads the
    /// answer's body for the store only, and gives the client the head.
    pub(crate) fn head_as_get(&self) -> bool {
        self.req.as_get
    }

    /// The answer's body is being collected for the store (its head said it may be kept,
    /// and it has not passed `max_object`).
    pub(crate) fn storing(&self) -> bool {
        self.storing.as_ref().is_some_and(|s| s.fill.collecting())
    }

    /// The request waited, and its flight landed or expired: it looks in the store again
    /// and, missing, goes up alone.
    /// The upstream request head of a background validation, from the client's request's
    /// `head`: its validators replace the client's.
    pub(crate) fn validation_head(&self, head: &[u8]) -> Vec<u8> {
        let mut h = head.to_vec();
        strip_fields(&mut h, validate::CLIENT_CONDITIONALS);
        if let Some(e) = &self.validate {
            add_fields(&mut h, &validate::conditional_fields(e));
        }
        h
    }

    /// The mount whose second tier to ask, and the tier key of the flight this request
    /// leads; `None`: nothing to ask (no tier, no flight, no generation read yet, or a key
    /// too long), a miss at once.
    pub(crate) fn tier_question(&self) -> Option<(Arc<MountCache>, String)> {
        let tier = self.mount.tier.as_ref()?;
        let key = match (&self.flight, &self.asking) {
            (Some((key, _)), _) | (None, Some(key)) => key,
            (None, None) => return None,
        };
        Some((Arc::clone(&self.mount), tier.tier_key(key)?))
    }

    /// The second tier's answer: an entry it held goes into memory, and the request (and
    /// every one waiting on it) is planned again from there; nothing usable, and it goes up.
    pub(crate) fn tier_answer(&mut self, stored: Option<Vec<u8>>) {
        self.tier_checked = true;
        // Asked before an invalidation or a purge on this edge was done, or one of its key
        // has not reached the tier yet: it may bring back what that removed, so it is a miss.
        let asked = match (&self.asking, &self.flight) {
            (Some(key), _) | (None, Some((key, _))) => Some(key),
            (None, None) => None,
        };
        let usable = (self.mount.tier.as_ref())
            .zip(asked)
            .is_some_and(|(t, key)| t.usable(self.tier_fence, key));
        let stored = stored.filter(|_| usable);
        // An entry that sets a cookie, written by an edge (or a version) that kept such
        // answers, is not served by one that does not: its cookie is another visitor's.
        let opts = &self.mount.opts;
        let mount = Arc::clone(&self.mount);
        let decode = |b, key: &Key| {
            super::tier::decode(b, key)
                .filter(|e| linerate_cache::storable::cookie_allowed(&e.facts, opts))
                // A tag purged since it was stored: the tier cannot list a
                // tag's keys, so its entry stays there, and is refused here.
                .filter(|e| mount.tier.as_ref().is_none_or(|t| !t.tag_purged(e)))
        };
        if let Some(key) = self.asking.take() {
            // Asked alone: no flight to land; an entry is planned from as a leader's is.
            if let Some(entry) = stored.and_then(|b| decode(b, &key)) {
                let entry = Arc::new(entry);
                self.mount.store.insert(Arc::clone(&entry));
                self.tier_entry = Some(entry);
                self.planned = false;
            }
            return;
        }
        let Some((key, id)) = self.flight.take() else {
            return;
        };
        match stored.and_then(|b| decode(b, &key)) {
            Some(entry) => {
                let entry = Arc::new(entry);
                self.mount.store.insert(Arc::clone(&entry));
                self.tier_entry = Some(entry);
                let waiters = self.mount.flights().land(&key, id);
                wake(waiters);
                self.planned = false;
            }
            None => self.flight = Some((key, id)),
        }
    }

    pub(crate) fn woken(&mut self) {
        self.mount
            .waiting
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.planned = false;
        self.alone = true;
        self.collapsed = true;
    }

    /// Plans the request at `now`; `head` is the upstream request's head, changed here for
    /// validation (the client's own validators are the cache's to judge; the stored entry's
    /// go up). `park` names the request if it must wait.
    pub(crate) fn before(
        &mut self,
        head: &mut Vec<u8>,
        now: Time,
        park: impl FnOnce() -> Waiter,
    ) -> Before {
        self.planned = true;
        let mount = Arc::clone(&self.mount);
        let (plan, now) = match self.pending.take() {
            Some(made) => made,
            None => (
                self.req.with(|r| match self.tier_entry.as_ref() {
                    // The tier's entry was read back under this request's own key (the
                    // flight's: `tier::decode` checks it), so the key is not written again.
                    Some(held) => linerate_cache::plan_keyed(
                        r,
                        &held.key,
                        &mount.store,
                        Some(held),
                        now,
                        &mount.opts,
                    ),
                    None => linerate_cache::plan_with(r, &mount.store, None, now, &mount.opts),
                }),
                now,
            ),
        };
        self.request_time = now;
        let plan = if super::cache_force::flight_validated(&plan, self.waited_since) {
            let opts = super::cache_force::met(&mount.opts);
            self.req
                .with(|r| linerate_cache::plan_with(r, &mount.store, None, now, &opts))
        } else {
            plan
        };
        let counters = mount.store.counters();
        match plan {
            Plan::Bypass(why) => {
                counters.record(Event::Bypass);
                self.bypass = Some(why);
                self.fwd = Some(match why {
                    linerate_cache::Bypass::Method => Fwd::Method,
                    _ => Fwd::Bypass,
                });
                Before::Forward
            }
            Plan::GatewayTimeout => Before::GatewayTimeout,
            Plan::Answer {
                entry,
                age,
                ttl,
                not_modified,
                revalidate,
                updating,
            } => {
                counters.record(if ttl > 0 { Event::Hit } else { Event::Stale });
                // `name; hit; ttl=N`, inline as the content phase's hits write it; the
                // operator's `updating` says so (`detail=stale-updating`).
                let status = if updating {
                    self.status_value(|name| CacheStatus {
                        detail: Some(linerate_cache::StaleBy::Updating.detail()),
                        ..CacheStatus::hit(name, ttl)
                    })
                    .map_or(StatusValue::None, StatusValue::Heap)
                } else {
                    mount
                        .hit_status
                        .as_deref()
                        .map_or(StatusValue::None, |prefix| StatusValue::hit(prefix, ttl))
                };
                let background = (revalidate && self.req.is_get())
                    .then(|| mount.flights().lead_if_idle(&entry.key, now))
                    .flatten()
                    .map(|id| {
                        Box::new(Exchange {
                            mount: Arc::clone(&mount),
                            req: self.req.clone(),
                            planned: true,
                            alone: true,
                            collapsed: false,
                            fwd: Some(Fwd::Stale),
                            bypass: None,
                            validate: Some(Arc::clone(&entry)),
                            flight: Some((entry.key.clone(), id)),
                            request_time: now,
                            storing: None,
                            tier_checked: true,
                            asking: None,
                            tier_entry: None,
                            tier_fence: 0,
                            pending: None,
                            waited_since: None,
                        })
                    });
                // Stale within stale-while-revalidate: nginx's UPDATING when another
                // request's validation is on its way; STALE for the one that starts it (or a
                // HEAD, which starts none).
                let updating = revalidate && self.req.is_get() && background.is_none();
                let outcome = CacheOutcome::of_answer(ttl, updating);
                let hit = self.hit(entry, age, not_modified, status, outcome);
                Before::Answer(hit, background)
            }
            Plan::Forward { key, validate, fwd } => {
                counters.record(Event::Miss);
                // a HEAD goes up as GET, whose answer is stored (nginx's
                // `proxy_cache_convert_head`); the driver sends it so (`Exchange::head_as_get`).
                if mount.conf.convert_head && self.req.is_head() {
                    self.req.as_get = true;
                }
                strip_fields(head, validate::CLIENT_CONDITIONALS);
                if let Some(e) = &validate {
                    add_fields(head, &validate::conditional_fields(e));
                }
                self.validate = validate;
                self.fwd = Some(fwd);
                // One that waited on a flight that landed while memory could not keep its
                // answer (a store smaller than the working set) asks the second tier alone
                // before going up: the flight's leader may have found the entry there.
                if self.alone
                    && fwd != Fwd::Request
                    && self.validate.is_none()
                    && mount.tier.is_some()
                    && !self.tier_checked
                {
                    self.asking = Some(key);
                    self.tier_fence = mount.tier.as_ref().map_or(0, |t| t.fence());
                    return Before::Tier;
                }
                // A client's no-cache or max-age joins the key's flight like any validation
                // (100 of them once made 100 origin requests); woken, it takes
                // the flight's answer as its validation (`cache_force::flight_validated`).
                if self.alone {
                    return Before::Forward;
                }
                let role = mount.flights().join(&key, park(), now);
                match role {
                    Role::Lead(id) => {
                        self.flight = Some((key, id));
                        if self.validate.is_none() && mount.tier.is_some() && !self.tier_checked {
                            self.tier_fence = mount.tier.as_ref().map_or(0, |t| t.fence());
                            return Before::Tier;
                        }
                        Before::Forward
                    }
                    Role::Wait(_) => {
                        self.waited_since = Some(now);
                        mount
                            .waiting
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        Before::Wait
                    }
                    Role::Alone(_) => Before::Forward,
                }
            }
        }
    }

    /// The Cache-Status value `make` describes, when the mount sends the field.
    fn status_value<'a>(
        &'a self,
        make: impl FnOnce(&'a str) -> CacheStatus<'a>,
    ) -> Option<Vec<u8>> {
        let name = self.mount.status.as_deref()?;
        Some(make(name).bytes())
    }

    /// The answer from `entry`, `age` seconds old, for this request.
    fn hit(
        &self,
        entry: Arc<Entry>,
        age: u64,
        not_modified: bool,
        status: StatusValue,
        outcome: CacheOutcome,
    ) -> Hit {
        self.req
            .with(|r| answer(r, entry, age, not_modified, status, outcome))
    }

    /// The `Cache-Status` value of the proxy's own error answer (502, 504) to a request
    /// that went forward and got no answer (RFC 9211 §2: why it went forward, no
    /// `fwd-status` since nothing came, `detail` naming the failure); `None` when the mount
    /// sends no Cache-Status or its cache did not plan the request.
    pub(crate) fn error_status(&self, detail: &str) -> Option<Vec<u8>> {
        let fwd = self.fwd?;
        self.status_value(|name| CacheStatus {
            collapsed: self.collapsed,
            detail: Some(detail),
            ..CacheStatus::forward(name, fwd)
        })
    }

    /// What the access log says of the request as it went forward (`None`: a method the
    /// cache does not handle, which nginx logs as `-` too). An answer from the store says
    /// its own ([`Hit::outcome`]).
    pub(crate) fn outcome(&self) -> Option<CacheOutcome> {
        Some(match self.fwd? {
            Fwd::Method => return None,
            Fwd::Bypass | Fwd::Request => CacheOutcome::Bypass,
            Fwd::Stale => CacheOutcome::Expired,
            Fwd::UriMiss | Fwd::VaryMiss | Fwd::Miss => CacheOutcome::Miss,
        })
    }

    /// The upstream's answer head is in (`spans` of `head`); `length` is its body's length
    /// when known.
    pub(crate) fn after_head(
        &mut self,
        status: u16,
        head: &[u8],
        spans: &[FieldSpan],
        length: Option<u64>,
    ) -> AfterHead {
        let now = now();
        let timing = Timing {
            request_time: self.request_time,
            response_time: now,
        };
        let fields: Vec<(&[u8], &[u8])> = spans
            .iter()
            .map(|f| (&head[f.name.clone()], &head[f.value.clone()]))
            .collect();
        let resp = linerate_cache::Response {
            status,
            fields: &fields,
        };
        let mount = Arc::clone(&self.mount);
        let after = self.req.with(|r| {
            let method = linerate_cache::Method::of(r.method);
            if let Some(tier) = &mount.tier
                && method == linerate_cache::Method::Unsafe
            {
                // What the answer invalidates in memory (§4.4, within `after`) goes from the
                // tier too, or the next miss would bring it back.
                if let Ok(target) = linerate_cache::key_for(
                    mount.opts.key.as_deref(),
                    r.scheme,
                    r.authority,
                    r.target,
                    r.fields,
                ) {
                    let gone =
                        linerate_cache::invalidate::invalidated(method, status, &target, &fields);
                    if !gone.is_empty() {
                        tier.invalidate(&gone);
                    }
                }
            }
            linerate_cache::after(
                r,
                Some(&resp),
                self.validate.as_ref(),
                timing,
                &mount.store,
                &mount.opts,
            )
        });
        let Some(fwd) = self.fwd else {
            return AfterHead::Relay(Vec::new());
        };
        fn relay<'a>(
            this: &'a Exchange,
            status: u16,
            fwd: Fwd,
            stored: bool,
            detail: Option<&'a str>,
        ) -> Vec<(&'static [u8], Vec<u8>)> {
            let mut extra = Vec::new();
            if let Some(v) = this.status_value(|name| CacheStatus {
                fwd_status: Some(status),
                stored,
                collapsed: this.collapsed,
                detail,
                ..CacheStatus::forward(name, fwd)
            }) {
                extra.push((&b"Cache-Status"[..], v));
            }
            extra
        }
        match after {
            After::Store { key, variant } => {
                let max = mount.max_object;
                let mut stored = linerate_cache::fields::to_stored(&fields);
                // An ignored Set-Cookie is the filling visitor's alone: the
                // stored answer never replays it (docs/cache-poisoning.md).
                if mount.opts.ignore.set_cookie {
                    stored.retain(|(n, _)| !n.eq_ignore_ascii_case(b"set-cookie"));
                }
                let keeps = match length.map(usize::try_from) {
                    Some(Ok(n)) if n > max => Keeps::TooBig,
                    Some(Ok(n)) => {
                        let size = linerate_cache::entry::size_of(&key, &variant, &stored, n);
                        if mount.store.admits(size, n) {
                            Keeps::Yes
                        } else {
                            Keeps::Unsaid
                        }
                    }
                    Some(Err(_)) => Keeps::TooBig,
                    None => Keeps::Unsaid,
                };
                if keeps != Keeps::TooBig {
                    self.storing = Some(Storing {
                        key,
                        variant,
                        status,
                        fields: stored,
                        fill: linerate_cache::fill::Fill::new(max, length),
                        timing,
                    });
                }
                let detail = (keeps == Keeps::TooBig).then_some("too-big");
                AfterHead::Relay(relay(self, status, fwd, keeps == Keeps::Yes, detail))
            }
            After::PassOn(why) => {
                let detail = why.map(linerate_cache::NotStored::as_str);
                AfterHead::Relay(relay(self, status, fwd, false, detail))
            }
            After::Refetch => {
                self.validate = None;
                AfterHead::Refetch
            }
            After::Freshened(entry) => {
                mount.store.counters().record(Event::Revalidated);
                AfterHead::Answer(self.answer_validated(entry, now, fwd, CacheOutcome::Revalidated))
            }
            After::ServeStale(entry, by) => {
                mount.store.counters().record(Event::Stale);
                AfterHead::Answer(self.answer_stale(entry, now, fwd, Some(status), by))
            }
        }
    }

    /// No answer came from upstream (refused, reset, or `timeout`): a stored answer the
    /// origin allows to be used stale on error (RFC 5861 §4), or the operator's `use_stale`,
    /// if there is one.
    pub(crate) fn failed(&mut self, timeout: bool) -> Option<Hit> {
        let entry = self.validate.clone()?;
        let now = now();
        let timing = Timing {
            request_time: self.request_time,
            response_time: now,
        };
        let mount = Arc::clone(&self.mount);
        let failure = if timeout {
            linerate_cache::Failure::Timeout
        } else {
            linerate_cache::Failure::Error
        };
        let after = self
            .req
            .with(|r| linerate_cache::after_failure(r, Some(&entry), failure, timing, &mount.opts));
        match after {
            After::ServeStale(e, by) => {
                mount.store.counters().record(Event::Stale);
                let fwd = self.fwd.unwrap_or(Fwd::Stale);
                Some(self.answer_stale(e, now, fwd, None, by))
            }
            _ => None,
        }
    }

    /// The stale answer from `entry` that the origin's failure (`status`: its answer's, if
    /// one came) left to use, its Cache-Status saying why (`detail`, [`StaleBy::detail`]).
    fn answer_stale(
        &self,
        entry: Arc<Entry>,
        now: Time,
        fwd: Fwd,
        status: Option<u16>,
        by: linerate_cache::StaleBy,
    ) -> Hit {
        self.answer_from(
            entry,
            now,
            fwd,
            status,
            Some(by.detail()),
            CacheOutcome::Stale,
        )
    }

    /// The answer from an entry a validation left to use.
    fn answer_validated(
        &self,
        entry: Arc<Entry>,
        now: Time,
        fwd: Fwd,
        outcome: CacheOutcome,
    ) -> Hit {
        self.answer_from(entry, now, fwd, None, None, outcome)
    }

    /// The answer from an entry a validation or a failure left to use.
    fn answer_from(
        &self,
        entry: Arc<Entry>,
        now: Time,
        fwd: Fwd,
        fwd_status: Option<u16>,
        detail: Option<&str>,
        outcome: CacheOutcome,
    ) -> Hit {
        let age = linerate_cache::freshness::age_field(linerate_cache::freshness::current_age(
            &entry.facts,
            entry.timing,
            now,
        ));
        let not_modified = self.req.with(|r| validate::not_modified(r.fields, &entry))
            && !self.req.is_head()
            && self.req.fields().iter().any(|(n, _)| {
                validate::CLIENT_CONDITIONALS
                    .iter()
                    .any(|c| n.eq_ignore_ascii_case(c))
            });
        let status = self
            .status_value(|name| CacheStatus {
                collapsed: self.collapsed,
                fwd_status,
                detail,
                ..CacheStatus::forward(name, fwd)
            })
            .map_or(StatusValue::None, StatusValue::Heap);
        self.hit(entry, age, not_modified, status, outcome)
    }

    /// A piece of the answer's body, as it came from upstream.
    pub(crate) fn data(&mut self, piece: &[u8]) {
        if let Some(s) = self.storing.as_mut() {
            s.fill.push(piece);
        }
    }

    /// The answer's body ended cleanly: it is stored if it was whole and under the limit.
    pub(crate) fn end(&mut self) {
        let Some(s) = self.storing.take() else {
            return;
        };
        let Some(body) = s.fill.finish(true) else {
            return;
        };
        let entry = Arc::new(Entry::from_stored(
            s.key, s.variant, s.status, s.fields, body, s.timing,
        ));
        if let Some(t) = &self.mount.tier {
            t.put(&entry, &self.req.fields(), &self.mount.opts);
        }
        self.mount.store.insert(entry);
    }
}

/// Removes the lines of `names` (lowercase) from a head this server framed (`name: value`
/// lines ending in CRLF, the request line first, an empty line last).
fn strip_fields(head: &mut Vec<u8>, names: &[&[u8]]) {
    // This server framed the head: a field line is `Name: value`, its name right at the
    // line's start and its colon right after.
    let named = |line: &[u8]| {
        names
            .iter()
            .any(|n| line.get(n.len()) == Some(&b':') && line[..n.len()].eq_ignore_ascii_case(n))
    };
    // The lines after the request line, found with memchr (this runs on every miss planned,
    // and most heads hold none of `names`: then nothing is copied).
    let starts = || memchr::memchr_iter(b'\n', head).map(|i| i + 1);
    if !starts().any(|at| named(&head[at..])) {
        return;
    }
    let mut out = Vec::with_capacity(head.len());
    let mut from = 0;
    for at in starts() {
        if named(&head[at..]) {
            let end = memchr::memchr(b'\n', &head[at..]).map_or(head.len(), |i| at + i + 1);
            out.extend_from_slice(&head[from..at]);
            from = end;
        }
    }
    out.extend_from_slice(&head[from..]);
    *head = out;
}

/// Adds `fields` at the end of a head this server framed (before its empty line).
fn add_fields(head: &mut Vec<u8>, fields: &[(&[u8], &[u8])]) {
    if !head.ends_with(b"\r\n\r\n") {
        return;
    }
    head.truncate(head.len() - 2);
    for (n, v) in fields {
        head.extend_from_slice(n);
        head.extend_from_slice(b": ");
        head.extend_from_slice(v);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
}

/// Removes the validators a validation added (before sending the request again whole).
pub(crate) fn strip_validators(head: &mut Vec<u8>) {
    strip_fields(head, validate::CLIENT_CONDITIONALS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators_are_replaced_in_a_framed_head() {
        let mut head = b"GET /a HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"c\"\r\nIF-MODIFIED-SINCE: y\r\nAccept: */*\r\n\r\n".to_vec();
        strip_fields(&mut head, validate::CLIENT_CONDITIONALS);
        assert_eq!(head, b"GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
        add_fields(&mut head, &[(b"If-None-Match", b"\"s\"")]);
        assert_eq!(
            head,
            b"GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nIf-None-Match: \"s\"\r\n\r\n"
        );
        // A head without them is left as it is; the request line is never a field.
        for kept in [
            &b"GET /a HTTP/1.1\r\nHost: x\r\nIf-None-Matchx: y\r\n\r\n"[..],
            b"If-None-Match: /a HTTP/1.1\r\nHost: x\r\n\r\n",
        ] {
            let mut head = kept.to_vec();
            strip_fields(&mut head, validate::CLIENT_CONDITIONALS);
            assert_eq!(head, kept);
        }
    }

    #[test]
    fn fields_written_here_are_told_in_any_case() {
        // What a hit never copies from the stored answer (RFC 9111 §5.1: Age is the cache's;
        // framing, Date and Server are this server's), whatever the stored name's case.
        for (name, want) in [
            (&b"Age"[..], true),
            (b"AGE", true),
            (b"date", true),
            (b"DaTe", true),
            (b"Server", true),
            (b"Content-Length", true),
            (b"CONTENT-LENGTH", true),
            (b"Transfer-Encoding", true),
            (b"Content-Type", false),
            (b"Content-Lengtx", false),
            (b"dates", false),
            (b"Ag", false),
            (b"Cache-Control", false),
            (b"Transfer-Encodinf", false),
        ] {
            assert_eq!(
                written_here(name),
                want,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn a_hits_cache_status_is_the_rfc_9211_value_inline_or_not() {
        // The mount's prefix and the TTL, kept in the hit when it fits, else allocated: the
        // same value as `CacheStatus::hit` either way (a name as long as the inline room,
        // and a quoted one).
        let long = "x".repeat(INLINE_STATUS);
        for name in ["linerate", "edge 1", long.as_str()] {
            for ttl in [0, 3599, -5, i64::MIN] {
                let v = StatusValue::hit(&CacheStatus::hit_prefix(name), ttl);
                let got = match &v {
                    StatusValue::Inline(b, n) => &b[..usize::from(*n)],
                    StatusValue::Heap(b) => &b[..],
                    StatusValue::None => panic!("no value"),
                };
                assert_eq!(got, CacheStatus::hit(name, ttl).bytes(), "{name} {ttl}");
                assert_eq!(matches!(v, StatusValue::Heap(_)), name == long);
            }
        }
    }

    /// A stored entry for `/x` with `fields` and a 4-byte body, and a fresh hit of it for
    /// `method`, 7 s old, with the mount's Cache-Status prefix.
    fn fresh_hit(method: &[u8], status: u16, fields: &[(&[u8], &[u8])], vary: bool) -> Fresh {
        let key = Key::new(b"http", b"t", b"/x").unwrap();
        let t = Timing {
            request_time: Time(0),
            response_time: Time(0),
        };
        let response = linerate_cache::Response { status, fields };
        let entry = Arc::new(Entry::new(
            key,
            Variant::default(),
            &response,
            linerate_cache::Shared::from(&b"body"[..]),
            t,
        ));
        let req = linerate_cache::Request {
            method,
            scheme: b"http",
            authority: b"t",
            target: b"/x",
            fields: &[],
            body: false,
        };
        let status_value = StatusValue::hit(&CacheStatus::hit_prefix("lr"), 5);
        let hit = answer(&req, entry, 7, false, status_value, CacheOutcome::Hit);
        assert!(hit.whole());
        Fresh::new(hit, vary)
    }

    fn written(f: &Fresh, head: bool, close: bool, ka10: bool, alt_svc: Option<u16>) -> String {
        let mut out = Vec::new();
        let stamp = crate::h1::Stamp {
            server: Some(b"linerate"),
            date: b"Now, 01 Jan 2000 00:00:00 GMT",
            alt_svc,
        };
        f.write_h1(&mut out, head, close, ka10, stamp);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_fresh_hit_is_written_as_the_streamed_hit_was_with_its_stored_fields_rendered_once() {
        // The stored fields in their order less those the hit writes itself (Age, Date,
        // Server, framing: RFC 9111 §5.1, RFC 9110 §6.6.1), then Age, Cache-Status (RFC
        // 9211), Via (RFC 9110 §7.6.3), the framing, the body; HEAD: GET's head, no body
        // (RFC 9110 §9.3.2, §8.6).
        let stored: &[(&[u8], &[u8])] = &[
            (b"Cache-Control", b"max-age=60"),
            (b"Date", b"Sat, 01 Jan 2030 00:00:00 GMT"),
            (b"Server", b"up"),
            (b"Age", b"2"),
            (b"ETag", b"\"e\""),
            (b"Content-Length", b"4"),
        ];
        let f = fresh_hit(b"GET", 200, stored, false);
        let head = "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Sat, 01 Jan 2030 00:00:00 GMT\r\n\
                    Cache-Control: max-age=60\r\nETag: \"e\"\r\nAge: 7\r\nCache-Status: lr; hit; ttl=5\r\n\
                    Via: 1.1 linerate\r\nContent-Length: 4\r\n";
        assert_eq!(
            written(&f, false, false, false, None),
            format!("{head}\r\nbody")
        );
        // Written a second time from the same rendering.
        assert_eq!(
            written(&f, false, false, false, None),
            format!("{head}\r\nbody")
        );
        assert_eq!(
            written(&f, false, true, false, None),
            format!("{head}Connection: close\r\n\r\nbody")
        );
        assert_eq!(
            written(&f, false, false, true, None),
            format!("{head}Connection: keep-alive\r\n\r\nbody")
        );
        let h = fresh_hit(b"HEAD", 200, stored, false);
        assert_eq!(written(&h, true, false, false, None), format!("{head}\r\n"));
        // A compressing site's `Vary`, and `Alt-Svc` on a listener that serves HTTP/3.
        let v = fresh_hit(b"GET", 200, stored, true);
        let got = written(&v, false, false, false, Some(443));
        assert!(
            got.contains("\r\nVia: 1.1 linerate\r\nVary: Accept-Encoding\r\nContent-Length: 4\r\n"),
            "{got}"
        );
        assert!(
            got.contains(
                "Date: Sat, 01 Jan 2030 00:00:00 GMT\r\nAlt-Svc: h3=\":443\"; ma=86400\r\n"
            ),
            "{got}"
        );
        // No stored Date: the current one. A stored 404 keeps its status.
        let n = fresh_hit(b"GET", 404, &[(b"Cache-Control", b"max-age=60")], false);
        let got = written(&n, false, false, false, None);
        assert!(got.starts_with("HTTP/1.1 404 Not Found\r\nServer: linerate\r\nDate: Now, 01 Jan 2000 00:00:00 GMT\r\n"), "{got}");
        assert!(got.ends_with("Content-Length: 4\r\n\r\nbody"), "{got}");
    }

    #[test]
    fn only_a_whole_stored_answer_is_a_fresh_hit() {
        // A range of a stored 200 (RFC 9110 §14) is cut by the driver's path.
        let key = Key::new(b"http", b"t", b"/x").unwrap();
        let t = Timing {
            request_time: Time(0),
            response_time: Time(0),
        };
        let response = linerate_cache::Response {
            status: 200,
            fields: &[],
        };
        let entry = Arc::new(Entry::new(
            key,
            Variant::default(),
            &response,
            linerate_cache::Shared::from(&b"body"[..]),
            t,
        ));
        let ranged: &[(&[u8], &[u8])] = &[(b"Range", b"bytes=1-2")];
        let req = linerate_cache::Request {
            method: b"GET",
            scheme: b"http",
            authority: b"t",
            target: b"/x",
            fields: ranged,
            body: false,
        };
        let part = answer(
            &req,
            Arc::clone(&entry),
            0,
            false,
            StatusValue::None,
            CacheOutcome::Hit,
        );
        assert_eq!(part.status, 206);
        assert!(!part.whole());
        let req = linerate_cache::Request { fields: &[], ..req };
        let not_modified = answer(&req, entry, 0, true, StatusValue::None, CacheOutcome::Hit);
        assert!(!not_modified.whole());
    }
}
