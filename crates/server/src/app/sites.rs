//! Sites: which one answers a request (by Host, once per request head), and what a site adds
//! around its answers — redirects before anything else, fields by path prefix or extension,
//! error pages in place of the server's own status bodies.
//!
//! Owns the per-site rules as read-only data built at start, or at a reload ([`SiteSet`]: the
//! sites with their opened roots, swapped into each worker whole between two events); the
//! dispatcher asks. A server without configured sites has one implicit site (the
//! application, and the `files` mount), and picking it costs one length test.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::io;
use std::sync::Arc;

use linerate_http1::{RequestHead, TargetForm};

use super::files::{FilesOptions, StaticFiles};
use super::response::{Body, Response};
use crate::config::{Compression, Config, FilesMount, HeaderRule, Redirect};

/// The sites and their static roots, opened: what a worker answers from, and what a reload
/// replaces whole.
pub(crate) struct SiteSet {
    pub sites: Sites,
    /// Each site's roots, opened once; each worker makes its own caches from them (the
    /// lock is taken only then: at a worker's start and at a reload).
    roots: Vec<Vec<std::sync::Mutex<StaticFiles>>>,
}

impl SiteSet {
    /// Builds the sites of `config` and opens their roots; an error names the path.
    pub(crate) fn build(config: &Config) -> io::Result<SiteSet> {
        let sites = Sites::build(config)?;
        let roots = sites
            .iter()
            .map(|site| {
                site.mounts
                    .iter()
                    .map(|m| {
                        StaticFiles::open(&m.root, site.files.clone())
                            .map(std::sync::Mutex::new)
                            .map_err(|e| {
                                io::Error::new(
                                    e.kind(),
                                    format!("cannot serve {}: {e}", m.root.display()),
                                )
                            })
                    })
                    .collect::<io::Result<Vec<_>>>()
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(SiteSet { sites, roots })
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
}

/// One site, ready to answer.
pub(crate) struct SiteApp {
    names: Vec<Name>,
    /// The application's routes are mounted here.
    pub app: bool,
    /// Longest prefix first.
    pub mounts: Vec<FilesMount>,
    pub files: FilesOptions,
    pub compression: Compression,
    /// Largest body for buffering and deferred handlers (413 beyond).
    pub max_body_bytes: u64,
    redirects: Vec<Redirect>,
    headers: Vec<HeaderRule>,
    error_pages: Vec<ErrorPage>,
    /// Some answer here gets fields or a page: [`SiteApp::decorate`] has work to do.
    pub decorates: bool,
}

enum Name {
    Exact(String),
    /// `*.example.com`, kept as `.example.com`.
    Suffix(String),
}

struct ErrorPage {
    status: u16,
    content_type: &'static str,
    body: Arc<[u8]>,
}

impl Sites {
    /// The sites of `config` (or the implicit one); error pages are read now, and a page that
    /// cannot be read is an error naming its path.
    pub(crate) fn build(config: &Config) -> io::Result<Sites> {
        if config.sites.is_empty() {
            let site = SiteApp {
                names: Vec::new(),
                app: true,
                mounts: config.files.iter().cloned().collect(),
                files: FilesOptions::default(),
                compression: config.compression.clone(),
                max_body_bytes: config.max_body_bytes,
                redirects: Vec::new(),
                headers: Vec::new(),
                error_pages: Vec::new(),
                decorates: false,
            };
            return Ok(Sites {
                list: vec![site],
                default: 0,
            });
        }
        let mut list = Vec::with_capacity(config.sites.len());
        for s in &config.sites {
            let mut mounts = s.mounts.clone();
            mounts.sort_by_key(|m| std::cmp::Reverse(m.prefix.len()));
            let mut error_pages = Vec::new();
            for (status, path) in &s.error_pages {
                let body = std::fs::read(path).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot read error page {}: {e}", path.display()),
                    )
                })?;
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                error_pages.push(ErrorPage {
                    status: *status,
                    content_type: super::files::mime::content_type(name),
                    body: body.into(),
                });
            }
            let mut files = FilesOptions {
                dotfiles: s.dotfiles,
                ..FilesOptions::default()
            };
            if !s.index.is_empty() {
                files.index = s.index.clone();
            }
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
                files,
                compression,
                max_body_bytes: s.max_body_bytes.unwrap_or(config.max_body_bytes),
                redirects: s.redirects.clone(),
                decorates: !s.headers.is_empty() || !error_pages.is_empty(),
                headers: s.headers.clone(),
                error_pages,
            });
        }
        let default = config.sites.iter().position(|s| s.default).unwrap_or(0);
        Ok(Sites { list, default })
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
        let authority = match head.target_form() {
            TargetForm::Absolute => absolute_authority(head.target(buf).as_bytes()),
            _ => head.host(buf),
        };
        let Some(host) = authority.map(strip_port) else {
            return self.default;
        };
        let host = host.to_ascii_lowercase();
        let host = std::str::from_utf8(&host).unwrap_or("");
        let host = host.strip_suffix('.').unwrap_or(host);
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
    pub(crate) fn get(&self, i: usize) -> &SiteApp {
        self.list.get(i).unwrap_or(&self.list[self.default])
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &SiteApp> {
        self.list.iter()
    }
}

impl SiteApp {
    /// A redirect for this path, when one applies.
    #[inline]
    pub(crate) fn redirect(&self, path: &[u8], query: Option<&str>) -> Option<Response> {
        if self.redirects.is_empty() {
            return None;
        }
        self.find_redirect(path, query)
    }

    #[cold]
    fn find_redirect(&self, path: &[u8], query: Option<&str>) -> Option<Response> {
        let path = std::str::from_utf8(path).ok()?;
        let r = self
            .redirects
            .iter()
            .find(|r| path.starts_with(r.prefix.as_str()))?;
        let query = query.map_or(String::new(), |q| format!("?{q}"));
        let location =
            r.to.replace("{path}", path)
                .replace("{rest}", &path[r.prefix.len()..])
                .replace("{query}", &query);
        // The parser admitted only URI bytes in the path and query: the value is a valid field.
        Some(
            Response::new(r.status)
                .try_header("Location", location)
                .unwrap_or_else(|_| Response::new(500)),
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

/// The host of `http://host:port/path`.
fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
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

#[cfg(test)]
mod tests {
    use super::*;
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
