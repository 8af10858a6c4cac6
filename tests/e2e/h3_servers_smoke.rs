//! The in-test HTTP/3 server of `tests/support/h3_server.rs` does what the HTTP/3 end-to-end
//! tests will rely on, checked with a quinn + h3 client before volley speaks HTTP/3: it answers
//! and counts exactly, sends GOAWAY after N requests of a connection, sends large response
//! headers, and holds a client to its stream limit.

use crate::support;

use std::time::Duration;

use support::H3Client;
use support::h3_server::{H3Options, H3TestServer};

#[test]
fn the_h3_test_server_answers_and_counts_every_request() {
    let server = H3TestServer::start(H3Options::default());
    assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());
    let mut client = H3Client::connect(server.addr(), Some(&server.cert().ca_pem)).expect("an HTTP/3 connection");
    for reply in client.get_concurrently("/", 30) {
        let reply = reply.expect("a response");
        assert_eq!((reply.status, reply.body.as_slice()), (200, b"hello, world!\n".as_slice()));
    }
    assert_eq!(server.requests(), 30);
    assert_eq!(server.connections(), 1);
}

#[test]
fn the_h3_test_server_sends_goaway_after_n_requests_of_a_connection() {
    let server = H3TestServer::start(H3Options { goaway_after: Some(3), ..H3Options::default() });
    let mut client = H3Client::connect(server.addr(), Some(&server.cert().ca_pem)).expect("an HTTP/3 connection");
    for _ in 0..3 {
        assert_eq!(client.get("/").expect("answered before the GOAWAY").status, 200);
    }
    let refused = client.get("/").expect_err("no request after the GOAWAY");
    assert_eq!(server.requests(), 3, "refused: {refused}");
    // A new connection gets its own three.
    let mut again = H3Client::connect(server.addr(), Some(&server.cert().ca_pem)).expect("a second connection");
    assert_eq!(again.get("/").expect("a response on the new connection").status, 200);
    assert_eq!(server.requests(), 4);
    assert_eq!(server.connections(), 2);
}

#[test]
fn the_h3_test_server_sends_large_response_headers() {
    let server = H3TestServer::start(H3Options { big_header_bytes: 20_000, ..H3Options::default() });
    let mut client = H3Client::connect(server.addr(), Some(&server.cert().ca_pem)).expect("an HTTP/3 connection");
    let reply = client.get("/").expect("a response");
    assert_eq!(reply.status, 200);
    let big: usize =
        reply.headers.iter().filter(|(name, _)| name.as_str().starts_with("x-big-")).map(|(_, v)| v.len()).sum();
    assert_eq!(big, 20_000);
    assert_eq!(server.requests(), 1);
}

#[test]
fn the_h3_test_server_holds_a_client_to_its_stream_limit() {
    let options = H3Options { max_streams: Some(2), delay: Duration::from_millis(50), ..H3Options::default() };
    let server = H3TestServer::start(options);
    let mut client = H3Client::connect(server.addr(), Some(&server.cert().ca_pem)).expect("an HTTP/3 connection");
    let replies = client.get_concurrently("/", 8);
    assert!(replies.iter().all(|r| matches!(r, Ok(reply) if reply.status == 200)), "{replies:?}");
    assert_eq!(server.requests(), 8);
    assert_eq!(server.peak_in_flight(), 2, "8 requests at once, 2 streams allowed");
}
