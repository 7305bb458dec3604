//! TLS session tickets sealed under keys a fleet shares: nginx's `ssl_session_ticket_key`
//! files (`ticket_keys = ["current.key", "previous.key"]`), the first key sealing new
//! tickets and every key opening them, so a session made on one node resumes on another and
//! a ticket made before a rotation still resumes after it.
//!
//! Owns the key files' format, the ticket's layout (RFC 5077 §4's recommended structure) and
//! the key ring swapped in by a reload; nothing about sockets. A key's secret bytes are never
//! logged and never in `Debug` output: only its name (sent in the clear in every ticket)
//! is. A ticket is attacker-controlled input: opening one never panics, and its MAC is
//! checked (in constant time) before a byte of it is decrypted.
//!
//! Also owns when the sealing key was made, for `/metrics`
//! (`linerate_tls_ticket_key_age_seconds`): every ticketer in use is listed
//! here, by where its keys come from, for [`key_ages`].
#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::cipher::{
    AES_128, AES_256, DecryptionContext, PaddedBlockDecryptingKey, PaddedBlockEncryptingKey,
    UnboundCipherKey,
};
use aws_lc_rs::hmac;
use aws_lc_rs::iv::FixedLength;
use rustls::server::ProducesTickets;

use super::certs::TlsError;

/// A key file for AES-256 tickets: a 16-byte key name, a 32-byte HMAC-SHA256 secret, then a
/// 32-byte AES-256 key (what `openssl rand 80 > ticket.key` makes). nginx's order, from
/// `ngx_ssl_session_ticket_keys` in its `src/event/ngx_event_openssl.c`.
pub const TICKET_KEY_BYTES: usize = 80;
/// A key file for AES-128 tickets (nginx's older size): a 16-byte key name, a 16-byte
/// AES-128 key, then a 16-byte HMAC-SHA256 secret. nginx reads this size in that order
/// (AES before HMAC, unlike the 80-byte one), from the same function.
pub const TICKET_KEY_BYTES_AES128: usize = 48;
/// A key's name: it opens every ticket, so a node finds the key that sealed it.
const NAME_LEN: usize = 16;
/// AES-CBC's IV, random per ticket.
const IV_LEN: usize = 16;
/// HMAC-SHA256's tag, ending every ticket.
const MAC_LEN: usize = 32;
/// The length of `encrypted_state`, two bytes (RFC 5077 §4: `opaque
/// encrypted_state<0..2^16-1>`).
const LEN_LEN: usize = 2;
/// The largest `encrypted_state` a ticket carries: a session too large for it gets no
/// ticket (rustls then sends none, and the handshake goes on).
const MAX_ENCRYPTED_STATE: usize = u16::MAX as usize;

/// Why a key file cannot be used (no key byte is ever in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFormatError {
    /// The file is neither [`TICKET_KEY_BYTES`] nor [`TICKET_KEY_BYTES_AES128`] long.
    Size(usize),
    /// The crypto library refused the key (never seen with keys of the right size).
    Refused,
}

impl fmt::Display for KeyFormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFormatError::Size(n) => write!(
                f,
                "{n} bytes; a ticket key is {TICKET_KEY_BYTES} bytes (AES-256, as `openssl rand \
                 {TICKET_KEY_BYTES}` makes) or {TICKET_KEY_BYTES_AES128} (AES-128), nginx's \
                 ssl_session_ticket_key format"
            ),
            KeyFormatError::Refused => f.write_str("the crypto library refused the key"),
        }
    }
}

impl std::error::Error for KeyFormatError {}

/// Whether a key file of `len` bytes has one of the sizes [`TicketKey::from_bytes`] takes
/// (for the configuration's check, before the file is read).
pub fn ticket_key_size_ok(len: u64) -> bool {
    len == TICKET_KEY_BYTES as u64 || len == TICKET_KEY_BYTES_AES128 as u64
}

