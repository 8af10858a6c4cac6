//! A client `Transport` against a quinn-proto server endpoint in memory, with simulated time:
//! datagrams pass through Vecs (no sockets), and the clock moves only when a test moves it.
//! The server is somebody else's QUIC (quinn-proto's server side with its own rustls), so the
//! handshake, loss recovery and stream limits are checked against a real peer.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, ServerConfig, StreamEvent, TransportConfig, VarInt,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{ALPN_H3, Config, Congestion, Datagrams, Event, ReadEnd, StreamError, StreamId, Transport};
use crate::plan::{Plan, RequestSpec, Stop, TlsOptions};
use crate::stats::ErrorKind;
use crate::target::Target;
use crate::test_rng::Rng;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub(crate) const SERVER_NAME: &str = "localhost";

fn client_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    "127.0.0.1:4433".parse().unwrap()
}

/// A self-signed certificate as `openssl req -x509` makes them (CA:TRUE), and its key.
pub(crate) struct Cert {
    pub(crate) der: CertificateDer<'static>,
    pub(crate) pem: String,
    pub(crate) key: KeyPair,
}

pub(crate) fn self_signed() -> Cert {
    let mut params = CertificateParams::new(vec![SERVER_NAME.to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, SERVER_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Cert { der: cert.der().clone(), pem: cert.pem(), key }
}

fn client_config(tls: &TlsOptions, congestion: Congestion) -> Config {
    Config::new(tls, congestion, CONNECT_TIMEOUT).unwrap()
}

/// quinn-proto's own server endpoint in memory, with `cert`, ALPN h3 and at most
/// `max_streams` bidirectional streams per connection.
pub(crate) fn server_endpoint(cert: &Cert, max_streams: u32) -> Endpoint {
    server_endpoint_with(cert, max_streams, EndpointConfig::default())
}

fn server_endpoint_with(cert: &Cert, max_streams: u32, endpoint: EndpointConfig) -> Endpoint {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.serialize_der()));
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der.clone()], key)
        .unwrap();
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(tls).unwrap();
    let mut config = ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = TransportConfig::default();
    transport.max_concurrent_bidi_streams(VarInt::from_u32(max_streams));
    config.transport_config(Arc::new(transport));
    Endpoint::new(Arc::new(endpoint), Some(Arc::new(config)), false, None)
}

/// A stateless-reset key that every endpoint made with it shares, so that a server restarted
/// (a fresh endpoint, without the connection) gives the tokens its predecessor announced.
struct FixedResetKey;

impl quinn_proto::crypto::HmacKey for FixedResetKey {
    fn sign(&self, data: &[u8], out: &mut [u8]) {
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hasher::write(&mut h, data);
        let mac = std::hash::Hasher::finish(&h).to_be_bytes();
        for (i, b) in out.iter_mut().enumerate() {
            *b = mac[i % mac.len()] ^ i as u8;
        }
    }

    fn signature_len(&self) -> usize {
        32
    }

    fn verify(&self, data: &[u8], signature: &[u8]) -> Result<(), quinn_proto::crypto::CryptoError> {
        let mut mine = [0u8; 32];
        self.sign(data, &mut mine);
        if mine[..] == *signature { Ok(()) } else { Err(quinn_proto::crypto::CryptoError) }
    }
}

pub(crate) fn trusting(cert: &Cert) -> TlsOptions {
    TlsOptions { insecure: false, extra_ca_pem: cert.pem.as_bytes().to_vec() }
}

/// How the server behaves.
#[derive(Clone, Copy)]
struct ServerOptions {
    /// Requests it lets the client have open at once.
    max_streams: u32,
    /// Answers nothing at all (a UDP port where nothing speaks QUIC).
    silent: bool,
    /// Bytes of each response.
    response_len: usize,
    /// Closes the connection (HTTP/3's H3_NO_ERROR) once it answered this many requests.
    close_after: Option<u64>,
    /// Answers a new connection's first Initial with a Retry (address validation).
    retry: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions { max_streams: 100, silent: false, response_len: 20, close_after: None, retry: false }
    }
}

