//! One HTTP/3 connection as a session: the QUIC transport (`quic::Transport`) with our control
//! stream, the server's unidirectional streams and one bidirectional stream per request, and
//! the rules that turn what happens on them into what the run counts.
//!
//! Counting rules:
//! - Set-up is part of connecting: the QUIC handshake (TLS inside it, ALPN h3) must be done
//!   within the connect timeout, and the connection counts as made once it is. A failure before
//!   (nothing answering on the port, a TLS alert, a refused connection) is a failed connect, and
//!   the request the connection was opened for fails with it.
//! - Each request stream is one request, started only when the server's stream limit has room:
//!   a limit below `-p` found when a fresh connection fills up is reported (`Event::Limited`).
//!   A fresh connection that allows no request stream fails the request it was opened for and
//!   closes; one whose server allows no further stream for the connect timeout, while requests
//!   are left to send, closes too (the loop opens another): no stream limit or credit the server
//!   withholds leaves a run waiting without a deadline.
//!   A complete response (the stream's FIN after a final status) is ok; a malformed one is a
//!   protocol error of that stream; a stream the server resets is a reset error, except with
//!   H3_REQUEST_REJECTED, which RFC 9114 §4.1.1 says was not processed: refused, to be sent
//!   again.
//! - GOAWAY: no request starts after it; those below its id finish. Streams from its id on
//!   were not processed (§5.2), but they are left to the server's answer rather than cancelled
//!   at once, because servers that answer the stream GOAWAY names exist (the h3 crate's
//!   `shutdown` does): a response counts as ok, a reset or the connection's end as refused (sent
//!   again elsewhere), and whatever the server has not settled [`GOAWAY_GRACE`] after its
//!   GOAWAY is cancelled and refused. Then the connection closes and the loop opens another.
//! - A connection error (a broken control stream, a QPACK dynamic-table reference, a frame where
//!   it may not be) closes the connection with its H3 code and fails every request on it as a
//!   protocol error; the connection ending otherwise (the server closing it, an idle timeout)
//!   fails them as the transport says (`quic::Lost`).
//! - A server may answer before it has read a request's body and stop the rest of it
//!   (STOP_SENDING, RFC 9114 §4.1.2): the rest is not sent (RESET_STREAM), and the response
//!   counts as any other.
//! - A request without its response within the request timeout is cancelled (stream reset with
//!   H3_REQUEST_CANCELLED) and counted as a timeout; the connection goes on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::H3Error;
use super::error::code;
use super::frame::Settings;
use super::qpack;
use super::request::{Config as RequestConfig, Filled};
use super::response::ResponseStream;
use super::uni::{ControlEvent, SeenStreams, UniStream};
use crate::quic::{self, Event as QuicEvent, ReadEnd, StreamId, Transport};
use crate::session::{Event, KeptCheckTable, OpenStreams, SpareKept, Units, Why, judge, kept_checks};
use crate::stats::ErrorKind;

/// How long the requests a GOAWAY names as unprocessed are left to the server (a response, or
/// a reset) before they are cancelled and sent again elsewhere: long enough for a server still
/// answering them by mistake, short enough that one ignoring them does not hold the run.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// What every HTTP/3 session of a run shares, made once per run.
pub(crate) struct Setup {
    pub request: RequestConfig,
    pub quic: quic::Config,
    pub server: SocketAddr,
    /// The name TLS checks the certificate against.
    pub server_name: String,
    /// Per request, its checks on header fields and body (whose responses are kept); empty when none has.
    pub kept_checks: KeptCheckTable,
}

/// One request in flight on its stream.
#[derive(Debug)]
struct Request {
    stream: StreamId,
    /// Which of the run's requests it is.
    request: u32,
    /// When it was due (the schedule's instant; when it was sent, in the closed model).
    due: Instant,
    sent_at: Instant,
    /// Bytes of the request (head, then body) handed to QUIC so far.
    written: usize,
    /// `Session::transmits` when it started: it went to a send once that count moved on.
    epoch: u64,
    first_byte: bool,
    response: ResponseStream,
    /// A templated request's stream bytes, filled when it started.
    filled: Option<Bytes>,
}

