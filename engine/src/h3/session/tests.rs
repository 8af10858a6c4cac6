//! The HTTP/3 session against quinn-proto's server endpoint in memory, with simulated time:
//! somebody else's QUIC, answering with HTTP/3 frames built by our encoders. The test drives
//! the session as the loop does (datagrams in, requests started from a budget, a batch out,
//! timers) and counts its events as the loop does, so the counts are checked against what the
//! server itself answered.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{ConnectionHandle, DatagramEvent, Dir, Endpoint, StreamEvent, StreamId, VarInt};

use super::{GOAWAY_GRACE, Session, Setup};
use crate::h3::Config as RequestConfig;
use crate::h3::error::code;
use crate::h3::frame::{Frame, FrameDecoder, encode_head, kind};
use crate::h3::streams_tests::{OK, data, headers};
use crate::plan::RequestSpec;
use crate::quic::tests::{Cert, SERVER_NAME, self_signed, server_endpoint, trusting};
use crate::quic::varint;
use crate::quic::{Config as QuicConfig, Congestion};
use crate::session::{Event, Schedule, Units};
use crate::stats::ErrorKind;
use crate::stats::Stats;
use crate::target::Target;
use crate::test_rng::Rng;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const BODY: &[u8] = b"hello, world!\n";

fn client_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    "127.0.0.1:4433".parse().unwrap()
}

/// How the server behaves.
#[derive(Clone, Copy)]
struct ServerOptions {
    /// Request streams it lets the client have open at once.
    max_streams: u32,
    /// Answers no datagram at all (a UDP port where nothing speaks QUIC).
    silent: bool,
    /// Speaks QUIC and HTTP/3's control stream, but answers no request.
    mute: bool,
    /// Once it answered this many requests, sends GOAWAY naming the next request stream and
    /// answers none from there on (nor says anything about them).
    goaway_after: Option<u64>,
    /// As the h3 crate's server does: after its GOAWAY it still answers the stream the GOAWAY
    /// names, and resets those beyond it with H3_REQUEST_REJECTED.
    goaway_like_h3_crate: bool,
    /// Answers a request as soon as its HEADERS are in and asks the client to stop sending the
    /// rest (STOP_SENDING, H3_NO_ERROR), as RFC 9114 §4.1.2 allows and quic-go's server does
    /// with a body its handler did not read.
    answer_early: bool,
    /// Grants no stream beyond its first `max_streams` (no MAX_STREAMS ever): a server whose
    /// credit runs out and never comes back.
    grants_no_more_streams: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_streams: 100,
            silent: false,
            mute: false,
            goaway_after: None,
            goaway_like_h3_crate: false,
            answer_early: false,
            grants_no_more_streams: false,
        }
    }
}

/// One server connection: its control stream and what it saw of requests.
struct ServerConn {
    conn: quinn_proto::Connection,
    control: Option<StreamId>,
    /// Request bytes read so far, per open request stream.
    reading: HashMap<StreamId, Vec<u8>>,
    answered: u64,
    goaway: Option<u64>,
}

/// quinn-proto's server side speaking HTTP/3: a control stream with SETTINGS once connected,
/// and `200` with a small body for every whole request, its HEADERS checked with our decoder.
struct Server {
    endpoint: Endpoint,
    conns: HashMap<ConnectionHandle, ServerConn>,
    options: ServerOptions,
    /// Requests answered over all connections.
    answered: u64,
    /// Request streams open at once, at most.
    peak_open: usize,
    connections: u64,
    /// Connections the client closed with H3_NO_ERROR.
    closed_by_client: u64,
    buf: Vec<u8>,
}

impl Server {
    fn new(cert: &Cert, options: ServerOptions) -> Self {
        Server {
            endpoint: server_endpoint(cert, options.max_streams),
            conns: HashMap::new(),
            options,
            answered: 0,
            peak_open: 0,
            connections: 0,
            closed_by_client: 0,
            buf: Vec::new(),
        }
    }

