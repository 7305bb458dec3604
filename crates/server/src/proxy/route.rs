//! A proxy mount ready to answer: its prefix, the upstream it sends to (by index), and the
//! rules for the requests it forwards and the answers it returns, built once from the
//! configuration's [`ProxyMount`].
#![forbid(unsafe_code)]

use super::auth::AuthRoute;
use super::forward::{self, HostPolicy};
use super::reply;
use crate::config::{Balance, HashKey, ProxyMount, Upstream};

/// One proxy mount of a site.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub mount: ProxyMount,
    /// Index into the server's upstreams.
    pub upstream: usize,
    pub request: forward::Policy,
    pub response: reply::Policy,
    /// What its upstream's hash balancing hashes (`None`: it does not balance by hash).
    pub hash_key: Option<HashKey>,
    /// Its forward auth.
    pub auth: Option<AuthRoute>,
    /// Its HTTP cache, shared by the workers.
    pub cache: Option<std::sync::Arc<super::cache::MountCache>>,
    /// Its path prefix, as its requests' spans name their route (`http.route`).
    pub name: std::sync::Arc<str>,
}

impl Route {
    /// The route for `m`; an error names what is wrong with it.
    pub(crate) fn build(m: &ProxyMount, upstreams: &[Upstream]) -> Result<Route, String> {
        let upstream = upstreams
            .iter()
            .position(|u| u.name == m.upstream)
            .ok_or_else(|| format!("no upstream named {:?}", m.upstream))?;
        let auth = match &m.auth {
            Some(a) => {
                let i = upstreams
                    .iter()
                    .position(|u| u.name == a.upstream)
                    .ok_or_else(|| format!("no upstream named {:?}", a.upstream))?;
                // The verdict is read from an HTTP/1.1 exchange only (`driver/upstream.rs`).
                if upstreams[i].protocol != crate::config::UpstreamProtocol::Http1 {
                    return Err(format!(
                        "auth upstream {:?} must speak HTTP/1.1 (protocol = \"h1\")",
                        a.upstream
                    ));
                }
                Some(AuthRoute {
                    conf: a.clone(),
                    upstream: i,
                    host: upstream_host(&upstreams[i]),
                    copy: a.copy.iter().cloned().collect(),
                })
            }
            None => None,
        };
        if m.grpc_web && upstreams[upstream].protocol == crate::config::UpstreamProtocol::Http1 {
            return Err(format!(
                "grpc_web needs an HTTP/2 upstream (upstream {:?} speaks HTTP/1.1)",
                m.upstream
            ));
        }
        // The fields forward auth sets are never the client's.
        let mut remove = m.remove_request.clone();
        if let Some(a) = &m.auth {
            remove.extend(a.copy.iter().cloned());
        }
        if m.cache.is_some() {
            remove.extend(
                super::cache::UNKEYED_OVERRIDES
                    .iter()
                    .map(|f| f.to_string()),
            );
        }
        Ok(Route {
            name: m.prefix.as_str().into(),
            mount: m.clone(),
            upstream,
            request: forward::Policy {
                prefix: if m.rewrite.is_some() {
                    m.prefix.clone()
                } else {
                    String::new()
                },
                rewrite: m.rewrite.clone().unwrap_or_default(),
                host: match &m.host {
                    Some(h) => HostPolicy::Set(h.clone()),
                    None => HostPolicy::PassThrough,
                },
                forwarded: m.forwarded,
                trust_forwarded: m.trust_forwarded,
                set: m.set_request.clone(),
                remove,
                upstream_host: upstream_host(&upstreams[upstream]),
                // As caddy: WebSocket passes without a setting (nginx needs two lines).
                upgrades: m.upgrades.iter().map(|u| u.to_ascii_lowercase()).collect(),
            },
            response: reply::Policy {
                set: m.set_response.clone(),
                remove: m.remove_response.clone(),
            },
            hash_key: match &upstreams[upstream].balance {
                Balance::Hash(k) => Some(k.clone()),
                _ => None,
            },
            auth,
            cache: match &m.cache {
                Some(c) => Some(super::cache::MountCache::start(c)?),
                None => None,
            },
        })
    }
}

/// The Host an upstream gets when the client sent none: its first server's address (an
/// upstream's name need not be a host name).
fn upstream_host(u: &Upstream) -> String {
    match u.servers.first().map(|s| &s.addr) {
        Some(crate::config::UpstreamAddr::Tcp(a)) => a.to_string(),
        _ => "localhost".to_string(),
    }
}
