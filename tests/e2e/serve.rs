//! End-to-end tests of the built-in target server (`volley_serve`) and of the test support code
//! in `tests/support` (TestServer, nginx, the timeout runner), with small hand-written clients
//! over real loopback sockets, and quinn + h3 for HTTP/3. The `volley` CLI itself is tested elsewhere.

use crate::support;

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use support::{
    Behavior, H3Client, Nginx, NginxOptions, RawMode, TestCert, TestServer, body_bytes, http_get, read_response,
    run_with_timeout, send_request,
};
use volley_serve::{DEFAULT_BODY, ServeConfig, ServeError, Server};

fn serve_on_port_0() -> ServeConfig {
    ServeConfig { addr: "127.0.0.1:0".parse().unwrap(), ..ServeConfig::default() }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

// ---------------------------------------------------------------------------------------------
// A minimal HTTP/2 client: one GET on stream 1, enough to see that a server speaks h2.
// ---------------------------------------------------------------------------------------------

struct H2Response {
    /// First byte of the response header block: 0x88 is HPACK's indexed `:status: 200`.
    first_header_byte: u8,
    body: Vec<u8>,
}

fn h2_get(stream: &mut (impl Read + Write), https: bool, authority: &str) -> H2Response {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&frame_header(0, 0x4, 0, 0)); // SETTINGS, empty
    // :method GET, :scheme, :path /, then :authority as a literal without indexing.
    let mut block = vec![0x82, if https { 0x87 } else { 0x86 }, 0x84, 0x01, authority.len() as u8];
    block.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(&frame_header(block.len(), 0x1, 0x4 | 0x1, 1)); // HEADERS, END_HEADERS|END_STREAM
    out.extend_from_slice(&block);
    stream.write_all(&out).unwrap();
    stream.flush().unwrap();

    let mut first_header_byte = None;
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 9];
        stream.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream_id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).unwrap();
        match kind {
            0x4 if flags & 0x1 == 0 => {
                stream.write_all(&frame_header(0, 0x4, 0x1, 0)).unwrap(); // SETTINGS ACK
                stream.flush().unwrap();
            }
            0x1 if stream_id == 1 => first_header_byte = payload.first().copied(),
            0x0 if stream_id == 1 => body.extend_from_slice(&payload),
            0x7 => panic!("server sent GOAWAY: {payload:?}"),
            0x3 if stream_id == 1 => panic!("server reset the stream: {payload:?}"),
            _ => {}
        }
        if stream_id == 1 && flags & 0x1 != 0 && (kind == 0x0 || kind == 0x1) {
            break;
        }
    }
    H2Response { first_header_byte: first_header_byte.expect("no HEADERS on stream 1"), body }
}

fn frame_header(len: usize, kind: u8, flags: u8, stream_id: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream_id.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

// ---------------------------------------------------------------------------------------------
// volley_serve
// ---------------------------------------------------------------------------------------------

#[test]
fn serve_answers_every_request_on_a_kept_alive_connection() {
    let server = Server::start(serve_on_port_0()).unwrap();
    assert_ne!(server.local_addr().port(), 0);
    let stream = connect(server.local_addr());
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);

    send_request(&mut writer, "GET", "/", &[], b"").unwrap();
    let response = read_response(&mut reader, false).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, DEFAULT_BODY);
    assert_eq!(response.header("content-type"), Some("text/plain"));
    assert_eq!(response.header("content-length"), Some("14"));

    // Any method and path; a request body is read and ignored.
    send_request(&mut writer, "POST", "/some/where?x=1", &[("X-Any", "1")], &vec![b'z'; 100_000]).unwrap();
    let response = read_response(&mut reader, false).unwrap();
    assert_eq!((response.status, response.body.as_slice()), (200, DEFAULT_BODY));

    send_request(&mut writer, "HEAD", "/", &[], b"").unwrap();
    let response = read_response(&mut reader, true).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-length"), Some("14"));

    assert_eq!(server.requests(), 3);
    assert_eq!(server.connections(), 1);
    server.shutdown();
}

