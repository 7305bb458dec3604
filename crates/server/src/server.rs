//! Starting and stopping the server: listeners (one SO_REUSEPORT socket per worker, and one
//! more per worker for HTTPS), TLS set-up and kTLS detection, CPU steering, worker threads,
//! signals (SIGTERM/SIGINT drain, SIGHUP reloads the certificate, SIGUSR1 reopens the access
//! log), systemd's notifications and watchdog ([`crate::notify`]) and graceful shutdown. A
//! listen address some other socket already listens on is
//! refused: SO_REUSEPORT must never share the port with a stranger.
//!
//! Owns the process-level wiring; the request path lives in the workers. Shutdown is a write
//! to each worker's eventfd — from a signal-watching thread or a [`ShutdownHandle`] — so
//! workers never poll a shared flag. Each worker also gets the inbox its deferred answers
//! come back through (another eventfd) and its counters ([`StatsHandle`]).
#![forbid(unsafe_code)]

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::event::{EventfdFlags, eventfd};
use socket2::{Domain, Protocol, Socket, Type};

use crate::access_log::Logs;
use crate::app::deferred::Inbox;
use crate::app::sites::SiteSet;
use crate::app::{App, AppIo};
use crate::config::{Config, ListenAddr};
use crate::driver::SitesMailbox;
use crate::driver::epoll::Epoll;
use crate::driver::{Setup, Shared, Worker};
use crate::privsep::Keep;
use crate::router::Router;
use crate::start_error::{AtPart, Part, StartError};
use crate::stats::{Counters, StatsHandle};
use crate::tls::{CertStore, ClientCa, ClientVerifier};

/// A bound server, ready to run.
pub struct Server {
    /// The listeners, each with its sockets (one per worker).
    bound: Vec<Bound>,
    cpus: Vec<Option<usize>>,
    wakes: Arc<Vec<OwnedFd>>,
    counters: Arc<Vec<Arc<Counters>>>,
    /// The proxy caches of the sites now (for `/metrics` and purges).
    caches: crate::stats::Caches,
    /// The router's gRPC call counters (for `/metrics`).
    grpc: crate::grpc::CallStats,
    /// What tells this node apart on `/metrics`.
    info: Arc<crate::node_info::NodeInfo>,
    shared: Arc<Shared>,
    steering: bool,
    /// The workers' I/O backend.
    io: crate::config::Io,
    /// The static-file root, opened once; each worker gets its own cache from it.
    /// The sites and their opened roots at start.
    sites: Arc<SiteSet>,
    /// Each worker's reload mailbox and the eventfd that wakes it.
    reloads: Arc<Vec<(Arc<SitesMailbox>, OwnedFd)>>,
    /// The access logs' writers, opened at bind so a bad path fails before the banner.
    logs: Option<Logs>,
    /// Tracing's exporter (started at bind), when tracing is on.
    tracing: Option<crate::trace::Tracing>,
    /// What the exporter has done (`linerate_tracing_*`).
    trace_stats: Option<Arc<crate::trace::TraceStats>>,
    /// Each HTTPS listener's certificate, reloadable.
    certs: Vec<Arc<CertStore>>,
    /// The client CA bundles of the listeners that ask for client certificates.
    client_cas: Vec<Arc<ClientCa>>,
    workers: usize,
    /// The admin listener (`/metrics`, `/healthz`), when configured.
    admin: Option<TcpListener>,
    draining: Arc<AtomicBool>,
    /// Makes each worker's [`crate::WorkerLocal`], on its thread.
    local: Option<crate::WorkerLocalFactory>,
    /// Runs on each worker's thread, in its runtime's context, before it serves.
    worker_start: Option<crate::WorkerStart>,
    /// The certificates the server obtains itself, and their thread's work (started by
    /// `run`).
    acme: Option<crate::acme::Manager>,
    /// Set by a reload: that thread asks the CA again about its certificates.
    acme_ask_again: Option<Arc<AtomicBool>>,
    /// The QUIC listeners: each one's UDP sockets (one per worker) and configuration.
    quic: Vec<QuicBound>,
    /// The ticket keys of the TLS listeners that name key files.
    ticket_keys: Vec<Arc<crate::tls::TicketKeys>>,
    /// The fleet's ticket keys from `[storage]` and their thread.
    #[cfg(all(feature = "tls", feature = "storage"))]
    _fleet_tickets: Option<crate::ticket_rotation::Fleet>,
    /// Set to stop the admin thread: at exit, or at once when a new process took the
    /// listeners (its own admin thread answers `/healthz` from then on).
    stop_admin: Arc<AtomicBool>,
    /// How long SIGTERM/SIGINT keep accepting, `/healthz` failing, before the drain.
    shutdown_delay: std::time::Duration,
    /// The listening sockets offered to a new process on the upgrade socket.
    offer: Option<crate::handoff::Offer>,
    /// The upgrade socket, bound; and where it moves once the old process let go of the
    /// path (a takeover from the same path binds beside it first).
    upgrade: Option<(OwnedFd, Option<(std::path::PathBuf, std::path::PathBuf)>)>,
    /// The old process's sockets were taken: told to drain once the workers run.
    taken: Option<crate::handoff::Taken>,
}

/// One QUIC listener after binding.
struct QuicBound {
    /// Its TCP listener's id.
    listener: usize,
    addr: SocketAddr,
    config: crate::driver::quic::QuicConfig,
    socks: Vec<std::net::UdpSocket>,
}

/// One listener after binding: its address (the real port when 0 was asked for), whether it
/// speaks HTTPS, and its sockets, one per worker.
struct Bound {
    addr: ListenAddr,
    tls: bool,
    h2c: bool,
    socks: Vec<OwnedFd>,
    /// Members of a taken-over SO_REUSEPORT group beyond one per worker: accepted from too
    /// (closing one would reset the connections in its queue).
    extra: Vec<OwnedFd>,
    /// Passed by systemd (socket activation): one socket shared by the workers, not in a
    /// SO_REUSEPORT group of ours, and a Unix socket's file is the service manager's.
    passed: bool,
}

/// Reloads what can change under a running server (SIGHUP) and reopens its log (SIGUSR1),
/// from any thread.
#[derive(Clone)]
pub struct ControlHandle {
    certs: Vec<Arc<CertStore>>,
    client_cas: Vec<Arc<ClientCa>>,
    reloads: Arc<Vec<(Arc<SitesMailbox>, OwnedFd)>>,
    logs: Option<Logs>,
    acme_ask_again: Option<Arc<AtomicBool>>,
    caches: crate::stats::Caches,
    ticket_keys: Vec<Arc<crate::tls::TicketKeys>>,
    /// What tells this node apart on `/metrics`.
    info: Arc<crate::node_info::NodeInfo>,
}

/// What a reload did.
#[derive(Debug)]
pub enum Reloaded {
    /// The certificates were read again from these files and serve the next handshakes.
    Certificates(Vec<std::path::PathBuf>),
    /// Nothing to reload: no certificate is configured.
    Nothing,
}

impl ControlHandle {
    /// Reads the certificate and key again; on an error the one in use stays.
    /// Every certificate is read and checked before any is swapped in.
    pub fn reload(&self) -> Result<Reloaded, crate::tls::TlsError> {
        if self.certs.is_empty() {
            return Ok(Reloaded::Nothing);
        }
        let fresh = self
            .certs
            .iter()
            .map(|c| c.read_again())
            .collect::<Result<Vec<_>, _>>()?;
        let cas = self.read_cas()?;
        for (c, key) in self.certs.iter().zip(fresh) {
            c.swap(key);
        }
        self.swap_cas(cas);
        Ok(Reloaded::Certificates(
            self.certs.iter().flat_map(|c| c.cert_paths()).collect(),
        ))
    }

