//! A small HTTP/3 client for the tests: quinn + h3 (somebody else's QUIC and HTTP/3) on a
//! current-thread runtime of its own, blocking calls, one connection per client.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A response as the client read it.
#[derive(Debug)]
pub struct H3Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

pub struct H3Client {
    runtime: tokio::runtime::Runtime,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    endpoint: quinn::Endpoint,
}

impl H3Client {
    /// Connects to `addr` as `localhost`, trusting `ca_pem`, or any certificate when `None`
    /// (like `-k`, for servers with a certificate made at start).
    pub fn connect(addr: SocketAddr, ca_pem: Option<&str>) -> Result<H3Client, String> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?;
        let mut tls = match ca_pem {
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            None => {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCert(provider))).with_no_client_auth()
            }
        };
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
        let (endpoint, send) = runtime.block_on(async {
            let bind = if addr.is_ipv4() { "127.0.0.1:0" } else { "[::1]:0" };
            let mut endpoint =
                quinn::Endpoint::client(bind.parse().expect("literal address")).map_err(|e| e.to_string())?;
            endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
            let connecting = endpoint.connect(addr, "localhost").map_err(|e| e.to_string())?;
            let connection = tokio::time::timeout(std::time::Duration::from_secs(10), connecting)
                .await
                .map_err(|_| "QUIC handshake timed out".to_string())?
                .map_err(|e| e.to_string())?;
            let (mut driver, send) =
                h3::client::new(h3_quinn::Connection::new(connection)).await.map_err(|e| e.to_string())?;
            tokio::spawn(async move { poll_fn(|cx| driver.poll_close(cx)).await });
            Ok::<_, String>((endpoint, send))
        })?;
        Ok(H3Client { runtime, send, endpoint })
    }

    /// One GET.
    pub fn get(&mut self, path: &str) -> Result<H3Reply, String> {
        let send = self.send.clone();
        self.runtime.block_on(get(send, path.to_string()))
    }

    /// `n` GETs at once on this connection, each on its own stream.
    pub fn get_concurrently(&mut self, path: &str, n: usize) -> Vec<Result<H3Reply, String>> {
        let send = self.send.clone();
        self.runtime.block_on(async {
            let tasks: Vec<_> = (0..n).map(|_| tokio::spawn(get(send.clone(), path.to_string()))).collect();
            let mut replies = Vec::new();
            for task in tasks {
                replies.push(task.await.unwrap_or_else(|e| Err(e.to_string())));
            }
            replies
        })
    }
}

impl Drop for H3Client {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"done");
    }
}

async fn get(mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>, path: String) -> Result<H3Reply, String> {
    let request = http::Request::get(format!("https://localhost{path}")).body(()).map_err(|e| e.to_string())?;
    let work = async {
        let mut stream = send.send_request(request).await.map_err(|e| e.to_string())?;
        stream.finish().await.map_err(|e| e.to_string())?;
        let response = stream.recv_response().await.map_err(|e| e.to_string())?;
        let mut body = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
        }
        Ok(H3Reply { status: response.status().as_u16(), headers: response.headers().clone(), body })
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), work).await.map_err(|_| "request timed out".to_string())?
}

/// Accepts any certificate but still checks the handshake's signatures, as volley's `-k` does.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
