//! The memory store: entries by key and variant, bounded in bytes, with a maximum object
//! size, evicting by S3-FIFO; and the cache's counters. A plain data structure: no clock, no
//! threads (the shared [`Store`] is shards behind mutexes, held only for a lookup or an insert,
//! never across I/O; a hit clones an `Arc` and leaves the lock).
//!
//! **Why S3-FIFO** (Yang et al., SOSP 2023): a new object enters a small FIFO (10% of the
//! bytes); one that was hit again while there moves to the main FIFO when it reaches the head,
//! the rest are evicted, their keys remembered in a ghost queue so that a quick return goes
//! straight to main. The main FIFO gives each object one more lap per hit (up to 3). So:
//! - a hit writes one small counter, no list relinking: the lock is held for a hash lookup,
//!   which matters when every worker shares one store (LRU moves a node on every hit);
//! - one-hit wonders — most objects in web and CDN traces — leave through the small queue
//!   without pushing popular objects out, which LRU and CLOCK let a scan do;
//! - on the paper's CDN and web traces its miss ratio is as good as or better than LRU,
//!   ARC and W-TinyLFU's, with none of TinyLFU's sketch or window to size and age.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::entry::Entry;
use crate::fields::Field;
use crate::key::Key;

/// The most variants (`Vary` secondary keys) kept per key; a new one evicts the oldest.
/// Bounds what a client cycling through Accept-Language values can make one URL hold.
pub const MAX_VARIANTS: usize = 8;

/// The small FIFO's share of a shard's bytes, in percent (the paper's 10%).
pub const SMALL_PERCENT: usize = 10;

/// The most a main-queue entry's hit counter counts: laps it may survive without a hit.
const MAX_FREQ: u8 = 3;

/// Room an entry takes besides its body, for the layout's promise that an answer of
/// [`Limits::max_object`] bytes is stored: a response head (an HTTP/1.1 upstream's is at most
/// 64 KiB, `linerate_http1::MAX_RESPONSE_HEAD_BYTES`), the key and the variant (both from the
/// request head, 16 KiB by default) and [`ENTRY_OVERHEAD`](crate::entry::ENTRY_OVERHEAD),
/// rounded up. A store of less than `max_object` plus this cannot keep the largest object.
pub const HEAD_ROOM: usize = 128 << 10;

/// The fewest objects of [`Limits::max_object`] bytes a shard holds: a store whose shards
/// would each hold fewer has fewer shards ([`Limits::layout`]). With one, each large insert
/// would empty its shard; the default (64 MiB, 1 MiB objects, 16 shards) holds 4.
pub const LARGEST_PER_SHARD: usize = 4;

/// The store's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes all entries may take together ([`Entry::size`]: head, body, key, overhead).
    pub capacity: usize,
    /// The largest body stored; a larger answer passes through uncached. Every answer up to
    /// it is stored whatever the layout (its shard holds it), as long as its head, key and
    /// variant take no more than [`HEAD_ROOM`] and the store holds `max_object + HEAD_ROOM`
    /// ([`Limits::holds_largest`]).
    pub max_object: usize,
    /// The most independent parts, each with its own lock, queues and an equal share of
    /// `capacity`: fewer where a share would hold fewer than [`LARGEST_PER_SHARD`] of the
    /// largest objects ([`Limits::layout`]).
    pub shards: usize,
}

impl Limits {
    /// How many shards the store has: at most `shards`, and few enough that each holds
    /// [`LARGEST_PER_SHARD`] objects of `max_object` bytes and one with [`HEAD_ROOM`] of head
    /// (at least one shard). `capacity = 256 MiB` with `max_object = 64 MiB` is one shard:
    /// sixteen of 16 MiB held no 17 MB answer at all.
    pub fn layout(&self) -> usize {
        let need = (self.max_object.saturating_mul(LARGEST_PER_SHARD))
            .max(self.max_object.saturating_add(HEAD_ROOM))
            .max(1);
        (self.capacity / need).clamp(1, self.shards.max(1))
    }

    /// Whether the store can keep an answer of `max_object` bytes (with [`HEAD_ROOM`] of
    /// head, key and variant); a configuration where it cannot is refused.
    pub fn holds_largest(&self) -> bool {
        self.max_object.saturating_add(HEAD_ROOM) <= self.capacity
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            capacity: 256 << 20,
            max_object: 8 << 20,
            shards: 16,
        }
    }
}

