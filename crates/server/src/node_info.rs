//! What tells one node of a fleet from another on `/metrics`: the build it
//! runs (`linerate_build_info`), the configuration in use (`linerate_config_info{hash}`) and
//! how the last reload went (`linerate_config_last_reload_successful` and its time, as
//! Prometheus names its own), whether a reload left keys waiting for a restart
//! (`linerate_restart_pending`), and each loaded certificate's expiry
//! (`linerate_certificate_expiry_timestamp_seconds`).
//!
//! Owns those values and their exposition only. The binary sets them (it knows its build and
//! reads the file); the admin thread renders them at scrape time. Nothing here is on the
//! request path: one lock taken by a reload and by a scrape.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// What a node reports about itself; shared by the server, its control handle and the
/// admin listener.
#[derive(Debug, Default)]
pub struct NodeInfo {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    /// `version` and `commit` of the binary.
    build: Option<(String, String)>,
    /// The configuration in use: its hash and what was hashed (`file` or `flags`).
    config: Option<(String, &'static str)>,
    /// Whether the last reload succeeded (a start counts as one).
    reload_ok: bool,
    /// When the configuration in use was applied (seconds since the Unix epoch).
    reload_success_s: f64,
    /// The configuration in use as `GET /config` answers it (`config_view`).
    effective: String,
    /// The keys the file read by the last reload changed that only a restart applies.
    restart_pending: Vec<String>,
}

impl NodeInfo {
    /// A node that has reported nothing yet: only what the server itself knows is exposed.
    pub fn new() -> Arc<NodeInfo> {
        Arc::default()
    }

    /// The binary's version and the commit it was built from.
    pub fn set_build(&self, version: &str, commit: &str) {
        self.write().build = Some((version.to_string(), commit.to_string()));
    }

    /// A configuration was applied (at start, or by a successful reload): `hash` is its
    /// hash, `source` what was hashed (`file`: the file's bytes; `flags`: the command
    /// line). The reload is counted as successful, now.
    pub fn applied(&self, hash: &str, source: &'static str) {
        let mut s = self.write();
        s.config = Some((hash.to_string(), source));
        s.reload_ok = true;
        s.reload_success_s = now_s();
    }

    /// The configuration the server runs with now (at bind, and after each reload that
    /// applied one), as `GET /config` answers it: JSON, secrets removed.
    pub fn set_effective(&self, config: &crate::config::Config) {
        let view = crate::config_view::render(config);
        self.write().effective = view;
    }

    /// `GET /config`'s answer (see [`NodeInfo::set_effective`]).
    pub fn effective(&self) -> String {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .effective
            .clone()
    }

    /// A reload with nothing to read but the certificates (no configuration file) succeeded:
    /// the hash stays, the time is now.
    pub fn reloaded(&self) {
        let mut s = self.write();
        s.reload_ok = true;
        s.reload_success_s = now_s();
    }

    /// A reload failed: the configuration in use stays, and so do its hash and time.
    pub fn reload_failed(&self) {
        self.write().reload_ok = false;
    }

    /// A reload read the file: `keys` are what it changed that only a restart applies (none:
    /// the file and the process agree on them again).
    pub fn set_restart_pending(&self, keys: &[String]) {
        self.write().restart_pending = keys.to_vec();
    }

    /// `linerate_restart_pending`: 1 while the file last read by a reload
    /// changed a key that only a restart applies (the log names them), 0 otherwise, from
    /// the start on.
    pub fn render_restart_pending(&self) -> String {
        let pending = !self
            .state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .restart_pending
            .is_empty();
        format!(
            "# HELP linerate_restart_pending Whether the configuration file, as the last reload read it, changed a key only a restart applies (1; the log names them), or not (0).\n# TYPE linerate_restart_pending gauge\nlinerate_restart_pending {}\n",
            u8::from(pending)
        )
    }

