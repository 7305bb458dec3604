//! The HTTPS certificates: each TLS listener's own (the default) and the sites' (chosen by
//! the client's SNI from the sites' names), read from their PEM files, checked against their
//! keys, served to every handshake through a resolver that a reload (SIGHUP) swaps without
//! touching a connection, with each one's OCSP response to staple. The rustls server
//! configuration around them is built in `handshake`.
//!
//! Owns the files and the swap. A handshake takes the current set with one uncontended read
//! lock and one name lookup (per connection, never per request); a reload reads every file,
//! checks them all, and only then replaces the set, so a bad file keeps the old ones.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::acme::{ACME_TLS_ALPN, Challenges};
use crate::config::{CertFiles, Config, TlsConfig};

/// The one application protocol offered in ALPN.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
/// HTTP/2 over TLS (RFC 9113 §3.2), offered first.
pub const ALPN_H2: &[u8] = b"h2";

/// Why the TLS configuration could not be built. Each variant names the file at fault.
#[derive(Debug)]
pub enum TlsError {
    /// The certificate file could not be read or holds no valid PEM certificate.
    Cert { path: PathBuf, why: String },
    /// The key file could not be read or holds no usable private key.
    Key { path: PathBuf, why: String },
    /// The private key does not belong to the leaf certificate.
    KeyMismatch { cert: PathBuf, key: PathBuf },
    /// The OCSP response file could not be read or is not a DER response.
    Ocsp { path: PathBuf, why: String },
    /// The client CA bundle could not be read or holds no usable CA certificate.
    ClientCa { path: PathBuf, why: String },
    /// The handshake options cannot be served (an unknown suite, no suite for a version).
    Options(String),
    /// rustls refused the certificate or key for another reason.
    Rustls(rustls::Error),
    /// A TLS ticket key file could not be read or is not a key.
    TicketKey { path: PathBuf, why: String },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Cert { path, why } => {
                write!(f, "certificate {}: {why}", path.display())
            }
            TlsError::Key { path, why } => write!(f, "private key {}: {why}", path.display()),
            TlsError::KeyMismatch { cert, key } => write!(
                f,
                "private key {} does not match certificate {}",
                key.display(),
                cert.display()
            ),
            TlsError::Ocsp { path, why } => write!(f, "OCSP response {}: {why}", path.display()),
            TlsError::ClientCa { path, why } => {
                write!(f, "client CA bundle {}: {why}", path.display())
            }
            TlsError::Options(why) => f.write_str(why),
            TlsError::Rustls(e) => write!(f, "TLS configuration refused: {e}"),
            TlsError::TicketKey { path, why } => {
                write!(f, "TLS ticket key {}: {why}", path.display())
            }
        }
    }
}

impl std::error::Error for TlsError {}

/// A certificate for some names, chosen by the client's SNI: a site's `tls`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedCert {
    /// Exact names and wildcards (`*.example.com`: any name ending in `.example.com`), as
    /// the site's names.
    pub names: Vec<String>,
    pub files: CertFiles,
    /// Obtained by the server itself (ACME or the local CA): served only while it is valid
    /// and names all of `names`, and left out (not an error) while there is none such yet.
    pub managed: bool,
}

/// The certificates named by `config`'s sites, in site order (a name claimed twice keeps
/// the first site's certificate, as the first site answers it).
pub fn named_certs(config: &Config) -> Vec<NamedCert> {
    let storage = config.acme.as_ref().map(|a| a.storage.as_path());
    config
        .sites
        .iter()
        .filter_map(|s| match (&s.tls, s.managed, storage) {
            (Some(files), _, _) => Some(NamedCert {
                names: s.names.clone(),
                files: files.clone(),
                managed: false,
            }),
            (None, Some(managed), Some(storage)) => Some(NamedCert {
                names: s.names.clone(),
                files: crate::acme::store::files(storage, managed, &s.names),
                managed: true,
            }),
            _ => None,
        })
        .collect()
}

/// The certificates a listener answers handshakes with: read, checked, and indexed by name.
#[derive(Debug)]
pub struct CertSet {
    /// Where the named ones were read from (read again on reload).
    named: Vec<NamedCert>,
    /// For a client without SNI, or with a name no site's certificate claims (none: such a
    /// handshake is refused).
    default: Option<Arc<CertifiedKey>>,
    /// Lowercase name → certificate.
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `.example.com` → certificate, longest suffix first.
    wildcard: Vec<(String, Arc<CertifiedKey>)>,
}

