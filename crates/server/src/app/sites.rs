//! Sites: which one answers a request (by Host, once per request head), and what a site adds
//! around its answers — redirects before anything else, fields by path prefix or extension,
//! error pages in place of the server's own status bodies.
//!
//! Owns the per-site rules as read-only data built at start, or at a reload ([`SiteSet`]: the
//! sites with their opened roots, swapped into each worker whole between two events); the
//! request's phases ask (`app/phase/`). A server without configured sites has one implicit
//! site (the application, and the `files` mount), and picking it costs one length test.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::io;
use std::sync::Arc;

use linerate_http1::{RequestHead, TargetForm};

use super::files::{FilesOptions, StaticFiles};
use super::redirect::Template;
use super::response::{Body, Response};
use crate::config::{Compression, Config, FilesMount, FixedAnswer, HeaderRule, Redirect};
use crate::start_error::{AtPart, Part, StartError};

/// The sites and their static roots, opened: what a worker answers from, and what a reload
/// replaces whole.
pub(crate) struct SiteSet {
    pub sites: Sites,
    /// The upstreams proxy mounts send to (a reload replaces them with the sites).
    pub upstreams: Vec<crate::config::Upstream>,
    /// Each site's roots, opened once; each worker makes its own caches from them (the
    /// lock is taken only then: at a worker's start and at a reload).
    roots: Vec<Vec<std::sync::Mutex<StaticFiles>>>,
    /// Each root's place in the configuration, for errors.
    root_parts: Vec<Vec<Part>>,
}

