//! One certificate from the ACME CA (RFC 8555) through instant-acme: the account (made
//! once, its credentials kept 0600), an order for a site's names, each authorization's
//! HTTP-01 or TLS-ALPN-01 challenge answered through [`Challenges`] (or DNS-01's TXT record
//! put in the zone through [`super::dns::update`]), a fresh ECDSA P-256 key
//! and its CSR, and the chain the CA issues; and the CA's renewal information (ARI, RFC
//! 9773) for a certificate it issued, whose identifier a replacing order names.
//!
//! Owns the protocol's order of steps; the wire format is instant-acme's. Runs on the ACME
//! thread's own tokio runtime, never on a worker.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, CertificateIdentifier, ChallengeType,
    ExternalAccountKey, Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::challenges::{Answer, Challenges, SharedAnswers};
use super::dns;
use super::store;
use crate::config::{AcmeChallenge, AcmeConfig};

/// How long the CA may take to validate an order's challenges, and to issue once asked.
const ORDER_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a certificate could not be had this time (the manager retries with backoff).
#[derive(Debug)]
pub struct IssueError(pub String, Option<String>);

impl IssueError {
    /// A failure of `what`, not the CA's answer.
    pub fn other(what: impl std::fmt::Display) -> IssueError {
        IssueError(what.to_string(), None)
    }

    /// The CA answered that the account does not exist (RFC 8555 §7.3.1).
    pub fn account_gone(&self) -> bool {
        self.1.as_deref() == Some("urn:ietf:params:acme:error:accountDoesNotExist")
    }
}

impl std::fmt::Display for IssueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<instant_acme::Error> for IssueError {
    fn from(e: instant_acme::Error) -> IssueError {
        let kind = match &e {
            instant_acme::Error::Api(p) => p.r#type.clone(),
            _ => None,
        };
        IssueError(format!("ACME: {e}"), kind)
    }
}

fn err(what: impl std::fmt::Display) -> IssueError {
    IssueError(what.to_string(), None)
}

/// The account at `config.directory`: the stored one, or a new one (terms agreed, the
/// e-mail as contact, the EAB when given), stored.
pub async fn account(config: &AcmeConfig) -> Result<Account, IssueError> {
    let path = store::account(&config.storage, &config.directory);
    if let Ok(json) = std::fs::read(&path) {
        return account_from(config, &json, &path.display().to_string()).await;
    }
    let (account, json) = new_account(config).await?;
    store::write_file(&path, &json, 0o600).map_err(|e| err(format!("{}: {e}", path.display())))?;
    Ok(account)
}

fn builder(config: &AcmeConfig) -> Result<instant_acme::AccountBuilder, IssueError> {
    Ok(match &config.ca_roots {
        Some(roots) => Account::builder_with_root(roots)?,
        None => Account::builder()?,
    })
}

/// The account whose stored credentials (JSON) are `json`; `what` names where they were.
pub async fn account_from(
    config: &AcmeConfig,
    json: &[u8],
    what: &str,
) -> Result<Account, IssueError> {
    let credentials: AccountCredentials =
        serde_json::from_slice(json).map_err(|e| err(format!("{what}: {e}")))?;
    Ok(builder(config)?.from_credentials(credentials).await?)
}

/// A new account at `config.directory` (terms agreed, the e-mail as contact, the EAB when
/// given), and its credentials (JSON) for the caller to store.
pub async fn new_account(config: &AcmeConfig) -> Result<(Account, Vec<u8>), IssueError> {
    let contact = config.email.as_ref().map(|e| format!("mailto:{e}"));
    let contacts: Vec<&str> = contact.iter().map(String::as_str).collect();
    let eab = config
        .eab
        .as_ref()
        .map(|e| ExternalAccountKey::new(e.kid.clone(), &e.hmac_key));
    let (account, credentials) = builder(config)?
        .create(
            &NewAccount {
                contact: &contacts,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            config.directory.clone(),
            eab.as_ref(),
        )
        .await?;
    let json = serde_json::to_vec(&credentials).map_err(err)?;
    tracing::info!(directory = %config.directory, account = %account.id(), "ACME account made");
    Ok((account, json))
}

/// The CA's suggested renewal window for a certificate it issued (RFC 9773 §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenewalWindow {
    pub start: SystemTime,
    pub end: SystemTime,
    /// When the CA asks to be asked again (its Retry-After, from now).
    pub retry_after: Duration,
    /// The CA's page saying why the window is what it is, when it gives one.
    pub explanation: Option<String>,
}