/// quinn-proto's server side: accepts connections, opens a uni stream (as HTTP/3's control
/// stream) once connected, and answers every request stream, once finished, with
/// `response_len` bytes after the request's own.
struct Server {
    endpoint: Endpoint,
    conns: HashMap<ConnectionHandle, quinn_proto::Connection>,
    options: ServerOptions,
    tally: Tally,
    buf: Vec<u8>,
}

/// What the server saw of requests.
#[derive(Default)]
struct Tally {
    /// Requests answered.
    requests: u64,
    /// Request streams the client reset.
    resets: u64,
    /// Request bytes read so far, per stream.
    reading: HashMap<quinn_proto::StreamId, Vec<u8>>,
}

impl Server {
    fn new(cert: &Cert, options: ServerOptions) -> Self {
        Server {
            endpoint: server_endpoint(cert, options.max_streams),
            conns: HashMap::new(),
            options,
            tally: Tally::default(),
            buf: Vec::new(),
        }
    }

    fn receive(&mut self, now: Instant, datagram: &[u8], out: &mut Vec<(Vec<u8>, usize)>) {
        if self.options.silent {
            return;
        }
        self.buf.clear();
        match self.endpoint.handle(now, client_addr(), None, None, BytesMut::from(datagram), &mut self.buf) {
            Some(DatagramEvent::NewConnection(incoming))
                if self.options.retry && !incoming.remote_address_validated() =>
            {
                let mut buf = Vec::new();
                if let Ok(t) = self.endpoint.retry(incoming, &mut buf) {
                    out.push((buf[..t.size].to_vec(), t.size));
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                let mut buf = Vec::new();
                let (handle, conn) = self.endpoint.accept(incoming, now, &mut buf, None).unwrap();
                self.conns.insert(handle, conn);
            }
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.conns.get_mut(&handle) {
                    conn.handle_event(event);
                }
            }
            Some(DatagramEvent::Response(t)) => {
                out.push((self.buf[..t.size].to_vec(), t.segment_size.unwrap_or(t.size)))
            }
            None => {}
        }
    }

    /// Handles what its connections received and queues what they send, as GSO batches.
    fn work(&mut self, now: Instant, out: &mut Vec<(Vec<u8>, usize)>) {
        for (&handle, conn) in self.conns.iter_mut() {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
            while let Some(event) = conn.poll() {
                match event {
                    quinn_proto::Event::Connected => {
                        let control = conn.streams().open(Dir::Uni).unwrap();
                        conn.send_stream(control).write(b"control").unwrap();
                    }
                    // A new stream is read at once: quinn-proto announces data only on
                    // streams a read already found empty.
                    quinn_proto::Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                        while let Some(id) = conn.streams().accept(Dir::Bi) {
                            self.tally.reading.insert(id, Vec::new());
                            self.tally.read_request(conn, id, now, self.options);
                        }
                    }
                    quinn_proto::Event::Stream(StreamEvent::Readable { id }) => {
                        self.tally.read_request(conn, id, now, self.options);
                    }
                    _ => {}
                }
            }
            while let Some(event) = conn.poll_endpoint_events() {
                if let Some(event) = self.endpoint.handle_event(handle, event) {
                    conn.handle_event(event);
                }
            }
            let mut buf = Vec::new();
            while let Some(t) = conn.poll_transmit(now, 10, &mut buf) {
                out.push((std::mem::take(&mut buf), t.segment_size.unwrap_or(t.size)));
            }
        }
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        self.conns.values_mut().filter_map(|c| c.poll_timeout()).min()
    }
}

