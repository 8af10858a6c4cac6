//! TLS failures in words for people: what was wrong with the server's certificate and what to do
//! about it (`--cacert FILE`, or `-k` to skip verification), where rustls would print its debug
//! names (`Other(OtherError(CaUsedAsEndEntity))`). The text becomes the run's error sample and,
//! when nothing succeeded, the one line on stderr.

use rustls::{CertificateError, Error};

use super::utc;

const GIVE_CA: &str = "give the CA that signed it with --cacert FILE, or skip verification with -k";

/// One line saying why a TLS session failed.
pub(crate) fn describe(error: &Error) -> String {
    match error {
        Error::InvalidCertificate(e) => certificate(e),
        Error::NoCertificatesPresented => "the server sent no certificate; skip verification with -k".into(),
        Error::AlertReceived(alert) => match words(&format!("{alert:?}")) {
            Some(alert) => format!("the server sent the TLS alert \"{alert}\""),
            None => "the server sent a TLS alert".into(),
        },
        Error::PeerIncompatible(why) => match words(&format!("{why:?}")) {
            Some(why) => format!("the server and volley have no TLS parameters in common ({why})"),
            None => "the server and volley have no TLS parameters in common".into(),
        },
        Error::PeerMisbehaved(why) => match words(&format!("{why:?}")) {
            Some(why) => format!("the server broke the TLS protocol ({why})"),
            None => "the server broke the TLS protocol".into(),
        },
        other => other.to_string(),
    }
}

fn certificate(e: &CertificateError) -> String {
    use CertificateError::*;
    match e {
        UnknownIssuer => "the server's certificate is not signed by a CA volley trusts (unknown issuer): give that \
                          CA, or a self-signed certificate itself, with --cacert FILE, or skip verification with -k"
            .into(),
        // Also what rustls reports when the server's handshake signature does not match the key
        // in its certificate.
        BadSignature => "a signature does not verify (bad signature): either the server's certificate was not \
                         signed by the CA it names (give the CA that did with --cacert FILE), or the server does \
                         not hold the key of its certificate"
            .into(),
        NotValidForName => {
            "the server's certificate is not valid for the host name in the URL: use one of its names in the URL, \
             or skip verification with -k"
                .into()
        }
        NotValidForNameContext { expected, presented } => {
            let names = host_names(presented);
            let names = if names.is_empty() { "no host name".to_string() } else { list(&names) };
            format!(
                "the server's certificate is not valid for {} (it names {names}): use one of its names in the URL, \
                 or skip verification with -k",
                printable(&expected.to_str())
            )
        }
        Expired => "the server's certificate has expired: renew it, or skip verification with -k".into(),
        ExpiredContext { not_after, .. } => format!(
            "the server's certificate expired on {}: renew it, or skip verification with -k",
            utc::format(not_after.as_secs())
        ),
        NotValidYet => {
            "the server's certificate is not valid yet: check this machine's clock, or skip verification with -k".into()
        }
        NotValidYetContext { not_before, .. } => format!(
            "the server's certificate is not valid until {}: check this machine's clock, or skip verification with -k",
            utc::format(not_before.as_secs())
        ),
        InvalidPurpose | InvalidPurposeContext { .. } => {
            "the server's certificate is not for a TLS server (its key usage or extended key usage excludes it): \
             skip verification with -k"
                .into()
        }
        Revoked => "the server's certificate has been revoked: skip verification with -k".into(),
        BadEncoding => "the server's certificate is malformed: skip verification with -k".into(),
        UnhandledCriticalExtension => {
            "the server's certificate has a critical extension volley does not know: skip verification with -k".into()
        }
        UnsupportedSignatureAlgorithmContext { .. } | UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "the server's certificate is signed with an algorithm volley does not support: skip verification with -k"
                .into()
        }
        Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(webpki::Error::CaUsedAsEndEntity) => {
                "the server's certificate is a CA certificate (CA:TRUE), which is accepted only when it is itself \
                 one of the --cacert certificates: give that certificate with --cacert FILE, or skip verification \
                 with -k"
                    .into()
            }
            Some(webpki::Error::EndEntityUsedAsCa) => format!(
                "the server's certificate chain has a certificate signing another that is not a CA (CA:FALSE): {GIVE_CA}"
            ),
            Some(e) => refused(&format!("{e:?}")),
            None => refused(""),
        },
        // The deprecated unit variants and those a later rustls adds.
        e => refused(&format!("{e:?}")),
    }
}

fn refused(debug_name: &str) -> String {
    match words(debug_name) {
        Some(why) => format!("the server's certificate was refused ({why}): {GIVE_CA}"),
        None => format!("the server's certificate was refused: {GIVE_CA}"),
    }
}

/// `CaUsedAsEndEntity` as `ca used as end entity`: the name of a unit variant as words; `None`
/// for anything else (a variant carrying data prints as Rust, not as words).
fn words(debug_name: &str) -> Option<String> {
    if debug_name.is_empty() || !debug_name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let mut out = String::new();
    for (i, c) in debug_name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    Some(out)
}

/// The DNS names and IP addresses among the names webpki found in the certificate, which it
/// gives as `DnsName("localhost")` and `IpAddress(127.0.0.1)`; other kinds of name cannot match
/// a URL's host.
fn host_names(presented: &[String]) -> Vec<&str> {
    presented
        .iter()
        .filter_map(|name| {
            let dns = name.strip_prefix("DnsName(\"").and_then(|n| n.strip_suffix("\")"));
            dns.or_else(|| name.strip_prefix("IpAddress(").and_then(|n| n.strip_suffix(')')))
        })
        .collect()
}