    fn receive(&mut self, now: Instant, datagram: &[u8], out: &mut Vec<(Vec<u8>, usize)>) {
        if self.options.silent {
            return;
        }
        self.buf.clear();
        match self.endpoint.handle(now, client_addr(), None, None, BytesMut::from(datagram), &mut self.buf) {
            Some(DatagramEvent::NewConnection(incoming)) => {
                let mut buf = Vec::new();
                let (handle, conn) = self.endpoint.accept(incoming, now, &mut buf, None).unwrap();
                self.connections += 1;
                let conn = ServerConn { conn, control: None, reading: HashMap::new(), answered: 0, goaway: None };
                self.conns.insert(handle, conn);
            }
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(c) = self.conns.get_mut(&handle) {
                    c.conn.handle_event(event);
                }
            }
            Some(DatagramEvent::Response(t)) => {
                out.push((self.buf[..t.size].to_vec(), t.segment_size.unwrap_or(t.size)))
            }
            None => {}
        }
    }

    fn work(&mut self, now: Instant, out: &mut Vec<(Vec<u8>, usize)>) {
        for (&handle, c) in self.conns.iter_mut() {
            if c.conn.poll_timeout().is_some_and(|t| t <= now) {
                c.conn.handle_timeout(now);
            }
            while let Some(event) = c.conn.poll() {
                match event {
                    quinn_proto::Event::Connected => {
                        let control = c.conn.streams().open(Dir::Uni).unwrap();
                        let mut bytes = Vec::new();
                        varint::encode(0x00, &mut bytes);
                        encode_head(kind::SETTINGS, 0, &mut bytes);
                        c.conn.send_stream(control).write(&bytes).unwrap();
                        c.control = Some(control);
                        if self.options.grants_no_more_streams {
                            c.conn.set_max_concurrent_streams(Dir::Bi, VarInt::from_u32(0));
                        }
                    }
                    quinn_proto::Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                        let mut accepted = Vec::new();
                        while let Some(id) = c.conn.streams().accept(Dir::Bi) {
                            c.reading.insert(id, Vec::new());
                            accepted.push(id);
                        }
                        self.peak_open = self.peak_open.max(c.reading.len());
                        for id in accepted {
                            self.answered += c.read_request(id, self.options);
                        }
                    }
                    quinn_proto::Event::Stream(StreamEvent::Readable { id }) => {
                        self.answered += c.read_request(id, self.options);
                    }
                    quinn_proto::Event::ConnectionLost {
                        reason: quinn_proto::ConnectionError::ApplicationClosed(close),
                    } if close.error_code.into_inner() == code::H3_NO_ERROR => self.closed_by_client += 1,
                    _ => {}
                }
            }
            while let Some(event) = c.conn.poll_endpoint_events() {
                if let Some(event) = self.endpoint.handle_event(handle, event) {
                    c.conn.handle_event(event);
                }
            }
            let mut buf = Vec::new();
            while let Some(t) = c.conn.poll_transmit(now, 10, &mut buf) {
                out.push((std::mem::take(&mut buf), t.segment_size.unwrap_or(t.size)));
            }
        }
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        self.conns.values_mut().filter_map(|c| c.conn.poll_timeout()).min()
    }
}