    /// Has the certificate thread ask the CA at once about the renewal window of every
    /// certificate it obtained (RFC 9773), rather than at the time the CA asked for: a
    /// certificate the CA revoked or recalls is then replaced without waiting. Nothing when the
    /// server obtains none.
    pub fn ask_ca_again(&self) {
        if let Some(flag) = &self.acme_ask_again {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Builds the sites of `config` (reading error pages, opening roots) and hands them to
    /// every worker, which answers from them from its next event on: no connection or
    /// request is dropped. On an error (naming the path) the sites in use stay. Only the
    /// sites are taken from `config`; listeners, limits and the rest need a restart.
    ///
    /// The certificates go with the sites: every TLS listener's own and those of `config`'s
    /// sites are read again and checked first, and swapped in only when the sites build too.
    pub fn reload_sites(&self, config: &Config) -> io::Result<()> {
        crate::features::check_sites(config)?;
        let named = crate::tls::named_certs(config);
        let certs = self
            .certs
            .iter()
            .map(|c| c.read_with(named.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(io::Error::other)?;
        let cas = self.read_cas().map_err(io::Error::other)?;
        let mut set = SiteSet::build(config)?;
        if let Some(logs) = &self.logs {
            set.route_logs(&logs.route(config)?);
        }
        {
            let old = self.caches.lock().unwrap_or_else(|e| e.into_inner());
            crate::proxy::cache_admin::carry_over(&old, &mut set);
        }
        let set = Arc::new(set);
        set.check_roots()?;
        *self.caches.lock().unwrap_or_else(|e| e.into_inner()) =
            crate::proxy::cache_admin::admin_views(&set);
        for (c, fresh) in self.certs.iter().zip(certs) {
            c.swap(fresh);
        }
        self.swap_cas(cas);
        for (mailbox, wake) in self.reloads.iter() {
            *mailbox.lock().unwrap_or_else(|e| e.into_inner()) = Some(set.clone());
            let _ = rustix::io::write(wake, &1u64.to_ne_bytes());
        }
        Ok(())
    }

    /// Every client CA bundle read again, none used yet.
    fn read_cas(&self) -> Result<Vec<ClientVerifier>, crate::tls::TlsError> {
        self.client_cas.iter().map(|c| c.read_again()).collect()
    }

    fn swap_cas(&self, cas: Vec<ClientVerifier>) {
        for (c, v) in self.client_cas.iter().zip(cas) {
            c.swap(v);
        }
    }

    /// Reads every TLS listener's ticket key files again and swaps them in, all or nothing:
    /// on an error (naming the file) the keys in use stay. `Ok(None)` when no listener
    /// names key files; else the number of keys the first listener now holds.
    pub fn reload_ticket_keys(&self) -> Result<Option<usize>, crate::tls::TlsError> {
        let rings = self
            .ticket_keys
            .iter()
            .map(|k| k.read_again())
            .collect::<Result<Vec<_>, _>>()?;
        let first = rings.first().map(|r| r.names().count());
        for (k, ring) in self.ticket_keys.iter().zip(rings) {
            k.swap(ring);
        }
        Ok(first)
    }

    /// What this node reports about itself on `/metrics` (its build, the configuration in
    /// use, how the last reload went): a reload says how it went here.
    pub fn node_info(&self) -> &Arc<crate::node_info::NodeInfo> {
        &self.info
    }

    /// Reopens the access log files (after logrotate renamed them); a no-op without one.
    pub fn reopen_logs(&self) {
        if let Some(l) = &self.logs {
            l.reopen();
        }
    }
}

/// Triggers a graceful shutdown from another thread (tests, embedding programs).
#[derive(Clone)]
pub struct ShutdownHandle {
    wakes: Arc<Vec<OwnedFd>>,
    /// Set once a shutdown starts (the admin `/healthz` answers 503 from then on).
    draining: Arc<AtomicBool>,
    /// The upgrade socket's offer, ended with the drain.
    offer: Option<crate::handoff::Offer>,
}

impl ShutdownHandle {
    /// Asks every worker to stop accepting, finish in-flight requests and exit.
    pub fn shutdown(&self) {
        self.draining.store(true, Ordering::Relaxed);
        // The copies offered for an upgrade go first: held on, their sockets would stay in
        // their reuseport groups with nobody accepting.
        if let Some(o) = &self.offer {
            o.end();
        }
        for fd in self.wakes.iter() {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }

    /// `/healthz` answers 503 at once, and the workers keep accepting and serving for
    /// `delay` (a balancer moves traffic away meanwhile); then [`ShutdownHandle::shutdown`].
    pub fn shutdown_after(&self, delay: std::time::Duration) -> io::Result<()> {
        if delay.is_zero() {
            self.shutdown();
            return Ok(());
        }
        self.draining.store(true, Ordering::Relaxed);
        let handle = self.clone();
        std::thread::Builder::new()
            .name("linerate-delay".into())
            .spawn(move || {
                std::thread::sleep(delay);
                tracing::info!("shutdown delay over: draining connections");
                handle.shutdown();
            })?;
        Ok(())
    }
}

/// Switches the process (every thread) to user `name`, its group and its supplementary
/// groups. As root it is the real drop; otherwise only a "switch" to the user the process
/// already is succeeds.
fn switch_user(name: &str) -> io::Result<()> {
    if !rustix::process::geteuid().is_root() {
        let me = rustix::process::getuid().as_raw();
        if crate::sys::lookup_user(name).is_ok_and(|(uid, _)| uid == me) {
            return Ok(());
        }
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("cannot switch to user {name:?}: not started as root"),
        ));
    }
    let (uid, gid) = crate::sys::switch_user(name)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot switch to user {name:?}: {e}")))?;
    tracing::info!(user = name, uid, gid, "privileges dropped");
    Ok(())
}

/// Why a router with gRPC services and no listener that speaks HTTP/2 is refused: gRPC's
/// clients (grpc-go, grpcurl, `curl --http2-prior-knowledge`) would get an empty reply, with
/// no word from the server (gRPC-Web alone goes over HTTP/1.1 too; the same setting costs it
/// nothing).
const NO_HTTP2_FOR_GRPC: &str = "the router serves gRPC, and no listener speaks HTTP/2: \
     set Config::h2c_preface (HTTP/2 with prior knowledge beside HTTP/1.1, the default with \
     the http2 feature) or Listen::h2c_preface, add an h2c listener (Config::h2c), or offer \
     h2 over TLS (TlsConfig::http2)";

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

impl Server {
    /// Binds one listener per worker and prepares the workers. An error says which part of
    /// `config` it is about ([`StartError::part`]); it converts into an `io::Error`. A
    /// router with a method and pattern registered twice is refused ([`Part::Routes`]).
    pub fn bind(config: Config, router: Router) -> Result<Server, StartError> {
        Self::bind_from(config, router, None)
    }

    /// [`Server::bind`], serving the listening sockets a running server handed over on its
    /// upgrade socket ([`crate::handoff`]): a listener the old one had (same address) is
    /// served on its very sockets, one the old one lacked is bound, and the old one's others
    /// are closed. [`Server::run`] tells the old server to drain once the workers run.
    pub fn bind_taking_over(
        config: Config,
        router: Router,
        taken: crate::handoff::Taken,
    ) -> Result<Server, StartError> {
        Self::bind_from(config, router, Some(taken))
    }

    fn bind_from(
        config: Config,
        mut router: Router,
        mut taken: Option<crate::handoff::Taken>,
    ) -> Result<Server, StartError> {
        use crate::handoff::Kind;
        router
            .finish()
            .map_err(|e| StartError::invalid(Part::Routes, e.to_string()))?;
        crate::features::check(&config)?;
        if router.has_grpc() && !config.speaks_http2() {
            return Err(StartError::invalid(Part::Grpc, NO_HTTP2_FOR_GRPC.into()));
        }
        let allowed = allowed_cpus();
        if let Some(bad) = config.cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(StartError::invalid(
                Part::Cpus,
                format!("CPU {bad} is not available to this process (allowed: {allowed:?})"),
            ));
        }
        let cpus = if config.cpus.is_empty() {
            allowed
        } else {
            config.cpus.clone()
        };
        if cpus.is_empty() {
            return Err(StartError::invalid(Part::Cpus, "no CPU to run on".into()));
        }
        let workers = if config.workers == 0 {
            cpus.len()
        } else {
            config.workers
        };
        // Every listener: TCP ones get one SO_REUSEPORT socket per worker, a Unix socket is
        // one socket every worker accepts from.
        let mut bound: Vec<Bound> = Vec::new();
        // Sockets systemd bound for us (socket activation), matched by address below.
        let mut passed = crate::activation::Passed::take().at(Part::Other)?;
        let mut certs = Vec::new();
        let mut client_cas = Vec::new();
        let mut ticket_keys = Vec::new();
        // With [storage], the fleet's ticket keys, taken (or made) before any listener
        // serves, for the TLS listeners without key files of their own.
        #[cfg(all(feature = "tls", feature = "storage"))]
        let fleet_tickets = crate::ticket_rotation::Fleet::start(&config)
            .map_err(|e| StartError::invalid(Part::Other, format!("TLS ticket keys: {e}")))?;
        // Sites' own certificates, chosen by SNI on every TLS listener.
        let named = crate::tls::named_certs(&config);
        // Certificates obtained by the server: the local CA's are made now (no network), so
        // the listeners read them below; ACME's come from the thread `run` starts.
        let acme = crate::acme::Manager::new(&config);
        if let Some(m) = &acme {
            m.prepare()
                .map_err(|e| StartError::invalid(Part::Other, e))?;
        }
        let has_acme = config
            .sites
            .iter()
            .any(|s| s.managed == Some(crate::config::Managed::Acme));
        let challenge = config
            .acme
            .as_ref()
            .filter(|_| has_acme)
            .map(|a| a.challenge);
        let tls_alpn01 = acme
            .as_ref()
            .filter(|_| challenge == Some(crate::config::AcmeChallenge::TlsAlpn01))
            .map(|m| m.challenges.clone());
        let http01 = acme
            .as_ref()
            .filter(|_| challenge == Some(crate::config::AcmeChallenge::Http01))
            .map(|m| m.challenges.clone());
        let mut listener_tls = Vec::new();
        let mut listener_h2c = Vec::new();
        let mut listener_redirect = Vec::new();
        let mut listener_alt_svc = Vec::new();
        let mut listener_proxy = Vec::new();
        let mut listener_h2c_preface = Vec::new();
        let mut quic = Vec::new();
        for (i, l) in config.listen_list().into_iter().enumerate() {
            let part = Part::Listener(i);
            if l.proxy_protocol && matches!(l.addr, ListenAddr::Unix(_)) {
                return Err(StartError::invalid(
                    part,
                    format!("{}: proxy_protocol is for a TCP listener", l.addr),
                ));
            }
            if l.redirect_to_https.is_some()
                && (l.h2c || l.tls.is_some() || matches!(l.addr, ListenAddr::Unix(_)))
            {
                return Err(StartError::invalid(
                    part,
                    format!(
                        "{}: redirect_to_https is for a cleartext HTTP/1.1 TCP listener",
                        l.addr
                    ),
                ));
            }
            if l.h2c_preface && (l.h2c || l.tls.is_some()) {
                return Err(StartError::invalid(
                    part,
                    format!(
                        "{}: h2c_preface is for a cleartext HTTP/1.1 listener (no tls: ALPN offers h2 there; no h2c: it speaks only HTTP/2)",
                        l.addr
                    ),
                ));
            }
            if l.h2c && l.tls.is_some() {
                return Err(StartError::invalid(
                    part,
                    format!(
                        "{}: h2c is cleartext HTTP/2; over TLS, ALPN offers h2",
                        l.addr
                    ),
                ));
            }
            let tls = match &l.tls {
                Some(t) => {
                    #[allow(unused_mut)] // Changed only with the fleet's keys.
                    let mut built =
                        crate::tls::server_config_with_store(t, &named, tls_alpn01.clone())
                            .map_err(|e| StartError::invalid(part, format!("HTTPS: {e}")))?;
                    #[cfg(all(feature = "tls", feature = "storage"))]
                    if let Some(f) = &fleet_tickets {
                        f.seal(&mut built.config, &t.options);
                    }
                    certs.push(built.store);
                    client_cas.extend(built.client_ca);
                    ticket_keys.extend(built.ticket_keys);
                    Some(built.config)
                }
                None => None,
            };
            // The old process's sockets on this address, in a takeover: a reuseport group,
            // or one socket every worker accepts from.
            let inherited = taken.as_mut().and_then(|t| {
                let key = l.addr.to_string();
                t.claim(Kind::Tcp, &key)
                    .map(|f| (f, false))
                    .or_else(|| t.claim(Kind::Shared, &key).map(|f| (f, true)))
                    .filter(|(f, _)| !f.is_empty())
            });
            let mut extra = Vec::new();
            let (addr, socks, was_passed) = match (&l.addr, passed.claim(&l.addr), inherited) {
                (a, None, Some((mut fds, true))) => {
                    let s = fds.swap_remove(0);
                    let mut socks = Vec::with_capacity(workers);
                    for _ in 1..workers {
                        socks.push(s.try_clone().at(part)?);
                    }
                    socks.push(s);
                    // A TCP one came from systemd: no reuseport group of ours, no steering.
                    (a.clone(), socks, matches!(a, ListenAddr::Tcp(_)))
                }
                (ListenAddr::Tcp(at), None, Some((mut socks, false))) => {
                    // More members than workers: the rest are accepted from too. Fewer: new
                    // members join the group (same address and user).
                    if socks.len() > workers {
                        extra = socks.split_off(workers);
                    }
                    while socks.len() < workers {
                        let s = listen(*at, config.backlog, config.max_unsent_bytes)
                            .map_err(|e| {
                                io::Error::new(e.kind(), format!("cannot listen on {at}: {e}"))
                            })
                            .at(part)?;
                        socks.push(OwnedFd::from(s));
                    }
                    (ListenAddr::Tcp(*at), socks, false)
                }
                // Passed by systemd: every worker accepts from it.
                (a, Some(s), _) => {
                    if matches!(a, ListenAddr::Tcp(_)) {
                        limit_unsent(&s, config.max_unsent_bytes).at(part)?;
                    }
                    let mut socks = Vec::with_capacity(workers);
                    for _ in 1..workers {
                        socks.push(s.try_clone().at(part)?);
                    }
                    socks.push(s);
                    (a.clone(), socks, true)
                }
                (ListenAddr::Tcp(addr), None, _) => {
                    let mut addr = *addr;
                    refuse_shared(addr).at(part)?;
                    let mut socks = Vec::with_capacity(workers);
                    for _ in 0..workers {
                        let s = listen(addr, config.backlog, config.max_unsent_bytes)
                            .map_err(|e| {
                                io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
                            })
                            .at(part)?;
                        // Port 0: the first bind picks the port, the others join it.
                        addr = s.local_addr().at(part)?;
                        socks.push(OwnedFd::from(s));
                    }
                    (ListenAddr::Tcp(addr), socks, false)
                }
                (ListenAddr::Unix(path), None, _) => {
                    let s = listen_unix(path, config.backlog, &l.unix_perms)
                        .map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("cannot listen on unix:{}: {e}", path.display()),
                            )
                        })
                        .at(part)?;
                    let mut socks = Vec::with_capacity(workers);
                    for _ in 1..workers {
                        socks.push(s.try_clone()?);
                    }
                    socks.push(s);
                    (ListenAddr::Unix(path.clone()), socks, false)
                }
            };
            if l.quic {
                let (Some(tls), ListenAddr::Tcp(at)) = (&tls, &addr) else {
                    return Err(StartError::invalid(
                        part,
                        format!("{}: quic is for a TLS listener on an address", l.addr),
                    ));
                };
                let config = crate::driver::quic::QuicConfig::new(
                    tls,
                    config.keepalive_timeout.as_millis() as u64,
                )
                .map_err(|e| StartError::invalid(part, format!("{at}: HTTP/3: {e}")))?;
                let udp_error = |e: io::Error| {
                    io::Error::new(e.kind(), format!("cannot listen on udp {at}: {e}"))
                };
                // In a takeover, the old group's members: one per worker, more are closed
                // (a worker reads one socket per QUIC listener; a datagram queued there is
                // lost, and QUIC sends it again), fewer are joined by new ones.
                let socks = match taken
                    .as_mut()
                    .and_then(|t| t.claim(Kind::Udp, &at.to_string()))
                {
                    Some(fds) => {
                        let mut socks: Vec<std::net::UdpSocket> =
                            fds.into_iter().take(workers).map(Into::into).collect();
                        let more = bind_udp(*at, workers - socks.len())
                            .map_err(udp_error)
                            .at(part)?;
                        socks.extend(more);
                        socks
                    }
                    None => bind_udp(*at, workers).map_err(udp_error).at(part)?,
                };
                quic.push(QuicBound {
                    listener: i,
                    addr: *at,
                    config,
                    socks,
                });
            }
            listener_tls.push(tls);
            listener_h2c.push(l.h2c);
            listener_redirect.push(l.redirect_to_https);
            listener_alt_svc.push(
                quic.last()
                    .filter(|q| q.listener == i)
                    .map(|q| q.addr.port()),
            );
            listener_proxy.push(l.proxy_protocol);
            listener_h2c_preface.push(l.h2c_preface);
            bound.push(Bound {
                addr,
                tls: l.tls.is_some(),
                h2c: l.h2c,
                socks,
                extra,
                passed: was_passed,
            });
        }
        // A redirect to the HTTPS port asked as 0 goes to the port the first TLS listener got.
        if let Some(port) = bound.iter().find_map(|b| match (&b.addr, b.tls) {
            (ListenAddr::Tcp(a), true) => Some(a.port()),
            _ => None,
        }) {
            for r in listener_redirect.iter_mut() {
                if *r == Some(0) {
                    *r = Some(port);
                }
            }
        }
        if let Some(a) = passed.unclaimed() {
            return Err(StartError::invalid(
                Part::Other,
                format!("LISTEN_FDS: systemd passed a socket on {a}, which no listener names"),
            ));
        }
        let any_tls = config.listen_list().iter().any(|l| l.tls.is_some());
        let ktls_wanted = config
            .listen_list()
            .iter()
            .any(|l| l.tls.as_ref().is_some_and(|t| t.ktls));
        let kernel_ciphers = if ktls_wanted {
            crate::tls::ktls_ciphers()
        } else {
            crate::tls::KernelCiphers::default()
        };
        let ktls = kernel_ciphers.any();
        if any_tls {
            tracing::info!(
                ktls,
                ciphers = %kernel_ciphers,
                "HTTPS: {}",
                if ktls {
                    "kernel TLS after each handshake (sendfile for files)"
                } else {
                    "user-space TLS (rustls)"
                }
            );
        }
        let worker_cpus: Vec<Option<usize>> = (0..workers)
            .map(|i| config.pin.then(|| cpus[i % cpus.len()]))
            .collect();
        let mut steering = false;
        if config.steering && workers > 1 {
            let pinned: Vec<usize> = worker_cpus.iter().map(|c| c.unwrap_or(0)).collect();
            let program = crate::sys::cpu_steering_program(&pinned);
            let attached = bound
                .iter()
                .filter(|b| matches!(b.addr, ListenAddr::Tcp(_)) && !b.passed)
                .try_for_each(|b| crate::sys::attach_reuseport_cbpf(b.socks[0].as_fd(), &program));
            match attached {
                Ok(()) => steering = true,
                Err(e) => {
                    tracing::warn!(error = %e, "CPU steering (SO_ATTACH_REUSEPORT_CBPF) unavailable; kernel hashing used")
                }
            }
        }
        // LINERATE_QUIC_STEERING=off leaves QUIC to the kernel's 4-tuple hash (to see the
        // routing between workers carry a connection whose client address changed).
        let steer = std::env::var_os("LINERATE_QUIC_STEERING").is_none_or(|v| v != "off");
        if workers > 1 && steer {
            // Short-header packets go to the worker their connection ID names.
            let program = crate::sys::quic_steering_program(workers);
            for q in &quic {
                if let Err(e) = crate::sys::attach_reuseport_cbpf(q.socks[0].as_fd(), &program) {
                    tracing::warn!(addr = %q.addr, error = %e, "QUIC steering (SO_ATTACH_REUSEPORT_CBPF) unavailable: packets of a client whose address changes are routed between workers");
                }
            }
        }
        let wakes = (0..workers)
            .map(|_| {
                eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(io::Error::from)
            })
            .collect::<io::Result<Vec<_>>>()?;
        let admin_taken = match (config.admin, taken.as_mut()) {
            (Some(addr), Some(t)) => t
                .claim(Kind::Admin, &addr.to_string())
                .and_then(|mut f| f.pop())
                .map(TcpListener::from),
            _ => None,
        };
        let admin = match config.admin {
            Some(_) if admin_taken.is_some() => admin_taken,
            Some(addr) => {
                refuse_shared(addr).at(Part::Admin)?;
                Some(
                    TcpListener::bind(addr)
                        .map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("cannot listen on {addr} (admin): {e}"),
                            )
                        })
                        .at(Part::Admin)?,
                )
            }
            None => None,
        };
        let mut sites = SiteSet::build(&config)?;
        let logs = Logs::start(&config)?;
        if let Some(logs) = &logs {
            sites.route_logs(&logs.route(&config)?);
        }
        let trace_stats = config
            .tracing
            .as_ref()
            .map(|_| Arc::new(crate::trace::TraceStats::default()));
        let tracing = match (&config.tracing, &trace_stats) {
            (Some(t), Some(stats)) => {
                Some(crate::trace::Tracing::start(t, stats.clone()).at(Part::Other)?)
            }
            _ => None,
        };
        let sites = Arc::new(sites);
        sites.check_roots()?;
        let (offer, upgrade) = match &config.upgrade_socket {
            Some(path) => {
                let offer = offer_of(&bound, &quic, admin.as_ref(), path).at(Part::Other)?;
                // Taking over from this very path: bind beside it, and move there once the old
                // process let it go.
                let (at, moved) = match &taken {
                    Some(t) if t.path() == path.as_path() => {
                        let mut beside = path.clone().into_os_string();
                        beside.push(".new");
                        let beside = std::path::PathBuf::from(beside);
                        (beside.clone(), Some((beside, path.clone())))
                    }
                    _ => (path.clone(), None),
                };
                let sock = crate::handoff::bind_upgrade_socket(&at)
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("upgrade_socket {}: {e}", at.display()))
                    })
                    .at(Part::Other)?;
                (Some(offer), Some((sock, moved)))
            }
            None => (None, None),
        };
        let counters = (0..workers).map(|_| Arc::default()).collect();
        let grpc = router.grpc.calls.clone();
        if config.admin.is_some() {
            grpc.turn_on();
        }
        let caches = Arc::new(std::sync::Mutex::new(
            crate::proxy::cache_admin::admin_views(&sites),
        ));
        let reloads = (0..workers)
            .map(|_| {
                let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
                Ok((Arc::new(SitesMailbox::default()), fd))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Server {
            bound,
            workers,
            admin,
            draining: Arc::default(),
            cpus: worker_cpus,
            wakes: Arc::new(wakes),
            counters: Arc::new(counters),
            caches,
            grpc,
            info: {
                let info = crate::node_info::NodeInfo::new();
                info.set_effective(&config);
                info
            },
            shared: Arc::new(Shared {
                conn: crate::h1::ConnConfig {
                    extended_connect: announces_extended_connect(&config, &router),
                    ..config.conn()
                },
                app: App::new(router, &config, http01),
                listener_tls,
                listener_h2c,
                listener_redirect,
                listener_alt_svc,
                listener_proxy,
                listener_h2c_preface,
                client_conns: (config.max_conns_per_client > 0).then(|| {
                    Arc::new(crate::client_conns::ClientConns::new(
                        config.max_conns_per_client,
                        config.count_loopback_clients,
                    ))
                }),
                tls_policy: crate::tls::TlsPolicy {
                    kernel: kernel_ciphers,
                    key_update_bytes: config
                        .listen_list()
                        .iter()
                        .find_map(|l| l.tls.as_ref().map(|t| t.key_update_bytes))
                        .unwrap_or(crate::tls::TLS_KEY_UPDATE_BYTES),
                },
                drain_timeout: config.drain_timeout,
                handed_over: offer
                    .as_ref()
                    .map_or_else(Arc::default, |o| o.handed_over.clone()),
                handoff_relays: offer
                    .as_ref()
                    .map_or_else(Arc::default, |o| o.relays.clone()),
            }),
            steering,
            io: config.io,
            sites,
            reloads: Arc::new(reloads),
            logs,
            tracing,
            trace_stats,
            certs,
            client_cas,
            local: None,
            worker_start: None,
            acme_ask_again: acme.as_ref().map(|m| m.ask_again()),
            acme,
            quic,
            ticket_keys,
            #[cfg(all(feature = "tls", feature = "storage"))]
            _fleet_tickets: fleet_tickets,
            stop_admin: Arc::default(),
            shutdown_delay: config.shutdown_delay,
            offer,
            upgrade,
            taken,
        })
    }

    /// Gives every worker work of the application's own on its thread (see
    /// [`crate::WorkerLocal`]): `factory` runs on each worker's thread before it serves, with
    /// the worker's index; an error ends that worker, and [`Server::run`] returns it once the
    /// others have stopped.
    pub fn with_worker_local(mut self, factory: crate::WorkerLocalFactory) -> Server {
        self.local = Some(factory);
        self
    }

    /// Runs `start` on each worker's thread before it serves, with the worker's index, inside
    /// the worker's tokio runtime's context: it may open what the worker's handlers will use
    /// (connections that [`crate::OnWorker`]'s futures reach) and wait for it with
    /// [`crate::runtime::block_on`]. An error ends that worker, and [`Server::run`] returns
    /// it once the others have stopped.
    pub fn with_worker_start(mut self, start: crate::WorkerStart) -> Server {
        self.worker_start = Some(start);
        self
    }

    /// Drops root: starts the privilege keeper ([`crate::privsep`]) for the files this server
    /// will need again — its certificates and keys, its error pages, its access log — and the
    /// ones in `also` (a configuration file), then switches the process to user `name`, and
    /// checks that every site root can still be searched. Call it after [`Server::bind`] and
    /// before [`Server::run`]. A process not running as root can only "switch" to the user it
    /// already is.
    pub fn drop_privileges(&self, name: &str, also: Keep) -> Result<(), StartError> {
        if rustix::process::geteuid().is_root() {
            let (uid, gid) = match crate::sys::lookup_user(name).at(Part::User)? {
                (uid, Some(gid)) => (uid, gid),
                (_, None) => {
                    return Err(StartError::invalid(
                        Part::User,
                        format!("cannot switch to user {name:?}: no such user"),
                    ));
                }
            };
            let target = crate::privsep::Target {
                uid,
                gids: crate::sys::user_groups(name, gid).at(Part::User)?,
            };
            let mut keep = also;
            for c in &self.certs {
                keep.read.extend(c.files());
            }
            for c in &self.client_cas {
                keep.read.push(c.path().to_path_buf());
            }
            for k in &self.ticket_keys {
                keep.read.extend(k.paths().iter().cloned());
            }
            keep.read.extend(self.sites.read_paths());
            if let Some(logs) = &self.logs {
                keep.append
                    .extend(logs.files().map(std::path::Path::to_path_buf));
            }
            crate::privsep::start(&keep, &target).at(Part::User)?;
        }
        switch_user(name).at(Part::User)?;
        self.sites.check_roots()
    }

    /// A handle that reloads the certificate and reopens the access log.
    pub fn control(&self) -> ControlHandle {
        ControlHandle {
            certs: self.certs.clone(),
            client_cas: self.client_cas.clone(),
            reloads: self.reloads.clone(),
            logs: self.logs.clone(),
            acme_ask_again: self.acme_ask_again.clone(),
            caches: self.caches.clone(),
            ticket_keys: self.ticket_keys.clone(),
            info: self.info.clone(),
        }
    }

    /// What this node reports about itself on `/metrics`: the binary sets its build and
    /// the configuration it runs.
    pub fn node_info(&self) -> &Arc<crate::node_info::NodeInfo> {
        &self.info
    }

    /// The first plain-HTTP/1.1 TCP address (with the real port when 0 was asked for); else
    /// the first TCP address; `0.0.0.0:0` for a server on Unix sockets only.
    pub fn local_addr(&self) -> SocketAddr {
        let tcp = |tls: Option<bool>| {
            self.bound.iter().find_map(|b| match b.addr {
                ListenAddr::Tcp(a) if tls.is_none_or(|t| t == b.tls && !b.h2c) => Some(a),
                _ => None,
            })
        };
        tcp(Some(false))
            .or(tcp(None))
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The first HTTPS TCP address, when one is configured.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.bound.iter().find_map(|b| match b.addr {
            ListenAddr::Tcp(a) if b.tls => Some(a),
            _ => None,
        })
    }

    /// The UDP addresses HTTP/3 is served on (`quic` listeners).
    pub fn quic_addrs(&self) -> Vec<SocketAddr> {
        self.quic.iter().map(|q| q.addr).collect()
    }

    /// The first h2c (cleartext HTTP/2 with prior knowledge) TCP address, when one is
    /// configured.
    pub fn h2c_addr(&self) -> Option<SocketAddr> {
        self.bound.iter().find_map(|b| match b.addr {
            ListenAddr::Tcp(a) if b.h2c => Some(a),
            _ => None,
        })
    }

    /// The h2c listeners' addresses (cleartext HTTP/2 only).
    pub fn h2c_listeners(&self) -> Vec<ListenAddr> {
        self.bound
            .iter()
            .filter(|b| b.h2c)
            .map(|b| b.addr.clone())
            .collect()
    }

    /// Every listener: its address (real ports) and whether it speaks HTTPS.
    pub fn listening(&self) -> Vec<(ListenAddr, bool)> {
        self.bound.iter().map(|b| (b.addr.clone(), b.tls)).collect()
    }

    /// Whether HTTPS connections hand their keys to the kernel (kTLS) after the handshake.
    pub fn ktls(&self) -> bool {
        self.shared.tls_policy.kernel.any()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Whether the CPU-steering program is attached.
    pub fn steering(&self) -> bool {
        self.steering
    }

    /// Reads the server's counters (deferred answers outstanding, refused, timed out, late).
    pub fn stats(&self) -> StatsHandle {
        StatsHandle {
            workers: self.counters.clone(),
            caches: self.caches.clone(),
            grpc: self.grpc.clone(),
            info: self.info.clone(),
            certs: self.certs.clone(),
            tracing: self.trace_stats.clone(),
        }
    }

    /// A handle that starts a graceful shutdown.
    pub fn handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            wakes: self.wakes.clone(),
            draining: self.draining.clone(),
            offer: self.offer.clone(),
        }
    }

    /// The admin listener's address, when one is configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Runs the workers until a shutdown completes.
    pub fn run(mut self) -> io::Result<()> {
        let stop_acme = Arc::new(AtomicBool::new(false));
        if let Some(m) = self.acme.take() {
            let control = self.control();
            m.spawn(
                Box::new(move || control.reload().map(drop).map_err(|e| e.to_string())),
                stop_acme.clone(),
            )?;
        }
        let shutdown = self.handle();
        let logs = self.logs;
        let tracing = self.tracing.take();
        let stop_admin = self.stop_admin.clone();
        let admin = match self.admin {
            Some(listener) => {
                let (stats, stop, draining) = (
                    StatsHandle {
                        workers: self.counters.clone(),
                        caches: self.caches.clone(),
                        grpc: self.grpc.clone(),
                        info: self.info.clone(),
                        certs: self.certs.clone(),
                        tracing: self.trace_stats.clone(),
                    },
                    stop_admin.clone(),
                    self.draining.clone(),
                );
                Some(
                    std::thread::Builder::new()
                        .name("linerate-admin".into())
                        .spawn(move || crate::admin::serve(listener, stats, stop, draining))?,
                )
            }
            None => None,
        };
        let mut threads = Vec::new();
        // Worker threads still running (the watchdog pings only while all are).
        let alive = Arc::new(std::sync::atomic::AtomicUsize::new(self.workers));
        // Worker i takes socket i of every listener.
        let mut per_worker: Vec<Vec<OwnedFd>> = (0..self.workers).map(|_| Vec::new()).collect();
        let mut extra_per_worker: Vec<Vec<(OwnedFd, usize)>> =
            (0..self.workers).map(|_| Vec::new()).collect();
        let mut unix_paths = Vec::new();
        for (id, b) in self.bound.into_iter().enumerate() {
            if let ListenAddr::Unix(p) = &b.addr
                && !b.passed
            {
                unix_paths.push(p.clone());
            }
            for (w, s) in b.socks.into_iter().enumerate() {
                per_worker[w].push(s);
            }
            for (j, s) in b.extra.into_iter().enumerate() {
                extra_per_worker[j % self.workers].push((s, id));
            }
        }
        let mut extra_per_worker = extra_per_worker.into_iter();
        // Workers past their set-up: a takeover tells the old process to drain only then.
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut quic_per_worker: Vec<Vec<crate::driver::quic::QuicSetup>> =
            (0..self.workers).map(|_| Vec::new()).collect();
        // In a takeover of QUIC listeners, the old process forwards what it reads for none
        // of its connections: this process's listener for each of its own, by address.
        let from_old: Option<Arc<[Option<u8>]>> = match &self.taken {
            Some(t) if !self.quic.is_empty() => Some(
                t.udp_order()
                    .iter()
                    .map(|old| {
                        let i = self.quic.iter().position(|q| q.addr.to_string() == *old)?;
                        u8::try_from(i).ok()
                    })
                    .collect(),
            ),
            _ => None,
        };
        for q in std::mem::take(&mut self.quic) {
            for (w, socket) in q.socks.into_iter().enumerate() {
                quic_per_worker[w].push(crate::driver::quic::QuicSetup {
                    socket,
                    config: q.config.clone(),
                });
            }
        }
        let workers = self.workers;
        let mut relays: Vec<Option<crate::driver::quic::Relay>> = if quic_per_worker[0].is_empty() {
            Vec::new()
        } else {
            crate::driver::quic::Relay::for_workers(workers, from_old)?
                .into_iter()
                .map(Some)
                .collect()
        };
        let handoff_relays = match relays.first() {
            Some(Some(r)) if self.taken.is_some() => r.senders()?,
            _ => Vec::new(),
        };
        for ((i, listeners), quic) in per_worker.into_iter().enumerate().zip(quic_per_worker) {
            let quic_relay = relays.get_mut(i).and_then(Option::take);
            let shared = self.shared.clone();
            let wake = self.wakes[i].try_clone()?;
            let cpu = self.cpus[i];
            let mut log = logs.as_ref().map(Logs::buffer);
            if let Some(t) = &tracing {
                log.get_or_insert_with(crate::access_log::LogBuffer::spans_only)
                    .spans = Some(crate::trace::spans::Spans::new(t));
            }
            let files = self.sites.for_worker();
            let (reload, reload_fd) = (self.reloads[i].0.clone(), self.reloads[i].1.try_clone()?);
            let sites = self.sites.clone();
            let inbox_fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
            let waker = inbox_fd.try_clone()?;
            let inbox = Arc::new(Inbox::new(Box::new(move || {
                let _ = rustix::io::write(&waker, &1u64.to_ne_bytes());
            })));
            let counters = self.counters[i].clone();
            let local_factory = self.local.clone();
            let worker_start = self.worker_start.clone();
            let alive = Alive(alive.clone());
            let extra_listeners = extra_per_worker.next().unwrap_or_default();
            let started = started.clone();
            let io = self.io;
            let t = std::thread::Builder::new()
                .name(format!("linerate-w{i}"))
                .spawn(move || -> io::Result<()> {
                    let _alive = alive;
                    if let Some(cpu) = cpu {
                        let mut set = rustix::thread::CpuSet::new();
                        set.set(cpu);
                        if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
                            tracing::warn!(cpu, error = %e, "cannot pin worker");
                        }
                    }
                    // The worker's tokio runtime, entered for the thread's whole service
                    // (`crate::runtime`), and dropped after the worker, before the thread ends.
                    let rt = crate::runtime::Local::install()?;
                    let handle = rt.handle().clone();
                    let served = (move || {
                        let _enter = handle.enter();
                        if let Some(start) = &worker_start {
                            start(i)?;
                        }
                        let local = local_factory.map(|f| f(i)).transpose()?;
                        let setup = Setup {
                            rt,
                            quic,
                            quic_relay,
                            index: i,
                            workers,
                            local,
                            client_conns: shared.client_conns.clone(),
                            conn: shared.conn.clone(),
                            listeners,
                            extra_listeners,
                            shutdown: wake,
                            inbox_fd,
                            reload_fd,
                            reload,
                            sites,
                            app: AppIo {
                                files,
                                log,
                                inbox,
                                outstanding: 0,
                                waiting: Default::default(),
                                cancels: Default::default(),
                                counters,
                                counters_on: shared.app.metrics,
                                static_gz: Default::default(),
                                grpc_lines: Vec::new(),
                                sent_lines: Vec::new(),
                                jobs: Vec::new(),
                                spares: Default::default(),
                                real: None,
                                client_cert: None,
                                site_counters: Arc::new([]),
                                layered: Default::default(),
                                upgrades: Vec::new(),
                                extras: false,
                                ids: crate::trace::context::Ids::new(),
                                trace: Default::default(),
                            },
                        };
                        if io == crate::config::Io::Uring {
                            match crate::driver::uring::Uring::new() {
                                Ok(ring) => {
                                    let mut worker = Worker::new(ring, setup)?;
                                    started.fetch_add(1, Ordering::Release);
                                    return worker.run(&shared);
                                }
                                Err(e) => tracing::warn!(
                                    worker = i,
                                    error = %e,
                                    "io_uring refused: this worker runs on epoll"
                                ),
                            }
                        }
                        let mut worker = Worker::new(Epoll::new()?, setup)?;
                        started.fetch_add(1, Ordering::Release);
                        worker.run(&shared)
                    })();
                    crate::runtime::uninstall();
                    served
                })?;
            threads.push(t);
        }
        let notify = crate::notify::Notifier::from_env();
        if let Some(n) = &notify {
            n.ready();
        }
        let watchdog = match (notify, crate::notify::watchdog_interval()) {
            (Some(n), Some(every)) => Some(Watchdog::start(n, every, alive, self.workers)?),
            _ => None,
        };
        if let Some(taken) = self.taken.take() {
            // Every worker accepts from the old sockets before the old process stops; a
            // worker that failed to start leaves it serving (the connection closes unsaid).
            while started.load(Ordering::Acquire) < workers
                && !threads.iter().any(|t| t.is_finished())
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if started.load(Ordering::Acquire) == workers {
                match taken.finish(handoff_relays) {
                    Ok(()) => {
                        tracing::info!("upgrade: the old process stopped accepting and drains")
                    }
                    Err(e) => tracing::error!("{e}"),
                }
            }
        }
        let handed_over = self.offer.as_ref().map(|o| o.handed_over.clone());
        if let (Some(offer), Some((sock, moved))) = (self.offer.clone(), self.upgrade.take()) {
            if let Some((beside, path)) = moved
                && let Err(e) = std::fs::rename(&beside, &path)
            {
                tracing::error!(from = %beside.display(), to = %path.display(), error = %e, "upgrade socket: cannot move into place");
            }
            let (handle, stop_admin) = (shutdown, stop_admin.clone());
            offer.serve(
                sock,
                Box::new(move || {
                    // The new process's admin thread answers from now on: a balancer must
                    // not see this one's 503 on the same port.
                    stop_admin.store(true, Ordering::Relaxed);
                    handle.shutdown();
                }),
            )?;
        }
        let mut result = Ok(());
        let _unlink = UnlinkOnDrop(unix_paths, handed_over);
        for t in threads {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("worker thread panicked")),
            }
        }
        if let Some(w) = watchdog {
            w.stop();
        }
        stop_admin.store(true, Ordering::Relaxed);
        // Not joined: it may be waiting on the CA; it ends at its next look at the flag.
        stop_acme.store(true, Ordering::Relaxed);
        if let Some(t) = admin {
            let _ = t.join();
        }
        // The exporter ends once the workers' batches are in: it sends what it holds, then
        // its thread is waited for (at most its export timeout).
        if let Some(t) = tracing {
            t.finish();
        }
        // The logger thread outlives the workers (signal handlers hold its sender): wait
        // for it to write what they handed off last, or a process exit would lose it.
        if let Some(l) = &logs {
            l.flush();
        }
        result
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully; a second one exits at once.
    /// SIGHUP reloads the certificate (a bad file keeps the one in use; either way it is
    /// logged), SIGUSR1 reopens the access log; neither touches a connection.
    pub fn run_until_signal(self) -> io::Result<()> {
        self.watch_signals()?;
        self.run()
    }

    /// Starts the signal thread of [`Server::run_until_signal`] without running: a caller
    /// that announces the server (a banner) calls this first, so a signal sent as soon as the
    /// announcement is seen is already handled.
    pub fn watch_signals(&self) -> io::Result<()> {
        self.watch_signals_with(Box::new(reload_certificates))
    }

    /// [`Server::watch_signals`], with `on_hup` run on each SIGHUP in place of the default
    /// (reloading the certificates): a program with a configuration file re-reads it there
    /// and calls [`ControlHandle::reload`] and [`ControlHandle::reload_sites`].
    pub fn watch_signals_with(&self, on_hup: Box<dyn Fn(&ControlHandle) + Send>) -> io::Result<()> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
        let handle = self.handle();
        let delay = self.shutdown_delay;
        let control = self.control();
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])?;
        let notify = crate::notify::Notifier::from_env();
        std::thread::Builder::new()
            .name("linerate-signals".into())
            .spawn(move || {
                let mut seen = 0;
                for sig in signals.forever() {
                    // A reload that panics costs that reload, not the signal thread: SIGTERM
                    // must still be heard after it.
                    let guarded = |f: &dyn Fn()| {
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
                            tracing::error!(signal = sig, "the signal's handler panicked");
                        }
                    };
                    match sig {
                        SIGHUP => {
                            if let Some(n) = &notify {
                                n.reloading();
                            }
                            guarded(&|| on_hup(&control));
                            if let Some(n) = &notify {
                                n.ready();
                            }
                        }
                        SIGUSR1 => guarded(&|| control.reopen_logs()),
                        _ => {
                            // STOPPING=1 and the log line go first: once the workers are
                            // told, the process may end before this thread runs again, and
                            // systemd would never hear it, nor the log show the drain (both
                            // seen under load in CI).
                            seen += 1;
                            if seen == 1 {
                                if let Some(n) = &notify {
                                    n.stopping();
                                }
                                if delay.is_zero() {
                                    tracing::info!(signal = sig, "shutting down: draining connections");
                                } else {
                                    tracing::info!(signal = sig, ?delay, "shutting down: /healthz answers 503, still serving until the delay ends, then draining");
                                }
                                if let Err(e) = handle.shutdown_after(delay) {
                                    tracing::error!(error = %e, "no delay thread: draining now");
                                    handle.shutdown();
                                }
                            } else {
                                tracing::warn!("second signal: exiting now");
                                std::process::exit(130);
                            }
                        }
                    }
                }
            })?;
        Ok(())
    }
}

