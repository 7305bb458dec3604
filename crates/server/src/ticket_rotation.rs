//! TLS ticket keys a fleet keeps in its shared storage (`[storage]` without `ticket_keys`),
//! as caddy's distributed STEK: a new key every `ticket_rotation`, made by one node under
//! the storage's lock, old keys kept while a ticket they sealed can still be resumed, and
//! every node taking the keys in on the storage's watch.
//!
//! Owns the stored record's format, the decision of what the keys should be at a given
//! time ([`next_keys`], pure), and the thread that applies it. Storage calls block, so they
//! run on this module's own thread (and once at start, before any worker serves), never on
//! a worker. While the storage cannot be reached, the keys in use stay.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::{Config, TlsOptions};
use crate::storage::{Change, Storage, StorageError};
use crate::tls::{KeyRing, TICKET_KEY_BYTES, TicketKey, TicketKeys};

/// Where the fleet's keys live in the storage, and the lock's name for rotating them.
pub const TICKET_KEYS_KEY: &str = "tls/ticket_keys";
/// How long the rotation lock is held at most (one get and one put).
const LOCK_TTL: Duration = Duration::from_secs(30);
/// How long a starting node waits for another one's rotation lock.
const START_LOCK_WAIT: Duration = Duration::from_secs(10);
/// How often the thread looks again, whatever the watch says: a rotation due is never
/// later than this, and a change a watch missed is seen within it.
const RECHECK: Duration = Duration::from_secs(60);
/// How often a node without the fleet's keys asks the storage again.
const NO_KEYS_RETRY: Duration = Duration::from_secs(5);
/// One stored key: 8 bytes of creation time (Unix seconds, big-endian), then the key in
/// nginx's 80-byte layout.
const RECORD: usize = 8 + TICKET_KEY_BYTES;

/// A key as stored: when it was made, and its bytes (nginx's 80-byte layout).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredKey {
    pub created: u64,
    pub bytes: [u8; TICKET_KEY_BYTES],
}

impl std::fmt::Debug for StoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The name only (bytes 0..16): the secrets never reach a log.
        let name: String = self.bytes[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        f.debug_struct("StoredKey")
            .field("created", &self.created)
            .field("name", &name)
            .finish_non_exhaustive()
    }
}

/// The stored record: each key's [`RECORD`] bytes, newest (the one sealing) first.
pub fn encode(keys: &[StoredKey]) -> Vec<u8> {
    let mut out = Vec::with_capacity(keys.len() * RECORD);
    for k in keys {
        out.extend_from_slice(&k.created.to_be_bytes());
        out.extend_from_slice(&k.bytes);
    }
    out
}

/// The keys in a stored record; `None` for a record that is not one (empty, or a length
/// that is not a whole number of keys).
pub fn decode(record: &[u8]) -> Option<Vec<StoredKey>> {
    if record.is_empty() || !record.len().is_multiple_of(RECORD) {
        return None;
    }
    record
        .chunks_exact(RECORD)
        .map(|r| {
            let (at, key) = r.split_first_chunk::<8>()?;
            Some(StoredKey {
                created: u64::from_be_bytes(*at),
                bytes: key.try_into().ok()?,
            })
        })
        .collect()
}

/// What the fleet's keys should be at `now` (Unix seconds), or `None` when `stored` is
/// right as it is. A new key (`fresh`) goes first when there is none or the newest is
/// `rotation` old; a key is dropped once `keep` has passed since the key after it began to
/// seal (no ticket it sealed can be resumed any more). A key dated in the future (another
/// node's clock ahead) counts as new.
pub fn next_keys(
    stored: &[StoredKey],
    now: u64,
    rotation: Duration,
    keep: Duration,
    fresh: impl FnOnce() -> [u8; TICKET_KEY_BYTES],
) -> Option<Vec<StoredKey>> {
    let due = stored
        .first()
        .is_none_or(|k| now >= k.created.saturating_add(rotation.as_secs()));
    if !due {
        return None;
    }
    let mut keys = vec![StoredKey {
        created: now,
        bytes: fresh(),
    }];
    let mut sealing_until = now;
    for k in stored {
        if now >= sealing_until.saturating_add(keep.as_secs()) {
            break;
        }
        keys.push(k.clone());
        sealing_until = k.created;
    }
    Some(keys)
}