#[test]
fn serve_answers_pipelined_requests_in_order_with_a_custom_body() {
    let config = ServeConfig { body: "custom body".into(), ..serve_on_port_0() };
    let server = Server::start(config).unwrap();
    let mut stream = connect(server.local_addr());
    let pipelined = "GET /1 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(20);
    stream.write_all(pipelined.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    for _ in 0..20 {
        let response = read_response(&mut reader, false).unwrap();
        assert_eq!((response.status, response.body.as_slice()), (200, b"custom body".as_slice()));
    }
    assert_eq!(server.requests(), 20);
}

#[test]
fn serve_speaks_h2c_with_prior_knowledge_on_the_same_port() {
    let server = Server::start(serve_on_port_0()).unwrap();
    let mut stream = connect(server.local_addr());
    let response = h2_get(&mut stream, false, "localhost");
    assert_eq!(response.first_header_byte, 0x88, ":status 200");
    assert_eq!(response.body, DEFAULT_BODY);
    assert_eq!(server.requests(), 1);
    // And HTTP/1.1 still works next to it.
    assert_eq!(http_get(server.local_addr(), "/").unwrap().status, 200);
    assert_eq!(server.requests(), 2);
    assert_eq!(server.connections(), 2);
}

#[test]
fn serve_over_tls_negotiates_h2_and_http1_by_alpn() {
    let cert = TestCert::generate();
    let config = ServeConfig { tls: Some(cert.serve_tls()), ..serve_on_port_0() };
    let server = Server::start(config).unwrap();
    assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());

    let mut tls = cert.connect(server.local_addr(), "localhost", &[b"http/1.1"]);
    assert_eq!(tls.conn.alpn_protocol(), Some(b"http/1.1".as_slice()));
    send_request(&mut tls, "GET", "/", &[], b"").unwrap();
    let response = read_response(&mut BufReader::new(&mut tls), false).unwrap();
    assert_eq!((response.status, response.body.as_slice()), (200, DEFAULT_BODY));

    // Verified by IP address too, with h2 chosen over http/1.1.
    let mut tls = cert.connect(server.local_addr(), "127.0.0.1", &[b"h2", b"http/1.1"]);
    assert_eq!(tls.conn.alpn_protocol(), Some(b"h2".as_slice()));
    let response = h2_get(&mut tls, true, "localhost");
    assert_eq!((response.first_header_byte, response.body.as_slice()), (0x88, DEFAULT_BODY));

    assert_eq!(server.requests(), 2);
}

#[test]
fn serve_reports_a_busy_port_and_a_bad_certificate() {
    let first = Server::start(serve_on_port_0()).unwrap();
    let busy = ServeConfig { addr: first.local_addr(), ..ServeConfig::default() };
    match Server::start(busy) {
        Err(ServeError::Bind { addr, .. }) => assert_eq!(addr, first.local_addr()),
        Err(e) => panic!("expected a bind error, got {e}"),
        Ok(_) => panic!("two servers listen on {}", first.local_addr()),
    }

    let bad = volley_serve::TlsPem { cert_chain_pem: b"not a pem".to_vec(), key_pem: b"nor this".to_vec() };
    let err = Server::start(ServeConfig { tls: Some(bad), ..serve_on_port_0() }).err().expect("bad PEM accepted");
    assert!(matches!(err, ServeError::Tls(_)), "{err}");
}

#[test]
fn serve_stops_listening_on_shutdown_and_on_drop() {
    let server = Server::start(serve_on_port_0()).unwrap();
    let addr = server.local_addr();
    let open = connect(addr);
    server.shutdown();
    assert_eq!(TcpStream::connect(addr).unwrap_err().kind(), ErrorKind::ConnectionRefused);
    // The open connection was closed too.
    let mut buf = [0u8; 1];
    assert!(matches!((&open).read(&mut buf), Ok(0) | Err(_)));

    // Started and dropped inside another runtime: the server's runtime must not be dropped there.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let addr = runtime.block_on(async {
        let server = Server::start(serve_on_port_0()).unwrap();
        server.local_addr()
    });
    assert_eq!(TcpStream::connect(addr).unwrap_err().kind(), ErrorKind::ConnectionRefused);
}

// ---------------------------------------------------------------------------------------------
// TestServer
// ---------------------------------------------------------------------------------------------

