//! An in-test HTTP/3 server: quinn + h3 (somebody else's QUIC, HTTP/3 and QPACK) on 127.0.0.1,
//! on a tokio runtime of its own, with a fresh test CA ([`TestCert`]) and the knobs the HTTP/3
//! end-to-end tests need ([`H3Options`]): GOAWAY after N requests, large response headers, a
//! low stream limit, a delay per response. It counts the requests it answered and the most it
//! had in flight at once. Every request gets `200`, `content-type: text/plain` and the body.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::{Buf, Bytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::oneshot;

use super::TestCert;

/// What the server does beyond answering.
#[derive(Clone, Debug)]
pub struct H3Options {
    /// Body of every response. Default: `hello, world!\n`.
    pub body: Vec<u8>,
    /// On a connection's Nth request, send GOAWAY naming the stream after it: that request is
    /// still answered, later ones are refused (H3_REQUEST_REJECTED) and the connection then
    /// closes.
    pub goaway_after: Option<u64>,
    /// Add about this many bytes of extra response header fields (`x-big-0`, `x-big-1`, ...,
    /// 1000 bytes of value each at most).
    pub big_header_bytes: usize,
    /// QUIC's max_concurrent_bidi_streams: requests a client may have open at once on one
    /// connection. Default: quinn's 100.
    pub max_streams: Option<u32>,
    /// Hold every response this long before answering.
    pub delay: Duration,
    /// Every Nth request (counted over the server, from 1) gets this status with
    /// `retry-after: VALUE` instead of 200; the first rule that matches wins.
    pub retry_after_every: Vec<(u64, u16, String)>,
    /// Requests to this path (without the query) get this status instead of 200 (unless a
    /// `retry_after_every` rule takes them).
    pub status_for: Vec<(String, u16)>,
    /// Requests to this path (without the query) get this body instead.
    pub body_for: Vec<(String, Vec<u8>)>,
    /// The login service of flow tests answers its routes.
    pub app: Option<std::sync::Arc<super::FlowApp>>,
}

impl Default for H3Options {
    fn default() -> Self {
        H3Options {
            body: b"hello, world!\n".to_vec(),
            goaway_after: None,
            big_header_bytes: 0,
            max_streams: None,
            delay: Duration::ZERO,
            retry_after_every: Vec::new(),
            status_for: Vec::new(),
            body_for: Vec::new(),
            app: None,
        }
    }
}

#[derive(Default)]
struct Counts {
    /// Requests taken in, numbering them for `retry_after_every`.
    taken: AtomicU64,
    /// (status, retry-after value) -> responses sent with it.
    retry_afters: Mutex<BTreeMap<(u16, String), u64>>,
    requests: AtomicU64,
    /// Requests answered, by method and path without the query (`GET /a`).
    routes: Mutex<BTreeMap<String, u64>>,
    /// The first `SEEN_KEPT` requests answered, whole.
    seen: Mutex<Vec<super::SeenRequest>>,
    connections: AtomicU64,
    /// Connections whose handshake completed, by the client's address (its IP).
    peers: Mutex<BTreeMap<std::net::IpAddr, u64>>,
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
}

/// A running server; dropping it stops it.
pub struct H3TestServer {
    addr: SocketAddr,
    cert: TestCert,
    counts: Arc<Counts>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl H3TestServer {
    pub fn start(options: H3Options) -> H3TestServer {
        let cert = TestCert::generate();
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes()).collect::<Result<_, _>>().expect("test cert");
        let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).expect("test key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("test cert and key");
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("a QUIC-capable TLS config");
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        if let Some(n) = options.max_streams {
            let mut transport = quinn::TransportConfig::default();
            transport.max_concurrent_bidi_streams(n.into());
            config.transport_config(Arc::new(transport));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP port on loopback");
        let addr = socket.local_addr().expect("bound address");
        let endpoint = {
            let _guard = runtime.enter();
            quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(config), socket, Arc::new(quinn::TokioRuntime))
                .expect("a quinn endpoint")
        };
        let counts = Arc::new(Counts::default());
        let (stop, stopped) = oneshot::channel();
        let accept = accept_loop(endpoint.clone(), Arc::new(options), counts.clone(), stopped);
        let thread = std::thread::spawn(move || {
            runtime.block_on(accept);
            endpoint.close(0u32.into(), b"test over");
            runtime.shutdown_timeout(Duration::from_millis(100));
        });
        H3TestServer { addr, cert, counts, stop: Some(stop), thread: Some(thread) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("https://{}/", self.addr)
    }

    /// The test CA that signed the server's certificate (for `--cacert`).
    pub fn cert(&self) -> &TestCert {
        &self.cert
    }

    /// Requests answered: counted before each response's stream is finished, so a client that
    /// has read a response finds it counted.
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Requests answered, by method and path without the query (`GET /a`).
    pub fn routes(&self) -> BTreeMap<String, u64> {
        self.counts.routes.lock().unwrap().clone()
    }

    /// The first `SEEN_KEPT` requests answered, in that order: method, path and query,
    /// headers and body as received.
    pub fn seen_requests(&self) -> Vec<super::SeenRequest> {
        self.counts.seen.lock().unwrap().clone()
    }

    /// QUIC connections whose handshake completed.
    pub fn connections(&self) -> u64 {
        self.counts.connections.load(Ordering::SeqCst)
    }

    /// QUIC connections whose handshake completed, by the address they came from.
    pub fn connections_by_peer(&self) -> BTreeMap<std::net::IpAddr, u64> {
        self.counts.peers.lock().unwrap().clone()
    }

    /// The most requests the server had in hand at once (from arrival to answer).
    /// Responses sent with `retry-after`: (status, value) -> how many.
    pub fn retry_afters_sent(&self) -> BTreeMap<(u16, String), u64> {
        self.counts.retry_afters.lock().unwrap().clone()
    }

    pub fn peak_in_flight(&self) -> u64 {
        self.counts.peak_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for H3TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    options: Arc<H3Options>,
    counts: Arc<Counts>,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        let incoming = tokio::select! {
            _ = &mut stopped => return,
            incoming = endpoint.accept() => incoming,
        };
        let Some(incoming) = incoming else { return };
        tokio::spawn(serve_connection(incoming, options.clone(), counts.clone()));
    }
}

async fn serve_connection(incoming: quinn::Incoming, options: Arc<H3Options>, counts: Arc<Counts>) {
    let Ok(connection) = incoming.await else { return };
    counts.connections.fetch_add(1, Ordering::SeqCst);
    *counts.peers.lock().unwrap().entry(connection.remote_address().ip()).or_default() += 1;
    let Ok(mut h3) = h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(connection)).await else {
        return;
    };
    let mut accepted = 0u64;
    while let Ok(Some(resolver)) = h3.accept().await {
        accepted += 1;
        tokio::spawn(respond(resolver, options.clone(), counts.clone()));
        if options.goaway_after == Some(accepted) {
            // GOAWAY naming the stream after this one: this request is answered, later are not.
            if h3.shutdown(1).await.is_err() {
                return;
            }
        }
    }
}

