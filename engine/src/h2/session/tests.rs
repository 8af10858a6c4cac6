//! The HTTP/2 counting rules on byte strings and made-up instants: no sockets, no clock.

use std::time::{Duration, Instant};

use super::*;
use crate::h2::conn::Request;
use crate::h2::frame::{self, setting};
use crate::h2::hpack::RequestBlocks;
use crate::session::Schedule;
use crate::stats::Stats;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(30);

fn config(streams: u32) -> Arc<Config> {
    checked_config(streams, Arc::from([]))
}

fn checked_config(streams: u32, kept_checks: crate::session::KeptCheckTable) -> Arc<Config> {
    Arc::new(Config {
        requests: Arc::from([Request {
            blocks: RequestBlocks::plain(b"\x82\x86\x84\x41\x01a".to_vec()),
            body: Box::default(),
            template: None,
        }]),
        streams,
        connect_timeout: CONNECT_TIMEOUT,
        request_timeout: Some(TIMEOUT),
        kept_checks,
    })
}

/// Server bytes, built frame by frame.
#[derive(Default)]
struct Server(Vec<u8>);

impl Server {
    fn settings(mut self, params: &[(u16, u32)]) -> Self {
        frame::encode_settings(&mut self.0, params);
        self
    }

    /// A complete 200 response on `stream`.
    fn ok(mut self, stream: u32) -> Self {
        frame::encode_headers(&mut self.0, stream, b"\x08\x03200", true, frame::DEFAULT_MAX_FRAME_SIZE);
        self
    }

    /// The start of a 200 response on `stream`: HEADERS without END_STREAM.
    fn head(mut self, stream: u32) -> Self {
        frame::encode_headers(&mut self.0, stream, b"\x08\x03200", false, frame::DEFAULT_MAX_FRAME_SIZE);
        self
    }

    fn data(mut self, stream: u32, data: &[u8], end_stream: bool) -> Self {
        frame::encode_data(&mut self.0, stream, data, end_stream, frame::DEFAULT_MAX_FRAME_SIZE);
        self
    }

    fn rst(mut self, stream: u32, code: u32) -> Self {
        frame::encode_rst_stream(&mut self.0, stream, code);
        self
    }

    fn goaway(mut self, last: u32, code: u32) -> Self {
        frame::encode_goaway(&mut self.0, last, code, b"");
        self
    }
}

/// A session on a connection opened with one request claimed, and `budget` more to come.
struct Harness {
    session: Session,
    claimed: bool,
    budget: Schedule,
    stats: Stats,
    events: Vec<Event>,
    t0: Instant,
}

impl Harness {
    fn new(streams: u32, budget: u64) -> Self {
        Harness::with_config(config(streams), budget)
    }

    fn with_config(config: Arc<Config>, budget: u64) -> Self {
        let t0 = Instant::now();
        let session = Session::new(config, Negotiated::Tcp, t0).expect("h2c needs no ALPN");
        Harness {
            session,
            claimed: true,
            budget: Schedule::closed(Some(budget)),
            stats: Stats::new(),
            events: Vec::new(),
            t0,
        }
    }

