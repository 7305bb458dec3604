//! DNS-01 (RFC 8555 §8.4) through RFC 2136 updates signed with TSIG (RFC 8945), against
//! BIND 9's named as the zone's primary (tests/common/bind.rs) and Pebble resolving
//! `_acme-challenge` through it (tests/common/pebble.rs). Every test here is ignored: it
//! needs named, tsig-keygen and dig (Debian's bind9, bind9-utils, bind9-dnsutils) and
//! Pebble, which scripts/acme.sh provides before it runs them with `--ignored`.

mod common;

use common::acme::{ISSUANCE, served_leaf, temp_dir, wait_served};
use common::bin::Linerate;
use common::bind::{KEY_NAME, Named};
use common::pebble::{Pebble, PebbleOptions};
use linerate_server::acme::dns::{key, tsig::TsigError, update};
use linerate_server::config::DnsUpdateConfig;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn dns_config(named: &Named, key: key::TsigKey, tcp: bool) -> DnsUpdateConfig {
    DnsUpdateConfig {
        server: named.addr(),
        zone: None,
        key,
        tcp,
    }
}

/// Our UPDATE and TSIG as BIND takes them: after the add, dig sees the TXT; after the
/// delete of that exact record, the other one stays; over TCP the same; hmac-sha512 too;
/// BIND's signed answers verify; a wrong secret is BADSIG, an unknown key BADKEY and a
/// clock 1000 s behind BADTIME, with nothing changed.
#[test]
#[ignore = "needs bind9: scripts/acme.sh"]
fn bind9_takes_our_signed_update_and_dig_sees_the_txt() {
    let named = Named::start("fleet.test");
    let text = std::fs::read_to_string(named.key_file()).unwrap();
    let k = key::parse_bind_key(&text, None).expect("tsig-keygen's file");
    assert_eq!(k.name, "linerate");
    let name = "fleet.test";
    let record = "_acme-challenge.fleet.test";
    let rt = runtime();
    let what = || named.log();

    for tcp in [false, true] {
        let config = dns_config(&named, k.clone(), tcp);
        rt.block_on(update::publish(&config, name, "first"))
            .unwrap_or_else(|e| panic!("add (tcp {tcp}): {e}\n{}", what()));
        // A wildcard's record is the same name's: two values side by side.
        rt.block_on(update::publish(&config, "*.fleet.test", "second"))
            .unwrap_or_else(|e| panic!("add (tcp {tcp}): {e}\n{}", what()));
        let mut seen = named.txt(record, "TXT").unwrap_or_default();
        seen.sort();
        assert_eq!(seen, ["first", "second"], "dig after the adds (tcp {tcp})");
        rt.block_on(update::withdraw(&config, name, "first"))
            .unwrap();
        assert_eq!(
            named.txt(record, "TXT").unwrap_or_default(),
            ["second"],
            "only that exact record is deleted"
        );
        rt.block_on(update::withdraw(&config, name, "second"))
            .unwrap();
        assert_eq!(named.txt(record, "TXT"), None, "both gone");
    }

    // hmac-sha512: BIND takes it and its signed answers verify too.
    let text = std::fs::read_to_string(named.key_file_512()).unwrap();
    let k512 = key::parse_bind_key(&text, None).expect("tsig-keygen's file");
    assert_eq!(k512.algorithm, key::TsigAlgorithm::HmacSha512);
    let config = dns_config(&named, k512, false);
    rt.block_on(update::publish(&config, name, "sha512"))
        .unwrap_or_else(|e| panic!("add (hmac-sha512): {e}\n{}", what()));
    assert_eq!(named.txt(record, "TXT").unwrap_or_default(), ["sha512"]);
    rt.block_on(update::withdraw(&config, name, "sha512"))
        .unwrap();
    assert_eq!(named.txt(record, "TXT"), None);

    let mut wrong = k.clone();
    wrong.secret = b"not the server's secret".to_vec();
    let e = rt
        .block_on(update::change(
            &dns_config(&named, wrong, false),
            name,
            "bad",
            linerate_server::acme::dns::message::Change::Add { ttl: 60 },
        ))
        .unwrap_err();
    assert!(
        matches!(e, update::DnsError::Tsig(TsigError::Server(16))),
        "{e}"
    );
    assert!(e.to_string().contains("BADSIG"), "{e}");
    let mut unknown = k.clone();
    unknown.name = "stranger".into();
    let e = rt
        .block_on(update::change(
            &dns_config(&named, unknown, false),
            name,
            "bad",
            linerate_server::acme::dns::message::Change::Add { ttl: 60 },
        ))
        .unwrap_err();
    assert!(
        matches!(e, update::DnsError::Tsig(TsigError::Server(17))),
        "{e}"
    );
    // Signed 1000 s ago, past the fudge of 300: BIND's BADTIME.
    let long_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 1000;
    let e = rt
        .block_on(update::change_signed_at(
            &dns_config(&named, k.clone(), false),
            name,
            "bad",
            linerate_server::acme::dns::message::Change::Add { ttl: 60 },
            long_ago,
        ))
        .unwrap_err();
    assert!(
        matches!(e, update::DnsError::Tsig(TsigError::Server(18))),
        "{e}"
    );
    assert!(e.to_string().contains("BADTIME"), "{e}");
    assert_eq!(
        named.txt(record, "TXT"),
        None,
        "a refused update changed nothing"
    );

    // A name outside the zone it is put in: BIND's NOTZONE.
    let mut outside = dns_config(&named, k, false);
    outside.zone = Some("fleet.test".into());
    let e = rt
        .block_on(update::change(
            &outside,
            "other.test",
            "x",
            linerate_server::acme::dns::message::Change::Add { ttl: 60 },
        ))
        .unwrap_err();
    assert!(matches!(e, update::DnsError::Name(_)), "{e}");
}

