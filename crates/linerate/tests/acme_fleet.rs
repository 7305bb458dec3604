//! ACME in a fleet: several `linerate serve` processes sharing a `[storage]`
//! (a directory, or Redis) against Pebble and pebble-challtestsrv (tests/common/pebble.rs).
//! Pebble validates every name on one HTTP port and one TLS port: node B's listeners. The
//! other nodes listen elsewhere, so a validation for an order that another node made lands
//! on B. Every test is ignored: scripts/acme.sh installs Pebble and runs them.

mod common;

use std::path::{Path, PathBuf};

use common::acme::temp_dir;
use common::bin::Linerate;
use common::pebble::{Pebble, PebbleOptions, revoke};

/// One node: a `linerate serve --config` child and the port of its TLS listener.
struct Node {
    server: Linerate,
    tls_port: u16,
}

/// Starts every (dir, config, TLS port) at once (all spawned before any banner is awaited).
fn start_nodes(nodes: &[(PathBuf, String, u16)]) -> Vec<Node> {
    let mut started: Vec<Node> = nodes
        .iter()
        .map(|(dir, config, tls_port)| {
            std::fs::create_dir_all(dir).unwrap();
            Node {
                server: Linerate::spawn(dir, config),
                tls_port: *tls_port,
            }
        })
        .collect();
    for node in &mut started {
        node.server.wait_banner();
    }
    started
}

/// The three nodes on `ports` (in `dir`/node0, node1 and node2), each serving `name` over
/// HTTP-01 with the fleet's `storage`, started at once.
fn start_three(
    pebble: &Pebble,
    ports: &[(u16, u16); 3],
    dir: &Path,
    name: &str,
    storage: &str,
) -> Vec<Node> {
    start_nodes(
        &ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    dir.join(format!("node{i}")),
                    node_config(pebble, *p, "http-01", name, storage),
                    p.1,
                )
            })
            .collect::<Vec<_>>(),
    )
}

/// [`wait_served`](common::acme::wait_served) on `node`'s TLS port: its log and Pebble's
/// in the panic.
fn wait_served(
    node: &Node,
    name: &str,
    roots: &str,
    not: Option<&[u8]>,
    pebble: &Pebble,
) -> Vec<u8> {
    common::acme::wait_served(node.tls_port, name, roots, not, &|| {
        format!("{}\n{}", node.server.log(), pebble.log())
    })
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

/// A node's configuration: its own listeners and local files, the fleet's `storage`.
fn node_config(
    pebble: &Pebble,
    (http_port, tls_port): (u16, u16),
    challenge: &str,
    name: &str,
    storage: &str,
) -> String {
    format!(
        "{}\n[storage]\n{storage}\nnodes = 3\n",
        common::acme::config(pebble, http_port, tls_port, challenge, &[name])
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
    let dir = temp_dir("fleet", tag);
    let name = "fleet.example.test";
    let nodes = start_three(&pebble, &ports, &dir, name, storage);
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
    let shared = temp_dir("fleet", "dir-shared");
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
    let dir = temp_dir("fleet", &format!("other-{challenge}"));
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

/// The fleet's ACME account in the shared directory `shared` (the one file in
/// `shared`/acme/account not hidden).
fn account_file(shared: &Path) -> PathBuf {
    std::fs::read_dir(shared.join("acme/account"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .expect("the fleet's account is stored")
}

/// A renewal forced on node A (its certificate revoked, then SIGHUP: A asks the CA's
/// renewal information, whose window has begun, and renews at once) is served by B and C
/// too, through the storage's watch; the fleet made two orders in all.
#[test]
#[ignore = "needs Pebble: scripts/acme.sh"]
fn a_renewal_forced_on_one_node_is_served_by_the_others() {
    let (pebble, ports) = fleet_pebble();
    let dir = temp_dir("fleet", "renewal");
    let shared = dir.join("shared");
    let storage = format!("dir = {:?}", shared.display().to_string());
    let name = "renew.example.test";
    let nodes = start_three(&pebble, &ports, &dir, name, &storage);
    let roots = pebble.issuer_roots_pem();
    let first: Vec<Vec<u8>> = nodes
        .iter()
        .map(|n| wait_served(n, name, &roots, None, &pebble))
        .collect();
    assert!(first.iter().all(|l| *l == first[0]));
    revoke(&pebble, &account_file(&shared), &first[0]);
    nodes[0].server.hup();
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