/// One ticket key: its name, AES-CBC (128 or 256) both ways, and HMAC-SHA256.
pub struct TicketKey {
    name: [u8; NAME_LEN],
    seal: PaddedBlockEncryptingKey,
    open: PaddedBlockDecryptingKey,
    mac: hmac::Key,
}

impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The name is public (the first bytes of every ticket); the secrets are not shown.
        let name: String = self.name.iter().map(|b| format!("{b:02x}")).collect();
        f.debug_struct("TicketKey")
            .field("name", &name)
            .field("cipher", self.seal.algorithm())
            .finish_non_exhaustive()
    }
}

impl TicketKey {
    /// A key from a file's bytes in nginx's layout: 80 bytes (name, HMAC secret, AES-256
    /// key) or 48 (name, AES-128 key, HMAC secret).
    pub fn from_bytes(bytes: &[u8]) -> Result<TicketKey, KeyFormatError> {
        let (name, aes, secret, algorithm) = match bytes.len() {
            TICKET_KEY_BYTES => (&bytes[..16], &bytes[48..80], &bytes[16..48], &AES_256),
            TICKET_KEY_BYTES_AES128 => (&bytes[..16], &bytes[16..32], &bytes[32..48], &AES_128),
            n => return Err(KeyFormatError::Size(n)),
        };
        let cipher = || UnboundCipherKey::new(algorithm, aes).map_err(|_| KeyFormatError::Refused);
        Ok(TicketKey {
            name: name.try_into().map_err(|_| KeyFormatError::Refused)?,
            seal: PaddedBlockEncryptingKey::cbc_pkcs7(cipher()?)
                .map_err(|_| KeyFormatError::Refused)?,
            open: PaddedBlockDecryptingKey::cbc_pkcs7(cipher()?)
                .map_err(|_| KeyFormatError::Refused)?,
            mac: hmac::Key::new(hmac::HMAC_SHA256, secret),
        })
    }

    /// The key's name, as tickets sealed under it begin.
    pub fn name(&self) -> &[u8; NAME_LEN] {
        &self.name
    }

    /// `plain` sealed as RFC 5077 §4 recommends: `key_name[16] iv[16]
    /// encrypted_state<0..2^16-1> mac[32]`, AES-CBC with PKCS#7 padding, and HMAC-SHA256 over
    /// everything before the MAC (encrypt-then-MAC). `None` when the state is too large.
    fn seal(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut state = plain.to_vec();
        let iv = self.seal.encrypt(&mut state).ok()?;
        let iv: &[u8] = (&iv).try_into().ok()?;
        if state.len() > MAX_ENCRYPTED_STATE || iv.len() != IV_LEN {
            return None;
        }
        let mut ticket = Vec::with_capacity(NAME_LEN + IV_LEN + LEN_LEN + state.len() + MAC_LEN);
        ticket.extend_from_slice(&self.name);
        ticket.extend_from_slice(iv);
        ticket.extend_from_slice(&(state.len() as u16).to_be_bytes());
        ticket.extend_from_slice(&state);
        let tag = hmac::sign(&self.mac, &ticket);
        ticket.extend_from_slice(tag.as_ref());
        Some(ticket)
    }

    /// The state inside a ticket this key sealed; `None` for anything else (another
    /// key's, a changed byte, a wrong length), decided before any decryption.
    fn open(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let (body, tag) = ticket.split_at_checked(ticket.len().checked_sub(MAC_LEN)?)?;
        let (name, rest) = body.split_first_chunk::<NAME_LEN>()?;
        let (iv, rest) = rest.split_first_chunk::<IV_LEN>()?;
        let (len, state) = rest.split_first_chunk::<LEN_LEN>()?;
        if name != &self.name || usize::from(u16::from_be_bytes(*len)) != state.len() {
            return None;
        }
        hmac::verify(&self.mac, body, tag).ok()?;
        let mut state = state.to_vec();
        let context = DecryptionContext::Iv128(FixedLength::from(*iv));
        let plain = self.open.decrypt(&mut state, context).ok()?.len();
        state.truncate(plain);
        Some(state)
    }
}

