//! TLS over rustls, driven through its buffer API: ciphertext in, plaintext out, and the
//! bytes to send handed back. No I/O happens here.

mod cacert;
mod cert_fields;
mod describe;
mod insecure;
mod records;
mod utc;

use std::sync::Arc;

use rustls::client::UnbufferedClientConnection;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::unbuffered::{ConnectionState, EncodeError, InsufficientSizeError};
use rustls::{ClientConfig, RootCertStore};

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
    // Past the handshake, records are protected by `records` with keys rustls hands over.
    config.enable_secret_extraction = true;
    Ok(Arc::new(config))
}

pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, EngineError> {
    ServerName::try_from(host.to_string()).map_err(|e| EngineError::TlsSetup(format!("server name '{host}': {e}")))
}

/// One TLS session on one connection: the handshake through rustls's unbuffered API, then
/// the records through `records` (see there for why).
pub(crate) struct TlsSession {
    state: State,
    /// Received ciphertext not yet processed: during the handshake, what rustls has not
    /// taken; after it, a record cut short by its receive.
    incoming: Vec<u8>,
    /// Ciphertext to send.
    outgoing: Vec<u8>,
    /// The protocol the server chose with ALPN.
    alpn: Option<Vec<u8>>,
    /// Plaintext queued before the handshake was done.
    early: Vec<u8>,
    /// A failure while sealing, reported with the next receive.
    failed: Option<rustls::Error>,
}

enum State {
    Handshaking(Box<UnbufferedClientConnection>),
    Records(Box<records::Records>),
    /// After close_notify, or a failure: nothing more is read.
    Done,
}

/// What feeding ciphertext produced.
pub(crate) struct Received {
    /// The peer sent close_notify: no more plaintext will come.
    pub closed: bool,
}

impl TlsSession {
    pub(crate) fn new(config: &Arc<ClientConfig>, name: &ServerName<'static>) -> Result<Self, rustls::Error> {
        let conn = UnbufferedClientConnection::new(config.clone(), name.clone())?;
        let mut session = TlsSession {
            state: State::Handshaking(Box::new(conn)),
            incoming: Vec::new(),
            outgoing: Vec::new(),
            alpn: None,
            early: Vec::new(),
            failed: None,
        };
        // The ClientHello.
        session.handshake(&mut Vec::new())?;
        Ok(session)
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        matches!(self.state, State::Handshaking(_))
    }

    /// Whether TLS has records of its own to send (a handshake flight, a key update).
    pub(crate) fn wants_write(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// The protocol the server chose with ALPN, once the handshake is done.
    pub(crate) fn alpn(&self) -> Option<&[u8]> {
        self.alpn.as_deref()
    }

    /// Takes ciphertext from the wire (decrypted where it lies); appends any plaintext it
    /// carried to `plain`.
    pub(crate) fn receive(&mut self, data: &mut [u8], plain: &mut Vec<u8>) -> Result<Received, rustls::Error> {
        if let Some(e) = self.failed.take() {
            self.state = State::Done;
            return Err(e);
        }
        let closed = match &mut self.state {
            State::Done => false,
            State::Handshaking(_) => {
                self.incoming.extend_from_slice(data);
                // Records that came with the server's last flight are opened as soon as it is done.
                self.handshake(plain)? || self.open_incoming(plain)?
            }
            State::Records(records) if self.incoming.is_empty() => {
                // The common case: whole records, opened where the kernel put them.
                let opened = records.open(data, plain, &mut self.outgoing)?;
                if !opened.closed {
                    self.incoming.extend_from_slice(&data[opened.used..]);
                }
                opened.closed
            }
            State::Records(_) => {
                self.incoming.extend_from_slice(data);
                self.open_incoming(plain)?
            }
        };
        if closed {
            self.state = State::Done;
            self.incoming.clear();
        }
        Ok(Received { closed })
    }

    /// Drives the handshake over what has arrived; returns whether the server closed.
    fn handshake(&mut self, plain: &mut Vec<u8>) -> Result<bool, rustls::Error> {
        let State::Handshaking(conn) = &mut self.state else { return Ok(false) };
        loop {
            let status = conn.process_tls_records(&mut self.incoming);
            let discard = status.discard;
            let mut done = false;
            match status.state? {
                ConnectionState::EncodeTlsData(mut data) => {
                    let mut room = 2048;
                    loop {
                        let start = self.outgoing.len();
                        self.outgoing.resize(start + room, 0);
                        match data.encode(&mut self.outgoing[start..]) {
                            Ok(n) => {
                                self.outgoing.truncate(start + n);
                                break;
                            }
                            Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                                self.outgoing.truncate(start);
                                room = required_size;
                            }
                            Err(e) => return Err(rustls::Error::General(format!("TLS: {e}"))),
                        }
                    }
                }
                // Queued in `outgoing`, which the loop sends before anything sent later.
                ConnectionState::TransmitTlsData(data) => data.done(),
                ConnectionState::ReadTraffic(mut records) => {
                    while let Some(record) = records.next_record() {
                        plain.extend_from_slice(record?.payload);
                    }
                }
                ConnectionState::BlockedHandshake => {
                    self.incoming.drain(..discard);
                    return Ok(false);
                }
                ConnectionState::PeerClosed | ConnectionState::Closed => {
                    self.incoming.drain(..discard);
                    return Ok(true);
                }
                ConnectionState::WriteTraffic(_) => done = true,
                _ => return Err(rustls::Error::General("TLS: unexpected early data".into())),
            }
            self.incoming.drain(..discard);
            if done {
                break;
            }
        }
        let State::Handshaking(conn) = std::mem::replace(&mut self.state, State::Done) else { return Ok(false) };
        self.alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
        let (secrets, kernel) = conn.dangerous_into_kernel_connection()?;
        let mut records = Box::new(records::Records::new(secrets, kernel)?);
        records.seal(&std::mem::take(&mut self.early), &mut self.outgoing)?;
        self.state = State::Records(records);
        Ok(false)
    }

    /// Opens the whole records in `incoming`, keeping a record cut short; returns whether the
    /// server closed.
    fn open_incoming(&mut self, plain: &mut Vec<u8>) -> Result<bool, rustls::Error> {
        let State::Records(records) = &mut self.state else { return Ok(false) };
        let opened = records.open(&mut self.incoming, plain, &mut self.outgoing)?;
        self.incoming.drain(..opened.used);
        Ok(opened.closed)
    }

    /// Queues plaintext to be encrypted.
    pub(crate) fn send(&mut self, data: &[u8]) {
        match &mut self.state {
            State::Records(records) => {
                if let Err(e) = records.seal(data, &mut self.outgoing) {
                    self.failed = Some(e);
                }
            }
            State::Handshaking(_) => self.early.extend_from_slice(data),
            State::Done => {}
        }
    }

    /// Moves every pending TLS record into `out`.
    pub(crate) fn take_ciphertext(&mut self, out: &mut Vec<u8>) {
        if out.is_empty() {
            std::mem::swap(out, &mut self.outgoing);
        } else {
            out.append(&mut self.outgoing);
        }
    }
}