impl ServerConn {
    /// Reads what arrived of request `id`; once it is whole, answers it. Returns 1 if it did.
    fn read_request(&mut self, id: StreamId, options: ServerOptions) -> u64 {
        let Some(got) = self.reading.get_mut(&id) else { return 0 };
        let mut recv = self.conn.recv_stream(id);
        let mut chunks = recv.read(true).unwrap();
        let mut finished = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => got.extend_from_slice(&chunk.bytes),
                Ok(None) => {
                    finished = true;
                    break;
                }
                Err(quinn_proto::ReadError::Reset(_)) => {
                    self.reading.remove(&id);
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        if !finished {
            let Some(got) = self.reading.get(&id) else { return 0 };
            let mut input = got.as_slice();
            let headers_in = matches!(FrameDecoder::default().next(&mut input), Ok(Some(Frame::Headers(_))));
            if !(options.answer_early && headers_in) {
                return 0;
            }
            let _ = self.conn.recv_stream(id).stop(VarInt::from_u64(code::H3_NO_ERROR).unwrap());
        }
        let request = self.reading.remove(&id).unwrap_or_default();
        // The request is one HEADERS frame that our own decoder reads back.
        let mut input = request.as_slice();
        let mut frames = FrameDecoder::default();
        assert!(matches!(frames.next(&mut input), Ok(Some(Frame::Headers(_)))), "a request's HEADERS");
        let number = VarInt::from(id).into_inner();
        if options.goaway_like_h3_crate && self.goaway.is_some_and(|g| number > g) {
            let rejected = VarInt::from_u64(code::H3_REQUEST_REJECTED).unwrap();
            let _ = self.conn.send_stream(id).reset(rejected);
            return 0;
        }
        let processed = match self.goaway {
            Some(g) if options.goaway_like_h3_crate => number <= g,
            Some(g) => number < g,
            None => true,
        };
        if options.mute || !processed {
            return 0;
        }
        let response = [headers(OK), data(BODY)].concat();
        let mut send = self.conn.send_stream(id);
        assert_eq!(send.write(&response).unwrap(), response.len());
        send.finish().unwrap();
        self.answered += 1;
        if options.goaway_after == Some(self.answered)
            && let Some(control) = self.control
        {
            // The next request stream after this one is not processed.
            let next = number + 4;
            self.goaway = Some(next);
            let mut frame = Vec::new();
            encode_head(kind::GOAWAY, varint::encoded_len(next) as u64, &mut frame);
            varint::encode(next, &mut frame);
            self.conn.send_stream(control).write(&frame).unwrap();
        }
        1
    }
}

/// What the loop would have counted of the session's events.
#[derive(Debug, Default)]
struct Counts {
    ok: u64,
    first_bytes: u64,
    refused: u64,
    errors: HashMap<ErrorKind, u64>,
    setup_failed: Option<(ErrorKind, String)>,
    limited: Option<u32>,
    why: Vec<String>,
    dropped: u64,
    /// The verdicts of every `Judged` event.
    verdicts: Vec<u64>,
}

/// The session, the server, the clock and the budget, driven as the loop drives them.
struct Net {
    now: Instant,
    started: Instant,
    session: Session,
    server: Server,
    budget: Schedule,
    claimed: bool,
    /// What `Units` records as requests are taken (send lateness, in the open model).
    stats: Stats,
    counts: Counts,
    events: Vec<Event>,
    /// Client datagrams still to be dropped on the way (the next n).
    drop_to_server: usize,
    /// Drops the first datagram sent once the connection is made (it carries requests).
    drop_first_request: bool,
    dropped: usize,
    /// Drops and reorders datagrams both ways, when set.
    link: Option<LossyLink>,
    /// Bytes of every datagram the session sent.
    sent_bytes: usize,
    buf: Vec<u8>,
}

/// A link that drops one datagram in 20 and holds one in 20 back to deliver it after the next
/// one of its direction (in this exchange or a later one), each way, from a seed: harsher than
/// the 2% of the end-to-end tests' proxy, since simulated time makes it cost nothing.
struct LossyLink {
    rng: Rng,
    /// Per direction (0: to the server, 1: to the client): the datagram held back, and counts.
    held: [Option<Vec<u8>>; 2],
    dropped: [u64; 2],
    reordered: [u64; 2],
}

impl LossyLink {
    fn new(seed: u64) -> Self {
        LossyLink { rng: Rng(seed | 1), held: [None, None], dropped: [0; 2], reordered: [0; 2] }
    }

    /// The datagrams of one exchange in one direction, as they arrive.
    fn carry(&mut self, direction: usize, datagrams: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut arrived = Vec::with_capacity(datagrams.len() + 1);
        for datagram in datagrams {
            if self.rng.chance(20) {
                self.dropped[direction] += 1;
            } else if let Some(earlier) = self.held[direction].take() {
                arrived.push(datagram);
                arrived.push(earlier);
                self.reordered[direction] += 1;
            } else if self.rng.chance(20) {
                self.held[direction] = Some(datagram);
            } else {
                arrived.push(datagram);
            }
        }
        arrived
    }
}

impl Net {
    fn new(
        cert: &Cert,
        options: ServerOptions,
        streams: u32,
        requests: u64,
        request_timeout: Option<Duration>,
    ) -> Self {
        Net::with_body(cert, options, streams, requests, request_timeout, Vec::new())
    }