pub(crate) struct Session {
    setup: Arc<Setup>,
    /// The run's request heads, this connection's copy when small (see `RequestConfig::heads`).
    heads_out: Bytes,
    transport: Transport,
    /// The handshake is done with h3: the connection is made.
    established: bool,
    /// Failed, lost or closed: every request is accounted for; close it.
    ended: bool,
    /// By stream number (QUIC numbers a connection's own bidirectional streams 0, 4, 8, ...).
    /// Found through a hash map, the first touch of a response's request was 70% of `process`
    /// against a fast server.
    requests: OpenStreams<Request>,
    /// The server's unidirectional streams, a handful.
    uni: Vec<(StreamId, UniStream)>,
    seen: SeenStreams,
    /// What the control stream said during one read (reused).
    control_events: Vec<ControlEvent>,
    /// The last response head decoded: the next one is most likely the same bytes.
    heads: qpack::HeadCache,
    /// Where templated requests are filled.
    filled_requests: Filled,
    /// Kept bodies between responses, so that their memory is reused.
    spare_kept: SpareKept,
    /// The server's GOAWAY: no stream starts any more; those from this id on were not processed.
    goaway: Option<u64>,
    /// When requests from the GOAWAY's id on are given up on, if any are still open.
    goaway_by: Option<Instant>,
    /// A stream opened for a request the budget then did not give: the next request takes it,
    /// so no stream number is skipped (a later one would open it at the server).
    spare: Option<StreamId>,
    /// The first fill after set-up is over: a stream limit found after it is the server's
    /// credit lagging, not its limit.
    filled: bool,
    /// Since when requests wait for the server to allow another stream (MAX_STREAMS), with none
    /// in flight: the connection is not idle then, but it waits no longer than the connect
    /// timeout.
    blocked_since: Option<Instant>,
    /// The server allowed no stream when one was wanted: none on a fresh connection, or none
    /// more for the connect timeout. No request starts here any more and the connection closes
    /// (`must_close`); the next connection has the server's limit afresh.
    starved: bool,
    /// No later than the start of the oldest request in flight (None: none since the last
    /// exact look).
    oldest_started: Option<Instant>,
    /// QUIC's next timer, as it was after the last call into the transport.
    quic_deadline: Option<Instant>,
    /// Batches `poll_transmit` gave.
    transmits: u64,
    /// The transport's dropped packets already told as events.
    dropped_told: u64,
    /// Something happened since the last `poll_transmit` came back empty.
    poked: bool,
}

impl Session {
    /// Starts the QUIC handshake; its first datagrams wait in `poll_transmit`.
    pub(crate) fn new(setup: Arc<Setup>, now: Instant) -> Result<Self, Why> {
        let transport = Transport::connect(&setup.quic, setup.server, &setup.server_name, now)
            .map_err(|e| Why::from(e.to_string()))?;
        let streams = setup.request.streams;
        let mut session = Session {
            heads_out: setup.request.heads_for_session(),
            setup,
            transport,
            established: false,
            ended: false,
            requests: OpenStreams::new(streams, 2),
            uni: Vec::new(),
            seen: SeenStreams::default(),
            control_events: Vec::new(),
            heads: qpack::HeadCache::default(),
            filled_requests: Filled::default(),
            spare_kept: SpareKept::default(),
            goaway: None,
            goaway_by: None,
            spare: None,
            filled: false,
            blocked_since: None,
            starved: false,
            oldest_started: None,
            quic_deadline: None,
            transmits: 0,
            dropped_told: 0,
            poked: true,
        };
        session.quic_deadline = session.transport.poll_timeout();
        Ok(session)
    }

    pub(crate) fn is_established(&self) -> bool {
        self.established
    }