/// What a lookup found.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// The most recently stored variant the request selects (§4.1).
    Found(Arc<Entry>),
    /// Entries for the key, none for this request's Vary values.
    VaryMiss,
    /// Nothing for the key.
    UriMiss,
}

/// What an insert did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    Stored,
    /// A body over [`Limits::max_object`], or an entry over its shard's bytes: not stored,
    /// nothing evicted.
    TooBig,
}

/// The cache's counters: plain atomics, written with relaxed ordering (each is a count on its
/// own; no reader needs two to agree).
#[derive(Debug, Default)]
pub struct Counters {
    /// Answered from the store without going forward (fresh, or stale as allowed).
    pub hits: AtomicU64,
    /// Went forward with nothing usable stored.
    pub misses: AtomicU64,
    /// Answered stale (max-stale, stale-while-revalidate, stale-if-error).
    pub stale: AtomicU64,
    /// Validated with the origin, which answered 304.
    pub revalidated: AtomicU64,
    /// Not handled by the cache (method, no key, request no-store…).
    pub bypass: AtomicU64,
    /// Entries stored.
    pub stored: AtomicU64,
    /// Entries evicted for room (not those replaced or invalidated).
    pub evictions: AtomicU64,
    /// Bytes held now.
    pub bytes: AtomicU64,
    /// Entries held now.
    pub objects: AtomicU64,
}

/// One outcome the server counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Hit,
    Miss,
    Stale,
    Revalidated,
    Bypass,
}

/// The counters' values at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub hits: u64,
    pub misses: u64,
    pub stale: u64,
    pub revalidated: u64,
    pub bypass: u64,
    pub stored: u64,
    pub evictions: u64,
    pub bytes: u64,
    pub objects: u64,
}

impl Counters {
    pub fn record(&self, event: Event) {
        let c = match event {
            Event::Hit => &self.hits,
            Event::Miss => &self.misses,
            Event::Stale => &self.stale,
            Event::Revalidated => &self.revalidated,
            Event::Bypass => &self.bypass,
        };
        c.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            stale: self.stale.load(Relaxed),
            revalidated: self.revalidated.load(Relaxed),
            bypass: self.bypass.load(Relaxed),
            stored: self.stored.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            objects: self.objects.load(Relaxed),
        }
    }
}

/// The store shared by every worker: [`Shard`]s chosen by a cheap hash of the key's bytes
/// (FNV-1a with a random start), each shard's map keyed by SipHash with a random key: clients
/// choose URLs, so no flooding one bucket. Skewing the shard choice can only make one lock
/// busier, never a lookup slower, so it need not cost a second SipHash per request.
#[derive(Debug)]
pub struct Store {
    shards: Box<[Mutex<Shard>]>,
    /// Each shard's limits (its share of the capacity).
    per: Limits,
    /// The FNV-1a offset basis, randomised per store.
    seed: u64,
    counters: Arc<Counters>,
}

impl Store {
    pub fn new(limits: Limits) -> Store {
        let n = limits.layout();
        let per = Limits {
            capacity: limits.capacity / n,
            max_object: limits.max_object,
            shards: 1,
        };
        let counters = Arc::new(Counters::default());
        Store {
            shards: (0..n)
                .map(|_| Mutex::new(Shard::new(per, Arc::clone(&counters))))
                .collect(),
            per,
            seed: RandomState::new().hash_one(0u64) | 1,
            counters,
        }
    }

