//! One connection as the event loop sees it: its transport (TCP, maybe with TLS, or a UDP
//! socket whose QUIC the session runs), each with the state only it has, and, once that is up,
//! the session on it. No I/O here: the loop reads and changes these fields around the
//! operations it submits.

use std::time::Instant;

use super::udp::UdpSend;
use crate::session::{Cursor, Session};
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
    /// The peer said it takes no further request on this connection (TLS close_notify).
    pub peer_closed: bool,
    pub connect_started: Instant,
    /// What carries the connection's bytes.
    pub transport: Transport,
    /// The protocol on the connection, once the transport is up.
    pub session: Option<Session>,
    /// A send is in flight (not a quiet one).
    pub sending: bool,
    /// Bytes being sent: session output (plain TCP), ciphertext (TLS) or datagrams (UDP).
    pub send_buf: Vec<u8>,
    /// On the loop's list of connections to write at the end of this batch.
    pub dirty: bool,
    /// Open model: the session has room for a request and waits for the next one due (it is on
    /// the loop's `waiting` list).
    pub waiting: bool,
    /// Where this slot is in the run's requests (see `session::Picker`), kept across its
    /// connections; a failed set-up counts the request it was opened for as the next one.
    pub cursor: Cursor,
}

/// What carries a connection's bytes. A run's connections all have the same kind (the
/// session's, `SessionConfig::is_udp`); the loop matches on it wherever the two differ.
pub(crate) enum Transport {
    Tcp(Tcp),
    Udp(Udp),
}

/// TCP, with TLS for https.
#[derive(Default)]
pub(crate) struct Tcp {
    /// TLS, from the moment TCP is up (https only).
    pub tls: Option<Box<TlsSession>>,
    /// When the TLS handshake must be done.
    pub handshake_by: Option<Instant>,
    /// The bytes being sent are this one of the run's shared requests, not `send_buf`.
    pub send_from_request: Option<u32>,
    /// How far the send in flight has got.
    pub send_off: usize,
}

/// A connected UDP socket, for QUIC.
pub(crate) struct Udp {
    /// The connection's SENDMSG parts (GSO), made new with every socket.
    pub send: UdpSend,
    /// Sends of the batch in `send_buf` not yet completed (one GSO send, or one a datagram).
    pub sends_in_flight: u32,
    /// The size of each datagram in `send_buf` (the last may be shorter).
    pub segment_size: usize,
}

impl Transport {
    /// When the TLS handshake must be done, while one runs.
    pub(crate) fn handshake_by(&self) -> Option<Instant> {
        match self {
            Transport::Tcp(tcp) => tcp.handshake_by,
            Transport::Udp(_) => None,
        }
    }

    /// A fresh transport of the run's kind.
    pub(crate) fn new(udp: bool) -> Transport {
        if udp {
            Transport::Udp(Udp { send: UdpSend::new(), sends_in_flight: 0, segment_size: 0 })
        } else {
            Transport::Tcp(Tcp::default())
        }
    }
}

impl Conn {
    /// An idle connection of a run over UDP (`udp`) or TCP, whose place in the mix is
    /// `cursor`.
    pub(crate) fn new(now: Instant, udp: bool, cursor: Cursor) -> Self {
        Conn {
            phase: Phase::Idle,
            generation: 0,
            pending_ops: 0,
            recv_armed: false,
            claimed: false,
            peer_closed: false,
            connect_started: now,
            transport: Transport::new(udp),
            session: None,
            sending: false,
            send_buf: Vec::new(),
            dirty: false,
            waiting: false,
            cursor,
        }
    }
}