#[test]
fn test_server_sends_content_length_and_chunked_bodies() {
    let server = TestServer::start(Behavior::ok(1000).header("X-Extra", "yes"));
    let response = http_get(server.addr(), "/").unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-length"), Some("1000"));
    assert_eq!(response.header("x-extra"), Some("yes"));
    assert_eq!(response.body, body_bytes(1000));

    let chunked = TestServer::start(Behavior::ok(1000).chunked(64).status(201));
    let response = http_get(chunked.addr(), "/").unwrap();
    assert_eq!(response.status, 201);
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    assert_eq!(response.body, body_bytes(1000));

    let empty = TestServer::start(Behavior::ok(0));
    assert_eq!(http_get(empty.addr(), "/").unwrap().body, b"");

    // HEAD: the length is announced, no body follows, and the answer counts.
    let stream = connect(server.addr());
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    send_request(&mut writer, "HEAD", "/", &[], b"").unwrap();
    assert_eq!(read_response(&mut reader, true).unwrap().header("content-length"), Some("1000"));
    send_request(&mut writer, "GET", "/", &[], b"").unwrap();
    assert_eq!(read_response(&mut reader, false).unwrap().body, body_bytes(1000));
    assert_eq!((server.requests(), server.responses(), server.connections()), (3, 3, 2));

    for s in [&chunked, &empty] {
        assert_eq!((s.requests(), s.responses(), s.connections()), (1, 1, 1));
    }
}

#[test]
fn test_server_delays_and_closes_every_kth_response() {
    let server = TestServer::start(Behavior::ok(10).delay(Duration::from_millis(200)).close_every(2));
    let stream = connect(server.addr());
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);

    let started = Instant::now();
    send_request(&mut writer, "GET", "/", &[], b"").unwrap();
    let first = read_response(&mut reader, false).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200), "answered after {:?}", started.elapsed());
    assert_eq!(first.header("connection"), None);

    send_request(&mut writer, "GET", "/", &[], b"").unwrap();
    let second = read_response(&mut reader, false).unwrap();
    assert_eq!(second.header("connection"), Some("close"));
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "the server closed after the 2nd response");

    assert_eq!((server.requests(), server.responses(), server.connections()), (2, 2, 1));
}

#[test]
fn test_server_records_what_it_was_sent() {
    let server = TestServer::start(Behavior::default());
    let mut stream = connect(server.addr());
    send_request(&mut stream, "PUT", "/submit?x=1", &[("X-Test", "a b c")], b"payload").unwrap();
    assert_eq!(read_response(&mut BufReader::new(stream), false).unwrap().status, 200);

    let seen = server.last_request().expect("a request was recorded");
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.path, "/submit?x=1");
    assert_eq!(seen.version, "HTTP/1.1");
    assert_eq!(seen.header("x-test"), Some("a b c"));
    assert_eq!(seen.header("Host"), Some("test"));
    assert_eq!(seen.body, b"payload");
    assert_eq!(server.request_body_bytes(), 7);
    assert_eq!(server.methods().get("PUT"), Some(&1));

    // h2c on the same port.
    let mut stream = connect(server.addr());
    assert_eq!(h2_get(&mut stream, false, "localhost").body, body_bytes(14));
    assert_eq!(server.last_request().unwrap().version, "HTTP/2.0");
}

#[test]
fn test_server_over_tls_trusts_only_its_ca() {
    let server = TestServer::start_tls(Behavior::ok(5));
    assert!(server.url().starts_with("https://"));
    let cert = server.cert().expect("a TLS server has a certificate");

    let dir = tempfile::tempdir().unwrap();
    let ca = cert.write_ca(dir.path());
    assert!(std::fs::read_to_string(ca).unwrap().starts_with("-----BEGIN CERTIFICATE-----"));

    let mut tls = cert.connect(server.addr(), "localhost", &[b"h2", b"http/1.1"]);
    assert_eq!(tls.conn.alpn_protocol(), Some(b"h2".as_slice()));
    assert_eq!(h2_get(&mut tls, true, "localhost").body, body_bytes(5));

    let mut tls = cert.connect(server.addr(), "127.0.0.1", &[b"http/1.1"]);
    send_request(&mut tls, "GET", "/", &[], b"").unwrap();
    assert_eq!(read_response(&mut BufReader::new(&mut tls), false).unwrap().body, body_bytes(5));

    // A different CA must not verify this server.
    let other = TestCert::generate();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(other.client_config(&[]), name).unwrap();
    let mut stream = rustls::StreamOwned::new(conn, connect(server.addr()));
    let err = stream.write_all(b"GET / HTTP/1.1\r\n\r\n").and_then(|_| stream.flush()).unwrap_err();
    assert!(err.to_string().contains("invalid peer certificate"), "{err}");

    assert_eq!(server.responses(), 2);
}

