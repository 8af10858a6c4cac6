//! The few fields of an X.509 certificate that the `--cacert` server-certificate check needs and
//! webpki does not expose: the validity dates, key usage and extended key usage. webpki has
//! parsed the certificate before (refusing malformed DER and unknown critical extensions); this
//! reads the same bytes again and gives up on anything it does not expect.

use super::utc;

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BOOLEAN: u8 = 0x01;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version` and `[3] EXPLICIT Extensions` of a TBSCertificate.
const VERSION: u8 = 0xa0;
const EXTENSIONS: u8 = 0xa3;

/// id-ce-keyUsage, 2.5.29.15.
const KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
/// id-ce-extKeyUsage, 2.5.29.37.
const EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
/// id-kp-serverAuth, 1.3.6.1.5.5.7.3.1.
const SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
/// digitalSignature, keyEncipherment and keyAgreement in the first byte of a keyUsage bit string:
/// a TLS server's key must be allowed one of them.
const TLS_KEY_USAGES: u8 = 0x80 | 0x20 | 0x08;

/// What [`CertFields::parse`] reads.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CertFields {
    /// notBefore, seconds since the Unix epoch.
    pub(crate) not_before: i64,
    /// notAfter, seconds since the Unix epoch.
    pub(crate) not_after: i64,
    /// The first byte of the keyUsage bits, when the extension is there.
    key_usage: Option<u8>,
    /// Whether extendedKeyUsage lists serverAuth, when the extension is there.
    server_auth: Option<bool>,
}

impl CertFields {
    /// `None` when `der` is not a certificate laid out as RFC 5280 says.
    pub(crate) fn parse(der: &[u8]) -> Option<CertFields> {
        let cert = Der(der).only(SEQUENCE)?;
        let mut tbs = Der(Der(cert).next(SEQUENCE)?);
        if tbs.peek() == Some(VERSION) {
            tbs.any()?;
        }
        tbs.next(INTEGER)?; // serialNumber
        tbs.next(SEQUENCE)?; // signature
        tbs.next(SEQUENCE)?; // issuer
        let mut validity = Der(tbs.next(SEQUENCE)?);
        let not_before = time(validity.any()?)?;
        let not_after = time(validity.any()?)?;
        tbs.next(SEQUENCE)?; // subject
        tbs.next(SEQUENCE)?; // subjectPublicKeyInfo
        let mut fields = CertFields { not_before, not_after, key_usage: None, server_auth: None };
        while !tbs.is_empty() {
            // issuerUniqueID and subjectUniqueID may come before the extensions.
            let (tag, content) = tbs.any()?;
            if tag == EXTENSIONS {
                fields.read_extensions(Der(content).only(SEQUENCE)?)?;
            }
        }
        Some(fields)
    }

    /// Whether the key usages allow a TLS server, as OpenSSL's check for the "SSL server"
    /// purpose has it (which curl applies to every server certificate): a keyUsage allowing
    /// digitalSignature, keyEncipherment or keyAgreement, and an extendedKeyUsage naming
    /// serverAuth, where those extensions are present.
    pub(crate) fn allows_tls_server(&self) -> bool {
        self.key_usage.is_none_or(|bits| bits & TLS_KEY_USAGES != 0) && self.server_auth != Some(false)
    }

    fn read_extensions(&mut self, extensions: &[u8]) -> Option<()> {
        let mut extensions = Der(extensions);
        while !extensions.is_empty() {
            let mut extension = Der(extensions.next(SEQUENCE)?);
            let id = extension.next(OID)?;
            if extension.peek() == Some(BOOLEAN) {
                extension.any()?; // critical
            }
            let value = extension.next(OCTET_STRING)?;
            if id == KEY_USAGE {
                // The bit string's first byte counts the unused bits; the bits follow.
                let bits = Der(value).only(BIT_STRING)?;
                self.key_usage = Some(bits.get(1).copied().unwrap_or(0));
            } else if id == EXT_KEY_USAGE {
                let mut purposes = Der(Der(value).only(SEQUENCE)?);
                let mut server_auth = false;
                while !purposes.is_empty() {
                    server_auth |= purposes.next(OID)? == SERVER_AUTH;
                }
                self.server_auth = Some(server_auth);
            }
        }
        Some(())
    }
}

/// A UTCTime (`YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`), the
/// only forms RFC 5280 allows in a certificate.
fn time((tag, text): (u8, &[u8])) -> Option<i64> {
    let (year, rest) = match (tag, text.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&text[..2])? as i64;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&text[..4])? as i64, &text[4..]),
        _ => return None,
    };
    if rest[10] != b'Z' {
        return None;
    }
    let field = |i: usize| digits(&rest[i..i + 2]);
    utc::unix_seconds(year, field(0)?, field(2)?, field(4)?, field(6)?, field(8)?)
}

fn digits(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0u32, |n, &b| b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0')))
}

/// A cursor over DER: tag, length, content, with single-byte tags and definite lengths only.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next element's tag and content.
    fn any(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, rest) = self.0.split_first()?;
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (&first, mut rest) = rest.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let (len, after) = rest.split_at(n);
            rest = after;
            len.iter().fold(0usize, |acc, &b| acc << 8 | usize::from(b))
        };
        if rest.len() < len {
            return None;
        }
        let (content, after) = rest.split_at(len);
        self.0 = after;
        Some((tag, content))
    }

    /// The next element's content, if it has this tag.
    fn next(&mut self, tag: u8) -> Option<&'a [u8]> {
        let (got, content) = self.any()?;
        (got == tag).then_some(content)
    }

    /// The content of the one element there is, if it has this tag.
    fn only(mut self, tag: u8) -> Option<&'a [u8]> {
        let content = self.next(tag)?;
        self.is_empty().then_some(content)
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

    use super::super::utc::unix_seconds;
    use super::CertFields;

    fn params() -> CertificateParams {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "localhost");
        params
    }

    fn parse(params: CertificateParams) -> CertFields {
        let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
        CertFields::parse(cert.der()).unwrap()
    }

    #[test]
    fn validity_dates_are_read_in_both_time_forms() {
        let mut p = params();
        // rcgen writes UTCTime up to 2049 and GeneralizedTime from 2050, as RFC 5280 says.
        p.not_before = rcgen::date_time_ymd(2001, 2, 3);
        p.not_after = rcgen::date_time_ymd(2071, 12, 31);
        let f = parse(p);
        assert_eq!(f.not_before, unix_seconds(2001, 2, 3, 0, 0, 0).unwrap());
        assert_eq!(f.not_after, unix_seconds(2071, 12, 31, 0, 0, 0).unwrap());
    }

    #[test]
    fn a_certificate_without_usage_extensions_allows_a_tls_server() {
        let mut p = params();
        p.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        assert!(parse(p).allows_tls_server());
    }

    #[test]
    fn key_usage_must_allow_a_tls_key_when_present() {
        let mut p = params();
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        assert!(!parse(p).allows_tls_server());
        for usage in
            [KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment, KeyUsagePurpose::KeyAgreement]
        {
            let mut p = params();
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign, usage];
            assert!(parse(p).allows_tls_server(), "{usage:?}");
        }
    }

    #[test]
    fn extended_key_usage_must_name_server_auth_when_present() {
        let mut p = params();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        assert!(!parse(p).allows_tls_server());
        let mut p = params();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth, ExtendedKeyUsagePurpose::ServerAuth];
        assert!(parse(p).allows_tls_server());
    }

    #[test]
    fn anything_but_a_whole_certificate_is_refused() {
        let cert = params().self_signed(&KeyPair::generate().unwrap()).unwrap();
        let der = cert.der().to_vec();
        for len in 0..der.len() {
            assert_eq!(CertFields::parse(&der[..len]), None, "cut at {len}");
        }
        let mut longer = der.clone();
        longer.push(0);
        assert_eq!(CertFields::parse(&longer), None);
    }
}
