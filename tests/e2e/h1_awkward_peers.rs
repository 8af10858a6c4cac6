//! End to end: servers that answer or close at awkward moments. Each test pins down a bug the
//! engine once had, against a real (hand-written) server on loopback.

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{RawMode, TestCert, TestServer, json_report, number, run_volley, run_volley_timeout};

#[test]
fn a_server_answering_before_the_body_is_read_never_gets_two_requests_interleaved() {
    let server = TestServer::start_raw(RawMode::AnswerBeforeBody);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("big.bin");
    // Large enough that the send is still going when the early answer arrives.
    std::fs::write(&body, vec![b'x'; 8 << 20]).unwrap();
    let out = run_volley(["-n", "5", "-c", "1", "-d", &format!("@{}", body.display()), "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 5, "{r}");
    assert_eq!(server.bad_heads(), 0, "request bytes were interleaved");
    assert_eq!(server.requests(), 5);
}

/// A TLS peer written by hand with rustls, so a test decides exactly which bytes leave in
/// which write: accepts one connection, finishes the handshake and reads one request head.
struct TlsPeer {
    tcp: TcpStream,
    tls: rustls::ServerConnection,
}

impl TlsPeer {
    fn accept(listener: &TcpListener, config: &Arc<rustls::ServerConfig>) -> TlsPeer {
        let (mut tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut tls = rustls::ServerConnection::new(Arc::clone(config)).unwrap();
        let mut request = Vec::new();
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            tls.complete_io(&mut tcp).unwrap();
            let mut chunk = [0u8; 4096];
            match tls.reader().read(&mut chunk) {
                Ok(n) => request.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        TlsPeer { tcp, tls }
    }

    /// Writes `plain`, then close_notify, then `junk`, all in one write to the socket.
    fn answer_and_close(&mut self, plain: &[u8], junk: &[u8]) {
        self.tls.writer().write_all(plain).unwrap();
        self.tls.send_close_notify();
        let mut wire = Vec::new();
        while self.tls.wants_write() {
            self.tls.write_tls(&mut wire).unwrap();
        }
        wire.extend_from_slice(junk);
        self.tcp.write_all(&wire).unwrap();
    }
}

#[test]
fn tls_close_notify_right_after_a_keep_alive_response_is_not_followed_by_another_request() {
    // The response says nothing of closing; the close_notify in the same write does.
    let config = TestCert::generate().server_config();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..4 {
            let mut peer = TlsPeer::accept(&listener, &config);
            peer.answer_and_close(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"");
            // Wait for the client to close before taking the next connection.
            let _ = peer.tcp.read(&mut [0u8; 64]);
        }
    });
    let out = run_volley(["-n", "4", "-c", "1", "-k", "-j", &format!("https://{addr}/")]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 4, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(number(&r, "/connectionsMade"), 4, "{r}");
    server.join().unwrap();
}

#[test]
fn bytes_after_a_tls_close_notify_do_not_hang_the_engine() {
    // One write carries a full 16 KiB record, close_notify and then junk. Received in 4 KiB
    // buffers, the last one holds the record's tail, the alert and junk, more than rustls takes
    // in one read behind a nearly full record; after the alert it takes nothing more, and a loop
    // waiting for it to take the rest would spin forever.
    let config = TestCert::generate().server_config();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut peer = TlsPeer::accept(&listener, &config);
        // Exactly one maximal record of plaintext.
        let head_len = "HTTP/1.1 200 OK\r\nContent-Length: 16346\r\n\r\n".len();
        let body = vec![b'b'; 16_384 - head_len];
        let mut plain = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        plain.extend_from_slice(&body);
        assert_eq!(plain.len(), 16_384);
        peer.answer_and_close(&plain, &[0x17; 4096]);
        // Hold the connection open: the client must finish on what it has.
        std::thread::sleep(Duration::from_secs(3));
    });
    let started = Instant::now();
    let out = run_volley_timeout(
        ["-n", "1", "-c", "1", "-k", "--timeout", "2s", "-j", &format!("https://{addr}/")],
        Duration::from_secs(15),
    );
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 1, "{r}");
    server.join().unwrap();
}
