//! One connection as the event loop sees it: a transport (TCP, maybe TLS, or a UDP socket whose
//! QUIC the session runs) and, once that is up, the session on it. No I/O here: the loop reads and changes these fields around the
//! operations it submits.

use std::time::Instant;

use super::udp::UdpSend;
use crate::session::Session;
use crate::tls::TlsSession;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No socket.
    Idle,
    /// Connect submitted.
    Connecting,
    /// TCP is up; the TLS handshake is running.
    Handshaking,
    /// The transport is up and the session is setting itself up (some protocols exchange
    /// settings first); the connection does not count as made yet.
    SettingUp,
    /// Made: requests go out, or (before the start) the connection waits for it.
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
    /// A request was taken from the budget for this connection when it was opened, and no
    /// session has used it yet: its first request (or, before the start, the one it waits to
    /// send). A failed set-up fails it; a close after set-up gives it back.
    pub claimed: bool,
    /// The peer sent TLS close_notify: no further request may go out on this connection.
    pub peer_closed: bool,
    pub connect_started: Instant,
    /// When the TLS handshake must be done.
    pub handshake_by: Option<Instant>,
    pub tls: Option<Box<TlsSession>>,
    /// The protocol on the connection, once the transport is up.
    pub session: Option<Session>,
    /// A send is in flight (not a quiet one).
    pub sending: bool,
    /// The bytes being sent are the run's shared request, not `send_buf`.
    pub send_from_request: bool,
    /// Bytes being sent: session output (plain TCP) or ciphertext (TLS).
    pub send_buf: Vec<u8>,
    pub send_off: usize,
    /// On the loop's list of connections to write at the end of this batch.
    pub dirty: bool,
    /// Open model: the session has room for a request and waits for the next one due (it is on
    /// the loop's `waiting` list).
    pub waiting: bool,
    /// UDP: the connection's SENDMSG parts (GSO), made when its socket is opened.
    pub udp_send: Option<UdpSend>,
    /// UDP: sends of the batch in `send_buf` not yet completed (one GSO send, or one a datagram).
    pub sends_in_flight: u32,
    /// UDP: the size of each datagram in `send_buf` (the last may be shorter).
    pub segment_size: usize,
}

impl Conn {
    pub(crate) fn new(now: Instant) -> Self {
        Conn {
            phase: Phase::Idle,
            generation: 0,
            pending_ops: 0,
            recv_armed: false,
            claimed: false,
            peer_closed: false,
            connect_started: now,
            handshake_by: None,
            tls: None,
            session: None,
            sending: false,
            send_from_request: false,
            send_buf: Vec::new(),
            send_off: 0,
            dirty: false,
            waiting: false,
            udp_send: None,
            sends_in_flight: 0,
            segment_size: 0,
        }
    }
}
