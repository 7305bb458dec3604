//! What the ACME tests (tests/acme.rs, acme_dns.rs and acme_fleet.rs) do on linerate's side:
//! a TLS client to 127.0.0.1 that checks the certificate a name is served against the CA's
//! roots, a bounded wait for a good one, the config of a site whose certificate comes over
//! HTTP-01 or TLS-ALPN-01, and the tests' temp dirs. The CA itself is Pebble (pebble.rs);
//! the server, a `linerate serve --config` child ([`super::bin::Linerate`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// How long a certificate may take to be issued (Pebble validates each challenge three
/// times), or to reach every node of a fleet: a bound on a hang, not a figure.
pub const ISSUANCE: Duration = Duration::from_secs(90);

/// A TLS client to 127.0.0.1:`port` with SNI `name`, trusting only `roots` (PEM), its
/// handshake done.
pub fn client(
    port: u16,
    name: &str,
    roots: &str,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let mut store = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    let conn = rustls::ClientConnection::new(
        std::sync::Arc::new(config),
        rustls::pki_types::ServerName::try_from(name.to_string()).unwrap(),
    )
    .unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// The leaf certificate `name` is served with on `port`, verified against `roots`; the
/// error when the handshake or the verification fails.
pub fn served_leaf(port: u16, name: &str, roots: &str) -> Result<Vec<u8>, String> {
    let tls = client(port, name, roots).map_err(|e| e.to_string())?;
    Ok(tls.conn.peer_certificates().unwrap()[0].to_vec())
}

/// Waits (at most [`ISSUANCE`]) until `name` is served on `port` a certificate that verifies
/// against `roots` (and, when `not`, another than that one); panics with `what` (the logs
/// that say why) if it never is.
pub fn wait_served(
    port: u16,
    name: &str,
    roots: &str,
    not: Option<&[u8]>,
    what: &dyn Fn() -> String,
) -> Vec<u8> {
    let deadline = Instant::now() + ISSUANCE;
    loop {
        let last = match served_leaf(port, name, roots) {
            Ok(leaf) if Some(&leaf[..]) != not => return leaf,
            Ok(_) => "the same certificate".to_string(),
            Err(e) => e,
        };
        assert!(
            Instant::now() < deadline,
            "{name} was never served a good certificate on {port} (last: {last})\n{}",
            what()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// linerate's config for one `tls = "acme"` site with `names`, its certificate obtained
/// from `pebble` through `challenge`: a `redirect_to_https` listener on `http_port`, a TLS
/// one on `tls_port`, the ACME store in `store` beside the config file.
pub fn config(
    pebble: &super::pebble::Pebble,
    http_port: u16,
    tls_port: u16,
    challenge: &str,
    names: &[&str],
) -> String {
    let names = names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
[acme]
directory = "{dir}"
ca_roots = "{ca}"
storage = "store"
email = "ops@example.test"
challenge = "{challenge}"

[[listen]]
addr = "127.0.0.1:{http_port}"
redirect_to_https = true

[[listen]]
addr = "127.0.0.1:{tls_port}"
tls = {{}}

[[site]]
names = [{names}]
app = "demo"
tls = "acme"
"#,
        dir = pebble.directory_url(),
        ca = pebble.wfe_ca_pem().display(),
    )
}

/// A new empty dir `linerate-{file}-{tag}-PID` in the temp dir: `file` names the test file
/// (`acme`, `acme-dns`, `fleet`), `tag` the test.
pub fn temp_dir(file: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-{file}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