impl Tally {
    /// Reads what arrived of request `id`; once it is whole, answers it.
    fn read_request(
        &mut self,
        conn: &mut quinn_proto::Connection,
        id: quinn_proto::StreamId,
        now: Instant,
        options: ServerOptions,
    ) {
        let Some(got) = self.reading.get_mut(&id) else { return };
        let mut recv = conn.recv_stream(id);
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
                    self.resets += 1;
                    self.reading.remove(&id);
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        if finished {
            let mut response = self.reading.remove(&id).unwrap_or_default();
            self.requests += 1;
            response.resize(response.len() + options.response_len, b'r');
            let mut send = conn.send_stream(id);
            assert_eq!(send.write(&response).unwrap(), response.len());
            send.finish().unwrap();
            if options.close_after == Some(self.requests) {
                conn.close(now, VarInt::from_u32(0x100), bytes::Bytes::from_static(b"done"));
            }
        }
    }
}

/// The client, the server, and what is on the wire between them.
struct Net {
    now: Instant,
    started: Instant,
    client: Transport,
    server: Server,
    events: Vec<Event>,
    /// Client datagrams still to be dropped on the way (the next n).
    drop_to_server: usize,
    dropped: usize,
    /// Client batches seen, as `poll_transmit` gave them.
    batches: Vec<Datagrams>,
    buf: Vec<u8>,
}

impl Net {
    fn new(server: Server, config: &Config) -> Self {
        let now = Instant::now();
        Net {
            now,
            started: now,
            client: Transport::connect(config, server_addr(), SERVER_NAME, now).unwrap(),
            server,
            events: Vec::new(),
            drop_to_server: 0,
            dropped: 0,
            batches: Vec::new(),
            buf: Vec::new(),
        }
    }

    fn pair(cert: &Cert, options: ServerOptions) -> Self {
        Net::new(Server::new(cert, options), &client_config(&trusting(cert), Congestion::Loopback))
    }

    /// One exchange at the current instant: everything the client has to send reaches the
    /// server (datagram by datagram, as the kernel cuts a GSO send), and everything the server
    /// answers reaches the client as whole batches (as UDP GRO hands them over). Returns
    /// whether anything moved.
    fn exchange(&mut self) -> bool {
        let mut moved = false;
        let mut to_client = Vec::new();
        while let Some(batch) = self.client.poll_transmit(self.now, &mut self.buf) {
            assert_eq!(batch.len, self.buf.len());
            self.batches.push(batch);
            for datagram in self.buf.chunks(batch.segment_size) {
                moved = true;
                if self.drop_to_server > 0 {
                    self.drop_to_server -= 1;
                    self.dropped += 1;
                    continue;
                }
                self.server.receive(self.now, datagram, &mut to_client);
            }
        }
        self.server.work(self.now, &mut to_client);
        for (bytes, segment_size) in to_client {
            moved = true;
            self.client.receive(self.now, &bytes, Some(segment_size));
        }
        while let Some(event) = self.client.poll_event() {
            self.events.push(event);
        }
        moved
    }

