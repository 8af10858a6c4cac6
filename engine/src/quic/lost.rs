//! Why a QUIC connection ended, in the engine's error kinds and in words.

use quinn_proto::ConnectionError;

use crate::stats::ErrorKind;

/// A connection that ended: every request still on it failed of `kind`, for the reason `why`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lost {
    pub kind: ErrorKind,
    pub why: String,
    /// The peer closed the connection with this application error code (for HTTP/3, one of
    /// its H3_* codes), which only the session above knows how to read.
    pub application_code: Option<u64>,
    /// The peer ended the handshake with this TLS alert (a CRYPTO_ERROR it sent).
    pub peer_alert: Option<u8>,
}

impl Lost {
    fn new(kind: ErrorKind, why: String) -> Self {
        Lost { kind, why, application_code: None, peer_alert: None }
    }

    /// No handshake within the connect timeout: nothing answers QUIC on that port.
    pub(crate) fn connect_timeout() -> Self {
        Lost::new(
            ErrorKind::Connect,
            "no QUIC handshake within the connect timeout (is a QUIC server on that UDP port?)".into(),
        )
    }

    /// The server's version negotiation offered no version of ours.
    pub(crate) fn no_common_version() -> Self {
        Lost::connect("the server speaks no QUIC version volley does (version 1)".into())
    }

    /// A connection that could not be set up, for `why`.
    pub(crate) fn connect(why: String) -> Self {
        Lost::new(ErrorKind::Connect, why)
    }

    /// A TLS failure on our side (the words already say what to do).
    pub(crate) fn tls(why: String) -> Self {
        Lost::new(ErrorKind::Tls, why)
    }

    /// The server broke QUIC; we closed the connection.
    pub(crate) fn protocol(why: String) -> Self {
        Lost::new(ErrorKind::Protocol, why)
    }

    /// The server's stateless reset: it has no state for the connection any more.
    pub(crate) fn stateless_reset() -> Self {
        Lost::new(ErrorKind::Reset, "the server reset the QUIC connection (stateless reset)".into())
    }

    /// Nothing from the server for the idle timeout.
    pub(crate) fn idle() -> Self {
        Lost::new(ErrorKind::Reset, "the QUIC connection went silent for its idle timeout".into())
    }

    /// The server's CONNECTION_CLOSE: an `application` one (HTTP/3's codes) or QUIC's own.
    pub(crate) fn closed_by_peer(application: bool, code: u64, reason: &str, connected: bool) -> Self {
        let said = if reason.is_empty() { format!("code {code:#x}") } else { format!("code {code:#x}: {reason}") };
        if application {
            return Lost {
                kind: if connected { ErrorKind::Reset } else { ErrorKind::Connect },
                why: format!("the server closed the connection: {said}"),
                application_code: Some(code),
                peer_alert: None,
            };
        }
        match tls_alert(code) {
            Some(alert) => Lost {
                peer_alert: Some(alert),
                ..Lost::tls(format!("the server ended the TLS handshake with alert {alert}"))
            },
            None if code == 0 => {
                let kind = if connected { ErrorKind::Reset } else { ErrorKind::Connect };
                Lost::new(kind, "the server closed the QUIC connection".into())
            }
            None if !connected => Lost::connect(format!("the server refused the QUIC connection: {said}")),
            None => Lost::protocol(format!("the server closed the QUIC connection with an error: {said}")),
        }
    }

    /// Why quinn-proto gave up on the connection; `connected` says whether the handshake was done.
    pub(crate) fn from_quinn(reason: ConnectionError, connected: bool) -> Self {
        match reason {
            ConnectionError::TimedOut if connected => Lost::idle(),
            ConnectionError::TimedOut => Lost::connect_timeout(),
            ConnectionError::VersionMismatch => Lost::no_common_version(),
            ConnectionError::CidsExhausted => Lost::new(ErrorKind::Connect, "out of QUIC connection IDs".into()),
            ConnectionError::TransportError(e) => match tls_alert(e.code.into()) {
                Some(alert) => Lost::new(ErrorKind::Tls, local_tls(alert, &e.reason)),
                None => Lost::new(ErrorKind::Protocol, format!("the server broke QUIC: {e}")),
            },
            ConnectionError::ConnectionClosed(close) => {
                Lost::closed_by_peer(false, close.error_code.into(), &String::from_utf8_lossy(&close.reason), connected)
            }
            ConnectionError::ApplicationClosed(close) => Lost::closed_by_peer(
                true,
                close.error_code.into_inner(),
                &String::from_utf8_lossy(&close.reason),
                connected,
            ),
            ConnectionError::Reset => Lost::stateless_reset(),
            ConnectionError::LocallyClosed => Lost::new(ErrorKind::Reset, "closed by volley".into()),
        }
    }
}

/// The TLS alert a QUIC CRYPTO_ERROR carries (RFC 9001 §4.8: 0x100 + alert).
fn tls_alert(code: u64) -> Option<u8> {
    (0x100..=0x1ff).contains(&code).then(|| (code - 0x100) as u8)
}

/// A TLS failure found on our side. quinn-proto hands rustls' error over as text only, so the
/// advice (`--cacert`, `-k`) comes from the alert rustls chose for it.
pub(crate) fn local_tls(alert: u8, reason: &str) -> String {
    // bad_certificate, unsupported_certificate, certificate_revoked, certificate_expired,
    // certificate_unknown, unknown_ca (RFC 8446 §6.2).
    let certificate = matches!(alert, 42..=46 | 48);
    if certificate {
        format!(
            "{reason}: give the CA that signed the server's certificate with --cacert FILE, or skip verification with -k"
        )
    } else {
        format!("TLS: {reason}")
    }
}
