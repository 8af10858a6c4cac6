//! What the event loop sees of a protocol: one Sans-I/O session per connection, under its
//! transport (TCP, or TLS over TCP).
//!
//! A session takes received plaintext and the clock, and gives bytes to send, protocol-neutral
//! [`Event`]s (responses with their timings, requests refused to be sent again, failures of one
//! kind for n requests) and its next deadline. The loop matches on the [`Session`] enum, never
//! on a protocol's details (no trait objects on the hot path); each protocol's counting rules
//! live in its own module (`h1::session`, `h2::session`), unit-tested there with made-up
//! instants.

mod event;
mod schedule;
mod units;

use std::sync::Arc;
use std::time::Instant;

pub(crate) use event::{Event, Why};
pub(crate) use schedule::Schedule;
pub(crate) use units::Units;

use crate::stats::ErrorKind;
use crate::{h1, h2};

/// How every session of a run starts, decided once per run.
pub(crate) enum SessionConfig {
    H1(h1::Config),
    H2(Arc<h2::Config>),
}

impl SessionConfig {
    /// The protocols to offer in TLS's ALPN. HTTP/2 offers http/1.1 too, so that a server
    /// without h2 says so by choosing it, and the error can name the cause instead of a failed
    /// handshake.
    pub(crate) fn alpn(&self) -> &'static [&'static [u8]] {
        match self {
            SessionConfig::H1(_) => &[b"http/1.1"],
            SessionConfig::H2(_) => &[b"h2", b"http/1.1"],
        }
    }
}

/// What the transport under a new session agreed on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Negotiated<'a> {
    /// Plain TCP: nothing negotiated (HTTP/2 by prior knowledge).
    Tcp,
    /// TLS, with the protocol ALPN chose, if any.
    Tls(Option<&'a [u8]>),
}

/// What a session has for its transport to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transmit {
    Nothing,
    /// The run's request, as encoded once and shared by every connection: sent from there, so
    /// a request is never copied.
    Request,
    /// Bytes appended to the buffer handed to `poll_transmit`.
    Bytes,
}

// HTTP/1.1 is kept inline: its session is touched on every request, and connections live in
// one Vec made at start-up, so their size costs nothing per request. HTTP/2's is larger and
// boxed.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Session {
    H1(h1::Session),
    H2(Box<h2::Session>),
}

impl Session {
    /// A session on a transport that is up. `connect_started` is when the transport began: a
    /// session still setting up must be done within the connect timeout from there.
    pub(crate) fn new(
        config: &SessionConfig,
        negotiated: Negotiated<'_>,
        connect_started: Instant,
    ) -> Result<Self, Why> {
        match config {
            SessionConfig::H1(config) => Ok(Session::H1(h1::Session::new(*config, connect_started))),
            SessionConfig::H2(config) => {
                h2::Session::new(config.clone(), negotiated, connect_started).map(|s| Session::H2(Box::new(s)))
            }
        }
    }

    /// Set up: the connection counts as made, and it may start requests.
    #[inline]
    pub(crate) fn is_established(&self) -> bool {
        match self {
            Session::H1(_) => true,
            Session::H2(s) => s.is_established(),
        }
    }

    /// Received plaintext.
    #[inline]
    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant, events: &mut Vec<Event>) {
        match self {
            Session::H1(s) => s.receive(bytes, now, events),
            Session::H2(s) => s.receive(bytes, now, events),
        }
    }

    /// Starts as many requests as the session may carry and `units` allow.
    #[inline]
    pub(crate) fn start_requests(&mut self, now: Instant, units: &mut Units<'_>, events: &mut Vec<Event>) {
        match self {
            Session::H1(s) => s.start_requests(now, units),
            Session::H2(s) => s.start_requests(now, units, events),
        }
    }

    /// What to send now; once taken, it counts as sent (the caller submits it at once).
    #[inline]
    pub(crate) fn poll_transmit(&mut self, out: &mut Vec<u8>) -> Transmit {
        match self {
            Session::H1(s) => s.poll_transmit(),
            Session::H2(s) => s.poll_transmit(out),
        }
    }

    #[inline]
    pub(crate) fn wants_transmit(&self) -> bool {
        match self {
            Session::H1(s) => s.wants_transmit(),
            Session::H2(s) => s.wants_transmit(),
        }
    }

    /// Everything taken with `poll_transmit` has been written to the socket.
    #[inline]
    pub(crate) fn written(&mut self) {
        match self {
            Session::H1(s) => s.written(),
            Session::H2(_) => {}
        }
    }

    /// When `handle_timeout` next has something to do. May be early (a request that has since
    /// finished), never late.
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Session::H1(s) => s.poll_timeout(),
            Session::H2(s) => s.poll_timeout(),
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut Vec<Event>) {
        match self {
            Session::H1(s) => s.handle_timeout(now, events),
            Session::H2(s) => s.handle_timeout(now, events),
        }
    }

    /// The peer closed the connection.
    pub(crate) fn peer_closed(&mut self, now: Instant, events: &mut Vec<Event>) {
        match self {
            Session::H1(s) => s.peer_closed(now, events),
            Session::H2(s) => s.peer_closed(events),
        }
    }

    /// The transport failed: every request in flight fails as `kind`.
    pub(crate) fn fail(&mut self, kind: ErrorKind, why: Why, events: &mut Vec<Event>) {
        match self {
            Session::H1(s) => s.fail(kind, why, events),
            Session::H2(s) => s.fail(kind, why, events),
        }
    }

    /// The connection cannot carry more: close it.
    #[inline]
    pub(crate) fn must_close(&self) -> bool {
        match self {
            Session::H1(s) => s.must_close(),
            Session::H2(s) => s.must_close(),
        }
    }

    /// No request in flight: after `start_requests`, nothing more to do here.
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        match self {
            Session::H1(s) => s.is_idle(),
            Session::H2(s) => s.is_idle(),
        }
    }

    /// Requests in flight whose bytes went to a send: the server may have seen them.
    pub(crate) fn sent_in_flight(&self) -> u64 {
        match self {
            Session::H1(s) => s.sent_in_flight(),
            Session::H2(s) => s.sent_in_flight(),
        }
    }
}