    /// Exchanges until nothing moves, then moves the clock to the next timer of either side
    /// and fires it; repeats until `done` or `limit` of simulated time has passed.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) -> bool {
        let end = self.now + limit;
        for _ in 0..10_000 {
            while self.exchange() {
                if done(self) {
                    return true;
                }
            }
            if done(self) {
                return true;
            }
            let next = [self.client.poll_timeout(), self.server.next_timeout()].into_iter().flatten().min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                    while let Some(event) = self.client.poll_event() {
                        self.events.push(event);
                    }
                }
                _ => return done(self),
            }
        }
        panic!("the exchange did not settle");
    }

    /// Takes the client's first Initial off the wire and returns it, so that a test can answer
    /// it before the server does (it reaches the server with `deliver_to_server`).
    fn first_initial(&mut self) -> Vec<u8> {
        let batch = self.client.poll_transmit(self.now, &mut self.buf).expect("the client's Initial");
        self.buf[..batch.segment_size].to_vec()
    }

    /// Hands `datagram` from the client to the server (its answer leaves with the next exchange).
    fn deliver_to_server(&mut self, datagram: &[u8]) {
        let mut stateless = Vec::new();
        self.server.receive(self.now, datagram, &mut stateless);
        assert!(stateless.is_empty());
    }

    fn connected(&mut self) {
        assert!(self.run_until(Duration::from_secs(1), |n| n.client.is_connected()), "no handshake: {:?}", self.events);
    }

    fn lost(&self) -> Option<&super::Lost> {
        self.events.iter().find_map(|e| match e {
            Event::Lost(lost) => Some(lost),
            _ => None,
        })
    }

    /// Sends `request` on a new stream and finishes it.
    fn request(&mut self, request: &[u8]) -> StreamId {
        let stream = self.client.open_bi().expect("a stream within the server's limit");
        assert_eq!(self.client.write(stream, Bytes::copy_from_slice(request)).unwrap(), request.len());
        self.client.finish(stream).unwrap();
        stream
    }

    /// Reads `stream` to its end, waiting for it as needed.
    fn response(&mut self, stream: StreamId) -> Vec<u8> {
        let mut got = Vec::new();
        let mut end = ReadEnd::Blocked;
        self.run_until(Duration::from_secs(1), |n| {
            if n.events.contains(&Event::Readable(stream)) {
                n.events.retain(|e| *e != Event::Readable(stream));
                end = n.client.read(stream, |bytes| got.extend_from_slice(bytes)).unwrap();
            }
            end != ReadEnd::Blocked
        });
        assert_eq!(end, ReadEnd::Finished);
        got
    }
}

#[test]
fn a_handshake_completes_with_h3_chosen_by_alpn() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    assert_eq!(net.events.first(), Some(&Event::Connected { alpn: Some(b"h3".to_vec()) }));
    assert!(net.lost().is_none());
    // Loopback-class: the handshake took no timer at all, only round trips.
    assert_eq!(net.now, net.started);
}

#[test]
fn a_request_on_a_bidi_stream_gets_its_response_and_its_end() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    let stream = net.request(b"GET /");
    // The client's first bidirectional stream is stream 0 (RFC 9000 §2.1).
    assert_eq!(stream.number(), 0);
    assert_eq!(
        net.client.write(stream, Bytes::from_static(b"more")),
        Err(StreamError::Closed),
        "written after its end"
    );
    let response = net.response(stream);
    assert_eq!(response, b"GET /rrrrrrrrrrrrrrrrrrrr");
    assert_eq!(net.server.tally.requests, 1);
    // Read to its end, the stream is gone.
    assert!(net.client.read(stream, |_| {}).is_err());
}

#[test]
fn the_servers_uni_stream_is_announced_accepted_and_read() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    assert!(net.run_until(Duration::from_secs(1), |n| n.events.contains(&Event::UniOpened)));
    let control = net.client.accept_uni().expect("the server's control stream");
    assert_eq!(net.client.accept_uni(), None);
    let mut got = Vec::new();
    assert_eq!(net.client.read(control, |b| got.extend_from_slice(b)).unwrap(), ReadEnd::Blocked);
    assert_eq!(got, b"control");
    // Our own uni stream opens too (HTTP/3's control stream).
    assert!(net.client.open_uni().is_some());
}

#[test]
fn the_servers_stream_limit_refuses_new_streams_until_it_allows_more() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions { max_streams: 2, ..ServerOptions::default() });
    net.connected();
    let a = net.request(b"a");
    let b = net.request(b"b");
    assert_eq!(net.client.open_bi(), None, "a third stream beyond the server's limit of 2");
    assert_eq!(net.response(a), b"arrrrrrrrrrrrrrrrrrrr");
    assert_eq!(net.response(b), b"brrrrrrrrrrrrrrrrrrrr");
    assert!(
        net.run_until(Duration::from_secs(1), |n| n.events.contains(&Event::BiAvailable)),
        "MAX_STREAMS from the server is announced: {:?}",
        net.events
    );
    let c = net.request(b"c");
    assert_eq!(net.response(c), b"crrrrrrrrrrrrrrrrrrrr");
    assert_eq!(net.server.tally.requests, 3);
}