/// Counts a worker thread as alive until it ends, however it ends.
struct Alive(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The thread that pings systemd's watchdog while every worker is alive.
struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Watchdog {
    fn start(
        notify: crate::notify::Notifier,
        every: std::time::Duration,
        alive: Arc<std::sync::atomic::AtomicUsize>,
        workers: usize,
    ) -> io::Result<Watchdog> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("linerate-watchdog".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    if alive.load(Ordering::Relaxed) < workers {
                        tracing::error!("a worker has ended: no more watchdog pings");
                        return;
                    }
                    notify.tell("WATCHDOG=1");
                    std::thread::park_timeout(every);
                }
            })?;
        Ok(Watchdog { stop, thread })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

/// SIGHUP's default: read the certificates again, and say what happened.
pub fn reload_certificates(control: &ControlHandle) {
    control.ask_ca_again();
    let done = control.reload();
    match &done {
        Ok(_) => control.info.reloaded(),
        Err(_) => control.info.reload_failed(),
    }
    match done {
        Ok(Reloaded::Certificates(paths)) => {
            let certs: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            tracing::info!(certs = %certs.join(", "), "SIGHUP: certificates reloaded")
        }
        Ok(Reloaded::Nothing) => {
            tracing::info!("SIGHUP: nothing to reload (no certificate, no configuration file)")
        }
        Err(e) => tracing::error!("SIGHUP: certificates not reloaded, those in use stay: {e}"),
    }
    reload_ticket_keys(control);
}