    /// What one receive brought: a datagram, or several of `segment_size` bytes (UDP GRO).
    pub(crate) fn receive(&mut self, bytes: &[u8], segment_size: Option<usize>, now: Instant, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        self.transport.receive(now, bytes, segment_size);
        let dropped = self.transport.dropped_packets();
        if dropped > self.dropped_told {
            events.push(Event::DroppedPackets(dropped - self.dropped_told));
            self.dropped_told = dropped;
        }
        self.poked = true;
        self.process(now, events);
    }

    /// Starts as many requests as `units`, `-p` and the server's stream limit allow.
    pub(crate) fn start_requests(&mut self, now: Instant, units: &mut Units<'_>, events: &mut Vec<Event>) {
        if self.ended || !self.established || self.starved {
            return;
        }
        if self.goaway.is_some() {
            if self.requests.is_empty()
                && let Some(request) = units.take_unused_claim()
            {
                // The connection was opened for a request that cannot start on it (GOAWAY came
                // first): it fails, so such a server cannot keep the run reconnecting forever.
                let why = "the server sent GOAWAY before any request on a fresh HTTP/3 connection";
                events.push(Event::Failed { request, kind: ErrorKind::Protocol, why: why.into() });
            }
            return;
        }
        let streams = self.setup.request.streams as usize;
        let mut limited = false;
        while self.requests.len() < streams {
            // The stream is opened before a request is taken: none is taken that cannot start.
            let Some(stream) = self.spare.take().or_else(|| self.transport.open_bi()) else {
                limited = true;
                break;
            };
            let Some(start) = units.take(now, !self.requests.is_empty()) else {
                self.spare = Some(stream);
                break;
            };
            let mut request = Request {
                stream,
                request: start.request,
                due: start.due,
                sent_at: now,
                written: 0,
                epoch: self.transmits,
                first_byte: false,
                response: ResponseStream::default(),
                filled: None,
            };
            if let Some(checks) = kept_checks(&self.setup.kept_checks, start.request) {
                match checks.only_fields() {
                    Some(fields) => request.response.keep_only(fields),
                    None => request.response.keep(self.spare_kept.take(), checks),
                }
            }
            if let Some(mut fill) = units.fill(start.request)
                && let Some(template) = self.setup.request.template(start.request, &fill)
            {
                request.filled = Some(template.render(&mut fill, &mut self.filled_requests));
            }
            write_request(&mut self.transport, &self.heads_out, &self.setup.request, &mut request);
            self.requests.insert(stream.number(), request);
            self.oldest_started.get_or_insert(now);
            self.poked = true;
        }
        if limited && !self.filled && self.requests.len() < streams {
            events.push(Event::Limited(self.requests.len() as u32));
            if self.requests.is_empty() {
                // Nothing can start here: the request the connection was opened for fails, and
                // the connection closes (as HTTP/2's does at SETTINGS_MAX_CONCURRENT_STREAMS 0
                // and ours at a GOAWAY first), so the budget runs down rather than wait on it.
                self.starved = true;
                if let Some(request) = units.take_unused_claim() {
                    let why = "the server allowed no request stream on a fresh HTTP/3 connection";
                    events.push(Event::Failed { request, kind: ErrorKind::Protocol, why: why.into() });
                }
            }
        }
        self.filled = true;
        // Requests wait for the server's MAX_STREAMS only while there are requests to send: with
        // the budget spent the connection is idle, and closes at once.
        let waiting = limited && !self.starved && self.requests.is_empty() && units.has_more();
        self.blocked_since = if waiting { Some(self.blocked_since.unwrap_or(now)) } else { None };
    }