impl SiteSet {
    /// Builds the sites of `config` and opens their roots; an error names the path and the
    /// part of `config` at fault.
    pub(crate) fn build(config: &Config) -> Result<SiteSet, StartError> {
        let sites = Sites::build(config)?;
        for (i, u) in config.upstreams.iter().enumerate() {
            if u.servers.is_empty() {
                return Err(StartError::invalid(
                    Part::Upstream(i),
                    format!("upstream {:?} has no server", u.name),
                ));
            }
            if config.upstreams[..i].iter().any(|o| o.name == u.name) {
                return Err(StartError::invalid(
                    Part::Upstream(i),
                    format!("a second upstream named {:?}", u.name),
                ));
            }
        }
        let mut roots = Vec::new();
        let mut root_parts = Vec::new();
        for (si, site) in sites.iter().enumerate() {
            let mut opened = Vec::new();
            let mut parts = Vec::new();
            for m in &site.mounts {
                // The mount's place in the configuration (a site's mounts are kept longest
                // prefix first).
                let mount = config
                    .sites
                    .get(si)
                    .and_then(|s| s.mounts.iter().position(|c| c == m))
                    .unwrap_or(0);
                let part = Part::Root { site: si, mount };
                let opts = super::files::FilesOptions {
                    try_files: m.try_files.clone(),
                    listing: m.listing,
                    ..site.files.clone()
                };
                let files = StaticFiles::open(&m.root, opts)
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot serve {}: {e}", m.root.display()))
                    })
                    .at(part)?;
                opened.push(std::sync::Mutex::new(files));
                parts.push(part);
            }
            roots.push(opened);
            root_parts.push(parts);
        }
        Ok(SiteSet {
            sites,
            upstreams: config.upstreams.clone(),
            roots,
            root_parts,
        })
    }

    /// Refuses a root this process cannot search: every request for a file below it would be
    /// a 403 that nothing explains (roots are opened `O_PATH`, which needs no permission).
    /// Checked at start and again after a drop to another user.
    pub(crate) fn check_roots(&self) -> Result<(), StartError> {
        for (si, site) in self.sites.iter().enumerate() {
            let opened = site.mounts.iter().zip(&self.roots[si]);
            for ((m, root), part) in opened.zip(&self.root_parts[si]) {
                let root = root.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = root.check_searchable() {
                    let who = match rustix::process::geteuid().as_raw() {
                        0 => String::new(),
                        uid => format!(" by uid {uid}"),
                    };
                    return Err(StartError::new(
                        *part,
                        io::Error::new(
                            e.kind(),
                            format!(
                                "root {} cannot be read{who}: {e}; every file below it would be 403",
                                m.root.display()
                            ),
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Points each site at its access log (`Logs::route`'s answer, by site index).
    pub(crate) fn route_logs(&mut self, logs: &[Option<usize>]) {
        for (site, log) in self.sites.list.iter_mut().zip(logs) {
            site.log = *log;
        }
    }

    /// The files sites read (error pages, htpasswd, JWT secrets), which the privilege keeper
    /// reads again for a reload.
    pub(crate) fn read_paths(&self) -> Vec<std::path::PathBuf> {
        self.sites
            .iter()
            .flat_map(|s| {
                let pages = s.error_pages.iter().map(|p| p.path.clone());
                let secrets = s.jwt.iter().filter_map(|j| j.secret_file.clone());
                pages
                    .chain(s.auth.iter().map(|a| a.path.clone()))
                    .chain(secrets)
            })
            .collect()
    }

    /// A worker's own file servers (its open-file caches), by site and mount.
    pub(crate) fn for_worker(&self) -> Vec<Vec<StaticFiles>> {
        self.roots
            .iter()
            .map(|site| {
                site.iter()
                    .map(|f| f.lock().unwrap_or_else(|e| e.into_inner()).for_worker())
                    .collect()
            })
            .collect()
    }
}

/// Every site, and the one that answers an unclaimed Host.
pub(crate) struct Sites {
    list: Vec<SiteApp>,
    default: usize,
    /// The server's TCP listeners' ports: a URL's answers may be keyed under each (a Host
    /// keeps its port), so a purge of the URL purges them all (`proxy/purge.rs`).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub ports: Arc<[u16]>,
}

/// One site, ready to answer.
pub(crate) struct SiteApp {
    names: Vec<Name>,
    /// The application's routes are mounted here.
    pub app: bool,
    /// Longest prefix first.
    pub mounts: Vec<FilesMount>,
    /// Proxy mounts, longest prefix first.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub proxies: Vec<crate::proxy::route::Route>,
    pub files: FilesOptions,
    pub compression: Compression,
    /// Largest body for buffering and deferred handlers (413 beyond).
    pub max_body_bytes: u64,
    /// The redirects, then the fixed answers, each in the file's order: what answers before
    /// anything else (one length test for a site that has none).
    rules: Vec<Rule>,
    headers: Vec<HeaderRule>,
    error_pages: Vec<ErrorPage>,
    /// Some answer here gets fields or a page: [`SiteApp::decorate`] has work to do.
    pub decorates: bool,
    /// IP allow/deny rules, longest prefix first.
    pub access: Box<[crate::access::Access]>,
    /// Request-rate limits, each with its buckets (every one whose prefix matches applies).
    pub limits: Box<[RateRule]>,
    /// Basic-auth rules, longest prefix first.
    pub auth: Box<[crate::basic_auth::AuthGate]>,
    /// JWT checks, longest prefix first.
    pub jwt: Box<[crate::jwt::JwtGate]>,
    /// It has access rules, rate limits, basic auth or JWT checks: requests are checked
    /// against the path decoded once (`SiteApp::admit`).
    pub checks: bool,
    /// It has checks or proxy mounts: requests pass `ConnApp::gate` first.
    pub gated: bool,
    /// Its first name as written (lowercase), or empty: `$host` of a request naming none.
    pub server_name: Box<str>,
    /// The access log its requests go to (an index into the worker's `LogBuffer`): its
    /// own, else the server's; `None`: not logged. Set by [`SiteSet::route_logs`].
    pub log: Option<usize>,
}

/// A rate limit and its buckets, shared by the workers.
pub(crate) struct RateRule {
    pub prefix: String,
    pub key: crate::config::RateKey,
    /// A node rule's buckets; a fleet rule's local share (while a lease is on its way, and
    /// while Redis is down).
    pub limiter: crate::ratelimit::Limiter,
    // fleet-wide rate limits
    /// Its refusals and mode in the metrics.
    pub stats: std::sync::Arc<crate::ratelimit_metrics::RuleStats>,
    /// A fleet rule's leases and link to Redis.
    pub fleet: Option<crate::ratelimit_fleet::Fleet>,
}

/// Why [`SiteApp::admit`] refused a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The path cannot be decoded (400).
    BadPath,
    /// The access rules deny the client (403).
    Denied,
    /// Over a rate limit (429), to be retried in this many seconds.
    Limited { retry_after_s: u64 },
    /// Basic auth wants a right user and password (401), with this challenge.
    Unauthorized(String),
    /// A JWT check refused the bearer token: this status (401, or 400 for a request with
    /// two `Authorization` fields) and this `WWW-Authenticate` (RFC 6750 §3).
    Bearer { status: u16, challenge: String },
}

enum Name {
    Exact(String),
    /// `*.example.com`, kept as `.example.com`.
    Suffix(String),
}

struct ErrorPage {
    /// Where it was read from.
    path: std::path::PathBuf,
    status: u16,
    content_type: &'static str,
    body: Arc<[u8]>,
}

/// The ports of `config`'s TCP listeners, each once.
fn listener_ports(config: &Config) -> Arc<[u16]> {
    let mut ports: Vec<u16> = Vec::new();
    for l in config.listen_list() {
        // Port 0 (chosen by the system, in tests) is no port a client names.
        if let crate::config::ListenAddr::Tcp(a) = l.addr
            && a.port() != 0
            && !ports.contains(&a.port())
        {
            ports.push(a.port());
        }
    }
    ports.into()
}

impl Sites {
    /// The sites of `config` (or the implicit one); error pages are read now, and a page that
    /// cannot be read is an error naming its path.
    pub(crate) fn build(config: &Config) -> Result<Sites, StartError> {
        if config.sites.is_empty() {
            let site = SiteApp {
                names: Vec::new(),
                app: true,
                mounts: config.files.iter().cloned().collect(),
                proxies: proxies(&config.proxies, config, 0)?,
                files: FilesOptions::default(),
                compression: config.compression.clone(),
                max_body_bytes: config.max_body_bytes,
                rules: Vec::new(),
                headers: Vec::new(),
                error_pages: Vec::new(),
                decorates: false,
                access: Box::default(),
                limits: Box::default(),
                auth: Box::default(),
                jwt: Box::default(),
                checks: false,
                gated: !config.proxies.is_empty(),
                server_name: Box::default(),
                log: None,
            };
            return Ok(Sites {
                list: vec![site],
                default: 0,
                ports: listener_ports(config),
            });
        }
        let http01 = config
            .acme
            .as_ref()
            .is_some_and(|a| a.challenge == crate::config::AcmeChallenge::Http01)
            && config
                .sites
                .iter()
                .any(|s| s.managed == Some(crate::config::Managed::Acme));
        let mut list = Vec::with_capacity(config.sites.len());
        // The fleet rules' link to Redis, started with the first of them.
        let mut fleet_link = None;
        for (si, s) in config.sites.iter().enumerate() {
            let mut mounts = s.mounts.clone();
            longest_first(&mut mounts, |m| m.prefix.len());
            let mut error_pages = Vec::new();
            for (index, (status, path)) in s.error_pages.iter().enumerate() {
                // Through the privilege keeper: a reload after a drop reads root's pages.
                let body = crate::privsep::read(path)
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("cannot read error page {}: {e}", path.display()),
                        )
                    })
                    .at(Part::ErrorPage { site: si, index })?;
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                error_pages.push(ErrorPage {
                    path: path.clone(),
                    status: *status,
                    content_type: super::files::mime::content_type(name),
                    body: body.into(),
                });
            }
            let mut files = FilesOptions {
                dotfiles: s.dotfiles,
                types: s.types.iter().cloned().collect(),
                ..FilesOptions::default()
            };
            if !s.index.is_empty() {
                files.index = s.index.clone();
            }
            let mut access = s.access.clone();
            longest_first(&mut access, |a| a.prefix.len());
            let limits: Box<[RateRule]> = s
                .limits
                .iter()
                .map(|l| rate_rule(l, s, config, &mut fleet_link))
                .collect::<Result<_, String>>()
                .map_err(|e| StartError::invalid(Part::Site(si), e))?;
            let mut auth = Vec::with_capacity(s.auth.len());
            for a in &s.auth {
                // Through the privilege keeper, as error pages: a reload after a drop reads
                // a root-only file.
                let text = crate::privsep::read(&a.htpasswd)
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("cannot read htpasswd {}: {e}", a.htpasswd.display()),
                        )
                    })
                    .at(Part::Site(si))?;
                let users = crate::basic_auth::Htpasswd::parse(&String::from_utf8_lossy(&text))
                    .map_err(|e| {
                        StartError::invalid(
                            Part::Site(si),
                            format!("htpasswd {}: {e}", a.htpasswd.display()),
                        )
                    })?;
                auth.push(crate::basic_auth::AuthGate::new(
                    a.prefix.clone(),
                    &a.realm,
                    a.htpasswd.clone(),
                    users,
                ));
            }
            longest_first(&mut auth, |a| a.prefix.len());
            let mut jwt = Vec::with_capacity(s.jwt.len());
            for j in &s.jwt {
                let gate = crate::jwt::read_secret(&j.secret)
                    .and_then(|secret| crate::jwt::JwtGate::new(j, &secret))
                    .map_err(|e| {
                        StartError::invalid(Part::Site(si), format!("jwt {:?}: {e}", j.prefix))
                    })?;
                jwt.push(gate);
            }
            longest_first(&mut jwt, |j| j.prefix.len());
            let checks =
                !access.is_empty() || !limits.is_empty() || !auth.is_empty() || !jwt.is_empty();
            let mut compression = config.compression.clone();
            if let Some(on) = s.compression {
                compression.enabled = on;
            }
            list.push(SiteApp {
                names: s
                    .names
                    .iter()
                    .map(|n| {
                        let n = n.to_ascii_lowercase();
                        match n.strip_prefix('*') {
                            Some(suffix) => Name::Suffix(suffix.to_string()),
                            None => Name::Exact(n),
                        }
                    })
                    .collect(),
                app: s.app,
                mounts,
                proxies: proxies(&s.proxies, config, si)?,
                files,
                compression,
                max_body_bytes: s.max_body_bytes.unwrap_or(config.max_body_bytes),
                rules: s
                    .redirects
                    .iter()
                    .enumerate()
                    .map(|(index, r)| match Template::parse(&r.to) {
                        Ok(t) => Ok(Rule::Redirect(r.clone(), t)),
                        Err(e) => Err(StartError::invalid(
                            Part::Redirect { site: si, index },
                            format!("redirect to {:?}: {e}", r.to),
                        )),
                    })
                    .chain(s.returns.iter().cloned().map(Rule::Answer).map(Ok))
                    .collect::<Result<_, _>>()?,
                decorates: !s.headers.is_empty() || !error_pages.is_empty(),
                // Every site answers the CA's HTTP-01 requests first.
                gated: checks || !s.proxies.is_empty() || http01,
                checks,
                access: access.into_boxed_slice(),
                limits,
                auth: auth.into_boxed_slice(),
                jwt: jwt.into_boxed_slice(),
                headers: s.headers.clone(),
                error_pages,
                server_name: s
                    .names
                    .first()
                    .map_or_else(Box::default, |n| n.to_ascii_lowercase().into()),
                log: None,
            });
        }
        let default = config.sites.iter().position(|s| s.default).unwrap_or(0);
        Ok(Sites {
            list,
            default,
            ports: listener_ports(config),
        })
    }

    /// The site for this request: the authority of an absolute-form target (RFC 9112
    /// §3.2.2: it wins over Host), else Host; the default site when none claims the name.
    #[inline(always)]
    pub(crate) fn pick(&self, head: &RequestHead, buf: &[u8]) -> usize {
        if self.list.len() == 1 {
            return 0;
        }
        self.pick_by_name(head, buf)
    }

    #[inline(never)]
    fn pick_by_name(&self, head: &RequestHead, buf: &[u8]) -> usize {
        let Some(host) = request_host(head, buf) else {
            return self.default;
        };
        let host = &*host;
        // Exact names first, then the longest wildcard suffix (nginx's order).
        if let Some(i) = self.list.iter().position(|s| {
            s.names
                .iter()
                .any(|n| matches!(n, Name::Exact(e) if e == host))
        }) {
            return i;
        }
        let mut best: Option<(usize, usize)> = None;
        for (i, s) in self.list.iter().enumerate() {
            for n in &s.names {
                if let Name::Suffix(suffix) = n
                    && host.len() > suffix.len()
                    && host.ends_with(suffix.as_str())
                    && best.is_none_or(|(_, l)| suffix.len() > l)
                {
                    best = Some((i, suffix.len()));
                }
            }
        }
        best.map_or(self.default, |(i, _)| i)
    }

    /// Site `i`; the default site for an index a reload made stale (a request read before
    /// the swap and answered after it).
    #[inline(always)]
    /// Every site, to change before the set is shared (a reload's carried-over caches).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut SiteApp> {
        self.list.iter_mut()
    }

    /// Each site's label in the metrics: its first name as written (`*.example.com` for a
    /// wildcard), or `_` for a site without names (nginx's catch-all spelling).
    pub(crate) fn labels(&self) -> Vec<String> {
        self.iter()
            .map(|s| match s.names.first() {
                Some(Name::Exact(n)) => n.clone(),
                Some(Name::Suffix(n)) => format!("*{n}"),
                None => "_".to_string(),
            })
            .collect()
    }

    /// The default site: where the requests no site took (those refused before their
    /// Host was read) are logged.
    pub(crate) fn default_site(&self) -> &SiteApp {
        &self.list[self.default]
    }

    pub(crate) fn get(&self, i: usize) -> &SiteApp {
        self.list.get(i).unwrap_or(&self.list[self.default])
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &SiteApp> {
        self.list.iter()
    }
}