    /// [`Net::new`] with requests that carry `body` (POST).
    fn with_body(
        cert: &Cert,
        options: ServerOptions,
        streams: u32,
        requests: u64,
        request_timeout: Option<Duration>,
        body: Vec<u8>,
    ) -> Self {
        Net::build(cert, options, streams, requests, request_timeout, body, Arc::from([]))
    }

    /// [`Net::with_body`] with checks on the responses' bodies.
    fn build(
        cert: &Cert,
        options: ServerOptions,
        streams: u32,
        requests: u64,
        request_timeout: Option<Duration>,
        body: Vec<u8>,
        kept_checks: crate::session::KeptCheckTable,
    ) -> Self {
        let now = Instant::now();
        let target = Target::parse(&format!("https://{SERVER_NAME}:4433/")).unwrap();
        let method = if body.is_empty() { "GET" } else { "POST" };
        let spec = RequestSpec::new(method, vec![], body);
        let setup = Setup {
            request: RequestConfig::new(
                &target,
                &[("/", &spec)],
                &crate::template::Templating::default(),
                streams,
                CONNECT_TIMEOUT,
                request_timeout,
            ),
            quic: QuicConfig::new(&trusting(cert), Congestion::Loopback, CONNECT_TIMEOUT).unwrap(),
            server: server_addr(),
            server_name: SERVER_NAME.to_string(),
            kept_checks,
        };
        let mut budget = Schedule::closed(Some(requests));
        // The connection is opened for a request, as the loop's are.
        assert!(budget.claim());
        Net {
            now,
            started: now,
            session: Session::new(Arc::new(setup), now).unwrap(),
            server: Server::new(cert, options),
            budget,
            claimed: true,
            stats: Stats::new(),
            counts: Counts::default(),
            events: Vec::new(),
            drop_to_server: 0,
            drop_first_request: false,
            dropped: 0,
            link: None,
            sent_bytes: 0,
            buf: Vec::new(),
        }
    }

    /// Counts the session's events as the loop does (refused requests go back into the budget).
    fn count(&mut self) {
        for event in self.events.drain(..) {
            match event {
                Event::FirstByte { .. } => self.counts.first_bytes += 1,
                Event::Response { status, .. } => {
                    assert_eq!(status, 200);
                    self.counts.ok += 1;
                }
                Event::Refused { .. } => {
                    self.counts.refused += 1;
                    self.budget.give_back(1);
                }
                Event::Failed { kind, why, .. } => {
                    *self.counts.errors.entry(kind).or_default() += 1;
                    self.counts.why.push(why.into_owned());
                }
                Event::SetupFailed { kind, why } => self.counts.setup_failed = Some((kind, why.into_owned())),
                Event::Limited(limit) => self.counts.limited = Some(limit),
                Event::DroppedPackets(n) => self.counts.dropped += n,
                Event::Judged { failed, .. } => self.counts.verdicts.push(failed),
                // Only :status is decoded from HTTP/3 responses.
                Event::RetryAfter { .. } => panic!("no Retry-After is read from HTTP/3"),
            }
        }
    }

    /// What the loop does after the session took something in: count, then start requests.
    fn advance(&mut self) {
        self.count();
        if self.session.is_established() {
            let mut units = Units::new(&mut self.claimed, &mut self.budget, &mut self.stats);
            self.session.start_requests(self.now, &mut units, &mut self.events);
            self.count();
        }
    }

