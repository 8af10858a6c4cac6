//! End to end: hand-written HTTP/2 servers that misbehave, or behave in ways real servers only
//! sometimes do, each pinned to exact numbers. The servers here write raw frames, so a test
//! decides exactly which bytes volley gets.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use support::{json_report, number, run_volley_timeout};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const MAX_CONCURRENT_STREAMS: u16 = 0x3;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PROTOCOL_ERROR: u32 = 0x1;
const INTERNAL_ERROR: u32 = 0x2;
const REFUSED_STREAM: u32 = 0x7;
/// HPACK: `:status: 200` from the static table.
const STATUS_200: u8 = 0x88;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

fn goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    let mut payload = last_stream.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    frame(out, GOAWAY, 0, 0, &payload);
}

/// A `200` response with body `ok` on `stream`.
fn ok_response(out: &mut Vec<u8>, stream: u32) {
    frame(out, HEADERS, END_HEADERS, stream, &[STATUS_200]);
    frame(out, DATA, END_STREAM, stream, b"ok");
}

/// What the server does with one connection's `n`-th request (counting from 1) on `stream`.
/// Returns false to stop reading the connection (after writing `out`, the server closes it
/// once the client has).
type Answer = dyn Fn(u64, u32, &mut Vec<u8>) -> bool + Send + Sync;

/// A hand-written HTTP/2 server on 127.0.0.1: sends empty SETTINGS, then for every request
/// (HEADERS frame) asks `answer`. Counts connections and the responses it wrote.
struct RawH2Server {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
}

impl RawH2Server {
    fn start(answer: impl Fn(u64, u32, &mut Vec<u8>) -> bool + Send + Sync + 'static) -> RawH2Server {
        RawH2Server::with_settings(&[], answer)
    }

    /// The same, with these SETTINGS parameters.
    fn with_settings(
        settings: &[(u16, u32)],
        answer: impl Fn(u64, u32, &mut Vec<u8>) -> bool + Send + Sync + 'static,
    ) -> RawH2Server {
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let answer: Arc<Answer> = Arc::new(answer);
        let (c, a) = (connections.clone(), answered.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let (answer, answered, payload) = (answer.clone(), a.clone(), payload.clone());
                std::thread::spawn(move || serve(stream, &payload, &*answer, &answered));
            }
        });
        RawH2Server { addr, connections, answered }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

fn serve(mut tcp: TcpStream, settings: &[u8], answer: &Answer, answered: &AtomicU64) {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = tcp.set_nodelay(true);
    let mut out = Vec::new();
    frame(&mut out, SETTINGS, 0, 0, settings);
    if tcp.write_all(&out).is_err() {
        return;
    }
    let mut buf = Vec::new();
    let mut requests = 0;
    let mut chunk = [0u8; 65536];
    let mut at = 24; // the client preface
    loop {
        let Ok(n) = tcp.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let mut go_on = true;
        while go_on && buf.len() >= at + 9 {
            let len = u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]]) as usize;
            if buf.len() < at + 9 + len {
                break;
            }
            let kind = buf[at + 3];
            let stream = u32::from_be_bytes([buf[at + 5], buf[at + 6], buf[at + 7], buf[at + 8]]) & 0x7fff_ffff;
            at += 9 + len;
            if kind == HEADERS {
                requests += 1;
                let before = out.len();
                go_on = answer(requests, stream, &mut out);
                answered.fetch_add(responses(&out[before..]), Ordering::SeqCst);
            }
        }
        if tcp.write_all(&out).is_err() {
            return;
        }
        if !go_on {
            // Wait for the client to close: it must act on what it got, not on our close.
            let _ = tcp.read(&mut chunk);
            return;
        }
    }
}

/// How many responses the frames in `out` end (END_STREAM on HEADERS or DATA).
fn responses(out: &[u8]) -> u64 {
    let mut at = 0;
    let mut n = 0;
    while at + 9 <= out.len() {
        let len = u32::from_be_bytes([0, out[at], out[at + 1], out[at + 2]]) as usize;
        if matches!(out[at + 3], HEADERS | DATA) && out[at + 4] & END_STREAM != 0 {
            n += 1;
        }
        at += 9 + len;
    }
    n
}

