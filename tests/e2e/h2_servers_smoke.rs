//! The HTTP/2 servers of `tests/support/h2_servers.rs` do what the HTTP/2 end-to-end tests will
//! rely on, checked before volley speaks HTTP/2: each answers curl with HTTP/2 over h2c (prior
//! knowledge) and over TLS (ALPN) and counts exactly the requests it served; with
//! `big_header_bytes` each sends HEADERS + CONTINUATION frames on every response; with
//! `goaway_after` nginx sends GOAWAY as documented. The frames are read off the wire by a few
//! lines of raw HTTP/2 here, independent of volley's codec.

use crate::support;

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use support::h2_servers::{H2Options, H2Server, H2o, Lighttpd};
use support::{NGINX_BODY, Nginx};

/// Runs curl with `args` plus the URL and returns (`%{http_version}`, `%{http_code}`, body).
fn curl(args: &[&str], url: &str) -> (String, u16, String) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_version} %{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("cannot run curl");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "curl {args:?} {url} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (body, last) = stdout.rsplit_once('\n').expect("curl's -w line");
    let (version, code) = last.split_once(' ').expect("version and code");
    (version.to_string(), code.parse().expect("a status code"), body.to_string())
}

/// One request over h2c by prior knowledge and one over TLS, each counted once, both HTTP/2.
fn serves_h2c_and_tls_and_counts(server: &dyn H2Server) {
    let name = server.name();
    let (version, code, body) = curl(&["--http2-prior-knowledge"], &server.h2c_url());
    assert_eq!((version.as_str(), code), ("2", 200), "{name} over h2c");
    assert_eq!(body, NGINX_BODY, "{name} over h2c");
    assert_eq!(server.settled_requests(), 1, "{name}: {:?}\n{}", server.log_lines(), server.error_log());

    let ca = server.cert().expect("started with tls").write_ca(server.dir());
    let (version, code, body) = curl(&["--http2", "--cacert", ca.to_str().unwrap()], &server.https_url());
    assert_eq!((version.as_str(), code), ("2", 200), "{name} over TLS");
    assert_eq!(body, NGINX_BODY, "{name} over TLS");
    assert_eq!(server.settled_requests(), 2, "{name}: {:?}\n{}", server.log_lines(), server.error_log());

    for line in server.log_lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields[..2], ["GET", "200"], "{name}: {line}");
        assert!(fields[2].starts_with("HTTP/2"), "{name} logged another protocol: {line}");
    }
}

#[test]
fn lighttpd_serves_h2c_and_tls_and_counts_each_request() {
    let Some(server) = Lighttpd::start_with(H2Options::both()) else { return };
    serves_h2c_and_tls_and_counts(&server);
}

#[test]
fn h2o_serves_h2c_and_tls_and_counts_each_request() {
    let Some(server) = H2o::start_with(H2Options::both()) else { return };
    serves_h2c_and_tls_and_counts(&server);
}

#[test]
fn nginx_serves_h2c_and_tls_and_counts_each_request() {
    let Some(server) = Nginx::start_h2(H2Options::both()) else { return };
    serves_h2c_and_tls_and_counts(&server);
}

#[test]
fn each_server_serves_tls_alone() {
    for server in support::h2_servers::start_each(&H2Options::tls()) {
        let name = server.name();
        assert!(server.h2c_addr().is_none(), "{name}");
        let ca = server.cert().expect("started with tls").write_ca(server.dir());
        let (version, code, body) = curl(&["--http2", "--cacert", ca.to_str().unwrap()], &server.https_url());
        assert_eq!((version.as_str(), code, body.as_str()), ("2", 200, NGINX_BODY), "{name} over TLS");
        assert_eq!(server.settled_requests(), 1, "{name}: {:?}\n{}", server.log_lines(), server.error_log());
    }
}

#[test]
fn big_headers_come_as_headers_and_continuation_frames_from_each_server() {
    let total = 48 * 1024;
    let servers = support::h2_servers::start_each(&H2Options { big_header_bytes: Some(total), ..H2Options::h2c() });
    for server in &servers {
        let name = server.name();
        // Two requests on one connection: the second response must not be any smaller (no
        // HPACK dynamic table entry can stand in for the big headers).
        let exchange = h2c_exchange(server.h2c_addr().unwrap(), 2);
        assert!(exchange.closed_or_done, "{name}: {exchange:?}");
        for stream in [1, 3] {
            let frames: Vec<&Frame> = exchange.frames.iter().filter(|f| f.stream == stream).collect();
            let kinds: Vec<u8> = frames.iter().map(|f| f.kind).collect();
            let block: Vec<&&Frame> = frames.iter().filter(|f| f.kind == HEADERS || f.kind == CONTINUATION).collect();
            assert!(
                block.len() >= 3 && block[0].kind == HEADERS && block[1..].iter().all(|f| f.kind == CONTINUATION),
                "{name} stream {stream}: frame kinds {kinds:?}"
            );
            assert_eq!(block[0].len, 16384, "{name} stream {stream}: first HEADERS frame");
            let (last, first) = (block.last().unwrap(), &block[..block.len() - 1]);
            assert!(first.iter().all(|f| f.flags & END_HEADERS == 0), "{name} stream {stream}: END_HEADERS too soon");
            assert!(last.flags & END_HEADERS != 0, "{name} stream {stream}: no END_HEADERS");
            let block_len: usize = block.iter().map(|f| f.len).sum();
            assert!(block_len >= total, "{name} stream {stream}: header block of {block_len} bytes");
            let body: Vec<u8> = frames.iter().filter(|f| f.kind == DATA).flat_map(|f| f.payload.clone()).collect();
            assert_eq!(body, NGINX_BODY.as_bytes(), "{name} stream {stream}");
        }
        assert_eq!(server.settled_requests(), 2, "{name}: {:?}", server.log_lines());
    }
}