impl CertSet {
    /// The certificate for `sni`: an exact name, then the longest wildcard that matches,
    /// then the default (nginx's and caddy's order).
    pub fn pick(&self, sni: Option<&str>) -> Option<&Arc<CertifiedKey>> {
        let Some(sni) = sni else {
            return self.default.as_ref();
        };
        let name = sni.trim_end_matches('.').to_ascii_lowercase();
        if let Some(key) = self.exact.get(&name) {
            return Some(key);
        }
        self.wildcard
            .iter()
            .find(|(suffix, _)| name.len() > suffix.len() && name.ends_with(suffix.as_str()))
            .map_or(self.default.as_ref(), |(_, key)| Some(key))
    }
}

/// The certificates every handshake on one listener is answered from, and where they are
/// read from.
#[derive(Debug)]
pub struct CertStore {
    /// The listener's own certificate: the default.
    default: Option<CertFiles>,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertSet>>,
    /// The TLS-ALPN-01 challenges in flight, answered to handshakes that offer only
    /// `acme-tls/1` (when the ACME challenge is TLS-ALPN-01).
    acme: Option<Arc<Challenges>>,
}

impl CertStore {
    /// Reads and checks the certificate chain and key of `tls` (the default) and those of
    /// `named`.
    pub fn load(
        tls: &TlsConfig,
        named: &[NamedCert],
        provider: Arc<CryptoProvider>,
        acme: Option<Arc<Challenges>>,
    ) -> Result<CertStore, TlsError> {
        let default = tls.cert.as_ref().map(|pair| CertFiles {
            cert: pair.cert.clone(),
            key: pair.key.clone(),
            ocsp: tls.options.ocsp.clone(),
        });
        let set = read_set(default.as_ref(), named.to_vec(), &provider)?;
        Ok(CertStore {
            default,
            provider,
            current: RwLock::new(Arc::new(set)),
            acme,
        })
    }

    /// Reads every file again and, when all are good, serves them to the next handshake.
    /// On an error the certificates in use stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        let set = self.read_again()?;
        self.swap(set);
        Ok(())
    }

    /// Reads and checks every file again without serving them yet.
    pub fn read_again(&self) -> Result<CertSet, TlsError> {
        let named = self.current().named.clone();
        self.read_with(named)
    }

    /// Reads and checks the default certificate again and `named` in place of the named
    /// ones in use (the sites of a reloaded configuration), without serving them yet.
    pub fn read_with(&self, named: Vec<NamedCert>) -> Result<CertSet, TlsError> {
        read_set(self.default.as_ref(), named, &self.provider)
    }

    /// Serves `set` to the next handshake.
    pub fn swap(&self, set: CertSet) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
    }

    fn current(&self) -> Arc<CertSet> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every certificate file in use: the default's first, then the named ones'.
    pub fn cert_paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.default.iter().map(|d| d.cert.clone()).collect();
        for n in &self.current().named {
            if !paths.contains(&n.files.cert) {
                paths.push(n.files.cert.clone());
            }
        }
        paths
    }

    /// Every file read again on reload: each certificate, key and OCSP response.
    pub fn files(&self) -> Vec<PathBuf> {
        let current = self.current();
        let pairs = self
            .default
            .iter()
            .chain(current.named.iter().map(|n| &n.files));
        let mut files = Vec::new();
        for f in pairs {
            files.extend([f.cert.clone(), f.key.clone()]);
            files.extend(f.ocsp.clone());
        }
        files
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(acme) = &self.acme
            && let Some(mut offered) = hello.alpn()
            && offered.any(|p| p == ACME_TLS_ALPN)
        {
            // A CA's validation (RFC 8737 §3): only the challenge's certificate, or none.
            return hello.server_name().and_then(|name| acme.tls_alpn01(name));
        }
        let set = self.current.read().unwrap_or_else(|e| e.into_inner());
        set.pick(hello.server_name()).cloned()
    }
}

