//! The peer config templates the shipped suites name (`config_template = "bench/…"`), carried
//! inside the binary so a comparison runs from any directory. The files under `bench/` stay the
//! source: they are compiled in with `include_str!`, so an edit there is in the next build.
//! A template path that names none of these is read from disk, relative to the working
//! directory, as before.

use std::borrow::Cow;

use anyhow::Context as _;

/// Built-in templates by the path the suites use for them.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "bench/nginx.conf.in",
        include_str!("../../../../bench/nginx.conf.in"),
    ),
    (
        "bench/nginx-static.conf.in",
        include_str!("../../../../bench/nginx-static.conf.in"),
    ),
    (
        "bench/nginx-tls.conf.in",
        include_str!("../../../../bench/nginx-tls.conf.in"),
    ),
    (
        "bench/nginx-proxy.conf.in",
        include_str!("../../../../bench/nginx-proxy.conf.in"),
    ),
    (
        "bench/haproxy-proxy.cfg.in",
        include_str!("../../../../bench/haproxy-proxy.cfg.in"),
    ),
    (
        "bench/haproxy-grpc.cfg.in",
        include_str!("../../../../bench/haproxy-grpc.cfg.in"),
    ),
    (
        "bench/nginx-grpc.conf.in",
        include_str!("../../../../bench/nginx-grpc.conf.in"),
    ),
    (
        "bench/caddy-proxy.Caddyfile.in",
        include_str!("../../../../bench/caddy-proxy.Caddyfile.in"),
    ),
    (
        "bench/caddy-h3.Caddyfile.in",
        include_str!("../../../../bench/caddy-h3.Caddyfile.in"),
    ),
    (
        "bench/h2o-proxy.conf.in",
        include_str!("../../../../bench/h2o-proxy.conf.in"),
    ),
];

/// The built-in template of this path (`./bench/x` and `bench/x` alike), if there is one.
pub fn builtin(path: &str) -> Option<&'static str> {
    let path = path.strip_prefix("./").unwrap_or(path);
    BUILTIN.iter().find(|(p, _)| *p == path).map(|(_, t)| *t)
}

/// The text of the template `path`: the built-in one, else the file.
pub fn text(path: &str) -> anyhow::Result<Cow<'static, str>> {
    match builtin(path) {
        Some(t) => Ok(Cow::Borrowed(t)),
        None => std::fs::read_to_string(path)
            .map(Cow::Owned)
            .with_context(|| format!("cannot read config_template {path}")),
    }
}

/// Whether `text` can find the template `path` (without reading a file twice later).
pub fn available(path: &str) -> bool {
    builtin(path).is_some() || std::path::Path::new(path).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::suite::Suite;

    #[test]
    fn every_template_a_shipped_suite_names_is_built_in() {
        for suite in [
            crate::compare::suite::DEFAULT_SUITE,
            include_str!("../../../../bench/static.toml"),
            include_str!("../../../../bench/tls.toml"),
            include_str!("../../../../bench/tls-unbuffered.toml"),
            include_str!("../../../../bench/core.toml"),
            include_str!("../../../../bench/ops.toml"),
            include_str!("../../../../bench/proxy_peers.toml"),
            include_str!("../../../../bench/grpc.toml"),
            include_str!("../../../../bench/grpc_proxy.toml"),
        ] {
            for s in Suite::parse(suite).unwrap().servers {
                if let Some(t) = &s.config_template {
                    assert!(builtin(t).is_some(), "{t} is not built in");
                }
            }
        }
    }

    #[test]
    fn built_in_text_is_the_bench_file() {
        let on_disk = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/nginx-tls.conf.in"),
        )
        .unwrap();
        assert_eq!(text("bench/nginx-tls.conf.in").unwrap(), on_disk);
        assert_eq!(text("./bench/nginx.conf.in").unwrap(), BUILTIN[0].1);
        let e = text("/nonexistent/peer.conf.in").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/peer.conf.in"), "{e}");
    }
}
