//! The engine's client configuration against a rustls server in memory: whole handshakes, so
//! that the handshake signatures are checked as on the wire, and each refusal read as the
//! sentence the run would report.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, ServerConnection};

use crate::plan::TlsOptions;
use crate::tls::{TlsSession, client_config, describe};

/// A certificate and the key it was made for.
struct Made {
    der: CertificateDer<'static>,
    pem: String,
    key: KeyPair,
}

/// What `openssl req -x509 -subj /CN=localhost -addext subjectAltName=...` makes: self-signed and
/// CA:TRUE, with no key usage extensions.
fn openssl_style_params() -> CertificateParams {
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
}

fn self_signed(params: CertificateParams) -> Made {
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Made { der: cert.der().clone(), pem: cert.pem(), key }
}

fn verifying(cacert_pem: &str) -> TlsOptions {
    TlsOptions { insecure: false, extra_ca_pem: cacert_pem.as_bytes().to_vec() }
}

/// Serves `chain`, signing the handshake with `key` (which need not be the certificate's).
#[derive(Debug)]
struct Serve(Arc<CertifiedKey>);

impl ResolvesServerCert for Serve {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

fn server(chain: Vec<CertificateDer<'static>>, key: &KeyPair) -> Arc<ServerConfig> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signer = rustls::crypto::ring::sign::any_supported_type(&key).unwrap();
    // CertifiedKey::new does not compare the certificate's key with the signer's, so a server
    // can be made to sign with a key that is not its certificate's.
    let certified = Arc::new(CertifiedKey::new(chain, signer));
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Serve(certified)));
    Arc::new(config)
}

/// Runs a handshake between the engine's TLS session and `server`; the client's verdict, as the
/// sentence a run would report.
fn handshake(options: &TlsOptions, server: Arc<ServerConfig>, name: &str) -> Result<(), String> {
    let config = client_config(options, &[]).unwrap();
    let name = ServerName::try_from(name.to_string()).unwrap();
    let mut client = TlsSession::new(&config, &name).unwrap();
    let mut server = ServerConnection::new(server).unwrap();
    let mut plain = Vec::new();
    for _ in 0..10 {
        let mut wire = Vec::new();
        client.take_ciphertext(&mut wire);
        let mut from_client = &wire[..];
        while !from_client.is_empty() {
            server.read_tls(&mut from_client).unwrap();
            server.process_new_packets().map_err(|e| format!("the server failed: {e}"))?;
        }
        let mut wire = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut wire).unwrap();
        }
        client.receive(&mut wire, &mut plain).map_err(|e| describe(&e))?;
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
    }
    panic!("the handshake did not finish")
}

#[test]
fn a_self_signed_ca_certificate_given_with_cacert_is_accepted_as_the_servers_own() {
    let cert = self_signed(openssl_style_params());
    let server = server(vec![cert.der.clone()], &cert.key);
    assert_eq!(handshake(&verifying(&cert.pem), server.clone(), "localhost"), Ok(()));
    assert_eq!(handshake(&verifying(&cert.pem), server, "127.0.0.1"), Ok(()));
}

#[test]
fn a_self_signed_ca_certificate_without_cacert_is_refused_with_what_to_do() {
    let cert = self_signed(openssl_style_params());
    let err = handshake(&TlsOptions::default(), server(vec![cert.der.clone()], &cert.key), "localhost").unwrap_err();
    assert!(err.contains("is a CA certificate (CA:TRUE)"), "{err}");
    assert!(err.contains("--cacert FILE") && err.contains("-k"), "{err}");
}

#[test]
fn a_trusted_self_signed_certificate_is_still_checked_against_the_name() {
    let cert = self_signed(openssl_style_params());
    let err = handshake(&verifying(&cert.pem), server(vec![cert.der.clone()], &cert.key), "example.com").unwrap_err();
    assert_eq!(
        err,
        "the server's certificate is not valid for example.com (it names localhost and 127.0.0.1): use one of its \
         names in the URL, or skip verification with -k"
    );
}

#[test]
fn a_trusted_self_signed_certificate_is_still_checked_for_expiry() {
    let mut params = openssl_style_params();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 6, 30);
    let cert = self_signed(params);
    let err = handshake(&verifying(&cert.pem), server(vec![cert.der.clone()], &cert.key), "localhost").unwrap_err();
    assert_eq!(
        err,
        "the server's certificate expired on 2021-06-30 00:00:00 UTC: renew it, or skip verification with -k"
    );
}