/// SIGHUP's part for TLS ticket keys (with or without a configuration file): read the key
/// files again, and say what happened; a bad file keeps the keys in use.
pub fn reload_ticket_keys(control: &ControlHandle) {
    match control.reload_ticket_keys() {
        Ok(Some(keys)) => tracing::info!(keys, "SIGHUP: TLS ticket keys reloaded"),
        Ok(None) => {}
        Err(e) => tracing::error!("SIGHUP: TLS ticket keys not reloaded, those in use stay: {e}"),
    }
}

/// Refuses `addr` when a socket already listens on it (or on its port at the wildcard
/// address): a probe bound without SO_REUSEPORT fails exactly then. Without this, a second
/// server of the same user would join the first one's SO_REUSEPORT group and split its
/// traffic silently. Port 0 is always free.
fn refuse_shared(addr: SocketAddr) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // SO_REUSEADDR: a closed server's TIME_WAIT connections do not count, a listener does.
    probe.set_reuse_address(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    match probe.bind(&addr.into()) {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "cannot listen on {addr}: already in use by another process (or another server in this one)"
            ),
        )),
        r => r,
    }
}

/// Removes the Unix sockets' files when the server ends, unless a new process took them
/// over (the flag is set): they are its own then.
struct UnlinkOnDrop(Vec<std::path::PathBuf>, Option<Arc<AtomicBool>>);

