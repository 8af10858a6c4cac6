//! What the event loop sees of a protocol: one Sans-I/O session per connection, under its
//! transport (TCP, TLS over TCP, or, for HTTP/3, QUIC over UDP, which the session carries).
//!
//! A session takes received plaintext and the clock, and gives bytes to send, protocol-neutral
//! [`Event`]s (responses with their timings, requests refused to be sent again, failures of one
//! kind for n requests) and its next deadline. The loop matches on the [`Session`] enum, never
//! on a protocol's details (no trait objects on the hot path); each protocol's counting rules
//! live in its own module (`h1::session`, `h2::session`, `h3::session`), unit-tested there with made-up
//! instants.

mod event;
mod jar;
mod kept;
mod open_streams;
mod schedule;
mod units;

use std::sync::Arc;
use std::time::Instant;

pub(crate) use event::{Event, Why};
pub(crate) use jar::CookieUrls;
pub(crate) use kept::{Extracted, Fields, Kept, KeptCheckTable, KeptChecks, SpareKept, judge, kept_checks};
pub(crate) use open_streams::OpenStreams;
pub(crate) use schedule::Schedule;
pub(crate) use units::{Cursor, Numbering, Picker, Units};

use crate::stats::ErrorKind;
use crate::{h1, h2, h3};

/// How every session of a run starts, decided once per run.
pub(crate) enum SessionConfig {
    H1(h1::Config),
    H2(Arc<h2::Config>),
    /// HTTP/3: the session owns its QUIC transport, so its set-up names the server.
    H3(Arc<h3::Setup>),
}

impl SessionConfig {
    /// The protocols to offer in TLS's ALPN. HTTP/2 offers http/1.1 too, so that a server
    /// without h2 says so by choosing it, and the error can name the cause instead of a failed
    /// handshake.
    pub(crate) fn alpn(&self) -> &'static [&'static [u8]] {
        match self {
            SessionConfig::H1(_) => &[b"http/1.1"],
            SessionConfig::H2(_) => &[b"h2", b"http/1.1"],
            SessionConfig::H3(_) => &[crate::quic::ALPN_H3],
        }
    }

    /// Receive buffers to provide per connection: the receives a connection may complete
    /// before the loop hands their buffers back. An HTTP/1.1 connection has one response in
    /// flight, which a receive of a buffer usually holds whole; an HTTP/2 connection's batch of
    /// responses can fill more than one, and so can a QUIC connection's datagrams.
    pub(crate) fn receive_buffers_per_connection(&self) -> usize {
        match self {
            SessionConfig::H1(_) => 1,
            SessionConfig::H2(_) | SessionConfig::H3(_) => 2,
        }
    }

    /// Whether the connection's transport is QUIC over UDP (else TCP, maybe with TLS).
    pub(crate) fn is_udp(&self) -> bool {
        matches!(self, SessionConfig::H3(_))
    }
}

/// What the transport under a new session agreed on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Negotiated<'a> {
    /// Plain TCP: nothing negotiated (HTTP/2 by prior knowledge).
    Tcp,
    /// TLS, with the protocol ALPN chose, if any.
    Tls(Option<&'a [u8]>),
    /// A UDP socket: the session runs QUIC (and its TLS) itself.
    Udp,
}

/// What a stream session (over TCP) has for its transport to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transmit {
    Nothing,
    /// One of the run's requests (by index), as encoded once and shared by every connection:
    /// sent from there, so a request is never copied.
    Request(u32),
    /// Bytes appended to the buffer handed to `poll_transmit`.
    Bytes,
}

/// A session: on a byte stream (TCP, maybe with TLS) or on datagrams (UDP, whose QUIC the
/// session runs). The two kinds take and give different things, so each has its own type and
/// the transport under a connection asks for its own kind; what the loop asks of any session
/// (start requests, deadlines, failing, closing) is here.
#[allow(clippy::large_enum_variant)] // HTTP/1.1's inline session: see `StreamSession`.
pub(crate) enum Session {
    Stream(StreamSession),
    Datagram(DatagramSession),
}

// HTTP/1.1 is kept inline: its session is touched on every request, and connections live in
// one Vec made at start-up, so their size costs nothing per request. HTTP/2's is larger and
// boxed.
#[allow(clippy::large_enum_variant)]
pub(crate) enum StreamSession {
    H1(h1::Session),
    H2(Box<h2::Session>),
}

/// A session on UDP datagrams: HTTP/3, whose QUIC it runs.
pub(crate) struct DatagramSession(Box<h3::Session>);

impl Session {
    /// A session on a transport that is up. `connect_started` is when the transport began: a
    /// session still setting up must be done within the connect timeout from there.
    pub(crate) fn new(
        config: &SessionConfig,
        negotiated: Negotiated<'_>,
        connect_started: Instant,
    ) -> Result<Self, Why> {
        match config {
            SessionConfig::H1(config) => {
                Ok(Session::Stream(StreamSession::H1(h1::Session::new(config.clone(), connect_started))))
            }
            SessionConfig::H2(config) => h2::Session::new(config.clone(), negotiated, connect_started)
                .map(|s| Session::Stream(StreamSession::H2(Box::new(s)))),
            SessionConfig::H3(setup) => h3::Session::new(setup.clone(), connect_started)
                .map(|s| Session::Datagram(DatagramSession(Box::new(s)))),
        }
    }