/// A rule that answers before anything else: a redirect (with its checked `Location`
/// template) or a fixed answer.
#[derive(Clone, Debug)]
enum Rule {
    Redirect(Redirect, Template),
    Answer(FixedAnswer),
}

impl Rule {
    /// Where it applies: its prefix, and whether the path must be exactly that.
    fn place(&self) -> (&str, bool) {
        match self {
            Rule::Redirect(r, _) => (&r.prefix, r.exact),
            Rule::Answer(a) => (&a.prefix, a.exact),
        }
    }
}

impl SiteApp {
    /// A redirect or a fixed answer for this path, when one applies.
    #[inline]
    pub(crate) fn redirect(&self, head: &RequestHead, buf: &[u8]) -> Option<Response> {
        if self.rules.is_empty() {
            return None;
        }
        self.find_rule(head, buf)
    }

    #[cold]
    fn find_rule(&self, head: &RequestHead, buf: &[u8]) -> Option<Response> {
        let path = std::str::from_utf8(head.path_bytes(buf)).ok()?;
        let rule = self.rules.iter().find(|rule| {
            let (prefix, exact) = rule.place();
            if exact {
                path == prefix
            } else {
                path.starts_with(prefix)
            }
        })?;
        match rule {
            Rule::Redirect(r, t) => {
                let location = t.fill(path, r.prefix.len(), head.query(buf), || {
                    self.host_of(head, buf)
                });
                // The parser admitted only URI bytes in the path and query: the value is a
                // valid field.
                Some(
                    Response::new(r.status)
                        .try_header("Location", location)
                        .unwrap_or_else(|_| Response::new(500)),
                )
            }
            Rule::Answer(a) => Some(
                Response::text_owned(a.body.clone())
                    .status(a.status)
                    .content_type(a.content_type.clone()),
            ),
        }
    }

