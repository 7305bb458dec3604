//! The proxy cache's shared second tier: a Redis/Valkey or memcached that every
//! linerate edge pointed at it shares, behind each edge's memory store. A memory miss asks it
//! before going upstream (the key's flight leader only, so one question per key); an answer
//! stored in memory is also stored there. A purge of a URL deletes that URL's entry (every
//! variant: the tier keeps one per URL) and announces it in a purge log kept in the tier,
//! which every edge reads each second and applies to its memory store; a purge by prefix
//! (the tier cannot list keys) moves a generation instead, and every edge empties its memory
//! when it sees it move. An unsafe method's answer that invalidates keys (RFC 9111 §4.4)
//! deletes them here too.
//!
//! A purge or an invalidation the tier did not take (down, or slower than its timeout) is
//! kept, pending, and applied when the tier answers again, before any tier answer for its
//! key is used (at most [`MAX_PENDING_PURGES`] keys; past that, the generation moves when the
//! tier is back). An answer from the tier fills memory only when nothing was invalidated or
//! purged on this edge between its question and its answer, nothing is being (the fence),
//! and nothing is pending for its key: a question sent before a delete or a purge reached the
//! tier may bring back what it removed.
//!
//! Owns the stored form of an entry (versioned, bounds-checked on the way in), the tier
//! keys and the purge log. The calls are linerate-kv's (a timeout on each; a tier that is
//! down is a miss, logged once per outage); results come back through the caller's callback
//! on the tier's thread.
#![forbid(unsafe_code)]

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use linerate_cache::entry::Entry;
use linerate_cache::fields::OwnedField;
use linerate_cache::key::{Key, Variant, Vary};
use linerate_cache::{Shared, Time, Timing};
use linerate_kv::{Tier, TierConfig};

/// The namespace of every key this cache writes (its generation counter included).
const NAMESPACE: &str = "linerate-http";
/// How often an edge reads the generation (the most a purge elsewhere takes to reach it).
const GENERATION_EVERY: Duration = Duration::from_secs(1);
/// The longest key sent: memcached takes at most 250 bytes. A URL longer than this once
/// encoded is kept in memory only.
const MAX_TIER_KEY: usize = 250;
/// How long an answer with a validator stays in the tier past its freshness (and stale
/// grants), so that another edge can still validate it rather than fetch it whole.
const KEEP_FOR_VALIDATION: u64 = 3600;
/// The longest an answer is kept in the tier.
const MAX_TTL: u64 = 7 * 24 * 3600;
/// The stored form's version.
const MAGIC: &[u8; 4] = b"LRC1";
/// The purge log's counter: the number of the last URL purge announced (`NAMESPACE:purges`);
/// each one's URL is at `NAMESPACE:purge:N`.
const PURGES: &str = "purges";
/// How long a purge's record stays in the log: every edge reads the log each second, and one
/// that missed a record (it was cut off longer than this, or the tier evicted it) empties its
/// memory store instead.
const PURGE_RECORD_TTL: Duration = Duration::from_secs(600);
/// The most records an edge reads in one look at the log; further behind, it empties its
/// memory store instead.
const MAX_LOG_READ: u64 = 256;
/// The most keys whose purge or invalidation waits for the tier to be back. Past it they are
/// forgotten and the generation moves instead when it is back: every edge then forgets every
/// answer, as a purge by prefix does (more than was asked, never less).
pub(crate) const MAX_PENDING_PURGES: usize = 1024;

/// One mount's second tier.
pub(crate) struct SharedTier {
    tier: Tier,
    /// The generation read last (0: not read yet; the tier is then left alone).
    generation: Arc<AtomicU64>,
    /// The fence: moved when an invalidation or a purge starts and when it is done (`busy`
    /// counts those under way); see [`SharedTier::usable`].
    fence: Arc<Fence>,
    /// Purges and invalidations the tier has not taken yet.
    pending: Arc<Pending>,
    /// The tag purges this edge made or read in the log.
    tags: Arc<TagPurges>,
}

/// What a purge is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Purge {
    /// One URL's answers, every variant.
    Key(Key),
    /// Every answer (a purge by prefix: the tier cannot list its keys).
    All,
    /// Every answer tagged so (`Surrogate-Key`, `Cache-Tag`): announced in
    /// the purge log; no tier key is deleted (the tier cannot list a tag's keys): every edge
    /// refuses a tier entry with the tag stored before it learned of the purge
    /// ([`SharedTier::tag_purged`]).
    Tag(Box<[u8]>),
    /// A soft purge of one URL's answers (every variant): the tier's entry deleted (it
    /// cannot rewrite it), and announced so that every edge makes its own stale.
    SoftKey(Key),
    /// A soft purge of a tag: announced; every edge makes its tagged answers stale, and the
    /// tier's are refused as a tag purge's are.
    SoftTag(Box<[u8]>),
}

impl Purge {
    /// A tag's purge as the pending set keeps it: under its log record's bytes as a key
    /// (no URL's key starts so: [`Purge::of_record`] reads it back).
    /// A soft one is kept as the hard one it would be (more than asked, never less).
    fn as_pending(&self) -> Option<Purge> {
        match self {
            Purge::Tag(tag) | Purge::SoftTag(tag) => {
                Some(Purge::Key(Key::from_bytes(&[TAG_RECORD, tag].concat())))
            }
            Purge::SoftKey(key) => Some(Purge::Key(key.clone())),
            _ => None,
        }
    }

