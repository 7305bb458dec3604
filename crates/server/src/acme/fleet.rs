//! ACME in a fleet (`[storage]` set): what the nodes share through the storage, so that a
//! fleet makes one account, one order per name per renewal, and answers a validation on any
//! node.
//!
//! - The account: `acme/account/TAG` (TAG: the directory's [`store::directory_tag`]), made
//!   under the lock of that name by the first node that finds none; every node loads it.
//! - A certificate: `acme/certs/NAME/bundle.pem` (NAME: [`store::site_name`]), the chain then
//!   the key in one value, so that one put replaces both (a node never reads a new key with
//!   an old chain). Ordered under the lock `acme/certs/NAME`, after reading the storage again.
//!   Every node copies it to its own files (what its TLS listeners read) when the watch says
//!   it changed.
//! - Challenge answers: `acme/challenges/http-01/TOKEN` (the key authorization) and
//!   `acme/challenges/tls-alpn-01/NAME` (the key authorization's SHA-256, hex; each node makes
//!   its own certificate around it). A thread of this module follows the watch and keeps the
//!   node's [`Challenges`] table in step; the ordering node waits [`settle`] after each put,
//!   so that every node has the answer before the CA is told to validate.
//!
//! Owns the key layout and the watch's thread; the schedule stays the manager's.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, SystemTime};

use super::challenges::{Answer, Challenges, SharedAnswers};
use super::manager::ManagedSite;
use super::{issue, store};
use crate::config::{AcmeConfig, StorageConfig};
use crate::storage::{self, Change, Held, Storage, StorageError};

/// How long a lock lives without being extended (its holder extends it every third while
/// its order runs): how long a node that died holding it keeps the others waiting.
pub const LOCK_TTL: Duration = Duration::from_secs(60);
/// How often a node that found a name's lock held tries again (meanwhile the watch brings
/// the holder's certificate).
pub const LOCK_RETRY: Duration = Duration::from_secs(1);
/// The longest wait for the account's lock (another node making the account).
pub const ACCOUNT_WAIT: Duration = Duration::from_secs(90);
/// What [`settle`] adds to the storage's watch delay: a node's watch thread reading the
/// answer and putting it in its table.
const SETTLE_MARGIN: Duration = Duration::from_millis(500);
/// How often the watch's thread looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// Every challenge answer's key starts so.
const CHALLENGES: &str = "acme/challenges/";
const HTTP01: &str = "acme/challenges/http-01/";
const TLS_ALPN01: &str = "acme/challenges/tls-alpn-01/";

/// The wait between publishing an answer and telling the CA to validate: twice the
/// storage's watch delay (a dir's poll interval; Redis pub/sub's round trip) and a margin.
pub fn settle(storage: &dyn Storage) -> Duration {
    storage.watch_delay() * 2 + SETTLE_MARGIN
}

/// The storage's key of a site's certificate and key.
pub fn cert_key(site: &ManagedSite) -> String {
    format!("acme/certs/{}/bundle.pem", store::site_name(&site.names))
}

fn cert_lock(site: &ManagedSite) -> String {
    format!("acme/certs/{}", store::site_name(&site.names))
}

fn account_key(config: &AcmeConfig) -> String {
    format!("acme/account/{}", store::directory_tag(&config.directory))
}

/// A certificate in the storage: its leaf, the chain and the key (PEM).
pub struct Stored {
    pub leaf: store::Leaf,
    pub chain: String,
    pub key: String,
}

/// The chain and the key of a bundle (the chain first, then the first `PRIVATE KEY` block).
fn split_bundle(bundle: &str) -> Option<(&str, &str)> {
    let at = bundle.find("-----BEGIN ")?;
    let key_at = bundle[at..]
        .match_indices("-----BEGIN ")
        .map(|(i, _)| at + i)
        .find(|&i| {
            bundle[i..]
                .lines()
                .next()
                .is_some_and(|l| l.contains("PRIVATE KEY"))
        })?;
    let (chain, key) = bundle.split_at(key_at);
    (!chain.trim().is_empty()).then_some((chain, key))
}

