//! Server certificate verification as curl does it: rustls' web-PKI verifier against the bundled
//! roots and the `--cacert` certificates, plus the one case it refuses and OpenSSL accepts — a
//! server certificate that is itself one of the `--cacert` certificates although it is marked as
//! a CA. `openssl req -x509` makes every self-signed certificate CA:TRUE, and webpki refuses a CA
//! certificate as a server's (CaUsedAsEndEntity) even when it is trusted exactly as it is.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_name};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

use super::cert_fields::CertFields;

#[derive(Debug)]
pub(crate) struct CacertVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The `--cacert` certificates, DER.
    cacerts: Vec<CertificateDer<'static>>,
}

impl CacertVerifier {
    pub(crate) fn new(webpki: Arc<WebPkiServerVerifier>, cacerts: Vec<CertificateDer<'static>>) -> Self {
        CacertVerifier { webpki, cacerts }
    }
}

impl ServerCertVerifier for CacertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(e)
                if is_ca_used_as_end_entity(&e) && self.cacerts.iter().any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                verify_trusted_server_cert(end_entity, server_name, now)
            }
            other => other,
        }
    }

    // The handshake signatures prove the server holds the certificate's key; they are checked
    // the same way whichever path accepted the certificate.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether webpki refused a certificate only for being a CA's. It checks a server certificate's
/// own dates before its basic constraints and looks for an issuer only after, so this says
/// nothing about the chain.
pub(crate) fn is_ca_used_as_end_entity(e: &Error) -> bool {
    matches!(e, Error::InvalidCertificate(CertificateError::Other(other))
        if matches!(other.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity)))
}

/// What webpki checks of a server's own certificate, for one trusted as it is (so there is no
/// chain to verify): the validity dates, the key usages OpenSSL requires of a TLS server, and the
/// name.
fn verify_trusted_server_cert(
    end_entity: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<ServerCertVerified, Error> {
    let parsed = ParsedCertificate::try_from(end_entity)?;
    let fields = CertFields::parse(end_entity.as_ref()).ok_or(CertificateError::BadEncoding)?;
    let instant = |secs: i64| UnixTime::since_unix_epoch(Duration::from_secs(secs.max(0) as u64));
    let now_secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    if now_secs < fields.not_before {
        return Err(CertificateError::NotValidYetContext { time: now, not_before: instant(fields.not_before) }.into());
    }
    if now_secs > fields.not_after {
        return Err(CertificateError::ExpiredContext { time: now, not_after: instant(fields.not_after) }.into());
    }
    if !fields.allows_tls_server() {
        return Err(CertificateError::InvalidPurpose.into());
    }
    verify_server_name(&parsed, server_name)?;
    Ok(ServerCertVerified::assertion())
}

#[cfg(test)]
mod tests;