    /// How many shards the store has ([`Limits::layout`]).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Whether an entry of `size` bytes ([`Entry::size`], or [`crate::entry::size_of`] for
    /// one not made yet) whose body is `body` bytes would be stored: what an insert decides
    /// from sizes, known before the body is (a Cache-Status `stored` must be true).
    pub fn admits(&self, size: usize, body: usize) -> bool {
        body <= self.per.max_object && size <= self.per.capacity
    }

    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    fn shard(&self, key: &Key) -> MutexGuard<'_, Shard> {
        self.shard_of(key.as_bytes())
    }

    /// The shard that holds the key whose bytes are `key`.
    fn shard_of(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        let mut h = self.seed;
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        let i = (h % self.shards.len() as u64) as usize;
        // A panic while a shard was held cannot leave it inconsistent in a way a later
        // lookup trusts wrongly (every step keeps bytes and queues in agreement before the
        // next can panic), so a poisoned lock is taken over, not propagated.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The variant of `key` that a request with `fields` selects.
    pub fn get(&self, key: &Key, fields: &[Field<'_>]) -> Lookup {
        self.shard(key).get(key, fields)
    }

    /// [`Store::get`] by the key's bytes ([`Key::write`]'s): no key allocated.
    pub fn get_bytes(&self, key: &[u8], fields: &[Field<'_>]) -> Lookup {
        self.shard_of(key).get(key, fields)
    }

    pub fn insert(&self, entry: impl Into<Arc<Entry>>) -> Inserted {
        let entry = entry.into();
        let key = entry.key.clone();
        self.shard(&key).insert(entry)
    }

    /// Removes every variant of `key` (§4.4, or a purge); whether there was any.
    pub fn remove(&self, key: &Key) -> bool {
        self.shard(key).remove(key)
    }

    /// Up to `max` stored answers whose key starts with `prefix`, and whether more matched:
    /// for an operator's listing. The shards are locked one at a time, each only while its
    /// map is walked and the matching entries' `Arc`s are copied out, so requests wait on at
    /// most one shard's walk.
    pub fn list(&self, prefix: &[u8], max: usize) -> (Vec<Listed>, bool) {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let more = s
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .list(prefix, max, &mut out);
            if more {
                return (out, true);
            }
        }
        (out, false)
    }

    /// Removes every key that starts with `prefix` (a purge by prefix); how many keys.
    pub fn remove_prefix(&self, prefix: &[u8]) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove_prefix(prefix)
            })
            .sum()
    }
}

/// One stored answer as [`Store::list`] shows it.
#[derive(Clone, Debug)]
pub struct Listed {
    pub entry: Arc<Entry>,
    /// How many variants its key has stored (§4.1).
    pub variants: usize,
    /// The bytes it counts against the store ([`Entry::size`]).
    pub size: usize,
    /// Answers made of it since it was stored.
    pub hits: u32,
}

impl Store {
    /// Removes every answer tagged `tag` (`Surrogate-Key`, `Cache-Tag`: [`crate::tags`]),
    /// every variant that carries it; how many answers. A walk of every shard, as a purge
    /// by prefix is: a purge, not a lookup.
    pub fn remove_tagged(&self, tag: &[u8]) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove_tagged(tag)
            })
            .sum()
    }
}

impl Store {
    /// Counts `extra` bytes more for `entry` while it is stored: a body derived from it after
    /// it went in ([`Entry::derived`]: a hit's encoded body), so that the store's
    /// limit holds what its entries keep; past it, answers are evicted as for an insert.
    pub fn grow(&self, entry: &Arc<Entry>, extra: usize) {
        self.shard(&entry.key).grow(entry, extra);
    }
}

impl Store {
    /// Replaces each variant of `key` with what `f` makes of it (`None`: left as it is): a
    /// soft purge's answers made stale in place. How many were replaced. A
    /// replacement of another size is not made (a soft purge changes the timing alone).
    pub fn replace(&self, key: &Key, f: impl Fn(&Entry) -> Option<Entry>) -> usize {
        let mut shard = self.shard(key);
        let ids = shard.map.get(key).cloned().unwrap_or_default();
        ids.into_iter()
            .filter(|&id| shard.replace_slot(id, &f))
            .count()
    }

    /// [`Store::replace`] for every variant of every key that starts with `prefix` (a
    /// soft purge of a URL on a mount whose key adds a cookie or a field: one key per
    /// value, each starting with the URL's part). A walk of every shard, as
    /// [`Store::remove_prefix`] is.
    pub fn replace_prefix(&self, prefix: &[u8], f: impl Fn(&Entry) -> Option<Entry>) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let mut shard = s.lock().unwrap_or_else(|p| p.into_inner());
                let ids: Vec<u32> = shard
                    .map
                    .iter()
                    .filter(|(k, _)| k.starts_with(prefix))
                    .flat_map(|(_, ids)| ids.iter().copied())
                    .collect();
                ids.into_iter()
                    .filter(|&id| shard.replace_slot(id, &f))
                    .count()
            })
            .sum()
    }

    /// [`Store::replace`] for every answer tagged `tag`.
    pub fn replace_tagged(&self, tag: &[u8], f: impl Fn(&Entry) -> Option<Entry>) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let mut shard = s.lock().unwrap_or_else(|p| p.into_inner());
                (0..shard.slots.len() as u32)
                    .filter(|&id| {
                        shard.slots[id as usize]
                            .entry
                            .as_ref()
                            .is_some_and(|e| crate::tags::has_tag(&e.fields, tag))
                            && shard.replace_slot(id, &f)
                    })
                    .count()
            })
            .sum()
    }
}