/// The CA's renewal window for `leaf` (DER); `None` when the CA publishes no renewal
/// information, or the certificate has no identifier (no authority key identifier).
pub async fn renewal_window(
    account: &Account,
    leaf: &[u8],
) -> Result<Option<RenewalWindow>, IssueError> {
    let der = CertificateDer::from(leaf);
    let Ok(id) = CertificateIdentifier::try_from(&der) else {
        return Ok(None);
    };
    let (info, retry_after) = match account.renewal_info(&id).await {
        Err(instant_acme::Error::Unsupported(_)) => return Ok(None),
        got => got?,
    };
    let at = |t: i64| {
        UNIX_EPOCH
            + u64::try_from(t)
                .map(Duration::from_secs)
                .unwrap_or(Duration::ZERO)
    };
    Ok(Some(RenewalWindow {
        start: at(info.suggested_window.start.unix_timestamp()),
        end: at(info.suggested_window.end.unix_timestamp()),
        retry_after,
        explanation: info.explanation_url,
    }))
}

/// A certificate for `names`: (chain PEM, key PEM). `replaces` is the certificate (DER) it
/// takes over from, named in the order where the CA publishes renewal information (RFC 9773
/// §5: some CAs exempt such orders from rate limits); an order the CA refuses for that
/// field is made again without it. The challenge is `config`'s (its `dns` for DNS-01).
pub async fn certificate(
    account: &Account,
    names: &[String],
    config: &AcmeConfig,
    challenges: &Challenges,
    shared: Option<&dyn SharedAnswers>,
    replaces: Option<&[u8]>,
) -> Result<(String, String), IssueError> {
    let identifiers: Vec<Identifier> = names.iter().map(|n| Identifier::Dns(n.clone())).collect();
    let replaced = replaces.map(CertificateDer::from);
    let replaced = replaced
        .as_ref()
        .and_then(|der| CertificateIdentifier::try_from(der).ok());
    let mut order = match replaced {
        Some(id) => match account
            .new_order(&NewOrder::new(&identifiers).replaces(id))
            .await
        {
            Ok(order) => order,
            Err(e) => {
                tracing::debug!(
                    "ACME: an order naming the certificate it replaces: {e}; again without"
                );
                account.new_order(&NewOrder::new(&identifiers)).await?
            }
        },
        None => account.new_order(&NewOrder::new(&identifiers)).await?,
    };
    // What this order put in the table, taken out however it ends.
    let mut tokens = Vec::new();
    let mut answered = Vec::new();
    // What this order put in the fleet's storage, withdrawn however it ends.
    let mut published: Vec<Answer> = Vec::new();
    let kind = config.challenge;
    // DNS-01's TXT records this order put in the zone: (validated name, value, whether the
    // DNS server answered their addition).
    let mut records: Vec<(String, String, bool)> = Vec::new();
    let result = async {
        let mut authorizations = order.authorizations();
        while let Some(authz) = authorizations.next().await {
            let mut authz = authz?;
            match authz.status {
                AuthorizationStatus::Valid => continue,
                AuthorizationStatus::Pending => {}
                other => return Err(err(format!("authorization is {other:?}"))),
            }
            let name = authz.identifier().to_string();
            let wanted = match kind {
                AcmeChallenge::Http01 => ChallengeType::Http01,
                AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
                AcmeChallenge::Dns01 => ChallengeType::Dns01,
            };
            let mut challenge = authz
                .challenge(wanted.clone())
                .ok_or_else(|| err(format!("the CA offers no {wanted:?} challenge for {name}")))?;
            let key_auth = challenge.key_authorization();
            let answer = match kind {
                AcmeChallenge::Http01 => {
                    challenges.put_http01(&challenge.token, key_auth.as_str());
                    tokens.push(challenge.token.clone());
                    Some(Answer::Http01 {
                        token: challenge.token.clone(),
                        key_authorization: key_auth.as_str().to_string(),
                    })
                }
                AcmeChallenge::TlsAlpn01 => {
                    let digest = key_auth.digest().as_ref().to_vec();
                    let cert = tls_alpn_cert(&name, &digest)?;
                    challenges.put_tls_alpn01(&name, Arc::new(cert));
                    answered.push(name.clone());
                    Some(Answer::TlsAlpn01 {
                        name: name.clone(),
                        digest,
                    })
                }
                // The zone is the fleet's already: any node's record is every node's.
                AcmeChallenge::Dns01 => {
                    let dns = config
                        .dns
                        .as_ref()
                        .ok_or_else(|| err("dns-01 without [acme] dns"))?;
                    let value = key_auth.dns_value();
                    // Kept before the update: a record whose answer was lost is deleted too
                    // (quietly: its addition's failure was the line worth reading).
                    records.push((name.clone(), value.clone(), false));
                    dns::update::publish(dns, &name, &value)
                        .await
                        .map_err(|e| err(format!("DNS-01 for {name}: {e}")))?;
                    if let Some(r) = records.last_mut() {
                        r.2 = true;
                    }
                    None
                }
            };
            // In a fleet the validation may land on any node: every node has the answer
            // before the CA is told to look (`share` returns once they can).
            if let (Some(shared), Some(answer)) = (shared, answer) {
                shared.share(&answer).map_err(err)?;
                published.push(answer);
            }
            challenge.set_ready().await?;
        }
        let polling = RetryPolicy::new()
            .initial_delay(Duration::from_millis(250))
            .timeout(ORDER_TIMEOUT);
        let status = order.poll_ready(&polling).await?;
        if status != OrderStatus::Ready {
            return Err(err(format!(
                "the order is {status:?}{}",
                order
                    .state()
                    .error
                    .as_ref()
                    .map(|p| format!(": {p}"))
                    .unwrap_or_default()
            )));
        }
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let csr = rcgen::CertificateParams::new(names.to_vec())
            .map_err(err)?
            .serialize_request(&key)
            .map_err(err)?;
        order.finalize_csr(csr.der()).await?;
        let chain = order.poll_certificate(&polling).await?;
        Ok((chain, key.serialize_pem()))
    }
    .await;
    challenges.remove(&tokens, &answered);
    if let Some(shared) = shared {
        for a in &published {
            shared.withdraw(a);
        }
    }
    if let Some(dns) = &config.dns {
        for (name, value, added) in &records {
            match dns::update::withdraw(dns, name, value).await {
                Err(e) if *added => {
                    tracing::warn!(%name, "DNS-01: the TXT record could not be deleted: {e}")
                }
                Err(e) => tracing::debug!(%name, "DNS-01: no TXT record to delete: {e}"),
                Ok(()) => {}
            }
        }
    }
    result
}