    /// Whether this site's checks let a request to `path` from a client at `peer` in: the
    /// access rules of the longest prefix covering the path (403 when they deny the client),
    /// then every rate limit whose prefix covers it (429), then the basic auth of the
    /// longest prefix (401), then the JWT check of the longest prefix (401, or 400 for two
    /// `Authorization` fields). The path is matched decoded once, with its dot segments
    /// removed, as the file server and the application behind a proxy read it, so no spelling of a
    /// path (`%61dmin`, `//admin`, `/x/../admin`, `/x%2Fadmin`) gets past the rules of the one
    /// it means; a path that cannot be decoded is refused (400), and so is one whose dot
    /// segments meet an encoded slash (`files::path::normalize_for_rules`). `field` reads a request field (rate keys,
    /// `Authorization`), `repeated` says whether a field comes more than once;
    /// `uncounted` is told of a request a full rate table let through.
    pub(crate) fn admit<'f>(
        &self,
        path: &[u8],
        peer: Option<std::net::IpAddr>,
        field: impl Fn(&str) -> Option<&'f [u8]>,
        repeated: impl Fn(&str) -> bool,
        uncounted: impl Fn(),
    ) -> Result<(), Refusal> {
        let Ok(n) = super::files::path::normalize_for_rules(path) else {
            return Err(Refusal::BadPath);
        };
        let mut path = String::with_capacity(n.rel.len() + 2);
        path.push('/');
        path.push_str(&n.rel);
        if n.dir && !n.rel.is_empty() {
            path.push('/');
        }
        let allowed = self
            .access
            .iter()
            .find(|a| path.starts_with(a.prefix.as_str()))
            .is_none_or(|a| a.allows(peer));
        if !allowed {
            return Err(Refusal::Denied);
        }
        if !self.limits.is_empty() {
            let now = crate::sys::monotonic_us();
            for rule in self
                .limits
                .iter()
                .filter(|r| path.starts_with(r.prefix.as_str()))
            {
                use crate::ratelimit::{Key, Verdict};
                let key = match &rule.key {
                    crate::config::RateKey::Client => peer.map(|ip| Key::Addr(ip.to_canonical())),
                    crate::config::RateKey::Field(name) => {
                        field(name).map(|v| Key::Bytes(v.into()))
                    }
                };
                let Some(key) = key else { continue };
                let verdict = match &rule.fleet {
                    None => rule.limiter.check(key, now),
                    Some(fleet) => fleet.check(key, now, &rule.limiter),
                };
                match verdict {
                    Verdict::Pass => {}
                    Verdict::PassUncounted => uncounted(),
                    Verdict::Refuse { wait_us } => {
                        rule.stats
                            .refused
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return Err(Refusal::Limited {
                            retry_after_s: wait_us.div_ceil(1_000_000).max(1),
                        });
                    }
                }
            }
        }
        if let Some(gate) = self
            .auth
            .iter()
            .find(|a| path.starts_with(a.prefix.as_str()))
            && !gate.admits(field("authorization"))
        {
            return Err(Refusal::Unauthorized(gate.challenge.clone()));
        }
        if let Some(gate) = self
            .jwt
            .iter()
            .find(|j| path.starts_with(j.prefix.as_str()))
        {
            // Checked on every request, nothing remembered: a token that expired is refused
            // the second it does.
            let now_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            gate.admits(field("authorization"), repeated("authorization"), now_s)
                .map_err(|(status, challenge)| Refusal::Bearer {
                    status,
                    challenge: challenge.to_string(),
                })?;
        }
        Ok(())
    }

    /// The host a request named (lowercase, without its port: nginx's `$host`), or for an
    /// HTTP/1.0 request without Host the site's first exact name, as `$host` falls back to
    /// `server_name`.
    fn host_of(&self, head: &RequestHead, buf: &[u8]) -> String {
        match request_host(head, buf) {
            Some(h) => h.into_owned(),
            None => self
                .names
                .iter()
                .find_map(|n| match n {
                    Name::Exact(e) => Some(e.clone()),
                    Name::Suffix(_) => None,
                })
                .unwrap_or_default(),
        }
    }

    /// The answer of a listener that sends every request to HTTPS (`redirect_to_https`):
    /// 308, so a method and its body are repeated there, to the same host, path and query
    /// on `port` (left out when 443). Without a host to name (HTTP/1.0, no Host, a site
    /// with no exact name) there is nowhere to send it: 400.
    pub(crate) fn https_redirect(&self, head: &RequestHead, buf: &[u8], port: u16) -> Response {
        let host = self.host_of(head, buf);
        if host.is_empty() {
            return Response::new(400);
        }
        // The path and query (an absolute-form target's own); `*` and CONNECT's authority
        // name no resource: the root.
        let (path, query) = match head.target_form() {
            TargetForm::Asterisk | TargetForm::Authority => ("/", None),
            _ => (head.path(buf), head.query(buf)),
        };
        let port = if port == 443 {
            String::new()
        } else {
            format!(":{port}")
        };
        let query = query.map_or(String::new(), |q| format!("?{q}"));
        let location = format!("https://{host}{port}{path}{query}");
        // The parser admitted only URI bytes in the target and a valid Host.
        Response::new(308)
            .try_header("Location", location)
            .unwrap_or_else(|_| Response::new(500))
    }

    /// The proxy mount for `path`, if one covers it and no static root covers it with a
    /// longer prefix: the longest prefix wins between the two, as between nginx's
    /// `location`s (a proxy at `/` with a root at `/static` serves `/static/…` from disk; a
    /// tie goes to the proxy).
    #[inline]
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn proxy(&self, path: &[u8]) -> Option<usize> {
        if self.proxies.is_empty() {
            return None;
        }
        self.proxy_below_roots(path)
    }

    /// Out of line, so a site without proxy mounts (the serving path) pays only the test above.
    #[inline(never)]
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    fn proxy_below_roots(&self, path: &[u8]) -> Option<usize> {
        let i = self.proxies.iter().position(|r| r.mount.covers(path))?;
        let len = self.proxies[i].mount.prefix.len();
        let root_wins = self
            .mounts
            .iter()
            .any(|m| m.prefix.len() > len && m.strip(path).is_some());
        (!root_wins).then_some(i)
    }

    /// Whether `[[site.headers]]` may add fields to proxied answers: the proxy carries the
    /// request's path for [`SiteApp::proxied_fields`] only then.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn adds_proxied_fields(&self) -> bool {
        self.headers.iter().any(|r| !r.not_proxied)
    }

    /// The fields `[[site.headers]]` add to a proxied answer (or the proxy's own 502/504)
    /// for a request to `path`, as [`SiteApp::decorate`] adds them to every other answer:
    /// nginx's `add_header … always`, so HSTS covers an application-only site.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn proxied_fields<'s>(&'s self, path: &[u8]) -> Vec<(&'s str, &'s str)> {
        let path = std::str::from_utf8(path).unwrap_or("");
        let rules = self.headers.iter();
        rules
            .filter(|r| !r.not_proxied && rule_matches(r, path))
            .flat_map(|r| r.fields.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .collect()
    }

    /// The error page's body for `status`, if the site has one.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn error_page(&self, status: u16) -> Option<Response> {
        let page = self.error_pages.iter().find(|p| p.status == status)?;
        Some(
            Response::new(status)
                .content_type(page.content_type)
                .body(Body::Owned(page.body.to_vec())),
        )
    }

    /// The mount serving `path`, and the part of the path below it.
    #[inline]
    pub(crate) fn mount<'p>(&self, path: &'p [u8]) -> Option<(usize, &FilesMount, &'p [u8])> {
        self.mounts
            .iter()
            .enumerate()
            .find_map(|(i, m)| Some((i, m, m.strip(path)?)))
    }

    /// Adds the fields of every rule matching `path`, and puts the error page for the status
    /// in place of a body the server generated (`generated`).
    #[cold]
    pub(crate) fn decorate(
        &self,
        path: &[u8],
        mut resp: Response,
        generated: impl Fn(&Response) -> bool,
    ) -> Response {
        if resp.status >= 400
            && let Some(page) = self.error_pages.iter().find(|p| p.status == resp.status)
            && generated(&resp)
        {
            resp.content_type = Some(Cow::Borrowed(page.content_type));
            resp.body = Body::Owned(page.body.to_vec());
        }
        let path = std::str::from_utf8(path).unwrap_or("");
        for rule in &self.headers {
            if rule_matches(rule, path) {
                for (name, value) in &rule.fields {
                    resp.headers
                        .retain(|(n, _)| !n.eq_ignore_ascii_case(name.as_str()));
                    resp.headers
                        .push((Cow::Owned(name.clone()), Cow::Owned(value.clone())));
                }
            }
        }
        resp
    }
}

