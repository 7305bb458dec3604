//! The per-worker open-file cache: path below the root → open fd and metadata.
//!
//! Owns reusing file descriptors across requests and noticing changes on disk. One cache per
//! worker, never shared: it is used through `&mut` from a `RefCell` in `StaticFiles`, which
//! makes that type `!Sync`. Policy: an entry younger than `revalidate_after` is trusted
//! without a syscall; an older one is re-probed through the same confined lookup (open
//! `O_PATH` + fstat) and reopened if device, inode, size or mtime changed. Bounded: at
//! `capacity` entries the oldest inserted entry is evicted (FIFO), closing its fd once no
//! answer still holds it.
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::io::Errno;

use super::open::{self, Confinement, FileMeta, Probe};

/// Default bound on cached entries per worker. Each file entry holds one fd, so workers ×
/// this must stay well below RLIMIT_NOFILE.
pub const DEFAULT_CACHE_ENTRIES: usize = 1024;

/// Default age after which an entry is checked against the disk again.
pub const DEFAULT_REVALIDATE_AFTER: Duration = Duration::from_secs(1);

/// What a lookup found.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// A regular file, open for reading.
    File {
        fd: Arc<OwnedFd>,
        meta: FileMeta,
    },
    Dir,
    Missing,
    Forbidden,
    Error(Errno),
}

/// Counters for tests and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from a fresh entry without a syscall.
    pub hits: u64,
    /// Lookups of paths not in the cache.
    pub misses: u64,
    /// Entries re-probed because they were older than `revalidate_after`.
    pub revalidations: u64,
    /// Re-probes that found the path changed on disk.
    pub changed: u64,
    /// Entries dropped to stay within capacity.
    pub evictions: u64,
}

#[derive(Clone, Debug)]
enum Cached {
    File(Arc<OwnedFd>, FileMeta),
    Dir,
    Missing,
}

impl Cached {
    fn lookup(&self) -> Lookup {
        match self {
            Cached::File(fd, meta) => Lookup::File {
                fd: Arc::clone(fd),
                meta: *meta,
            },
            Cached::Dir => Lookup::Dir,
            Cached::Missing => Lookup::Missing,
        }
    }

    /// Whether a fresh probe still describes this entry.
    fn still(&self, probe: &Probe) -> bool {
        match (self, probe) {
            (Cached::File(_, meta), Probe::File(now)) => meta == now,
            (Cached::Dir, Probe::Dir) | (Cached::Missing, Probe::Missing) => true,
            _ => false,
        }
    }
}

#[derive(Debug)]
struct Entry {
    what: Cached,
    checked: Instant,
}

/// A bounded map from normalized relative path to what is there.
#[derive(Debug)]
pub struct FileCache {
    entries: HashMap<String, Entry>,
    /// Insertion order for eviction; holds exactly the keys of `entries`.
    order: VecDeque<String>,
    capacity: usize,
    revalidate_after: Duration,
    stats: CacheStats,
}

impl FileCache {
    /// A cache of at most `capacity` entries (0 disables caching: every lookup probes).
    pub fn new(capacity: usize, revalidate_after: Duration) -> FileCache {
        FileCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity,
            revalidate_after,
            stats: CacheStats::default(),
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Entries held now.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// What is at `rel` below `root` at time `now`. A new "missing" result is kept only with
    /// `keep_missing` (sibling lookups, which follow a found file): a client asking for
    /// random missing paths must not evict the files that exist.
    pub fn lookup(
        &mut self,
        root: BorrowedFd<'_>,
        how: Confinement,
        rel: &str,
        now: Instant,
        keep_missing: bool,
    ) -> Lookup {
        let probe = match self.entries.get_mut(rel) {
            Some(entry) => {
                if now.saturating_duration_since(entry.checked) < self.revalidate_after {
                    self.stats.hits += 1;
                    return entry.what.lookup();
                }
                self.stats.revalidations += 1;
                let probe = open::probe(root, rel, how);
                if entry.what.still(&probe) {
                    entry.checked = now;
                    return entry.what.lookup();
                }
                self.stats.changed += 1;
                probe
            }
            None => {
                self.stats.misses += 1;
                open::probe(root, rel, how)
            }
        };
        let what = match probe {
            Probe::File(meta) => match open::open_read(root, rel, how, &meta) {
                Ok((fd, meta)) => Cached::File(Arc::new(fd), meta),
                // Replaced between probe and open, or an error: answer, cache nothing.
                Err(other) => {
                    self.forget(rel);
                    return from_probe(other);
                }
            },
            Probe::Dir => Cached::Dir,
            Probe::Missing if keep_missing => Cached::Missing,
            // Not cached: permission and I/O problems (they may be fixed at any moment) and
            // missing primary paths (see `keep_missing`).
            other => {
                self.forget(rel);
                return from_probe(other);
            }
        };
        let answer = what.lookup();
        self.store(rel, what, now);
        answer
    }

    fn store(&mut self, rel: &str, what: Cached, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        let entry = Entry { what, checked: now };
        if let Some(slot) = self.entries.get_mut(rel) {
            *slot = entry;
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.entries.remove(&oldest);
            self.stats.evictions += 1;
        }
        self.entries.insert(rel.to_string(), entry);
        self.order.push_back(rel.to_string());
    }

    fn forget(&mut self, rel: &str) {
        if self.entries.remove(rel).is_some() {
            self.order.retain(|k| k != rel);
        }
    }
}

fn from_probe(p: Probe) -> Lookup {
    match p {
        Probe::Dir => Lookup::Dir,
        Probe::Missing | Probe::File(_) => Lookup::Missing,
        Probe::Forbidden => Lookup::Forbidden,
        Probe::Error(e) => Lookup::Error(e),
    }
}
