//! ACME (RFC 8555) against Pebble, Let's Encrypt's test CA, and pebble-challtestsrv on
//! 127.0.0.1 (tests/common/pebble.rs). Every test here is ignored: it needs both binaries,
//! which scripts/acme.sh installs (pinned, into target/tools) before it runs them with
//! `--ignored --test-threads=1`. An ignored test run without them panics saying so.

mod common;

use std::path::{Path, PathBuf};

use common::acme::{client, config, served_leaf, temp_dir, wait_served};
use common::bin::Linerate;
use common::pebble::{Pebble, PebbleOptions, https_get, revoke};
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

/// One keep-alive GET of /json on `tls`: its status line.
fn get_json(
    tls: &mut rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
    name: &str,
) -> std::io::Result<String> {
    use std::io::{Read, Write};
    write!(tls, "GET /json HTTP/1.1\r\nHost: {name}\r\n\r\n")?;
    tls.flush()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"}") {
        let n = tls.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    Ok(text.lines().next().unwrap_or_default().to_string())
}

/// The ACME account linerate stored under `store` (its one JSON file in `store`/acme).
fn account_file(store: &Path) -> PathBuf {
    std::fs::read_dir(store.join("acme"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("the account is stored")
}

/// Pebble validating against two free ports (linerate's HTTP and HTTPS listeners), issuing
/// for `cert_lifetime` (Pebble's 90 days when `None`).
fn start_pebble(cert_lifetime: Option<std::time::Duration>) -> (Pebble, u16, u16) {
    common::pebble::require_binaries();
    let (http_port, tls_port) = (
        common::free_port("127.0.0.1"),
        common::free_port("127.0.0.1"),
    );
    let pebble = Pebble::start(PebbleOptions {
        http_port,
        tls_port,
        cert_lifetime,
        ..PebbleOptions::default()
    });
    (pebble, http_port, tls_port)
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// HTTP-01, answered on a `redirect_to_https` listener: both names are issued, served and
/// verified against Pebble's root; keys and the account are 0600; a short-lived
/// certificate is renewed at two thirds of its life and swapped in while a keep-alive
/// connection made before the swap goes on being answered.
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn http01_issues_both_names_and_renews_without_dropping_a_connection() {
    let (pebble, http_port, tls_port) = start_pebble(Some(std::time::Duration::from_secs(30)));
    let dir = temp_dir("acme", "http01");
    let names = ["a.example.test", "www.a.example.test"];
    let started = std::time::Instant::now();
    let server = Linerate::start(
        &dir,
        &config(&pebble, http_port, tls_port, "http-01", &names),
    );
    let roots = pebble.issuer_roots_pem();
    let what = || format!("{}\n{}", server.log(), pebble.log());
    let first = wait_served(tls_port, names[0], &roots, None, &what);
    eprintln!("ACME issuance (HTTP-01) took {:?}", started.elapsed());
    assert_eq!(
        served_leaf(tls_port, names[1], &roots).unwrap(),
        first,
        "one certificate for both names"
    );
    let mut kept = client(tls_port, names[0], &roots).unwrap();
    assert_eq!(get_json(&mut kept, names[0]).unwrap(), "HTTP/1.1 200 OK");

    let store = dir.join("store");
    assert_eq!(mode(&store.join("acme/a.example.test/key.pem")), 0o600);
    assert_eq!(mode(&store.join("acme/a.example.test")), 0o700);
    assert_eq!(mode(&account_file(&store)), 0o600);

    // Issued for 30 s: renewed at about 20 s, before it expires.
    let renewed = wait_served(tls_port, names[0], &roots, Some(&first), &what);
    assert_ne!(renewed, first);
    assert_eq!(
        get_json(&mut kept, names[0]).unwrap(),
        "HTTP/1.1 200 OK",
        "the connection made before the swap is still answered"
    );
    assert!(
        server.log().contains("certificate obtained and served"),
        "{}",
        server.log()
    );
    // A name no site has gets no certificate (the listener has none of its own).
    assert!(served_leaf(tls_port, "other.example.test", &roots).is_err());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// TLS-ALPN-01 (RFC 8737), answered by the TLS listener alone.
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn tls_alpn01_issues_through_the_tls_listener() {
    let (pebble, http_port, tls_port) = start_pebble(None);
    let dir = temp_dir("acme", "alpn");
    // No cleartext listener at all: Pebble's HTTP-01 port has nothing on it.
    let config = config(
        &pebble,
        http_port,
        tls_port,
        "tls-alpn-01",
        &["b.example.test"],
    )
    .replace(
        &format!("[[listen]]\naddr = \"127.0.0.1:{http_port}\"\nredirect_to_https = true\n"),
        "",
    );
    let started = std::time::Instant::now();
    let server = Linerate::start(&dir, &config);
    let roots = pebble.issuer_roots_pem();
    wait_served(tls_port, "b.example.test", &roots, None, &|| {
        format!("{}\n{}", server.log(), pebble.log())
    });
    eprintln!("ACME issuance (TLS-ALPN-01) took {:?}", started.elapsed());
    let mut c = client(tls_port, "b.example.test", &roots).unwrap();
    assert_eq!(
        get_json(&mut c, "b.example.test").unwrap(),
        "HTTP/1.1 200 OK"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With the CA down at start, a stored certificate is served at once; a site with none
/// says why in the log and its handshakes are refused; a stored certificate that does not
/// name the site's names (wrong) is never served, and is replaced once the CA is back.
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn a_ca_down_at_start_serves_what_is_stored_and_never_a_wrong_one() {
    let (mut pebble, http_port, tls_port) = start_pebble(None);
    let dir = temp_dir("acme", "down");
    let base = config(&pebble, http_port, tls_port, "http-01", &["c.example.test"]);
    let server = Linerate::start(&dir, &base);
    let roots = pebble.issuer_roots_pem();
    let stored = wait_served(tls_port, "c.example.test", &roots, None, &|| server.log());
    drop(server);

    pebble.stop();
    // A second site, never issued; and a third whose stored certificate names another name.
    let wrong = dir.join("store/acme/e.example.test");
    std::fs::create_dir_all(&wrong).unwrap();
    for f in ["cert.pem", "key.pem"] {
        std::fs::copy(dir.join("store/acme/c.example.test").join(f), wrong.join(f)).unwrap();
    }
    // The admin listener: `/readyz` is 503 while a site has no certificate.
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let more = format!(
        "{base}\n[[site]]\nnames = [\"d.example.test\"]\ntls = \"acme\"\n\n[[site]]\nnames = [\"e.example.test\"]\ntls = \"acme\"\n\n[admin]\naddr = \"{admin}\"\n"
    );
    let admin_get = |path: &str| {
        let r = common::Client::connect(admin.parse().unwrap()).get(path);
        (r.status, r.text())
    };
    let server = Linerate::start(&dir, &more);
    assert_eq!(
        served_leaf(tls_port, "c.example.test", &roots).expect("the stored certificate is served"),
        stored
    );
    for name in ["d.example.test", "e.example.test"] {
        let got = client(tls_port, name, &roots);
        assert!(
            got.is_err(),
            "{name} got a handshake with no certificate of its own"
        );
    }
    common::eventually("the log says why d.example.test has no certificate", || {
        let log = server.log();
        log.contains("could not obtain a certificate") && log.contains("d.example.test")
    });
    // The failed orders are counted.
    let orders = |outcome: &str| -> f64 {
        let head = format!("linerate_acme_orders_total{{outcome=\"{outcome}\"}} ");
        let metrics = admin_get("/metrics").1;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(head.as_str())?.parse().ok())
            .unwrap_or_else(|| panic!("no {head}in {metrics}"))
    };
    assert!(orders("failed") >= 1.0);
    assert_eq!(orders("issued"), 0.0);
    // Alive, not ready: a balancer keeps HTTPS for these names away from this node.
    assert_eq!(admin_get("/healthz"), (200, "ok\n".into()));
    assert_eq!(
        admin_get("/readyz"),
        (
            503,
            "not ready: no certificate yet for d.example.test, e.example.test\n".into()
        )
    );

    // The CA back (a new root, and it has forgotten the account): restarted rather than
    // waited for through the backoff, the missing and the wrong one are obtained.
    pebble.restart();
    let roots = pebble.issuer_roots_pem();
    drop(server);
    let server = Linerate::start(&dir, &more);
    let what = || format!("{}\n{}", server.log(), pebble.log());
    for name in ["d.example.test", "e.example.test"] {
        wait_served(tls_port, name, &roots, None, &what);
    }
    assert_eq!(admin_get("/readyz"), (200, "ready\n".into()));
    assert!(orders("issued") >= 2.0, "d and e issued");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A certificate the CA revoked is replaced as soon as the CA's renewal information (RFC
/// 9773; Pebble answers a window that has begun for a revoked certificate) is asked: at once
/// on SIGHUP, and at start. The revoked one is not served again, by the running server nor
/// by a restarted one (the store holds its replacement).
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn a_revoked_certificate_is_replaced_and_not_served_again() {
    let (pebble, http_port, tls_port) = start_pebble(None);
    let dir = temp_dir("acme", "revoked");
    let name = "f.example.test";
    let conf = config(&pebble, http_port, tls_port, "http-01", &[name]);
    let server = Linerate::start(&dir, &conf);
    let roots = pebble.issuer_roots_pem();
    let what = || format!("{}\n{}", server.log(), pebble.log());
    let first = wait_served(tls_port, name, &roots, None, &what);
    let stored = || std::fs::read(dir.join("store/acme").join(name).join("cert.pem")).unwrap();

    // Valid for 90 days, its window far off: a SIGHUP asks the CA and changes nothing.
    server.hup();
    common::eventually("the CA is asked for the renewal window", || {
        server.log().contains("the CA's renewal window")
    });
    assert_eq!(served_leaf(tls_port, name, &roots).unwrap(), first);

    revoke(&pebble, &account_file(&dir.join("store")), &first);
    server.hup();
    let second = wait_served(tls_port, name, &roots, Some(&first), &what);
    assert!(
        server
            .log()
            .contains("the CA's renewal window brings the renewal forward"),
        "{}",
        server.log()
    );
    for _ in 0..5 {
        assert_eq!(served_leaf(tls_port, name, &roots).unwrap(), second);
    }
    drop(server);

    // Stopped, its replacement revoked too: a restart asks the CA at once and replaces it.
    let on_disk = stored();
    revoke(&pebble, &account_file(&dir.join("store")), &second);
    let server = Linerate::start(&dir, &conf);
    let what = || format!("{}\n{}", server.log(), pebble.log());
    let third = wait_served(tls_port, name, &roots, Some(&second), &what);
    assert_ne!(third, first);
    assert_ne!(stored(), on_disk, "the replacement is stored");
    drop(server);

    // With the CA down, a restart serves the stored replacement, never a revoked one.
    let mut pebble = pebble;
    pebble.stop();
    let server = Linerate::start(&dir, &conf);
    assert_eq!(
        served_leaf(tls_port, name, &roots).expect("the stored certificate is served"),
        third
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