impl Drop for UnlinkOnDrop {
    fn drop(&mut self) {
        if self.1.as_ref().is_some_and(|h| h.load(Ordering::Relaxed)) {
            return;
        }
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A nonblocking Unix-socket listener at `path`. A file already there is taken over only when
/// nothing answers on it (a crashed server's leftover); a live socket is refused.
/// The socket file gets `perms` once bound (its owner and group by name or number).
fn listen_unix(
    path: &std::path::Path,
    backlog: i32,
    perms: &crate::config::UnixPerms,
) -> io::Result<OwnedFd> {
    if std::fs::symlink_metadata(path).is_ok() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "already in use by another process",
            ));
        }
        std::fs::remove_file(path)?;
    }
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.bind(&socket2::SockAddr::unix(path)?)?;
    let owner = match &perms.owner {
        Some(u) => Some(crate::sys::lookup_user(u)?.0),
        None => None,
    };
    let group = match &perms.group {
        Some(g) => Some(crate::sys::lookup_group(g)?),
        None => None,
    };
    // Owner and mode are set on the socket itself, held by a descriptor opened without
    // following a link: by path, root would follow a link someone swapped in meanwhile.
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let node = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if FileType::from_raw_mode(rustix::fs::fstat(&node)?.st_mode) != FileType::Socket {
        return Err(io::Error::other(
            "the path no longer names the socket just bound",
        ));
    }
    if owner.is_some() || group.is_some() {
        rustix::fs::chownat(
            &node,
            "",
            owner.map(rustix::process::Uid::from_raw),
            group.map(rustix::process::Gid::from_raw),
            AtFlags::EMPTY_PATH,
        )
        .map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("cannot give the socket to {owner:?}:{group:?}: {e}"),
            )
        })?;
    }
    // An O_PATH descriptor takes no fchmod; its /proc link names the same inode. Without
    // /proc (a bare chroot), by path, just after the check above.
    let mode = Mode::from_raw_mode(perms.mode & 0o7777);
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&node));
    match rustix::fs::chmodat(rustix::fs::CWD, link, mode, AtFlags::empty()) {
        Err(rustix::io::Errno::NOENT) => {
            rustix::fs::chmodat(rustix::fs::CWD, path, mode, AtFlags::empty())?
        }
        r => r?,
    }
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// `TCP_NOTSENT_LOWAT` on a listener, which its connections inherit (no call per
/// connection): see [`crate::config::MAX_UNSENT_BYTES`]. 0 leaves the kernel's default.
fn limit_unsent(listener: &impl AsFd, unsent: u64) -> io::Result<()> {
    if unsent == 0 {
        return Ok(());
    }
    socket2::SockRef::from(listener)
        .set_tcp_notsent_lowat(u32::try_from(unsent).unwrap_or(u32::MAX))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot limit unsent bytes (TCP_NOTSENT_LOWAT): {e}"),
            )
        })
}