#[test]
fn raw_truncated_response_ends_mid_body() {
    let server = TestServer::start_raw(RawMode::Truncated { content_length: 100, sent: 10 });
    let err = http_get(server.addr(), "/").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
    assert_eq!((server.requests(), server.responses()), (1, 0));
}

#[test]
fn raw_garbage_is_not_http() {
    let server = TestServer::start_raw(RawMode::Garbage);
    let err = http_get(server.addr(), "/").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData, "{err}");
    assert_eq!((server.requests(), server.responses()), (1, 0));
}

#[test]
fn raw_huge_headers_are_sent_whole() {
    let server = TestServer::start_raw(RawMode::HugeHeaders { size: 200_000 });
    let response = http_get(server.addr(), "/").unwrap();
    let header_bytes: usize = response.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    assert!(header_bytes >= 190_000, "{header_bytes}");
    assert_eq!((response.status, response.body.as_slice()), (200, b"ok".as_slice()));
    assert_eq!(server.responses(), 1);
}

#[test]
fn raw_silent_server_never_answers() {
    let server = TestServer::start_raw(RawMode::Silent);
    let mut stream = connect(server.addr());
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    send_request(&mut stream, "GET", "/", &[], b"").unwrap();
    let err = stream.read(&mut [0u8; 16]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{err}");
    assert_eq!((server.requests(), server.responses()), (1, 0));
}

#[test]
fn raw_early_hints_come_before_the_final_response() {
    let server = TestServer::start_raw(RawMode::EarlyHints { body_len: 30 });
    let stream = connect(server.addr());
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    for _ in 0..2 {
        send_request(&mut writer, "GET", "/", &[], b"").unwrap();
        let response = read_response(&mut reader, false).unwrap();
        assert_eq!(response.interim, vec![103]);
        assert_eq!((response.status, response.body), (200, body_bytes(30)));
    }
    assert_eq!((server.requests(), server.responses(), server.connections()), (2, 2, 1));
}

#[test]
fn raw_verbatim_response_and_chunked_request_body() {
    let response = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nread until close".to_vec();
    let server = TestServer::start_raw(RawMode::Verbatim { response, close: true });
    let mut stream = connect(server.addr());
    stream
        .write_all(
            b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        )
        .unwrap();
    let response = read_response(&mut BufReader::new(stream), false).unwrap();
    assert_eq!(response.body, b"read until close");
    let seen = server.last_request().unwrap();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str(), seen.body.as_slice()),
        ("POST", "/c", b"hello world".as_slice())
    );
    assert_eq!(server.responses(), 1);
}

// ---------------------------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------------------------

#[test]
fn nginx_answers_and_counts_in_its_access_log() {
    let Some(nginx) = Nginx::start() else { return };
    let stream = connect(nginx.addr());
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    for _ in 0..3 {
        send_request(&mut writer, "GET", "/", &[], b"").unwrap();
        let response = read_response(&mut reader, false).unwrap();
        assert_eq!((response.status, response.body.as_slice()), (200, support::NGINX_BODY.as_bytes()));
        assert_eq!(response.header("content-type"), Some("text/plain"));
    }
    assert_eq!(nginx.settled_requests(), 3, "error log:\n{}", nginx.error_log());
    assert!(nginx.log_lines()[0].starts_with("GET 200 HTTP/1.1 "), "{:?}", nginx.log_lines());
}

#[test]
fn nginx_serves_https_and_h2c() {
    let Some(nginx) = Nginx::start_with(NginxOptions { tls: true, h2c: true }) else { return };
    let cert = nginx.cert().unwrap();
    assert!(nginx.https_url().starts_with("https://127.0.0.1:"));

    let mut tls = cert.connect(nginx.tls_addr().unwrap(), "localhost", &[b"h2", b"http/1.1"]);
    assert_eq!(tls.conn.alpn_protocol(), Some(b"h2".as_slice()));
    let response = h2_get(&mut tls, true, "localhost");
    assert_eq!((response.first_header_byte, response.body.as_slice()), (0x88, support::NGINX_BODY.as_bytes()));

    let mut tls = cert.connect(nginx.tls_addr().unwrap(), "127.0.0.1", &[b"http/1.1"]);
    send_request(&mut tls, "GET", "/", &[], b"").unwrap();
    assert_eq!(read_response(&mut BufReader::new(&mut tls), false).unwrap().status, 200);

    let mut stream = connect(nginx.h2c_addr().unwrap());
    assert_eq!(h2_get(&mut stream, false, "localhost").body, support::NGINX_BODY.as_bytes());

    assert_eq!(nginx.settled_requests(), 3, "error log:\n{}", nginx.error_log());
    let lines = nginx.log_lines();
    assert_eq!(lines.iter().filter(|l| l.starts_with("GET 200 HTTP/2.0 ")).count(), 2, "{lines:?}");
}

