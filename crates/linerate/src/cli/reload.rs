//! What a SIGHUP changed: the configuration in use against the file read again, key by key
//! in the file's own names, each either applied now (sites, upstreams, and what sites take
//! from the top level: `compression`, `limits.max_body_bytes`) or needing a restart (what
//! the workers, listeners and logs were built with). Owns the comparison and its words only;
//! swapping the sites in is the server's.
#![forbid(unsafe_code)]

use linerate_server::Config;
use linerate_server::config::Upstream;

/// The keys a reload changed, in the file's names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Applied by the reload itself.
    pub now: Vec<String>,
    /// Kept as they were until a restart.
    pub restart: Vec<String>,
}

/// Compares what `running` uses with `new`: every field of [`Config`] the file can set is
/// named; any other difference is reported as `other settings` (restart), so nothing is
/// missed if a key is added without a name here.
pub fn changes(running: &Config, new: &Config) -> Changes {
    let mut c = Changes::default();
    // Compared by their Debug form: every field's type has one, few have PartialEq.
    let differ =
        |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
    let mut restart = |key: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        if differ(a, b) {
            c.restart.push(key.to_string());
        }
    };
    let (r, n) = (running, new);
    restart("workers", &r.workers, &n.workers);
    restart("cpus", &r.cpus, &n.cpus);
    restart("access_log", &r.access_log, &n.access_log);
    restart(
        "access_log_format",
        &r.access_log_format,
        &n.access_log_format,
    );
    restart(
        "trusted_proxies",
        &r.trusted_proxies.ranges,
        &n.trusted_proxies.ranges,
    );
    restart(
        "real_ip_field",
        &r.trusted_proxies.field,
        &n.trusted_proxies.field,
    );
    restart("admin.addr", &r.admin, &n.admin);
    restart(
        "limits.max_head_bytes",
        &r.limits.max_head_bytes,
        &n.limits.max_head_bytes,
    );
    restart(
        "limits.max_headers",
        &r.limits.max_headers,
        &n.limits.max_headers,
    );
    restart(
        "limits.max_stream_body_bytes",
        &r.max_stream_body_bytes,
        &n.max_stream_body_bytes,
    );
    restart(
        "limits.header_timeout",
        &r.header_timeout,
        &n.header_timeout,
    );
    restart("limits.body_timeout", &r.body_timeout, &n.body_timeout);
    restart("limits.min_body_rate", &r.min_body_rate, &n.min_body_rate);
    restart(
        "limits.keepalive_timeout",
        &r.keepalive_timeout,
        &n.keepalive_timeout,
    );
    restart("limits.send_timeout", &r.send_timeout, &n.send_timeout);
    restart("limits.min_send_rate", &r.min_send_rate, &n.min_send_rate);
    restart(
        "limits.max_unsent_bytes",
        &r.max_unsent_bytes,
        &n.max_unsent_bytes,
    );
    restart(
        "limits.max_requests_per_conn",
        &r.max_requests_per_conn,
        &n.max_requests_per_conn,
    );
    restart(
        "limits.max_conns_per_client",
        &(r.max_conns_per_client, r.count_loopback_clients),
        &(n.max_conns_per_client, n.count_loopback_clients),
    );
    restart("limits.drain_timeout", &r.drain_timeout, &n.drain_timeout);
    restart("shutdown_delay", &r.shutdown_delay, &n.shutdown_delay);
    restart("upgrade_socket", &r.upgrade_socket, &n.upgrade_socket);
    // A listener's address, its TLS options and [tls]'s defaults; its certificate files
    // are read again by every reload.
    restart("listen", &listeners(r), &listeners(n));
    restart("acme", &r.acme, &n.acme);
    // What the flags alone set does not change between reloads; anything else named
    // nowhere above still says so.
    if differ(&unnamed(r), &unnamed(n)) {
        c.restart.push("other settings".to_string());
    }

    if differ(&r.compression, &n.compression) {
        c.now.push("compression".to_string());
    }
    if r.max_body_bytes != n.max_body_bytes {
        c.now.push("limits.max_body_bytes".to_string());
    }
    upstreams(&r.upstreams, &n.upstreams, &mut c.now);
    for i in 0..r.sites.len().max(n.sites.len()) {
        let (a, b) = (r.sites.get(i), n.sites.get(i));
        if differ(&a, &b) {
            let label = b.or(a).and_then(|s| s.names.first()).map_or_else(
                || format!("[[site]] {}", i + 1),
                |name| format!("site {name:?}"),
            );
            c.now.push(match (a, b) {
                (None, Some(_)) => format!("{label} (added)"),
                (Some(_), None) => format!("{label} (removed)"),
                _ => label,
            });
        }
    }
    if differ(&r.proxies, &n.proxies) {
        c.now.push("proxy mounts".to_string());
    }
    c
}

/// The listeners without their certificates' contents (paths are kept: a changed path is
/// a new listener's).
fn listeners(c: &Config) -> Vec<String> {
    c.listen_list().iter().map(|l| format!("{l:?}")).collect()
}

