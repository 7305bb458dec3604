//! Pebble (Let's Encrypt's test ACME CA, RFC 8555) and pebble-challtestsrv (the DNS server its
//! validation authority asks) as child processes on 127.0.0.1, for the ACME tests
//! (tests/acme.rs, run by scripts/acme.sh, which installs both pinned into target/tools and
//! names them in `LINERATE_PEBBLE` and `LINERATE_CHALLTESTSRV`).
//!
//! - pebble-challtestsrv answers DNS on a free 127.0.0.1 port (UDP and TCP; Pebble asks over
//!   TCP), every A query with 127.0.0.1 and no AAAA query with anything, so any name an order
//!   holds validates against 127.0.0.1: HTTP-01 on [`PebbleOptions::http_port`], TLS-ALPN-01 on
//!   [`PebbleOptions::tls_port`] (linerate's listeners). Its own HTTP-01, HTTPS-01, TLS-ALPN-01
//!   and DoH responders are off, so it never takes a port linerate needs.
//! - Pebble's WFE (the ACME directory) and management interface listen on free 127.0.0.1
//!   ports over HTTPS, with a certificate for 127.0.0.1 and localhost issued by a throwaway CA
//!   made here ([`Pebble::wfe_ca_pem`]: the ACME directory's trust root). Its issuing root is
//!   another matter: Pebble makes a new one at every start ([`Pebble::issuer_roots_pem`]).
//! - Env: `PEBBLE_VA_NOSLEEP=1` (validation at once), `PEBBLE_WFE_NONCEREJECT=0` (no good
//!   nonce refused), `PEBBLE_AUTHZREUSE=0` (every order validates afresh); retryAfter 0 (no
//!   Retry-After on pending authorizations and orders); one profile, "default" (Pebble picks a
//!   random profile for an order that names none), whose `validityPeriod` is
//!   [`PebbleOptions::cert_lifetime`].
//!
//! Children are stopped by PID (SIGKILL) and waited; their output goes to log files in a temp
//! dir ([`Pebble::log`]), kept (and named on stderr) when a test panics. Every wait is bounded.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The env var naming the pebble binary.
pub const PEBBLE_ENV: &str = "LINERATE_PEBBLE";
/// The env var naming the pebble-challtestsrv binary.
pub const CHALLTESTSRV_ENV: &str = "LINERATE_CHALLTESTSRV";

/// How long a start waits for a child to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How long one request to Pebble or challtestsrv may take (connect, each read and write).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// (pebble, pebble-challtestsrv) from `LINERATE_PEBBLE` and `LINERATE_CHALLTESTSRV`; `None`
/// when either is unset or empty.
pub fn binaries() -> Option<(PathBuf, PathBuf)> {
    let get = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    Some((get(PEBBLE_ENV)?, get(CHALLTESTSRV_ENV)?))
}

/// [`binaries`], or a panic saying how to get them: an ignored test that is run without them
/// must fail, never pass silently.
pub fn require_binaries() -> (PathBuf, PathBuf) {
    binaries().unwrap_or_else(|| {
        panic!(
            "{PEBBLE_ENV} and {CHALLTESTSRV_ENV} are not set: run scripts/acme.sh (it installs \
             Pebble into target/tools and runs these tests with both set)"
        )
    })
}

/// What a [`Pebble`] is started with.
#[derive(Clone, Debug, Default)]
pub struct PebbleOptions {
    /// The port Pebble's validation authority fetches HTTP-01 tokens from (on 127.0.0.1, for
    /// any name): linerate's HTTP listener. Must not be 0.
    pub http_port: u16,
    /// The port Pebble's validation authority makes TLS-ALPN-01 handshakes to: linerate's
    /// HTTPS listener. Must not be 0.
    pub tls_port: u16,
    /// The lifetime of issued certificates (whole seconds, rounded up; notAfter is notBefore
    /// + this - 1 s, notBefore the moment of issuance). `None`: Pebble's 90 days.
    pub cert_lifetime: Option<Duration>,
    /// External account binding required, with this (key ID, base64url HMAC key) the only
    /// key Pebble knows.
    pub eab: Option<(String, String)>,
    /// Extra environment for Pebble, applied after the defaults above (so it may override
    /// them), e.g. `PEBBLE_WFE_NONCEREJECT=50`, `PEBBLE_CHAIN_LENGTH=2`.
    pub env: Vec<(String, String)>,
    /// The DNS server Pebble's validation authority asks in place of challtestsrv (BIND for
    /// DNS-01: tests/common/bind.rs); challtestsrv still runs.
    pub dns_server: Option<SocketAddr>,
}