#[test]
fn a_dropped_request_datagram_is_sent_again_once_loss_detection_fires() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    // Let the handshake's last packets settle first, so the next datagram is the request's.
    net.run_until(Duration::ZERO, |_| false);
    net.drop_to_server = 1;
    let before = net.now;
    let stream = net.request(b"GET /lost");
    net.exchange();
    assert_eq!(net.dropped, 1);
    assert_eq!(net.server.tally.requests, 0, "the request was dropped on the way");
    let response = net.response(stream);
    assert_eq!(response, b"GET /lostrrrrrrrrrrrrrrrrrrrr");
    assert_eq!(net.server.tally.requests, 1);
    // Recovered by a timer (a probe timeout), so the clock had to move, but by milliseconds
    // on a loopback-class path, not RFC 9002's second.
    let waited = net.now - before;
    assert!(waited > Duration::ZERO && waited < Duration::from_millis(200), "recovered after {waited:?}");
}

#[test]
fn a_server_that_never_answers_fails_the_connect_at_the_connect_timeout() {
    let cert = self_signed();
    let server = Server::new(&cert, ServerOptions { silent: true, ..ServerOptions::default() });
    let mut net = Net::new(server, &client_config(&trusting(&cert), Congestion::Loopback));
    net.run_until(Duration::from_secs(60), |n| n.lost().is_some());
    let lost = net.lost().expect("the connect fails").clone();
    assert_eq!(lost.kind, ErrorKind::Connect, "{lost:?}");
    assert!(lost.why.contains("connect timeout"), "{}", lost.why);
    assert_eq!(net.now - net.started, CONNECT_TIMEOUT);
    // The Initial was sent again while waiting.
    let (_, sent) = net.client.lost_and_sent_packets();
    assert!(sent > 1, "{sent} datagrams sent");
    assert_eq!(net.client.poll_event(), None, "nothing after the loss");
}

#[test]
fn a_certificate_from_an_unknown_ca_is_a_tls_error_that_names_the_fix() {
    let cert = self_signed();
    let other = self_signed();
    let server = Server::new(&cert, ServerOptions::default());
    let mut net = Net::new(server, &client_config(&trusting(&other), Congestion::Loopback));
    net.run_until(Duration::from_secs(10), |n| n.lost().is_some());
    let lost = net.lost().expect("the handshake fails").clone();
    assert_eq!(lost.kind, ErrorKind::Tls, "{lost:?}");
    assert!(lost.why.contains("--cacert") && lost.why.contains("-k"), "{}", lost.why);
    assert!(!net.client.is_connected());
}

#[test]
fn insecure_accepts_a_certificate_nobody_trusts() {
    let cert = self_signed();
    let server = Server::new(&cert, ServerOptions::default());
    let insecure = TlsOptions { insecure: true, extra_ca_pem: Vec::new() };
    let mut net = Net::new(server, &client_config(&insecure, Congestion::Loopback));
    net.connected();
}

#[test]
fn many_requests_leave_as_one_gso_batch_of_full_datagrams() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    net.run_until(Duration::ZERO, |_| false);
    net.batches.clear();
    let streams: Vec<StreamId> = (0..20).map(|_| net.request(&[b'q'; 600])).collect();
    net.exchange();
    let first = net.batches[0];
    assert!(first.count() > 1, "{first:?}");
    assert_eq!(first.segment_size, usize::from(super::config::LOOPBACK_MTU), "{first:?}");
    for stream in streams {
        assert_eq!(net.response(stream).len(), 620);
    }
}

#[test]
fn a_response_of_many_datagrams_arriving_as_one_gro_buffer_is_read_whole() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions { response_len: 100_000, ..ServerOptions::default() });
    net.connected();
    let stream = net.request(b"big");
    let response = net.response(stream);
    assert_eq!(response.len(), 100_003);
    assert!(response[3..].iter().all(|&b| b == b'r'));
}