/// Names from the server's certificate, bounded and without control characters, so that the
/// line stays one short line whatever the certificate holds.
fn list(names: &[&str]) -> String {
    const SHOWN: usize = 4;
    let mut shown: Vec<String> = names.iter().take(SHOWN).map(|n| printable(n)).collect();
    if names.len() > SHOWN {
        shown.push(format!("{} more", names.len() - SHOWN));
    }
    match shown.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn printable(name: &str) -> String {
    const LONGEST: usize = 80;
    let mut out: String = name.chars().take(LONGEST).map(|c| if c.is_ascii_graphic() { c } else { '?' }).collect();
    if name.chars().count() > LONGEST {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use rustls::pki_types::{ServerName, UnixTime};
    use rustls::{AlertDescription, CertificateError, Error, OtherError};

    use super::describe;

    fn cert(e: CertificateError) -> String {
        describe(&Error::InvalidCertificate(e))
    }

    fn at(secs: u64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(secs))
    }

    /// A sentence for people: no Rust names or punctuation from a debug print.
    fn assert_plain(text: &str) {
        for rust in ["Error", "Context", "Other(", "{", "\"", "::"] {
            assert!(!text.contains(rust), "{rust} in: {text}");
        }
        assert!(text.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{text:?}");
    }

    #[test]
    fn an_unknown_issuer_says_to_give_the_ca_or_skip_verification() {
        let text = cert(CertificateError::UnknownIssuer);
        assert!(text.starts_with("the server's certificate is not signed by a CA volley trusts"), "{text}");
        assert!(text.contains("--cacert FILE") && text.contains("-k"), "{text}");
        assert_plain(&text);
    }

    #[test]
    fn a_name_mismatch_names_the_host_asked_for_and_the_certificates_names() {
        let text = cert(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("example.com").unwrap(),
            presented: vec![
                "DnsName(\"localhost\")".into(),
                "IpAddress(127.0.0.1)".into(),
                "IpAddress(::1)".into(),
                "DirectoryName".into(),
            ],
        });
        assert_eq!(
            text,
            "the server's certificate is not valid for example.com (it names localhost, 127.0.0.1 and ::1): use one \
             of its names in the URL, or skip verification with -k"
        );
        let text = cert(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("127.0.0.2").unwrap(),
            presented: vec![],
        });
        assert!(text.contains("not valid for 127.0.0.2 (it names no host name)"), "{text}");
    }

    #[test]
    fn names_from_a_hostile_certificate_stay_one_short_line() {
        let mut presented =
            vec!["DnsName(\"\u{1b}[2Jevil\nline\")".to_string(), format!("DnsName(\"{}\")", "x".repeat(10_000))];
        presented.extend((0..100).map(|i| format!("DnsName(\"host{i}\")")));
        let text = cert(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("example.com").unwrap(),
            presented,
        });
        assert!(text.contains("?[2Jevil?line"), "{text}");
        assert!(text.contains("and 98 more"), "{text}");
        assert!(text.len() < 400, "{} bytes", text.len());
        assert_plain(&text.replace('\'', ""));
    }

    #[test]
    fn an_expired_certificate_says_when_it_expired() {
        let text = cert(CertificateError::ExpiredContext { time: at(1_700_000_000), not_after: at(1_625_011_200) });
        assert_eq!(
            text,
            "the server's certificate expired on 2021-06-30 00:00:00 UTC: renew it, or skip verification with -k"
        );
        assert_plain(&cert(CertificateError::Expired));
    }

    #[test]
    fn a_certificate_not_valid_yet_says_from_when_and_to_check_the_clock() {
        let text =
            cert(CertificateError::NotValidYetContext { time: at(1_700_000_000), not_before: at(3_786_912_000) });
        assert_eq!(
            text,
            "the server's certificate is not valid until 2090-01-01 00:00:00 UTC: check this machine's clock, or \
             skip verification with -k"
        );
        assert_plain(&cert(CertificateError::NotValidYet));
    }

    #[test]
    fn a_ca_certificate_used_as_the_servers_says_that_only_the_cacert_certificate_itself_is_accepted() {
        let text = cert(CertificateError::Other(OtherError(Arc::new(webpki::Error::CaUsedAsEndEntity))));
        assert!(text.starts_with("the server's certificate is a CA certificate (CA:TRUE)"), "{text}");
        assert!(text.contains("--cacert FILE") && text.contains("-k"), "{text}");
        assert_plain(&text);
    }

    #[test]
    fn other_refusals_read_as_words_too() {
        for e in [
            CertificateError::BadSignature,
            CertificateError::InvalidPurpose,
            CertificateError::Revoked,
            CertificateError::BadEncoding,
            CertificateError::UnknownRevocationStatus,
            CertificateError::Other(OtherError(Arc::new(webpki::Error::PathLenConstraintViolated))),
            CertificateError::Other(OtherError(Arc::new(webpki::Error::EndEntityUsedAsCa))),
        ] {
            let text = cert(e);
            assert!(text.starts_with("the server's certificate") || text.starts_with("a signature"), "{text}");
            assert!(text.contains("-k") || text.contains("--cacert FILE"), "{text}");
            assert_plain(&text);
        }
        let text = cert(CertificateError::Other(OtherError(Arc::new(webpki::Error::PathLenConstraintViolated))));
        assert!(text.contains("(path len constraint violated)"), "{text}");
        let text = describe(&Error::AlertReceived(AlertDescription::HandshakeFailure));
        assert_eq!(text, "the server sent the TLS alert \"handshake failure\"");
    }
}