    /// The purge a pending key or a log record's bytes name.
    fn of_record(bytes: &[u8]) -> Purge {
        if let Some(tag) = bytes.strip_prefix(TAG_RECORD) {
            Purge::Tag(tag.into())
        } else if let Some(tag) = bytes.strip_prefix(SOFT_TAG_RECORD) {
            Purge::SoftTag(tag.into())
        } else if let Some(key) = bytes.strip_prefix(SOFT_RECORD) {
            Purge::SoftKey(Key::from_bytes(key))
        } else {
            Purge::Key(Key::from_bytes(bytes))
        }
    }
}

/// What an edge forgets from its memory, as the watch learns it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Forget<'a> {
    /// One key's answers (a URL purged on some edge).
    Key(&'a Key),
    /// Every answer tagged so.
    Tag(&'a [u8]),
    /// Everything: the generation moved, or the log could not be followed.
    All,
    /// One key's answers made stale (a soft purge).
    SoftKey(&'a Key),
    /// Every answer tagged so made stale (a soft purge).
    SoftTag(&'a [u8]),
}

/// A purge-log record's first bytes when it names a tag, not a key (a key starts with its
/// scheme).
const TAG_RECORD: &[u8] = b"\0tag:";
/// A soft purge's record: the key's bytes after it.
const SOFT_RECORD: &[u8] = b"\0soft:";
/// A soft tag purge's record: the tag after it.
const SOFT_TAG_RECORD: &[u8] = b"\0softtag:";

/// The most tag purges an edge remembers, to refuse the tier's entries they purged; past
/// it the oldest is forgotten (its entries could come back from the tier). Tier entries
/// live at most [`MAX_TTL`].
const MAX_TAG_PURGES: usize = 4096;

/// The tags purged lately, each with the time (s) this edge learned of it, oldest first.
#[derive(Default)]
struct TagPurges {
    /// How many are held: read without the lock on each tier answer.
    count: AtomicUsize,
    list: Mutex<std::collections::VecDeque<(Box<[u8]>, u64)>>,
}

impl TagPurges {
    fn add(&self, tag: &[u8], now: u64) {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(t, _)| &t[..] != tag);
        if list.len() >= MAX_TAG_PURGES {
            tracing::warn!(
                tags = MAX_TAG_PURGES,
                "cache tier: too many tag purges remembered; the oldest is forgotten"
            );
            list.pop_front();
        }
        list.push_back((tag.into(), now));
        self.count.store(list.len(), Ordering::Release);
    }

    /// Whether `entry` carries a tag purged at or after it was stored (its response time).
    fn purged(&self, entry: &Entry) -> bool {
        if self.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        linerate_cache::tags::tags(&entry.fields).any(|t| {
            list.iter()
                .any(|(p, at)| &p[..] == t && entry.timing.response_time.0 <= *at)
        })
    }
}

/// Purges and invalidations the tier did not take (it was down or slow), kept to be applied
/// when it answers again; until then, a tier answer for one of their keys is a miss.
#[derive(Default)]
struct Pending {
    /// Keys pending, plus one when everything is: read without the lock on each tier answer.
    count: AtomicUsize,
    set: Mutex<PendingSet>,
}

#[derive(Default)]
struct PendingSet {
    /// Each key, whether its purge is announced to the other edges (a purge is; an
    /// invalidation, which RFC 9111 §4.4 asks of this cache only, is not), and the number of
    /// the last `add` of it.
    keys: Vec<(Key, bool, u64)>,
    /// Everything: a purge by prefix, or more than [`MAX_PENDING_PURGES`] keys.
    all: bool,
    /// The number of the last `add` that made or kept `all`.
    all_at: u64,
    /// Numbers each `add`, so that `done` forgets only what it applied: a purge of the same
    /// key that failed while the earlier one was being applied stays.
    adds: u64,
}

/// What was pending when it was looked at: each key with its announcement and `add` number,
/// and everything's number when everything is.
type Snapshot = (Vec<(Key, bool, u64)>, Option<u64>);

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, PendingSet> {
        self.set.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn recount(&self, set: &PendingSet) {
        self.count
            .store(set.keys.len() + usize::from(set.all), Ordering::Release);
    }

    /// Keeps `what` until the tier takes it.
    fn add(&self, what: &Purge, announce: bool) {
        let marked = what.as_pending();
        let what = marked.as_ref().unwrap_or(what);
        let mut set = self.lock();
        set.adds += 1;
        let n = set.adds;
        match what {
            _ if set.all => set.all_at = n,
            Purge::All => {
                set.all = true;
                set.all_at = n;
                set.keys = Vec::new();
            }
            Purge::Key(key) => match set.keys.iter().position(|(k, ..)| k == key) {
                Some(at) => {
                    set.keys[at].1 |= announce;
                    set.keys[at].2 = n;
                }
                None if set.keys.len() >= MAX_PENDING_PURGES => {
                    tracing::warn!(
                        keys = MAX_PENDING_PURGES,
                        "cache tier: too many purges pending; every answer will be purged when it is back"
                    );
                    set.all = true;
                    set.all_at = n;
                    set.keys = Vec::new();
                }
                None => set.keys.push((key.clone(), announce, n)),
            },
            Purge::Tag(_) | Purge::SoftTag(_) | Purge::SoftKey(_) => {
                unreachable!("kept as its record's key (`as_pending`)")
            }
        }
        self.recount(&set);
    }

    /// The tier took `what`, as it was pending at `add` number `at`: it is no longer pending,
    /// unless it was kept again since (a later `add` of it, or of everything).
    fn done(&self, what: &Purge, at: u64) {
        let marked = what.as_pending();
        let what = marked.as_ref().unwrap_or(what);
        let mut set = self.lock();
        match what {
            Purge::All => {
                if set.all_at == at {
                    set.all = false;
                }
            }
            Purge::Key(key) => set.keys.retain(|(k, _, n)| k != key || *n != at),
            Purge::Tag(_) | Purge::SoftTag(_) | Purge::SoftKey(_) => {
                unreachable!("kept as its record's key (`as_pending`)")
            }
        }
        self.recount(&set);
    }

    /// Whether a tier answer for `key` must not be used: a purge of it (or of everything)
    /// has not reached the tier.
    fn blocks(&self, key: &Key) -> bool {
        if self.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let set = self.lock();
        set.all || set.keys.iter().any(|(k, ..)| k == key)
    }

    /// What is pending now, to apply.
    fn snapshot(&self) -> Snapshot {
        let set = self.lock();
        (set.keys.clone(), set.all.then_some(set.all_at))
    }

    /// Keeps what `other` holds too (a reload's new mount takes over the old one's).
    fn adopt(&self, other: &Pending) {
        let (keys, all) = other.snapshot();
        if all.is_some() {
            self.add(&Purge::All, true);
        }
        for (key, announce, _) in keys {
            self.add(&Purge::Key(key), announce);
        }
    }
}

/// See [`SharedTier::fence`].
#[derive(Default)]
struct Fence {
    moved: AtomicU64,
    busy: AtomicU64,
}

impl Fence {
    fn start(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.moved.fetch_add(1, Ordering::AcqRel);
    }

    fn done(&self) {
        self.moved.fetch_add(1, Ordering::AcqRel);
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for SharedTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedTier({:?})", self.tier)
    }
}

impl SharedTier {
    /// Starts the tier's client for `url` (it connects on first use).
    pub(crate) fn start(url: &str, timeout: Duration) -> std::io::Result<SharedTier> {
        let mut config = TierConfig::parse(url)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        config.timeout = timeout;
        Ok(SharedTier {
            tier: Tier::start(config)?,
            generation: Arc::new(AtomicU64::new(0)),
            fence: Arc::default(),
            pending: Arc::default(),
            tags: Arc::default(),
        })
    }

    /// The tier's URL, for people (a purge's answer names the tier it did not reach).
    pub(crate) fn name(&self) -> String {
        self.tier.endpoint().to_string()
    }

    /// Keeps the purges `old` (the tier of the mount a reload replaced, at the same URL) had
    /// not got to the tier yet: they were answered 202, and the old mount's watch ends with
    /// it.
    pub(crate) fn adopt_pending(&self, old: &SharedTier) {
        self.pending.adopt(&old.pending);
    }

    /// The fence now: taken when a question is asked, for [`SharedTier::usable`].
    pub(crate) fn fence(&self) -> u64 {
        self.fence.moved.load(Ordering::Acquire)
    }

    /// Whether an answer for `key` to a question asked at fence `asked` may fill memory: no
    /// invalidation or purge started since, none is under way, and none of `key` (or of
    /// everything) is pending.
    pub(crate) fn usable(&self, asked: u64, key: &Key) -> bool {
        self.fence.busy.load(Ordering::Acquire) == 0
            && self.fence() == asked
            && !self.pending.blocks(key)
    }

    /// Whether `entry`, from the tier, carries a tag purged (on any edge, as this one
    /// learned) at or after it was stored: then it is a miss, never put in memory.
    pub(crate) fn tag_purged(&self, entry: &Entry) -> bool {
        self.tags.purged(entry)
    }

    /// Deletes `keys` (an unsafe method's answer invalidated them in memory, §4.4) from the
    /// tier's current generation; answers asked meanwhile are not used. A delete the tier
    /// does not take is kept and done when it is back.
    pub(crate) fn invalidate(&self, keys: &[Key]) {
        if keys.is_empty() {
            return;
        }
        let keys = keys.to_vec();
        let (t, g, fence, pending) = self.parts();
        fence.start();
        self.tier.spawn(async move {
            for key in keys {
                let what = Purge::Key(key);
                if !apply(&t, &g, &what, false).await {
                    pending.add(&what, false);
                }
            }
            fence.done();
        });
    }

    /// Purges each of `what` from the tier, and through its purge log (a URL) or its
    /// generation (everything) from every edge's memory; whether the tier took all of it.
    /// Waits for the tier (each call within its timeout): the admin listener's thread calls
    /// it and answers with the outcome. One the tier did not take is kept, pending, and done
    /// when it is back; until then the tier's answers for it are not used.
    pub(crate) fn purge_many(&self, what: Vec<Purge>) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        let kept = what.clone();
        // At most four calls each (the generation, a delete, the log's counter and record),
        // each bounded by the tier's timeout; the margin is for the tier's thread.
        let calls = u32::try_from(4 * what.len()).unwrap_or(u32::MAX);
        let wait = self.tier.timeout().saturating_mul(calls) + Duration::from_secs(1);
        self.purge_then(
            what,
            || (),
            move |(), took| {
                let _ = tx.send(took);
            },
        );
        match rx.recv_timeout(wait) {
            Ok(took) => took,
            // Still under way, under the fence: kept now too (a second add is the same one).
            Err(_) => {
                for w in &kept {
                    self.pending.add(w, true);
                }
                false
            }
        }
    }

    /// [`SharedTier::purge_many`] without waiting (a worker's `PURGE`): `now` runs at once,
    /// under the fence (the caller empties its memory there: an answer asked before cannot
    /// fill it again), and `done` gets what it gave and whether the tier took all of
    /// `what`, on the tier's thread. What the tier did not take is pending.
    pub(crate) fn purge_then<T: Send + 'static>(
        &self,
        what: Vec<Purge>,
        now: impl FnOnce() -> T,
        done: impl FnOnce(T, bool) + Send + 'static,
    ) {
        let (t, g, fence, pending) = self.parts();
        fence.start();
        for w in &what {
            if let Purge::Tag(tag) | Purge::SoftTag(tag) = w {
                self.tags.add(tag, super::cache::now().0);
            }
        }
        let here = now();
        self.tier.spawn(async move {
            let mut all = true;
            for w in what {
                // Kept before the fence is done: no answer asked after it finds it not
                // pending.
                if !apply(&t, &g, &w, true).await {
                    pending.add(&w, true);
                    all = false;
                }
            }
            done(here, all);
            fence.done();
        });
    }

    /// Clones of what a task on the tier's thread works with.
    fn parts(&self) -> (Tier, Arc<AtomicU64>, Arc<Fence>, Arc<Pending>) {
        (
            self.tier.clone(),
            self.generation.clone(),
            self.fence.clone(),
            self.pending.clone(),
        )
    }

    /// Reads the generation and the purge log now and every [`GENERATION_EVERY`], and
    /// applies what is pending whenever the tier answers. `forget` is called on the tier's
    /// thread: with `None` when the generation moved after the first read (a purge by prefix
    /// on some edge) or the log cannot be followed (records lost, too far behind), with a
    /// key for each URL purged on any edge. The watch ends when `alive` can no longer be
    /// upgraded (the mount was replaced by a reload), so it is started once `alive` is made.
    pub(crate) fn watch<T: Send + Sync + 'static>(
        &self,
        alive: Weak<T>,
        forget: impl Fn(&T, Forget<'_>) + Send + Sync + 'static,
    ) {
        let (t, g, fence, pending) = self.parts();
        let tags = self.tags.clone();
        self.tier.spawn(async move {
            let key = format!("{NAMESPACE}:generation");
            let log = format!("{NAMESPACE}:{PURGES}");
            let mut seen = 0;
            loop {
                let Some(owner) = alive.upgrade() else {
                    return;
                };
                if let Some(now) = t.generation(&key).await {
                    // Counters only grow: a read older than a move this edge made meanwhile
                    // (`apply`) must not take the generation back.
                    let before = g.fetch_max(now, Ordering::Relaxed);
                    if before != 0 && now > before {
                        // Under the fence: an answer of the old generation asked before the
                        // flush must not fill memory after it.
                        fence.start();
                        forget(&owner, Forget::All);
                        fence.done();
                    }
                    // The tier answers: what waited for it goes first.
                    apply_pending(&t, &g, &fence, &pending).await;
                    if let Some(last) = t.generation(&log).await {
                        // Under the fence only when there is something to forget: moved on
                        // every look, it would make a second's worth of answers misses.
                        if seen != 0 && last != seen {
                            fence.start();
                            follow_log(&t, seen, last, |f| {
                                // A tag's purge is remembered first: the tier's entries it
                                // purged are refused from now on (`tag_purged`).
                                if let Forget::Tag(tag) | Forget::SoftTag(tag) = f {
                                    tags.add(tag, super::cache::now().0);
                                }
                                forget(&owner, f)
                            })
                            .await;
                            fence.done();
                        }
                        seen = last;
                    }
                }
                drop(owner);
                tokio::time::sleep(GENERATION_EVERY).await;
            }
        });
    }

    /// The tier key of `key` in the current generation, if there is one and it fits.
    pub(crate) fn tier_key(&self, key: &Key) -> Option<String> {
        match self.generation.load(Ordering::Relaxed) {
            0 => None,
            generation => tier_key(generation, key.as_bytes()),
        }
    }

    /// Asks the tier for every one of `keys` (from [`SharedTier::tier_key`]) in one call;
    /// `done` gets their stored bytes (or misses) in order, on the tier's thread.
    pub(crate) fn fetch_many(
        &self,
        keys: Vec<String>,
        done: impl FnOnce(Vec<Option<Vec<u8>>>) + Send + 'static,
    ) {
        self.tier.get_many_then(keys, done);
    }

    /// Stores `entry` (answered to a request whose fields are `request_fields`) for as long
    /// as it may serve or be validated.
    pub(crate) fn put(
        &self,
        entry: &Entry,
        request_fields: &[(&[u8], &[u8])],
        opts: &linerate_cache::Options,
    ) {
        let Some(k) = self.tier_key(&entry.key) else {
            return;
        };
        let lifetime =
            linerate_cache::freshness::lifetime(&entry.facts, entry.timing.response_time, opts);
        let cc = &entry.facts.cc;
        let grace = [cc.stale_while_revalidate, cc.stale_if_error]
            .iter()
            .filter_map(|d| match d {
                linerate_cache::cache_control::Delta::Secs(s) => Some(u64::from(*s)),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let keep = if entry.facts.has_validator() {
            KEEP_FOR_VALIDATION
        } else {
            0
        };
        let age = linerate_cache::freshness::current_age(
            &entry.facts,
            entry.timing,
            entry.timing.response_time,
        );
        let ttl = (lifetime + grace + keep).saturating_sub(age).min(MAX_TTL);
        if ttl == 0 {
            return;
        }
        let value = encode(entry, request_fields);
        let t = self.tier.clone();
        self.tier.spawn(async move {
            t.set(&k, &value, Duration::from_secs(ttl)).await;
        });
    }

    /// The tier's counters, as /metrics shows them.
    pub(crate) fn counts(&self) -> crate::stats::TierCounts {
        let c = self.tier.counters();
        crate::stats::TierCounts {
            hits: c.hits,
            misses: c.absent,
            skipped: c.skipped,
            errors: c.errors + c.timeouts,
            timeouts: c.timeouts,
            outages: c.outages,
            stored: c.sets,
        }
    }

    /// Where a worker connects to ask this tier itself, and the link's state for a new
    /// connection (`driver/tier_link.rs`): a Redis tier whose host is an IP address or
    /// `localhost`. `None` for memcached, and for a host name, which would be looked up in
    /// the worker's loop (it blocks): those are asked on the tier's thread.
    pub(crate) fn link(&self) -> Option<(std::net::SocketAddr, Link)> {
        let spec = self.tier.link_spec()?;
        let ip: std::net::IpAddr = if spec.host.eq_ignore_ascii_case("localhost") {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            spec.host.trim_matches(['[', ']']).parse().ok()?
        };
        Some((
            std::net::SocketAddr::new(ip, spec.port),
            Link::new(&spec.greeting, spec.replies),
        ))
    }

    /// Whether a worker's ask for `keys` keys may go now (see [`Tier::admit`]).
    pub(crate) fn admit(&self, keys: usize) -> bool {
        self.tier.admit(keys)
    }

    /// The longest a worker's ask may wait for its answer (ms, rounded up).
    pub(crate) fn timeout_ms(&self) -> u64 {
        self.tier.timeout().as_micros().div_ceil(1000) as u64
    }

    /// A worker's ask's outcome (`Err`: why it failed; `timed_out`: its deadline passed),
    /// counted and reported as the tier's own calls are; `keys` values (or misses) back.
    pub(crate) fn settle(
        &self,
        outcome: Result<Vec<Option<Vec<u8>>>, Broken>,
        timed_out: bool,
        keys: usize,
    ) -> Vec<Option<Vec<u8>>> {
        self.tier.settle(outcome, timed_out, keys)
    }
}

/// Does `what` in the tier; whether it took all of it. A URL: its entry deleted from the
/// current generation (read first where it was not yet), then, when `announce`, its record
/// added to the purge log for the other edges. Everything: the generation moved on.
async fn apply(t: &Tier, g: &AtomicU64, what: &Purge, announce: bool) -> bool {
    let generation_key = format!("{NAMESPACE}:generation");
    match what {
        Purge::All => match t.bump_generation(&generation_key).await {
            Some(now) => {
                g.store(now, Ordering::Relaxed);
                true
            }
            None => false,
        },
        Purge::Key(key) | Purge::SoftKey(key) => {
            // The tier's generation now, and the one this edge reads under until its watch
            // sees a move made elsewhere: the key is deleted under both (a
            // delete under this edge's alone once left the entry another edge stored after a
            // purge by prefix).
            let Some(now) = t.generation(&generation_key).await else {
                return false;
            };
            let known = g.load(Ordering::Relaxed);
            let behind = (known != 0 && known != now).then_some(known);
            for generation in std::iter::once(now).chain(behind) {
                // A key too long for the tier was never stored there: nothing to delete.
                if let Some(name) = tier_key(generation, key.as_bytes())
                    && !t.delete(&name).await
                {
                    return false;
                }
            }
            let record = match what {
                Purge::SoftKey(_) => [SOFT_RECORD, key.as_bytes()].concat(),
                _ => key.as_bytes().to_vec(),
            };
            !announce || announce_purge(t, &record).await
        }
        Purge::Tag(tag) => announce_purge(t, &[TAG_RECORD, tag].concat()).await,
        Purge::SoftTag(tag) => announce_purge(t, &[SOFT_TAG_RECORD, tag].concat()).await,
    }
}

/// Adds a purge to the log: the counter moved on, and the record (a key's bytes, or a tag
/// after [`TAG_RECORD`]) under its number.
async fn announce_purge(t: &Tier, record: &[u8]) -> bool {
    let Some(n) = t.bump_generation(&format!("{NAMESPACE}:{PURGES}")).await else {
        return false;
    };
    let name = format!("{NAMESPACE}:purge:{n}");
    t.set(&name, record, PURGE_RECORD_TTL).await
}

/// Applies what is pending, each under the fence; what the tier takes is no longer pending.
async fn apply_pending(t: &Tier, g: &AtomicU64, fence: &Fence, pending: &Pending) {
    if pending.count.load(Ordering::Acquire) == 0 {
        return;
    }
    let (keys, all) = pending.snapshot();
    fence.start();
    if let Some(at) = all {
        if apply(t, g, &Purge::All, true).await {
            pending.done(&Purge::All, at);
            tracing::info!("cache tier: a pending purge of every answer was done");
        }
    } else {
        for (key, announce, at) in keys {
            let what = Purge::of_record(key.as_bytes());
            if !apply(t, g, &what, announce).await {
                break;
            }
            pending.done(&what, at);
        }
    }
    fence.done();
}

/// Reads the purge log's records after `seen` up to `last` (the counter now; `seen` is the
/// one read before, not 0) and calls `forget` with each URL's key or tag; with everything
/// when a record is missing, the log went back, or it is more than [`MAX_LOG_READ`] ahead.
async fn follow_log(t: &Tier, seen: u64, last: u64, mut forget: impl FnMut(Forget<'_>)) {
    if last < seen || last - seen > MAX_LOG_READ {
        return forget(Forget::All);
    }
    for n in seen + 1..=last {
        match t.get(&format!("{NAMESPACE}:purge:{n}")).await {
            Some((_, record)) => match Purge::of_record(&record) {
                Purge::Tag(tag) => forget(Forget::Tag(&tag)),
                Purge::Key(key) => forget(Forget::Key(&key)),
                Purge::All => forget(Forget::All),
                Purge::SoftKey(key) => forget(Forget::SoftKey(&key)),
                Purge::SoftTag(tag) => forget(Forget::SoftTag(&tag)),
            },
            None => return forget(Forget::All),
        }
    }
}

/// A worker's connection to a Redis tier, sans I/O, and why one broke (linerate-kv's).
pub(crate) use linerate_kv::link::{Broken, Link};

/// `NAMESPACE:GENERATION:KEY`, the key's spaces, controls, non-ASCII bytes and `%` written
/// `%XX` (memcached takes none of them); `None` past [`MAX_TIER_KEY`]. By hand, not with
/// `format!`: this runs on every memory miss (2,500 instructions a key with `fmt`, callgrind).
fn tier_key(generation: u64, key: &[u8]) -> Option<String> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut k = Vec::with_capacity(NAMESPACE.len() + 22 + key.len());
    k.extend_from_slice(NAMESPACE.as_bytes());
    k.push(b':');
    k.extend_from_slice(itoa::Buffer::new().format(generation).as_bytes());
    k.push(b':');
    // Runs of bytes kept as they are go in whole (a key rarely has any byte to escape).
    let mut rest = key;
    while let Some(at) = rest.iter().position(|b| ESCAPED[usize::from(*b)]) {
        k.extend_from_slice(&rest[..at]);
        let b = rest[at];
        k.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        rest = &rest[at + 1..];
        if k.len() > MAX_TIER_KEY {
            return None;
        }
    }
    k.extend_from_slice(rest);
    if k.len() > MAX_TIER_KEY {
        return None;
    }
    // Printable ASCII only: every other byte was escaped.
    Some(String::from_utf8(k).expect("printable ASCII"))
}

/// The bytes a tier key writes `%XX`: spaces, controls, non-ASCII bytes and `%` itself.
/// A table, one load a byte (three compares a byte cost ~150 instructions a key, callgrind).
static ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b <= b' ' as usize || b >= 0x7f || b == b'%' as usize;
        b += 1;
    }
    t
};