/// A fleet's shared ACME state, on the manager's thread.
pub struct Fleet {
    storage: Arc<dyn Storage>,
    /// Certificate keys the watch reported (`None`: perhaps any), for the manager.
    certs: Option<mpsc::Receiver<Change>>,
    /// The account's credentials as loaded, so that a forgotten one is removed only when
    /// no other node replaced it meanwhile.
    account_json: Mutex<Option<Vec<u8>>>,
}

impl Fleet {
    /// The fleet of `config`'s storage (nothing is watched until [`Fleet::start`]).
    pub fn open(config: &StorageConfig) -> Result<Fleet, StorageError> {
        Ok(Fleet {
            storage: storage::open(config)?,
            certs: None,
            account_json: Mutex::new(None),
        })
    }

    /// Starts the thread that follows the watch: challenge answers go straight into
    /// `challenges` (even while the manager's thread waits on an order), certificate
    /// changes to [`Fleet::changed`].
    pub fn start(
        &mut self,
        challenges: Arc<Challenges>,
        stop: Arc<AtomicBool>,
    ) -> Result<(), StorageError> {
        let watch = self.storage.watch()?;
        let (tx, rx) = mpsc::channel();
        let storage = self.storage.clone();
        std::thread::Builder::new()
            .name("linerate-acme-watch".into())
            .spawn(move || {
                // The watch reports changes from its start on: an answer another node put
                // before (a node started while another orders) is read here.
                apply_all(&*storage, &challenges);
                while !stop.load(Ordering::Relaxed) {
                    let change = match watch.changes.recv_timeout(STOP_CHECK) {
                        Ok(c) => c,
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    };
                    let forward = match &change {
                        Change::Key(k) if k.starts_with(CHALLENGES) => {
                            apply(&*storage, &challenges, k);
                            false
                        }
                        Change::Key(k) => k.starts_with("acme/certs/"),
                        Change::All => {
                            apply_all(&*storage, &challenges);
                            true
                        }
                    };
                    if forward && tx.send(change).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| StorageError::Io(format!("the ACME watch's thread: {e}")))?;
        self.certs = Some(rx);
        Ok(())
    }

    /// The certificate keys that changed since the last call (deduplicated); `"*"` when any
    /// may have.
    pub fn changed(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(rx) = &self.certs {
            while let Ok(c) = rx.try_recv() {
                let k = match c {
                    Change::Key(k) => k,
                    Change::All => "*".to_string(),
                };
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    }

    /// The site's certificate in the storage, when there is one that can be served now.
    pub fn stored(&self, site: &ManagedSite) -> Result<Option<Stored>, String> {
        let key = cert_key(site);
        let Some(bytes) = self.storage.get(&key).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&bytes);
        let Some((chain, pem_key)) = split_bundle(&text) else {
            tracing::warn!(%key, "the stored certificate has no chain and key; ignored");
            return Ok(None);
        };
        let leaf = match store::leaf(chain.as_bytes())
            .and_then(|l| store::usable(&l, &site.names, SystemTime::now()).map(|()| l))
        {
            Ok(l) => l,
            Err(why) => {
                tracing::debug!(%key, "the stored certificate cannot be served: {why}");
                return Ok(None);
            }
        };
        Ok(Some(Stored {
            leaf,
            chain: chain.to_string(),
            key: pem_key.to_string(),
        }))
    }

    /// Puts a certificate just obtained into the storage (every node's watch reads it).
    pub fn save(&self, site: &ManagedSite, chain: &str, key: &str) -> Result<(), String> {
        let mut bundle = chain.to_string();
        if !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(key);
        self.storage
            .put(&cert_key(site), bundle.as_bytes())
            .map_err(|e| e.to_string())
    }

    /// The site's lock, kept alive until dropped; `None` while another node holds it.
    pub fn try_lock(&self, site: &ManagedSite) -> Result<Option<Held>, String> {
        let got = self
            .storage
            .lock(&cert_lock(site), LOCK_TTL)
            .map_err(|e| e.to_string())?;
        Ok(got.map(|l| Held::keep(self.storage.clone(), l, LOCK_TTL)))
    }

    /// The fleet's account: the stored one, else one made under the account's lock by the
    /// first node there (the others wait for it, then load it).
    pub async fn account(
        &self,
        config: &AcmeConfig,
        stop: &AtomicBool,
    ) -> Result<instant_acme::Account, issue::IssueError> {
        let key = account_key(config);
        let io = |e: StorageError| issue::IssueError::other(e);
        if let Some(json) = self.storage.get(&key).map_err(io)? {
            return self.load_account(config, &key, json).await;
        }
        let lock = storage::lock_wait(&*self.storage, &key, LOCK_TTL, ACCOUNT_WAIT, stop)
            .map_err(io)?
            .ok_or_else(|| {
                issue::IssueError::other(format!("the lock {key} is still held by another node"))
            })?;
        let held = Held::keep(self.storage.clone(), lock, LOCK_TTL);
        // Another node may have made it while this one waited.
        if let Some(json) = self.storage.get(&key).map_err(io)? {
            drop(held);
            return self.load_account(config, &key, json).await;
        }
        let (account, json) = issue::new_account(config).await?;
        self.storage.put(&key, &json).map_err(io)?;
        *self.account_json.lock().unwrap_or_else(|e| e.into_inner()) = Some(json);
        drop(held);
        Ok(account)
    }

    async fn load_account(
        &self,
        config: &AcmeConfig,
        key: &str,
        json: Vec<u8>,
    ) -> Result<instant_acme::Account, issue::IssueError> {
        let account = issue::account_from(config, &json, key).await;
        *self.account_json.lock().unwrap_or_else(|e| e.into_inner()) = Some(json);
        account
    }

    /// Removes the stored account the CA no longer knows, unless another node already
    /// replaced it.
    pub fn forget_account(&self, config: &AcmeConfig) {
        let key = account_key(config);
        let loaded = self
            .account_json
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if loaded.is_some()
            && self.storage.get(&key).ok().flatten() == loaded
            && let Err(e) = self.storage.delete(&key)
        {
            tracing::warn!("ACME: could not remove the stored account: {e}");
        }
    }
}

impl SharedAnswers for Fleet {
    fn share(&self, answer: &Answer) -> Result<(), String> {
        let (key, value) = match answer {
            Answer::Http01 {
                token,
                key_authorization,
            } => (
                format!("{HTTP01}{token}"),
                key_authorization.as_bytes().to_vec(),
            ),
            Answer::TlsAlpn01 { name, digest } => (
                format!("{TLS_ALPN01}{}", name.to_ascii_lowercase()),
                digest
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
                    .into_bytes(),
            ),
        };
        self.storage
            .put(&key, &value)
            .map_err(|e| format!("the challenge's answer: {e}"))?;
        std::thread::sleep(settle(&*self.storage));
        Ok(())
    }

    fn withdraw(&self, answer: &Answer) {
        let key = match answer {
            Answer::Http01 { token, .. } => format!("{HTTP01}{token}"),
            Answer::TlsAlpn01 { name, .. } => {
                format!("{TLS_ALPN01}{}", name.to_ascii_lowercase())
            }
        };
        if let Err(e) = self.storage.delete(&key) {
            tracing::warn!("ACME: the challenge's answer stays in storage: {e}");
        }
    }
}

/// Brings the table's entry for the challenge key `key` in step with the storage (read
/// now: a late event never undoes a newer answer).
/// Every challenge answer in the storage now, into `challenges`.
fn apply_all(storage: &dyn Storage, challenges: &Challenges) {
    match storage.list(CHALLENGES) {
        Ok(keys) => keys.iter().for_each(|k| apply(storage, challenges, k)),
        Err(e) => tracing::warn!("ACME: the fleet's challenge answers could not be listed: {e}"),
    }
}

fn apply(storage: &dyn Storage, challenges: &Challenges, key: &str) {
    let value = match storage.get(key) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(%key, "ACME: a challenge's answer could not be read: {e}");
            return;
        }
    };
    if let Some(token) = key.strip_prefix(HTTP01) {
        match value {
            Some(v) => challenges.put_http01(token, &String::from_utf8_lossy(&v)),
            None => challenges.remove(&[token.to_string()], &[]),
        }
    } else if let Some(name) = key.strip_prefix(TLS_ALPN01) {
        match value.and_then(|v| unhex(&v)) {
            Some(digest) => match issue::tls_alpn_cert(name, &digest) {
                Ok(cert) => challenges.put_tls_alpn01(name, Arc::new(cert)),
                Err(e) => tracing::warn!(%name, "ACME: a TLS-ALPN-01 certificate: {e}"),
            },
            None => challenges.remove(&[], &[name.to_string()]),
        }
    }
}

fn unhex(hex: &[u8]) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_splits_at_its_private_key() {
        let b = "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n";
        let (chain, key) = split_bundle(b).unwrap();
        assert!(chain.ends_with("B\n-----END CERTIFICATE-----\n"));
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(split_bundle("-----BEGIN PRIVATE KEY-----\nK\n").is_none());
        assert!(split_bundle("-----BEGIN CERTIFICATE-----\nA\n").is_none());
        assert_eq!(unhex(b"00ff10").unwrap(), [0, 255, 16]);
        assert!(unhex(b"0g").is_none());
    }

