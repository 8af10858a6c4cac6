//! One connection's state as the event loop sees it. No I/O here: the loop reads and changes
//! these fields around the operations it submits.

use std::time::Instant;

use crate::h1::Scanner;
use crate::h2::conn::Connection as H2Connection;
use crate::tls::TlsSession;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No socket.
    Idle,
    /// Connect submitted.
    Connecting,
    /// TCP is up; the TLS handshake is running.
    Handshaking,
    /// HTTP/2: our preface and SETTINGS are sent; the server's SETTINGS complete the set-up.
    H2Preface,
    /// Ready: a request is in flight, or the connection is between requests.
    Open,
    /// Cancel and close submitted; becomes Idle when every operation has completed.
    Closing,
}

pub(crate) struct Conn {
    pub phase: Phase,
    /// Bumped for every new socket, so completions of an earlier socket are recognised.
    pub generation: u16,
    /// Operations submitted and not yet completed (a multishot receive counts until its last
    /// completion). Memory an operation points at is left alone until this drops to zero.
    pub pending_ops: u32,
    pub recv_armed: bool,
    /// A request was started (its budget unit taken) and has not finished as ok or error.
    pub outstanding: bool,
    /// The outstanding request's send was queued: it reaches the kernel (at the latest with
    /// the final submit when the run stops), so the server may see it.
    pub request_queued: bool,
    pub sent_at: Instant,
    pub first_byte_seen: bool,
    /// The peer sent TLS close_notify: no further request may go out on this connection.
    pub peer_closed: bool,
    /// Open, its budget unit claimed, waiting for the start gate to send its first request.
    pub parked: bool,
    pub connect_started: Instant,
    /// When the in-flight request (or the handshake) times out.
    pub deadline: Option<Instant>,
    pub scanner: Scanner,
    pub tls: Option<Box<TlsSession>>,
    /// Bytes being sent: the shared request (plain TCP) or ciphertext (TLS).
    pub sending: bool,
    pub send_from_request: bool,
    pub send_buf: Vec<u8>,
    pub send_off: usize,
    /// The HTTP/2 session, once the connection is open (HTTP/2 runs only). Its streams are the
    /// requests in flight; `outstanding` then only means a budget unit claimed for a first
    /// stream not yet started.
    pub h2: Option<Box<H2Connection>>,
    /// On the loop's list of connections to write at the end of this batch.
    pub dirty: bool,
    /// The error code of a GOAWAY that reported a problem: streams lost with the connection
    /// then count as protocol errors, not resets.
    pub goaway_error: Option<u32>,
}

impl Conn {
    pub(crate) fn new(now: Instant) -> Self {
        Conn {
            phase: Phase::Idle,
            generation: 0,
            pending_ops: 0,
            recv_armed: false,
            outstanding: false,
            request_queued: false,
            sent_at: now,
            first_byte_seen: false,
            peer_closed: false,
            parked: false,
            connect_started: now,
            deadline: None,
            scanner: Scanner::new(),
            tls: None,
            sending: false,
            send_from_request: false,
            send_buf: Vec::new(),
            send_off: 0,
            h2: None,
            dirty: false,
            goaway_error: None,
        }
    }
}