    /// One exchange at the current instant: the session's batches reach the server datagram by
    /// datagram, the server's answers reach the session as GRO batches (datagram by datagram
    /// through a lossy link, which drops and reorders them). Whether anything moved.
    fn exchange(&mut self) -> bool {
        let mut moved = false;
        let mut to_client = Vec::new();
        if self.drop_first_request && self.session.is_established() {
            self.drop_first_request = false;
            self.drop_to_server = 1;
        }
        let mut to_server = Vec::new();
        while let Some(segment_size) = self.session.poll_transmit(self.now, &mut self.buf) {
            self.sent_bytes += self.buf.len();
            for datagram in self.buf.chunks(segment_size) {
                moved = true;
                if self.drop_to_server > 0 {
                    self.drop_to_server -= 1;
                    self.dropped += 1;
                    continue;
                }
                to_server.push(datagram.to_vec());
            }
        }
        if let Some(link) = self.link.as_mut() {
            to_server = link.carry(0, to_server);
        }
        for datagram in to_server {
            self.server.receive(self.now, &datagram, &mut to_client);
        }
        self.server.work(self.now, &mut to_client);
        moved |= !to_client.is_empty();
        if let Some(link) = self.link.as_mut() {
            let datagrams =
                to_client.iter().flat_map(|(bytes, size)| bytes.chunks(*size).map(<[u8]>::to_vec)).collect();
            to_client = link
                .carry(1, datagrams)
                .into_iter()
                .map(|d| {
                    let size = d.len();
                    (d, size)
                })
                .collect();
        }
        for (bytes, segment_size) in to_client {
            self.session.receive(&bytes, Some(segment_size), self.now, &mut self.events);
            self.advance();
        }
        moved
    }

    /// Exchanges until nothing moves, then moves the clock to the next timer of either side;
    /// repeats until `done` or `limit` of simulated time has passed.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) -> bool {
        let end = self.now + limit;
        for _ in 0..100_000 {
            while self.exchange() {
                if done(self) {
                    return true;
                }
            }
            if done(self) {
                return true;
            }
            let next = [self.session.poll_timeout(), self.server.next_timeout()].into_iter().flatten().min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    if self.session.poll_timeout().is_some_and(|d| d <= self.now) {
                        self.session.handle_timeout(self.now, &mut self.events);
                        self.advance();
                    }
                }
                _ => return done(self),
            }
        }
        panic!("the exchange did not settle");
    }

    /// What the loop does once the session must close with requests left in the budget: says
    /// goodbye, then opens another connection for the next request. False once none is left.
    fn reconnect(&mut self) -> bool {
        self.session.close(self.now);
        self.exchange();
        if !self.budget.claim() {
            return false;
        }
        self.claimed = true;
        self.session = Session::new(self.session.setup.clone(), self.now).unwrap();
        true
    }

    /// Runs until the budget is spent and nothing is in flight (or the session must close).
    fn run_all(&mut self) {
        let done = self.run_until(Duration::from_secs(60), |n| {
            n.session.must_close() || (n.budget.is_spent() && !n.claimed && n.session.is_idle())
        });
        assert!(done, "the run did not finish: {:?}", self.counts);
    }
}

#[test]
fn every_request_of_a_budget_over_several_streams_is_answered_and_counted_once() {
    let cert = self_signed();
    let mut net = Net::new(&cert, ServerOptions::default(), 8, 50, None);
    net.run_all();
    assert_eq!(net.counts.ok, 50, "{:?}", net.counts);
    assert_eq!(net.counts.first_bytes, 50);
    assert!(net.counts.errors.is_empty() && net.counts.refused == 0, "{:?}", net.counts);
    assert_eq!(net.server.answered, 50);
    assert_eq!(net.server.peak_open, 8, "-p 8 requests in flight");
    assert_eq!(net.counts.limited, None);
    assert!(net.session.is_idle() && !net.session.must_close());
}

#[test]
fn a_step_with_checks_on_the_body_gets_one_verdict_per_response_on_the_whole_body() {
    use crate::plan::Rule;
    let cert = self_signed();
    let rules = [
        Rule::BodyContains(b"world".to_vec()),
        Rule::BodySize(BODY.len() as u64..=BODY.len() as u64),
        Rule::BodyContains(b"nowhere".to_vec()),
    ];
    let checks = Arc::from([crate::session::KeptChecks::of(rules.iter(), &[], &[], &[], crate::session::Fields::NONE)]);
    let mut net = Net::build(&cert, ServerOptions::default(), 4, 20, None, Vec::new(), checks);
    net.run_all();
    assert_eq!(net.counts.ok, 20, "{:?}", net.counts);
    // Contains and size pass; the third fails, on every response.
    assert_eq!(net.counts.verdicts, vec![0b100; 20]);
}

