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
//! Owns the schedule's state per site. Its ACME traffic runs on a current-thread tokio
//! runtime of its own; workers never wait for it.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use super::challenges::Challenges;
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
}

impl Manager {
    /// The manager of `config`'s managed sites; `None` when it has none.
    pub fn new(config: &Config) -> Option<Manager> {
        let sites = managed_sites(config);
        if sites.is_empty() {
            return None;
        }
        Some(Manager {
            config: config.acme.clone().unwrap_or_default(),
            sites,
            challenges: Arc::default(),
            ask_again: Arc::default(),
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
        for s in &self.sites {
            if s.managed == Managed::Internal && store::stored(&s.files, &s.names).is_err() {
                obtain_local(&self.config, s)?;
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
            .spawn(move || self.run(reload, &stop))
    }

    fn run(self, reload: Box<dyn Fn() -> Result<(), String> + Send>, stop: &AtomicBool) {
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
                Due {
                    site: s.clone(),
                    at,
                    failures: 0,
                    serving,
                    ask_at,
                    ask_failures: 0,
                }
            })
            .collect();
        let mut account = None;
        while !stop.load(Ordering::Relaxed) {
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
                runtime.block_on(ask_window(&self.config, &mut account, next));
                continue;
            }
            let site = &next.site;
            let got = match site.managed {
                Managed::Internal => obtain_local(&self.config, site),
                Managed::Acme => runtime.block_on(obtain_acme(
                    &self.config,
                    &mut account,
                    site,
                    &self.challenges,
                    next.serving.as_deref(),
                )),
            };
            let leaf = got.and_then(|()| {
                store::stored(&site.files, &site.names)
                    .map_err(|e| format!("the stored certificate: {e}"))
            });
            match leaf {
                Ok(leaf) => {
                    next.failures = 0;
                    next.at =
                        schedule::renew_at(leaf.not_before, leaf.not_after, schedule::jitter());
                    next.serving = Some(leaf.der);
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
async fn ask_window(config: &AcmeConfig, account: &mut Option<instant_acme::Account>, d: &mut Due) {
    let now = SystemTime::now();
    let asked = async {
        let Some(leaf) = d.serving.as_deref() else {
            return Ok(None);
        };
        if account.is_none() {
            *account = Some(issue::account(config).await?);
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

/// An ACME certificate for `site`, stored (the account is made or loaded on first use).
async fn obtain_acme(
    config: &AcmeConfig,
    account: &mut Option<instant_acme::Account>,
    site: &ManagedSite,
    challenges: &Challenges,
    replaces: Option<&[u8]>,
) -> Result<(), String> {
    if account.is_none() {
        *account = Some(issue::account(config).await.map_err(|e| e.to_string())?);
    }
    let Some(acct) = account.as_ref() else {
        return Err("no account".into());
    };
    let (chain, key) = match issue::certificate(acct, &site.names, config, challenges, replaces)
        .await
    {
        Err(e) if e.account_gone() => {
            // The CA no longer knows the stored account (deactivated, or a test CA
            // restarted): a new one, and the order again.
            tracing::warn!("ACME: the CA does not know the stored account ({e}); making a new one");
            let _ = std::fs::remove_file(store::account(&config.storage, &config.directory));
            let fresh = issue::account(config).await.map_err(|e| e.to_string())?;
            let got = issue::certificate(&fresh, &site.names, config, challenges, replaces).await;
            *account = Some(fresh);
            got.map_err(|e| e.to_string())?
        }
        got => got.map_err(|e| e.to_string())?,
    };
    store::write_pair(&site.files, &chain, &key)
        .map_err(|e| format!("{}: {e}", site.files.cert.display()))
}