#[test]
fn a_trusted_self_signed_certificate_is_still_checked_for_its_start_date() {
    let mut params = openssl_style_params();
    params.not_before = rcgen::date_time_ymd(2090, 1, 1);
    params.not_after = rcgen::date_time_ymd(2091, 1, 1);
    let cert = self_signed(params);
    let err = handshake(&verifying(&cert.pem), server(vec![cert.der.clone()], &cert.key), "localhost").unwrap_err();
    assert_eq!(
        err,
        "the server's certificate is not valid until 2090-01-01 00:00:00 UTC: check this machine's clock, or skip \
         verification with -k"
    );
}

#[test]
fn a_trusted_ca_certificate_whose_key_usages_exclude_a_tls_server_is_refused_as_curl_does() {
    let mut only_signs_certificates = openssl_style_params();
    only_signs_certificates.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let mut only_for_clients = openssl_style_params();
    only_for_clients.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    for params in [only_signs_certificates, only_for_clients] {
        let cert = self_signed(params);
        let err = handshake(&verifying(&cert.pem), server(vec![cert.der.clone()], &cert.key), "localhost").unwrap_err();
        assert!(err.starts_with("the server's certificate is not for a TLS server"), "{err}");
    }
}

#[test]
fn a_certificate_with_the_same_subject_but_another_key_is_refused() {
    let trusted = self_signed(openssl_style_params());
    // Self-signed by another key, CA:TRUE as openssl makes it: not the --cacert certificate.
    let impostor = self_signed(openssl_style_params());
    let err = handshake(&verifying(&trusted.pem), server(vec![impostor.der.clone()], &impostor.key), "localhost")
        .unwrap_err();
    assert!(err.contains("is a CA certificate (CA:TRUE)"), "{err}");

    // A server certificate naming the trusted one as its issuer, signed by another key.
    let issuer = Issuer::new(openssl_style_params(), KeyPair::generate().unwrap());
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap().signed_by(&key, &issuer).unwrap();
    let err = handshake(&verifying(&trusted.pem), server(vec![leaf.der().clone()], &key), "localhost").unwrap_err();
    assert!(err.contains("(bad signature)"), "{err}");
}

#[test]
fn a_server_presenting_the_trusted_certificate_without_its_key_is_refused() {
    let trusted = self_signed(openssl_style_params());
    let other_key = KeyPair::generate().unwrap();
    let err =
        handshake(&verifying(&trusted.pem), server(vec![trusted.der.clone()], &other_key), "localhost").unwrap_err();
    assert!(err.contains("(bad signature)"), "{err}");
}

#[test]
fn a_server_certificate_signed_by_a_cacert_ca_is_verified_through_its_chain() {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.distinguished_name.push(DnType::CommonName, "test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap().signed_by(&key, &ca).unwrap();
    let server = server(vec![leaf.der().clone()], &key);
    assert_eq!(handshake(&verifying(&ca.pem()), server.clone(), "localhost"), Ok(()));

    let err = handshake(&TlsOptions::default(), server, "localhost").unwrap_err();
    assert!(err.contains("(unknown issuer)"), "{err}");
}

#[test]
fn only_a_cacert_certificate_itself_is_accepted_as_a_ca_certificate_serving() {
    // A CA:TRUE server certificate that a --cacert CA signed is not itself a --cacert
    // certificate: webpki's refusal stands.
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.distinguished_name.push(DnType::CommonName, "test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let presented = openssl_style_params().signed_by(&key, &ca).unwrap();
    let err = handshake(&verifying(&ca.pem()), server(vec![presented.der().clone()], &key), "localhost").unwrap_err();
    assert!(err.contains("is a CA certificate (CA:TRUE)"), "{err}");
}

#[test]
fn a_trusted_certificates_dates_are_checked_without_relying_on_the_order_of_webpkis_checks() {
    // webpki refuses an expired certificate before it looks at CA:TRUE, so the dates are checked
    // again here on their own: that order is webpki's to change.
    let mut params = openssl_style_params();
    params.not_before = rcgen::date_time_ymd(2030, 1, 1);
    params.not_after = rcgen::date_time_ymd(2031, 1, 1);
    let cert = self_signed(params);
    let name = ServerName::try_from("localhost").unwrap();
    let check = |secs: u64| {
        super::verify_trusted_server_cert(&cert.der, &name, UnixTime::since_unix_epoch(Duration::from_secs(secs)))
            .map(|_| ())
            .map_err(|e| describe(&e))
    };
    let (start, end) = (1_893_456_000, 1_924_992_000);
    assert_eq!(check(start), Ok(()));
    assert_eq!(check(end), Ok(()));
    assert!(check(start - 1).unwrap_err().contains("not valid until 2030-01-01 00:00:00 UTC"));
    assert!(check(end + 1).unwrap_err().contains("expired on 2031-01-01 00:00:00 UTC"));
}