#[test]
fn nginx_goaway_after_n_requests_names_the_nth_stream_and_drops_later_ones() {
    let Some(nginx) = Nginx::start_h2(H2Options { goaway_after: Some(2), ..H2Options::h2c() }) else { return };
    // Three requests at once (streams 1, 3, 5) where only two are allowed on a connection.
    let exchange = h2c_exchange(H2Server::h2c_addr(&nginx).unwrap(), 3);
    assert!(exchange.closed_or_done, "{exchange:?}");
    let goaways: Vec<&Frame> = exchange.frames.iter().filter(|f| f.kind == GOAWAY).collect();
    assert_eq!(goaways.len(), 1, "{exchange:?}");
    let payload = &goaways[0].payload;
    let last_stream_id = u32::from_be_bytes(payload[0..4].try_into().unwrap()) & 0x7fff_ffff;
    let error_code = u32::from_be_bytes(payload[4..8].try_into().unwrap());
    assert_eq!((last_stream_id, error_code), (3, 0), "GOAWAY names the 2nd request's stream, NO_ERROR");
    let answered: BTreeSet<u32> = exchange.frames.iter().filter(|f| f.kind == HEADERS).map(|f| f.stream).collect();
    assert_eq!(answered, BTreeSet::from([1, 3]), "{exchange:?}");
    assert!(!exchange.frames.iter().any(|f| f.stream == 5), "stream 5 is dropped without a word: {exchange:?}");
    assert!(exchange.eof, "nginx closes the connection after the 2nd response: {exchange:?}");
    assert_eq!(nginx.settled_requests(), 2, "{:?}", nginx.log_lines());
}

#[test]
#[should_panic(expected = "cannot send GOAWAY")]
fn lighttpd_refuses_goaway_after() {
    let _ = Lighttpd::start_with(H2Options { goaway_after: Some(2), ..H2Options::h2c() });
}

// ---------------------------------------------------------------------------------------------
// A few lines of raw HTTP/2 over cleartext
// ---------------------------------------------------------------------------------------------

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

struct Frame {
    kind: u8,
    flags: u8,
    len: usize,
    stream: u32,
    payload: Vec<u8>,
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(type {} flags {:#04x} len {} stream {})", self.kind, self.flags, self.len, self.stream)
    }
}

#[derive(Debug)]
struct Exchange {
    frames: Vec<Frame>,
    /// The server closed the connection.
    eof: bool,
    /// The server closed the connection or every request's stream ended.
    closed_or_done: bool,
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// Sends `requests` GETs for `/` at once (streams 1, 3, 5, ...) over a new h2c connection to
/// `addr` and collects the frames the server sends until every stream has ended, the server
/// closes the connection, or nothing comes for 3 s.
fn h2c_exchange(addr: SocketAddr, requests: u32) -> Exchange {
    let mut socket = TcpStream::connect(addr).expect("connect");
    socket.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let authority = addr.to_string();
    // :method GET, :scheme http, :path / (static table 2, 6, 4), then :authority as a literal
    // without indexing with the name from static table entry 1.
    let mut block = vec![0x82, 0x86, 0x84, 0x01, authority.len() as u8];
    block.extend(authority.as_bytes());
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    for i in 0..requests {
        out.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, &block));
    }
    socket.write_all(&out).expect("send requests");

    let mut open: BTreeSet<u32> = (0..requests).map(|i| 1 + 2 * i).collect();
    let (mut frames, mut buf, mut eof) = (Vec::new(), Vec::new(), false);
    while !open.is_empty() {
        let mut chunk = [0u8; 65536];
        match socket.read(&mut chunk) {
            Ok(0) => eof = true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(_) => eof = true,
        }
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes(buf[5..9].try_into().unwrap()) & 0x7fff_ffff;
            let payload = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            if kind == SETTINGS && flags & ACK == 0 && !eof {
                let _ = socket.write_all(&frame(SETTINGS, ACK, 0, &[]));
            }
            if ((kind == DATA || kind == HEADERS) && flags & END_STREAM != 0) || kind == RST_STREAM {
                open.remove(&stream);
            }
            frames.push(Frame { kind, flags, len, stream, payload });
        }
        if eof {
            break;
        }
    }
    let closed_or_done = eof || open.is_empty();
    Exchange { frames, eof, closed_or_done }
}
