//! The optional cargo features a configuration can ask for, and the refusal at start of one
//! that asks for a feature this build lacks: one line naming the part and the feature
//! ("built without feature `tls`"), never a setting silently ignored.
//!
//! `websocket` and `tower` are not in the configuration (a build without them has no
//! `Router::ws` or `tower` to call), so nothing here refuses them.
//!
//! Owns only the check (on `Server::bind`, and on a sites reload for the sites' parts); each
//! feature's code lives in its own module, gated whole in `lib.rs` or its parent `mod.rs`.
#![forbid(unsafe_code)]

use crate::config::{BROTLI_QUALITY, Config, GZIP_LEVEL, Listen};
use crate::start_error::{Part, StartError};

/// The features of this build, each with whether it is compiled in.
pub const FEATURES: [(&str, bool); 12] = [
    ("tls", cfg!(feature = "tls")),
    ("http2", cfg!(feature = "http2")),
    ("http3", cfg!(feature = "http3")),
    ("acme", cfg!(feature = "acme")),
    ("brotli", cfg!(feature = "brotli")),
    ("basic-auth", cfg!(feature = "basic-auth")),
    ("jwt", cfg!(feature = "jwt")),
    ("proxy", cfg!(feature = "proxy")),
    ("websocket", cfg!(feature = "websocket")),
    ("gzip", cfg!(feature = "gzip")),
    ("kv", cfg!(feature = "kv")),
    ("grpc", cfg!(feature = "grpc")),
];

fn enabled(feature: &str) -> bool {
    FEATURES.iter().any(|&(f, on)| f == feature && on)
}

/// The first part of `config` that needs a feature this build lacks.
pub(crate) fn check(config: &Config) -> Result<(), StartError> {
    for (i, l) in config.listen_list().iter().enumerate() {
        need(listener_needs(l), Part::Listener(i))?;
    }
    if config.acme.is_some() {
        need(Some(("the [acme] settings", "acme")), Part::Other)?;
    }
    if config.compression.brotli_quality != BROTLI_QUALITY {
        need(Some(("brotli_quality", "brotli")), Part::Other)?;
    }
    if config.compression.gzip_level != GZIP_LEVEL {
        need(Some(("gzip_level", "gzip")), Part::Other)?;
    }
    check_sites(config)
}

/// The first site of `config` that needs a feature this build lacks (checked again on a
/// sites reload, which takes only the sites and their upstreams).
pub(crate) fn check_sites(config: &Config) -> Result<(), StartError> {
    let mount = ("a proxy mount (proxy)", "proxy");
    if !config.proxies.is_empty() {
        need(Some(mount), Part::Proxy { site: 0, index: 0 })?;
    }
    for (i, s) in config.sites.iter().enumerate() {
        need(
            (!s.proxies.is_empty()).then_some(mount),
            Part::Proxy { site: i, index: 0 },
        )?;
    }
    if !config.upstreams.is_empty() {
        need(
            Some(("an upstream ([[upstream]])", "proxy")),
            Part::Upstream(0),
        )?;
    }
    if let Some(i) = config
        .upstreams
        .iter()
        .position(|u| u.protocol != crate::config::UpstreamProtocol::Http1)
    {
        need(
            Some(("an HTTP/2 upstream (protocol = \"h2c\" or \"h2\")", "http2")),
            Part::Upstream(i),
        )?;
    }
    if let Some(i) = config
        .upstreams
        .iter()
        .position(|u| u.protocol == crate::config::UpstreamProtocol::H2)
    {
        need(
            Some(("an HTTP/2 upstream over TLS (protocol = \"h2\")", "tls")),
            Part::Upstream(i),
        )?;
    }
    let tiered = |p: &[crate::config::ProxyMount]| {
        p.iter()
            .position(|m| m.cache.as_ref().is_some_and(|c| c.tier.is_some()))
    };
    let tier = ("a shared cache tier (cache tier)", "kv");
    if let Some(index) = tiered(&config.proxies) {
        need(Some(tier), Part::Proxy { site: 0, index })?;
    }
    for (i, s) in config.sites.iter().enumerate() {
        if let Some(index) = tiered(&s.proxies) {
            need(Some(tier), Part::Proxy { site: i, index })?;
        }
    }
    let web = |p: &[crate::config::ProxyMount]| p.iter().position(|m| m.grpc_web);
    let grpc_web = ("gRPC-Web translation (grpc_web)", "grpc");
    if let Some(index) = web(&config.proxies) {
        need(Some(grpc_web), Part::Proxy { site: 0, index })?;
    }
    for (i, s) in config.sites.iter().enumerate() {
        if let Some(index) = web(&s.proxies) {
            need(Some(grpc_web), Part::Proxy { site: i, index })?;
        }
    }
    for (i, s) in config.sites.iter().enumerate() {
        let wants = [
            (s.tls.is_some(), ("its certificate (tls)", "tls")),
            (
                s.managed.is_some(),
                ("its managed certificate (tls = acme|internal)", "acme"),
            ),
            (!s.auth.is_empty(), ("basic auth (auth)", "basic-auth")),
            (!s.jwt.is_empty(), ("a JWT check (jwt)", "jwt")),
        ];
        for (asks, what) in wants {
            need(asks.then_some(what), Part::Site(i))?;
        }
    }
    Ok(())
}