/// The ring for `keys`, the first sealing, dated by its record for `/metrics`' key age (the
/// node's own key, `created` 0, is dated now: it was just made).
fn ring(keys: &[StoredKey]) -> Option<KeyRing> {
    let ring = KeyRing::new(
        keys.iter()
            .filter_map(|k| TicketKey::from_bytes(&k.bytes).ok())
            .collect(),
    )?;
    Some(match keys.first() {
        Some(k) if k.created != 0 => ring.made_at(k.created),
        _ => ring,
    })
}

/// A new random key; `None` when the system's random source fails.
fn random_key() -> Option<[u8; TICKET_KEY_BYTES]> {
    let mut b = [0u8; TICKET_KEY_BYTES];
    aws_lc_rs::rand::fill(&mut b).ok()?;
    Some(b)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why the fleet's keys could not be had.
#[derive(Debug)]
pub enum FleetKeysError {
    Storage(StorageError),
    /// The stored record is not keys (it is left as it is).
    BadRecord,
    /// Another node held the rotation lock for the whole wait.
    Locked,
    /// The system's random source failed.
    Random,
}

impl std::fmt::Display for FleetKeysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FleetKeysError::Storage(e) => write!(f, "{e}"),
            FleetKeysError::BadRecord => {
                write!(f, "{TICKET_KEYS_KEY} in the storage is not ticket keys")
            }
            FleetKeysError::Locked => f.write_str("another node holds the rotation lock"),
            FleetKeysError::Random => f.write_str("no random bytes for a new key"),
        }
    }
}

impl std::error::Error for FleetKeysError {}

impl From<StorageError> for FleetKeysError {
    fn from(e: StorageError) -> Self {
        FleetKeysError::Storage(e)
    }
}

/// One node's side of the fleet's keys: the storage, the schedule, and the ticketer every
/// TLS listener without `ticket_keys` seals with.
pub struct FleetKeys {
    storage: Arc<dyn Storage>,
    rotation: Duration,
    keep: Duration,
    keys: Arc<TicketKeys>,
    /// The newest key's creation time in the ring in use (0: none from the storage yet).
    newest: std::sync::Mutex<u64>,
}

impl FleetKeys {
    /// The fleet's keys from `storage` (made, under the lock, when there are none or the
    /// newest is due): a node that cannot reach the storage starts with a key of its own and
    /// says so; the thread takes the fleet's in as soon as the storage answers.
    pub fn start(
        storage: Arc<dyn Storage>,
        rotation: Duration,
        keep: Duration,
    ) -> Result<FleetKeys, FleetKeysError> {
        let own = StoredKey {
            created: 0,
            bytes: random_key().ok_or(FleetKeysError::Random)?,
        };
        let fleet = FleetKeys {
            storage,
            rotation,
            keep,
            keys: Arc::new(TicketKeys::from_ring(
                ring(std::slice::from_ref(&own)).ok_or(FleetKeysError::Random)?,
            )),
            newest: std::sync::Mutex::new(0),
        };
        let stop = AtomicBool::new(false);
        match fleet.rotate_if_due(now_secs(), START_LOCK_WAIT, &stop) {
            Ok(_) => {}
            Err(e) => tracing::warn!(
                "TLS ticket keys: the fleet's cannot be had ({e}); this node seals with its own until they can"
            ),
        }
        Ok(fleet)
    }

    /// The ticketer to seal with (its ring swapped as the fleet's keys change).
    pub fn keys(&self) -> Arc<TicketKeys> {
        self.keys.clone()
    }

