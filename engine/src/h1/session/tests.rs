//! The HTTP/1.1 session on byte strings and made-up instants: no sockets, no clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::session::{Cursor, Picker, Schedule};
use crate::stats::RetryAfter;
use crate::stats::Stats;

const TIMEOUT: Duration = Duration::from_secs(30);
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

fn config() -> Config {
    Config { keepalive: true, request_timeout: Some(TIMEOUT), templates: Arc::from([]), kept_checks: Arc::from([]) }
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
    fn new(config: Config, budget: u64) -> Self {
        let t0 = Instant::now();
        Harness {
            session: Session::new(config, t0),
            claimed: true,
            budget: Schedule::closed(Some(budget)),
            stats: Stats::new(),
            events: Vec::new(),
            t0,
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// Starts requests at `ms` and takes what the session has to send.
    fn start(&mut self, ms: u64) -> Transmit {
        let now = self.at(ms);
        self.session.start_requests(now, &mut Units::new(&mut self.claimed, &mut self.budget, &mut self.stats));
        let transmit = self.session.poll_transmit(&mut Vec::new());
        self.session.written();
        transmit
    }

    fn receive(&mut self, bytes: &[u8], ms: u64) -> Vec<Event> {
        let now = self.at(ms);
        self.session.receive(bytes, now, &mut self.events);
        std::mem::take(&mut self.events)
    }
}

/// How many requests the budget still has (spending them).
fn left(budget: &mut Schedule) -> u64 {
    std::iter::from_fn(|| budget.claim().then_some(())).count() as u64
}

#[test]
fn keep_alive_carries_one_request_after_another_until_the_budget_is_spent() {
    let mut h = Harness::new(config(), 1);
    assert_eq!(h.start(0), Transmit::Request(0));
    assert!(!h.claimed, "the connection's own request goes first");
    assert_eq!(h.session.sent_in_flight(), 1);
    let events = h.receive(OK, 3);
    assert_eq!(
        events,
        vec![
            Event::FirstByte { request: 0, sent_at: h.at(0), at: h.at(3) },
            Event::Response { request: 0, status: 200, due: h.at(0), sent_at: h.at(0), at: h.at(3) }
        ]
    );
    assert!(h.session.is_idle() && !h.session.must_close());
    assert_eq!(h.start(5), Transmit::Request(0), "the next request takes the budget's one");
    assert_eq!(
        h.receive(OK, 9)[1],
        Event::Response { request: 0, status: 200, due: h.at(5), sent_at: h.at(5), at: h.at(9) }
    );
    assert_eq!(h.start(10), Transmit::Nothing, "budget spent: nothing more to send");
    assert!(h.session.is_idle() && !h.session.must_close());
}

#[test]
fn connection_close_ends_the_connection_after_its_response() {
    let mut h = Harness::new(config(), 5);
    h.start(0);
    let events = h.receive(b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 1);
    assert_eq!(events[1], Event::Response { request: 0, status: 503, due: h.at(0), sent_at: h.at(0), at: h.at(1) });
    assert!(h.session.must_close());
    assert_eq!(h.start(2), Transmit::Nothing, "no request after Connection: close");
    assert_eq!(left(&mut h.budget), 5, "and none was taken for it");
}

#[test]
fn without_keep_alive_every_response_ends_its_connection() {
    let mut h = Harness::new(Config { keepalive: false, ..config() }, 5);
    h.start(0);
    h.receive(OK, 1);
    assert!(h.session.must_close());
}

#[test]
fn a_response_split_at_every_byte_is_one_response_timed_from_its_first_piece() {
    for split in 1..OK.len() {
        let mut h = Harness::new(config(), 0);
        h.start(0);
        let mut events = h.receive(&OK[..split], 2);
        assert!(h.session.sent_in_flight() == 1, "split {split}: still in flight");
        events.extend(h.receive(&OK[split..], 7));
        assert_eq!(
            events,
            vec![
                Event::FirstByte { request: 0, sent_at: h.at(0), at: h.at(2) },
                Event::Response { request: 0, status: 200, due: h.at(0), sent_at: h.at(0), at: h.at(7) }
            ],
            "split at {split}"
        );
        assert!(h.session.is_idle() && !h.session.must_close(), "split at {split}");
    }
}

#[test]
fn no_complete_response_by_the_deadline_is_one_timeout() {
    let mut h = Harness::new(config(), 5);
    h.start(100);
    assert_eq!(h.session.poll_timeout(), Some(h.at(100) + TIMEOUT));
    h.receive(b"HTTP/1.1 200 OK\r\nContent-Le", 200);
    let just_before = h.at(100) + TIMEOUT - Duration::from_nanos(1);
    h.session.handle_timeout(just_before, &mut h.events);
    assert!(h.events.is_empty() && h.session.sent_in_flight() == 1);
    h.session.handle_timeout(h.at(100) + TIMEOUT, &mut h.events);
    assert_eq!(
        h.events,
        vec![Event::Failed {
            request: 0,
            kind: ErrorKind::Timeout,
            why: "no complete response within --timeout".into()
        }]
    );
    assert!(h.session.must_close() && h.session.is_idle());
    assert_eq!(h.session.poll_timeout(), None);
    h.events.clear();
    h.session.peer_closed(h.at(30_200), &mut h.events);
    assert!(h.events.is_empty(), "a request is counted once");
}

#[test]
fn a_close_before_the_response_is_complete_is_a_reset() {
    for (bytes, why) in [
        (&b""[..], "connection closed before any response byte"),
        (&OK[..20], "connection closed before the response was complete"),
    ] {
        let mut h = Harness::new(config(), 0);
        h.start(0);
        if !bytes.is_empty() {
            h.receive(bytes, 1);
        }
        h.events.clear();
        h.session.peer_closed(h.at(2), &mut h.events);
        assert_eq!(h.events, vec![Event::Failed { request: 0, kind: ErrorKind::Reset, why: why.into() }]);
        assert!(h.session.must_close());
    }
}

#[test]
fn a_body_delimited_by_the_close_completes_at_the_close() {
    let mut h = Harness::new(config(), 0);
    h.start(0);
    h.receive(b"HTTP/1.0 200 OK\r\n\r\nsome body", 1);
    h.session.peer_closed(h.at(4), &mut h.events);
    assert_eq!(
        h.events.last(),
        Some(&Event::Response { request: 0, status: 200, due: h.at(0), sent_at: h.at(0), at: h.at(4) })
    );
}

#[test]
fn a_malformed_response_is_one_protocol_error() {
    let mut h = Harness::new(config(), 5);
    h.start(0);
    let events = h.receive(b"SMTP ready\r\n", 1);
    assert!(matches!(events[1], Event::Failed { request: 0, kind: ErrorKind::Protocol, .. }), "{events:?}");
    assert!(h.session.must_close());
}

#[test]
fn bytes_nobody_asked_for_close_the_connection_without_counting_anything() {
    let mut h = Harness::new(config(), 5);
    let events = h.receive(b"HTTP/1.1 408 Request Timeout\r\n\r\n", 1);
    assert!(events.is_empty());
    assert!(h.session.must_close());
    assert!(h.claimed, "the connection's request was never used");
}

#[test]
fn bytes_after_the_response_or_an_early_answer_end_the_connection() {
    let mut h = Harness::new(config(), 5);
    h.start(0);
    h.receive(&[OK, OK].concat(), 1);
    assert!(h.session.must_close(), "a second response we did not ask for");

    let mut h = Harness::new(config(), 5);
    h.session.start_requests(h.at(0), &mut Units::new(&mut h.claimed, &mut h.budget, &mut h.stats));
    assert_eq!(h.session.poll_transmit(&mut Vec::new()), Transmit::Request(0));
    // Not yet all written: the server answered before reading the whole request.
    h.receive(OK, 1);
    assert!(h.session.must_close());
}

#[test]
fn a_failed_transport_fails_the_request_in_flight_once() {
    let mut h = Harness::new(config(), 5);
    h.session.start_requests(h.at(0), &mut Units::new(&mut h.claimed, &mut h.budget, &mut h.stats));
    assert_eq!(h.session.sent_in_flight(), 0, "not taken for a send yet");
    h.session.fail(ErrorKind::Reset, "gone".into(), &mut h.events);
    h.session.fail(ErrorKind::Reset, "gone".into(), &mut h.events);
    assert_eq!(h.events, vec![Event::Failed { request: 0, kind: ErrorKind::Reset, why: "gone".into() }]);
}

#[test]
fn a_head_request_expects_no_body() {
    let mut h = Harness::new(config(), 0);
    // The run's one request is a HEAD.
    let (mut next, mut picker) = (Cursor::default(), Picker::new(Box::new([true]), None, None));
    let now = h.at(0);
    let mut units = Units::new(&mut h.claimed, &mut h.budget, &mut h.stats).picking(&mut next, &mut picker);
    h.session.start_requests(now, &mut units);
    h.session.poll_transmit(&mut Vec::new());
    h.session.written();
    let events = h.receive(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 1);
    assert_eq!(events[1], Event::Response { request: 0, status: 200, due: h.at(0), sent_at: h.at(0), at: h.at(1) });
    assert!(!h.session.must_close());
}

#[test]
fn under_a_rate_the_next_request_waits_for_its_due_instant_and_keeps_it_when_late() {
    let mut h = Harness::new(config(), 10);
    h.budget = Schedule::open(Some(10), crate::plan::Rate::per_second(100));
    h.budget.start(h.t0);
    assert_eq!(h.start(0), Transmit::Request(0), "slot 0 is due at the start");
    assert_eq!(
        h.receive(OK, 3)[1],
        Event::Response { request: 0, status: 200, due: h.at(0), sent_at: h.at(0), at: h.at(3) }
    );
    assert_eq!(h.start(5), Transmit::Nothing, "slot 1 is due at 10 ms");
    // Free again only at 25 ms: slot 1 goes out 15 ms late and its latency counts from 10 ms.
    assert_eq!(h.start(25), Transmit::Request(0));
    let late = Event::Response { request: 0, status: 200, due: h.at(10), sent_at: h.at(25), at: h.at(27) };
    assert_eq!(h.receive(OK, 27)[1], late);
    assert_eq!(h.stats.counters.late, 1, "one request sent over 1 ms after its due instant");
    assert_eq!(h.stats.histograms.lateness.len(), 2, "every request sent has its lateness");
}

#[test]
fn a_response_carrying_retry_after_is_announced_before_it_is_counted() {
    let mut h = Harness::new(config(), 1);
    h.start(0);
    let busy = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        h.receive(busy, 2),
        vec![
            Event::FirstByte { request: 0, sent_at: h.at(0), at: h.at(2) },
            Event::RetryAfter { status: 503, value: RetryAfter::Seconds(30) },
            Event::Response { request: 0, status: 503, due: h.at(0), sent_at: h.at(0), at: h.at(2) }
        ]
    );
    // One ended by the close (no length) still says so; the next, without it, says nothing.
    h.start(3);
    h.receive(b"HTTP/1.1 429 Slow down\r\nRetry-After: Fri, 31 Dec 1999 23:59:59 GMT\r\n\r\nbody", 4);
    h.session.peer_closed(h.at(5), &mut h.events);
    assert_eq!(
        std::mem::take(&mut h.events),
        vec![
            Event::RetryAfter { status: 429, value: RetryAfter::Date },
            Event::Response { request: 0, status: 429, due: h.at(3), sent_at: h.at(3), at: h.at(5) }
        ]
    );
    let mut h = Harness::new(config(), 0);
    h.start(0);
    assert!(!h.receive(OK, 1).iter().any(|e| matches!(e, Event::RetryAfter { .. })));
}

/// A config whose one request has `rules` on what is kept.
fn judging(rules: &[crate::plan::Rule]) -> Config {
    let checks = crate::session::KeptChecks::of(rules.iter(), &[], &[], &[], crate::session::Fields::NONE);
    Config { kept_checks: Arc::from([checks]), ..config() }
}

/// A config whose one request has checks on the body: contains `needle`, and is `size` long.
fn checking(needle: &[u8], size: u64) -> Config {
    use crate::plan::Rule;
    let rules = [Rule::BodyContains(needle.to_vec()), Rule::BodySize(size..=size)];
    judging(&rules)
}

/// The verdicts pushed with the response that ends in `pieces`, fed one after another.
fn verdicts_of(h: &mut Harness, pieces: &[&[u8]]) -> Vec<u64> {
    h.start(0);
    let mut events = Vec::new();
    for piece in pieces {
        events.extend(h.receive(piece, 1));
    }
    h.session.peer_closed(h.at(2), &mut events);
    assert!(matches!(events.last(), Some(Event::Response { .. })), "{events:?}");
    events.iter().filter_map(|e| if let Event::Judged { failed, .. } = e { Some(*failed) } else { None }).collect()
}

#[test]
fn checks_on_the_body_see_the_body_however_it_is_framed_and_split() {
    let responses: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: 1\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\nhello world",
    ];
    for response in responses {
        for cut in 0..=response.len() {
            let (a, b) = response.split_at(cut);
            let mut h = Harness::new(checking(b"lo wo", 11), 0);
            assert_eq!(verdicts_of(&mut h, &[a, b]), vec![0], "{} cut at {cut}", String::from_utf8_lossy(response));
            let mut h = Harness::new(checking(b"low", 12), 0);
            assert_eq!(verdicts_of(&mut h, &[a, b]), vec![0b11], "cut at {cut}");
        }
    }
}

