//! The `dir` engine: a directory every node mounts (a local disk for one node, NFS or
//! CephFS for a fleet). A key is a file under it; a put writes a temporary file in the same
//! directory, fsyncs it and renames it over the key (a reader sees the old file or the new);
//! a lock is a file `.locks/NAME.lock` made whole by a hard link (which fails when the name
//! exists: an O_EXCL create that never shows an empty file) holding its token and expiry, as
//! caddy's filestorage, taken over once expired; its fencing number is `.locks/NAME.fence`,
//! raised by each holder. Every put and delete rewrites the change stamp `.changes`; a watch
//! polls it every [`POLL`] and, when it moved, walks the tree for what changed.
//!
//! Owns the layout under the directory (names starting with a dot are its own, never keys).
//! The file system is the only arbiter: there is no compare-and-swap on a file, so an
//! extension or unlock reads the token and then writes, and a holder that lets its lock
//! expire in that instant can lose it (the fence says so to whoever checks it).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Change, Lock, Storage, StorageError, Watch, check_key, token};

/// How often a watch reads the change stamp: a change reaches every node within this (and
/// the walk of the tree that follows).
pub const POLL: Duration = Duration::from_secs(1);
/// The change stamp, rewritten by every put and delete.
const STAMP: &str = ".changes";
/// The lock files and fencing counters.
const LOCKS: &str = ".locks";
/// How often the watch's thread looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// A shared directory as storage.
#[derive(Debug)]
pub struct DirStorage {
    root: PathBuf,
}

fn io_err(path: &Path, e: io::Error) -> StorageError {
    StorageError::Io(format!("{}: {e}", path.display()))
}

fn make_dir(dir: &Path) -> Result<(), StorageError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_err(dir, e))
}