/// A site's proxy mounts, longest prefix first; an unknown upstream is an error naming the
/// mount.
fn proxies(
    mounts: &[crate::config::ProxyMount],
    config: &Config,
    site: usize,
) -> Result<Vec<crate::proxy::route::Route>, StartError> {
    let mut routes = mounts
        .iter()
        .enumerate()
        .map(|(index, m)| {
            crate::proxy::route::Route::build(m, &config.upstreams)
                .map_err(|e| StartError::invalid(Part::Proxy { site, index }, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    longest_first(&mut routes, |r| r.mount.prefix.len());
    Ok(routes)
}

/// Sorts `v` longest `len` first, equal lengths in their order (a stable sort), through one
/// sort of `(length, index)` pairs shared by every caller: a stable `sort_by_key` per element
/// type linked about 6 KB of sort code each.
pub(crate) fn longest_first<T>(v: &mut Vec<T>, len: impl Fn(&T) -> usize) {
    let mut order: Vec<(std::cmp::Reverse<usize>, usize)> = v
        .iter()
        .enumerate()
        .map(|(i, x)| (std::cmp::Reverse(len(x)), i))
        .collect();
    // The pairs are distinct (the indexes are), so an unstable sort keeps equal lengths in
    // their order.
    order.sort_unstable();
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(order.into_iter().filter_map(|(_, i)| slots[i].take()));
}

/// Whether `rule` applies to `path`.
fn rule_matches(rule: &HeaderRule, path: &str) -> bool {
    if rule.prefix.as_deref().is_some_and(|p| !path.starts_with(p)) {
        return false;
    }
    if rule.extensions.is_empty() {
        return true;
    }
    let last = path.rsplit('/').next().unwrap_or("");
    match last.rsplit_once('.') {
        Some((_, ext)) => rule.extensions.iter().any(|e| e.eq_ignore_ascii_case(ext)),
        None => false,
    }
}

/// The host a request names: the authority of an absolute-form target (RFC 9112 §3.2.2: it
/// wins over Host), else Host; lowercase, without port or trailing dot (nginx's `$host`).
fn request_host<'b>(head: &RequestHead, buf: &'b [u8]) -> Option<Cow<'b, str>> {
    let host = std::str::from_utf8(request_host_bytes(head, buf)?).ok()?;
    Some(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    })
}

/// The host a request names (see [`request_host`]) as sent: its case kept.
pub(crate) fn request_host_bytes<'b>(head: &RequestHead, buf: &'b [u8]) -> Option<&'b [u8]> {
    let authority = match head.target_form() {
        TargetForm::Absolute => absolute_authority(head.target(buf).as_bytes()),
        _ => head.host(buf),
    }?;
    let host = strip_port(authority);
    Some(host.strip_suffix(b".").unwrap_or(host))
}

