//! One HTTP/2 connection as a session: the protocol state machine (`conn::Connection`) plus the
//! rules that turn what it reports into what the run counts.
//!
//! Counting rules:
//! - Set-up is part of connecting: the preface and SETTINGS go out as soon as the transport is
//!   up, and the connection counts as made only once the server's SETTINGS arrive, within the
//!   connect timeout. A failure before (no SETTINGS in time, an HTTP/1.x answer, a close) is a
//!   failed connect, so a target that cannot speak HTTP/2 ends the run with its reason instead
//!   of being redialled forever.
//! - Each stream is one request. RST_STREAM fails its stream as a reset, except REFUSED_STREAM,
//!   which RFC 9113 §8.7 says was not processed: refused, to be sent again. So are the streams
//!   above a GOAWAY NO_ERROR's last id; a GOAWAY with an error code fails them as protocol
//!   errors, and the streams a connection then loses with its close count as protocol errors,
//!   not resets.
//! - A connection error (malformed frame, HPACK, flow control) fails every open stream as a
//!   protocol error. A stream without its response within the request timeout is reset with
//!   CANCEL and counted as a timeout; the connection goes on.
//! - A server allowing no stream at all on a fresh connection fails the request the connection
//!   was opened for, so such a server cannot keep a run reconnecting forever.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::{Connection, Event as H2Event, Request};
use super::frame::code;
use crate::session::{Event, KeptCheckTable, Negotiated, Transmit, Units, Why};
use crate::stats::ErrorKind;

/// What every HTTP/2 session of a run shares: encoded once, shared by reference.
#[derive(Debug)]
pub(crate) struct Config {
    /// The run's requests: header blocks and bodies.
    pub requests: Arc<[Request]>,
    /// Streams to keep in flight on each connection (-p).
    pub streams: u32,
    pub connect_timeout: Duration,
    pub request_timeout: Option<Duration>,
    /// Per request, its checks on header fields and body (whose responses are kept); empty when none has.
    pub kept_checks: KeptCheckTable,
}

pub(crate) struct Session {
    config: Arc<Config>,
    conn: Connection,
    /// The server's SETTINGS are in: the connection is made.
    established: bool,
    /// Until established: when set-up must be done.
    setup_by: Option<Instant>,
    /// A GOAWAY reported an error: streams lost with the connection are protocol errors.
    goaway_error: bool,
    /// The connection failed or the peer closed it: every stream is accounted for; close it.
    ended: bool,
    /// No later than the start of the oldest open stream (None: no stream started since the
    /// last exact look): the request deadline is this plus the timeout.
    oldest_started: Option<Instant>,
    /// The connection's events of one `receive` (reused).
    h2_events: Vec<H2Event>,
}

impl Session {
    /// A session on a transport that is up; queues the preface and our SETTINGS. Over TLS,
    /// ALPN must have chosen h2.
    pub(crate) fn new(config: Arc<Config>, negotiated: Negotiated<'_>, connect_started: Instant) -> Result<Self, Why> {
        if let Negotiated::Tls(alpn) = negotiated
            && alpn != Some(b"h2")
        {
            let chose = match alpn {
                Some(p) => format!("it chose {}", String::from_utf8_lossy(p)),
                None => "it chose no protocol".to_string(),
            };
            return Err(format!("the server does not offer HTTP/2 over TLS (ALPN: we offered h2, {chose})").into());
        }
        let conn =
            Connection::new(config.requests.clone(), config.streams).with_kept_checks(config.kept_checks.clone());
        Ok(Session {
            setup_by: Some(connect_started.checked_add(config.connect_timeout).unwrap_or(connect_started)),
            config,
            conn,
            established: false,
            goaway_error: false,
            ended: false,
            oldest_started: None,
            h2_events: Vec::new(),
        })
    }