impl Shard {
    /// Puts what `f` makes of slot `id`'s entry in its place, when it makes one of the same
    /// key and size (its place in the queues and its bytes are kept).
    fn replace_slot(&mut self, id: u32, f: &impl Fn(&Entry) -> Option<Entry>) -> bool {
        let slot = &mut self.slots[id as usize];
        let Some(old) = slot.entry.as_ref() else {
            return false;
        };
        match f(old) {
            Some(new) if new.key == old.key && new.size() == old.size() => {
                // The new entry has none of the old one's derived bodies ([`Store::grow`]):
                // their bytes go with it.
                let freed = slot.size - new.size();
                slot.size = new.size();
                slot.entry = Some(Arc::new(new));
                let queue = slot.queue;
                self.uncount(queue, freed);
                true
            }
            _ => false,
        }
    }

    /// Counts `extra` more bytes for the slot that holds `entry` (this very answer, not
    /// another of its key), then evicts past the shard's capacity as an insert does, the
    /// grown entry included; nothing when it is no longer stored.
    pub fn grow(&mut self, entry: &Arc<Entry>, extra: usize) {
        let Some(id) = self.map.get(&entry.key).and_then(|ids| {
            ids.iter().copied().find(|&id| {
                self.slots[id as usize]
                    .entry
                    .as_ref()
                    .is_some_and(|e| Arc::ptr_eq(e, entry))
            })
        }) else {
            return;
        };
        let slot = &mut self.slots[id as usize];
        slot.size += extra;
        match slot.queue {
            Queue::Small => self.small_bytes += extra,
            Queue::Main => self.main_bytes += extra,
        }
        self.counters.bytes.fetch_add(extra as u64, Relaxed);
        while self.bytes() > self.limits.capacity {
            let before = self.bytes();
            self.evict_one();
            if self.bytes() >= before {
                break;
            }
        }
        self.compact();
    }

    /// Takes `bytes` off `queue`'s count and the store's.
    fn uncount(&mut self, queue: Queue, bytes: usize) {
        match queue {
            Queue::Small => self.small_bytes -= bytes,
            Queue::Main => self.main_bytes -= bytes,
        }
        self.counters.bytes.fetch_sub(bytes as u64, Relaxed);
    }

    /// Removes every answer that carries `tag`; how many.
    pub fn remove_tagged(&mut self, tag: &[u8]) -> usize {
        let ids: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&id| {
                self.slots[id as usize]
                    .entry
                    .as_ref()
                    .is_some_and(|e| crate::tags::has_tag(&e.fields, tag))
            })
            .collect();
        for &id in &ids {
            self.free_slot(id);
        }
        self.compact();
        ids.len()
    }
}

/// Which FIFO an entry is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
}

#[derive(Debug)]
struct Slot {
    entry: Option<Arc<Entry>>,
    /// Bumped when the slot is emptied, so queue positions of its old entry are skipped.
    generation: u32,
    freq: u8,
    queue: Queue,
    size: usize,
    /// Answers made of it since it was stored (an operator's listing; S3-FIFO's `freq` is
    /// capped, this is not).
    hits: u32,
}

/// A position in a FIFO: a slot and the generation it was queued under.
type Place = (u32, u32);

/// One part of the store: a map from key to its variants' slots, two FIFOs and a ghost queue,
/// for one thread at a time. INVARIANT: `small_bytes` / `main_bytes` are the sizes of the live
/// entries in each queue; every live slot is queued once under its generation.
#[derive(Debug)]
pub struct Shard {
    limits: Limits,
    map: HashMap<Key, Vec<u32>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    small: VecDeque<Place>,
    main: VecDeque<Place>,
    small_bytes: usize,
    main_bytes: usize,
    live: usize,
    /// Hashes of keys recently evicted from the small queue, oldest first.
    ghost: VecDeque<u64>,
    ghost_set: HashSet<u64>,
    hasher: RandomState,
    counters: Arc<Counters>,
}

