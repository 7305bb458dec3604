//! The proxy cache's I/O, on the worker: a proxied request's plan made when the driver takes
//! its job (after its forward auth), an answer from the store written to the client's
//! connection, requests parked on another request's flight and woken when it lands or
//! expires. The decisions are `proxy::cache`'s (and linerate-cache's); this file only moves
//! jobs and bytes.
#![forbid(unsafe_code)]

use std::sync::Arc;

use super::backend::Backend;
use super::{Shared, Worker};
use crate::app::compress_stream::{Plan, Rewrite, StreamEncoder};
use crate::app::sites::SiteApp as Site;
use crate::config::Compression;
use crate::files::encoding::Encoding;
use crate::h1::{Cx, StreamHead};
use crate::proxy::cache::{Before, Fresh, Hit, MountCache, Waiter};
use crate::proxy::job::Job;
use crate::proxy::reply;
use linerate_cache::store::Store;

/// How often a worker with parked requests looks for flights past their deadline (ms).
const FLIGHT_TICK_MS: u64 = 250;

/// The fields of an answer from the store, as the client gets them: the stored ones less
/// what the mount removes or sets, the mount's and the site's own, and `Via` (the same
/// rules as a relayed answer's).
pub(super) fn hit_fields<'a>(
    hit: &'a Hit,
    site: Option<&'a Site>,
    route: usize,
    path: Option<&[u8]>,
) -> Vec<(&'a [u8], &'a [u8])> {
    static NONE: std::sync::OnceLock<reply::Policy> = std::sync::OnceLock::new();
    let policy = site
        .and_then(|s| s.proxies.get(route))
        .map_or_else(|| NONE.get_or_init(Default::default), |r| &r.response);
    let added: Vec<(&str, &str)> = match (site, path) {
        (Some(s), Some(p)) => {
            let mut a = s.proxied_fields(p);
            a.retain(|(n, _)| !policy.names(n.as_bytes()));
            a
        }
        _ => Vec::new(),
    };
    // `Via`, and a `Vary` a compressing site may add.
    let room = added.len() + policy.set.len() + 2;
    // Most mounts remove, set and add nothing: one test per hit, not one per stored field.
    let plain = added.is_empty() && policy.remove.is_empty() && policy.set.is_empty();
    let mut fields = hit.fields(room, |n| {
        !plain
            && (policy.names(n)
                || added
                    .iter()
                    .any(|(a, _)| n.eq_ignore_ascii_case(a.as_bytes())))
    });
    fields.extend(added.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    fields.extend(policy.set.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    fields.push((
        b"Via",
        reply::via(linerate_http1::Version::Http11).as_bytes(),
    ));
    fields
}

/// The store of `site`'s proxy route `route`, where its hits' encoded bodies are counted.
pub(super) fn mount_store(site: &Site, route: usize) -> Option<&Store> {
    let cache = site.proxies.get(route)?.cache.as_deref()?;
    Some(&cache.store)
}

/// Writes `hit` as the answer to request `id` of `conn`; the body bytes sent (0 for HEAD).
/// `coding`: the coding the client's Accept-Encoding chose on a site that compresses, with
/// the site's settings (`None`: compression off for this request).
pub(super) fn send_hit<'h>(
    conn: &mut super::proto::Proto,
    id: u64,
    hit: &'h Hit,
    fields: &mut Vec<(&'h [u8], &'h [u8])>,
    head_request: bool,
    coding: Option<(Encoding, &Compression, Option<&Store>)>,
    cx: &mut Cx,
) -> u64 {
    let body = hit.body();
    if let Some((coding, cfg, store)) = coding {
        match hit.coding_plan(coding, cfg) {
            Plan::AsIs => {}
            // The client takes no coding: as stored, saying that answers vary on it.
            Plan::Vary => {
                if !hit.varies_on_coding() {
                    fields.push((b"Vary", b"Accept-Encoding"));
                }
            }
            plan => {
                return send_coded(conn, id, hit, fields, head_request, (plan, cfg, store), cx);
            }
        }
    }
    send_whole(conn, id, hit, fields, body, head_request, cx)
}

/// The head and `body` as request `id`'s answer: the stored answer's Date kept.
fn send_whole(
    conn: &mut super::proto::Proto,
    id: u64,
    hit: &Hit,
    fields: &[(&[u8], &[u8])],
    body: &[u8],
    head_request: bool,
    cx: &mut Cx,
) -> u64 {
    let head = StreamHead {
        status: hit.status,
        fields,
        // A HEAD answer's Content-Length is GET's (RFC 9110 §8.6: never another number);
        // HEAD is never ranged or coded, so that is the stored body's.
        length: Some(if head_request {
            hit.entry.body.len()
        } else {
            body.len()
        } as u64),
        // A cache does not update the stored Date (RFC 9110 §6.6.1; cache-tests'
        // `other-date-update`): with Age, it tells how old the answer is.
        date: hit.entry.field(b"date"),
    };
    if !conn.start_stream(id, &head, cx) {
        return 0;
    }
    let mut sent = 0;
    if !head_request && !body.is_empty() && conn.stream_data(id, body, cx) {
        sent = body.len() as u64;
    }
    conn.stream_end(id, cx);
    sent
}

/// A hit compressed for the client as a miss would be (`compress_stream`'s plan and field
/// rewrite: `Content-Encoding`, `Vary: Accept-Encoding`, the ETag made weak). The store
/// keeps the upstream's bytes, so every coding is served from one entry; the body is encoded
/// on each hit at the site's level, as nginx's gzip filter does for `proxy_cache` hits.
#[cold]
#[inline(never)]
fn send_coded(
    conn: &mut super::proto::Proto,
    id: u64,
    hit: &Hit,
    fields: &[(&[u8], &[u8])],
    head_request: bool,
    (plan, cfg, store): (Plan, &Compression, Option<&Store>),
    cx: &mut Cx,
) -> u64 {
    let body = hit.body();
    let mut coded = None;
    // The whole stored body: encoded once per entry and coding, kept with the entry.
    let kept = match plan {
        Plan::Encode(c) => hit.encoded(c, cfg, store),
        _ => None,
    };
    let plan = match plan {
        Plan::Encode(_) if kept.is_some() => plan,
        Plan::Encode(c) => match StreamEncoder::new(c, Some(body.len() as u64), cfg) {
            Some(mut e) => {
                let mut bytes = e.push(body).to_vec();
                bytes.extend_from_slice(&e.finish());
                coded = Some(bytes);
                plan
            }
            None => Plan::Vary,
        },
        other => other,
    };
    let rewrite = Rewrite::new(plan, fields);
    let mut out: Vec<(&[u8], &[u8])> = Vec::with_capacity(fields.len() + 3);
    out.extend(fields.iter().copied().filter(|(n, _)| rewrite.keeps(n)));
    if let Some(etag) = &rewrite.etag {
        out.push((b"ETag", etag));
    }
    if let Some(name) = rewrite.encoding {
        out.push((b"Content-Encoding", name.as_bytes()));
    }
    if rewrite.vary {
        out.push((b"Vary", b"Accept-Encoding"));
    }
    let body = kept.or(coded.as_deref()).unwrap_or(body);
    send_whole(conn, id, hit, &out, body, head_request, cx)
}

/// A parked request's question to its mount's second tier, sent with its turn's others.
pub(super) struct TierAsk {
    park: u64,
    mount: Arc<MountCache>,
    key: String,
}

impl<B: Backend> Worker<B> {
    /// Plans a job whose mount caches: the job to send on, or `None` when it was answered
    /// from the store, refused, or parked on another request's flight.
    pub(super) fn cache_before(&mut self, mut job: Box<Job>, sh: &Shared) -> Option<Box<Job>> {
        let mut x = job.cache.take()?;
        let park = self.pools.next_park;
        let inbox = &self.io.app.inbox;
        let before = x.before(&mut job.head, crate::proxy::cache::now(), || Waiter {
            inbox: inbox.clone(),
            park,
        });
        if let Some(m) = job.log.as_mut() {
            // A plan made again (after a wait, or the second tier) says it again.
            m.cache = match before {
                Before::GatewayTimeout => Some(crate::access_log::CacheOutcome::Miss),
                _ => x.outcome(),
            };
        }
        job.cache = Some(x);
        match before {
            Before::Forward => Some(job),
            Before::Wait => {
                self.pools.next_park += 1;
                self.pools.parked.insert(park, job);
                let tick = self.io.cx.now + FLIGHT_TICK_MS;
                self.pools.next_check = self.pools.next_check.min(tick);
                None
            }
            Before::GatewayTimeout => {
                self.refuse(job, 504, sh);
                None
            }
            Before::Tier => {
                // Asked with the turn's other questions ([`Worker::tier_flush`]).
                self.pools.next_park += 1;
                match job.cache.as_ref().and_then(|x| x.tier_question()) {
                    Some((mount, key)) => self.pools.tier_asks.push(TierAsk { park, mount, key }),
                    None => self.io.app.inbox.push_tiered(park, None),
                }
                self.pools.parked.insert(park, job);
                None
            }
            Before::Answer(hit, background) => {
                if let Some(x) = background {
                    let head = x.validation_head(&job.head);
                    let validation = Box::new(job.validation(head, x));
                    self.answer_job(&mut job, hit, sh);
                    self.dispatch(validation, sh);
                } else {
                    self.answer_job(&mut job, hit, sh);
                }
                None
            }
        }
    }

    /// Answers `job`'s client from the store, and logs and counts it. An HTTP/1.1 client
    /// whose hit needs nothing of the streamed path gets it as the content phase's fresh hits
    /// go ([`Fresh`]: the entry's fields rendered once, written whole with the framing; no
    /// streamed head, no field list): a hit found after a flight or the second tier costs
    /// what one found at once does.
    pub(super) fn answer_job(&mut self, job: &mut Job, hit: Hit, sh: &Shared) {
        let sites = self.io.sites.clone();
        let site = sites.sites.iter().nth(job.site);
        let head_request = job.forwarded.head_request;
        let (client, id, status) = (job.client, job.id, hit.status);
        if let Some(m) = job.log.as_mut() {
            m.cache = Some(hit.outcome);
        }
        let (route, coding) = (job.route, job.coding);
        let mut bytes = 0;
        let mut hit = Some(hit);
        if let (Some(s), None) = (site, &job.pipe) {
            self.with(client, sh, |live, p| {
                let super::proto::Proto::H1(conn) = &mut live.conn else {
                    return;
                };
                let Some(vary) = hit.as_ref().and_then(|h| h.fresh_vary(s, route, coding)) else {
                    return;
                };
                let fresh = Fresh::new(hit.take().expect("checked above"), vary);
                let sent = if head_request { 0 } else { fresh.body().len() };
                let resp = crate::Response {
                    body: crate::Body::Cached(crate::response::Cached(Arc::new(fresh))),
                    ..crate::Response::new(status)
                };
                if conn.complete(id, resp, p.cx) {
                    bytes = sent as u64;
                }
            });
        }
        // Another protocol, or a hit the streamed path answers.
        if let Some(hit) = hit {
            bytes = self.send_job_hit(job, &hit, site, sh);
        }
        let us = crate::sys::monotonic_us().saturating_sub(job.started);
        if self.io.app.counters_on {
            self.io
                .app
                .counters
                .answered(status, crate::stats::Kind::Route, us);
            if let Some(s) = self.io.app.site_counters.get(job.site) {
                s.answered(status, bytes);
            }
        }
        if let (Some(log), Some(m), Some(site)) = (self.io.app.log.as_mut(), job.log.as_ref(), site)
        {
            log.push(
                site.log,
                &m.entry(status, bytes as usize, us, &site.server_name, None),
            );
        }
    }

    /// Writes `hit` into `job`'s client connection with the streamed-answer calls (any
    /// protocol, any hit); the body bytes sent.
    fn send_job_hit(&mut self, job: &mut Job, hit: &Hit, site: Option<&Site>, sh: &Shared) -> u64 {
        let mut fields = hit_fields(hit, site, job.route, job.path.as_deref());
        let head_request = job.forwarded.head_request;
        let (client, id) = (job.client, job.id);
        let wake = job.pipe.take().is_some_and(|p| p.close());
        let coding = job
            .coding
            .zip(site)
            .map(|(c, s)| (c, &s.compression, mount_store(s, job.route)));
        let mut bytes = 0;
        self.with(client, sh, |live, p| {
            bytes = send_hit(
                &mut live.conn,
                id,
                hit,
                &mut fields,
                head_request,
                coding,
                p.cx,
            );
            if wake {
                live.conn.body_room(id, p.head, p.cx, &mut p.svc);
            }
        });
        bytes
    }

    /// Sends the second-tier questions this turn collected: one call per mount, so a turn
    /// costs one wake of the tier's thread and (Redis) one pipelined write, not one each
    /// (2.9 system calls a tier hit went to asking one key at a time).
    pub(super) fn tier_flush(&mut self) {
        let mut asks = std::mem::take(&mut self.pools.tier_asks);
        while let Some(first) = asks.first() {
            let mount = Arc::clone(&first.mount);
            let (mut parks, mut keys) = (Vec::new(), Vec::new());
            asks.retain_mut(|a| {
                if !Arc::ptr_eq(&a.mount, &mount) {
                    return true;
                }
                parks.push(a.park);
                keys.push(std::mem::take(&mut a.key));
                false
            });
            // A Redis tier: on the worker's own connection (`tier_link.rs`).
            if let Some(i) = self.link_to(&mount) {
                self.link_ask(i, parks, keys);
                continue;
            }
            let inbox = self.io.app.inbox.clone();
            match &mount.tier {
                Some(t) => t.fetch_many(keys, move |values| {
                    inbox.push_tiered_many(parks.into_iter().zip(values));
                }),
                None => inbox.push_tiered_many(parks.into_iter().map(|p| (p, None))),
            }
        }
        // Its allocation kept for the next turn's questions.
        self.pools.tier_asks = asks;
    }

    /// Requests parked on flights that landed (or expired): each looks in the store again
    /// and, missing, goes up alone.
    pub(super) fn cache_landed(&mut self, sh: &Shared) {
        if self.pools.parked.is_empty() {
            return;
        }
        let mut landed = Vec::new();
        self.io.app.inbox.take_landed(&mut landed);
        for park in landed {
            if let Some(mut job) = self.pools.parked.remove(&park) {
                if let Some(x) = job.cache.as_mut() {
                    x.woken();
                }
                self.dispatch(job, sh);
            }
        }
        let mut tiered = Vec::new();
        self.io.app.inbox.take_tiered(&mut tiered);
        for (park, stored) in tiered {
            self.tier_answered(park, stored, sh);
        }
    }

    /// The second tier's answer for the request parked as `park`: it plans again with it.
    pub(super) fn tier_answered(&mut self, park: u64, stored: Option<Vec<u8>>, sh: &Shared) {
        if let Some(mut job) = self.pools.parked.remove(&park) {
            if let Some(x) = job.cache.as_mut() {
                x.tier_answer(stored);
            }
            self.dispatch(job, sh);
        }
    }

    /// With requests parked: releases the waiters of flights past their deadline (their
    /// leader's answer is late), and comes back in a while. The mounts looked at are the
    /// parked requests' own (each holds its mount): a mount a reload replaced still has its
    /// flights, and every waiter of any worker is parked on one that looks.
    pub(super) fn expire_flights(&mut self) -> u64 {
        if self.pools.parked.is_empty() {
            return u64::MAX;
        }
        let now = crate::proxy::cache::now();
        let mut seen: Vec<*const crate::proxy::cache::MountCache> = Vec::new();
        for job in self.pools.parked.values() {
            let Some(x) = job.cache.as_ref() else {
                continue;
            };
            let mount = std::sync::Arc::as_ptr(&x.mount);
            if !seen.contains(&mount) {
                seen.push(mount);
                x.mount.expire(now);
            }
        }
        self.io.cx.now + FLIGHT_TICK_MS
    }
}