    /// Set up with the server's SETTINGS.
    fn established(streams: u32, budget: u64, settings: &[(u16, u32)]) -> Self {
        let mut h = Harness::new(streams, budget);
        let events = h.receive(Server::default().settings(settings), 1);
        assert!(h.session.is_established());
        assert!(events.iter().all(|e| matches!(e, Event::Limited(_))), "{events:?}");
        h
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    fn receive(&mut self, server: Server, ms: u64) -> Vec<Event> {
        let now = self.at(ms);
        self.session.receive(&server.0, now, &mut self.events);
        std::mem::take(&mut self.events)
    }

    /// Starts what may start at `ms` and hands it to a send; returns the streams now open.
    fn start(&mut self, ms: u64) -> usize {
        let now = self.at(ms);
        self.session.start_requests(
            now,
            &mut Units::new(&mut self.claimed, &mut self.budget, &mut self.stats),
            &mut self.events,
        );
        let mut out = Vec::new();
        self.session.poll_transmit(&mut out);
        self.session.sent_in_flight() as usize
    }
}

/// `n` requests (each request 0) failed as `kind`: one event each.
fn failed(kind: ErrorKind, n: usize, why: &str) -> Vec<Event> {
    vec![Event::Failed { request: 0, kind, why: why.to_string().into() }; n]
}

#[test]
fn a_connection_is_made_only_when_the_servers_settings_arrive() {
    let mut h = Harness::new(4, 10);
    assert!(!h.session.is_established());
    assert!(h.session.wants_transmit(), "the preface and our SETTINGS go out at once");
    assert_eq!(h.start(0), 0, "no stream before the server's SETTINGS");
    assert_eq!(h.session.poll_timeout(), Some(h.t0 + CONNECT_TIMEOUT));
    h.receive(Server::default().settings(&[]), 2);
    assert!(h.session.is_established());
    assert_eq!(h.start(3), 4);
}

#[test]
fn set_up_failures_are_failed_connects() {
    let mut h = Harness::new(4, 10);
    h.session.handle_timeout(h.t0 + CONNECT_TIMEOUT, &mut h.events);
    assert_eq!(
        h.events,
        vec![Event::SetupFailed {
            kind: ErrorKind::Connect,
            why: "no HTTP/2 SETTINGS from the server within 5s".into()
        }]
    );
    assert!(h.session.must_close());

    let mut h = Harness::new(4, 10);
    h.session.receive(b"HTTP/1.1 400 Bad Request\r\n\r\n", h.t0, &mut h.events);
    assert!(
        matches!(&h.events[..], [Event::SetupFailed { kind: ErrorKind::Protocol, why }] if why.contains("HTTP/1.x"))
    );

    let mut h = Harness::new(4, 10);
    h.session.peer_closed(&mut h.events);
    assert!(matches!(&h.events[..], [Event::SetupFailed { kind: ErrorKind::Connect, .. }]));
}

#[test]
fn over_tls_the_server_must_choose_h2() {
    let t0 = Instant::now();
    let err = Session::new(config(1), Negotiated::Tls(Some(b"http/1.1")), t0).err().expect("refused");
    assert!(err.contains("does not offer HTTP/2 over TLS") && err.contains("it chose http/1.1"), "{err}");
    assert!(Session::new(config(1), Negotiated::Tls(None), t0).err().expect("refused").contains("no protocol"));
    assert!(Session::new(config(1), Negotiated::Tls(Some(b"h2")), t0).is_ok());
}

#[test]
fn refused_streams_are_to_be_sent_again_and_resets_are_errors() {
    let mut h = Harness::established(3, 10, &[]);
    assert_eq!(h.start(10), 3);
    let events = h.receive(Server::default().rst(1, code::REFUSED_STREAM).rst(3, code::INTERNAL_ERROR).ok(5), 12);
    assert_eq!(
        events,
        vec![
            Event::Refused { request: 0 },
            failed(ErrorKind::Reset, 1, "the server reset a stream (RST_STREAM INTERNAL_ERROR)").remove(0),
            Event::FirstByte { request: 0, sent_at: h.at(10), at: h.at(12) },
            Event::Response { request: 0, status: 200, due: h.at(10), sent_at: h.at(10), at: h.at(12) },
        ]
    );
    assert!(h.session.is_idle() && !h.session.must_close());
    assert_eq!(h.start(13), 3, "the connection goes on");
}

#[test]
fn a_goaway_without_error_lets_older_streams_finish_and_refuses_the_rest() {
    let mut h = Harness::established(4, 10, &[]);
    assert_eq!(h.start(0), 4);
    let events = h.receive(Server::default().goaway(3, code::NO_ERROR).ok(1), 5);
    let refused = Event::Refused { request: 0 };
    assert_eq!(events[..2], [refused.clone(), refused], "streams 5 and 7 were not processed");
    assert!(!h.session.must_close(), "stream 3 is still to be answered");
    assert_eq!(h.start(6), 1, "no new stream after GOAWAY");
    h.receive(Server::default().ok(3), 7);
    assert!(h.session.must_close());
}

#[test]
fn a_goaway_with_an_error_fails_what_it_leaves_and_what_the_close_loses() {
    let mut h = Harness::established(4, 10, &[]);
    h.start(0);
    let events = h.receive(Server::default().goaway(3, code::PROTOCOL_ERROR), 5);
    assert_eq!(events, failed(ErrorKind::Protocol, 2, "the server sent GOAWAY PROTOCOL_ERROR"));
    h.session.peer_closed(&mut h.events);
    assert_eq!(
        h.events,
        failed(ErrorKind::Protocol, 2, "the server closed the connection with 2 HTTP/2 streams in flight")
    );

    let mut h = Harness::established(4, 10, &[]);
    h.start(0);
    h.session.peer_closed(&mut h.events);
    assert_eq!(
        h.events,
        failed(ErrorKind::Reset, 4, "the server closed the connection with 4 HTTP/2 streams in flight"),
        "without a GOAWAY error, streams lost with the connection are resets"
    );
    h.events.clear();
    h.session.fail(ErrorKind::Reset, "again".into(), &mut h.events);
    assert!(h.events.is_empty(), "each stream is counted once");
    assert_eq!(h.session.sent_in_flight(), 0);
}

#[test]
fn the_servers_stream_limit_holds_streams_and_requests_taken() {
    let mut h = Harness::new(8, 100);
    let events = h.receive(Server::default().settings(&[(setting::MAX_CONCURRENT_STREAMS, 2)]), 1);
    assert_eq!(events, vec![Event::Limited(2)]);
    assert_eq!(h.start(2), 2);
    let left = std::iter::from_fn(|| h.budget.claim().then_some(())).count();
    assert_eq!(left, 100 - 1, "one stream used the connection's request, one the budget's");
}

#[test]
fn a_server_allowing_no_stream_fails_the_connections_request() {
    let mut h = Harness::established(4, 10, &[(setting::MAX_CONCURRENT_STREAMS, 0)]);
    assert_eq!(h.start(2), 0);
    assert!(
        matches!(&h.events[..], [Event::Failed { request: 0, kind: ErrorKind::Protocol, why }] if why.contains("allowed no stream"))
    );
    assert!(!h.claimed && h.session.is_idle());
}

#[test]
fn streams_out_of_time_are_timeouts_and_the_connection_goes_on() {
    let mut h = Harness::established(2, 10, &[]);
    h.start(0);
    h.receive(Server::default().ok(1).ok(3), 5);
    assert_eq!(h.start(10), 2, "streams 5 and 7 replace 1 and 3");
    assert_eq!(h.session.poll_timeout(), Some(h.at(0) + TIMEOUT), "early (from finished streams), never late");
    h.session.handle_timeout(h.at(0) + TIMEOUT, &mut h.events);
    assert!(h.events.is_empty());
    assert_eq!(h.session.poll_timeout(), Some(h.at(10) + TIMEOUT), "exact after a look");
    h.session.handle_timeout(h.at(10) + TIMEOUT, &mut h.events);
    assert_eq!(h.events, failed(ErrorKind::Timeout, 2, "no complete response within --timeout"));
    assert!(!h.session.must_close() && h.session.is_idle());
    h.events.clear();
    assert_eq!(h.start(30_011), 2, "new streams start on the same connection");
}

#[test]
fn a_connection_error_fails_every_open_stream() {
    let mut h = Harness::established(3, 10, &[]);
    h.start(0);
    let mut junk = Vec::new();
    frame::encode_frame(&mut junk, frame::kind::DATA, 0, 2, b"x");
    h.session.receive(&junk, h.at(1), &mut h.events);
    assert_eq!(h.events.len(), 3, "{:?}", h.events);
    assert!(h.events.iter().all(|e| matches!(e, Event::Failed { kind: ErrorKind::Protocol, .. })), "{:?}", h.events);
    assert!(h.session.must_close());
}

#[test]
fn only_streams_handed_to_a_send_count_as_sent() {
    let mut h = Harness::established(3, 10, &[]);
    h.session.start_requests(h.at(0), &mut Units::new(&mut h.claimed, &mut h.budget, &mut h.stats), &mut h.events);
    assert_eq!(h.session.sent_in_flight(), 0);
    let mut out = Vec::new();
    assert_eq!(h.session.poll_transmit(&mut out), Transmit::Bytes);
    assert_eq!(h.session.sent_in_flight(), 3);
}

#[test]
fn under_a_rate_a_claimed_request_waits_for_its_slot_instead_of_failing() {
    let mut h = Harness::established(4, 10, &[]);
    h.budget = Schedule::open(Some(10), crate::plan::Rate { per_second: 100, offset: Duration::from_millis(5) });
    h.budget.start(h.t0);
    assert_eq!(h.start(1), 0, "nothing is due before 5 ms");
    assert!(h.events.is_empty(), "the connection's request is not failed: {:?}", h.events);
    assert!(h.claimed, "and it is still the connection's");
    // At 30 ms the slots of 5, 15 and 25 ms are due: three streams, each keeping its instant.
    assert_eq!(h.start(30), 3);
    assert!(!h.claimed);
    let events = h.receive(Server::default().ok(1), 31);
    assert_eq!(events[1], Event::Response { request: 0, status: 200, due: h.at(5), sent_at: h.at(30), at: h.at(31) });
}

#[test]
fn checks_on_the_body_judge_each_stream_on_its_own_data_frames() {
    use crate::plan::Rule;
    let rules = [Rule::BodyContains(b"hello".to_vec()), Rule::BodySize(5..=5)];
    let kept_checks =
        Arc::from([crate::session::KeptChecks::of(rules.iter(), &[], &[], &[], crate::session::Fields::NONE)]);
    let mut h = Harness::with_config(checked_config(2, kept_checks), 2);
    h.receive(Server::default().settings(&[]), 1);
    assert_eq!(h.start(2), 2);
    // Interleaved: stream 3 says "hello", stream 1 "world!"; the next request, on stream 5,
    // starts with an empty body, not with what an earlier stream kept.
    let server = Server::default()
        .head(1)
        .head(3)
        .data(3, b"hel", false)
        .data(1, b"wor", false)
        .data(3, b"lo", true)
        .data(1, b"ld!", true);
    let events = h.receive(server, 3);
    let verdicts: Vec<u64> =
        events.iter().filter_map(|e| if let Event::Judged { failed, .. } = e { Some(*failed) } else { None }).collect();
    assert_eq!(verdicts, vec![0b00, 0b11], "{events:?}");
    assert_eq!(h.start(4), 1);
    let events = h.receive(Server::default().head(5).data(5, b"hello", true), 5);
    assert!(events.contains(&Event::Judged { failed: 0, extracted: Default::default() }), "{events:?}");
}

#[test]
fn checks_on_header_fields_read_every_field_of_the_final_head_indexed_or_literal() {
    use crate::plan::{Rule, TextTest};
    let json = TextTest::Equals(b"application/json".to_vec());
    let rules = [
        Rule::Header { name: "content-type".into(), test: json },
        Rule::Header { name: "x-trace".into(), test: TextTest::Exists },
    ];
    let kept_checks =
        Arc::from([crate::session::KeptChecks::of(rules.iter(), &[], &[], &[], crate::session::Fields::NONE)]);
    let mut h = Harness::with_config(checked_config(2, kept_checks), 1);
    h.receive(Server::default().settings(&[]), 1);
    assert_eq!(h.start(2), 2);
    // Stream 1: an informational head with x-trace, then content-type as a literal the table
    // keeps (index 62 from then on). Stream 3: content-type by that index, and x-trace as a
    // literal with a new name.
    let first = b"\x08\x03200\x40\x0ccontent-type\x10application/json";
    let mut server = Server::default();
    frame::encode_headers(&mut server.0, 1, b"\x08\x03103\x00\x07x-trace\x011", false, frame::DEFAULT_MAX_FRAME_SIZE);
    frame::encode_headers(&mut server.0, 1, first, true, frame::DEFAULT_MAX_FRAME_SIZE);
    frame::encode_headers(
        &mut server.0,
        3,
        b"\x08\x03200\xbe\x00\x07x-trace\x011",
        true,
        frame::DEFAULT_MAX_FRAME_SIZE,
    );
    let events = h.receive(server, 3);
    let verdicts: Vec<u64> =
        events.iter().filter_map(|e| if let Event::Judged { failed, .. } = e { Some(*failed) } else { None }).collect();
    // Stream 1 has no x-trace of its own (the 103's is not the response's); stream 3 has both.
    assert_eq!(verdicts, vec![0b10, 0b00], "{events:?}");
}
