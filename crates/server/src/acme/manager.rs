//! The thread that keeps managed certificates fresh: at start it finds which stored
//! certificates can be served, then sleeps until the next one is due (missing, unusable,
//! or at its renewal time), obtains it (ACME or the local CA), stores it, and has the TLS
//! listeners read their certificates again. A failure is logged with its reason and tried
//! again after an exponential backoff; the certificate in use (if any) stays.
//!
//! Where the CA publishes renewal information (ARI, RFC 9773), the thread asks it about
//! every ACME certificate it serves: at start, after the CA's Retry-After (held between one
//! minute and one day), and at once on a reload (SIGHUP, through [`Manager::ask_again`]). A
//! window that has begun (a revoked certificate's, or one a CA recalls) renews at once, and
//! the new order names the certificate it replaces.
//!
//! With `[storage]` (a fleet) the account, the certificates and the challenge answers are
//! shared through it ([`fleet`]): a certificate that is due is ordered only under its
//! name's lock, after the storage is read again (another node may have renewed it), and one
//! another node stored is copied to this node's files and served as soon as the watch says
//! it changed (within the storage's watch delay and a quarter second).
//!
//! Owns the schedule's state per site. Its ACME traffic runs on a current-thread tokio
//! runtime of its own; workers never wait for it.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use super::challenges::{Challenges, SharedAnswers};
use super::fleet::{self, Fleet};
use super::{issue, local_ca, schedule, store};
use crate::config::{AcmeConfig, CertFiles, Config, Managed};

/// How often the sleeping thread looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// A site whose certificate the server obtains itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedSite {
    /// Its names, every one in the certificate (the first names the storage directory).
    pub names: Vec<String>,
    pub managed: Managed,
    /// Where its certificate and key are kept (what the TLS listeners read).
    pub files: CertFiles,
}

/// The managed sites of `config`, in site order.
pub fn managed_sites(config: &Config) -> Vec<ManagedSite> {
    let Some(acme) = &config.acme else {
        return Vec::new();
    };
    config
        .sites
        .iter()
        .filter_map(|s| {
            s.managed.map(|managed| ManagedSite {
                names: s.names.clone(),
                managed,
                files: store::files(&acme.storage, managed, &s.names),
            })
        })
        .collect()
}

/// What to do next for one site.
struct Due {
    site: ManagedSite,
    /// When its certificate is obtained again.
    at: SystemTime,
    failures: u32,
    /// The certificate it is served (DER), when it has one that can be.
    serving: Option<Vec<u8>>,
    /// When that certificate expires (a stored one that expires later replaces it).
    until: Option<SystemTime>,
    /// When the CA is asked about that certificate's renewal window: ACME sites with a
    /// certificate, while the CA answers such questions.
    ask_at: Option<SystemTime>,
    ask_failures: u32,
}

impl Due {
    /// When the thread has something to do for this site.
    fn next(&self) -> SystemTime {
        self.ask_at.map_or(self.at, |a| a.min(self.at))
    }
}

/// When the CA is asked first about a certificate just obtained (RFC 9773 §4.3.2's wait
/// when a CA gives no Retry-After).
const ASK_AFTER_ISSUE: Duration = Duration::from_secs(6 * 3600);

/// The managed certificates of a server, and the thread that renews them.
pub struct Manager {
    config: AcmeConfig,
    sites: Vec<ManagedSite>,
    pub challenges: Arc<Challenges>,
    ask_again: Arc<AtomicBool>,
    /// The fleet's shared storage (`[storage]`), or why it could not be opened.
    fleet: Result<Option<Fleet>, String>,
}

impl Manager {
    /// The manager of `config`'s managed sites; `None` when it has none.
    pub fn new(config: &Config) -> Option<Manager> {
        let sites = managed_sites(config);
        if sites.is_empty() {
            return None;
        }
        let fleet = config
            .storage
            .as_ref()
            .map(Fleet::open)
            .transpose()
            .map_err(|e| format!("[storage]: {e}"));
        Some(Manager {
            config: config.acme.clone().unwrap_or_default(),
            sites,
            challenges: Arc::default(),
            ask_again: Arc::default(),
            fleet,
        })
    }