    pub(crate) fn is_established(&self) -> bool {
        self.established
    }

    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        let mut h2_events = std::mem::take(&mut self.h2_events);
        let received = self.conn.receive(bytes, now, &mut h2_events);
        for event in h2_events.drain(..) {
            self.count(event, now, events);
        }
        self.h2_events = h2_events;
        match received {
            Err(e) => self.fail(ErrorKind::Protocol, e.to_string().into(), events),
            Ok(()) if !self.established && self.conn.peer_settings_seen() => {
                self.established = true;
                self.setup_by = None;
            }
            Ok(()) => {}
        }
    }

    /// Starts as many streams as `units`, `-p` and the server allow. Streams start only once
    /// the server's SETTINGS are in, so its stream limit is honoured from the first request
    /// (rather than guessed, and what went beyond refused).
    pub(crate) fn start_requests(&mut self, now: Instant, units: &mut Units<'_>, events: &mut Vec<Event>) {
        if self.ended || !self.established {
            return;
        }
        // can_start is asked before every take, so no request is taken for a stream that cannot
        // start (start_request succeeds whenever it is above 0).
        while self.conn.can_start() > 0
            && let Some(start) = units.take(now, self.conn.open_streams() > 0)
        {
            if let Some(mut fill) = units.fill(start.request)
                && self.conn.fills(start.request, &fill)
            {
                self.conn.start_filled(now, start.due, start.request, &mut fill);
            } else {
                self.conn.start_request(now, start.due, start.request);
            }
            self.oldest_started.get_or_insert(now);
        }
        // The server's doing only: under a rate the claim may just wait for its due instant.
        if self.conn.open_streams() == 0
            && self.conn.can_start() == 0
            && let Some(request) = units.take_unused_claim()
        {
            let why = "the server allowed no stream on a fresh connection (SETTINGS_MAX_CONCURRENT_STREAMS 0, or GOAWAY first)";
            events.push(Event::Failed { request, kind: ErrorKind::Protocol, why: why.into() });
        }
    }

    pub(crate) fn poll_transmit(&mut self, out: &mut Vec<u8>) -> Transmit {
        if !self.conn.wants_write() {
            return Transmit::Nothing;
        }
        self.conn.take_output(out);
        Transmit::Bytes
    }

    pub(crate) fn wants_transmit(&self) -> bool {
        self.conn.wants_write()
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        if !self.established {
            return self.setup_by;
        }
        let timeout = self.config.request_timeout?;
        self.oldest_started.and_then(|t| t.checked_add(timeout))
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        if !self.established {
            if self.setup_by.is_some_and(|d| now >= d) {
                let why = format!("no HTTP/2 SETTINGS from the server within {:?}", self.config.connect_timeout);
                self.fail(ErrorKind::Connect, why.into(), events);
            }
            return;
        }
        let Some(timeout) = self.config.request_timeout else { return };
        if let Some(cutoff) = now.checked_sub(timeout) {
            // Streams started at or before the cutoff are out of time.
            let why = "no complete response within --timeout";
            self.conn.expire(cutoff + Duration::from_nanos(1), |request| {
                events.push(Event::Failed { request, kind: ErrorKind::Timeout, why: why.into() });
            });
        }
        self.oldest_started = self.conn.oldest_stream_start();
    }

    /// The peer closed the connection: the streams still open are lost.
    pub(crate) fn peer_closed(&mut self, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        if !self.established {
            let why = "the server closed the connection before its HTTP/2 SETTINGS";
            return self.fail(ErrorKind::Connect, why.into(), events);
        }
        let open = self.conn.open_streams();
        if open > 0 {
            let kind = if self.goaway_error { ErrorKind::Protocol } else { ErrorKind::Reset };
            let why = format!("the server closed the connection with {open} HTTP/2 streams in flight");
            return self.fail(kind, why.into(), events);
        }
        self.ended = true;
    }

    /// The connection cannot go on: before set-up, a failed connect; after, every open stream
    /// fails as `kind`.
    pub(crate) fn fail(&mut self, kind: ErrorKind, why: Why, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        self.ended = true;
        if !self.established {
            events.push(Event::SetupFailed { kind, why });
        } else {
            for request in self.conn.open_requests() {
                events.push(Event::Failed { request, kind, why: why.clone() });
            }
        }
    }

    /// Failed, closed, or going away with nothing left to answer.
    pub(crate) fn must_close(&self) -> bool {
        self.ended || (self.conn.is_goaway() && self.conn.open_streams() == 0)
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.conn.open_streams() == 0
    }

    /// Open streams whose HEADERS reached a send.
    pub(crate) fn sent_in_flight(&self) -> u64 {
        if self.ended { 0 } else { self.conn.sent_open_streams() as u64 }
    }

    /// What the run counts of one of the connection's events.
    fn count(&mut self, event: H2Event, now: Instant, events: &mut Vec<Event>) {
        match event {
            H2Event::Response { request, status, due, sent_at, first_byte_at, .. } => {
                events.push(Event::FirstByte { request, sent_at, at: first_byte_at });
                events.push(Event::Response { request, status, due, sent_at, at: now });
            }
            H2Event::RetryAfter { status, value, .. } => events.push(Event::RetryAfter { status, value }),
            H2Event::Judged { failed, extracted, .. } => events.push(Event::Judged { failed, extracted }),
            H2Event::StreamReset { code: code::REFUSED_STREAM, request, .. } => events.push(Event::Refused { request }),
            H2Event::StreamReset { code, request, .. } => {
                let why = format!("the server reset a stream (RST_STREAM {})", code::name(code));
                events.push(Event::Failed { request, kind: ErrorKind::Reset, why: why.into() });
            }
            H2Event::GoAway { code: code::NO_ERROR, unanswered, .. } => {
                events.extend(unanswered.into_iter().map(|(_, _, request)| Event::Refused { request }));
            }
            H2Event::GoAway { code, unanswered, .. } => {
                self.goaway_error = true;
                let why: Why = format!("the server sent GOAWAY {}", code::name(code)).into();
                for (_, _, request) in unanswered {
                    events.push(Event::Failed { request, kind: ErrorKind::Protocol, why: why.clone() });
                }
            }
            H2Event::StreamsLimited { limit } => events.push(Event::Limited(limit)),
        }
    }
}

#[cfg(test)]
mod tests;
