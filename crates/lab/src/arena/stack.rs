//! production-stack's edge: a second linerate (TLS, h2) started beside the demo, whose default
//! site is the demo app with /static and, on `/api`, a `[[site.jwt]]` rule (HS256, `sub`
//! required), the item cache behind it on the arena's Redis tier; the bearer token it takes;
//! and the stack's CPU (the edge, which runs the app in its own process, and the cache
//! sidecar listening on the --cache-tier port, as HttpArena sums its stack's containers).
//!
//! Owns no checks and no load (those are [`super::checks`] and [`super::load`]).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::target::{START_TIMEOUT, Spawn, free_addr};
use crate::compare::procfs;

/// The edge's HS256 secret (HttpArena's production-stack JWT_SECRET is of this kind: over the
/// edge's 32-byte minimum).
const STACK_SECRET: &str = "linerate-arena-production-stack-secret";

/// production-stack's edge, started beside the demo.
pub struct Stack {
    /// Its TLS listener (HTTP/2 by ALPN).
    pub tls: SocketAddr,
    /// A bearer token its `[[site.jwt]]` takes, `sub` 42 (HttpArena's).
    pub token: String,
    /// The cache sidecar's process (what listens on the --cache-tier port), when found.
    pub sidecar: Option<u32>,
    child: Child,
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stack {
    /// Starts the edge with `s`'s workers, pinned to `cpus` as the demo is, on the demo's
    /// fixtures in `dir`, and waits for its first answer over h2.
    pub fn spawn(
        s: &Spawn,
        database_url: &str,
        dir: &Path,
        cpus: &[usize],
    ) -> Result<Stack, String> {
        let tls = free_addr()?;
        std::fs::write(dir.join("secret"), format!("{STACK_SECRET}\n"))
            .map_err(|e| e.to_string())?;
        let conf = format!(
            "[[listen]]\naddr = \"{tls}\"\ntls = {{ cert = \"{cert}\", key = \"{key}\" }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\nroot = [{{ prefix = \"/static\", dir = \"{stat}\" }}]\n\
             [[site.jwt]]\nprefix = \"/api\"\nsecret_file = \"{secret}\"\nrequire = [\"sub\"]\n",
            cert = dir.join("cert.pem").display(),
            key = dir.join("key.pem").display(),
            stat = dir.join("static").display(),
            secret = dir.join("secret").display(),
        );
        let file = dir.join("stack.toml");
        std::fs::write(&file, conf).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&s.bin);
        cmd.arg("serve")
            .arg("--config")
            .arg(&file)
            .args([
                "--database-url",
                database_url,
                "--workers",
                &s.workers.to_string(),
                "--no-pin",
                "--log-level",
                "warn",
            ])
            .args(
                s.cache_tier
                    .iter()
                    .flat_map(|u| ["--cache-tier", u.as_str()]),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = crate::compare::server::on_cpus(cpus, || Ok(cmd.spawn()?))
            .map_err(|e| format!("{}: {e:#}", s.bin.display()))?;
        let start = Instant::now();
        loop {
            if super::h2::request(
                super::h2::H2::Tls(tls),
                "GET",
                "/public/baseline?a=1&b=1",
                &[],
                None,
            )
            .is_ok_and(|r| r.status == 200)
            {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!(
                    "production-stack's edge exited ({status}): {}",
                    err.trim()
                ));
            }
            if start.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "production-stack's edge did not answer on {tls} within {START_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let sidecar = s
            .cache_tier
            .as_deref()
            .and_then(url_port)
            .and_then(|port| {
                let tables = ["/proc/net/tcp", "/proc/net/tcp6"]
                    .map(|t| std::fs::read_to_string(t).unwrap_or_default());
                listening_inode(&tables.concat(), port)
            })
            .and_then(owner_of);
        Ok(Stack {
            tls,
            token: hs256_token("42"),
            sidecar,
            child,
        })
    }

    /// The stack's CPU so far (utime + stime, clock ticks): the edge (the app runs in it) and
    /// the cache sidecar when found. None if the edge's is unreadable.
    pub fn cpu_ticks(&self) -> Option<u64> {
        let of = |pid: u32| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            procfs::parse_proc_stat(&text).map(|s| s.cpu)
        };
        let edge = of(self.child.id())?;
        Some(edge + self.sidecar.and_then(of).unwrap_or(0))
    }

    /// What the CPU figure counts, for the report.
    pub fn counted(&self) -> &'static str {
        if self.sidecar.is_some() {
            "the edge (with the app in it) and its Redis"
        } else {
            "the edge (with the app in it); no cache sidecar found on the --cache-tier port"
        }
    }
}

/// The port of a `redis://HOST:PORT[/…]` (or memcached) URL.
fn url_port(url: &str) -> Option<u16> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// The inode of the socket listening (state 0A) on `port` in /proc/net/tcp{,6}'s `table`.
fn listening_inode(table: &str, port: u16) -> Option<u64> {
    let want = format!(":{port:04X}");
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 9 && f[1].ends_with(&want) && f[3] == "0A")
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

/// The process holding socket `inode` (among those whose fds this user may read).
fn owner_of(inode: u64) -> Option<u32> {
    let link = format!("socket:[{inode}]");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.to_str() == Some(&link)))
            .then_some(pid)
    })
}

/// A JWT (RFC 7519) signed HS256 with [`STACK_SECRET`]: `sub` and an `exp` an hour on.
fn hs256_token(sub: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 3600;
    let head = base64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = base64url(format!(r#"{{"sub":"{sub}","exp":{exp}}}"#).as_bytes());
    let input = format!("{head}.{claims}");
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, STACK_SECRET.as_bytes());
    let tag = aws_lc_rs::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", base64url(tag.as_ref()))
}

/// base64url without padding (RFC 4648 §5), as JWTs are written.
fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..=c.len() {
            out.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648 §10's vectors, unpadded, and the URL alphabet.
    #[test]
    fn base64url_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
        ] {
            assert_eq!(base64url(i.as_bytes()), o);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    /// The cache sidecar is found by the port of the --cache-tier URL, listening sockets only.
    #[test]
    fn the_sidecar_is_what_listens_on_the_tier_port() {
        assert_eq!(url_port("redis://127.0.0.1:6379"), Some(6379));
        assert_eq!(url_port("redis://127.0.0.1:6380/0"), Some(6380));
        assert_eq!(url_port("redis://localhost"), None);
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:18EB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 111 1 0\n\
   1: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 222 1 0\n";
        assert_eq!(listening_inode(table, 6379), Some(222));
        assert_eq!(listening_inode(table, 6380), None);
    }
}