    /// A flag that, set, has the thread ask the CA at once about the renewal window of
    /// every ACME certificate it serves (a reload sets it).
    pub fn ask_again(&self) -> Arc<AtomicBool> {
        self.ask_again.clone()
    }

    /// The local CA's certificates that cannot be served now are made at once, before the
    /// listeners read them (no network: a start never waits on it). An error names the path.
    pub fn prepare(&self) -> Result<(), String> {
        if let Err(e) = &self.fleet {
            return Err(e.clone());
        }
        for s in &self.sites {
            if s.managed == Managed::Internal && store::stored(&s.files, &s.names).is_err() {
                obtain_local(&self.config, s).map_err(|e| format!("local CA: {e}"))?;
            }
        }
        Ok(())
    }

    /// Starts the thread. `reload` has the TLS listeners read their certificates again;
    /// the thread ends soon after `stop` is set.
    pub fn spawn(
        self,
        reload: Box<dyn Fn() -> Result<(), String> + Send>,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("linerate-acme".into())
            .spawn(move || self.run(reload, stop))
    }

    fn run(mut self, reload: Box<dyn Fn() -> Result<(), String> + Send>, stop: Arc<AtomicBool>) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("ACME: no runtime ({e}); certificates will not be renewed");
                return;
            }
        };
        let mut fleet = std::mem::replace(&mut self.fleet, Ok(None)).ok().flatten();
        if let Some(f) = fleet.as_mut()
            && let Err(e) = f.start(self.challenges.clone(), stop.clone())
        {
            tracing::error!(
                "ACME: the fleet's storage cannot be watched ({e}); certificates will not be renewed"
            );
            return;
        }
        if self.sites.iter().any(|s| s.managed == Managed::Acme) {
            super::orders::running();
        }
        let now = SystemTime::now();
        let mut due: Vec<Due> = self
            .sites
            .iter()
            .map(|s| {
                let (at, serving) = match store::stored(&s.files, &s.names) {
                    Ok(leaf) => {
                        let at = schedule::renew_at(leaf.not_before, leaf.not_after, schedule::jitter());
                        tracing::info!(
                            names = ?s.names,
                            renew_in_s = at.duration_since(now).unwrap_or_default().as_secs(),
                            "managed certificate in storage is served"
                        );
                        (at, Some(leaf.der))
                    }
                    Err(why) => {
                        if s.managed == Managed::Acme {
                            tracing::info!(names = %s.names.join(", "), "no certificate to serve yet ({why}): asking the CA");
                        }
                        (now, None)
                    }
                };
                let ask_at = (s.managed == Managed::Acme && serving.is_some()).then_some(now);
                let until = serving.as_ref().and_then(|_| {
                    store::stored(&s.files, &s.names)
                        .ok()
                        .map(|l| l.not_after)
                });
                Due {
                    site: s.clone(),
                    at,
                    failures: 0,
                    serving,
                    until,
                    ask_at,
                    ask_failures: 0,
                }
            })
            .collect();
        // A fleet's node serves what the storage holds, newer than its own files.
        if let Some(f) = &fleet {
            let mut took = false;
            for d in due.iter_mut().filter(|d| d.site.managed == Managed::Acme) {
                took |= take_stored(f, d);
            }
            if took {
                reread(&*reload, "the fleet's stored certificates");
            }
        }
        let mut account = None;
        while !stop.load(Ordering::Relaxed) {
            if let Some(f) = &fleet {
                let changed = f.changed();
                let mut took = false;
                for d in due.iter_mut().filter(|d| {
                    d.site.managed == Managed::Acme
                        && changed
                            .iter()
                            .any(|k| k == "*" || *k == fleet::cert_key(&d.site))
                }) {
                    took |= take_stored(f, d);
                }
                if took {
                    reread(&*reload, "a certificate another node stored");
                }
            }
            if self.ask_again.swap(false, Ordering::Relaxed) {
                let now = SystemTime::now();
                for d in due.iter_mut().filter(|d| d.ask_at.is_some()) {
                    d.ask_at = Some(now);
                }
            }
            let Some(next) = due.iter_mut().min_by_key(|d| d.next()) else {
                return;
            };
            let now = SystemTime::now();
            if next.next() > now {
                let wait = next.next().duration_since(now).unwrap_or_default();
                std::thread::sleep(wait.min(STOP_CHECK));
                continue;
            }
            if next.at > now {
                runtime.block_on(ask_window(
                    &self.config,
                    &mut account,
                    fleet.as_ref(),
                    &stop,
                    next,
                ));
                continue;
            }
            let got = match (next.site.managed, &fleet) {
                (Managed::Internal, _) => obtain_local(&self.config, &next.site),
                (Managed::Acme, None) => runtime.block_on(obtain_acme(
                    &self.config,
                    &mut account,
                    None,
                    &stop,
                    &next.site,
                    &self.challenges,
                    next.serving.as_deref(),
                )),
                // One order per name across the fleet: under the name's lock, and only when
                // the storage has no newer certificate than the one this node serves.
                (Managed::Acme, Some(f)) => match f.try_lock(&next.site) {
                    Err(e) => Err(format!("the fleet's lock: {e}")),
                    Ok(None) => {
                        tracing::debug!(names = ?next.site.names, "another node holds the name's lock");
                        next.at = now + fleet::LOCK_RETRY;
                        continue;
                    }
                    Ok(Some(held)) => {
                        if take_stored(f, next) {
                            drop(held);
                            reread(&*reload, "a certificate another node renewed meanwhile");
                            continue;
                        }
                        let got = runtime.block_on(obtain_acme(
                            &self.config,
                            &mut account,
                            Some(f),
                            &stop,
                            &next.site,
                            &self.challenges,
                            next.serving.as_deref(),
                        ));
                        drop(held);
                        got
                    }
                },
            };
            let site = &next.site;
            let leaf = got.and_then(|()| {
                store::stored(&site.files, &site.names)
                    .map_err(|e| format!("the stored certificate: {e}"))
            });
            if site.managed == Managed::Acme {
                super::orders::ended(leaf.is_ok());
            }
            match leaf {
                Ok(leaf) => {
                    next.failures = 0;
                    next.at =
                        schedule::renew_at(leaf.not_before, leaf.not_after, schedule::jitter());
                    next.serving = Some(leaf.der);
                    next.until = Some(leaf.not_after);
                    if site.managed == Managed::Acme {
                        next.ask_at = Some(SystemTime::now() + ASK_AFTER_ISSUE);
                    }
                    match reload() {
                        Ok(()) => tracing::info!(
                            names = ?site.names,
                            renew_in_s = next.at.duration_since(SystemTime::now()).unwrap_or_default().as_secs(),
                            "certificate obtained and served"
                        ),
                        Err(e) => tracing::error!(
                            names = ?site.names,
                            "certificate obtained, but the certificates could not be read again: {e}"
                        ),
                    }
                }
                Err(e) => {
                    next.failures += 1;
                    let wait = schedule::retry_after(next.failures);
                    next.at = SystemTime::now() + wait;
                    tracing::warn!(
                        names = ?site.names,
                        attempt = next.failures,
                        retry_in_s = wait.as_secs(),
                        "could not obtain a certificate: {e}"
                    );
                }
            }
        }
    }
}