/// Bytes the client sends at one instant for a 1 MiB stream, before any acknowledgement.
fn burst(congestion: Congestion) -> usize {
    let cert = self_signed();
    burst_with(&cert, &client_config(&trusting(&cert), congestion))
}

fn burst_with(cert: &Cert, config: &Config) -> usize {
    let server = Server::new(cert, ServerOptions::default());
    let mut net = Net::new(server, config);
    net.connected();
    net.run_until(Duration::ZERO, |_| false);
    let stream = net.client.open_bi().unwrap();
    let body = Bytes::from(vec![b'b'; 1 << 20]);
    let written = net.client.write(stream, body.clone()).unwrap();
    let mut sent = 0;
    while let Some(batch) = net.client.poll_transmit(net.now, &mut net.buf) {
        sent += batch.len;
    }
    assert!(written >= sent.min(body.len()) / 2);
    sent
}

#[test]
fn the_loopback_setting_sends_a_large_burst_at_once_where_the_standard_one_holds_back() {
    // The standard controller starts at about ten datagrams and paces; the loopback one (our
    // own QUIC) sends its whole fixed window of 128 full datagrams at once, without slow start.
    let loopback = burst(Congestion::Loopback);
    let standard = burst(Congestion::Standard);
    assert!(loopback > 128 * 1400, "loopback sent {loopback}");
    assert!(standard < 100_000, "standard sent {standard}");
}

#[test]
fn the_plans_quic_congestion_choice_is_the_one_its_connections_use() {
    let cert = self_signed();
    let mut plan = Plan::new(
        Target::parse("https://localhost:4433/").unwrap(),
        RequestSpec::new("GET", vec![], vec![]),
        1,
        Stop::Requests(1),
    );
    plan.tls = trusting(&cert);
    assert_eq!(plan.quic_congestion, Congestion::Loopback, "the default");
    let loopback = burst_with(&cert, &Config::for_plan(&plan).unwrap());
    plan.quic_congestion = Congestion::Standard;
    let standard = burst_with(&cert, &Config::for_plan(&plan).unwrap());
    assert!(loopback > 128 * 1400, "loopback sent {loopback}");
    assert!(standard < 100_000, "standard sent {standard}");
}

#[test]
fn a_cancelled_request_is_reset_at_the_server_and_never_answered() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    let stream = net.client.open_bi().unwrap();
    net.client.write(stream, Bytes::from_static(b"GET /slow")).unwrap();
    net.exchange();
    net.client.cancel(stream, 0x10c);
    net.run_until(Duration::from_secs(1), |n| n.server.tally.resets > 0);
    assert_eq!(net.server.tally.resets, 1);
    assert_eq!(net.server.tally.requests, 0);
    let next = net.request(b"next");
    assert_eq!(net.response(next), b"nextrrrrrrrrrrrrrrrrrrrr");
}

#[test]
fn a_server_asking_for_a_retry_is_a_connect_error_that_names_the_standard_setting() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions { retry: true, ..ServerOptions::default() });
    net.run_until(Duration::from_secs(1), |n| n.lost().is_some());
    let lost = net.lost().expect("the Retry ends the connection").clone();
    assert_eq!(lost.kind, ErrorKind::Connect);
    assert!(lost.why.contains("Retry") && lost.why.contains("--quic-congestion standard"), "{}", lost.why);
    assert!(net.now - net.started < Duration::from_millis(100), "at once, not at the connect timeout");
}