/// A nonblocking SO_REUSEPORT listener whose connections leave at most `unsent` bytes unsent
/// in the kernel.
fn listen(addr: SocketAddr, backlog: i32, unsent: u64) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    limit_unsent(&socket, unsent)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// `workers` nonblocking UDP sockets on `addr`, one SO_REUSEPORT group (socket `i` is the
/// group's member `i`, which the QUIC steering program names), with room for bursts.
fn bind_udp(addr: SocketAddr, workers: usize) -> io::Result<Vec<std::net::UdpSocket>> {
    (0..workers)
        .map(|_| {
            let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
            socket.set_reuse_port(true)?;
            if addr.is_ipv6() {
                socket.set_only_v6(true)?;
            }
            // Bursts of datagrams wait here while the worker serves others (the kernel caps
            // it at net.core.rmem_max / wmem_max).
            let _ = socket.set_recv_buffer_size(4 << 20);
            let _ = socket.set_send_buffer_size(4 << 20);
            socket.bind(&addr.into())?;
            socket.set_nonblocking(true)?;
            Ok(socket.into())
        })
        .collect()
}

/// What the upgrade socket at `path` offers: copies of every listener's sockets (a
/// reuseport group's every member, one socket for a Unix or passed listener), the QUIC
/// listeners' UDP sockets and the admin listener.
fn offer_of(
    bound: &[Bound],
    quic: &[QuicBound],
    admin: Option<&TcpListener>,
    path: &std::path::Path,
) -> io::Result<crate::handoff::Offer> {
    use crate::handoff::{Entry, Kind};
    let mut entries = Vec::new();
    for b in bound {
        let shared = b.passed || matches!(b.addr, ListenAddr::Unix(_));
        let fds = if shared {
            vec![b.socks[0].try_clone()?]
        } else {
            b.socks
                .iter()
                .chain(&b.extra)
                .map(|s| s.try_clone())
                .collect::<io::Result<_>>()?
        };
        entries.push(Entry {
            kind: if shared { Kind::Shared } else { Kind::Tcp },
            addr: b.addr.to_string(),
            fds,
        });
    }
    for q in quic {
        entries.push(Entry {
            kind: Kind::Udp,
            addr: q.addr.to_string(),
            fds: q
                .socks
                .iter()
                .map(|s| s.try_clone().map(OwnedFd::from))
                .collect::<io::Result<_>>()?,
        });
    }
    if let Some(a) = admin {
        entries.push(Entry {
            kind: Kind::Admin,
            addr: a.local_addr()?.to_string(),
            fds: vec![OwnedFd::from(a.try_clone()?)],
        });
    }
    Ok(crate::handoff::Offer::new(entries, path.to_path_buf()))
}

