//! Where the certificates the server obtains itself live on disk, and what a stored one is
//! worth: `STORAGE/acme/NAME/{cert,key}.pem` for the ACME CA's,
//! `STORAGE/internal/NAME/{cert,key}.pem` for the local CA's (NAME: the site's first name),
//! the ACME account per directory, and the local CA's root.
//!
//! Owns the layout, the modes (directories 0700, keys and the account 0600) and the
//! replace-by-rename that keeps a reader from ever seeing half a file. A stored certificate
//! is [`usable`] only while it is valid now and names every one of its site's names: an
//! expired or wrong one is never served.
#![forbid(unsafe_code)]

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::{CertFiles, Managed};

/// The files of a managed site's certificate (the site's first name names the directory).
pub fn files(storage: &Path, managed: Managed, names: &[String]) -> CertFiles {
    let dir = site_dir(storage, managed, names);
    CertFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        ocsp: None,
    }
}

fn site_dir(storage: &Path, managed: Managed, names: &[String]) -> PathBuf {
    let kind = match managed {
        Managed::Acme => "acme",
        Managed::Internal => "internal",
    };
    storage.join(kind).join(site_name(names))
}

/// The name a site's certificate is kept under: its first name, lowercase, with no
/// separator and no leading dot (`_` when nothing is left).
pub fn site_name(names: &[String]) -> String {
    let first = names.first().map_or("_", String::as_str);
    // A name is [a-z0-9.-] by the time it is a site's (checked where it is read), but the
    // directory never takes a separator or a leading dot from it.
    let safe: String = first
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    if safe.is_empty() {
        "_".to_string()
    } else {
        safe.to_string()
    }
}

/// The local CA's root certificate (exported for trust stores) and its key.
pub fn local_root(storage: &Path) -> (PathBuf, PathBuf) {
    let dir = storage.join("internal");
    (dir.join("root.pem"), dir.join("root.key"))
}

/// The ACME account's credentials for `directory` (one account per CA).
pub fn account(storage: &Path, directory: &str) -> PathBuf {
    storage
        .join("acme")
        .join(format!("account-{}.json", directory_tag(directory)))
}

/// What tells one CA's directory from another's in a name: 16 hex digits of its SHA-256.
pub fn directory_tag(directory: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, directory.as_bytes());
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Creates `dir` and its parents, 0700.
pub fn make_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Writes `bytes` to `path` through a temporary file and a rename, with `mode`.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    make_dir(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::rename(&tmp, path)
}

/// Stores a new certificate: the key first (0600), then the chain, each replaced whole.
pub fn write_pair(files: &CertFiles, chain_pem: &str, key_pem: &str) -> io::Result<()> {
    write_file(&files.key, key_pem.as_bytes(), 0o600)?;
    write_file(&files.cert, chain_pem.as_bytes(), 0o644)
}

/// What a stored certificate's leaf says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// Its DNS and IP subject alternative names, lowercase.
    pub names: Vec<String>,
    /// Its DER, for the CA's renewal information (ARI).
    pub der: Vec<u8>,
}

/// The leaf of the PEM chain in `pem`.
pub fn leaf(pem: &[u8]) -> Result<Leaf, String> {
    let der = CertificateDer::pem_slice_iter(pem)
        .next()
        .ok_or("no CERTIFICATE block")?
        .map_err(|e| format!("not PEM: {e:?}"))?;
    let (_, cert) =
        x509_parser::parse_x509_certificate(&der).map_err(|e| format!("not X.509: {e}"))?;
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = t.timestamp();
        if secs <= 0 {
            UNIX_EPOCH
        } else {
            UNIX_EPOCH + Duration::from_secs(secs as u64)
        }
    };
    let validity = cert.validity();
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        use x509_parser::extensions::GeneralName;
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => names.push(d.to_ascii_lowercase()),
                GeneralName::IPAddress(b) => {
                    let ip = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).ok().map(std::net::IpAddr::from),
                        16 => <[u8; 16]>::try_from(*b).ok().map(std::net::IpAddr::from),
                        _ => None,
                    };
                    names.extend(ip.map(|i| i.to_string()));
                }
                _ => {}
            }
        }
    }
    Ok(Leaf {
        not_before: at(validity.not_before),
        not_after: at(validity.not_after),
        names,
        der: der.to_vec(),
    })
}

/// Whether a leaf can be served for `names` at `now`: within its validity, and naming every
/// one of them. The reason when not.
pub fn usable(leaf: &Leaf, names: &[String], now: SystemTime) -> Result<(), String> {
    if now >= leaf.not_after {
        return Err("expired".into());
    }
    if now < leaf.not_before {
        return Err("not valid yet".into());
    }
    match names
        .iter()
        .find(|n| !leaf.names.contains(&n.to_ascii_lowercase()))
    {
        Some(missing) => Err(format!("does not name {missing}")),
        None => Ok(()),
    }
}

/// The stored certificate of `files`, when there is one that can be served for `names` now.
pub fn stored(files: &CertFiles, names: &[String]) -> Result<Leaf, String> {
    let pem = fs::read(&files.cert).map_err(|e| e.to_string())?;
    let leaf = leaf(&pem)?;
    usable(&leaf, names, SystemTime::now())?;
    Ok(leaf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(names: &[&str], days: i64) -> String {
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let now = rcgen::date_time_ymd(2026, 1, 1);
        p.not_before = now;
        p.not_after = now + std::time::Duration::from_secs(days as u64 * 86_400);
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn a_stored_leaf_is_usable_only_in_its_validity_and_for_every_name() {
        let l = leaf(cert(&["a.test", "www.a.test", "127.0.0.1"], 90).as_bytes()).unwrap();
        assert_eq!(l.names, ["a.test", "www.a.test", "127.0.0.1"]);
        let jan = UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
        let mid = jan + Duration::from_secs(30 * 86_400);
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases: &[(&[&str], SystemTime, Result<(), &str>)] = &[
            (&["a.test"], mid, Ok(())),
            (&["A.Test", "www.a.test"], mid, Ok(())),
            (&["a.test", "b.test"], mid, Err("does not name b.test")),
            (
                &["a.test"],
                jan - Duration::from_secs(1),
                Err("not valid yet"),
            ),
            (
                &["a.test"],
                jan + Duration::from_secs(90 * 86_400),
                Err("expired"),
            ),
        ];
        for (n, at, want) in cases {
            assert_eq!(
                usable(&l, &names(n), *at).map_err(|e| e.to_string()),
                want.map_err(str::to_string),
                "{n:?}"
            );
        }
        assert!(leaf(b"junk").is_err());
    }

    #[test]
    fn paths_keep_inside_the_storage_and_modes_are_private() {
        let dir = std::env::temp_dir().join(format!("linerate-store-{}", std::process::id()));
        let f = files(&dir, Managed::Acme, &["../Evil/x".into()]);
        assert!(f.cert.starts_with(dir.join("acme")));
        assert_eq!(f.cert.parent().unwrap().parent().unwrap(), dir.join("acme"));
        let f = files(&dir, Managed::Internal, &["a.test".into()]);
        write_pair(&f, "CHAIN", "KEY").unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&f.key), 0o600);
        assert_eq!(mode(f.key.parent().unwrap()), 0o700);
        assert_eq!(fs::read_to_string(&f.cert).unwrap(), "CHAIN");
        assert_ne!(
            account(&dir, "https://a/dir"),
            account(&dir, "https://b/dir")
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
