//! A test CA and a server certificate made with rcgen at test time, or a self-signed one made by
//! the `openssl` command.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use super::volley::in_ci;

/// A fresh test CA and a server certificate it signed, valid for `localhost`, `127.0.0.1` and
/// `::1`. Give volley `--cacert` the CA ([`TestCert::write_ca`]); serve `cert_pem` + `key_pem`.
#[derive(Clone, Debug)]
pub struct TestCert {
    /// The CA certificate (what a client trusts).
    pub ca_pem: String,
    /// The server certificate (leaf only).
    pub cert_pem: String,
    /// The server certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl TestCert {
    pub fn generate() -> TestCert {
        TestCert::generate_for(&["localhost", "127.0.0.1", "::1"])
    }

    /// A fresh test CA and a server certificate it signed for `names` only.
    pub fn generate_for(names: &[&str]) -> TestCert {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name.push(DnType::CommonName, "volley test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();

        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "localhost");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &*ca).unwrap();
        TestCert { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    /// A self-signed certificate made the way most people make one, by the `openssl` command:
    /// `openssl req -x509 -newkey rsa:2048 -subj /CN=localhost -addext subjectAltName=SAN`,
    /// which marks it CA:TRUE. It is its own CA: `ca_pem` and `cert_pem` are the same.
    /// `None` (after saying why on stderr) when openssl is not installed; under CI that panics.
    pub fn openssl_self_signed(subject_alt_name: &str) -> Option<TestCert> {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=localhost"])
            .arg("-addext")
            .arg(format!("subjectAltName={subject_alt_name}"))
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdin(Stdio::null())
            .output();
        match made {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                assert!(!in_ci(), "openssl is not installed, and CI must run the openssl certificate tests");
                eprintln!("SKIPPED: openssl is not installed (apt-get install openssl); skipping this test");
                return None;
            }
            Err(e) => panic!("cannot run openssl: {e}"),
            Ok(out) => assert!(out.status.success(), "openssl req failed: {}", String::from_utf8_lossy(&out.stderr)),
        }
        let cert_pem = std::fs::read_to_string(cert).unwrap();
        let key_pem = std::fs::read_to_string(key).unwrap();
        Some(TestCert { ca_pem: cert_pem.clone(), cert_pem, key_pem })
    }

    /// Writes the CA to `dir/ca.pem` (for `--cacert`) and returns its path.
    pub fn write_ca(&self, dir: &Path) -> PathBuf {
        let path = dir.join("ca.pem");
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }

    /// Writes `dir/cert.pem` and `dir/key.pem` and returns their paths.
    pub fn write_cert_and_key(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }

    /// The certificate and key in the form `volley_serve::ServeConfig::tls` takes.
    pub fn serve_tls(&self) -> volley_serve::TlsPem {
        volley_serve::TlsPem {
            cert_chain_pem: self.cert_pem.clone().into_bytes(),
            key_pem: self.key_pem.clone().into_bytes(),
        }
    }

    /// A rustls server config serving this certificate, ALPN `h2` then `http/1.1`.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }

    /// A rustls client config that trusts only this CA and offers `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A blocking TLS connection to `addr` that verifies the server as `server_name`.
    pub fn connect(
        &self,
        addr: SocketAddr,
        server_name: &str,
        alpn: &[&[u8]],
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        let name = ServerName::try_from(server_name.to_string()).unwrap();
        let conn = rustls::ClientConnection::new(self.client_config(alpn), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        // Finish the handshake now so callers can read the negotiated ALPN straight away.
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock).unwrap();
        }
        stream
    }
}

/// The crypto provider the workspace uses everywhere (ring).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
