//! One HTTP/1.1 connection as a Sans-I/O session: one request at a time (no pipelining), its
//! response found by the scanner, the request's timeout as the session's deadline.
//!
//! Counting rules: a complete response is ok whatever its status; a malformed one is a protocol
//! error; a close before any response byte, or before the response is complete, is a reset;
//! no complete response by the deadline is a timeout. The connection is closed (and a new one
//! takes its place) after `Connection: close`, bytes beyond the response, a response that came
//! while the request was still being written, or bytes nobody asked for.

use std::time::{Duration, Instant};

use std::sync::Arc;

use super::Template;
use super::scanner::{Response, Scanner};
use crate::session::{Event, KeptCheckTable, Transmit, Units, Why, judge, kept_checks};
use crate::stats::ErrorKind;

/// What every HTTP/1.1 session of a run shares.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// With false, every request gets its own connection (the request says `Connection: close`).
    pub keepalive: bool,
    pub request_timeout: Option<Duration>,
    /// Per request, its template if it has slots (a request without is sent from the bytes
    /// encoded once); empty when none has.
    pub templates: Arc<[Option<Template>]>,
    /// Per request, its checks on header fields and body (whose responses are kept); empty when none has.
    pub kept_checks: KeptCheckTable,
}

pub(crate) struct Session {
    config: Config,
    scanner: Scanner,
    /// A request was started and has not ended as ok or error.
    in_flight: bool,
    /// Which of the run's requests it is.
    request: u32,
    /// Its bytes were taken for a send.
    taken: bool,
    /// Taken but not yet all written: a response now means the server answered early.
    unwritten: bool,
    first_byte_seen: bool,
    /// When the request in flight was due (when it was sent, in the closed model).
    due: Instant,
    sent_at: Instant,
    deadline: Option<Instant>,
    must_close: bool,
    /// The request in flight is a template's, filled in here.
    filled: bool,
    rendered: Vec<u8>,
    /// The filled body, whose length goes before it.
    body: Vec<u8>,
}

impl Session {
    /// A session on a connection that came up at `now`.
    pub(crate) fn new(config: Config, now: Instant) -> Self {
        Session {
            config,
            scanner: Scanner::new(),
            in_flight: false,
            request: 0,
            taken: false,
            unwritten: false,
            first_byte_seen: false,
            due: now,
            sent_at: now,
            deadline: None,
            must_close: false,
            filled: false,
            rendered: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Starts the next request if none is in flight and `units` has one.
    pub(crate) fn start_requests(&mut self, now: Instant, units: &mut Units<'_>) {
        if self.in_flight || self.must_close {
            return;
        }
        let Some(start) = units.take(now, false) else { return };
        self.due = start.due;
        self.request = start.request;
        self.scanner.start(units.is_head(start.request));
        if let Some(checks) = kept_checks(&self.config.kept_checks, start.request) {
            self.scanner.keep(checks);
        }
        self.filled = false;
        if let Some(template) = self.config.templates.get(start.request as usize).and_then(Option::as_ref)
            && let Some(mut fill) = units.fill(start.request)
            && fill.needed_by(template.slots)
        {
            self.rendered.clear();
            template.render(&mut fill, &mut self.rendered, &mut self.body);
            self.filled = true;
        }
        self.in_flight = true;
        self.taken = false;
        self.first_byte_seen = false;
        self.sent_at = now;
        self.deadline = self.config.request_timeout.and_then(|t| now.checked_add(t));
    }

    /// The request to send: one of the run's, or the filled template's bytes appended to `out`.
    pub(crate) fn poll_transmit(&mut self, out: &mut Vec<u8>) -> Transmit {
        if !self.wants_transmit() {
            return Transmit::Nothing;
        }
        self.taken = true;
        self.unwritten = true;
        if self.filled {
            out.extend_from_slice(&self.rendered);
            return Transmit::Bytes;
        }
        Transmit::Request(self.request)
    }

    pub(crate) fn wants_transmit(&self) -> bool {
        self.in_flight && !self.taken
    }

    pub(crate) fn written(&mut self) {
        self.unwritten = false;
    }

    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant, events: &mut Vec<Event>) {
        if !self.in_flight {
            // Bytes nobody asked for (a 408 on an idle connection, say): not a response to
            // count, and the connection can no longer be trusted.
            self.must_close = true;
            return;
        }
        if !self.first_byte_seen {
            self.first_byte_seen = true;
            events.push(Event::FirstByte { request: self.request, sent_at: self.sent_at, at: now });
        }
        match self.scanner.feed(bytes) {
            Err(e) => self.fail(ErrorKind::Protocol, e.to_string().into(), events),
            Ok((_, None)) => {}
            Ok((used, Some(response))) => {
                self.end();
                self.respond(response, now, events);
                // Extra bytes after a response we did not pipeline are not ours to count; a
                // request still being written (the server answered early) means no further
                // request may share this connection.
                if used < bytes.len() || response.close || !self.config.keepalive || self.unwritten {
                    self.must_close = true;
                }
            }
        }
    }

    /// The peer closed the connection: a response delimited by the close completes; any other
    /// request in flight fails as a reset.
    pub(crate) fn peer_closed(&mut self, now: Instant, events: &mut Vec<Event>) {
        self.must_close = true;
        if !self.in_flight {
            return;
        }
        if !self.first_byte_seen {
            return self.fail(ErrorKind::Reset, "connection closed before any response byte".into(), events);
        }
        match self.scanner.eof() {
            Ok(Some(response)) => {
                self.end();
                self.respond(response, now, events);
            }
            Ok(None) => self.end(),
            Err(e) => self.fail(ErrorKind::Reset, e.to_string().into(), events),
        }
    }

    fn respond(&mut self, response: Response, now: Instant, events: &mut Vec<Event>) {
        if let Some(value) = response.retry_after {
            events.push(Event::RetryAfter { status: response.status, value });
        }
        if let Some(kept) = self.scanner.kept()
            && let Some((failed, extracted)) = judge(&self.config.kept_checks, self.request, kept)
        {
            events.push(Event::Judged { failed, extracted });
        }
        let (request, status, due, sent_at) = (self.request, response.status, self.due, self.sent_at);
        events.push(Event::Response { request, status, due, sent_at, at: now });
    }

    pub(crate) fn fail(&mut self, kind: ErrorKind, why: Why, events: &mut Vec<Event>) {
        self.must_close = true;
        if self.in_flight {
            self.end();
            events.push(Event::Failed { request: self.request, kind, why });
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut Vec<Event>) {
        if self.deadline.is_some_and(|d| now >= d) {
            self.fail(ErrorKind::Timeout, "no complete response within --timeout".into(), events);
        }
    }

    pub(crate) fn must_close(&self) -> bool {
        self.must_close
    }

    pub(crate) fn is_idle(&self) -> bool {
        !self.in_flight
    }

    pub(crate) fn sent_in_flight(&self) -> u64 {
        u64::from(self.in_flight && self.taken)
    }

    fn end(&mut self) {
        self.in_flight = false;
        self.deadline = None;
    }
}

#[cfg(test)]
mod tests;
