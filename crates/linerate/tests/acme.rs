//! ACME (RFC 8555) against Pebble, Let's Encrypt's test CA, and pebble-challtestsrv on
//! 127.0.0.1 (tests/common/pebble.rs). Every test here is ignored: it needs both binaries,
//! which scripts/acme.sh installs (pinned, into target/tools) before it runs them with
//! `--ignored --test-threads=1`. An ignored test run without them panics saying so.

mod common;

use common::pebble::{Pebble, PebbleOptions, https_get};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The harness itself: Pebble starts, its directory answers over HTTPS checked against the
/// WFE's CA, the management interface hands out its issuing root, it stops, and a restart
/// brings the directory back under a new root.
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn pebble_starts_answers_its_directory_and_stops() {
    common::pebble::require_binaries();
    let mut pebble = Pebble::start(PebbleOptions {
        http_port: common::free_port("127.0.0.1"),
        tls_port: common::free_port("127.0.0.1"),
        ..PebbleOptions::default()
    });
    let url = pebble.directory_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(url.ends_with("/dir"), "{url}");

    let (status, body) = https_get(&url, pebble.wfe_ca_pem()).expect("GET the directory");
    assert_eq!(status, 200, "{body}");
    let dir: serde_json::Value = serde_json::from_str(&body).expect("directory JSON");
    for key in ["newNonce", "newAccount", "newOrder"] {
        let endpoint = dir[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key} in {body}"));
        assert!(
            endpoint.starts_with("https://127.0.0.1:"),
            "{key}: {endpoint}"
        );
    }

    let roots = pebble.issuer_roots_pem();
    assert!(roots.starts_with("-----BEGIN CERTIFICATE-----"), "{roots}");
    let parsed: Vec<_> = CertificateDer::pem_slice_iter(roots.as_bytes())
        .collect::<Result<_, _>>()
        .expect("the roots parse as PEM certificates");
    assert_eq!(parsed.len(), 1, "one issuing root: {roots}");

    pebble.stop();
    assert!(
        https_get(&url, pebble.wfe_ca_pem()).is_err(),
        "the directory still answers after stop"
    );

    pebble.restart();
    let (status, body) = https_get(&url, pebble.wfe_ca_pem()).expect("GET after restart");
    assert_eq!(status, 200, "{body}");
    assert_ne!(
        pebble.issuer_roots_pem(),
        roots,
        "a restarted Pebble issues under a new root"
    );
}