    /// The metrics above, in the text exposition format; nothing for what was never set.
    pub fn render(&self) -> String {
        let s = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        if let Some((version, commit)) = &s.build {
            out.push_str("# HELP linerate_build_info The binary's version and the commit it was built from (always 1).\n# TYPE linerate_build_info gauge\n");
            let _ = writeln!(
                out,
                "linerate_build_info{{version=\"{}\",commit=\"{}\"}} 1",
                escape(version),
                escape(commit)
            );
        }
        if let Some((hash, source)) = &s.config {
            out.push_str("# HELP linerate_config_info The configuration in use: the SHA-256 of the file's bytes (or of the flags without one), first 16 hex digits (always 1).\n# TYPE linerate_config_info gauge\n");
            let _ = writeln!(
                out,
                "linerate_config_info{{hash=\"{}\",source=\"{source}\"}} 1",
                escape(hash)
            );
            out.push_str("# HELP linerate_config_last_reload_successful Whether the last reload (SIGHUP) succeeded; 1 at start.\n# TYPE linerate_config_last_reload_successful gauge\n");
            let _ = writeln!(
                out,
                "linerate_config_last_reload_successful {}",
                u8::from(s.reload_ok)
            );
            out.push_str("# HELP linerate_config_last_reload_success_timestamp_seconds When the configuration in use was applied (start or the last successful reload).\n# TYPE linerate_config_last_reload_success_timestamp_seconds gauge\n");
            let _ = writeln!(
                out,
                "linerate_config_last_reload_success_timestamp_seconds {:.3}",
                s.reload_success_s
            );
        }
        out
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// A certificate served now and when it expires (the leaf's `notAfter`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertExpiry {
    /// The site's first name (a named certificate), or the leaf's first DNS name (a
    /// listener's own; `default` with none).
    pub name: String,
    /// Where it comes from: `files` (a PEM pair the configuration names), `acme`, `internal`.
    pub source: &'static str,
    /// `notAfter`, seconds since the Unix epoch.
    pub not_after_s: i64,
}

/// `linerate_certificate_expiry_timestamp_seconds{name,source}`, one sample per certificate
/// (the same one on several listeners counted once); nothing without any.
pub fn render_certs(certs: &[CertExpiry]) -> String {
    let mut seen: Vec<&CertExpiry> = Vec::new();
    for c in certs {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    if seen.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# HELP linerate_certificate_expiry_timestamp_seconds When each certificate served expires (its notAfter), by name and source (files, acme, internal); read again with the certificates.
# TYPE linerate_certificate_expiry_timestamp_seconds gauge
",
    );
    for c in seen {
        let _ = writeln!(
            out,
            "linerate_certificate_expiry_timestamp_seconds{{name=\"{}\",source=\"{}\"}} {}",
            escape(&c.name),
            c.source,
            c.not_after_s
        );
    }
    out
}

/// Seconds since the Unix epoch (0 on a clock set before it).
fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A label value escaped as the exposition format asks (`\`, `"`, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_reload_keeps_the_hash_and_time_and_says_so() {
        let n = NodeInfo::new();
        assert_eq!(n.render(), "");
        n.set_build("1.2.3", "abc\"def");
        n.applied("0123456789abcdef", "file");
        let first = n.render();
        assert!(first.contains("linerate_build_info{version=\"1.2.3\",commit=\"abc\\\"def\"} 1"));
        assert!(
            first.contains("linerate_config_info{hash=\"0123456789abcdef\",source=\"file\"} 1")
        );
        assert!(first.contains("linerate_config_last_reload_successful 1\n"));
        n.reload_failed();
        let after = n.render();
        assert!(after.contains("linerate_config_last_reload_successful 0\n"));
        assert!(after.contains("hash=\"0123456789abcdef\""));
        let ts = |t: &str| {
            t.lines()
                .find_map(|l| {
                    l.strip_prefix("linerate_config_last_reload_success_timestamp_seconds ")
                })
                .map(str::to_string)
        };
        assert_eq!(ts(&first), ts(&after));
        assert!(ts(&first).unwrap().parse::<f64>().unwrap() > 1.0e9);
    }

    /// 0 from the start, 1 while the file last read changes a restart-only
    /// key, 0 again once a reload finds none (the change undone).
    #[test]
    fn restart_pending_follows_the_last_file_read() {
        let n = NodeInfo::new();
        let value = |n: &NodeInfo| {
            n.render_restart_pending()
                .lines()
                .find_map(|l| l.strip_prefix("linerate_restart_pending "))
                .map(str::to_string)
        };
        assert_eq!(value(&n).as_deref(), Some("0"));
        assert!(
            n.render_restart_pending()
                .starts_with("# HELP linerate_restart_pending ")
        );
        n.set_restart_pending(&["workers".into()]);
        assert_eq!(value(&n).as_deref(), Some("1"));
        n.set_restart_pending(&[]);
        assert_eq!(value(&n).as_deref(), Some("0"));
    }
}