async fn respond(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    options: Arc<H3Options>,
    counts: Arc<Counts>,
) {
    let Ok((request, mut stream)) = resolver.resolve_request().await else { return };
    let route = format!("{} {}", request.method(), request.uri().path());
    let request_path = request.uri().path().to_string();
    let mut seen = super::SeenRequest {
        method: request.method().to_string(),
        path: request.uri().path_and_query().map_or_else(|| "/".to_string(), |p| p.to_string()),
        version: "HTTP/3.0".into(),
        headers: request
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body: Vec::new(),
    };
    let now = counts.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    counts.peak_in_flight.fetch_max(now, Ordering::SeqCst);
    let answered = async {
        while let Some(mut chunk) = stream.recv_data().await.ok()? {
            if seen.body.len() < 1 << 20 {
                seen.body.extend_from_slice(chunk.chunk());
            }
            chunk.advance(chunk.remaining());
        }
        if !options.delay.is_zero() {
            tokio::time::sleep(options.delay).await;
        }
        let nth = counts.taken.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(answer) = options.app.as_ref().and_then(|app| {
            let path = request_path.as_str();
            app.answer(&seen.method, path, &seen.headers, &seen.body)
        }) {
            let mut response = http::Response::builder()
                .status(answer.status)
                .header("content-type", "application/json")
                .header("content-length", answer.body.len());
            for (name, value) in &answer.headers {
                response = response.header(name.as_str(), value.as_str());
            }
            stream.send_response(response.body(()).expect("a valid response head")).await.ok()?;
            if !answer.body.is_empty() {
                stream.send_data(Bytes::from(answer.body)).await.ok()?;
            }
            return Some(());
        }
        let busy = options.retry_after_every.iter().find(|(every, _, _)| nth.is_multiple_of(*every));
        let body = options.body_for.iter().find(|(path, _)| request_path == *path).map_or(&options.body, |(_, b)| b);
        let mut response =
            http::Response::builder().header("content-type", "text/plain").header("content-length", body.len());
        if let Some((_, status, value)) = busy {
            response = response.status(*status).header("retry-after", value.as_str());
        } else if let Some((_, status)) = options.status_for.iter().find(|(path, _)| request_path == *path) {
            response = response.status(*status);
        }
        let mut left = options.big_header_bytes;
        let mut i = 0;
        while left > 0 {
            let n = left.min(1000);
            response = response.header(format!("x-big-{i}"), "h".repeat(n));
            left -= n;
            i += 1;
        }
        stream.send_response(response.body(()).expect("a valid response head")).await.ok()?;
        if let Some((_, status, value)) = busy {
            *counts.retry_afters.lock().unwrap().entry((*status, value.clone())).or_default() += 1;
        }
        if !body.is_empty() {
            stream.send_data(Bytes::from(body.clone())).await.ok()?;
        }
        Some(())
    }
    .await;
    counts.in_flight.fetch_sub(1, Ordering::SeqCst);
    if answered.is_some() {
        counts.requests.fetch_add(1, Ordering::SeqCst);
        *counts.routes.lock().unwrap().entry(route).or_default() += 1;
        {
            let mut kept = counts.seen.lock().unwrap();
            if kept.len() < super::SEEN_KEPT {
                kept.push(seen);
            }
        }
        let _ = stream.finish().await;
    }
}