/// The host of `http://host:port/path`.
pub(crate) fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
    let rest = target
        .splitn(2, |&b| b == b':')
        .nth(1)?
        .strip_prefix(b"//")?;
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `example.com:8080` → `example.com`; `[::1]:8080` → `[::1]`.
fn strip_port(authority: &[u8]) -> &[u8] {
    if authority.first() == Some(&b'[') {
        let end = authority
            .iter()
            .position(|&b| b == b']')
            .map_or(authority.len(), |i| i + 1);
        return &authority[..end];
    }
    match authority.iter().rposition(|&b| b == b':') {
        Some(i) => &authority[..i],
        None => authority,
    }
}

/// A site's rate limit as the workers share it (a fleet rule's leases, its
/// local share and the configuration's link to Redis, started with its first fleet rule).
fn rate_rule(
    l: &crate::config::RateLimit,
    site: &crate::config::Site,
    config: &Config,
    link: &mut Option<std::sync::Arc<crate::ratelimit_fleet::Link>>,
) -> Result<RateRule, String> {
    use crate::config::RateScope;
    use crate::ratelimit::Limiter;
    use crate::ratelimit_metrics as metrics;
    let label = match &l.name {
        Some(n) => n.clone(),
        None => {
            let site = site.names.first().map_or("_", String::as_str);
            format!("{site} {}", l.prefix)
        }
    };
    if l.scope == RateScope::Node {
        return Ok(RateRule {
            prefix: l.prefix.clone(),
            key: l.key.clone(),
            limiter: Limiter::new(l.interval_us, l.burst),
            stats: metrics::register(&label, metrics::NODE),
            fleet: None,
        });
    }
    let storage = config.storage.as_ref();
    let Some(url) = storage.and_then(|s| s.redis.as_ref()) else {
        return Err(format!(
            "rate limit {label:?} has scope = \"fleet\": its counts live in [storage] redis, and there is none"
        ));
    };
    let nodes = storage.map_or(1, |s| s.nodes.max(1));
    let link = match link {
        Some(k) => std::sync::Arc::clone(k),
        None => std::sync::Arc::clone(link.insert(crate::ratelimit_fleet::Link::start(url)?)),
    };
    let mode = if link.shared.up.load(std::sync::atomic::Ordering::Relaxed) {
        metrics::FLEET
    } else {
        metrics::LOCAL_SHARE
    };
    let stats = metrics::register(&label, mode);
    link.shared
        .rules
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(std::sync::Arc::clone(&stats));
    // The local share: the rate over the nodes (or `local_rate`), and the node's share of the
    // burst (`burst + 1` at once over the fleet, so `(burst + 1) / nodes` on each).
    let local_interval = l
        .local_interval_us
        .unwrap_or(l.interval_us.saturating_mul(u64::from(nodes)));
    let local_burst = ((l.burst + 1) / nodes).saturating_sub(1);
    let size = crate::ratelimit_lease::lease_size(l.interval_us, l.burst, nodes);
    let rule = crate::ratelimit_fleet::FleetRule {
        leases: crate::ratelimit_lease::Leases::new(size),
        // Two rules of one label (a prefix limited per client and per API key) count apart.
        prefix: format!(
            "linerate:rl:{label}:{}:{}:{}:",
            l.interval_us,
            l.burst,
            match &l.key {
                crate::config::RateKey::Client => "client".to_string(),
                crate::config::RateKey::Field(f) => format!("header:{f}"),
            }
        )
        .into_bytes(),
        interval_us: l.interval_us.max(1),
        tolerance_us: l.interval_us.max(1).saturating_mul(u64::from(l.burst)),
    };
    Ok(RateRule {
        prefix: l.prefix.clone(),
        key: l.key.clone(),
        limiter: Limiter::new(local_interval, local_burst),
        stats,
        fleet: Some(crate::ratelimit_fleet::Fleet {
            rule: std::sync::Arc::new(rule),
            link,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mounts, access rules and auth prefixes are tried longest first, and equal prefixes in
    /// the configuration's order (the first of two `/api` rules wins).
    #[test]
    fn longest_first_keeps_equal_lengths_in_their_order() {
        let mut v = vec!["/a", "/api", "/", "/b", "/app", "/api", "/c"];
        let mut t: Vec<(usize, &str)> = v.iter().copied().enumerate().collect();
        longest_first(&mut t, |(_, p)| p.len());
        let order: Vec<usize> = t.iter().map(|&(i, _)| i).collect();
        assert_eq!(order, [1, 4, 5, 0, 3, 6, 2]);
        longest_first(&mut v, |p| p.len());
        assert_eq!(v, ["/api", "/app", "/api", "/a", "/b", "/c", "/"]);
        let mut empty: Vec<&str> = Vec::new();
        longest_first(&mut empty, |p| p.len());
        assert!(empty.is_empty());
    }
    use crate::config::Site;

    fn sites() -> Sites {
        let site = |names: &[&str], default: bool| Site {
            names: names.iter().map(|n| n.to_string()).collect(),
            default,
            ..Site::default()
        };
        let config = Config {
            sites: vec![
                site(&["a.example"], false),
                site(&["*.example", "B.example"], false),
                site(&["*.deep.example"], false),
                site(&["fallback"], true),
            ],
            ..Config::default()
        };
        Sites::build(&config).unwrap()
    }

    #[test]
    fn host_picks_the_site() {
        let s = sites();
        let cases: &[(&[u8], usize)] = &[
            (b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", 0),
            (b"GET / HTTP/1.1\r\nHost: A.EXAMPLE:8080\r\n\r\n", 0),
            (b"GET / HTTP/1.1\r\nHost: a.example.\r\n\r\n", 0),
            (b"GET / HTTP/1.1\r\nHost: b.example\r\n\r\n", 1),
            (b"GET / HTTP/1.1\r\nHost: x.y.example\r\n\r\n", 1),
            (b"GET / HTTP/1.1\r\nHost: x.deep.example\r\n\r\n", 2),
            (b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", 3),
            (b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", 3),
            (b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 3),
            (b"GET / HTTP/1.0\r\n\r\n", 3),
            (
                b"GET http://a.example/x HTTP/1.1\r\nHost: other.test\r\n\r\n",
                0,
            ),
        ];
        for (req, want) in cases {
            let mut head = RequestHead::new();
            head.parse(req, &Default::default()).unwrap();
            assert_eq!(
                s.pick(&head, req),
                *want,
                "{}",
                String::from_utf8_lossy(req)
            );
        }
    }

    #[test]
    fn header_rules_match_by_prefix_and_extension() {
        let rule = |prefix: Option<&str>, ext: &[&str]| HeaderRule {
            prefix: prefix.map(str::to_string),
            extensions: ext.iter().map(|e| e.to_string()).collect(),
            fields: Vec::new(),
            not_proxied: false,
        };
        let cases = [
            (rule(Some("/assets/"), &[]), "/assets/a.js", true),
            (rule(Some("/assets/"), &[]), "/other/a.js", false),
            (rule(None, &["js", "CSS"]), "/x/app.js", true),
            (rule(None, &["js", "css"]), "/x/app.CSS", true),
            (rule(None, &["js"]), "/x.js/app", false),
            (rule(Some("/a/"), &["png"]), "/a/b.png", true),
            (rule(Some("/a/"), &["png"]), "/b/b.png", false),
            (rule(None, &[]), "/anything", true),
        ];
        for (r, path, want) in cases {
            assert_eq!(rule_matches(&r, path), want, "{r:?} {path}");
        }
    }
}