#[test]
fn stray_datagrams_are_dropped_and_told_once_each_while_the_budget_completes() {
    let cert = self_signed();
    let mut net = Net::new(&cert, ServerOptions::default(), 4, 20, None);
    net.run_until(Duration::from_secs(5), |net| net.session.is_established());
    // Short-header junk to the client: no keys open it, whatever its first byte says.
    let mut junk = vec![0x40u8; 1200];
    for (i, b) in junk.iter_mut().enumerate().skip(1) {
        *b = (i * 131 % 251) as u8;
    }
    for _ in 0..3 {
        net.session.receive(&junk, Some(junk.len()), net.now, &mut net.events);
        net.advance();
    }
    assert_eq!(net.counts.dropped, 3, "{:?}", net.counts);
    net.run_all();
    assert_eq!(net.counts.ok, 20, "{:?}", net.counts);
    assert_eq!(net.counts.dropped, 3, "each told once: {:?}", net.counts);
}

#[test]
fn a_server_stream_limit_below_p_is_reported_and_never_exceeded() {
    let cert = self_signed();
    let options = ServerOptions { max_streams: 3, ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 10, 40, None);
    net.run_all();
    assert_eq!(net.counts.limited, Some(3));
    assert_eq!(net.counts.ok, 40, "{:?}", net.counts);
    assert_eq!(net.server.answered, 40);
    assert!(net.server.peak_open <= 3, "{} open at once", net.server.peak_open);
    assert!(net.counts.errors.is_empty(), "{:?}", net.counts);
}

#[test]
fn goaway_lets_the_streams_below_it_finish_refuses_the_rest_and_closes() {
    let cert = self_signed();
    let options = ServerOptions { goaway_after: Some(5), ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 8, 100, None);
    let closed = net.run_until(Duration::from_secs(10), |n| n.session.must_close());
    assert!(closed, "{:?}", net.counts);
    assert_eq!(net.server.answered, 5);
    // Requests 0..8 went out at once; the first five were answered, GOAWAY came after the
    // fifth naming the sixth's stream, so the rest were not processed. The server said nothing
    // more of them: they were given up on after the grace.
    assert_eq!(net.now - net.started, GOAWAY_GRACE);
    assert_eq!(net.counts.ok, 5, "{:?}", net.counts);
    assert!(net.counts.errors.is_empty(), "{:?}", net.counts);
    assert!(net.counts.refused >= 3, "{:?}", net.counts);
    // Every refused request is back in the budget: 100 - 8 taken + the refused.
    assert_eq!(net.session.sent_in_flight(), 0);
    let mut left = 0;
    while net.budget.claim() {
        left += 1;
    }
    assert_eq!(left, 100 - net.counts.ok);
}

#[test]
fn a_lost_request_datagram_is_repaired_and_the_count_stays_exact() {
    let cert = self_signed();
    let mut net = Net::new(&cert, ServerOptions::default(), 4, 20, None);
    net.drop_first_request = true;
    net.run_all();
    assert_eq!(net.dropped, 1);
    assert_eq!(net.counts.ok, 20, "{:?}", net.counts);
    assert_eq!(net.server.answered, 20);
    assert!(net.counts.errors.is_empty(), "{:?}", net.counts);
}

#[test]
fn a_port_where_nothing_answers_quic_fails_the_connect_at_the_connect_timeout() {
    let cert = self_signed();
    let options = ServerOptions { silent: true, ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 4, 10, None);
    net.run_until(Duration::from_secs(60), |n| n.counts.setup_failed.is_some());
    let (kind, why) = net.counts.setup_failed.clone().expect("the connect fails");
    assert_eq!(kind, ErrorKind::Connect);
    assert!(why.contains("QUIC handshake"), "{why}");
    assert_eq!(net.now - net.started, CONNECT_TIMEOUT);
    assert!(net.session.must_close());
    assert_eq!(net.counts.ok, 0);
}

