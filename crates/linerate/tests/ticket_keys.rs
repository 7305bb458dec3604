//! TLS ticket keys shared by a fleet, with two and three `linerate serve`
//! processes given nginx-format key files (`openssl rand -out KEY 80`) and Debian's
//! `openssl s_client` as the client: a session saved on one node (`-sess_out`) resumes on
//! another with the same keys (`-sess_in`: "Reused"), TLS 1.3 and 1.2; a node with other
//! keys makes a full handshake ("New"); after the files rotate and SIGHUP, a ticket sealed
//! under the previous key still resumes and new ones are sealed under the new first key; a
//! bad file on SIGHUP keeps the keys in use and says why in the log. With `[storage]` and no
//! key files, nodes sharing the storage share the keys kept there. Servers bind 127.0.0.1
//! and are stopped when the test ends; every wait is bounded.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::bin::{BIN, Served};
use common::{eventually, free_port};

/// The TLS versions a session resumes with across nodes, as `openssl s_client` names them.
const VERSIONS: [&str; 2] = ["-tls1_3", "-tls1_2"];

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-tickets-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("other")).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    d
}

/// A new random key in nginx's 80-byte format, made as its docs say (`openssl rand 80`).
fn new_key(path: &Path) {
    let ok = Command::new("openssl")
        .args(["rand", "-out"])
        .arg(path)
        .arg("80")
        .status()
        .expect("openssl is needed by this test (apt-get install openssl)");
    assert!(ok.success());
    assert_eq!(std::fs::metadata(path).unwrap().len(), 80);
}