/// A Version Negotiation answering `initial` as RFC 9000 §17.2.1 has it: version 0, the
/// Initial's connection IDs swapped, and `versions`.
fn version_negotiation(initial: &[u8], versions: &[u32]) -> Vec<u8> {
    let dcid_len = usize::from(initial[5]);
    let dcid = &initial[6..6 + dcid_len];
    let scid_len = usize::from(initial[6 + dcid_len]);
    let scid = &initial[7 + dcid_len..7 + dcid_len + scid_len];
    let mut vn = vec![0xc0, 0, 0, 0, 0, scid_len as u8];
    vn.extend_from_slice(scid);
    vn.push(dcid_len as u8);
    vn.extend_from_slice(dcid);
    for version in versions {
        vn.extend_from_slice(&version.to_be_bytes());
    }
    vn
}

/// `n` datagrams of `len` random bytes, every other one with the long-header bit set (so a
/// long header of some random version other than 1): what noise or a stray sender brings.
fn random_datagrams(seed: u64, len: usize, n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|i| {
            let mut datagram: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if i % 2 == 0 {
                datagram[0] |= 0x80;
            }
            datagram
        })
        .collect()
}

#[test]
fn a_version_negotiation_is_a_connect_error_that_names_version_1() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions { silent: true, ..ServerOptions::default() });
    let initial = net.first_initial();
    // The server's answer: the one version it speaks, not ours.
    net.client.receive(net.now, &version_negotiation(&initial, &[0x6b33_43cf]), None);
    let lost = std::iter::from_fn(|| net.client.poll_event()).find_map(|e| match e {
        Event::Lost(lost) => Some(lost),
        _ => None,
    });
    let lost = lost.expect("the version negotiation ends the connection");
    assert_eq!(lost.kind, ErrorKind::Connect);
    assert!(lost.why.contains("version 1"), "{}", lost.why);
    assert_eq!(net.client.dropped_packets(), 0);
}

#[test]
fn a_version_negotiation_that_lists_version_1_is_ignored_and_the_handshake_completes() {
    let cert = self_signed();
    for congestion in [Congestion::Loopback, Congestion::Standard] {
        let server = Server::new(&cert, ServerOptions::default());
        let mut net = Net::new(server, &client_config(&trusting(&cert), congestion));
        let initial = net.first_initial();
        // RFC 9000 §6.2: a client discards a Version Negotiation that lists its own version.
        net.client.receive(net.now, &version_negotiation(&initial, &[0x6b33_43cf, 1]), None);
        assert_eq!(net.client.poll_event(), None, "{congestion:?}");
        if congestion == Congestion::Loopback {
            assert_eq!(net.client.dropped_packets(), 1);
        }
        net.deliver_to_server(&initial);
        net.connected();
        assert!(net.lost().is_none(), "{congestion:?}: {:?}", net.lost());
    }
}

#[test]
fn a_version_negotiation_that_does_not_echo_our_connection_ids_is_ignored() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    let initial = net.first_initial();
    let answer = version_negotiation(&initial, &[0x6b33_43cf]);
    // One byte off in its Destination Connection ID (our Source's), then in its Source
    // Connection ID (our first Destination's): not an answer to our Initial (RFC 9000 §17.2.1).
    let scid_at = 6 + usize::from(answer[5]) + 1;
    for at in [6, scid_at] {
        let mut forged = answer.clone();
        forged[at] ^= 0xff;
        net.client.receive(net.now, &forged, None);
    }
    assert_eq!(net.client.poll_event(), None);
    assert_eq!(net.client.dropped_packets(), 2);
    net.deliver_to_server(&initial);
    net.connected();
    assert!(net.lost().is_none(), "{:?}", net.lost());
}