#[test]
fn requests_a_server_never_answers_time_out_and_the_connection_goes_on() {
    let cert = self_signed();
    let options = ServerOptions { mute: true, ..ServerOptions::default() };
    let timeout = Duration::from_secs(2);
    let mut net = Net::new(&cert, options, 3, 6, Some(timeout));
    net.run_all();
    assert_eq!(net.counts.errors.get(&ErrorKind::Timeout), Some(&6), "{:?}", net.counts);
    assert_eq!(net.counts.ok, 0);
    assert!(!net.session.must_close(), "the connection outlives its requests");
    // Two rounds of three, each timed out at exactly the timeout.
    assert_eq!(net.now - net.started, timeout * 2);
    assert!(net.counts.why.iter().all(|w| w.contains("--timeout")));
}

#[test]
fn requests_in_flight_count_as_sent_only_once_a_batch_carried_them() {
    let cert = self_signed();
    let mut net = Net::new(&cert, ServerOptions { mute: true, ..ServerOptions::default() }, 4, 4, None);
    assert!(net.run_until(Duration::from_secs(1), |n| n.session.is_established()));
    // Requests start when the connection is made; before the next batch they are not sent.
    assert_eq!(net.session.requests.len(), 4);
    assert_eq!(net.session.sent_in_flight(), 0);
    net.exchange();
    assert_eq!(net.session.sent_in_flight(), 4);
}

#[test]
fn a_server_answering_the_stream_its_goaway_names_is_counted_once_not_sent_again() {
    let cert = self_signed();
    let options = ServerOptions { goaway_after: Some(5), goaway_like_h3_crate: true, ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 8, 100, None);
    assert!(net.run_until(Duration::from_secs(10), |n| n.session.must_close()), "{:?}", net.counts);
    // The sixth request was answered against the GOAWAY's word, and counted as ok; the rest
    // were rejected, and go back into the budget. No grace was needed: the server settled all.
    assert_eq!(net.server.answered, 6);
    assert_eq!(net.counts.ok, 6, "{:?}", net.counts);
    assert_eq!(net.counts.refused, 2, "{:?}", net.counts);
    assert!(net.now - net.started < GOAWAY_GRACE);
    let mut left = 0;
    while net.budget.claim() {
        left += 1;
    }
    assert_eq!(left, 100 - net.counts.ok);
}

#[test]
fn closing_tells_the_server_at_once_with_h3_no_error() {
    let cert = self_signed();
    let mut net = Net::new(&cert, ServerOptions::default(), 4, 8, None);
    net.run_all();
    assert_eq!(net.counts.ok, 8);
    net.session.close(net.now);
    assert!(net.session.must_close());
    net.exchange();
    assert_eq!(net.server.closed_by_client, 1, "the server saw the CONNECTION_CLOSE");
    assert_eq!(net.session.sent_in_flight(), 0);
}

#[test]
fn through_a_link_that_drops_and_reorders_every_request_is_answered_and_counted_once() {
    let cert = self_signed();
    for (streams, requests) in [(1, 200), (8, 500), (32, 1000)] {
        let (mut dropped, mut reordered) = ([0; 2], [0; 2]);
        for seed in 1..=10 {
            let mut net = Net::new(&cert, ServerOptions::default(), streams, requests, None);
            net.link = Some(LossyLink::new(seed));
            net.run_all();
            let shape = format!("seed {seed}, -p {streams}, -n {requests}");
            assert_eq!(net.counts.ok, requests, "{shape}: {:?}", net.counts);
            assert_eq!(net.server.answered, requests, "{shape}");
            assert!(net.counts.errors.is_empty() && net.counts.refused == 0, "{shape}: {:?}", net.counts);
            assert!(net.session.is_idle() && !net.session.must_close(), "{shape}");
            let link = net.link.as_ref().unwrap();
            for (total, n) in dropped.iter_mut().zip(link.dropped).chain(reordered.iter_mut().zip(link.reordered)) {
                *total += n;
            }
        }
        // Both ways saw both, or the test proved nothing.
        assert!(dropped.iter().chain(&reordered).all(|&n| n > 0), "-p {streams}: {dropped:?} {reordered:?}");
    }
}