/// Asks the CA for the renewal window of the certificate `d` is served, and brings its
/// renewal forward to a point in that window when it is earlier; when the CA publishes no
/// renewal information it is not asked again.
async fn ask_window(
    config: &AcmeConfig,
    account: &mut Option<instant_acme::Account>,
    fleet: Option<&Fleet>,
    stop: &AtomicBool,
    d: &mut Due,
) {
    let now = SystemTime::now();
    let asked = async {
        let Some(leaf) = d.serving.as_deref() else {
            return Ok(None);
        };
        if account.is_none() {
            *account = Some(load_account(config, fleet, stop).await?);
        }
        match account.as_ref() {
            Some(acct) => issue::renewal_window(acct, leaf).await,
            None => Ok(None),
        }
    }
    .await;
    match asked {
        Ok(None) => {
            d.ask_at = None;
            tracing::debug!(names = %d.site.names.join(", "), "the CA publishes no renewal information");
        }
        Ok(Some(window)) => {
            d.ask_failures = 0;
            let at = schedule::in_window(window.start, window.end, schedule::jitter());
            let from_now = |t: SystemTime| match t.duration_since(now) {
                Ok(d) => d.as_secs() as i64,
                Err(e) => -(e.duration().as_secs() as i64),
            };
            tracing::info!(
                names = ?d.site.names,
                window_start_in_s = from_now(window.start),
                window_end_in_s = from_now(window.end),
                "the CA's renewal window"
            );
            if at < d.at {
                d.at = at;
                tracing::info!(
                    names = ?d.site.names,
                    renew_in_s = at.duration_since(now).unwrap_or_default().as_secs(),
                    explanation = window.explanation.as_deref().unwrap_or("none given"),
                    "the CA's renewal window brings the renewal forward"
                );
            }
            d.ask_at = Some(now + schedule::renewal_info_again(window.retry_after));
        }
        Err(e) => {
            d.ask_failures += 1;
            let wait = schedule::retry_after(d.ask_failures).max(schedule::RENEWAL_INFO_MIN);
            d.ask_at = Some(now + wait);
            tracing::warn!(
                names = ?d.site.names,
                retry_in_s = wait.as_secs(),
                "could not ask the CA for the renewal window: {e}"
            );
        }
    }
}