/// What a listener asks for that needs a feature, and that feature.
fn listener_needs(l: &Listen) -> Option<(&'static str, &'static str)> {
    if l.quic {
        Some(("HTTP/3 (quic)", "http3"))
    } else if l.tls.is_some() {
        Some(("HTTPS (tls)", "tls"))
    } else if l.h2c {
        Some(("HTTP/2 cleartext (h2c)", "http2"))
    } else if l.h2c_preface {
        Some((
            "HTTP/2 with prior knowledge beside HTTP/1.1 (h2c_preface)",
            "http2",
        ))
    } else {
        None
    }
}

fn need(want: Option<(&str, &str)>, part: Part) -> Result<(), StartError> {
    match want {
        Some((what, feature)) if !enabled(feature) => Err(StartError::invalid(
            part,
            format!("{what}: linerate-server was built without feature `{feature}`"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        BasicAuth, CertFiles, JwtAuth, JwtSecret, Managed, ProxyMount, Site, TlsConfig, Upstream,
        UpstreamAddr, UpstreamServer,
    };

    fn tls() -> TlsConfig {
        TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: None,
            ktls: false,
            key_update_bytes: 0,
            http2: true,
            options: Default::default(),
        }
    }

    fn mount() -> ProxyMount {
        ProxyMount {
            prefix: "/api".into(),
            upstream: "app".into(),
            ..Default::default()
        }
    }

    fn upstream() -> Upstream {
        let addr = UpstreamAddr::Tcp("127.0.0.1:9".parse().unwrap());
        Upstream::new("app", vec![UpstreamServer { addr, weight: 1 }])
    }

    fn site(f: impl FnOnce(&mut Site)) -> Config {
        let mut s = Site::default();
        f(&mut s);
        Config {
            sites: vec![s],
            ..Config::default()
        }
    }

    /// One row per setting that needs a feature: with the feature it passes this check,
    /// without it the start is refused naming the part and the feature.
    #[test]
    fn a_setting_needing_a_missing_feature_is_refused_naming_it() {
        let files = CertFiles {
            cert: "c.pem".into(),
            key: "k.pem".into(),
            ocsp: None,
        };
        let rows: Vec<(&str, Config, Part)> = vec![
            (
                "tls",
                Config {
                    tls: Some(tls()),
                    ..Config::default()
                },
                Part::Listener(1),
            ),
            (
                "http3",
                Config {
                    tls: Some(tls()),
                    quic: true,
                    ..Config::default()
                },
                Part::Listener(1),
            ),
            (
                "http2",
                Config {
                    h2c: Some("127.0.0.1:0".parse().unwrap()),
                    ..Config::default()
                },
                Part::Listener(1),
            ),
            (
                "http2",
                Config {
                    h2c_preface: true,
                    ..Config::default()
                },
                Part::Listener(0),
            ),
            (
                "acme",
                Config {
                    acme: Some(Default::default()),
                    ..Config::default()
                },
                Part::Other,
            ),
            (
                "acme",
                site(|s| s.managed = Some(Managed::Internal)),
                Part::Site(0),
            ),
            ("tls", site(|s| s.tls = Some(files.clone())), Part::Site(0)),
            (
                "basic-auth",
                site(|s| {
                    s.auth = vec![BasicAuth {
                        prefix: "/".into(),
                        realm: "r".into(),
                        htpasswd: "h".into(),
                    }]
                }),
                Part::Site(0),
            ),
            (
                "jwt",
                site(|s| {
                    s.jwt = vec![JwtAuth {
                        prefix: "/".into(),
                        realm: "r".into(),
                        secret: JwtSecret::Env("S".into()),
                        issuer: None,
                        audience: None,
                        require: Vec::new(),
                        require_exp: true,
                        leeway_s: 0,
                    }]
                }),
                Part::Site(0),
            ),
            (
                "proxy",
                Config {
                    proxies: vec![mount()],
                    upstreams: vec![upstream()],
                    ..Config::default()
                },
                Part::Proxy { site: 0, index: 0 },
            ),
            (
                "proxy",
                site(|s| s.proxies = vec![mount()]),
                Part::Proxy { site: 0, index: 0 },
            ),
            (
                "proxy",
                Config {
                    sites: vec![Site::default(), Site::default()],
                    upstreams: vec![upstream()],
                    ..Config::default()
                },
                Part::Upstream(0),
            ),
            (
                "gzip",
                Config {
                    compression: crate::config::Compression {
                        gzip_level: 9,
                        ..Default::default()
                    },
                    ..Config::default()
                },
                Part::Other,
            ),
            (
                "brotli",
                Config {
                    compression: crate::config::Compression {
                        brotli_quality: 5,
                        ..Default::default()
                    },
                    ..Config::default()
                },
                Part::Other,
            ),
        ];
        let mut rows = rows;
        if enabled("proxy") {
            // An upstream needs `proxy` first; past it, an h2c one needs `http2`.
            let mut h2c = upstream();
            h2c.protocol = crate::config::UpstreamProtocol::H2c;
            rows.push((
                "http2",
                Config {
                    upstreams: vec![upstream(), h2c],
                    ..Config::default()
                },
                Part::Upstream(1),
            ));
            // Over TLS (`h2`): `http2`, then `tls` (a build with `tls` has `http2`).
            let mut h2 = upstream();
            h2.protocol = crate::config::UpstreamProtocol::H2;
            let feature = if enabled("http2") { "tls" } else { "http2" };
            rows.push((
                feature,
                Config {
                    upstreams: vec![upstream(), h2],
                    ..Config::default()
                },
                Part::Upstream(1),
            ));
        }
        for (feature, config, part) in rows {
            match check(&config) {
                Ok(()) => assert!(enabled(feature), "{feature}: accepted without it"),
                Err(e) => {
                    assert!(!enabled(feature), "{feature}: refused with it: {e}");
                    assert_eq!(e.part, part, "{feature}");
                    let line = e.to_string();
                    assert!(
                        line.contains(&format!("without feature `{feature}`")),
                        "{line}"
                    );
                    assert!(!line.contains('\n'), "{line}");
                }
            }
        }
    }

    /// `Server::bind` runs the check before it binds anything: a build without `tls` refuses
    /// an HTTPS listener there with the one line; a build with it gets past the check.
    #[test]
    fn bind_refuses_a_listener_the_build_cannot_serve() {
        let config = Config {
            addr: "127.0.0.1:0".parse().unwrap(),
            tls: Some(tls()),
            ..Config::default()
        };
        match crate::Server::bind(config, crate::Router::new()) {
            Err(e) if !enabled("tls") => {
                assert_eq!(e.part, Part::Listener(1));
                assert_eq!(
                    e.to_string(),
                    "HTTPS (tls): linerate-server was built without feature `tls`"
                );
            }
            Err(e) => assert!(!e.to_string().contains("without feature"), "{e}"),
            Ok(_) => assert!(enabled("tls"), "an HTTPS listener bound without TLS"),
        }
    }

    #[test]
    fn a_plain_configuration_needs_no_feature() {
        assert!(check(&Config::default()).is_ok());
    }
}