impl CertStore {
    /// Every certificate served now and when it expires: the listener's
    /// own, then each site's that is loaded (a managed one not obtained yet is not). Read
    /// from the set in use, so a reload's certificates are reported from the swap on.
    pub fn expiries(&self) -> Vec<crate::node_info::CertExpiry> {
        use crate::node_info::CertExpiry;
        let set = self.current();
        let mut out = Vec::new();
        if let Some(key) = &set.default
            && let Some((not_after_s, name)) = leaf_facts(key)
        {
            out.push(CertExpiry {
                name: name.unwrap_or_else(|| "default".into()),
                source: "files",
                not_after_s,
            });
        }
        for n in &set.named {
            let Some(first) = n.names.first() else {
                continue;
            };
            let Some(key) = set.lookup(first) else {
                continue;
            };
            let Some((not_after_s, _)) = leaf_facts(key) else {
                continue;
            };
            out.push(CertExpiry {
                name: first.clone(),
                source: if n.managed {
                    managed_kind(&n.files)
                } else {
                    "files"
                },
                not_after_s,
            });
        }
        out
    }
}

impl CertStore {
    /// The first name of each managed certificate (ACME, the local CA) that is not served
    /// yet: a node that would refuse those names' handshakes is not ready (`/readyz`).
    pub fn missing_managed(&self) -> Vec<String> {
        let set = self.current();
        set.named
            .iter()
            .filter(|n| n.managed)
            .filter_map(|n| n.names.first())
            .filter(|first| set.lookup(first).is_none())
            .cloned()
            .collect()
    }
}

impl CertSet {
    /// The certificate loaded for `name`, a site's own name as written (exact or
    /// `*.suffix`), never the default.
    fn lookup(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        let name = name.to_ascii_lowercase();
        match name.strip_prefix('*') {
            Some(suffix) => self
                .wildcard
                .iter()
                .find(|(s, _)| s == suffix)
                .map(|(_, k)| k),
            None => self.exact.get(&name),
        }
    }
}

/// The leaf's `notAfter` (seconds since the epoch) and first DNS name, when it parses.
fn leaf_facts(key: &CertifiedKey) -> Option<(i64, Option<String>)> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(key.cert.first()?).ok()?;
    let name = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .and_then(|san| {
            san.value.general_names.iter().find_map(|g| match g {
                GeneralName::DNSName(d) => Some(d.to_string()),
                _ => None,
            })
        });
    Some((cert.validity().not_after.timestamp(), name))
}

/// `acme` or `internal`: the directory a managed certificate is kept under
/// (`STORAGE/KIND/NAME/cert.pem`, `acme::store::files`).
fn managed_kind(files: &CertFiles) -> &'static str {
    let kind = files
        .cert
        .parent()
        .and_then(|d| d.parent())
        .and_then(|d| d.file_name());
    if kind.is_some_and(|k| k == "internal") {
        "internal"
    } else {
        "acme"
    }
}

/// Reads and checks the default pair and every named one, and indexes them by name.
fn read_set(
    default: Option<&CertFiles>,
    named: Vec<NamedCert>,
    provider: &CryptoProvider,
) -> Result<CertSet, TlsError> {
    // A pair shared by several sites is read once.
    let mut read_pairs: HashMap<CertFiles, Arc<CertifiedKey>> = HashMap::new();
    let mut get = |files: &CertFiles| -> Result<Arc<CertifiedKey>, TlsError> {
        if let Some(key) = read_pairs.get(files) {
            return Ok(key.clone());
        }
        let key = Arc::new(read(files, provider)?);
        read_pairs.insert(files.clone(), key.clone());
        Ok(key)
    };
    let default = default.map(&mut get).transpose()?;
    let mut exact = HashMap::new();
    let mut wildcard: Vec<(String, Arc<CertifiedKey>)> = Vec::new();
    for n in &named {
        let key = if n.managed {
            // Never an expired one or one for other names; none yet is not an error.
            match crate::acme::store::stored(&n.files, &n.names)
                .map_err(|why| why.to_string())
                .and_then(|_| get(&n.files).map_err(|e| e.to_string()))
            {
                Ok(key) => key,
                Err(why) => {
                    tracing::debug!(names = %n.names.join(", "), "no managed certificate served: {why}");
                    continue;
                }
            }
        } else {
            get(&n.files)?
        };
        for name in &n.names {
            let name = name.to_ascii_lowercase();
            match name.strip_prefix('*') {
                Some(suffix) => {
                    if !wildcard.iter().any(|(s, _)| s == suffix) {
                        wildcard.push((suffix.to_string(), key.clone()));
                    }
                }
                None => {
                    exact.entry(name).or_insert_with(|| key.clone());
                }
            }
        }
    }
    // Stable: among equal lengths the first site's stays first.
    crate::app::sites::longest_first(&mut wildcard, |(s, _)| s.len());
    Ok(CertSet {
        named,
        default,
        exact,
        wildcard,
    })
}