#[test]
fn a_body_beyond_the_kept_bound_is_counted_whole_and_checked_on_its_start() {
    let size = crate::plan::KEPT_BODY_BYTES as u64 + 10;
    let mut response = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\nstart").into_bytes();
    response.resize(response.len() + size as usize - 10, b'.');
    response.extend_from_slice(b"the end");
    response.extend_from_slice(b"...");
    let mut h = Harness::new(checking(b"start", size), 0);
    assert_eq!(verdicts_of(&mut h, &[&response]), vec![0]);
    let mut h = Harness::new(checking(b"the end", size), 0);
    assert_eq!(verdicts_of(&mut h, &[&response]), vec![0b01], "past the bound: not kept, not found");
}

#[test]
fn a_request_without_checks_on_the_body_gets_no_verdicts() {
    let mut h = Harness::new(config(), 0);
    assert_eq!(verdicts_of(&mut h, &[OK]), Vec::<u64>::new());
}

#[test]
fn checks_on_header_fields_see_the_final_heads_fields_however_they_are_split() {
    use crate::plan::{Pattern, Rule, TextTest};
    let header = |name: &str, test| Rule::Header { name: name.into(), test };
    let rules = [
        header("content-type", TextTest::Contains(b"json".to_vec())),
        header("x-early", TextTest::Exists),
        header("set-cookie", TextTest::Matches(Pattern::new("^sid=[0-9]+$").expect("pattern"))),
        header("x-empty", TextTest::Equals(Vec::new())),
        header("content-length", TextTest::Equals(b"2".to_vec())),
    ];
    let config = judging(&rules);
    let response: &[u8] = b"HTTP/1.1 103 Early Hints\r\nX-Early: 1\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Type:  application/json \r\nSet-Cookie: a=1\r\nset-cookie: sid=42\r\n\
        X-Empty:\r\nContent-Length: 2\r\n\r\n{}";
    for cut in 0..=response.len() {
        let (a, b) = response.split_at(cut);
        let mut h = Harness::new(config.clone(), 0);
        // Only x-early fails: it came with the informational head, not the response's.
        assert_eq!(verdicts_of(&mut h, &[a, b]), vec![0b00010], "cut at {cut}");
    }
}

#[test]
fn a_folded_header_line_is_one_value_joined_by_a_space() {
    use crate::plan::{Rule, TextTest};
    let rules = [
        Rule::Header { name: "x-note".into(), test: TextTest::Equals(b"one two three".to_vec()) },
        Rule::Header { name: "x-after".into(), test: TextTest::Equals(b"1".to_vec()) },
    ];
    let config = judging(&rules);
    let response: &[u8] =
        b"HTTP/1.1 200 OK\r\nX-Note: one\r\n two\r\n\tthree \r\nX-After: 1\r\nContent-Length: 0\r\n\r\n";
    let mut h = Harness::new(config, 0);
    assert_eq!(verdicts_of(&mut h, &[response]), vec![0]);
}