    /// The next batch of datagrams, written into `out` (cleared first): the size of each
    /// datagram (the last may be shorter), or None when there is nothing to send.
    pub(crate) fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        let transmit = self.transport.poll_transmit(now, out);
        self.quic_deadline = self.transport.poll_timeout();
        match transmit {
            Some(batch) => {
                self.transmits += 1;
                Some(batch.segment_size)
            }
            None => {
                self.poked = false;
                None
            }
        }
    }

    /// Whether `poll_transmit` may have something: QUIC only says by being asked.
    pub(crate) fn wants_transmit(&self) -> bool {
        self.poked
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        let request = self.setup.request.request_timeout.and_then(|t| self.oldest_started?.checked_add(t));
        let blocked = self.blocked_since.and_then(|t| t.checked_add(self.setup.request.connect_timeout));
        [self.quic_deadline, request, blocked, self.goaway_by].into_iter().flatten().min()
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        if self.quic_deadline.is_some_and(|d| now >= d) {
            self.transport.handle_timeout(now);
            self.poked = true;
            self.process(now, events);
            if self.ended {
                return;
            }
        }
        if self.goaway_by.is_some_and(|by| now >= by) {
            self.goaway_by = None;
            let id = self.goaway.unwrap_or(0);
            self.cancel_where(|r| r.stream.number() >= id, |request| events.push(Event::Refused { request }));
        }
        if self.blocked_since.is_some_and(|t| now.saturating_duration_since(t) >= self.setup.request.connect_timeout) {
            // The server did not allow another stream in all that time: the connection closes
            // rather than wait for ever, and for good. Clearing the wait alone was undone by the
            // loop's next `start_requests`, which found the same limit and waited again: a `-n`
            // run against a server granting no stream ran idle for ever.
            self.blocked_since = None;
            self.starved = true;
        }
        if let Some(timeout) = self.setup.request.request_timeout
            && let Some(cutoff) = now.checked_sub(timeout)
        {
            let why = "no complete response within --timeout";
            self.cancel_where(
                |r| r.sent_at <= cutoff,
                |request| events.push(Event::Failed { request, kind: ErrorKind::Timeout, why: why.into() }),
            );
            self.oldest_started = self.requests.iter().map(|(_, r)| r.sent_at).min();
        }
    }

    /// The socket under the connection failed: every request on it fails as `kind` (before
    /// set-up, the connect does).
    pub(crate) fn fail(&mut self, kind: ErrorKind, why: Why, events: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        self.ended = true;
        if !self.established {
            events.push(Event::SetupFailed { kind, why });
        } else {
            for (_, r) in self.requests.iter() {
                events.push(Event::Failed { request: r.request, kind, why: why.clone() });
            }
        }
        self.requests.clear();
    }

    /// Cancels (H3_REQUEST_CANCELLED) every request `which` picks, telling `cancelled` which
    /// of the run's requests each was; returns how many.
    fn cancel_where(&mut self, which: impl Fn(&Request) -> bool, mut cancelled: impl FnMut(u32)) -> u64 {
        let transport = &mut self.transport;
        let n = self.requests.close_where(|_, r| {
            let pick = which(r);
            if pick {
                transport.cancel(r.stream, code::H3_REQUEST_CANCELLED);
                cancelled(r.request);
            }
            pick
        });
        self.poked |= n > 0;
        n
    }

    /// The loop closes the connection: tell the server with CONNECTION_CLOSE (H3_NO_ERROR),
    /// which the next `poll_transmit` gives, so it need not keep the connection until its idle
    /// timeout. Requests still in flight are the loop's to count (aborted).
    pub(crate) fn close(&mut self, now: Instant) {
        if !self.ended {
            self.transport.close(now, code::H3_NO_ERROR, b"");
            self.ended = true;
        }
    }

    /// Failed, closed, going away with nothing left to answer, or denied any stream.
    pub(crate) fn must_close(&self) -> bool {
        self.ended || self.starved || (self.goaway.is_some() && self.requests.is_empty())
    }

    /// Nothing in flight, and not waiting for the server to allow a stream.
    pub(crate) fn is_idle(&self) -> bool {
        self.requests.is_empty() && self.blocked_since.is_none()
    }

    /// Requests in flight whose bytes went to a send.
    pub(crate) fn sent_in_flight(&self) -> u64 {
        if self.ended {
            return 0;
        }
        self.requests.iter().filter(|(_, r)| r.epoch < self.transmits).count() as u64
    }

    /// Takes every event the transport has.
    fn process(&mut self, now: Instant, events: &mut Vec<Event>) {
        while let Some(event) = self.transport.poll_event() {
            self.handle(event, now, events);
            if self.ended {
                break;
            }
        }
        self.quic_deadline = self.transport.poll_timeout();
    }

    fn handle(&mut self, event: QuicEvent, now: Instant, events: &mut Vec<Event>) {
        match event {
            QuicEvent::Connected { alpn } => self.connected(alpn, now, events),
            QuicEvent::UniOpened => {
                while let Some(stream) = self.transport.accept_uni() {
                    self.uni.push((stream, UniStream::default()));
                    self.read_uni(stream, now, events);
                }
            }
            QuicEvent::Readable(stream) => match self.requests.index(stream.number()) {
                Some(i) => self.read_request(i, now, events),
                None => self.read_uni(stream, now, events),
            },
            QuicEvent::Writable(stream) => {
                if let Some(i) = self.requests.index(stream.number()) {
                    let request = self.requests.get_mut(i);
                    write_request(&mut self.transport, &self.heads_out, &self.setup.request, request);
                }
            }
            QuicEvent::Stopped { stream, code } => self.stopped(stream, code),
            QuicEvent::BiAvailable => self.blocked_since = None,
            QuicEvent::Lost(lost) => self.lost(lost, events),
        }
    }

    /// The server asked us to stop sending on `stream` (STOP_SENDING). On a request stream that
    /// is a server done with the body (RFC 9114 §4.1.2 lets it answer first): RESET_STREAM
    /// with its code ends our side (RFC 9000 §3.5 requires it), and the response is still read
    /// and counted. quinn-proto does not reset by itself but goes on sending the body, which
    /// caddy's quic-go counts against the connection's flow control and never credits back:
    /// with 1 MB bodies its connections stalled after about 2 MB. Our control stream must stay
    /// open, so a STOP_SENDING on it is left alone.
    fn stopped(&mut self, stream: StreamId, code: u64) {
        if stream.is_bidi() {
            self.transport.reset_send(stream, code);
            self.poked = true;
        }
    }

    fn connected(&mut self, alpn: Option<Vec<u8>>, now: Instant, events: &mut Vec<Event>) {
        if alpn.as_deref() != Some(quic::ALPN_H3) {
            let chose = match alpn {
                Some(p) => format!("it chose {}", String::from_utf8_lossy(&p)),
                None => "it chose no protocol".to_string(),
            };
            let why = format!("the server does not offer HTTP/3 (ALPN: we offered h3, {chose})");
            self.transport.close(now, code::H3_NO_ERROR, b"");
            return self.fail(ErrorKind::Tls, why.into(), events);
        }
        // Our control stream: its type and SETTINGS, a few bytes that always fit the window.
        let Some(control) = self.transport.open_uni() else {
            let why = "the server allows no unidirectional stream for HTTP/3's control stream";
            self.transport.close(now, code::H3_GENERAL_PROTOCOL_ERROR, b"");
            return self.fail(ErrorKind::Protocol, why.into(), events);
        };
        let _ = self.transport.write(control, self.setup.request.control.clone());
        self.established = true;
    }

    /// Reads what came for the request at place `i` of `requests`.
    fn read_request(&mut self, i: usize, now: Instant, events: &mut Vec<Event>) {
        let request = self.requests.get_mut(i);
        let stream = request.stream;
        let heads = &mut self.heads;
        let mut error = None;
        let mut got = false;
        let end = self.transport.read(stream, |bytes| {
            got |= !bytes.is_empty();
            if error.is_none()
                && let Err(e) = request.response.receive(bytes, heads)
            {
                error = Some(e);
            }
        });
        if got && !request.first_byte {
            request.first_byte = true;
            events.push(Event::FirstByte { request: request.request, sent_at: request.sent_at, at: now });
        }
        let (due, sent_at, which) = (request.due, request.sent_at, request.request);
        let finished = match (error, end) {
            (Some(e), _) => return self.stream_error(i, e, now, events),
            (None, Ok(ReadEnd::Blocked)) => return,
            (None, Ok(ReadEnd::Finished)) => request.response.finish(),
            (None, Ok(ReadEnd::Reset(code))) => {
                self.requests.remove(i);
                if code == code::H3_REQUEST_REJECTED || self.goaway.is_some_and(|id| stream.number() >= id) {
                    events.push(Event::Refused { request: which });
                } else {
                    let why = format!("the server reset a request stream ({})", code_name(code));
                    events.push(Event::Failed { request: which, kind: ErrorKind::Reset, why: why.into() });
                }
                return;
            }
            (None, Err(e)) => {
                self.requests.remove(i);
                events.push(Event::Failed { request: which, kind: ErrorKind::Reset, why: e.to_string().into() });
                return;
            }
        };
        match finished {
            Ok(response) => {
                if let Some(kept) = self.requests.get_mut(i).response.take_kept() {
                    if let Some((failed, extracted)) = judge(&self.setup.kept_checks, which, &kept) {
                        events.push(Event::Judged { failed, extracted });
                    }
                    self.spare_kept.give(kept);
                }
                self.requests.remove(i);
                if let Some(value) = response.retry_after {
                    events.push(Event::RetryAfter { status: response.status, value });
                }
                events.push(Event::Response { request: which, status: response.status, due, sent_at, at: now });
            }
            Err(e) => self.stream_error(i, e, now, events),
        }
    }

    /// What the server got wrong on the request at place `i`: that request fails, or, for a
    /// connection error, every request does and the connection closes with the error's code.
    fn stream_error(&mut self, i: usize, error: H3Error, now: Instant, events: &mut Vec<Event>) {
        if error.is_connection_error() {
            return self.connection_error(error, now, events);
        }
        let (stream, request) = (self.requests.get(i).stream, self.requests.get(i).request);
        self.requests.remove(i);
        self.transport.cancel(stream, error.code());
        self.poked = true;
        events.push(Event::Failed { request, kind: ErrorKind::Protocol, why: error.to_string().into() });
    }

    fn connection_error(&mut self, error: H3Error, now: Instant, events: &mut Vec<Event>) {
        self.transport.close(now, error.code(), b"");
        self.poked = true;
        self.fail(ErrorKind::Protocol, error.to_string().into(), events);
    }

    fn read_uni(&mut self, stream: StreamId, now: Instant, events: &mut Vec<Event>) {
        let Some(index) = self.uni.iter().position(|(s, _)| *s == stream) else { return };
        let Session { transport, uni, seen, control_events, .. } = self;
        let reader = &mut uni[index].1;
        let mut error = None;
        let end = transport.read(stream, |bytes| {
            if error.is_none()
                && let Err(e) = reader.receive(seen, bytes, control_events)
            {
                error = Some(e);
            }
        });
        let error = error.or_else(|| match end {
            Ok(ReadEnd::Finished | ReadEnd::Reset(_)) => reader.finish().err(),
            _ => None,
        });
        if matches!(end, Ok(ReadEnd::Finished | ReadEnd::Reset(_)) | Err(_)) {
            self.uni.swap_remove(index);
        }
        let mut control = std::mem::take(&mut self.control_events);
        for event in control.drain(..) {
            match event {
                ControlEvent::GoAway(id) => self.goaway(id, now),
                ControlEvent::Settings(settings) => self.settings(settings, now, events),
            }
        }
        self.control_events = control;
        if let Some(e) = error {
            self.connection_error(e, now, events);
        }
    }

    /// The server's SETTINGS: a limit on request headers below ours means no request of this
    /// run can go to it (RFC 9114 §4.2.2), which every request would otherwise find out alone.
    fn settings(&mut self, settings: Settings, now: Instant, events: &mut Vec<Event>) {
        let ours = self.setup.request.field_section_size;
        if let Some(limit) = settings.max_field_section_size
            && limit < ours
        {
            let why = format!(
                "the server takes request headers of at most {limit} bytes (SETTINGS_MAX_FIELD_SECTION_SIZE); ours are {ours}"
            );
            self.transport.close(now, code::H3_NO_ERROR, b"");
            self.poked = true;
            self.fail(ErrorKind::Protocol, why.into(), events);
        }
    }

    /// GOAWAY: no request starts here any more; those from `id` on get [`GOAWAY_GRACE`] to
    /// be settled by the server (a later GOAWAY may only lower the id, and keeps the grace).
    fn goaway(&mut self, id: u64, now: Instant) {
        if self.goaway.is_none() {
            self.goaway_by = now.checked_add(GOAWAY_GRACE);
        }
        self.goaway = Some(id);
        self.spare = None;
        self.blocked_since = None;
    }

    /// The connection is over: the requests still on it fail as the transport says, except
    /// those a GOAWAY said were not processed, which are sent again.
    fn lost(&mut self, lost: quic::Lost, events: &mut Vec<Event>) {
        if let Some(id) = self.goaway {
            self.requests.close_where(|stream, r| {
                let refused = stream >= id;
                if refused {
                    events.push(Event::Refused { request: r.request });
                }
                refused
            });
        }
        if self.established && self.requests.is_empty() {
            self.ended = true;
            return;
        }
        let mut why = match lost.application_code {
            Some(code) => format!("{} ({})", lost.why, code_name(code)),
            None => lost.why,
        };
        if lost.peer_alert.is_some() && !self.established && self.setup.server_name.parse::<std::net::IpAddr>().is_ok()
        {
            // A server that picks its certificate by name (caddy with a site bound to one host)
            // refuses a handshake without one, and a client sends no name (SNI) for an address
            // (RFC 6066 §3).
            why.push_str(
                " (the URL names an IP address, so no server name (SNI) was sent: the server may need one; \
                 use a host name that resolves to it, such as https://localhost:PORT/)",
            );
        }
        self.fail(lost.kind, why.into(), events);
    }
}