    /// Reads the stored keys and takes them in; `false` when there are none yet.
    pub fn load(&self) -> Result<bool, FleetKeysError> {
        match self.storage.get(TICKET_KEYS_KEY)? {
            None => Ok(false),
            Some(record) => {
                let keys = decode(&record).ok_or(FleetKeysError::BadRecord)?;
                self.take(&keys)?;
                Ok(true)
            }
        }
    }

    fn take(&self, keys: &[StoredKey]) -> Result<(), FleetKeysError> {
        let ring = ring(keys).ok_or(FleetKeysError::BadRecord)?;
        let created = keys.first().map_or(0, |k| k.created);
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        if *newest != created || created == 0 {
            tracing::info!(keys = keys.len(), "TLS ticket keys: the fleet's taken in");
        }
        *newest = created;
        self.keys.swap(Arc::new(ring));
        Ok(())
    }

    /// Makes the fleet's next key at `now` when one is due (under the lock, waiting up to
    /// `wait` for another node's, and reading again once it is held: the node that waited
    /// takes the key the other made), else takes in what is stored. `Ok(true)` when this
    /// node wrote a new key.
    pub fn rotate_if_due(
        &self,
        now: u64,
        wait: Duration,
        stop: &AtomicBool,
    ) -> Result<bool, FleetKeysError> {
        let stored = match self.storage.get(TICKET_KEYS_KEY)? {
            Some(r) => decode(&r).ok_or(FleetKeysError::BadRecord)?,
            None => Vec::new(),
        };
        if next_keys(&stored, now, self.rotation, self.keep, || {
            [0; TICKET_KEY_BYTES]
        })
        .is_none()
        {
            self.take(&stored)?;
            return Ok(false);
        }
        let Some(lock) =
            crate::storage::lock_wait(&*self.storage, TICKET_KEYS_KEY, LOCK_TTL, wait, stop)?
        else {
            return Err(FleetKeysError::Locked);
        };
        let result = self.rotate_locked(now);
        if let Err(e) = self.storage.unlock(&lock) {
            tracing::warn!("TLS ticket keys: the rotation lock was not released: {e}");
        }
        result
    }

    fn rotate_locked(&self, now: u64) -> Result<bool, FleetKeysError> {
        let stored = match self.storage.get(TICKET_KEYS_KEY)? {
            Some(r) => decode(&r).ok_or(FleetKeysError::BadRecord)?,
            None => Vec::new(),
        };
        let mut random = None;
        let next = next_keys(&stored, now, self.rotation, self.keep, || {
            let k = random_key().unwrap_or([0; TICKET_KEY_BYTES]);
            random = Some(k != [0; TICKET_KEY_BYTES]);
            k
        });
        match next {
            // Another node rotated while this one waited for the lock.
            None => {
                self.take(&stored)?;
                Ok(false)
            }
            Some(_) if random != Some(true) => Err(FleetKeysError::Random),
            Some(keys) => {
                self.storage.put(TICKET_KEYS_KEY, &encode(&keys))?;
                tracing::info!(
                    keys = keys.len(),
                    "TLS ticket keys: a new key made for the fleet"
                );
                self.take(&keys)?;
                Ok(true)
            }
        }
    }

