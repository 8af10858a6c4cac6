//! What a session tells the loop: protocol-neutral events, each counted the same way whatever
//! protocol produced it.

use std::borrow::Cow;
use std::time::Instant;

use super::kept::Extracted;
use crate::stats::{ErrorKind, RetryAfter};

/// Why requests failed, as the report shows it: most reasons are fixed text, so only those
/// naming a code or a number are formatted (and only the first of each kind is kept).
pub(crate) type Why = Cow<'static, str>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The first byte of a response to `request` (which of the run's requests it answers):
    /// `at - sent_at` is its time to first byte.
    FirstByte { request: u32, sent_at: Instant, at: Instant },
    /// A complete response (any status): `at - due` is its latency, `at - sent_at` its service
    /// time (the same in the closed model, where a request is due when it is sent).
    Response { request: u32, status: u16, due: Instant, sent_at: Instant, at: Instant },
    /// The response that follows carried `Retry-After`. An event of its own, pushed only when
    /// the header came, so that responses without it cost nothing more.
    RetryAfter { status: u16, value: RetryAfter },
    /// The response that follows was judged by its step's checks on header fields and body (bit
    /// `j` is set when the `j`th of them failed) and its extractors took `extracted`. Pushed
    /// only for steps with such checks or extractors.
    Judged { failed: u64, extracted: Extracted },
    /// A request (`request`) the server declined without processing it: it goes back into the
    /// budget to be sent again.
    Refused { request: u32 },
    /// A request failed (several failing at once come one event each, since each is counted
    /// under its own name).
    Failed { request: u32, kind: ErrorKind, why: Why },
    /// The connection could not be set up: a failed connect, and the request claimed for it
    /// (the connection's next, which the loop knows) fails as `kind`.
    SetupFailed { kind: ErrorKind, why: Why },
    /// The server allows at most this many requests in flight on a connection, fewer than asked.
    Limited(u32),
    /// QUIC: `n` packets arrived that could not be parsed or opened (stray, forged, cut short)
    /// and were dropped unread, as RFC 9000 §5.2 asks.
    DroppedPackets(u64),
}
