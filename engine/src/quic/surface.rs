//! What both QUICs show the HTTP/3 session through, in a leaf module of its own so that each
//! QUIC and the `Transport` in front of them all take it from here: stream ids, the
//! connection's events, where a read stopped, and the batches of datagrams a transmit wrote.

use super::lost::Lost;

/// A stream of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct StreamId(pub(super) u64);

impl StreamId {
    /// The stream's number on the wire (HTTP/3's GOAWAY names streams by it).
    pub(crate) fn number(self) -> u64 {
        self.0
    }

    /// A bidirectional stream (HTTP/3's request streams are; its control streams are not).
    pub(crate) fn is_bidi(self) -> bool {
        self.0 & 2 == 0
    }
}

/// What happened on the connection, for the session above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The handshake is done; the server chose this ALPN protocol.
    Connected { alpn: Option<Vec<u8>> },
    /// The peer opened unidirectional streams: take them with `accept_uni`.
    UniOpened,
    /// The stream has data, its end, or a reset to `read`.
    Readable(StreamId),
    /// A stream whose `write` took less than it was given may take more.
    Writable(StreamId),
    /// The peer asked us to stop sending on the stream (STOP_SENDING) with this code.
    Stopped { stream: StreamId, code: u64 },
    /// The peer allows more bidirectional streams: `open_bi` may succeed again.
    BiAvailable,
    /// The connection is over; nothing more will happen on it.
    Lost(Lost),
}

/// Where a `read` stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadEnd {
    /// Everything received so far was handed over; more may come.
    Blocked,
    /// The peer finished the stream and all of it was handed over.
    Finished,
    /// The peer reset the stream with this code.
    Reset(u64),
}

/// A stream that can no longer be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamError {
    #[error("the stream is closed")]
    Closed,
    #[error("the peer stopped the stream with code {0}")]
    Stopped(u64),
}

/// A batch of datagrams `poll_transmit` wrote: `len` bytes, every datagram `segment_size` long
/// except perhaps the last (one datagram when `segment_size == len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Datagrams {
    pub len: usize,
    pub segment_size: usize,
}

impl Datagrams {
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn count(&self) -> usize {
        self.len.div_ceil(self.segment_size.max(1))
    }
}