/// linerate's config: one TLS listener, one `tls = "acme"` site for `fleet.test` and
/// `*.fleet.test`, DNS-01 through `named` with `key` (a `dns` table's key keys).
fn config(pebble: &Pebble, named: &Named, tls_port: u16, key: &str) -> String {
    format!(
        r#"
[acme]
directory = "{dir}"
ca_roots = "{ca}"
storage = "store"
challenge = "dns-01"
dns = {{ server = "{server}", {key} }}

[[listen]]
addr = "127.0.0.1:{tls_port}"
tls = {{}}

[[site]]
names = ["fleet.test", "*.fleet.test"]
app = "demo"
tls = "acme"
"#,
        dir = pebble.directory_url(),
        ca = pebble.wfe_ca_pem().display(),
        server = named.addr(),
    )
}

/// Pebble validating through `named` (its `_acme-challenge` TXT queries go there).
fn start_pebble(named: &Named) -> (Pebble, u16) {
    common::pebble::require_binaries();
    let tls_port = common::free_port("127.0.0.1");
    let pebble = Pebble::start(PebbleOptions {
        http_port: common::free_port("127.0.0.1"),
        tls_port,
        dns_server: Some(named.addr()),
        ..PebbleOptions::default()
    });
    (pebble, tls_port)
}

/// The fleet's certificate through DNS-01: one order for `fleet.test` and `*.fleet.test`
/// (the zone left to its default, the validated name), issued and served (a handshake for
/// `x.fleet.test` and one for `fleet.test` get it, verified against Pebble's root), and the
/// TXT records gone from the zone afterwards.
#[test]
#[ignore = "needs bind9 and Pebble: scripts/acme.sh"]
fn dns01_issues_a_wildcard_through_bind9_and_removes_its_records() {
    let named = Named::start("fleet.test");
    let (pebble, tls_port) = start_pebble(&named);
    let dir = temp_dir("acme-dns", "issue");
    let key = format!("key_file = \"{}\"", named.key_file().display());
    let server = Linerate::start(&dir, &config(&pebble, &named, tls_port, &key));
    let roots = pebble.issuer_roots_pem();
    let what = || format!("{}\n{}\n{}", server.log(), named.log(), pebble.log());
    let leaf = wait_served(tls_port, "x.fleet.test", &roots, None, &what);
    assert_eq!(
        served_leaf(tls_port, "fleet.test", &roots).unwrap_or_else(|e| panic!("{e}")),
        leaf,
        "one certificate for the name and its wildcard"
    );
    let log = server.log();
    assert!(log.contains("certificate obtained and served"), "{log}");
    assert!(
        named
            .log()
            .contains("adding an RR at '_acme-challenge.fleet.test' TXT"),
        "{}",
        named.log()
    );
    // The records are deleted before the certificate is stored, so before it is served.
    assert_eq!(
        named.txt("_acme-challenge.fleet.test", "TXT"),
        None,
        "the TXT records are gone"
    );
    assert!(
        named
            .log()
            .contains("deleting an RR at _acme-challenge.fleet.test TXT"),
        "{}",
        named.log()
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wrong TSIG secret: BIND answers BADSIG, the log says so, no certificate is stored or
/// served, and nothing is left in the zone.
#[test]
#[ignore = "needs bind9 and Pebble: scripts/acme.sh"]
fn dns01_with_a_wrong_tsig_secret_fails_with_badsig_and_no_certificate() {
    let named = Named::start("fleet.test");
    let (pebble, tls_port) = start_pebble(&named);
    let dir = temp_dir("acme-dns", "badsig");
    let key = format!(
        "key_name = \"{KEY_NAME}\", algorithm = \"hmac-sha256\", key_secret = \"{}\"",
        "bm90IHRoZSBzZXJ2ZXIncyBzZWNyZXQgYXQgYWxsIQ=="
    );
    let server = Linerate::start(&dir, &config(&pebble, &named, tls_port, &key));
    let deadline = std::time::Instant::now() + ISSUANCE;
    while !server.log().contains("BADSIG") {
        assert!(
            std::time::Instant::now() < deadline,
            "no BADSIG in linerate's log\n{}\n{}",
            server.log(),
            named.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let log = server.log();
    assert!(log.contains("could not obtain a certificate"), "{log}");
    assert!(!log.contains("certificate obtained"), "{log}");
    assert!(
        !dir.join("store/acme/fleet.test/cert.pem").exists(),
        "no certificate stored"
    );
    assert!(
        served_leaf(tls_port, "x.fleet.test", &pebble.issuer_roots_pem()).is_err(),
        "no certificate served"
    );
    assert_eq!(named.txt("_acme-challenge.fleet.test", "TXT"), None);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