/// Checks that `files` hold a certificate chain and the key that belongs to it.
pub fn check_pair(files: &CertFiles) -> Result<(), TlsError> {
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    read(files, &provider).map(drop)
}

/// The chain and key from their PEM files, checked to belong together, with the OCSP
/// response to staple.
fn read(files: &CertFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let (cert, key) = (files.cert.as_path(), files.key.as_path());
    let cert_err = |why: String| TlsError::Cert {
        path: cert.to_path_buf(),
        why,
    };
    // Through the privilege keeper: after a drop to another user, a SIGHUP still reads
    // root's keys.
    let cert_pem = crate::privsep::read(cert).map_err(|e| cert_err(e.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(pem_why(&e)))?;
    if chain.is_empty() {
        return Err(cert_err("no CERTIFICATE block found".into()));
    }
    let key_err = |why: String| TlsError::Key {
        path: key.to_path_buf(),
        why,
    };
    let key_pem = crate::privsep::read(key).map_err(|e| key_err(e.to_string()))?;
    let der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| key_err(pem_why(&e)))?;
    let mut certified = CertifiedKey::from_der(chain, der, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        },
        e => TlsError::Rustls(e),
    })?;
    if let Some(path) = &files.ocsp {
        certified.ocsp = Some(read_ocsp(path)?);
    }
    Ok(certified)
}

/// A DER OCSP response (what `openssl ocsp -respout` writes): read whole and checked to be
/// one DER SEQUENCE, so a PEM file or a truncated download is refused at its name rather
/// than stapled for clients to reject.
fn read_ocsp(path: &std::path::Path) -> Result<Vec<u8>, TlsError> {
    let err = |why: String| TlsError::Ocsp {
        path: path.to_path_buf(),
        why,
    };
    let der = crate::privsep::read(path).map_err(|e| err(e.to_string()))?;
    if der_sequence_len(&der) != Some(der.len()) {
        return Err(err(
            "not a DER OCSP response (one ASN.1 SEQUENCE filling the file)".into(),
        ));
    }
    Ok(der)
}

/// The total length of the DER SEQUENCE that `der` starts with (tag, length and contents).
fn der_sequence_len(der: &[u8]) -> Option<usize> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    if tag != 0x30 {
        return None;
    }
    let (len, header) = match first {
        0..=0x7f => (first as usize, 2),
        0x81..=0x84 => {
            let n = (first & 0x7f) as usize;
            let bytes = rest.get(..n)?;
            let len = bytes.iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
            (len, 2 + n)
        }
        _ => return None,
    };
    header.checked_add(len)
}