/// A local-CA certificate for `site`, stored.
fn obtain_local(config: &AcmeConfig, site: &ManagedSite) -> Result<(), String> {
    let (chain, key) = local_ca::issue(&config.storage, &site.names, schedule::LOCAL_LIFETIME)?;
    store::write_pair(&site.files, &chain, &key)
        .map_err(|e| format!("{}: {e}", site.files.cert.display()))
}

/// The account: the fleet's when there is one, else this node's own.
async fn load_account(
    config: &AcmeConfig,
    fleet: Option<&Fleet>,
    stop: &AtomicBool,
) -> Result<instant_acme::Account, issue::IssueError> {
    match fleet {
        Some(f) => f.account(config, stop).await,
        None => issue::account(config).await,
    }
}

/// Copies the site's certificate from the fleet's storage to its files when the storage
/// holds one that can be served, other than the one served and expiring no sooner; whether
/// it did (the listeners are then to read their certificates again).
fn take_stored(fleet: &Fleet, d: &mut Due) -> bool {
    let stored = match fleet.stored(&d.site) {
        Ok(Some(s)) => s,
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(names = ?d.site.names, "ACME: the fleet's storage: {e}");
            return false;
        }
    };
    if d.serving.as_deref() == Some(&stored.leaf.der[..])
        || d.until.is_some_and(|u| stored.leaf.not_after < u)
    {
        return false;
    }
    if let Err(e) = store::write_pair(&d.site.files, &stored.chain, &stored.key) {
        tracing::warn!(names = ?d.site.names, "{}: {e}", d.site.files.cert.display());
        return false;
    }
    let now = SystemTime::now();
    d.at = schedule::renew_at(
        stored.leaf.not_before,
        stored.leaf.not_after,
        schedule::jitter(),
    );
    d.failures = 0;
    d.until = Some(stored.leaf.not_after);
    d.serving = Some(stored.leaf.der);
    d.ask_at = Some(now + ASK_AFTER_ISSUE);
    tracing::info!(
        names = ?d.site.names,
        renew_in_s = d.at.duration_since(now).unwrap_or_default().as_secs(),
        "certificate from the fleet's storage is served"
    );
    true
}

/// Has the listeners read their certificates again after `what` changed.
fn reread(reload: &dyn Fn() -> Result<(), String>, what: &str) {
    if let Err(e) = reload() {
        tracing::error!("{what}: the certificates could not be read again: {e}");
    }
}