#[test]
fn a_request_body_the_server_stops_is_reset_not_sent_and_the_response_still_counts() {
    let cert = self_signed();
    let options = ServerOptions { answer_early: true, ..ServerOptions::default() };
    let body = vec![b'b'; 3 << 20];
    let mut net = Net::with_body(&cert, options, 2, 6, None, body);
    net.run_all();
    assert_eq!(net.counts.ok, 6, "{:?}", net.counts);
    assert_eq!(net.server.answered, 6);
    assert!(net.counts.errors.is_empty(), "{:?}", net.counts);
    // Every stopped request stream was reset (RFC 9000 §3.5), so the rest of its 3 MiB body
    // was not sent: at most what the server's stream window (1.25 MB) let out before its
    // STOP_SENDING came back. Against quic-go, whose flow control gives no credit back for a
    // body it is sent after stopping it, a connection that kept sending stalled.
    let resets = |n: &mut Net| n.server.conns.values().map(|c| c.conn.stats().frame_rx.reset_stream).sum::<u64>();
    net.run_until(Duration::from_secs(1), |n| resets(n) == 6);
    assert_eq!(resets(&mut net), 6, "{} bytes sent", net.sent_bytes);
    assert!(net.sent_bytes < 6 * (3 << 20) / 2, "{} bytes sent for 6 requests stopped early", net.sent_bytes);
}

#[test]
fn a_budget_against_a_server_allowing_no_request_stream_ends_with_each_request_failed_once() {
    // `-n 16 -p 4` against a server whose initial_max_streams_bidi is 0, as the loop runs it:
    // each connection fails the request it was opened for and closes at once, and the next
    // connection takes the next request, until the budget is spent. It waited for ever.
    let cert = self_signed();
    let options = ServerOptions { max_streams: 0, ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 4, 16, Some(Duration::from_secs(1)));
    let mut connections = 0;
    loop {
        connections += 1;
        let closed = net.run_until(Duration::from_secs(60), |n| n.session.must_close());
        assert!(closed, "connection {connections} waits for ever: {:?}", net.counts);
        if !net.reconnect() {
            break;
        }
    }
    assert_eq!(connections, 16);
    assert_eq!(net.server.connections, 16);
    assert_eq!(net.counts.limited, Some(0));
    assert_eq!(net.counts.errors.get(&ErrorKind::Protocol), Some(&16), "{:?}", net.counts);
    assert!(net.counts.why.iter().all(|w| w.contains("allowed no request stream")), "{:?}", net.counts.why);
    assert_eq!(net.counts.ok + net.server.answered, 0);
    assert!(net.budget.is_spent() && !net.claimed);
    assert_eq!(net.now, net.started, "each at its handshake, no timer waited for");
}

#[test]
fn a_connection_the_server_grants_no_more_streams_closes_after_the_connect_timeout_not_never() {
    let cert = self_signed();
    let options = ServerOptions { max_streams: 2, grants_no_more_streams: true, ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 4, 10, None);
    let closed = net.run_until(Duration::from_secs(60), |n| n.session.must_close());
    assert!(closed, "waits for MAX_STREAMS for ever: {:?}", net.counts);
    assert_eq!(net.counts.ok, 2, "{:?}", net.counts);
    assert!(net.counts.errors.is_empty(), "no request was taken that could not start: {:?}", net.counts);
    assert_eq!(net.now - net.started, CONNECT_TIMEOUT);
    // The eight not sent are left in the budget for the next connection.
    let mut left = 0;
    while net.budget.claim() {
        left += 1;
    }
    assert_eq!(left, 8);
}

#[test]
fn a_connection_out_of_streams_with_the_budget_spent_is_idle_at_once() {
    let cert = self_signed();
    let options = ServerOptions { max_streams: 2, grants_no_more_streams: true, ..ServerOptions::default() };
    let mut net = Net::new(&cert, options, 4, 2, None);
    net.run_all();
    assert_eq!(net.counts.ok, 2, "{:?}", net.counts);
    assert!(net.session.is_idle() && !net.session.must_close(), "nothing left to wait for MAX_STREAMS for");
    assert_eq!(net.now, net.started, "the run's end waits no connect timeout");
}