/// `c` without every field [`changes`] names.
fn unnamed(c: &Config) -> String {
    let mut c = c.clone();
    let d = Config::default();
    c.workers = d.workers;
    c.cpus.clear();
    c.access_log = None;
    c.access_log_format = d.access_log_format;
    c.trusted_proxies = d.trusted_proxies;
    c.admin = None;
    c.limits.max_head_bytes = d.limits.max_head_bytes;
    c.limits.max_headers = d.limits.max_headers;
    c.max_stream_body_bytes = d.max_stream_body_bytes;
    c.header_timeout = d.header_timeout;
    c.body_timeout = d.body_timeout;
    c.min_body_rate = d.min_body_rate;
    c.keepalive_timeout = d.keepalive_timeout;
    c.send_timeout = d.send_timeout;
    c.min_send_rate = d.min_send_rate;
    c.max_unsent_bytes = d.max_unsent_bytes;
    c.max_requests_per_conn = d.max_requests_per_conn;
    c.max_conns_per_client = d.max_conns_per_client;
    c.count_loopback_clients = d.count_loopback_clients;
    c.drain_timeout = d.drain_timeout;
    c.shutdown_delay = d.shutdown_delay;
    c.upgrade_socket = None;
    c.listeners.clear();
    c.acme = None;
    c.compression = d.compression;
    c.max_body_bytes = d.max_body_bytes;
    c.upstreams.clear();
    c.sites.clear();
    c.proxies.clear();
    format!("{c:?}")
}

/// Upstreams by name: added, removed, or the keys of one that changed
/// (`upstream "app" timeout`).
fn upstreams(running: &[Upstream], new: &[Upstream], out: &mut Vec<String>) {
    for u in new {
        let Some(o) = running.iter().find(|o| o.name == u.name) else {
            out.push(format!("upstream {:?} (added)", u.name));
            continue;
        };
        let mut key = |name: &str, changed: bool| {
            if changed {
                out.push(format!("upstream {:?} {name}", u.name));
            }
        };
        key("servers", o.servers != u.servers);
        key("max_conns", o.max_conns != u.max_conns);
        key("keepalive", o.keepalive != u.keepalive);
        key("idle_timeout", o.idle_timeout != u.idle_timeout);
        key("connect_timeout", o.connect_timeout != u.connect_timeout);
        key("timeout", o.timeout != u.timeout);
        key("tries", o.tries != u.tries);
        key("max_fails", o.max_fails != u.max_fails);
        key("fail_timeout", o.fail_timeout != u.fail_timeout);
        key("balance", o.balance != u.balance);
        key("health_check", o.health != u.health);
        key("protocol", o.protocol != u.protocol);
        key("tls_server_name", o.tls_server_name != u.tls_server_name);
        key("tls_ca", o.tls_ca != u.tls_ca);
        // Anything named nowhere above.
        let rest = Upstream {
            servers: u.servers.clone(),
            max_conns: u.max_conns,
            keepalive: u.keepalive,
            idle_timeout: u.idle_timeout,
            connect_timeout: u.connect_timeout,
            timeout: u.timeout,
            tries: u.tries,
            max_fails: u.max_fails,
            fail_timeout: u.fail_timeout,
            balance: u.balance.clone(),
            health: u.health.clone(),
            protocol: u.protocol,
            tls_server_name: u.tls_server_name.clone(),
            tls_ca: u.tls_ca.clone(),
            ..o.clone()
        };
        key("other settings", rest != *u);
    }
    for o in running {
        if !new.iter().any(|u| u.name == o.name) {
            out.push(format!("upstream {:?} (removed)", o.name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream's `timeout` applies at once; a reload once said "workers, limits,
    /// timeouts… restart to apply them" of it.
    #[test]
    fn each_changed_key_is_named_once_as_applied_now_or_after_a_restart() {
        let running = Config {
            upstreams: vec![Upstream::new("app", Vec::new())],
            ..Config::default()
        };
        assert_eq!(changes(&running, &running.clone()), Changes::default());

        let mut new = running.clone();
        new.upstreams[0].timeout = std::time::Duration::from_secs(1);
        assert_eq!(
            changes(&running, &new),
            Changes {
                now: vec!["upstream \"app\" timeout".into()],
                restart: vec![],
            }
        );

        let mut new = running.clone();
        new.header_timeout = std::time::Duration::from_secs(1);
        new.workers = 7;
        new.max_body_bytes = 5;
        new.upstreams.push(Upstream::new("b", Vec::new()));
        assert_eq!(
            changes(&running, &new),
            Changes {
                now: vec![
                    "limits.max_body_bytes".into(),
                    "upstream \"b\" (added)".into()
                ],
                restart: vec!["workers".into(), "limits.header_timeout".into()],
            }
        );

        // A field no key names still says a restart is needed.
        let mut new = running.clone();
        new.backlog += 1;
        assert_eq!(changes(&running, &new).restart, ["other settings"]);
    }
}