/// The stored form: the key (checked on the way back), the status, the timing, the request
/// fields the answer's `Vary` names (its secondary key), the answer's fields and its body.
pub(crate) fn encode(entry: &Entry, request_fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let vary_names: Vec<Box<[u8]>> = match Vary::parse(&entry.fields) {
        Vary::Fields(names) => names,
        _ => Vec::new(),
    };
    let selecting: Vec<&(&[u8], &[u8])> = request_fields
        .iter()
        .filter(|(n, _)| vary_names.iter().any(|v| n.eq_ignore_ascii_case(v)))
        .collect();
    let mut out = Vec::with_capacity(64 + entry.size());
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, entry.key.as_bytes());
    out.extend_from_slice(&entry.status.to_be_bytes());
    out.extend_from_slice(&entry.timing.request_time.0.to_be_bytes());
    out.extend_from_slice(&entry.timing.response_time.0.to_be_bytes());
    out.extend_from_slice(&(selecting.len() as u32).to_be_bytes());
    for (n, v) in selecting {
        put_bytes(&mut out, n);
        put_bytes(&mut out, v);
    }
    out.extend_from_slice(&(entry.fields.len() as u32).to_be_bytes());
    for (n, v) in &entry.fields {
        put_bytes(&mut out, n);
        put_bytes(&mut out, v);
    }
    put_bytes(&mut out, &entry.body);
    out
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