    /// Another node's answers reach this node's table through the watch, and go when
    /// withdrawn: on a shared directory.
    #[test]
    fn answers_another_node_shares_reach_this_nodes_table() {
        let dir = std::env::temp_dir().join(format!(
            "linerate-fleet-answers-{}-{}",
            std::process::id(),
            storage::token()
        ));
        answers_reach_another_node(StorageConfig {
            dir: Some(dir.clone()),
            redis: None,
            nodes: 2,
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The same through Redis (pub/sub).
    #[test]
    fn answers_another_node_shares_reach_this_nodes_table_through_redis() {
        let Some(server) = crate::storage::redis::test_server::Server::start() else {
            return;
        };
        answers_reach_another_node(StorageConfig {
            dir: None,
            redis: Some(server.url()),
            nodes: 2,
        });
    }

    fn answers_reach_another_node(config: StorageConfig) {
        let mut here = Fleet::open(&config).unwrap();
        let table = Arc::new(Challenges::default());
        let stop = Arc::new(AtomicBool::new(false));
        here.start(table.clone(), stop.clone()).unwrap();
        let there = Fleet::open(&config).unwrap();
        let http = Answer::Http01 {
            token: "tok_-1".into(),
            key_authorization: "tok_-1.thumb".into(),
        };
        let alpn = Answer::TlsAlpn01 {
            name: "A.example.test".into(),
            digest: vec![7; 32],
        };
        there.share(&http).unwrap();
        there.share(&alpn).unwrap();
        // `share` returned: this node answers already.
        assert_eq!(table.http01("tok_-1").as_deref(), Some("tok_-1.thumb"));
        assert!(table.tls_alpn01("a.example.test").is_some());
        there.withdraw(&http);
        there.withdraw(&alpn);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while (table.http01("tok_-1").is_some() || table.tls_alpn01("a.example.test").is_some())
            && std::time::Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(table.http01("tok_-1"), None);
        assert!(table.tls_alpn01("a.example.test").is_none());
        stop.store(true, Ordering::Relaxed);

        // A node whose watch starts after another node shared its answers (started while
        // that one orders) reads them at its start: the fleet test once saw such a node
        // fail a TLS-ALPN-01 validation.
        there.share(&http).unwrap();
        there.share(&alpn).unwrap();
        let mut late = Fleet::open(&config).unwrap();
        let late_table = Arc::new(Challenges::default());
        let late_stop = Arc::new(AtomicBool::new(false));
        late.start(late_table.clone(), late_stop.clone()).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while (late_table.http01("tok_-1").is_none()
            || late_table.tls_alpn01("a.example.test").is_none())
            && std::time::Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(late_table.http01("tok_-1").as_deref(), Some("tok_-1.thumb"));
        assert!(late_table.tls_alpn01("a.example.test").is_some());
        there.withdraw(&http);
        there.withdraw(&alpn);
        late_stop.store(true, Ordering::Relaxed);
    }
}
