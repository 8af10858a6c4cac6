//! TLS over rustls, driven through its buffer API: ciphertext in, plaintext out, and the
//! bytes to send handed back. No I/O happens here.

mod cacert;
mod cert_fields;
mod describe;
mod insecure;
mod utc;

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use crate::error::EngineError;
use crate::plan::TlsOptions;

pub(crate) use describe::describe;

/// Builds the one client configuration a run shares across its connections.
pub(crate) fn client_config(opts: &TlsOptions, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, EngineError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| EngineError::TlsSetup(e.to_string()))?
        .dangerous();
    let verifier: Arc<dyn ServerCertVerifier> = if opts.insecure {
        Arc::new(insecure::AcceptAnyCertificate::new(provider))
    } else {
        let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let mut cacerts = Vec::new();
        for cert in CertificateDer::pem_slice_iter(&opts.extra_ca_pem) {
            let cert = cert.map_err(|e| EngineError::TlsSetup(format!("--cacert: {e}")))?;
            roots.add(cert.clone()).map_err(|e| EngineError::TlsSetup(format!("--cacert: {e}")))?;
            cacerts.push(cert);
        }
        if !opts.extra_ca_pem.is_empty() && cacerts.is_empty() {
            return Err(EngineError::TlsSetup("--cacert: no PEM certificate in the file".into()));
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| EngineError::TlsSetup(e.to_string()))?;
        Arc::new(cacert::CacertVerifier::new(webpki, cacerts))
    };
    let mut config = builder.with_custom_certificate_verifier(verifier).with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, EngineError> {
    ServerName::try_from(host.to_string()).map_err(|e| EngineError::TlsSetup(format!("server name '{host}': {e}")))
}

/// One TLS session on one connection.
pub(crate) struct TlsSession {
    conn: ClientConnection,
}

/// What feeding ciphertext produced.
pub(crate) struct Received {
    /// The peer sent close_notify: no more plaintext will come.
    pub closed: bool,
}

impl TlsSession {
    pub(crate) fn new(config: &Arc<ClientConfig>, name: &ServerName<'static>) -> Result<Self, rustls::Error> {
        let mut conn = ClientConnection::new(config.clone(), name.clone())?;
        // rustls would otherwise refuse plaintext beyond 64 KiB of unsent records; the loop
        // takes every record out after each `send`, so the limit only loses data.
        conn.set_buffer_limit(None);
        Ok(TlsSession { conn })
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Whether TLS has records of its own to send (a handshake flight, an alert, a key update).
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// The protocol the server chose with ALPN, once the handshake is done.
    pub(crate) fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// Takes ciphertext from the wire; appends any plaintext it carried to `plain`.
    pub(crate) fn receive(&mut self, mut data: &[u8], plain: &mut Vec<u8>) -> Result<Received, rustls::Error> {
        let mut closed = false;
        while !data.is_empty() {
            // read_tls from a slice cannot fail for I/O reasons; it stops when its buffer is full,
            // which process_new_packets below drains.
            match self.conn.read_tls(&mut data) {
                // After close_notify rustls takes nothing more: whatever follows is discarded.
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => return Err(rustls::Error::General("TLS receive buffer overflow".into())),
            }
            let state = self.conn.process_new_packets()?;
            closed |= state.peer_has_closed();
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let start = plain.len();
                plain.resize(start + n, 0);
                let got = self.conn.reader().read(&mut plain[start..]).unwrap_or(0);
                plain.truncate(start + got);
            }
            if closed {
                break;
            }
        }
        Ok(Received { closed })
    }

    /// Queues plaintext to be encrypted.
    pub(crate) fn send(&mut self, data: &[u8]) {
        // Without a buffer limit the writer takes everything (it only buffers inside rustls).
        let _ = self.conn.writer().write_all(data);
    }

    /// Moves every pending TLS record into `out`.
    pub(crate) fn take_ciphertext(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            if self.conn.write_tls(out).is_err() {
                break;
            }
        }
    }
}