    /// Runs the node's side until `stop`: takes in every change the watch announces, and
    /// rotates when the newest key is due (looking again at least every [`RECHECK`]).
    pub fn spawn(self: Arc<Self>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        // The watch is made here, before this returns, and the keys read again after it: a
        // rotation written between `start`'s read and the watch's first look is reported by
        // no watch, and a watch made later on the thread missed what came before it (another
        // node's rotation right after this node started was not taken until the next due one).
        let mut watch = self.storage.watch().ok();
        if watch.is_some()
            && let Err(e) = self.load()
        {
            tracing::warn!(error = %e, "ticket keys: reading them again after the watch started failed");
        }
        std::thread::Builder::new()
            .name("linerate-tickets".into())
            .spawn(move || {
                // Said once when the storage stops answering, once when it answers again.
                let mut failing = false;
                while !stop.load(Ordering::Relaxed) {
                    let change = match &watch {
                        Some(w) => w.changes.recv_timeout(self.wait()).ok(),
                        None => {
                            // No watch (the storage did not answer): look again after the
                            // wait, in short naps so a stop is heard.
                            let until = std::time::Instant::now() + self.wait();
                            while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed)
                            {
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            watch = self.storage.watch().ok();
                            None
                        }
                    };
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let result = match change {
                        Some(Change::Key(k)) if k != TICKET_KEYS_KEY => continue,
                        Some(_) => self.load().map(drop),
                        None => self
                            .rotate_if_due(now_secs(), Duration::ZERO, &stop)
                            .map(drop),
                    };
                    match result {
                        Err(FleetKeysError::Locked) => {}
                        Ok(()) => {
                            if failing {
                                tracing::info!("TLS ticket keys: the storage answers again");
                            }
                            failing = false;
                        }
                        Err(e) => {
                            if !failing {
                                tracing::warn!("TLS ticket keys: {e}; the keys in use stay");
                            }
                            failing = true;
                        }
                    }
                }
            })
            .map(drop)
    }

    /// How long until the thread looks again: the next rotation, at most [`RECHECK`].
    fn wait(&self) -> Duration {
        let newest = *self.newest.lock().unwrap_or_else(|e| e.into_inner());
        if newest == 0 {
            // None of the fleet's yet (the storage did not answer at start).
            return NO_KEYS_RETRY;
        }
        let due = newest.saturating_add(self.rotation.as_secs());
        Duration::from_secs(due.saturating_sub(now_secs())).clamp(Duration::from_secs(1), RECHECK)
    }
}

/// Whether a listener with `options` seals with the fleet's keys (given `[storage]`): it
/// names no key files and did not turn tickets off.
pub fn uses_fleet_keys(options: &TlsOptions) -> bool {
    options.ticket_keys.is_empty() && !options.session_tickets_off
}

/// A node's share of the fleet's keys, and the thread that keeps them (stopped when this is
/// dropped, with the server).
pub struct Fleet {
    keys: Arc<TicketKeys>,
    stop: Arc<AtomicBool>,
}