fn pem_why(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(e) => e.to_string(),
        Error::NoItemsFound => "no PEM block of the expected kind found".into(),
        e => format!("invalid PEM: {e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &std::path::Path) -> Vec<u8> {
        std::fs::create_dir_all(dir).unwrap();
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
        ck.cert.der().to_vec()
    }

    fn files(dir: &std::path::Path) -> CertFiles {
        CertFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            ocsp: None,
        }
    }

    fn tls_config(dir: &std::path::Path) -> TlsConfig {
        TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(crate::config::CertPair {
                cert: dir.join("cert.pem"),
                key: dir.join("key.pem"),
            }),
            ktls: false,
            key_update_bytes: 1 << 30,
            http2: true,
            options: Default::default(),
        }
    }

    fn served(store: &CertStore) -> Vec<u8> {
        store.current().default.as_ref().unwrap().cert[0].to_vec()
    }

    fn picked(store: &CertStore, sni: Option<&str>) -> Vec<u8> {
        store.current().pick(sni).unwrap().cert[0].to_vec()
    }

    #[test]
    fn sni_picks_an_exact_name_then_the_longest_wildcard_then_the_default() {
        let dir = std::env::temp_dir().join(format!("linerate-sni-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let default = write_pair(&dir.join("default"));
        let a = write_pair(&dir.join("a"));
        let b = write_pair(&dir.join("b"));
        let xb = write_pair(&dir.join("xb"));
        let named = |names: &[&str], sub: &str| NamedCert {
            names: names.iter().map(|n| n.to_string()).collect(),
            files: files(&dir.join(sub)),
            managed: false,
        };
        let sites = [
            named(&["a.test", "www.a.test"], "a"),
            named(&["*.b.test", "exact.x.b.test"], "b"),
            named(&["*.x.b.test"], "xb"),
            // Claimed already: the first site's certificate stays.
            named(&["a.test", "*.b.test"], "xb"),
        ];
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store =
            CertStore::load(&tls_config(&dir.join("default")), &sites, provider, None).unwrap();
        #[rustfmt::skip]
        let rows: &[(Option<&str>, &Vec<u8>)] = &[
            (Some("a.test"), &a),
            (Some("WWW.A.Test."), &a),
            (Some("y.b.test"), &b),
            (Some("deep.y.b.test"), &b),
            (Some("z.x.b.test"), &xb),
            // An exact name wins over a longer wildcard.
            (Some("exact.x.b.test"), &b),
            // A wildcard needs a label before its suffix.
            (Some("b.test"), &default),
            (Some("x.test"), &default),
            (None, &default),
        ];
        for (sni, want) in rows {
            assert_eq!(&picked(&store, *sni), *want, "{sni:?}");
        }
        // One pair named by two sites is read once.
        let set = store.current();
        assert!(Arc::ptr_eq(
            &set.exact["exact.x.b.test"],
            &set.wildcard.iter().find(|(s, _)| s == ".b.test").unwrap().1
        ));

        // A reload with a broken named pair keeps every certificate in use.
        std::fs::write(dir.join("b/key.pem"), "garbage").unwrap();
        assert!(matches!(store.reload(), Err(TlsError::Key { .. })));
        assert_eq!(picked(&store, Some("y.b.test")), b);
        // A reloaded configuration's sites replace the named certificates.
        let set = store.read_with(vec![named(&["*.b.test"], "a")]).unwrap();
        store.swap(set);
        assert_eq!(picked(&store, Some("y.b.test")), a);
        assert_eq!(picked(&store, Some("a.test")), default);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_ocsp_response_is_stapled_and_a_bad_one_refused_at_its_name() {
        let dir = std::env::temp_dir().join(format!("linerate-ocsp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_pair(&dir);
        // A DER SEQUENCE with a long-form length (what a real response looks like).
        let mut der = vec![0x30, 0x81, 0x80];
        der.extend(std::iter::repeat_n(7u8, 0x80));
        std::fs::write(dir.join("r.ocsp"), &der).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = tls_config(&dir);
        tls.options.ocsp = Some(dir.join("r.ocsp"));
        let store = CertStore::load(&tls, &[], provider, None).unwrap();
        assert_eq!(
            store.current().default.as_ref().unwrap().ocsp.as_deref(),
            Some(&der[..])
        );
        assert!(store.files().contains(&dir.join("r.ocsp")));
        // PEM, a truncated download, trailing bytes: refused, and the response in use stays.
        let mut long = der.clone();
        long.push(0);
        for bad in [&b"-----BEGIN OCSP-----\n"[..], &der[..40], &long, b""] {
            std::fs::write(dir.join("r.ocsp"), bad).unwrap();
            assert!(
                matches!(store.reload(), Err(TlsError::Ocsp { .. })),
                "{bad:?}"
            );
            assert_eq!(
                store.current().default.as_ref().unwrap().ocsp.as_deref(),
                Some(&der[..])
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reload_swaps_a_good_pair_and_keeps_the_old_one_on_any_error() {
        let dir = std::env::temp_dir().join(format!("linerate-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let first = write_pair(&dir);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = CertStore::load(&tls_config(&dir), &[], provider, None).unwrap();
        assert_eq!(served(&store), first);

        // Each failure names its file and leaves the first certificate in place.
        std::fs::write(dir.join("cert.pem"), "garbage").unwrap();
        assert!(matches!(store.reload(), Err(TlsError::Cert { .. })));
        let other = rcgen::generate_simple_self_signed(vec!["x".to_string()]).unwrap();
        std::fs::write(dir.join("cert.pem"), other.cert.pem()).unwrap();
        assert!(matches!(store.reload(), Err(TlsError::KeyMismatch { .. })));
        std::fs::remove_file(dir.join("key.pem")).unwrap();
        assert!(matches!(store.reload(), Err(TlsError::Key { .. })));
        assert_eq!(served(&store), first);

        let second = write_pair(&dir);
        store.reload().unwrap();
        assert_eq!(served(&store), second);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