#[test]
fn random_datagrams_of_1200_and_65000_bytes_are_dropped_and_counted_and_the_connection_goes_on() {
    let cert = self_signed();
    for congestion in [Congestion::Loopback, Congestion::Standard] {
        for len in [1200, 65_000] {
            let shape = format!("{congestion:?}, {len} bytes");
            let server = Server::new(&cert, ServerOptions::default());
            let mut net = Net::new(server, &client_config(&trusting(&cert), congestion));
            let initial = net.first_initial();
            // Before the server's first packet, while a Version Negotiation would still count.
            for datagram in random_datagrams(len as u64, len, 8) {
                net.client.receive(net.now, &datagram, None);
            }
            assert_eq!(net.client.poll_event(), None, "{shape}");
            assert_eq!(net.client.dropped_packets(), 8, "{shape}");
            net.deliver_to_server(&initial);
            net.connected();
            // Once connected, the 1-RTT keys open none of them either.
            for datagram in random_datagrams(len as u64 + 1, len, 8) {
                net.client.receive(net.now, &datagram, None);
            }
            let stream = net.request(b"GET /");
            assert_eq!(net.response(stream), b"GET /rrrrrrrrrrrrrrrrrrrr", "{shape}");
            assert!(net.lost().is_none(), "{shape}: {:?}", net.lost());
            assert!(net.client.dropped_packets() >= 16, "{shape}");
        }
    }
}

#[test]
fn a_key_update_by_the_server_is_followed_and_requests_go_on_under_the_new_keys() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    for round in 0..3 {
        let before = net.request(b"before");
        assert_eq!(net.response(before).len(), 26, "round {round}");
        for conn in net.server.conns.values_mut() {
            conn.force_key_update();
        }
        // The next requests ride on the server's new keys, then ours: both sides must follow.
        let streams: Vec<StreamId> = (0..4).map(|_| net.request(b"after")).collect();
        for stream in streams {
            assert_eq!(net.response(stream).len(), 25, "round {round}");
        }
    }
    assert!(net.lost().is_none(), "{:?}", net.lost());
}

#[test]
fn a_server_that_forgot_the_connection_is_found_out_by_its_stateless_reset() {
    let cert = self_signed();
    let keyed = |cert: &Cert| {
        let mut server = Server::new(cert, ServerOptions::default());
        let mut endpoint = EndpointConfig::new(Arc::new(FixedResetKey));
        // Its connection IDs must pass the new endpoint's check too, or it drops the packet.
        endpoint.cid_generator(|| Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(7)));
        server.endpoint = server_endpoint_with(cert, 100, endpoint);
        server
    };
    let mut net = Net::new(keyed(&cert), &client_config(&trusting(&cert), Congestion::Loopback));
    net.connected();
    let first = net.request(b"before");
    assert_eq!(net.response(first).len(), 26);
    // The server restarts: its new endpoint answers the next request with a stateless reset.
    net.server = keyed(&cert);
    net.request(&[b'q'; 200]);
    net.run_until(Duration::from_secs(1), |n| n.lost().is_some());
    let lost = net.lost().expect("the reset ends the connection").clone();
    assert_eq!(lost.kind, ErrorKind::Reset);
    assert!(lost.why.contains("stateless reset"), "{}", lost.why);
    assert!(net.now - net.started < Duration::from_secs(1), "found out at once, not at the idle timeout");
}

#[test]
fn a_server_closing_the_connection_is_lost_with_its_application_code() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions { close_after: Some(1), ..ServerOptions::default() });
    net.connected();
    net.request(b"one");
    net.run_until(Duration::from_secs(1), |n| n.lost().is_some());
    let lost = net.lost().expect("the close arrives").clone();
    assert_eq!(lost.kind, ErrorKind::Reset);
    assert_eq!(lost.application_code, Some(0x100));
    assert!(lost.why.contains("done"), "{}", lost.why);
    assert_eq!(net.client.poll_event(), None, "nothing after the loss");
}

#[test]
fn closing_ourselves_sends_the_close_and_drains_the_connection() {
    let cert = self_signed();
    let mut net = Net::pair(&cert, ServerOptions::default());
    net.connected();
    net.client.close(net.now, 0x100, b"");
    let mut buf = Vec::new();
    assert!(net.client.poll_transmit(net.now, &mut buf).is_some(), "CONNECTION_CLOSE goes out");
    assert!(!net.client.is_drained(), "drained only after the closing period");
    net.run_until(Duration::from_secs(5), |n| n.client.is_drained());
    assert!(net.client.is_drained());
}