/// Replaces `to` with `from`'s bytes by a rename, as a deployment tool would.
fn install(from: &Path, to: &Path) {
    let tmp = to.with_extension("tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// A node: `linerate serve --config d/NAME.toml` with an HTTPS listener on `port` whose
/// `[tls] ticket_keys` are `keys`, logging at info to `d/NAME.log` (read by the tests).
fn node(d: &Path, name: &str, port: u16, keys: &[&str]) -> Served {
    let list: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    node_with(
        d,
        name,
        port,
        &format!("[tls]\nticket_keys = [{}]\n", list.join(", ")),
    )
}

/// A node as [`node`], its file starting with `head` in place of `[tls] ticket_keys`.
fn node_with(d: &Path, name: &str, port: u16, head: &str) -> Served {
    let file = d.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "{head}\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:{port}\"\n\
             tls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(d.join(format!("{name}.log"))).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--no-pin", "--log-level", "info", "--workers", "1"])
        .arg("--config")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut banner = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            let log = std::fs::read_to_string(d.join(format!("{name}.log"))).unwrap();
            panic!("node {name} exited before its banner ended: {banner:?}\n{log}");
        }
        let stop = line.starts_with("Stop with");
        banner.push(line.trim_end().to_string());
        if stop {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let addr = banner[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .expect("the banner names the address")
        .parse()
        .unwrap();
    Served {
        child,
        addr,
        banner,
    }
}

/// One `openssl s_client` connection to `port` with `version`, a GET answered and the
/// connection closed by the server (so a TLS 1.3 ticket, sent before the answer, has
/// arrived): `-sess_out FILE` saves the session, `-sess_in FILE` offers it. "New" or
/// "Reused", as s_client says.
fn s_client(port: u16, version: &str, sess: (&str, &Path)) -> String {
    let mut child = Command::new("timeout")
        .args(["20", "openssl", "s_client", "-ign_eof", version])
        .args(["-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost", sess.0])
        .arg(sess.1)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl is needed by this test (apt-get install openssl)");
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        b"GET /json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let kind = text
        .lines()
        .find_map(|l| l.split_once(", TLSv").map(|(kind, _)| kind))
        .unwrap_or("no handshake");
    assert!(
        text.contains("Hello, World!"),
        "no answer from {port} ({version}): {text}"
    );
    kind.to_string()
}

/// A session made now on `port` (a full handshake), saved in `d/NAME.pem`.
fn session(d: &Path, name: &str, port: u16, version: &str) -> PathBuf {
    let file = d.join(format!("{name}.pem"));
    assert_eq!(s_client(port, version, ("-sess_out", &file)), "New");
    file
}

/// Whether `file`'s session resumes on `port`: "Reused" or "New".
fn offered(port: u16, version: &str, file: &Path) -> String {
    s_client(port, version, ("-sess_in", file))
}

/// Waits until `node`'s log has `text` at least `times` times.
fn logged(d: &Path, node: &str, text: &str, times: usize) {
    let log = d.join(format!("{node}.log"));
    eventually(
        &format!("{node} never logged {text:?} {times} times"),
        || std::fs::read_to_string(&log).is_ok_and(|l| l.matches(text).count() >= times),
    );
}

/// "A session resumed on node A is a full handshake on node B." Two nodes
/// with the same key files resume each other's sessions; a third with other keys cannot.
#[test]
fn a_session_made_on_one_node_resumes_on_another_with_the_same_keys() {
    let d = dir("fleet");
    new_key(&d.join("current.key"));
    new_key(&d.join("previous.key"));
    new_key(&d.join("other/current.key"));
    let ports = [
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
    ];
    let shared = ["current.key", "previous.key"];
    let _a = node(&d, "a", ports[0], &shared);
    let _b = node(&d, "b", ports[1], &shared);
    let _c = node(&d, "c", ports[2], &["other/current.key"]);
    for v in VERSIONS {
        let s = session(&d, &format!("a{v}"), ports[0], v);
        assert_eq!(offered(ports[1], v, &s), "Reused", "A's session on B, {v}");
        assert_eq!(offered(ports[0], v, &s), "Reused", "A's session on A, {v}");
        assert_eq!(offered(ports[2], v, &s), "New", "A's session on C, {v}");
        let s = session(&d, &format!("b{v}"), ports[1], v);
        assert_eq!(offered(ports[0], v, &s), "Reused", "B's session on A, {v}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The first key seals, all keys open, SIGHUP rereads the files. A ticket
/// sealed before a rotation (the files swapped: a new first key, the old one second) still
/// resumes after it, on both nodes; new tickets are sealed under the new key (a node that
/// holds only that key resumes them). A file of the wrong size on SIGHUP changes nothing and
/// is named in the log.
#[test]
fn a_ticket_under_the_previous_key_resumes_after_rotation_and_sighup() {
    let d = dir("rotation");
    let (k0, k1, k2) = (d.join("k0"), d.join("k1"), d.join("k2"));
    for k in [&k0, &k1, &k2] {
        new_key(k);
    }
    install(&k1, &d.join("current.key"));
    install(&k0, &d.join("previous.key"));
    install(&k2, &d.join("other/next.key"));
    let ports = [
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
    ];
    let shared = ["current.key", "previous.key"];
    let a = node(&d, "a", ports[0], &shared);
    let b = node(&d, "b", ports[1], &shared);
    let _c = node(&d, "c", ports[2], &["other/next.key"]);
    let before: Vec<PathBuf> = VERSIONS
        .iter()
        .map(|v| session(&d, &format!("before{v}"), ports[0], v))
        .collect();
    for (v, s) in VERSIONS.iter().zip(&before) {
        // Sealed under k1, which C does not hold.
        assert_eq!(offered(ports[2], v, s), "New", "{v}");
    }

    // The rotation: k2 seals from now on, k1 still opens.
    install(&k2, &d.join("current.key"));
    install(&k1, &d.join("previous.key"));
    for (n, name) in [(&a, "a"), (&b, "b")] {
        common::bin::signal(&n.child, rustix::process::Signal::HUP);
        logged(&d, name, "SIGHUP: TLS ticket keys reloaded", 1);
    }
    for (v, s) in VERSIONS.iter().zip(&before) {
        assert_eq!(offered(ports[1], v, s), "Reused", "a k1 ticket on B, {v}");
        assert_eq!(offered(ports[0], v, s), "Reused", "a k1 ticket on A, {v}");
        let after = session(&d, &format!("after{v}"), ports[0], v);
        assert_eq!(
            offered(ports[2], v, &after),
            "Reused",
            "a k2 ticket on C, {v}"
        );
    }

    // A bad file: A keeps k2 and k1, and says which file and why.
    std::fs::write(d.join("current.key"), [0u8; 79]).unwrap();
    common::bin::signal(&a.child, rustix::process::Signal::HUP);
    logged(
        &d,
        "a",
        "current.key: 79 bytes; a ticket key is 80 bytes",
        1,
    );
    let log = std::fs::read_to_string(d.join("a.log")).unwrap();
    assert!(log.contains("the configuration in use stays"), "{log}");
    for (v, s) in VERSIONS.iter().zip(&before) {
        assert_eq!(offered(ports[0], v, s), "Reused", "a k1 ticket on A, {v}");
        let later = session(&d, &format!("later{v}"), ports[0], v);
        assert_eq!(offered(ports[2], v, &later), "Reused", "still k2 on A, {v}");
    }
    // No key byte reached a log.
    for name in ["a", "b", "c"] {
        let log = std::fs::read(d.join(format!("{name}.log"))).unwrap();
        for k in [&k0, &k1, &k2] {
            let key = std::fs::read(k).unwrap();
            let hex: String = key[16..].iter().map(|b| format!("{b:02x}")).collect();
            let text = String::from_utf8_lossy(&log);
            assert!(!text.contains(&hex[..32]), "a secret in {name}'s log");
            assert!(!log.windows(16).any(|w| w == &key[16..32]));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Distributed rotation: with `[storage]` and no `ticket_keys`, the nodes
/// sharing a storage directory seal under the keys kept there (the first node to start
/// makes one under the storage's lock), so a session resumes across them; a node on another
/// storage makes a full handshake. Rotation and the keys kept are checked with a clock of
/// the test's own in `ticket_rotation.rs`'s unit tests.
#[test]
fn nodes_sharing_a_storage_resume_each_others_sessions_without_key_files() {
    let d = dir("storage");
    fleet_shares_its_keys(&d, "[storage]\ndir = \"shared\"\nnodes = 2\n");
}

/// As [`nodes_sharing_a_storage_resume_each_others_sessions_without_key_files`], the keys
/// kept in a Redis server (the rotation lock `SET NX PX`, the change announced by pub/sub).
#[test]
fn nodes_sharing_a_redis_storage_resume_each_others_sessions() {
    let Some(redis) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    // Ready when it accepts a connection (10 s at most).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", redis.port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "redis-server never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let d = dir("redis");
    fleet_shares_its_keys(
        &d,
        &format!("[storage]\nredis = \"{}\"\nnodes = 2\n", redis.url()),
    );
}

/// Nodes A and B started with `head` (a `[storage]`) share keys; C, on a storage directory
/// of its own, does not.
fn fleet_shares_its_keys(d: &Path, head: &str) {
    let d = d.to_path_buf();
    let ports = [
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
    ];
    let _a = node_with(&d, "a", ports[0], head);
    let _b = node_with(&d, "b", ports[1], head);
    let _c = node_with(&d, "c", ports[2], "[storage]\ndir = \"elsewhere\"\n");
    for v in VERSIONS {
        let s = session(&d, &format!("a{v}"), ports[0], v);
        assert_eq!(offered(ports[1], v, &s), "Reused", "A's session on B, {v}");
        assert_eq!(offered(ports[2], v, &s), "New", "A's session on C, {v}");
        let s = session(&d, &format!("b{v}"), ports[1], v);
        assert_eq!(offered(ports[0], v, &s), "Reused", "B's session on A, {v}");
    }
    // One key was made, by one node, and no key byte reached a log.
    let made: usize = ["a", "b"]
        .iter()
        .map(|n| {
            let log = std::fs::read_to_string(d.join(format!("{n}.log"))).unwrap();
            log.matches("a new key made for the fleet").count()
        })
        .sum();
    assert_eq!(made, 1);
    let _ = std::fs::remove_dir_all(&d);
}
