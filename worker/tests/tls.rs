//! The worker's gRPC listener over TLS, with client certificates: a controller with the
//! worker's CA and a certificate from the client CA gets in; one without a certificate, or
//! without TLS, does not.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1::{self, worker_client::WorkerClient};
use volley_worker::{TlsFiles, WorkerConfig};

struct Pki {
    ca_pem: String,
    server: (String, String),
    client: (String, String),
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
    params.distinguished_name.push(DnType::CommonName, names[0]);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).expect("signed");
    (cert.pem(), key.serialize_pem())
}

fn pki() -> Pki {
    let ca = ca("volley test CA");
    Pki {
        ca_pem: ca.pem(),
        server: leaf(&ca, &["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth),
        client: leaf(&ca, &["controller"], ExtendedKeyUsagePurpose::ClientAuth),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

async fn hello(addr: std::net::SocketAddr, tls: Option<ClientTlsConfig>) -> Result<v1::HelloReply, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Channel::from_shared(format!("{scheme}://{addr}")).expect("valid URI");
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).map_err(|e| e.to_string())?;
    }
    let channel = endpoint.connect().await.map_err(|e| format!("connect: {e:?}"))?;
    let token: tonic::metadata::MetadataValue<_> = "Bearer t0ken".parse().expect("ASCII");
    let mut client = WorkerClient::with_interceptor(channel, move |mut r: tonic::Request<()>| {
        r.metadata_mut().insert("authorization", token.clone());
        Ok(r)
    });
    client
        .hello(v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() })
        .await
        .map(|r| r.into_inner())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_client_with_a_certificate_gets_in() {
    let pki = pki();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = WorkerConfig::new("127.0.0.1:0".parse().expect("valid address"));
    config.token = Some("t0ken".into());
    config.tls = Some(TlsFiles {
        cert: write(dir.path(), "cert.pem", &pki.server.0),
        key: write(dir.path(), "key.pem", &pki.server.1),
    });
    config.client_ca = Some(write(dir.path(), "ca.pem", &pki.ca_pem));
    config.name = Some("tls-worker".into());
    let worker = volley_worker::spawn(config).await.expect("the worker starts");

    let trusting = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca_pem)).domain_name("localhost");
    let with_cert = trusting.clone().identity(Identity::from_pem(&pki.client.0, &pki.client.1));
    let reply = hello(worker.addr(), Some(with_cert)).await.expect("let in");
    assert_eq!(reply.name, "tls-worker");

    // The handshake fails; how the client hears of it (the worker's CertificateRequired alert,
    // a broken pipe, a closed connection) depends on timing, so only the failure is checked.
    hello(worker.addr(), Some(trusting)).await.expect_err("no client certificate");
    assert!(hello(worker.addr(), None).await.is_err(), "no TLS at all");

    worker.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_missing_key_file_is_named() {
    let pki = pki();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = WorkerConfig::new("127.0.0.1:0".parse().expect("valid address"));
    config.tls =
        Some(TlsFiles { cert: write(dir.path(), "cert.pem", &pki.server.0), key: dir.path().join("nope.pem") });
    let err = volley_worker::spawn(config).await.err().expect("refused").to_string();
    assert!(err.contains("TLS key") && err.contains("nope.pem"), "{err}");
}