impl Shard {
    pub fn new(limits: Limits, counters: Arc<Counters>) -> Shard {
        Shard {
            limits,
            map: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            main_bytes: 0,
            live: 0,
            ghost: VecDeque::new(),
            ghost_set: HashSet::new(),
            hasher: RandomState::new(),
            counters,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.small_bytes + self.main_bytes
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The variant of `key` (a [`Key`] or its bytes) that a request with `fields` selects.
    pub fn get<K: std::borrow::Borrow<[u8]> + ?Sized>(
        &mut self,
        key: &K,
        fields: &[Field<'_>],
    ) -> Lookup {
        let Some(ids) = self.map.get(key.borrow()) else {
            return Lookup::UriMiss;
        };
        // Newest first: the most recent matching response is the one to use (§4.1).
        for &id in ids.iter().rev() {
            let slot = &mut self.slots[id as usize];
            let entry = slot.entry.as_ref().expect("mapped slots are live");
            if entry.variant.matches(fields) {
                slot.freq = (slot.freq + 1).min(MAX_FREQ);
                slot.hits = slot.hits.saturating_add(1);
                return Lookup::Found(Arc::clone(entry));
            }
        }
        Lookup::VaryMiss
    }

    pub fn insert(&mut self, entry: impl Into<Arc<Entry>>) -> Inserted {
        let entry: Arc<Entry> = entry.into();
        let size = entry.size();
        // The limit is on the body, as `Fill` collects it: an answer of exactly
        // `max_object` bytes is stored (its head counts against the shard's bytes).
        if entry.body.len() > self.limits.max_object || size > self.limits.capacity {
            return Inserted::TooBig;
        }
        // §4.1 / §4.3.4: the new response replaces a stored one for the same variant.
        let same: Vec<u32> = self
            .map
            .get(&entry.key)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&id| {
                self.slots[id as usize]
                    .entry
                    .as_ref()
                    .is_some_and(|e| e.variant == entry.variant)
            })
            .collect();
        for id in same {
            self.free_slot(id);
        }
        if self
            .map
            .get(&entry.key)
            .is_some_and(|ids| ids.len() >= MAX_VARIANTS)
        {
            let oldest = self.map[&entry.key][0];
            self.free_slot(oldest);
        }
        // Room is made before the entry goes in, so that it is never its own victim: one larger
        // than the small FIFO's share, pushed into a full shard first, was evicted at once by
        // the loop that made room after it, and said `Stored`.
        while self.bytes() + size > self.limits.capacity {
            let before = self.bytes();
            self.evict_one();
            if self.bytes() >= before {
                break; // nothing left to evict (`size <= capacity` was checked above)
            }
        }
        let hash = self.hasher.hash_one(&entry.key);
        let queue = if self.ghost_set.remove(&hash) {
            Queue::Main
        } else {
            Queue::Small
        };
        let key = entry.key.clone();
        let id = match self.free.pop() {
            Some(id) => {
                let s = &mut self.slots[id as usize];
                s.entry = Some(entry);
                s.freq = 0;
                s.queue = queue;
                s.size = size;
                s.hits = 0;
                id
            }
            None => {
                self.slots.push(Slot {
                    entry: Some(entry),
                    generation: 0,
                    freq: 0,
                    queue,
                    size,
                    hits: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let place = (id, self.slots[id as usize].generation);
        match queue {
            Queue::Small => {
                self.small.push_back(place);
                self.small_bytes += size;
            }
            Queue::Main => {
                self.main.push_back(place);
                self.main_bytes += size;
            }
        }
        self.map.entry(key).or_default().push(id);
        self.live += 1;
        self.counters.stored.fetch_add(1, Relaxed);
        self.counters.objects.fetch_add(1, Relaxed);
        self.counters.bytes.fetch_add(size as u64, Relaxed);
        self.compact();
        Inserted::Stored
    }

    pub fn remove(&mut self, key: &Key) -> bool {
        let Some(ids) = self.map.get(key).cloned() else {
            return false;
        };
        for id in ids {
            self.free_slot(id);
        }
        self.compact();
        true
    }

    /// Appends this shard's answers whose key starts with `prefix` to `out` until it holds
    /// `max`; whether one more matched.
    pub fn list(&mut self, prefix: &[u8], max: usize, out: &mut Vec<Listed>) -> bool {
        for (key, ids) in &self.map {
            if !key.starts_with(prefix) {
                continue;
            }
            for &id in ids {
                let slot = &self.slots[id as usize];
                let Some(entry) = slot.entry.as_ref() else {
                    continue;
                };
                if out.len() == max {
                    return true;
                }
                out.push(Listed {
                    entry: Arc::clone(entry),
                    variants: ids.len(),
                    size: slot.size,
                    hits: slot.hits,
                });
            }
        }
        false
    }

    pub fn remove_prefix(&mut self, prefix: &[u8]) -> usize {
        let keys: Vec<Key> = self
            .map
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        for k in &keys {
            self.remove(k);
        }
        keys.len()
    }

    /// Evicts one entry: from the small FIFO while it holds more than its share (or main is
    /// empty), else from main. Loops only over queue positions, each popped once or
    /// re-queued with a lower counter, so it ends.
    fn evict_one(&mut self) {
        let small_share = self.limits.capacity * SMALL_PERCENT / 100;
        if self.small_bytes > small_share || self.main_bytes == 0 {
            while let Some(place) = self.small.pop_front() {
                let Some(slot) = self.live_slot(place) else {
                    continue;
                };
                let (freq, size) = (slot.freq, slot.size);
                if freq > 0 {
                    // Hit while in the small queue: promoted, its count spent.
                    let slot = &mut self.slots[place.0 as usize];
                    slot.freq = 0;
                    slot.queue = Queue::Main;
                    self.small_bytes -= size;
                    self.main_bytes += size;
                    self.main.push_back(place);
                    if self.small_bytes <= small_share {
                        return self.evict_main();
                    }
                    continue;
                }
                let hash = self.hasher.hash_one(
                    &self.slots[place.0 as usize]
                        .entry
                        .as_ref()
                        .expect("live")
                        .key,
                );
                self.remember(hash);
                self.evict(place.0);
                return;
            }
        }
        self.evict_main();
    }

    fn evict_main(&mut self) {
        while let Some(place) = self.main.pop_front() {
            let Some(slot) = self.live_slot(place) else {
                continue;
            };
            if slot.freq > 0 {
                self.slots[place.0 as usize].freq -= 1;
                self.main.push_back(place);
                continue;
            }
            self.evict(place.0);
            return;
        }
        // Main empty: whatever is left is in the small queue.
        while let Some(place) = self.small.pop_front() {
            if self.live_slot(place).is_some() {
                self.evict(place.0);
                return;
            }
        }
    }

    fn evict(&mut self, id: u32) {
        self.free_slot(id);
        self.counters.evictions.fetch_add(1, Relaxed);
    }

    fn live_slot(&self, (id, generation): Place) -> Option<&Slot> {
        let s = &self.slots[id as usize];
        (s.generation == generation && s.entry.is_some()).then_some(s)
    }

    /// Remembers an evicted key's hash; the ghost queue holds as many as the shard has
    /// entries (the paper's size for it), at least 64.
    fn remember(&mut self, hash: u64) {
        if self.ghost_set.insert(hash) {
            self.ghost.push_back(hash);
        }
        while self.ghost.len() > self.live.max(64) {
            if let Some(old) = self.ghost.pop_front() {
                self.ghost_set.remove(&old);
            }
        }
    }

    /// Empties a slot: out of the map, its bytes out of its queue's count, its queue
    /// positions made stale by the new generation.
    fn free_slot(&mut self, id: u32) {
        let slot = &mut self.slots[id as usize];
        let Some(entry) = slot.entry.take() else {
            return;
        };
        slot.generation = slot.generation.wrapping_add(1);
        match slot.queue {
            Queue::Small => self.small_bytes -= slot.size,
            Queue::Main => self.main_bytes -= slot.size,
        }
        self.counters.bytes.fetch_sub(slot.size as u64, Relaxed);
        self.counters.objects.fetch_sub(1, Relaxed);
        self.live -= 1;
        if let Some(ids) = self.map.get_mut(&entry.key) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.map.remove(&entry.key);
            }
        }
        self.free.push(id);
    }

    /// Drops stale queue positions once they outnumber the live ones (replacements and
    /// invalidations leave them behind when nothing is evicted).
    fn compact(&mut self) {
        if self.small.len() + self.main.len() > 2 * self.live + 64 {
            let slots = &self.slots;
            let live = |(id, g): &Place| {
                let s = &slots[*id as usize];
                s.generation == *g && s.entry.is_some()
            };
            self.small.retain(live);
            self.main.retain(live);
        }
    }
}

#[cfg(test)]
mod tests;