/// The keys in use, in order: the first seals, every one opens.
#[derive(Debug)]
pub struct KeyRing {
    keys: Vec<TicketKey>,
    /// When the sealing key was made (Unix seconds): see [`KeyRing::made_at`].
    made: u64,
}

impl KeyRing {
    /// A ring of `keys` (at least one), the first sealing, made now (see
    /// [`KeyRing::made_at`]).
    pub fn new(keys: Vec<TicketKey>) -> Option<KeyRing> {
        (!keys.is_empty()).then(|| KeyRing {
            keys,
            made: now_secs(),
        })
    }

    /// The ring, its sealing key made at `unix_secs` (the fleet's record says when; a key
    /// file's modification time is the nearest a file says), for the key age `/metrics`
    /// shows.
    pub fn made_at(mut self, unix_secs: u64) -> KeyRing {
        self.made = unix_secs;
        self
    }

    /// When the sealing key was made (Unix seconds).
    pub fn made(&self) -> u64 {
        self.made
    }

    /// The keys' names, in order (for logs: names are public).
    pub fn names(&self) -> impl Iterator<Item = &[u8; NAME_LEN]> {
        self.keys.iter().map(TicketKey::name)
    }

    fn seal(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.keys.first()?.seal(plain)
    }

    fn open(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let name = ticket.get(..NAME_LEN)?;
        self.keys.iter().find(|k| k.name[..] == *name)?.open(ticket)
    }
}

/// Reads `path` as one ticket key; the file's bytes are wiped once the key is made.
fn read_key(path: &Path) -> Result<TicketKey, TlsError> {
    let err = |why: String| TlsError::TicketKey {
        path: path.to_path_buf(),
        why,
    };
    let mut bytes = crate::privsep::read(path).map_err(|e| err(e.to_string()))?;
    let key = TicketKey::from_bytes(&bytes);
    bytes.fill(0);
    std::hint::black_box(&bytes);
    key.map_err(|e| err(e.to_string()))
}

/// A listener's ticketer over key files: the ring read at start, read again on SIGHUP (a
/// file that fails keeps the ring in use). Wrapped by the handshake's session-age check.
pub struct TicketKeys {
    paths: Vec<PathBuf>,
    ring: RwLock<Arc<KeyRing>>,
    /// The sealing key's [`KeyRing::made_at`], listed for [`key_ages`] while this lives.
    made: Arc<AtomicU64>,
}

/// Where a ticketer's keys come from, as `/metrics` labels them: key files
/// (`ticket_keys`), or the fleet's storage.
pub const KEY_SOURCES: [&str; 2] = ["files", "storage"];
/// [`KEY_SOURCES`]' `files`.
const FROM_FILES: usize = 0;
/// [`KEY_SOURCES`]' `storage`.
const FROM_STORAGE: usize = 1;

/// Every ticketer alive: its source (an index into [`KEY_SOURCES`]) and its sealing key's
/// time. Listed when made, dropped from the list once gone.
static IN_USE: Mutex<Vec<(usize, Weak<AtomicU64>)>> = Mutex::new(Vec::new());

/// Lists a new ticketer's key time under `source`.
fn listed(source: usize, made: u64) -> Arc<AtomicU64> {
    let made = Arc::new(AtomicU64::new(made));
    let mut in_use = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
    in_use.retain(|(_, m)| m.strong_count() > 0);
    in_use.push((source, Arc::downgrade(&made)));
    made
}

/// The age in seconds at `now` (Unix seconds) of the sealing key of each source with a
/// ticketer alive, the oldest where several are (listeners with key files of their own): the
/// one an alert on a rotation that stopped wants. rustls's own ticketer (`session_tickets`
/// alone) keeps its keys' times to itself and is not here.
pub fn key_ages(now: u64) -> Vec<(&'static str, u64)> {
    let in_use = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
    KEY_SOURCES
        .iter()
        .enumerate()
        .filter_map(|(i, name)| {
            in_use
                .iter()
                .filter(|(source, _)| *source == i)
                .filter_map(|(_, m)| m.upgrade())
                .map(|m| now.saturating_sub(m.load(Relaxed)))
                .max()
                .map(|age| (*name, age))
        })
        .collect()
}

