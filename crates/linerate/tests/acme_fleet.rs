//! ACME in a fleet (issue V item 2): several `linerate serve` processes sharing a `[storage]`
//! (a directory, or Redis) against Pebble and pebble-challtestsrv (tests/common/pebble.rs).
//! Pebble validates every name on one HTTP port and one TLS port: node B's listeners. The
//! other nodes listen elsewhere, so a validation for an order that another node made lands
//! on B. Every test is ignored: scripts/acme.sh installs Pebble and runs them.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::pebble::{Pebble, PebbleOptions};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// How long a certificate may take to be issued or to reach every node: a bound on a
/// hang, not a figure.
const ISSUANCE: Duration = Duration::from_secs(90);

/// One node: a `linerate serve --config` child, its log in a file.
struct Node {
    child: common::bin::Stopped,
    log: PathBuf,
    tls_port: u16,
}

impl Node {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Starts every (dir, config) at once (all spawned before any banner is awaited).
fn start_nodes(nodes: &[(PathBuf, String, u16)]) -> Vec<Node> {
    use std::process::{Command, Stdio};
    let mut started: Vec<(std::process::Child, PathBuf, u16)> = nodes
        .iter()
        .map(|(dir, config, tls_port)| {
            std::fs::create_dir_all(dir).unwrap();
            let path = dir.join("linerate.toml");
            std::fs::write(&path, config).unwrap();
            let log = dir.join("linerate.log");
            let child = Command::new(common::bin::BIN)
                .args(["serve", "--no-pin", "--workers", "1"])
                .args(["--log-level", "info", "--config"])
                .arg(&path)
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            (child, log, *tls_port)
        })
        .collect();
    let mut out = Vec::new();
    for (mut child, log, tls_port) in started.drain(..) {
        if let Err(lines) = common::bin::banner(&mut child) {
            panic!(
                "linerate did not start: {lines:?}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        out.push(Node {
            child: common::bin::Stopped(child),
            log,
            tls_port,
        });
    }
    out
}

/// The leaf certificate `name` is served with on `port`, verified against `roots`.
fn served_leaf(port: u16, name: &str, roots: &str) -> Result<Vec<u8>, String> {
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
    let mut conn = rustls::ClientConnection::new(
        std::sync::Arc::new(config),
        rustls::pki_types::ServerName::try_from(name.to_string()).unwrap(),
    )
    .unwrap();
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    Ok(conn.peer_certificates().unwrap()[0].to_vec())
}

/// Waits (at most [`ISSUANCE`]) until `node` serves `name` a certificate that verifies
/// against `roots` and is not `not`.
fn wait_served(
    node: &Node,
    name: &str,
    roots: &str,
    not: Option<&[u8]>,
    pebble: &Pebble,
) -> Vec<u8> {
    let deadline = Instant::now() + ISSUANCE;
    loop {
        let last = match served_leaf(node.tls_port, name, roots) {
            Ok(leaf) if Some(&leaf[..]) != not => return leaf,
            Ok(_) => "the same certificate".to_string(),
            Err(e) => e,
        };
        assert!(
            Instant::now() < deadline,
            "{name} was never served a good certificate on {} (last: {last})\n{}\n{}",
            node.tls_port,
            node.log(),
            pebble.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How many orders and accounts Pebble made (its log's "Added order" and "There are now N
/// accounts" lines).
fn orders_and_accounts(pebble: &Pebble) -> (usize, usize) {
    let log = pebble.log();
    (
        log.matches("Added order").count(),
        log.lines()
            .filter(|l| l.contains("accounts in memory"))
            .count(),
    )
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-fleet-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A node's configuration: its own listeners and local files, the fleet's `storage`.
fn node_config(
    pebble: &Pebble,
    (http_port, tls_port): (u16, u16),
    challenge: &str,
    name: &str,
    storage: &str,
) -> String {
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
names = ["{name}"]
app = "demo"
tls = "acme"

[storage]
{storage}
nodes = 3
"#,
        dir = pebble.directory_url(),
        ca = pebble.wfe_ca_pem().display(),
    )
}

/// Pebble validating on node B's ports; the ports of A, B and C.
fn fleet_pebble() -> (Pebble, [(u16, u16); 3]) {
    common::pebble::require_binaries();
    let port = || common::free_port("127.0.0.1");
    let ports = [(port(), port()), (port(), port()), (port(), port())];
    let pebble = Pebble::start(PebbleOptions {
        http_port: ports[1].0,
        tls_port: ports[1].1,
        ..PebbleOptions::default()
    });
    (pebble, ports)
}

/// Three nodes started at once on one storage make one account and one order, and serve
/// one certificate.
fn three_nodes_one_order(tag: &str, storage: &str) {
    let (pebble, ports) = fleet_pebble();
    let dir = temp_dir(tag);
    let name = "fleet.example.test";
    let nodes = start_nodes(
        &ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    dir.join(format!("node{i}")),
                    node_config(&pebble, *p, "http-01", name, storage),
                    p.1,
                )
            })
            .collect::<Vec<_>>(),
    );
    let roots = pebble.issuer_roots_pem();
    let leaves: Vec<Vec<u8>> = nodes
        .iter()
        .map(|n| wait_served(n, name, &roots, None, &pebble))
        .collect();
    assert!(
        leaves.iter().all(|l| *l == leaves[0]),
        "the three nodes serve one certificate (same DER, so the same serial)"
    );
    assert_eq!(
        orders_and_accounts(&pebble),
        (1, 1),
        "one order and one account for the fleet\n{}",
        pebble.log()
    );
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn three_nodes_on_a_shared_dir_make_one_account_one_order_and_serve_one_certificate() {
    let shared = temp_dir("dir-shared");
    three_nodes_one_order("dir", &format!("dir = {:?}", shared.display().to_string()));
    let _ = std::fs::remove_dir_all(&shared);
}

#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn three_nodes_on_redis_make_one_account_one_order_and_serve_one_certificate() {
    let Some(redis) = common::tier::TierServer::start("redis-server") else {
        panic!("redis-server is not installed: this test cannot run");
    };
    three_nodes_one_order("redis", &format!("redis = {:?}", redis.url()));
}

/// Node A orders a name only A serves; Pebble's validation lands on node B, which answers
/// from the storage.
fn validation_on_another_node(challenge: &str) {
    let (pebble, ports) = fleet_pebble();
    let dir = temp_dir(&format!("other-{challenge}"));
    let shared = dir.join("shared");
    let storage = format!("dir = {:?}", shared.display().to_string());
    let roots = pebble.issuer_roots_pem();
    // B first, with a name of its own (a node needs one for its manager); its order done.
    let b = start_nodes(&[(
        dir.join("b"),
        node_config(&pebble, ports[1], challenge, "b.example.test", &storage),
        ports[1].1,
    )]);
    wait_served(&b[0], "b.example.test", &roots, None, &pebble);
    let a = start_nodes(&[(
        dir.join("a"),
        node_config(&pebble, ports[0], challenge, "a.example.test", &storage),
        ports[0].1,
    )]);
    wait_served(&a[0], "a.example.test", &roots, None, &pebble);
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn an_http01_validation_landing_on_another_node_is_answered() {
    validation_on_another_node("http-01");
}

#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn a_tls_alpn01_validation_landing_on_another_node_is_answered() {
    validation_on_another_node("tls-alpn-01");
}

/// Revokes `leaf` (DER) at `pebble` (keyCompromise), signed with the fleet's account from
/// the shared directory `shared`.
fn revoke(pebble: &Pebble, shared: &Path, leaf: &[u8]) {
    let account = std::fs::read_dir(shared.join("acme/account"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .expect("the fleet's account is stored");
    let credentials: instant_acme::AccountCredentials =
        serde_json::from_slice(&std::fs::read(&account).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let account = instant_acme::Account::builder_with_root(pebble.wfe_ca_pem())
            .unwrap()
            .from_credentials(credentials)
            .await
            .expect("the stored account");
        account
            .revoke(&instant_acme::RevocationRequest {
                certificate: &CertificateDer::from(leaf),
                reason: Some(instant_acme::RevocationReason::KeyCompromise),
            })
            .await
            .expect("the CA revokes the certificate");
    });
}

/// A renewal forced on node A (its certificate revoked, then SIGHUP: A asks the CA's
/// renewal information, whose window has begun, and renews at once) is served by B and C
/// too, through the storage's watch; the fleet made two orders in all.
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn a_renewal_forced_on_one_node_is_served_by_the_others() {
    let (pebble, ports) = fleet_pebble();
    let dir = temp_dir("renewal");
    let shared = dir.join("shared");
    let storage = format!("dir = {:?}", shared.display().to_string());
    let name = "renew.example.test";
    let nodes = start_nodes(
        &ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    dir.join(format!("node{i}")),
                    node_config(&pebble, *p, "http-01", name, &storage),
                    p.1,
                )
            })
            .collect::<Vec<_>>(),
    );
    let roots = pebble.issuer_roots_pem();
    let first: Vec<Vec<u8>> = nodes
        .iter()
        .map(|n| wait_served(n, name, &roots, None, &pebble))
        .collect();
    assert!(first.iter().all(|l| *l == first[0]));
    revoke(&pebble, &shared, &first[0]);
    common::bin::signal(&nodes[0].child.0, rustix::process::Signal::HUP);
    let renewed = wait_served(&nodes[0], name, &roots, Some(&first[0]), &pebble);
    for n in &nodes[1..] {
        assert_eq!(
            wait_served(n, name, &roots, Some(&first[0]), &pebble),
            renewed,
            "node on {} serves A's renewal",
            n.tls_port
        );
    }
    assert_eq!(orders_and_accounts(&pebble), (2, 1), "{}", pebble.log());
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}