/// Whether HTTP/2 connections announce extended CONNECT (RFC 8441): where a route can take a
/// WebSocket stream, and no path is proxied. The proxy carries WebSocket as an HTTP/1.1
/// upgrade only, and a browser told it may open `wss://` over h2 would do so for a proxied
/// path too (it falls back to HTTP/1.1 only where the setting is absent).
pub(crate) fn announces_extended_connect(config: &Config, router: &Router) -> bool {
    router.has_websocket()
        && config.proxies.is_empty()
        && config.sites.iter().all(|s| s.proxies.is_empty())
}

// A WebSocket route is what makes a server announce extended CONNECT.
#[cfg(all(test, feature = "websocket"))]
mod tests {
    use super::*;
    use crate::response::Response;

    /// Extended CONNECT is announced where a WebSocket route exists, unless a path (of the
    /// implicit site or of any site) is proxied.
    #[test]
    fn extended_connect_is_announced_only_for_websocket_routes_and_no_proxy() {
        let ws = || Router::new().ws("/ws", |_, _| Err::<NoWs, _>(Response::new(403)));
        let plain = Router::new().get("/", |_| Response::text("x"));
        let proxied = crate::config::ProxyMount {
            prefix: "/api".into(),
            upstream: "app".into(),
            ..Default::default()
        };
        let config = Config::default();
        assert!(announces_extended_connect(&config, &ws()));
        assert!(!announces_extended_connect(&config, &plain));
        let with_proxy = Config {
            proxies: vec![proxied.clone()],
            ..Config::default()
        };
        assert!(!announces_extended_connect(&with_proxy, &ws()));
        let site = crate::config::Site {
            proxies: vec![proxied],
            ..Default::default()
        };
        let with_site_proxy = Config {
            sites: vec![site],
            ..Config::default()
        };
        assert!(!announces_extended_connect(&with_site_proxy, &ws()));
    }

    struct NoWs;
    impl crate::websocket::WsHandler for NoWs {
        fn on_message(
            &mut self,
            _: crate::websocket::Message<'_>,
            _: &mut crate::websocket::WsOut<'_>,
        ) {
        }
    }
}