    /// The session on a byte stream, if this is one.
    #[inline]
    pub(crate) fn stream(&mut self) -> Option<&mut StreamSession> {
        match self {
            Session::Stream(s) => Some(s),
            Session::Datagram(_) => None,
        }
    }

    /// The session on datagrams, if this is one.
    #[inline]
    pub(crate) fn datagrams(&mut self) -> Option<&mut DatagramSession> {
        match self {
            Session::Datagram(s) => Some(s),
            Session::Stream(_) => None,
        }
    }

    /// Set up: the connection counts as made, and it may start requests.
    #[inline]
    pub(crate) fn is_established(&self) -> bool {
        match self {
            Session::Stream(StreamSession::H1(_)) => true,
            Session::Stream(StreamSession::H2(s)) => s.is_established(),
            Session::Datagram(DatagramSession(s)) => s.is_established(),
        }
    }

    /// Starts as many requests as the session may carry and `units` allow.
    #[inline]
    pub(crate) fn start_requests(&mut self, now: Instant, units: &mut Units<'_>, events: &mut Vec<Event>) {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.start_requests(now, units),
            Session::Stream(StreamSession::H2(s)) => s.start_requests(now, units, events),
            Session::Datagram(DatagramSession(s)) => s.start_requests(now, units, events),
        }
    }

    #[inline]
    pub(crate) fn wants_transmit(&self) -> bool {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.wants_transmit(),
            Session::Stream(StreamSession::H2(s)) => s.wants_transmit(),
            Session::Datagram(DatagramSession(s)) => s.wants_transmit(),
        }
    }

    /// When `handle_timeout` next has something to do. May be early (a request that has since
    /// finished), never late.
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.poll_timeout(),
            Session::Stream(StreamSession::H2(s)) => s.poll_timeout(),
            Session::Datagram(DatagramSession(s)) => s.poll_timeout(),
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut Vec<Event>) {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.handle_timeout(now, events),
            Session::Stream(StreamSession::H2(s)) => s.handle_timeout(now, events),
            Session::Datagram(DatagramSession(s)) => s.handle_timeout(now, events),
        }
    }

    /// The transport failed: every request in flight fails as `kind`.
    pub(crate) fn fail(&mut self, kind: ErrorKind, why: Why, events: &mut Vec<Event>) {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.fail(kind, why, events),
            Session::Stream(StreamSession::H2(s)) => s.fail(kind, why, events),
            Session::Datagram(DatagramSession(s)) => s.fail(kind, why, events),
        }
    }

    /// The connection cannot carry more: close it.
    #[inline]
    pub(crate) fn must_close(&self) -> bool {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.must_close(),
            Session::Stream(StreamSession::H2(s)) => s.must_close(),
            Session::Datagram(DatagramSession(s)) => s.must_close(),
        }
    }

    /// No request in flight: after `start_requests`, nothing more to do here.
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.is_idle(),
            Session::Stream(StreamSession::H2(s)) => s.is_idle(),
            Session::Datagram(DatagramSession(s)) => s.is_idle(),
        }
    }

    /// Requests in flight whose bytes went to a send: the server may have seen them.
    pub(crate) fn sent_in_flight(&self) -> u64 {
        match self {
            Session::Stream(StreamSession::H1(s)) => s.sent_in_flight(),
            Session::Stream(StreamSession::H2(s)) => s.sent_in_flight(),
            Session::Datagram(DatagramSession(s)) => s.sent_in_flight(),
        }
    }
}

impl StreamSession {
    /// Received plaintext.
    #[inline]
    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant, events: &mut Vec<Event>) {
        match self {
            StreamSession::H1(s) => s.receive(bytes, now, events),
            StreamSession::H2(s) => s.receive(bytes, now, events),
        }
    }

    /// What to send now; once taken, it counts as sent (the caller submits it at once).
    #[inline]
    pub(crate) fn poll_transmit(&mut self, out: &mut Vec<u8>) -> Transmit {
        match self {
            StreamSession::H1(s) => s.poll_transmit(out),
            StreamSession::H2(s) => s.poll_transmit(out),
        }
    }

    /// Everything taken with `poll_transmit` has been written to the socket: HTTP/1.1 counts
    /// its request sent from here; HTTP/2 counted its frames as it gave them.
    #[inline]
    pub(crate) fn written(&mut self) {
        if let StreamSession::H1(s) = self {
            s.written();
        }
    }

    /// The peer closed the connection.
    pub(crate) fn peer_closed(&mut self, now: Instant, events: &mut Vec<Event>) {
        match self {
            StreamSession::H1(s) => s.peer_closed(now, events),
            StreamSession::H2(s) => s.peer_closed(events),
        }
    }
}

impl DatagramSession {
    /// The next batch of datagrams, written into `out` (cleared first): the size of each (the
    /// last may be shorter), or None when there is nothing to send.
    pub(crate) fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        self.0.poll_transmit(now, out)
    }

    /// What one receive brought, a datagram or a GRO batch of `segment_size` each.
    pub(crate) fn receive(&mut self, bytes: &[u8], segment_size: Option<usize>, now: Instant, events: &mut Vec<Event>) {
        self.0.receive(bytes, segment_size, now, events);
    }

    /// The loop is closing the connection: the next `poll_transmit` gives the goodbye.
    pub(crate) fn close(&mut self, now: Instant) {
        self.0.close(now);
    }
}