impl Fleet {
    /// With `[storage]` and a TLS listener that seals with the fleet's keys: the keys taken
    /// from the storage (or made there), and the thread that follows them. `None` otherwise.
    /// Old keys are kept for the longest `session_lifetime` of those listeners.
    pub fn start(config: &Config) -> Result<Option<Fleet>, String> {
        let Some(st) = &config.storage else {
            return Ok(None);
        };
        let keep = config
            .listen_list()
            .iter()
            .filter_map(|l| l.tls.as_ref())
            .filter(|t| uses_fleet_keys(&t.options))
            .map(|t| t.options.session_lifetime)
            .max();
        let Some(keep) = keep else {
            return Ok(None);
        };
        let storage = crate::storage::open(st).map_err(|e| e.to_string())?;
        let fleet = Arc::new(
            FleetKeys::start(storage, config.ticket_rotation, keep).map_err(|e| e.to_string())?,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let keys = fleet.keys();
        fleet
            .spawn(stop.clone())
            .map_err(|e| format!("cannot start its thread: {e}"))?;
        Ok(Some(Fleet { keys, stop }))
    }

    /// Has a listener's `config` seal with the fleet's keys, when its `options` say so.
    pub fn seal(&self, config: &mut Arc<rustls::ServerConfig>, options: &TlsOptions) {
        if uses_fleet_keys(options) {
            crate::tls::seal_with(config, self.keys.clone(), options);
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;

    fn key(created: u64, fill: u8) -> StoredKey {
        StoredKey {
            created,
            bytes: [fill; TICKET_KEY_BYTES],
        }
    }

    fn hours(h: u64) -> Duration {
        Duration::from_secs(h * H)
    }

    #[test]
    fn a_key_is_made_when_none_is_stored_or_the_newest_is_due() {
        let t = 1_000 * H;
        let made = next_keys(&[], t, hours(12), hours(24), || [1; 80]).unwrap();
        assert_eq!(made, vec![key(t, 1)]);
        // Not due: nothing to write.
        assert_eq!(
            next_keys(&made, t + 11 * H, hours(12), hours(24), || [2; 80]),
            None
        );
        // Due: the new key first, the old one kept (its tickets live 24 h more).
        let next = next_keys(&made, t + 12 * H, hours(12), hours(24), || [2; 80]).unwrap();
        assert_eq!(next, vec![key(t + 12 * H, 2), key(t, 1)]);
        // A key from a node whose clock is ahead is not due.
        assert_eq!(
            next_keys(&[key(t + H, 1)], t, hours(12), hours(24), || [2; 80]),
            None
        );
    }

    #[test]
    fn an_old_key_is_kept_while_a_ticket_it_sealed_can_resume() {
        let t = 1_000 * H;
        // Keys made every 12 h; k1 sealed from t-36h to t-24h, k2 from t-24h to t-12h,
        // k3 from t-12h to now. With tickets living 24 h, k1's last ticket (t-24h) is
        // past; k2's (t-12h) still resumes.
        let stored = [key(t - 12 * H, 3), key(t - 24 * H, 2), key(t - 36 * H, 1)];
        let next = next_keys(&stored, t, hours(12), hours(24), || [4; 80]).unwrap();
        assert_eq!(
            next,
            vec![key(t, 4), key(t - 12 * H, 3), key(t - 24 * H, 2)]
        );
        // Tickets living 1 h: only the key that sealed until now stays.
        let next = next_keys(&stored, t, hours(12), hours(1), || [4; 80]).unwrap();
        assert_eq!(next, vec![key(t, 4), key(t - 12 * H, 3)]);
    }

    #[test]
    fn the_record_reads_back_and_a_bad_one_is_refused() {
        let keys = vec![key(7, 1), key(5, 2)];
        assert_eq!(decode(&encode(&keys)), Some(keys));
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0; RECORD + 1]), None);
        assert!(!format!("{:?}", key(1, 0x5a)).contains(&"5a".repeat(17)));
    }

    /// `/metrics`' key age is the sealing key's making, as the record says;
    /// the node's own key (none of the fleet's yet) is dated when it was made.
    #[test]
    fn the_ring_is_dated_by_its_newest_key() {
        let t = 1_000 * H;
        assert_eq!(ring(&[key(t, 1), key(t - H, 2)]).unwrap().made(), t);
        let own = ring(&[key(0, 1)]).unwrap().made();
        assert!(own >= now_secs() - 1, "{own}");
    }