// ---------------------------------------------------------------------------------------------
// run_with_timeout
// ---------------------------------------------------------------------------------------------

#[test]
fn run_with_timeout_returns_output_and_kills_hangs() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
    let output = run_with_timeout(cmd, Duration::from_secs(30)).expect("finished in time");
    assert_eq!(output.status.code(), Some(3));
    assert_eq!((output.stdout.as_slice(), output.stderr.as_slice()), (b"out\n".as_slice(), b"err\n".as_slice()));

    // The sleep is a grandchild holding the pipes: the whole process group must die.
    let started = Instant::now();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo started; sleep 30; echo never"]);
    let output = run_with_timeout(cmd, Duration::from_millis(300)).expect_err("should time out");
    assert_eq!(output.stdout, b"started\n");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------------------------
// HTTP/3: quinn + h3 on UDP at the TLS listener's port
// ---------------------------------------------------------------------------------------------

#[test]
fn serve_answers_http3_on_the_tls_port_and_counts_it_with_the_others() {
    let cert = TestCert::generate();
    let config = ServeConfig { tls: Some(cert.serve_tls()), http3: true, ..serve_on_port_0() };
    let server = Server::start(config).unwrap();
    let mut client = H3Client::connect(server.local_addr(), Some(&cert.ca_pem)).expect("an HTTP/3 connection");
    for _ in 0..5 {
        let reply = client.get("/any/path?x=1").expect("an HTTP/3 response");
        assert_eq!((reply.status, reply.body.as_slice()), (200, DEFAULT_BODY));
        assert_eq!(reply.headers.get("content-type").map(|v| v.as_bytes()), Some(b"text/plain".as_slice()));
    }
    let replies = client.get_concurrently("/", 40);
    assert!(replies.iter().all(|r| matches!(r, Ok(reply) if reply.status == 200 && reply.body == DEFAULT_BODY)));
    assert_eq!(server.requests(), 45);
    assert_eq!(server.connections(), 1);
    // HTTP/1.1 over TLS on the same port number still answers, and counts with the rest.
    let mut tls = cert.connect(server.local_addr(), "localhost", &[b"http/1.1"]);
    send_request(&mut tls, "GET", "/", &[], b"").unwrap();
    assert_eq!(read_response(&mut BufReader::new(&mut tls), false).unwrap().status, 200);
    assert_eq!(server.requests(), 46);
}

#[test]
fn serve_refuses_http3_without_tls() {
    let err =
        Server::start(ServeConfig { http3: true, ..serve_on_port_0() }).err().expect("HTTP/3 without TLS started");
    assert!(matches!(err, ServeError::Http3WithoutTls), "{err}");
}

#[test]
fn volley_serve_http3_answers_with_a_self_signed_certificate() {
    // A free port for both TCP and UDP, probed then released.
    let port = loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            break port;
        }
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut cmd = Command::new(support::volley_bin());
    cmd.args(["serve", "--http3", "--listen", &addr.to_string()]);
    let mut serve = support::BackgroundProcess::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut client = loop {
        match H3Client::connect(addr, None) {
            Ok(client) => break client,
            Err(e) if Instant::now() > deadline => panic!("no HTTP/3 on {addr}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let reply = client.get("/").expect("an HTTP/3 response");
    assert_eq!((reply.status, reply.body.as_slice()), (200, DEFAULT_BODY));
    drop(client);
    serve.signal(libc::SIGINT);
    let output = serve.wait(Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("listening on https://{addr}/ (HTTP/1.1 and HTTP/2 on TCP, HTTP/3 on UDP)")),
        "{stderr}"
    );
}