/// Hands QUIC as much of `request` (its head, from `heads`, then its body) as its windows
/// take, and the stream's end after.
fn write_request(transport: &mut Transport, heads: &Bytes, config: &RequestConfig, request: &mut Request) {
    // A filled request is all head: its body is in it. Read in place, not cloned: a clone of
    // a `Bytes` cut from the arena is a count of references moved up and down again.
    static NO_BODY: Bytes = Bytes::new();
    let Request { stream, request: which, written, filled, .. } = request;
    let (heads, head, body) = match filled.as_ref() {
        Some(filled) => (filled, 0..filled.len(), &NO_BODY),
        None => (heads, config.head_range(*which), config.body(*which)),
    };
    let total = head.len() + body.len();
    while *written < total {
        let rest = if *written < head.len() {
            heads.slice(head.start + *written..head.end)
        } else {
            body.slice(*written - head.len()..)
        };
        match transport.write(*stream, rest) {
            Ok(0) => return,
            Ok(n) => *written += n,
            // The server stopped the stream: what it does with it shows on the read side
            // (a response, or a reset).
            Err(_) => {
                *written = total;
                return;
            }
        }
    }
    // Closed or stopped: as above, the read side tells.
    let _ = transport.finish(*stream);
}

/// An HTTP/3 error code's name, for reasons shown to the user.
fn code_name(value: u64) -> String {
    let name = match value {
        code::H3_NO_ERROR => "H3_NO_ERROR",
        code::H3_GENERAL_PROTOCOL_ERROR => "H3_GENERAL_PROTOCOL_ERROR",
        code::H3_INTERNAL_ERROR => "H3_INTERNAL_ERROR",
        code::H3_EXCESSIVE_LOAD => "H3_EXCESSIVE_LOAD",
        code::H3_REQUEST_REJECTED => "H3_REQUEST_REJECTED",
        code::H3_REQUEST_CANCELLED => "H3_REQUEST_CANCELLED",
        code::H3_REQUEST_INCOMPLETE => "H3_REQUEST_INCOMPLETE",
        code::H3_MESSAGE_ERROR => "H3_MESSAGE_ERROR",
        _ => return format!("code {value:#x}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests;
