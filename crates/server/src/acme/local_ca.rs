//! The local CA (caddy's `tls internal`): certificates for names no public CA will issue
//! (`localhost`, `*.internal`, an IP address), signed by a root made once and kept in the
//! storage, whose PEM (`STORAGE/internal/root.pem`) an operator adds to the trust stores of
//! the machines that should trust them.
//!
//! Owns the root and the signing; leaves live [`LOCAL_LIFETIME`](super::schedule::LOCAL_LIFETIME)
//! and are renewed by the same schedule as ACME's. Nothing leaves the machine.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::store;

/// How long the root is valid.
const ROOT_LIFETIME: Duration = Duration::from_secs(10 * 365 * 86_400);
/// The root's subject.
const ROOT_NAME: &str = "linerate local CA";

fn root_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, ROOT_NAME);
    dn.push(DnType::OrganizationName, "linerate");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

/// The root's key, made (with its certificate) on first use.
fn root_key(storage: &Path) -> Result<KeyPair, String> {
    let (cert_path, key_path) = store::local_root(storage);
    if let (Ok(_), Ok(key)) = (
        std::fs::metadata(&cert_path),
        std::fs::read_to_string(&key_path),
    ) {
        return KeyPair::from_pem(&key).map_err(|e| format!("{}: {e}", key_path.display()));
    }
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let mut p = root_params();
    let now = SystemTime::now();
    p.not_before = now.into();
    p.not_after = (now + ROOT_LIFETIME).into();
    let cert = p.self_signed(&key).map_err(|e| e.to_string())?;
    store::write_file(&key_path, key.serialize_pem().as_bytes(), 0o600)
        .map_err(|e| format!("{}: {e}", key_path.display()))?;
    store::write_file(&cert_path, cert.pem().as_bytes(), 0o644)
        .map_err(|e| format!("{}: {e}", cert_path.display()))?;
    tracing::info!(
        root = %cert_path.display(),
        "local CA made; add its root to the trust stores that should accept its certificates"
    );
    Ok(key)
}

/// A certificate for `names` signed by the local root, valid for `lifetime` from now:
/// (chain PEM, key PEM).
pub fn issue(
    storage: &Path,
    names: &[String],
    lifetime: Duration,
) -> Result<(String, String), String> {
    let root = root_key(storage)?;
    let issuer = Issuer::new(root_params(), root);
    let mut p = CertificateParams::default();
    p.subject_alt_names = names
        .iter()
        .map(|n| match n.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => n
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e| format!("{n}: {e}")),
        })
        .collect::<Result<_, _>>()?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names.first().map_or("", String::as_str));
    p.distinguished_name = dn;
    p.use_authority_key_identifier_extension = true;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // A minute back, for clocks a little behind.
    let now = SystemTime::now();
    p.not_before = (now - Duration::from_secs(60)).into();
    p.not_after = (now + lifetime).into();
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = p.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    #[test]
    fn leaves_verify_against_the_kept_root_for_their_names_only() {
        let dir = std::env::temp_dir().join(format!("linerate-localca-{}", std::process::id()));
        let names = vec!["app.internal".to_string(), "127.0.0.1".to_string()];
        let (chain, _key) = issue(&dir, &names, Duration::from_secs(3600)).unwrap();
        // A second leaf comes from the same root.
        let (chain2, _) = issue(&dir, &names, Duration::from_secs(3600)).unwrap();
        let root_pem = std::fs::read(store::local_root(&dir).0).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(&root_pem).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder(roots.into())
            .build()
            .unwrap();
        for pem in [&chain, &chain2] {
            let leaf = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            for (name, ok) in [
                ("app.internal", true),
                ("127.0.0.1", true),
                ("other.internal", false),
            ] {
                let got = verifier.verify_server_cert(
                    &leaf,
                    &[],
                    &ServerName::try_from(name).unwrap(),
                    &[],
                    UnixTime::now(),
                );
                assert_eq!(got.is_ok(), ok, "{name}: {got:?}");
            }
        }
        let l = store::leaf(chain.as_bytes()).unwrap();
        assert!(store::usable(&l, &names, SystemTime::now()).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