    /// Two nodes on one storage directory: the first makes the key, the second takes the
    /// same one in, a rotation by either reaches the other, and tickets sealed before it
    /// still open on both.
    #[test]
    fn two_nodes_on_one_storage_share_and_rotate_the_keys() {
        let d = std::env::temp_dir().join(format!("linerate-fleet-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let open =
            || -> Arc<dyn Storage> { Arc::new(crate::storage::dir::DirStorage::open(&d).unwrap()) };
        let (rotation, keep) = (hours(12), hours(24));
        let a = FleetKeys::start(open(), rotation, keep).unwrap();
        let b = FleetKeys::start(open(), rotation, keep).unwrap();
        use rustls::server::ProducesTickets;
        let before = a.keys().encrypt(b"made on A").unwrap();
        assert_eq!(
            b.keys().decrypt(&before).as_deref(),
            Some(&b"made on A"[..])
        );
        let stop = AtomicBool::new(false);
        // Not due yet: B writes nothing.
        assert!(!b.rotate_if_due(now_secs(), Duration::ZERO, &stop).unwrap());
        // Twelve hours later B rotates; A takes the new key in from the storage.
        let later = now_secs() + 12 * H;
        assert!(b.rotate_if_due(later, Duration::ZERO, &stop).unwrap());
        assert!(!a.rotate_if_due(later, Duration::ZERO, &stop).unwrap());
        let after = a.keys().encrypt(b"made on A after").unwrap();
        assert_ne!(after[..16], before[..16], "the new key seals");
        assert_eq!(
            b.keys().decrypt(&after).as_deref(),
            Some(&b"made on A after"[..])
        );
        assert_eq!(
            b.keys().decrypt(&before).as_deref(),
            Some(&b"made on A"[..])
        );
        assert_eq!(
            a.keys().decrypt(&before).as_deref(),
            Some(&b"made on A"[..])
        );
        let stored = decode(&open().get(TICKET_KEYS_KEY).unwrap().unwrap()).unwrap();
        assert_eq!(stored.len(), 2);
        // A record that is not keys leaves the keys in use.
        open().put(TICKET_KEYS_KEY, b"garbage").unwrap();
        assert!(matches!(a.load(), Err(FleetKeysError::BadRecord)));
        assert_eq!(
            a.keys().decrypt(&after).as_deref(),
            Some(&b"made on A after"[..])
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A node's thread takes in a rotation another node wrote, through the storage's watch
    /// (the dir engine polls): bounded, 20 s at most.
    #[test]
    fn a_rotation_by_another_node_reaches_a_running_node() {
        use rustls::server::ProducesTickets;
        let d = std::env::temp_dir().join(format!("linerate-fleet-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let open =
            || -> Arc<dyn Storage> { Arc::new(crate::storage::dir::DirStorage::open(&d).unwrap()) };
        let (rotation, keep) = (hours(12), hours(24));
        let a = Arc::new(FleetKeys::start(open(), rotation, keep).unwrap());
        let keys = a.keys();
        let stop = Arc::new(AtomicBool::new(false));
        a.clone().spawn(stop.clone()).unwrap();
        let b = FleetKeys::start(open(), rotation, keep).unwrap();
        let before = keys.encrypt(b"s").unwrap();
        assert!(
            b.rotate_if_due(now_secs() + 12 * H, Duration::ZERO, &AtomicBool::new(false))
                .unwrap()
        );
        let new_name = b.keys().encrypt(b"s").unwrap()[..16].to_vec();
        assert_ne!(new_name, before[..16]);
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while keys.encrypt(b"s").unwrap()[..16] != new_name[..] {
            assert!(std::time::Instant::now() < until, "A never took B's key in");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(keys.decrypt(&before).as_deref(), Some(&b"s"[..]));
        stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A rotation another node wrote after this node read the keys and before its watch
    /// started is taken as the watch starts: the watch reports changes from its start on, so
    /// without the read that follows it the node kept its old key until its next due rotation
    /// (what made the test above fail under load, its watch made late on the thread).
    #[test]
    fn a_rotation_written_before_the_watch_started_is_taken_when_it_starts() {
        use rustls::server::ProducesTickets;
        let d = std::env::temp_dir().join(format!("linerate-fleet-late-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let open =
            || -> Arc<dyn Storage> { Arc::new(crate::storage::dir::DirStorage::open(&d).unwrap()) };
        let (rotation, keep) = (hours(12), hours(24));
        let a = Arc::new(FleetKeys::start(open(), rotation, keep).unwrap());
        let keys = a.keys();
        let b = FleetKeys::start(open(), rotation, keep).unwrap();
        assert!(
            b.rotate_if_due(now_secs() + 12 * H, Duration::ZERO, &AtomicBool::new(false))
                .unwrap()
        );
        let new_name = b.keys().encrypt(b"s").unwrap()[..16].to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        a.clone().spawn(stop.clone()).unwrap();
        assert_eq!(
            keys.encrypt(b"s").unwrap()[..16],
            new_name[..],
            "A took B's key as its watch started"
        );
        stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&d);
    }
}
