//! BIND 9's `named` as a child process on 127.0.0.1, the primary of one zone that takes
//! RFC 2136 updates signed with a TSIG key, for the DNS-01 tests (tests/acme_dns.rs, run by
//! scripts/acme.sh; Debian's bind9, bind9-utils and bind9-dnsutils).
//!
//! - A temp dir holds named.conf, the zone file (SOA, NS, and `ns` at 127.0.0.1), and the key
//!   `tsig-keygen` made (BIND's own key file format, which linerate reads too): hmac-sha256,
//!   and a second one in hmac-sha512.
//! - `named -g -c named.conf -p PORT`: in the foreground (its log to a file), unprivileged
//!   options only (its own directory, `pid-file none`, no rndc controls, no recursion), on a
//!   free 127.0.0.1 port for UDP and TCP. The key may change only TXT records in the zone.
//! - It is stopped by PID (SIGKILL) and waited; the dir is kept (and named on stderr) when a
//!   test panics. Every wait is bounded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start waits for named to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The TSIG key's name (as `tsig-keygen` is told it).
pub const KEY_NAME: &str = "linerate.";
/// A second key, hmac-sha512, with the same rights (its file at [`Named::key_file_512`]).
pub const KEY_NAME_512: &str = "linerate-512.";

/// `PROGRAM` found on PATH or in /usr/sbin (where Debian puts named and tsig-keygen, off a
/// user's PATH).
pub fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// named, tsig-keygen and dig, or a panic saying how to get them: an ignored test run
/// without them must fail, never pass silently.
pub fn require_programs() -> (PathBuf, PathBuf, PathBuf) {
    let get = |name: &str| {
        program(name).unwrap_or_else(|| {
            panic!(
                "{name} is not installed: apt-get install bind9 bind9-utils bind9-dnsutils \
                 (scripts/acme.sh says NOT RUN without them)"
            )
        })
    };
    (get("named"), get("tsig-keygen"), get("dig"))
}

/// A running named, the primary of [`Named::zone`].
pub struct Named {
    child: Option<Child>,
    dir: PathBuf,
    addr: SocketAddr,
    zone: String,
    dig: PathBuf,
}

impl Named {
    /// named for `zone` on a free port, with a fresh hmac-sha256 key named [`KEY_NAME`]
    /// (its file at [`Named::key_file`]); panics (with the log) when it does not start.
    pub fn start(zone: &str) -> Named {
        let (named, keygen, dig) = require_programs();
        let dir = std::env::temp_dir().join(format!(
            "linerate-named-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for (algorithm, name, file) in [
            ("hmac-sha256", KEY_NAME, "tsig.key"),
            ("hmac-sha512", KEY_NAME_512, "tsig-512.key"),
        ] {
            let key = Command::new(&keygen)
                .args(["-a", algorithm, name])
                .output()
                .unwrap();
            assert!(key.status.success(), "tsig-keygen: {key:?}");
            std::fs::write(dir.join(file), &key.stdout).unwrap();
        }
        std::fs::write(
            dir.join(format!("{zone}.zone")),
            format!(
                "$TTL 60\n@ IN SOA ns.{zone}. hostmaster.{zone}. 1 60 60 600 60\n@ IN NS ns.{zone}.\nns IN A 127.0.0.1\n"
            ),
        )
        .unwrap();
        let d = dir.display();
        let mut last = String::new();
        for _ in 0..3 {
            let port = super::free_port("127.0.0.1");
            std::fs::write(
                dir.join("named.conf"),
                format!(
                    r#"options {{
    directory "{d}";
    pid-file none;
    session-keyfile none;
    managed-keys-directory "{d}";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    allow-query {{ any; }};
}};
controls {{ }};
include "{d}/tsig.key";
include "{d}/tsig-512.key";
zone "{zone}" {{
    type primary;
    file "{zone}.zone";
    update-policy {{
        grant {KEY_NAME} zonesub TXT;
        grant {KEY_NAME_512} zonesub TXT;
    }};
}};
"#
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.join("named.log")).unwrap();
            let child = Command::new(&named)
                .arg("-g")
                .arg("-c")
                .arg(dir.join("named.conf"))
                .args(["-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", named.display()));
            let mut n = Named {
                child: Some(child),
                dir: dir.clone(),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                zone: zone.to_string(),
                dig: dig.clone(),
            };
            let deadline = Instant::now() + START_TIMEOUT;
            loop {
                if n.log().contains("running") && n.txt(&format!("ns.{zone}"), "A").is_some() {
                    return n;
                }
                let exited = n.child.as_mut().unwrap().try_wait().unwrap().is_some();
                if exited || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            last = n.log();
            n.kill();
            if !last.contains("address in use") {
                break;
            }
        }
        panic!("named did not start:\n{last}");
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Where it answers (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The key file `tsig-keygen` wrote.
    pub fn key_file(&self) -> PathBuf {
        self.dir.join("tsig.key")
    }

    /// The hmac-sha512 key's file.
    pub fn key_file_512(&self) -> PathBuf {
        self.dir.join("tsig-512.key")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("named.log")).unwrap_or_default()
    }

    /// `dig @127.0.0.1 -p PORT +short TYPE NAME`'s lines (TXT strings unquoted); `None`
    /// when dig fails or names nothing.
    pub fn txt(&self, name: &str, rtype: &str) -> Option<Vec<String>> {
        let out = Command::new(&self.dig)
            .arg(format!("@{}", self.addr.ip()))
            .args(["-p", &self.addr.port().to_string()])
            .args(["+short", "+tries=1", "+time=2", rtype, name])
            .output()
            .ok()?;
        let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with(";;"))
            .map(|l| l.trim_matches('"').to_string())
            .collect();
        (out.status.success() && !lines.is_empty()).then_some(lines)
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "named harness: config, zone and log kept in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