/// Reads bytes [`encode`] wrote, back into an entry for `key`; `None` for anything else
/// (another version, another key, a cut or malformed value). The entry's fields and body
/// are ranges of `stored` itself, kept as one block ([`Shared`]): nothing is copied.
pub(crate) fn decode(stored: Vec<u8>, key: &Key) -> Option<Entry> {
    let mut r = Reader {
        bytes: &stored,
        at: 0,
    };
    if r.take(4)? != MAGIC || r.bytes()? != key.as_bytes() {
        return None;
    }
    let status = u16::from_be_bytes(r.take(2)?.try_into().ok()?);
    let request_time = Time(r.u64()?);
    let response_time = Time(r.u64()?);
    let n = r.u32()? as usize;
    let mut selecting = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        selecting.push((r.span()?, r.span()?));
    }
    let n = r.u32()? as usize;
    let mut spans = Vec::with_capacity(n.min(256));
    for _ in 0..n {
        spans.push((r.span()?, r.span()?));
    }
    let body = r.span()?;
    if r.at != stored.len() {
        return None;
    }
    let block = Shared::new(stored);
    let fields: Vec<OwnedField> = spans
        .into_iter()
        .map(|(n, v)| (block.slice(n), block.slice(v)))
        .collect();
    let selecting: Vec<(&[u8], &[u8])> = selecting
        .into_iter()
        .map(|(n, v)| (&block[n], &block[v]))
        .collect();
    let variant = Variant::of(&Vary::parse(&fields), &selecting);
    // The fields were an entry's, so already as stored (`encode` writes `entry.fields`):
    // they are not filtered again. The tier is trusted as the memory store is: what it
    // holds is what some edge's `encode` wrote (and the key and version are checked above).
    Some(Entry::from_stored(
        key.clone(),
        variant,
        status,
        fields,
        block.slice(body),
        Timing {
            request_time,
            response_time,
        },
    ))
}