/// The self-signed certificate a TLS-ALPN-01 validation expects for `name`: the name as its
/// only SAN and the key authorization's SHA-256 in the critical acmeIdentifier extension
/// (RFC 8737 §3).
pub(crate) fn tls_alpn_cert(name: &str, digest: &[u8]) -> Result<CertifiedKey, IssueError> {
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).map_err(err)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    // Not `CertifiedKey::from_der`: its key check parses the certificate with webpki, which
    // refuses the critical acmeIdentifier extension (the key is this one by construction).
    let signer = rustls::crypto::aws_lc_rs::default_provider()
        .key_provider
        .load_private_key(PrivateKeyDer::Pkcs8(key.serialize_der().into()))
        .map_err(err)?;
    Ok(CertifiedKey::new(vec![cert.der().clone()], signer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_alpn_certificate_carries_the_digest_in_a_critical_extension() {
        let digest = [7u8; 32];
        let key = tls_alpn_cert("a.test", &digest).expect("built despite its critical extension");
        let (_, cert) = x509_parser::parse_x509_certificate(&key.cert[0]).unwrap();
        // id-pe-acmeIdentifier, 1.3.6.1.5.5.7.1.31 (RFC 8737 §6.1).
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier");
        assert!(ext.critical);
        // An OCTET STRING of the 32-byte digest.
        assert_eq!(&ext.value[2..], &digest);
        let names = crate::acme::store::leaf(
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &key.cert[0])
            )
            .as_bytes(),
        )
        .unwrap()
        .names;
        assert_eq!(names, ["a.test"]);
    }
}