/// A running Pebble and pebble-challtestsrv (see the module docs).
pub struct Pebble {
    dir: PathBuf,
    pebble_bin: PathBuf,
    config: PathBuf,
    wfe_ca: PathBuf,
    env: Vec<(String, String)>,
    listen: SocketAddr,
    management: SocketAddr,
    dns: SocketAddr,
    /// What Pebble resolves through: `dns`, or [`PebbleOptions::dns_server`].
    resolver: Option<SocketAddr>,
    challtestsrv_management: SocketAddr,
    pebble: Option<Child>,
    challtestsrv: Option<Child>,
}

static DIRS: AtomicU32 = AtomicU32::new(0);

impl Pebble {
    /// Starts pebble-challtestsrv, then Pebble, and waits (at most [`START_TIMEOUT`] each)
    /// until challtestsrv's management port and Pebble's directory answer. Panics (with the
    /// logs) when either does not start; needs [`binaries`].
    pub fn start(opts: PebbleOptions) -> Pebble {
        assert!(
            opts.http_port != 0 && opts.tls_port != 0,
            "PebbleOptions: http_port and tls_port must be real ports (linerate's listeners)"
        );
        let (pebble_bin, challtestsrv_bin) = require_binaries();
        let dir = std::env::temp_dir().join(format!(
            "linerate-pebble-{}-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();

        // Pebble's own HTTPS (WFE and management): a CA, and a leaf for 127.0.0.1/localhost.
        let (ca_pem, cert_pem, key_pem) = wfe_certificates();
        let wfe_ca = dir.join("wfe-ca.pem");
        std::fs::write(&wfe_ca, ca_pem).unwrap();
        std::fs::write(dir.join("wfe-cert.pem"), cert_pem).unwrap();
        std::fs::write(dir.join("wfe-key.pem"), key_pem).unwrap();

        let mut pebble = Pebble {
            config: dir.join("pebble-config.json"),
            wfe_ca,
            env: opts.env.clone(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            management: SocketAddr::from(([127, 0, 0, 1], 0)),
            dns: SocketAddr::from(([127, 0, 0, 1], 0)),
            resolver: opts.dns_server,
            challtestsrv_management: SocketAddr::from(([127, 0, 0, 1], 0)),
            pebble: None,
            challtestsrv: None,
            pebble_bin,
            dir,
        };
        pebble.start_challtestsrv(&challtestsrv_bin);
        pebble.listen.set_port(free_tcp_port());
        pebble.management.set_port(free_tcp_port());
        pebble.write_config(&opts);
        pebble.start_pebble();
        pebble
    }

    /// challtestsrv on fresh free ports; a port taken between its probe and the bind (another
    /// test's server) costs one more try, three at most.
    fn start_challtestsrv(&mut self, bin: &Path) {
        for attempt in 1..=3 {
            self.dns.set_port(free_udp_and_tcp_port());
            self.challtestsrv_management.set_port(free_tcp_port());
            let log = append_log(&self.dir.join("challtestsrv.log"));
            let child = Command::new(bin)
                .arg(format!("-dnsserver={}", self.dns))
                .arg(format!("-management={}", self.challtestsrv_management))
                .args([
                    "-http01=",
                    "-https01=",
                    "-tlsalpn01=",
                    "-doh=",
                    "-defaultIPv4=127.0.0.1",
                    "-defaultIPv6=",
                ])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
            self.challtestsrv = Some(child);
            let (dns, mgmt) = (self.dns, self.challtestsrv_management);
            let ready = self.wait_child("challtestsrv", || {
                TcpStream::connect_timeout(&mgmt, Duration::from_millis(200)).is_ok()
                    && TcpStream::connect_timeout(&dns, Duration::from_millis(200)).is_ok()
            });
            match ready {
                Ok(()) => return,
                Err(why) if attempt < 3 && self.log().contains("address already in use") => {
                    eprintln!("pebble harness: challtestsrv: {why}; trying other ports");
                    kill(&mut self.challtestsrv);
                }
                Err(why) => panic!("challtestsrv did not start: {why}\n{}", self.log()),
            }
        }
    }

    fn write_config(&self, opts: &PebbleOptions) {
        let lifetime = opts.cert_lifetime.map(|d| {
            let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
            secs.max(1)
        });
        let mut c = serde_json::json!({
            "listenAddress": self.listen.to_string(),
            "managementListenAddress": self.management.to_string(),
            "certificate": self.dir.join("wfe-cert.pem"),
            "privateKey": self.dir.join("wfe-key.pem"),
            "httpPort": opts.http_port,
            "tlsPort": opts.tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": opts.eab.is_some(),
            "retryAfter": { "authz": 0, "order": 0 },
            "keyAlgorithm": "ecdsa",
            // One profile only: an order naming none gets a random one. validityPeriod 0 is
            // Pebble's default (90 days).
            "profiles": {
                "default": {
                    "description": "linerate's tests",
                    "validityPeriod": lifetime.unwrap_or(0),
                }
            },
        });
        if let Some(secs) = lifetime {
            // Deprecated (ignored from v2.7.0 on, where the profile's validityPeriod rules), kept
            // for older Pebbles.
            c["certificateValidityPeriod"] = secs.into();
        }
        if let Some((kid, hmac)) = &opts.eab {
            let keys: BTreeMap<&str, &str> = [(kid.as_str(), hmac.as_str())].into();
            c["externalAccountMACKeys"] = serde_json::json!(keys);
        }
        let text = serde_json::to_string_pretty(&serde_json::json!({ "pebble": c })).unwrap();
        std::fs::write(&self.config, text).unwrap();
    }

    fn start_pebble(&mut self) {
        assert!(self.pebble.is_none(), "Pebble is already running");
        let log = append_log(&self.dir.join("pebble.log"));
        let child = Command::new(&self.pebble_bin)
            .arg("-config")
            .arg(&self.config)
            .arg("-dnsserver")
            .arg(self.resolver.unwrap_or(self.dns).to_string())
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.pebble_bin.display()));
        self.pebble = Some(child);
        let url = self.directory_url();
        let ca = self.wfe_ca.clone();
        let ready = self.wait_child("pebble", || matches!(https_get(&url, &ca), Ok((200, _))));
        if let Err(why) = ready {
            panic!("Pebble did not start: {why}\n{}", self.log());
        }
    }

    /// Polls `ready` every 50 ms for at most [`START_TIMEOUT`]; an error when the child it
    /// is about (`which`) exits first, or time runs out.
    fn wait_child(&mut self, which: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if ready() {
                return Ok(());
            }
            let child = if which == "pebble" {
                self.pebble.as_mut()
            } else {
                self.challtestsrv.as_mut()
            };
            if let Some(status) = child.and_then(|c| c.try_wait().unwrap()) {
                return Err(format!("{which} exited: {status}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("{which} did not answer within {START_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The ACME directory: `https://127.0.0.1:PORT/dir`.
    pub fn directory_url(&self) -> String {
        format!("https://{}/dir", self.listen)
    }

    /// Pebble's management interface (HTTPS, the same certificate): `https://127.0.0.1:PORT`.
    pub fn management_url(&self) -> String {
        format!("https://{}", self.management)
    }

    /// The PEM file of the CA that issued Pebble's own HTTPS certificate (WFE and
    /// management): the trust root for the ACME directory. Not the issuer of the certificates
    /// Pebble issues (that is [`Pebble::issuer_roots_pem`]).
    pub fn wfe_ca_pem(&self) -> &Path {
        &self.wfe_ca
    }

    /// The DNS server (challtestsrv) Pebble's validation authority asks.
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns
    }

    /// The temp dir with the config, certificates and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The PEM of the root(s) Pebble issues under (`/roots/0`, then `/roots/1`… while they
    /// answer: more than one only with `PEBBLE_ALTERNATE_ROOTS`), fetched from the management
    /// interface over HTTPS checked against [`Pebble::wfe_ca_pem`]. Issued chains (leaf and
    /// intermediate) end under it; a new one at every (re)start.
    pub fn issuer_roots_pem(&self) -> String {
        let mut pem = String::new();
        for i in 0.. {
            let (status, body) = self.management_get(&format!("/roots/{i}"));
            if status != 200 {
                assert!(i > 0, "GET /roots/0: {status} {body}\n{}", self.log());
                break;
            }
            pem.push_str(&body);
        }
        pem
    }

    /// The PEM of Pebble's (first) intermediate: `/intermediates/0`.
    pub fn intermediate_pem(&self) -> String {
        let (status, body) = self.management_get("/intermediates/0");
        assert_eq!(status, 200, "GET /intermediates/0: {body}\n{}", self.log());
        body
    }

    /// What Pebble knows of the certificate with this serial (hex, no `0x`, any case):
    /// `/cert-status-by-serial/`'s JSON, `{"Status": "Valid"|"Revoked", "Serial",
    /// "Certificate" (PEM), "Reason"?, "RevokedAt"?}`; `None` when it knows none.
    pub fn cert_status(&self, serial_hex: &str) -> Option<serde_json::Value> {
        let (status, body) = self.management_get(&format!("/cert-status-by-serial/{serial_hex}"));
        match status {
            200 => Some(serde_json::from_str(&body).expect("cert-status JSON")),
            404 => None,
            _ => panic!("GET /cert-status-by-serial/{serial_hex}: {status} {body}"),
        }
    }

    /// Makes Pebble's ARI (renewalInfo) answer for this certificate (PEM) be `response`,
    /// verbatim (anything, even invalid JSON): `/set-renewal-info/`.
    pub fn set_renewal_info(&self, cert_pem: &str, response: &str) {
        let body = serde_json::json!({ "Certificate": cert_pem, "ARIResponse": response });
        let (status, text) = https_request(
            "POST",
            &format!("{}/set-renewal-info/", self.management_url()),
            Some(&body.to_string()),
            &self.wfe_ca,
        )
        .unwrap_or_else(|e| panic!("POST /set-renewal-info/: {e}"));
        assert_eq!(status, 200, "POST /set-renewal-info/: {text}");
    }

    /// GET on the management interface: (status, body).
    pub fn management_get(&self, path: &str) -> (u16, String) {
        let url = format!("{}{path}", self.management_url());
        https_get(&url, &self.wfe_ca).unwrap_or_else(|e| panic!("GET {url}: {e}\n{}", self.log()))
    }

    /// Makes challtestsrv answer A queries for `host` with `addrs` (instead of 127.0.0.1).
    pub fn add_a(&self, host: &str, addrs: &[&str]) {
        self.challtestsrv_post(
            "/add-a",
            serde_json::json!({ "host": host, "addresses": addrs }),
        );
    }

    /// Undoes [`Pebble::add_a`] for `host`: A queries get 127.0.0.1 again.
    pub fn clear_a(&self, host: &str) {
        self.challtestsrv_post("/clear-a", serde_json::json!({ "host": host }));
    }

    /// Makes challtestsrv answer SERVFAIL for every query for `host` (a validation that fails
    /// on DNS).
    pub fn set_servfail(&self, host: &str) {
        self.challtestsrv_post("/set-servfail", serde_json::json!({ "host": host }));
    }

    /// Undoes [`Pebble::set_servfail`].
    pub fn clear_servfail(&self, host: &str) {
        self.challtestsrv_post("/clear-servfail", serde_json::json!({ "host": host }));
    }

    fn challtestsrv_post(&self, path: &str, body: serde_json::Value) {
        let (status, text) = http_request(
            self.challtestsrv_management,
            "POST",
            path,
            Some(&body.to_string()),
        )
        .unwrap_or_else(|e| panic!("challtestsrv POST {path}: {e}"));
        assert_eq!(status, 200, "challtestsrv POST {path}: {text}");
    }

    /// Kills Pebble (by PID) and waits for it; challtestsrv stays. Its accounts, orders,
    /// certificates and issuing chain are gone with it.
    pub fn stop(&mut self) {
        kill(&mut self.pebble);
    }

    /// Pebble again (stopped first if running), with the same config, ports and WFE
    /// certificate: the directory URL and [`Pebble::wfe_ca_pem`] stay valid, but it has a
    /// new issuing root and knows no account, order or certificate from before.
    pub fn restart(&mut self) {
        self.stop();
        append_log(&self.dir.join("pebble.log"))
            .write_all(b"--- harness: restart ---\n")
            .unwrap();
        self.start_pebble();
    }

    /// Both children's logs so far, for a failing test's message.
    pub fn log(&self) -> String {
        let mut out = String::new();
        for name in ["pebble.log", "challtestsrv.log"] {
            let text = std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
            out.push_str(&format!("----- {name} -----\n{text}"));
        }
        out
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        kill(&mut self.pebble);
        kill(&mut self.challtestsrv);
        if std::thread::panicking() {
            eprintln!(
                "pebble harness: logs and config kept in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Revokes `leaf` (DER) at `pebble` (reason keyCompromise), signed with the ACME account
/// linerate stored in `account_file` (instant-acme's credentials, which linerate writes).
pub fn revoke(pebble: &Pebble, account_file: &Path, leaf: &[u8]) {
    let credentials: instant_acme::AccountCredentials =
        serde_json::from_slice(&std::fs::read(account_file).unwrap()).unwrap();
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
                certificate: &rustls::pki_types::CertificateDer::from(leaf),
                reason: Some(instant_acme::RevocationReason::KeyCompromise),
            })
            .await
            .expect("the CA revokes the certificate");
    });
}

fn kill(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn append_log(path: &Path) -> File {
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

/// A free TCP port on 127.0.0.1 (bound, then released for a child to take).
fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A port free on 127.0.0.1 for both UDP and TCP (a DNS server takes both).
fn free_udp_and_tcp_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// (CA PEM, leaf PEM, leaf key PEM): a throwaway CA and a leaf for 127.0.0.1 and localhost.
fn wfe_certificates() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "linerate tests: Pebble WFE CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "Pebble WFE (linerate tests)");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// GET `url` (`https://HOST:PORT/PATH`, HOST an IP or a name) over HTTPS, trusting only the
/// CA(s) in the PEM file `ca_pem`: (status, body).
pub fn https_get(url: &str, ca_pem: &Path) -> std::io::Result<(u16, String)> {
    https_request("GET", url, None, ca_pem)
}

/// One HTTP/1.1 request over HTTPS (rustls, certificate checked against the CA(s) in
/// `ca_pem`, `Connection: close`): (status, body).
pub fn https_request(
    method: &str,
    url: &str,
    body: Option<&str>,
    ca_pem: &Path,
) -> std::io::Result<(u16, String)> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| invalid(format!("not an https URL: {url}")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| invalid(format!("no port in {url}")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port
        .parse()
        .map_err(|_| invalid(format!("bad port in {url}")))?;

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_pem).map_err(|e| invalid(format!("{e}")))? {
        let cert = cert.map_err(|e| invalid(format!("{}: {e}", ca_pem.display())))?;
        roots.add(cert).map_err(|e| invalid(format!("{e}")))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).map_err(|e| invalid(format!("{e}")))?;
    let conn = rustls::ClientConnection::new(Arc::new(config), name)
        .map_err(|e| invalid(format!("{e}")))?;
    let tcp = connect(host, port)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    exchange(&mut tls, method, authority, path, body)
}

/// One HTTP/1.1 request over plain TCP to `addr`: (status, body).
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut tcp = connect(&addr.ip().to_string(), addr.port())?;
    exchange(&mut tcp, method, &addr.to_string(), path, body)
}

fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{host} resolves to nothing")))?;
    let tcp = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)?;
    tcp.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    tcp.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    Ok(tcp)
}

/// Writes the request, reads the response to the connection's end, and decodes its body
/// (Content-Length, chunked, or to EOF).
fn exchange(
    s: &mut (impl Read + Write),
    method: &str,
    authority: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: linerate-tests\r\n\
         Accept: */*\r\nConnection: close\r\n"
    );
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        req.push_str("\r\n");
    }
    s.write_all(req.as_bytes())?;
    s.flush()?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            // A TLS peer that closes without close_notify: what came is all there is.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
    }
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> std::io::Result<(u16, String)> {
    let bad = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{what}: {:?}", String::from_utf8_lossy(raw)),
        )
    };
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no response head"))?
        + 4;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| bad("non-UTF-8 head"))?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| {
            l.strip_prefix("HTTP/1.1 ")
                .or_else(|| l.strip_prefix("HTTP/1.0 "))
        })
        .and_then(|l| l.get(..3))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let field = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let rest = &raw[head_end..];
    let body = if field("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut out = Vec::new();
        let mut at = rest;
        loop {
            let eol = at
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or_else(|| bad("truncated chunk size"))?;
            let size = std::str::from_utf8(&at[..eol])
                .ok()
                .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
                .ok_or_else(|| bad("bad chunk size"))?;
            at = &at[eol + 2..];
            if size == 0 {
                break;
            }
            if at.len() < size + 2 {
                return Err(bad("truncated chunk"));
            }
            out.extend_from_slice(&at[..size]);
            at = &at[size + 2..];
        }
        out
    } else if let Some(len) = field("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad Content-Length"))?;
        if rest.len() < len {
            return Err(bad("truncated body"));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
