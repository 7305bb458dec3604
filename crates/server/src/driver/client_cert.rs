//! Who a client is by its certificate (mTLS): the identity handlers read
//! ([`crate::Request::client_cert`]) and the `X-Forwarded-Client-Cert` element upstreams get.
//! Owns only the identity and its rendering; reading one from a verified leaf needs the `tls`
//! feature (x509-parser, SHA-256), and without it no request carries one.
#![forbid(unsafe_code)]

use std::net::IpAddr;

/// A client certificate the handshake verified against the listener's CA bundle: who the
/// client is, for handlers ([`crate::Request::client_cert`]) and upstreams (the
/// `X-Forwarded-Client-Cert` field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    /// The subject's distinguished name, RFC 4514 style (`CN=alice, O=Example`).
    pub subject: String,
    /// Subject alternative names by kind.
    pub dns: Vec<String>,
    pub uris: Vec<String>,
    pub emails: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// SHA-256 of the leaf certificate's DER, lowercase hex.
    pub sha256: String,
    /// The `X-Forwarded-Client-Cert` element (Envoy's format), made once.
    pub(crate) xfcc: String,
}

#[cfg(feature = "tls")]
impl ClientCert {
    /// The identity in a verified leaf certificate (`None` when it does not parse, which a
    /// certificate WebPKI accepted does).
    pub fn from_der(der: &[u8]) -> Option<ClientCert> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject().to_string();
        let (mut dns, mut uris, mut emails, mut ips) = (vec![], vec![], vec![], vec![]);
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(n) => dns.push(n.to_string()),
                    GeneralName::URI(u) => uris.push(u.to_string()),
                    GeneralName::RFC822Name(e) => emails.push(e.to_string()),
                    GeneralName::IPAddress(b) => match b.len() {
                        4 => ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).ok()?)),
                        16 => ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).ok()?)),
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
        let sha256: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let mut c = ClientCert {
            subject,
            dns,
            uris,
            emails,
            ips,
            sha256,
            xfcc: String::new(),
        };
        c.xfcc = c.xfcc_element();
        Some(c)
    }

    /// Envoy's `x-forwarded-client-cert` element: `Hash=…;Subject="…";URI=…;DNS=…`, a
    /// value holding `,`, `;`, `=` or `"` quoted (with `"` and `\` escaped).
    fn xfcc_element(&self) -> String {
        fn value(out: &mut String, v: &str, always_quote: bool) {
            if always_quote || v.contains([',', ';', '=', '"', '\\']) {
                out.push('"');
                for c in v.chars() {
                    if c == '"' || c == '\\' {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('"');
            } else {
                out.push_str(v);
            }
        }
        // A field value cannot carry control characters: a name holding one is left out.
        let clean = |v: &str| !v.chars().any(|c| c.is_control());
        let mut out = format!("Hash={}", self.sha256);
        if clean(&self.subject) {
            out.push_str(";Subject=");
            value(&mut out, &self.subject, true);
        }
        for u in self.uris.iter().filter(|u| clean(u)) {
            out.push_str(";URI=");
            value(&mut out, u, false);
        }
        for d in self.dns.iter().filter(|d| clean(d)) {
            out.push_str(";DNS=");
            value(&mut out, d, false);
        }
        out
    }
}