/// Writes `bytes` to `path` whole: a temporary file of a random name beside it (two nodes
/// never share one), fsynced, renamed over it, and the directory fsynced.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    make_dir(dir)?;
    let tmp = dir.join(format!(".{}.tmp", token()));
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename itself survives a crash once the directory is synced; a file system
        // that cannot sync a directory still renamed atomically.
        let _ = fs::File::open(dir).and_then(|d| d.sync_all());
        Ok(())
    })();
    written.map_err(|e: io::Error| {
        let _ = fs::remove_file(&tmp);
        io_err(path, e)
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// A lock file's content: its holder's token and when it expires (ms since the epoch).
fn lock_text(token: &str, ttl: Duration) -> String {
    format!("{token}\n{}\n", now_ms() + ttl.as_millis() as u64)
}

fn parse_lock(text: &str) -> Option<(String, u64)> {
    let mut lines = text.lines();
    let token = lines.next()?.to_string();
    let expires = lines.next()?.parse().ok()?;
    Some((token, expires))
}

impl DirStorage {
    /// The storage in `root` (made 0700 when missing).
    pub fn open(root: &Path) -> Result<DirStorage, StorageError> {
        make_dir(&root.join(LOCKS))?;
        Ok(DirStorage {
            root: root.to_path_buf(),
        })
    }

    fn path(&self, key: &str) -> Result<PathBuf, StorageError> {
        Ok(self.root.join(check_key(key)?))
    }

    /// The lock file and fencing counter of `name` (`/` as `+`, which no key holds).
    fn lock_paths(&self, name: &str) -> Result<(PathBuf, PathBuf), StorageError> {
        let flat = check_key(name)?.replace('/', "+");
        let dir = self.root.join(LOCKS);
        Ok((
            dir.join(format!("{flat}.lock")),
            dir.join(format!("{flat}.fence")),
        ))
    }

    fn stamp(&self) -> Result<(), StorageError> {
        write_atomic(&self.root.join(STAMP), token().as_bytes())
    }

    /// The holder's token and expiry of the lock file at `path`, `None` when there is none.
    fn read_lock(path: &Path) -> Result<Option<(String, u64)>, StorageError> {
        match fs::read_to_string(path) {
            // A file made by a link is whole; one that does not parse is held by no one
            // (expired at once).
            Ok(text) => Ok(Some(parse_lock(&text).unwrap_or_default())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(path, e)),
        }
    }

    /// Raises the fencing counter of a lock just taken, and gives its new value.
    fn next_fence(path: &Path) -> Result<u64, StorageError> {
        let last: u64 = match fs::read_to_string(path) {
            Ok(t) => t.trim().parse().unwrap_or(0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io_err(path, e)),
        };
        write_atomic(path, format!("{}\n", last + 1).as_bytes())?;
        Ok(last + 1)
    }
}

impl Storage for DirStorage {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let path = self.path(key)?;
        match fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path, e)),
        }
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        write_atomic(&self.path(key)?, value)?;
        self.stamp()
    }

    fn delete(&self, key: &str) -> Result<(), StorageError> {
        let path = self.path(key)?;
        match fs::remove_file(&path) {
            Ok(()) => self.stamp(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&path, e)),
        }
    }

    fn lock(&self, name: &str, ttl: Duration) -> Result<Option<Lock>, StorageError> {
        let (path, fence) = self.lock_paths(name)?;
        let mine = token();
        // Twice at most: once more after a holder's expired lock is taken away.
        for _ in 0..2 {
            let tmp = path.with_extension(format!("{mine}.tmp"));
            write_atomic(&tmp, lock_text(&mine, ttl).as_bytes())?;
            let linked = fs::hard_link(&tmp, &path);
            let _ = fs::remove_file(&tmp);
            match linked {
                Ok(()) => {
                    return Ok(Some(Lock {
                        name: name.to_string(),
                        token: mine,
                        fence: Self::next_fence(&fence)?,
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(&path, e)),
            }
            let Some((holder, expires)) = Self::read_lock(&path)? else {
                continue; // released meanwhile
            };
            if now_ms() < expires {
                return Ok(None);
            }
            // Expired: moved aside under a name of our own, so that of two nodes taking it
            // over only one removes it. What was moved is checked: a fresh lock another
            // node took in the meantime goes back.
            let aside = path.with_extension(format!("{mine}.stale"));
            match fs::rename(&path, &aside) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&path, e)),
            }
            let moved = Self::read_lock(&aside)?;
            if moved.as_ref().map(|(t, _)| t) != Some(&holder) {
                let _ = fs::hard_link(&aside, &path);
                let _ = fs::remove_file(&aside);
                return Ok(None);
            }
            let _ = fs::remove_file(&aside);
        }
        Ok(None)
    }

    fn extend(&self, lock: &Lock, ttl: Duration) -> Result<bool, StorageError> {
        let (path, _) = self.lock_paths(&lock.name)?;
        match Self::read_lock(&path)? {
            Some((holder, _)) if holder == lock.token => {
                write_atomic(&path, lock_text(&lock.token, ttl).as_bytes())?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn unlock(&self, lock: &Lock) -> Result<(), StorageError> {
        let (path, _) = self.lock_paths(&lock.name)?;
        if let Some((holder, _)) = Self::read_lock(&path)?
            && holder == lock.token
        {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&path, e)),
            }
        }
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        Ok(walk(&self.root)
            .into_keys()
            .filter(|k| k.starts_with(prefix))
            .collect())
    }

    fn watch(&self) -> Result<Watch, StorageError> {
        let root = self.root.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let mut last_stamp = fs::read(root.join(STAMP)).ok();
        let mut seen = walk(&root);
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("linerate-storage-watch".into())
            .spawn(move || {
                let mut waited = Duration::ZERO;
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(STOP_CHECK);
                    waited += STOP_CHECK;
                    if waited < POLL {
                        continue;
                    }
                    waited = Duration::ZERO;
                    let stamp = fs::read(root.join(STAMP)).ok();
                    if stamp == last_stamp {
                        continue;
                    }
                    last_stamp = stamp;
                    let now = walk(&root);
                    let changed = now
                        .iter()
                        .filter(|(k, v)| seen.get(*k) != Some(v))
                        .map(|(k, _)| k)
                        .chain(seen.keys().filter(|k| !now.contains_key(*k)));
                    for k in changed {
                        if tx.send(Change::Key(k.clone())).is_err() {
                            return;
                        }
                    }
                    seen = now;
                }
            })
            .map_err(|e| StorageError::Io(format!("the watch's thread: {e}")))?;
        Ok(Watch::new(rx, stop))
    }

    fn watch_delay(&self) -> Duration {
        POLL
    }
}

/// Every key under `root` with what tells a rewritten file from the old one (a rename
/// gives a new inode).
fn walk(root: &Path) -> HashMap<String, (u64, u64, i64, i64)> {
    let mut out = HashMap::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let key = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push((e.path(), key));
            } else {
                out.insert(
                    key,
                    (meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec()),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "linerate-storage-{tag}-{}-{}",
            std::process::id(),
            token()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn dir_values_are_replaced_whole_and_a_watcher_sees_each_change() {
        let d = temp("values");
        super::super::contract::values(&DirStorage::open(&d).unwrap());
        // No temporary file is left behind.
        let left: Vec<_> = fs::read_dir(d.join("acme/certs/a.test"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dir_locks_one_winner_expired_taken_over_with_a_larger_fence_stale_unlock_ignored() {
        let d = temp("locks");
        let a: Arc<dyn Storage> = Arc::new(DirStorage::open(&d).unwrap());
        let b: Arc<dyn Storage> = Arc::new(DirStorage::open(&d).unwrap());
        super::super::contract::locks(&a, &b);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dir_lock_races_have_one_winner() {
        let d = temp("race");
        let s = Arc::new(DirStorage::open(&d).unwrap());
        let won: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || s.lock("x", Duration::from_secs(30)).unwrap())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(won.len(), 1, "{won:?}");
        fs::remove_dir_all(&d).unwrap();
    }
}