fn volley(args: &[&str], url: &str) -> serde_json::Value {
    let mut all = vec!["--http2", "-j", "-t", "1", "--timeout", "5s"];
    all.extend_from_slice(args);
    all.push(url);
    json_report(&run_volley_timeout(all, Duration::from_secs(30)))
}

fn sample(report: &serde_json::Value, kind: &str) -> String {
    report["errorSamples"][kind].as_str().unwrap_or_default().to_string()
}

/// Each connection's first request gets `bad` instead of an answer: every request is a
/// protocol error with `expect` in its message, and the run ends.
fn every_request_is_a_protocol_error(bad: fn(u32, &mut Vec<u8>), expect: &str) {
    let server = RawH2Server::start(move |_, stream, out| {
        bad(stream, out);
        false
    });
    let r = volley(&["-n", "6", "-c", "2"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 0, "{r}");
    assert_eq!(number(&r, "/errors/protocol"), 6, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 6, "{r}");
    assert!(sample(&r, "protocol").contains(expect), "{r}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 6);
}

#[test]
fn a_malformed_frame_is_a_protocol_error() {
    // SETTINGS payloads are multiples of 6 bytes.
    every_request_is_a_protocol_error(|_, out| frame(out, SETTINGS, 0, 0, &[0; 5]), "SETTINGS frame with an invalid");
}

#[test]
fn a_bad_header_block_is_a_compression_error() {
    // HPACK index 0 does not exist.
    every_request_is_a_protocol_error(
        |stream, out| frame(out, HEADERS, END_HEADERS | END_STREAM, stream, &[0x80]),
        "header compression error",
    );
}

#[test]
fn a_frame_larger_than_advertised_is_a_protocol_error() {
    // We advertise the default 16384-byte SETTINGS_MAX_FRAME_SIZE.
    every_request_is_a_protocol_error(
        |stream, out| {
            frame(out, HEADERS, END_HEADERS, stream, &[STATUS_200]);
            frame(out, DATA, END_STREAM, stream, &[b'x'; 16385]);
        },
        "exceeds our SETTINGS_MAX_FRAME_SIZE",
    );
}

#[test]
fn a_protocol_error_goaway_fails_the_streams_it_leaves_unanswered() {
    every_request_is_a_protocol_error(|_, out| goaway(out, 0, PROTOCOL_ERROR), "GOAWAY PROTOCOL_ERROR");
}

#[test]
fn a_reset_stream_is_one_error_and_the_connection_goes_on() {
    // Every other request is reset; all share one connection.
    let server = RawH2Server::start(|i, stream, out| {
        if i % 2 == 1 {
            frame(out, RST_STREAM, 0, stream, &INTERNAL_ERROR.to_be_bytes());
        } else {
            ok_response(out, stream);
        }
        true
    });
    let r = volley(&["-n", "40", "-c", "1", "-p", "4"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 20, "{r}");
    assert_eq!(number(&r, "/errors/reset"), 20, "{r}");
    assert_eq!(number(&r, "/connectionsMade"), 1, "{r}");
    assert!(sample(&r, "reset").contains("RST_STREAM INTERNAL_ERROR"), "{r}");
    assert_eq!(server.answered.load(Ordering::SeqCst), 20);
}

#[test]
fn refused_streams_are_sent_again_and_the_count_stays_exact() {
    // Every third request is refused unprocessed, which the protocol allows us to retry.
    let server = RawH2Server::start(|i, stream, out| {
        if i % 3 == 0 {
            frame(out, RST_STREAM, 0, stream, &REFUSED_STREAM.to_be_bytes());
        } else {
            ok_response(out, stream);
        }
        true
    });
    let r = volley(&["-n", "60", "-c", "2", "-p", "3"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 60, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(server.answered.load(Ordering::SeqCst), 60);
    // 60 answered of every 3 asked: 30 refused, give or take the last ones of each connection.
    let refused = number(&r, "/requests/refused");
    assert!((28..=32).contains(&refused), "{r}");
    assert!(r["warnings"].to_string().contains("declined"), "{r}");
}

#[test]
fn goaway_after_a_few_requests_finishes_those_reconnects_and_retries_the_rest() {
    // After 3 requests a connection says GOAWAY with the 3rd as the last it will process; with
    // 4 streams in flight, the 4th is left unanswered and must be sent again elsewhere.
    let server = RawH2Server::start(|i, stream, out| {
        if i <= 3 {
            ok_response(out, stream);
        }
        if i == 3 {
            goaway(out, stream, 0);
        }
        i < 4
    });
    let r = volley(&["-n", "30", "-c", "1", "-p", "4"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 30, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(server.answered.load(Ordering::SeqCst), 30);
    assert_eq!(number(&r, "/connectionsMade"), 10, "{r}");
    assert!(number(&r, "/requests/refused") >= 1, "{r}");
}

#[test]
fn a_lower_stream_limit_is_honoured_from_the_first_request_and_reported() {
    // At most 2 streams at once: the server holds each request until a second one is open,
    // then answers both, and counts any request that arrives with 2 already open.
    let open = Arc::new(std::sync::Mutex::new(Vec::new()));
    let over = Arc::new(AtomicU64::new(0));
    let (o, v) = (open.clone(), over.clone());
    let server = RawH2Server::with_settings(&[(MAX_CONCURRENT_STREAMS, 2)], move |_, stream, out| {
        let mut open = o.lock().unwrap();
        if open.len() >= 2 {
            v.fetch_add(1, Ordering::SeqCst);
        }
        open.push(stream);
        if open.len() == 2 {
            for s in open.drain(..) {
                ok_response(out, s);
            }
        }
        true
    });
    let r = volley(&["-n", "40", "-c", "1", "-p", "10"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 40, "{r}");
    assert_eq!(over.load(Ordering::SeqCst), 0, "more than 2 streams were open at once");
    assert_eq!(number(&r, "/streamLimit"), 2, "{r}");
    assert!(r["warnings"].to_string().contains("allows 2 streams per connection"), "{r}");
}

#[test]
fn a_response_whose_headers_need_continuation_frames_is_read_whole() {
    // 48 KB of header fields: a HEADERS frame and CONTINUATION frames of at most 16 KB each.
    let server = RawH2Server::start(|_, stream, out| {
        let mut block = vec![STATUS_200];
        for i in 0..48 {
            // Literal without indexing, new name (RFC 7541 §6.2.2), 1000-byte value.
            let name = format!("x-big-{i:02}");
            block.push(0x00);
            block.push(name.len() as u8);
            block.extend_from_slice(name.as_bytes());
            // 1000 as an integer with a 7-bit prefix (RFC 7541 §5.1): 127, then 873 in 7-bit groups.
            block.extend_from_slice(&[0x7f, 0x80 | (873 % 128) as u8, (873 / 128) as u8]);
            block.extend(std::iter::repeat_n(b'v', 1000));
        }
        // END_STREAM goes on the HEADERS frame, END_HEADERS on the last CONTINUATION.
        let mut chunks = block.chunks(16_384).peekable();
        let (mut kind, mut flags) = (HEADERS, END_STREAM);
        while let Some(chunk) = chunks.next() {
            let end = if chunks.peek().is_none() { END_HEADERS } else { 0 };
            frame(out, kind, flags | end, stream, chunk);
            (kind, flags) = (CONTINUATION, 0);
        }
        true
    });
    let r = volley(&["-n", "50", "-c", "2", "-p", "5"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 50, "{r}");
    assert_eq!(number(&r, "/statusCodes/200"), 50, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert!(number(&r, "/bytesReceived") > 50 * 48_000, "{r}");
}

/// A TCP server that answers every connection with `answer` once the client has written, then
/// holds it open until the client closes.
fn start_plain(answer: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            std::thread::spawn(move || {
                tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = [0u8; 4096];
                if tcp.read(&mut buf).unwrap_or(0) > 0 && !answer.is_empty() {
                    let _ = tcp.write_all(answer);
                }
                while tcp.read(&mut buf).is_ok_and(|n| n > 0) {}
            });
        }
    });
    addr
}

/// The run fails fast with one line on stderr naming `expect`.
fn fails_at_set_up(addr: SocketAddr, extra: &[&str], expect: &str) {
    let started = std::time::Instant::now();
    let mut args = vec!["--http2", "-n", "10", "-c", "2", "-t", "1"];
    args.extend_from_slice(extra);
    let url = format!("http://{addr}/");
    args.push(&url);
    let out = run_volley_timeout(args, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(expect), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[test]
fn a_server_answering_the_preface_in_http1_is_named_and_not_retried_forever() {
    let addr = start_plain(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    fails_at_set_up(addr, &[], "answered in HTTP/1.x");
}

#[test]
fn a_server_that_never_sends_its_settings_is_a_connect_timeout() {
    let addr = start_plain(b"");
    fails_at_set_up(addr, &["--connect-timeout", "300ms"], "no HTTP/2 SETTINGS from the server");
}

#[test]
fn a_server_allowing_no_streams_fails_each_request_instead_of_reconnecting_forever() {
    let server = RawH2Server::with_settings(&[(MAX_CONCURRENT_STREAMS, 0)], |_, stream, out| {
        ok_response(out, stream);
        true
    });
    let r = volley(&["-n", "5", "-c", "1"], &server.url());
    assert_eq!(number(&r, "/errors/protocol"), 5, "{r}");
    assert!(sample(&r, "protocol").contains("allowed no stream"), "{r}");
    assert_eq!(server.answered.load(Ordering::SeqCst), 0);
}

#[test]
fn a_server_refusing_every_request_ends_a_counted_run_with_errors() {
    let server = RawH2Server::start(|_, stream, out| {
        frame(out, RST_STREAM, 0, stream, &REFUSED_STREAM.to_be_bytes());
        true
    });
    let r = volley(&["-n", "10", "-c", "1", "-p", "10"], &server.url());
    assert_eq!(number(&r, "/requests/ok"), 0, "{r}");
    assert_eq!(number(&r, "/errors/reset"), 10, "{r}");
    assert!(number(&r, "/requests/refused") >= 1000, "{r}");
    assert!(sample(&r, "reset").contains("in a row unprocessed"), "{r}");
}

#[test]
fn a_scenario_step_refused_unprocessed_is_sent_again_as_that_step_and_iterations_stay_exact() {
    use volley_engine::{Mix, NamedRequest, Order, Plan, Protocol, RequestSpec, Requests, RunControl, Scenario, Stop};
    // Every third request is refused: a refused step must go again as itself, within its
    // iteration, not as a new iteration nor as whichever step comes next.
    let server = RawH2Server::start(|i, stream, out| {
        if i % 3 == 0 {
            frame(out, RST_STREAM, 0, stream, &REFUSED_STREAM.to_be_bytes());
        } else {
            ok_response(out, stream);
        }
        true
    });
    let step = |n: u32| NamedRequest {
        name: format!("step {n}"),
        path_and_query: format!("/{n}"),
        spec: RequestSpec::new("GET", vec![], vec![]),
        templated: false,
        checks: vec![],
        extract: vec![],
        think: None,
        cookies: false,
        follow_redirects: 0,
    };
    let target = volley_engine::Target::parse(&server.url()).expect("valid URL");
    let mut plan = Plan::new(target, RequestSpec::new("GET", vec![], vec![]), 2, Stop::Requests(20));
    plan.protocol = Protocol::Http2 { streams: 3 };
    plan.threads = 1;
    plan.requests = Requests::Mix(Mix {
        requests: (1..=3).map(step).collect(),
        order: Order::Scenarios {
            scenarios: vec![Scenario { name: "walk".into(), weight: 1, steps: 3, pacing: None }],
            seed: 1,
        },
    });
    let result = volley_engine::run(&plan, &RunControl::new(), &mut |_| {}).expect("the run");
    let c = &result.stats.counters;
    assert_eq!((c.iterations, c.ok, c.errors()), (20, 60, 0), "{:?}", result.error_samples);
    for (index, name) in result.stats.names.iter() {
        assert_eq!(name.counters.ok, 20, "step {} answered once per iteration", index + 1);
    }
    assert_eq!(result.stats.names.iter().count(), 3);
    assert_eq!(server.answered.load(Ordering::SeqCst), 60);
    assert!((28..=32).contains(&c.refused), "{}", c.refused);
}
