//! One QUIC client connection as the HTTP/3 session sees it, Sans-I/O: datagrams and the
//! clock in; datagrams to send, stream data, events and the next deadline out. Behind it is
//! either our own QUIC (`client`, for loopback-class paths, the default: lean per-stream state
//! and no congestion control) or quinn-proto (`quinn`, for `--quic-congestion standard`: its
//! CUBIC, pacing and MTU rules for a real WAN). Nothing of either shows through.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use super::client;
use super::config::Config;
use super::quinn::QuinnTransport;
use super::surface::{Datagrams, Event, ReadEnd, StreamError, StreamId};
use crate::error::EngineError;

pub(crate) enum Transport {
    Own(Box<client::Connection>),
    Quinn(Box<QuinnTransport>),
}

/// Calls the same method on whichever QUIC the connection runs on.
macro_rules! each {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Transport::Own($c) => $e,
            Transport::Quinn($c) => $e,
        }
    };
}

impl Transport {
    /// Starts a connection to `server` (its first datagrams wait in `poll_transmit`).
    pub(crate) fn connect(
        config: &Config,
        server: SocketAddr,
        server_name: &str,
        now: Instant,
    ) -> Result<Self, EngineError> {
        match config {
            Config::Own(settings) => client::Connection::connect(settings.clone(), server_name, now)
                .map(|c| Transport::Own(Box::new(c)))
                .map_err(EngineError::TlsSetup),
            Config::Quinn(config) => {
                QuinnTransport::connect(config, server, server_name, now).map(|c| Transport::Quinn(Box::new(c)))
            }
        }
    }

    /// Takes what one receive brought: one datagram, or several of `segment_size` bytes each
    /// (the last may be shorter) when the kernel coalesced them (UDP GRO).
    pub(crate) fn receive(&mut self, now: Instant, bytes: &[u8], segment_size: Option<usize>) {
        each!(self, c => c.receive(now, bytes, segment_size))
    }

    /// Writes the next batch of datagrams into `buf` (cleared first): up to the batch size, all
    /// of one size but the last, for one UDP send with GSO. None when nothing is due.
    pub(crate) fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Datagrams> {
        each!(self, c => c.poll_transmit(now, buf))
    }

    /// When `handle_timeout` is next due.
    pub(crate) fn poll_timeout(&mut self) -> Option<Instant> {
        each!(self, c => c.poll_timeout())
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        each!(self, c => c.handle_timeout(now))
    }

    /// The next event, if any.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        each!(self, c => c.poll_event())
    }

    /// Opens a request stream; None while the peer's stream limit is reached (`BiAvailable`
    /// says when to try again).
    pub(crate) fn open_bi(&mut self) -> Option<StreamId> {
        each!(self, c => c.open_bi())
    }

    /// Opens one of our unidirectional streams (HTTP/3's control stream).
    pub(crate) fn open_uni(&mut self) -> Option<StreamId> {
        each!(self, c => c.open_uni())
    }

    /// A unidirectional stream the peer opened, if one is waiting. Read it at once: what came
    /// with the frame that opened it is not announced again as `Readable`.
    pub(crate) fn accept_uni(&mut self) -> Option<StreamId> {
        each!(self, c => c.accept_uni())
    }

    /// Queues `bytes` on `stream`; returns how many were taken (fewer when flow control or the
    /// send window is full: `Writable` says when to go on). Taken as `Bytes`, kept until
    /// acknowledged without a copy.
    pub(crate) fn write(&mut self, stream: StreamId, bytes: Bytes) -> Result<usize, StreamError> {
        each!(self, c => c.write(stream, bytes))
    }

    /// Ends our side of `stream` after what was written.
    pub(crate) fn finish(&mut self, stream: StreamId) -> Result<(), StreamError> {
        each!(self, c => c.finish(stream))
    }

    /// Abandons `stream` both ways with `code` (a request given up on): RESET_STREAM for what
    /// we send, STOP_SENDING for what the peer does. Either side already over is left alone.
    pub(crate) fn cancel(&mut self, stream: StreamId, code: u64) {
        each!(self, c => c.cancel(stream, code))
    }

    /// Ends our sending side of `stream` with `code` (RESET_STREAM), leaving its receiving side
    /// alone: what a STOP_SENDING from the peer calls for. Already over, it is left alone.
    pub(crate) fn reset_send(&mut self, stream: StreamId, code: u64) {
        each!(self, c => c.reset_send(stream, code))
    }

    /// Hands what arrived on `stream`, in order, to `each`, and says where it stopped.
    pub(crate) fn read(&mut self, stream: StreamId, each: impl FnMut(&[u8])) -> Result<ReadEnd, StreamError> {
        match self {
            Transport::Own(c) => c.read(stream, each),
            Transport::Quinn(c) => c.read(stream, each),
        }
    }

    /// Closes the connection with an application `code` (HTTP/3's); the CONNECTION_CLOSE
    /// leaves with the next `poll_transmit`.
    pub(crate) fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        each!(self, c => c.close(now, code, reason))
    }

    /// The handshake is done.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_connected(&self) -> bool {
        each!(self, c => c.is_connected())
    }

    /// The connection's own state after a close (ours or the peer's) has run out: nothing more
    /// will be sent or received.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_drained(&self) -> bool {
        each!(self, c => c.is_drained())
    }

    /// Datagrams counted as lost, and sent in all (for reports and tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn lost_and_sent_packets(&self) -> (u64, u64) {
        each!(self, c => c.lost_and_sent_packets())
    }

    /// Packets received and dropped unread: stray, forged, cut short or random (quinn-proto
    /// tells only of the datagrams its endpoint drops, not of those its connection ignores).
    pub(crate) fn dropped_packets(&self) -> u64 {
        each!(self, c => c.dropped_packets())
    }
}