/// Unix seconds now.
fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// When the file at `path` was last written (Unix seconds), `None` when it cannot be said.
fn modified(path: &Path) -> Option<u64> {
    let at = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(at.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

impl fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketKeys")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl TicketKeys {
    /// Reads every file of `paths` (at least one), the first the key that seals.
    pub fn from_files(paths: &[PathBuf]) -> Result<TicketKeys, TlsError> {
        let mut keys = TicketKeys {
            paths: paths.to_vec(),
            ring: RwLock::new(Arc::new(KeyRing {
                keys: Vec::new(),
                made: 0,
            })),
            made: Arc::default(),
        };
        let ring = keys.read_again()?;
        keys.made = listed(FROM_FILES, ring.made);
        keys.swap(ring);
        Ok(keys)
    }

    /// A ticketer over `ring` with no files behind it (the fleet's keys from the storage,
    /// swapped in by the rotation's thread; SIGHUP reads nothing for it).
    pub fn from_ring(ring: KeyRing) -> TicketKeys {
        TicketKeys {
            paths: Vec::new(),
            made: listed(FROM_STORAGE, ring.made),
            ring: RwLock::new(Arc::new(ring)),
        }
    }

    /// Reads the files again without using them yet: every one must be a key. The sealing
    /// key is dated by its file's modification time (the time read, where there is none).
    pub fn read_again(&self) -> Result<Arc<KeyRing>, TlsError> {
        let keys = self
            .paths
            .iter()
            .map(|p| read_key(p))
            .collect::<Result<Vec<_>, _>>()?;
        let made = self.paths.first().and_then(|p| modified(p));
        KeyRing::new(keys)
            .map(|r| Arc::new(r.made_at(made.unwrap_or_else(now_secs))))
            .ok_or_else(|| TlsError::Options("ticket_keys names no key file".into()))
    }

    /// Seals the next tickets with `ring`'s first key, and opens with all of its keys.
    pub fn swap(&self, ring: Arc<KeyRing>) {
        self.made.store(ring.made, Relaxed);
        *self.ring.write().unwrap_or_else(|e| e.into_inner()) = ring;
    }

    /// The key files (kept readable across a privilege drop).
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn ring(&self) -> Arc<KeyRing> {
        self.ring.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    /// 0, "unspecified" (RFC 5077 §3.3): the handshake's wrapper announces the session
    /// lifetime and checks it on return; the keys live as long as the operator keeps them.
    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.ring().seal(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.ring().open(cipher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key file's bytes: each byte `seed + i`, so two seeds give two keys.
    fn key_bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    fn key(len: usize, seed: u8) -> TicketKey {
        TicketKey::from_bytes(&key_bytes(len, seed)).unwrap()
    }

    #[test]
    fn a_key_file_is_80_or_48_bytes_and_nothing_else() {
        for n in [0, 16, 47, 49, 64, 79, 81, 96] {
            assert_eq!(
                TicketKey::from_bytes(&vec![7; n]).err(),
                Some(KeyFormatError::Size(n))
            );
        }
        assert!(TicketKey::from_bytes(&[7; 80]).is_ok());
        assert!(TicketKey::from_bytes(&[7; 48]).is_ok());
        assert!(ticket_key_size_ok(80) && ticket_key_size_ok(48) && !ticket_key_size_ok(81));
        let why = KeyFormatError::Size(32).to_string();
        assert!(
            why.starts_with("32 bytes; a ticket key is 80 bytes"),
            "{why}"
        );
    }

    #[test]
    fn the_file_is_read_in_nginxs_order_name_then_hmac_then_aes() {
        // An 80-byte file: name [0..16], HMAC-SHA256 secret [16..48], AES-256 key [48..80].
        let bytes = key_bytes(80, 1);
        let k = TicketKey::from_bytes(&bytes).unwrap();
        let ticket = k.seal(b"session state").unwrap();
        assert_eq!(&ticket[..16], &bytes[..16]);
        // The MAC is HMAC-SHA256 under bytes 16..48 over everything before it.
        let (body, tag) = ticket.split_at(ticket.len() - 32);
        let mac = hmac::Key::new(hmac::HMAC_SHA256, &bytes[16..48]);
        assert!(hmac::verify(&mac, body, tag).is_ok());
        // The state decrypts with AES-256-CBC under bytes 48..80 and the ticket's IV.
        let aes = UnboundCipherKey::new(&AES_256, &bytes[48..80]).unwrap();
        let open = PaddedBlockDecryptingKey::cbc_pkcs7(aes).unwrap();
        let iv: [u8; 16] = ticket[16..32].try_into().unwrap();
        let mut state = ticket[34..ticket.len() - 32].to_vec();
        let plain = open
            .decrypt(&mut state, DecryptionContext::Iv128(FixedLength::from(iv)))
            .unwrap();
        assert_eq!(plain, b"session state");

        // A 48-byte file: name [0..16], AES-128 key [16..32], HMAC secret [32..48].
        let bytes = key_bytes(48, 9);
        let ticket = TicketKey::from_bytes(&bytes).unwrap().seal(b"s").unwrap();
        let (body, tag) = ticket.split_at(ticket.len() - 32);
        let mac = hmac::Key::new(hmac::HMAC_SHA256, &bytes[32..48]);
        assert!(hmac::verify(&mac, body, tag).is_ok());
        let aes = UnboundCipherKey::new(&AES_128, &bytes[16..32]).unwrap();
        let open = PaddedBlockDecryptingKey::cbc_pkcs7(aes).unwrap();
        let iv: [u8; 16] = ticket[16..32].try_into().unwrap();
        let mut state = ticket[34..ticket.len() - 32].to_vec();
        let plain = open
            .decrypt(&mut state, DecryptionContext::Iv128(FixedLength::from(iv)))
            .unwrap();
        assert_eq!(plain, b"s");
    }

    #[test]
    fn a_ticket_has_rfc5077s_layout_and_a_fresh_iv_each_time() {
        let k = key(80, 3);
        let a = k.seal(&[0xaa; 100]).unwrap();
        let b = k.seal(&[0xaa; 100]).unwrap();
        // RFC 5077 §4: name, IV, a two-byte length, the state (100 bytes padded to 112).
        assert_eq!(a.len(), 16 + 16 + 2 + 112 + 32);
        assert_eq!(u16::from_be_bytes([a[32], a[33]]), 112);
        assert_ne!(a[16..32], b[16..32], "the same IV twice");
        assert_eq!(k.open(&a).unwrap(), vec![0xaa; 100]);
        assert_eq!(k.seal(b"").map(|t| k.open(&t)), Some(Some(Vec::new())));
    }

    #[test]
    fn a_changed_truncated_or_foreign_ticket_opens_to_nothing() {
        let k = key(80, 3);
        let t = k.seal(b"session").unwrap();
        for i in 0..t.len() {
            let mut bad = t.clone();
            bad[i] ^= 0x01;
            assert_eq!(k.open(&bad), None, "byte {i} changed");
        }
        for n in 0..t.len() {
            assert_eq!(k.open(&t[..n]), None, "cut to {n}");
        }
        let mut longer = t.clone();
        longer.push(0);
        assert_eq!(k.open(&longer), None);
        assert_eq!(key(80, 4).open(&t), None);
        assert_eq!(k.open(&[]), None);
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens() {
        let ring = |seeds: &[u8]| KeyRing::new(seeds.iter().map(|s| key(80, *s)).collect());
        let old = ring(&[1]).unwrap();
        let rotated = ring(&[2, 1]).unwrap();
        let other = ring(&[5]).unwrap();
        let before = old.seal(b"made before the rotation").unwrap();
        assert_eq!(
            rotated.open(&before).as_deref(),
            Some(&b"made before the rotation"[..])
        );
        let after = rotated.seal(b"after").unwrap();
        assert_eq!(&after[..16], key(80, 2).name());
        assert_eq!(old.open(&after), None);
        assert_eq!(other.open(&before), None);
        assert!(KeyRing::new(Vec::new()).is_none());
        // AES-128 and AES-256 keys side by side.
        let mixed = KeyRing::new(vec![key(48, 8), key(80, 1)]).unwrap();
        assert_eq!(
            mixed.open(&before).as_deref(),
            Some(&b"made before the rotation"[..])
        );
        let t = mixed.seal(b"x").unwrap();
        assert_eq!(mixed.open(&t).as_deref(), Some(&b"x"[..]));
    }

    #[test]
    fn no_key_byte_is_in_debug_output() {
        let bytes = [0x5a; 80];
        let k = TicketKey::from_bytes(&bytes).unwrap();
        let ring = KeyRing::new(vec![k]).unwrap();
        let shown = format!("{ring:?}");
        assert!(
            shown.contains("5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"),
            "{shown}"
        );
        // The name is 16 bytes of 0x5a, shown once; a secret would add more.
        assert_eq!(shown.matches("5a").count(), 16, "{shown}");
        assert!(!shown.contains("90, 90"), "{shown}");
    }

    #[test]
    fn files_are_read_again_and_a_bad_one_keeps_the_ring_in_use() {
        let d = std::env::temp_dir().join(format!("linerate-ticket-keys-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let (a, b) = (d.join("a.key"), d.join("b.key"));
        std::fs::write(&a, key_bytes(80, 1)).unwrap();
        std::fs::write(&b, key_bytes(48, 2)).unwrap();
        let keys = TicketKeys::from_files(&[a.clone(), b.clone()]).unwrap();
        let t = keys.encrypt(b"s").unwrap();
        assert_eq!(&t[..16], &key_bytes(80, 1)[..16]);
        std::fs::write(&a, [0u8; 79]).unwrap();
        match keys.read_again() {
            Err(TlsError::TicketKey { path, why }) => {
                assert_eq!(path, a);
                assert!(why.starts_with("79 bytes"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(keys.decrypt(&t).as_deref(), Some(&b"s"[..]));
        assert!(matches!(
            TicketKeys::from_files(&[d.join("missing.key")]),
            Err(TlsError::TicketKey { .. })
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The key age `/metrics` shows. A key file is dated by its modification
    /// time, at start and when read again; a ticketer is listed while it lives (the oldest of
    /// its source shown: other tests' ticketers may be alive too).
    #[test]
    fn the_sealing_keys_age_follows_its_files_modification_time() {
        let d = std::env::temp_dir().join(format!("linerate-ticket-age-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let a = d.join("a.key");
        let now = now_secs();
        let hours_ago = |h: u64| {
            let f = std::fs::File::options().write(true).open(&a).unwrap();
            f.set_modified(UNIX_EPOCH + std::time::Duration::from_secs(now - h * 3600))
                .unwrap();
        };
        std::fs::write(&a, key_bytes(80, 1)).unwrap();
        hours_ago(30);
        let keys = TicketKeys::from_files(std::slice::from_ref(&a)).unwrap();
        assert_eq!(keys.made.load(Relaxed), now - 30 * 3600);
        let age = |ages: Vec<(&str, u64)>| ages.iter().find(|(s, _)| *s == "files").map(|a| a.1);
        assert!(age(key_ages(now)).is_some_and(|a| a >= 30 * 3600));
        // A new key installed: read again, it is dated by its own file.
        std::fs::write(&a, key_bytes(80, 2)).unwrap();
        hours_ago(1);
        let ring = keys.read_again().unwrap();
        assert_eq!(ring.made(), now - 3600);
        keys.swap(ring);
        assert_eq!(keys.made.load(Relaxed), now - 3600);
        // A ring made from no file is dated when made, or as told.
        let fresh = KeyRing::new(vec![key(80, 3)]).unwrap();
        assert!(fresh.made() >= now);
        assert_eq!(fresh.made_at(7).made(), 7);
        let _ = std::fs::remove_dir_all(&d);
    }
}