/// An ACME certificate for `site`, stored (the account is made or loaded on first use); in
/// a fleet, the challenge answers go through the storage and the certificate into it.
async fn obtain_acme(
    config: &AcmeConfig,
    account: &mut Option<instant_acme::Account>,
    fleet: Option<&Fleet>,
    stop: &AtomicBool,
    site: &ManagedSite,
    challenges: &Challenges,
    replaces: Option<&[u8]>,
) -> Result<(), String> {
    if account.is_none() {
        *account = Some(
            load_account(config, fleet, stop)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let Some(acct) = account.as_ref() else {
        return Err("no account".into());
    };
    let shared = fleet.map(|f| f as &dyn SharedAnswers);
    let (chain, key) =
        match issue::certificate(acct, &site.names, config, challenges, shared, replaces).await {
            Err(e) if e.account_gone() => {
                // The CA no longer knows the stored account (deactivated, or a test CA
                // restarted): a new one, and the order again.
                tracing::warn!(
                    "ACME: the CA does not know the stored account ({e}); making a new one"
                );
                match fleet {
                    Some(f) => f.forget_account(config),
                    None => {
                        let _ = std::fs::remove_file(store::account(
                            &config.storage,
                            &config.directory,
                        ));
                    }
                }
                let fresh = load_account(config, fleet, stop)
                    .await
                    .map_err(|e| e.to_string())?;
                let got =
                    issue::certificate(&fresh, &site.names, config, challenges, shared, replaces)
                        .await;
                *account = Some(fresh);
                got.map_err(|e| e.to_string())?
            }
            got => got.map_err(|e| e.to_string())?,
        };
    store::write_pair(&site.files, &chain, &key)
        .map_err(|e| format!("{}: {e}", site.files.cert.display()))?;
    if let Some(f) = fleet
        && let Err(e) = f.save(site, &chain, &key)
    {
        // Served here; the other nodes order their own when theirs is due.
        tracing::warn!(names = ?site.names, "ACME: the certificate could not be stored for the fleet: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StorageConfig;

    /// A self-signed chain and key for `names`, valid between the two dates.
    fn pair(names: &[String], from: (i32, u8, u8), to: (i32, u8, u8)) -> (String, String) {
        let mut p = rcgen::CertificateParams::new(names.to_vec()).unwrap();
        p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        p.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        let key = rcgen::KeyPair::generate().unwrap();
        (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// A node kept serving its expired certificate while another node's renewal was
    /// in the shared storage. A stored certificate replaces the served one when it can be
    /// served and expires no sooner; an expired or shorter-lived one never does.
    #[test]
    fn an_expired_certificate_is_never_served_while_a_valid_one_is_in_storage() {
        let dir = std::env::temp_dir().join(format!(
            "linerate-take-stored-{}-{}",
            std::process::id(),
            crate::storage::token()
        ));
        let fleet = Fleet::open(&StorageConfig {
            dir: Some(dir.join("shared")),
            redis: None,
            nodes: 3,
        })
        .unwrap();
        let names = vec!["t.example.test".to_string()];
        let files = store::files(&dir.join("local"), Managed::Acme, &names);
        let mut d = Due {
            site: ManagedSite {
                names: names.clone(),
                managed: Managed::Acme,
                files: files.clone(),
            },
            at: SystemTime::now(),
            failures: 0,
            serving: None,
            until: None,
            ask_at: None,
            ask_failures: 0,
        };
        let served = || std::fs::read_to_string(&files.cert).ok();

        let (expired, key) = pair(&names, (2020, 1, 1), (2020, 2, 1));
        fleet.save(&d.site, &expired, &key).unwrap();
        assert!(!take_stored(&fleet, &mut d), "an expired one is not taken");
        assert_eq!(served(), None);

        let (long, key) = pair(&names, (2020, 1, 1), (2090, 1, 1));
        fleet.save(&d.site, &long, &key).unwrap();
        assert!(take_stored(&fleet, &mut d));
        assert_eq!(served().as_deref(), Some(long.as_str()));
        assert_eq!(std::fs::read_to_string(&files.key).unwrap(), key);
        assert!(
            !take_stored(&fleet, &mut d),
            "the one served is not taken again"
        );

        let (short, key) = pair(&names, (2020, 1, 1), (2080, 1, 1));
        fleet.save(&d.site, &short, &key).unwrap();
        assert!(
            !take_stored(&fleet, &mut d),
            "one that expires sooner is not taken"
        );
        assert_eq!(served().as_deref(), Some(long.as_str()));

        // The served one has expired: the valid one in storage replaces it.
        d.until = Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000));
        d.serving = Some(b"expired".to_vec());
        assert!(take_stored(&fleet, &mut d));
        assert_eq!(served().as_deref(), Some(short.as_str()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