/// A cursor over a stored value.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let span = self.skip(n)?;
        Some(&self.bytes[span])
    }

    /// The next `n` bytes' range, read past.
    fn skip(&mut self, n: usize) -> Option<Range<usize>> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len())?;
        let span = self.at..end;
        self.at = end;
        Some(span)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A length-prefixed string's range.
    fn span(&mut self) -> Option<Range<usize>> {
        let n = self.u32()? as usize;
        self.skip(n)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let span = self.span()?;
        Some(&self.bytes[span])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_cache::Response;

    #[test]
    fn answers_asked_before_an_invalidation_or_a_purge_is_done_are_not_used() {
        // A tier nothing listens on: each call fails after its timeout, and the fence is done.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", dead.local_addr().unwrap());
        drop(dead);
        let t = SharedTier::start(&url, Duration::from_millis(50)).unwrap();
        let key = Key::new(b"http", b"t", b"/x").unwrap();
        let other = Key::new(b"http", b"t", b"/y").unwrap();
        let done = |t: &SharedTier| {
            (0..400).any(|_| {
                std::thread::sleep(Duration::from_millis(10));
                t.fence.busy.load(Ordering::Acquire) == 0
            })
        };
        let asked = t.fence();
        assert!(t.usable(asked, &key));
        // A purge the tier did not take says so, and stays pending: its key's
        // answers are not used until it is done there; other keys' are.
        assert!(
            !t.purge_many(vec![Purge::Key(key.clone())]),
            "the tier was not reached"
        );
        assert!(done(&t), "the purge ends, even with the tier down");
        assert!(!t.usable(asked, &other), "asked before the purge began");
        let after_purge = t.fence();
        assert!(!t.usable(after_purge, &key), "pending: not used");
        assert!(t.usable(after_purge, &other));
        // An invalidation the tier does not take is pending too.
        t.invalidate(std::slice::from_ref(&other));
        assert!(
            !t.usable(after_purge, &other),
            "asked before the delete began"
        );
        assert!(done(&t));
        assert!(!t.usable(t.fence(), &other), "pending: not used");
        // A purge of everything: no answer is used until it is done.
        let third = Key::new(b"http", b"t", b"/z").unwrap();
        assert!(t.usable(t.fence(), &third));
        assert!(!t.purge_many(vec![Purge::All]));
        assert!(done(&t));
        assert!(!t.usable(t.fence(), &third));
    }

    #[test]
    fn pending_purges_are_bounded_and_past_the_bound_purge_everything() {
        let p = Pending::default();
        let key = |i: usize| Key::new(b"http", b"t", format!("/{i}").as_bytes()).unwrap();
        for i in 0..MAX_PENDING_PURGES {
            p.add(&Purge::Key(key(i)), i % 2 == 0);
        }
        // The same key again is one entry, and an announced purge stays announced.
        p.add(&Purge::Key(key(0)), false);
        p.add(&Purge::Key(key(1)), true);
        let (keys, all) = p.snapshot();
        assert_eq!((keys.len(), all), (MAX_PENDING_PURGES, None));
        assert!(keys[0].1 && keys[1].1 && !keys[3].1);
        assert!(p.blocks(&key(5)) && !p.blocks(&key(MAX_PENDING_PURGES)));
        p.done(&Purge::Key(key(5)), keys[5].2);
        assert!(!p.blocks(&key(5)));
        p.add(&Purge::Key(key(5)), true);
        // One more: every answer, on every edge, once the tier is back.
        p.add(&Purge::Key(key(MAX_PENDING_PURGES)), true);
        let (keys, all) = p.snapshot();
        assert!(keys.is_empty() && all.is_some());
        assert!(p.blocks(&key(MAX_PENDING_PURGES + 7)));
        p.done(&Purge::All, all.unwrap());
        assert!(!p.blocks(&key(0)));
        assert_eq!(p.count.load(Ordering::Acquire), 0);
    }

    /// A purge of a key that failed while an earlier pending purge of it was
    /// being applied stayed pending only until that one's `done`, which forgot both; the later
    /// one (answered 202) was lost. `done` forgets only the `add` it applied.
    #[test]
    fn a_purge_kept_again_while_the_earlier_one_is_applied_stays_pending() {
        let p = Pending::default();
        let k = Key::new(b"http", b"t", b"/k").unwrap();
        p.add(&Purge::Key(k.clone()), true);
        let (keys, _) = p.snapshot();
        // Being applied; meanwhile a new purge of it fails and is kept again.
        p.add(&Purge::Key(k.clone()), true);
        p.done(&Purge::Key(k.clone()), keys[0].2);
        assert!(p.blocks(&k), "the later purge was forgotten");
        let (keys, _) = p.snapshot();
        p.done(&Purge::Key(k.clone()), keys[0].2);
        assert!(!p.blocks(&k));
        // The same for everything.
        p.add(&Purge::All, true);
        let (_, all) = p.snapshot();
        p.add(&Purge::Key(k.clone()), true);
        p.done(&Purge::All, all.unwrap());
        assert!(
            p.blocks(&k),
            "a purge kept while everything was applied was forgotten"
        );
        // A reload's new mount takes the old one's pending purges over, announced as kept.
        let old = Pending::default();
        old.add(&Purge::Key(k.clone()), true);
        let new = Pending::default();
        new.adopt(&old);
        assert!(new.blocks(&k));
        assert!(!new.blocks(&Key::new(b"http", b"t", b"/other").unwrap()));
        assert!(new.snapshot().0[0].1, "still announced to the other edges");
        new.adopt(&p);
        assert!(
            new.snapshot().1.is_some(),
            "everything, when the old one had everything"
        );
    }

    /// A tag purge and a soft purge the tier did not take are pending as
    /// the others are: a tag under its log record, read back as the tag; a soft purge of a
    /// URL as the hard one (its key's tier answers are not used until it is done).
    #[test]
    fn tag_and_soft_purges_are_kept_pending_as_every_purge_is() {
        let p = Pending::default();
        let k = Key::new(b"http", b"t", b"/k").unwrap();
        p.add(&Purge::Tag(b"product-1"[..].into()), true);
        p.add(&Purge::SoftKey(k.clone()), true);
        p.add(&Purge::SoftTag(b"product-1"[..].into()), true);
        let (keys, all) = p.snapshot();
        assert_eq!((keys.len(), all), (2, None), "the same tag once");
        assert_eq!(
            Purge::of_record(keys[0].0.as_bytes()),
            Purge::Tag(b"product-1"[..].into())
        );
        assert_eq!(
            Purge::of_record(keys[1].0.as_bytes()),
            Purge::Key(k.clone())
        );
        assert!(
            p.blocks(&k),
            "a soft purge pending blocks its key's tier answers"
        );
        p.done(&Purge::SoftKey(k.clone()), keys[1].2);
        p.done(&Purge::Tag(b"product-1"[..].into()), keys[0].2);
        assert_eq!(p.count.load(Ordering::Acquire), 0);
        // The log's records read back as they were written.
        for what in [
            Purge::Key(k.clone()),
            Purge::SoftKey(k.clone()),
            Purge::Tag(b"a b"[..].into()),
            Purge::SoftTag(b"c"[..].into()),
        ] {
            let record = match &what {
                Purge::Key(k) => k.as_bytes().to_vec(),
                Purge::SoftKey(k) => [SOFT_RECORD, k.as_bytes()].concat(),
                Purge::Tag(t) => [TAG_RECORD, t].concat(),
                Purge::SoftTag(t) => [SOFT_TAG_RECORD, t].concat(),
                Purge::All => unreachable!(),
            };
            assert_eq!(Purge::of_record(&record), what);
        }
    }

    #[test]
    fn tier_keys_table() {
        let long = vec![b'a'; MAX_TIER_KEY];
        let fits = format!("linerate-http:1:{}", "a".repeat(234));
        let mut near_full = vec![b'a'; 232];
        near_full.push(b' ');
        let table: &[(u64, &[u8], Option<&str>)] = &[
            (
                7,
                b"http a.example /x",
                Some("linerate-http:7:http%20a.example%20/x"),
            ),
            (
                1_764_000_000_000,
                b"%\x00\x7f\xff~",
                Some("linerate-http:1764000000000:%25%00%7F%FF~"),
            ),
            (u64::MAX, b"", Some("linerate-http:18446744073709551615:")),
            (1, &long, None),
            // "linerate-http:1:" is 16 bytes: a 234-byte key makes MAX_TIER_KEY exactly.
            (1, &long[..234], Some(&fits)),
            (1, &long[..235], None),
            // An escape is three bytes, counted as such.
            (1, &near_full, None),
        ];
        for &(generation, key, want) in table {
            assert_eq!(tier_key(generation, key).as_deref(), want, "{key:?}");
        }
    }

    #[test]
    fn an_entry_comes_back_as_it_went_and_nothing_else_is_taken() {
        let key = Key::new(b"http", b"a.example", b"/x?y").unwrap();
        let fields: Vec<(&[u8], &[u8])> = vec![
            (b"Cache-Control", b"max-age=60"),
            (b"Vary", b"Accept-Language"),
            (b"ETag", b"\"v1\""),
        ];
        let req: Vec<(&[u8], &[u8])> = vec![(b"Accept-Language", b"fr"), (b"Cookie", b"secret")];
        let timing = Timing {
            request_time: Time(100),
            response_time: Time(101),
        };
        let entry = Entry::new(
            key.clone(),
            Variant::of(&Vary::parse(&fields), &req),
            &Response {
                status: 200,
                fields: &fields,
            },
            b"body"[..].into(),
            timing,
        );
        let stored = encode(&entry, &req);
        // Only the field Vary names goes with it: never the client's cookie.
        assert!(!stored.windows(6).any(|w| w == b"secret"));
        let back = decode(stored.clone(), &key).unwrap();
        assert_eq!(
            (
                back.status,
                &*back.body,
                back.timing,
                &back.variant,
                &back.fields
            ),
            (200, &b"body"[..], timing, &entry.variant, &entry.fields)
        );
        // Another key, another version, a cut value, a byte too many: nothing.
        let other = Key::new(b"http", b"a.example", b"/other").unwrap();
        assert!(decode(stored.clone(), &other).is_none());
        let mut v2 = stored.clone();
        v2[3] = b'2';
        assert!(decode(v2, &key).is_none());
        for cut in [0, 3, 10, stored.len() - 1] {
            assert!(
                decode(stored[..cut].to_vec(), &key).is_none(),
                "cut at {cut}"
            );
        }
        let mut longer = stored.clone();
        longer.push(0);
        assert!(decode(longer, &key).is_none());
    }
}
