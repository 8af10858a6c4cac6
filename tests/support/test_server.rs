//! `TestServer`: an in-test hyper server (HTTP/1.1 and h2c, optionally TLS) with configurable
//! behaviour, and a hand-written raw HTTP/1.1 server for what hyper will not do.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

use super::FlowApp;
use tokio::sync::oneshot;

use super::certs::TestCert;
use super::client::{header_lookup, invalid};

/// What a hyper [`TestServer`] answers to every request.
#[derive(Clone, Debug)]
pub struct Behavior {
    /// Status of every response. Default 200.
    pub status: u16,
    /// Body length; the bytes are [`body_bytes`]`(body_len)`. Default 14.
    pub body_len: usize,
    /// `Some(n)`: send the body with `Transfer-Encoding: chunked` in chunks of `n` bytes (HTTP/1.1)
    /// rather than with `Content-Length`. Default `None`.
    pub chunk_size: Option<usize>,
    /// Wait this long after reading the request before answering. Default zero.
    pub delay: Duration,
    /// `Some(k)`: the k-th, 2k-th, ... response on each connection carries `Connection: close`
    /// and the server then closes that connection (HTTP/1.1 only). Default `None`.
    pub close_every: Option<u64>,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// `Some((k, status))`: the k-th, 2k-th, ... request the server receives (counted over all
    /// connections, in arrival order) is answered with `status`. Default `None`.
    pub status_every: Option<(u64, u16)>,
    /// `(path, status)` rules: a request for exactly this path (without the query) is answered
    /// with `status`. Default none.
    pub status_for: Vec<(String, u16)>,
    /// Requests to this path (without the query) get this body instead.
    pub body_for: Vec<(String, Vec<u8>)>,
    /// `Some((k, delay))`: the k-th, 2k-th, ... request the server receives waits `delay` instead
    /// of [`delay`](Self::delay). Default `None`.
    pub slow_every: Option<(u64, Duration)>,
    /// `(path, delay)` rules: a request for exactly this path (without the query) waits `delay`
    /// instead of [`delay`](Self::delay), so one name of a mix can be made slower than the rest.
    /// Default none.
    pub delay_for: Vec<(String, Duration)>,
    /// `Some((after, status))`: every request arriving `after` or later since the first request
    /// the server received is answered with `status` (a build that breaks mid-run). See
    /// [`TestServer::breach`]. Default `None`.
    pub fail_after: Option<(Duration, u16)>,
    /// `Some((after, length))`: the server stalls once, for `length`, starting `after` its first
    /// request: every request arriving in that window is answered at its end (a GC pause, a
    /// lock held too long). Default `None`.
    pub stall: Option<(Duration, Duration)>,
    /// `(k, status, value)` rules: the k-th, 2k-th, ... request the server receives (counted as
    /// for `status_every`) is answered with `status` and `Retry-After: value`; the first rule
    /// that matches wins, and wins over `status_every`. See [`TestServer::retry_afters_sent`].
    pub retry_after: Vec<(u64, u16, String)>,
    /// `Some(x)`: a capacity of `x` requests a second, kept by a token bucket (refilled at `x`
    /// a second, holding at most 50 ms of them, `x / 20 + 1`, so that requests bunched by a
    /// busy machine are not turned away): a request that finds no token is answered 503. See
    /// [`TestServer::rate_limited`]. Default `None`.
    pub rate_limit: Option<u64>,
    /// `Some((x, slope))`: latency past a knee at `x` requests a second. The server measures
    /// the rate requests arrive at over the last [`KNEE_WINDOW`] and delays each answer by
    /// `slope` for every 100% that rate is above `x` (10% above waits a tenth of `slope`).
    /// Default `None`.
    pub knee: Option<(u64, Duration)>,
    /// `Some(app)`: the login service of flow tests answers its routes (every other rule is
    /// skipped for them); other routes as the rest says. Default `None`.
    pub app: Option<Arc<FlowApp>>,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior::ok(14)
    }
}

impl Behavior {
    /// 200 with a `body_len`-byte body and Content-Length.
    pub fn ok(body_len: usize) -> Behavior {
        Behavior {
            status: 200,
            body_len,
            chunk_size: None,
            delay: Duration::ZERO,
            close_every: None,
            headers: Vec::new(),
            status_every: None,
            status_for: Vec::new(),
            body_for: Vec::new(),
            slow_every: None,
            delay_for: Vec::new(),
            fail_after: None,
            stall: None,
            retry_after: Vec::new(),
            rate_limit: None,
            knee: None,
            app: None,
        }
    }

    /// The login service of flow tests answers its routes.
    pub fn app(mut self, app: Arc<FlowApp>) -> Self {
        self.app = Some(app);
        self
    }
    pub fn rate_limit(mut self, per_second: u64) -> Self {
        self.rate_limit = Some(per_second.max(1));
        self
    }
    pub fn knee(mut self, per_second: u64, slope: Duration) -> Self {
        self.knee = Some((per_second.max(1), slope));
        self
    }
    pub fn stall(mut self, after: Duration, length: Duration) -> Self {
        self.stall = Some((after, length));
        self
    }
    pub fn retry_after_every(mut self, k: u64, status: u16, value: &str) -> Self {
        self.retry_after.push((k.max(1), status, value.to_string()));
        self
    }
    pub fn fail_after(mut self, after: Duration, status: u16) -> Self {
        self.fail_after = Some((after, status));
        self
    }
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
    pub fn chunked(mut self, chunk_size: usize) -> Self {
        self.chunk_size = Some(chunk_size.max(1));
        self
    }
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
    pub fn close_every(mut self, k: u64) -> Self {
        self.close_every = Some(k.max(1));
        self
    }
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    pub fn status_for(mut self, path: &str, status: u16) -> Self {
        self.status_for.push((path.to_string(), status));
        self
    }

    pub fn body_for(mut self, path: &str, body: &[u8]) -> Self {
        self.body_for.push((path.to_string(), body.to_vec()));
        self
    }

    pub fn status_every(mut self, k: u64, status: u16) -> Self {
        self.status_every = Some((k.max(1), status));
        self
    }
    pub fn delay_for(mut self, path: &str, delay: Duration) -> Self {
        self.delay_for.push((path.to_string(), delay));
        self
    }
    pub fn slow_every(mut self, k: u64, delay: Duration) -> Self {
        self.slow_every = Some((k.max(1), delay));
        self
    }
}

/// The body content a [`Behavior`] with `body_len` sends: `abc...z` repeated.
pub fn body_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Misbehaviours that need a hand-written HTTP/1.1 server ([`TestServer::start_raw`]).
///
/// The raw server reads each request head (and a Content-Length or chunked body) itself, so the
/// counters and [`TestServer::last_request`] work as for the hyper server.
#[derive(Clone, Debug)]
pub enum RawMode {
    /// Answers with bytes that are not HTTP, then closes. Not counted as a response.
    Garbage,
    /// Sends a head declaring `Content-Length: content_length`, then only `sent` body bytes, then
    /// closes the connection (FIN). Not counted as a response.
    Truncated { content_length: usize, sent: usize },
    /// A 200 whose header section is at least `size` bytes (many `x-padding-N` headers) and a
    /// 2-byte body `ok`; keeps the connection open. Counted as a response.
    HugeHeaders { size: usize },
    /// Reads requests and never answers; keeps the connection open until the client closes it.
    Silent,
    /// `103 Early Hints` (with a Link header), then a 200 with a `body_len`-byte body
    /// ([`body_bytes`]); keep-alive. Only the 200 is counted.
    EarlyHints { body_len: usize },
    /// Answers every request with these exact bytes; closes after each if `close`. Counted.
    Verbatim { response: Vec<u8>, close: bool },
    /// Answers `200 ok` (keep-alive) as soon as a request head is in, *before* reading its
    /// body, then reads and discards the body. Request lines that do not look like one (bytes
    /// of one request inside another's body) are counted by [`TestServer::bad_heads`].
    AnswerBeforeBody,
}

/// What the server saw of a request. Header names as received (hyper lowercases them).
#[derive(Clone, Debug, Default)]
pub struct SeenRequest {
    pub method: String,
    /// Path and query, e.g. `/a?b=c`.
    pub path: String,
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl SeenRequest {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_lookup(&self.headers, name)
    }
}

/// How many requests a server keeps whole: a test's runs are bounded.
pub const SEEN_KEPT: usize = 10_000;

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    responses: AtomicU64,
    connections: AtomicU64,
    /// TCP connections accepted, by the client's address (its IP).
    peers: Mutex<BTreeMap<std::net::IpAddr, u64>>,
    bad_heads: AtomicU64,
    request_body_bytes: AtomicU64,
    /// Bytes read off the hyper connections' sockets: TLS records and handshakes included.
    wire_bytes_in: AtomicU64,
    methods: Mutex<BTreeMap<String, u64>>,
    /// Requests answered, by method and path (without the query): `GET /a`.
    routes: Mutex<BTreeMap<String, u64>>,
    last: Mutex<Option<SeenRequest>>,
    /// The first [`SEEN_KEPT`] requests whose bodies were read, in the order they completed.
    seen: Mutex<Vec<SeenRequest>>,
    /// When the first and the latest request heads arrived.
    first_at: std::sync::OnceLock<Instant>,
    latest_at: Mutex<Option<Instant>>,
    /// When every request head arrived, in order (a test's runs are bounded: thousands).
    arrived_at: Mutex<Vec<Instant>>,
    /// The delays as they ran, summed: the timer wakes a little after each one is due.
    delayed_nanos: AtomicU64,
    /// Requests that arrived after a `fail_after` breach.
    after_breach: AtomicU64,
    /// Responses sent with Retry-After, by (status, value).
    retry_afters: Mutex<BTreeMap<(u16, String), u64>>,
    /// `rate_limit`: the tokens left and when they were last counted.
    bucket: Mutex<Option<(f64, Instant)>>,
    /// Requests answered 503 for want of a token.
    rate_limited: AtomicU64,
    /// `knee`: when the requests of the last [`KNEE_WINDOW`] arrived.
    arrivals: Mutex<std::collections::VecDeque<Instant>>,
    /// When each connection was accepted (+1) and when its handling ended (-1), in order.
    open_log: Mutex<Vec<(Instant, i64)>>,
}

/// How far back a `knee` server looks to measure the rate requests arrive at. Long, so that a
/// stall of the machine that bunches requests (a backlog handled at once) does not look like a
/// higher rate unless it is longer than this; a capacity search must pause at least this long
/// between steps, so that one step is measured apart from the step before.
pub const KNEE_WINDOW: Duration = Duration::from_secs(1);

impl Stats {
    /// A connection was accepted (`+1`) or its handling ended (`-1`).
    fn open_change(&self, by: i64) {
        self.open_log.lock().unwrap().push((Instant::now(), by));
    }

    /// A request head arrived; its place among all the server received, from 1.
    fn head(&self, method: &str) -> u64 {
        let nth = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let now = Instant::now();
        self.first_at.get_or_init(|| now);
        *self.latest_at.lock().unwrap() = Some(now);
        self.arrived_at.lock().unwrap().push(now);
        *self.methods.lock().unwrap().entry(method.to_string()).or_default() += 1;
        nth
    }

    /// The request body was read too.
    fn complete(&self, seen: SeenRequest) {
        self.request_body_bytes.fetch_add(seen.body.len() as u64, Ordering::SeqCst);
        let mut kept = self.seen.lock().unwrap();
        if kept.len() < SEEN_KEPT {
            kept.push(seen.clone());
        }
        *self.last.lock().unwrap() = Some(seen);
    }

    fn responded(&self) {
        self.responses.fetch_add(1, Ordering::SeqCst);
    }

    /// Takes a token from a bucket refilled at `per_second`; false when there is none.
    fn take_token(&self, per_second: u64) -> bool {
        let most = (per_second / 20 + 1) as f64;
        let now = Instant::now();
        let mut bucket = self.bucket.lock().unwrap();
        let (tokens, then) = bucket.get_or_insert((most, now));
        *tokens = (*tokens + now.duration_since(*then).as_secs_f64() * per_second as f64).min(most);
        *then = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            self.rate_limited.fetch_add(1, Ordering::SeqCst);
            false
        }
    }

    /// The delay past a knee at `per_second`: `slope` for every 100% the rate of the last
    /// [`KNEE_WINDOW`] (this request included) is above it.
    fn knee_delay(&self, per_second: u64, slope: Duration) -> Duration {
        let now = Instant::now();
        let mut arrivals = self.arrivals.lock().unwrap();
        arrivals.push_back(now);
        while arrivals.front().is_some_and(|at| now.duration_since(*at) > KNEE_WINDOW) {
            arrivals.pop_front();
        }
        let rate = arrivals.len() as f64 / KNEE_WINDOW.as_secs_f64();
        slope.mul_f64((rate / per_second as f64 - 1.0).max(0.0))
    }
}

/// A server on 127.0.0.1 (random port) running on its own 2-thread tokio runtime; stopped on
/// drop. Counters:
/// - [`requests`](Self::requests): request heads received;
/// - [`responses`](Self::responses): complete final responses, counted when the last body byte
///   is handed to the connection (so a client that read a response finds it counted);
/// - [`connections`](Self::connections): TCP connections accepted.
pub struct TestServer {
    addr: SocketAddr,
    scheme: &'static str,
    cert: Option<TestCert>,
    stats: Arc<Stats>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Clone)]
enum Kind {
    Hyper { behavior: Arc<Behavior>, body: Bytes, tls: Option<tokio_rustls::TlsAcceptor> },
    Raw(Arc<RawMode>),
}

impl TestServer {
    /// A hyper server (HTTP/1.1 and h2c) answering as `behavior` says.
    pub fn start(behavior: Behavior) -> TestServer {
        let body = Bytes::from(body_bytes(behavior.body_len));
        TestServer::launch(Kind::Hyper { behavior: Arc::new(behavior), body, tls: None }, None)
    }

    /// The same over TLS (ALPN h2, http/1.1) with a fresh [`TestCert`]; see [`TestServer::cert`].
    pub fn start_tls(behavior: Behavior) -> TestServer {
        let cert = TestCert::generate();
        let tls = Some(tokio_rustls::TlsAcceptor::from(cert.server_config()));
        let body = Bytes::from(body_bytes(behavior.body_len));
        TestServer::launch(Kind::Hyper { behavior: Arc::new(behavior), body, tls }, Some(cert))
    }

    /// A hand-written HTTP/1.1 server misbehaving as `mode` says.
    pub fn start_raw(mode: RawMode) -> TestServer {
        TestServer::launch(Kind::Raw(Arc::new(mode)), None)
    }

    fn launch(kind: Kind, cert: Option<TestCert>) -> TestServer {
        let stats = Arc::new(Stats::default());
        let (stop, mut stopped) = oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let thread_stats = stats.clone();
        let thread = std::thread::Builder::new()
            .name("test-server".into())
            .spawn(move || {
                let runtime =
                    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
                runtime.block_on(async move {
                    let socket = TcpSocket::new_v4().unwrap();
                    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
                    // A big backlog: tests open many connections at once.
                    let listener: TcpListener = socket.listen(1024).unwrap();
                    addr_tx.send(listener.local_addr().unwrap()).unwrap();
                    loop {
                        let (stream, peer) = tokio::select! {
                            _ = &mut stopped => break,
                            accepted = listener.accept() => match accepted {
                                Ok(accepted) => accepted,
                                Err(_) => continue,
                            },
                        };
                        thread_stats.connections.fetch_add(1, Ordering::SeqCst);
                        *thread_stats.peers.lock().unwrap().entry(peer.ip()).or_default() += 1;
                        thread_stats.open_change(1);
                        let _ = stream.set_nodelay(true);
                        let stats = thread_stats.clone();
                        let ended = thread_stats.clone();
                        match kind.clone() {
                            Kind::Hyper { behavior, body, tls } => {
                                tokio::spawn(async move {
                                    hyper_connection(stream, tls, behavior, body, stats).await;
                                    ended.open_change(-1);
                                });
                            }
                            Kind::Raw(mode) => {
                                tokio::spawn(async move {
                                    raw_connection(stream, mode, stats).await;
                                    ended.open_change(-1);
                                });
                            }
                        }
                    }
                });
                // Dropping the runtime cancels every connection task and closes their sockets.
                runtime.shutdown_timeout(Duration::from_millis(100));
            })
            .unwrap();
        let addr = addr_rx.recv().expect("test server failed to start");
        let scheme = if cert.is_some() { "https" } else { "http" };
        TestServer { addr, scheme, cert, stats, stop: Some(stop), thread: Some(thread) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/` (`https://` for [`TestServer::start_tls`]).
    pub fn url(&self) -> String {
        format!("{}://{}/", self.scheme, self.addr)
    }

    /// The certificate of a TLS server ([`TestCert::write_ca`] gives the file for `--cacert`).
    pub fn cert(&self) -> Option<&TestCert> {
        self.cert.as_ref()
    }

    /// Request heads received.
    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }

    /// The mean of the delays the server added, as its timer ran them, over the requests
    /// received.
    pub fn mean_delay(&self) -> Duration {
        let requests = self.requests().max(1);
        Duration::from_nanos(self.stats.delayed_nanos.load(Ordering::SeqCst) / requests)
    }

    /// Complete final responses sent.
    pub fn responses(&self) -> u64 {
        self.stats.responses.load(Ordering::SeqCst)
    }

    /// Request lines that were not `METHOD /path HTTP/1.x` (a raw server's count).
    pub fn bad_heads(&self) -> u64 {
        self.stats.bad_heads.load(Ordering::SeqCst)
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> u64 {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// TCP connections accepted, by the address they came from.
    pub fn connections_by_peer(&self) -> BTreeMap<std::net::IpAddr, u64> {
        self.stats.peers.lock().unwrap().clone()
    }

    /// Connections open (accepted and still handled) at `at`, by the server's own log.
    pub fn open_connections_at(&self, at: Instant) -> i64 {
        self.stats.open_log.lock().unwrap().iter().filter(|(when, _)| *when <= at).map(|(_, by)| by).sum()
    }

    /// The most connections open at once, and when the first was accepted (None before any).
    pub fn open_connections_peak(&self) -> (i64, Option<Instant>) {
        let log = self.stats.open_log.lock().unwrap();
        let (mut open, mut peak) = (0, 0);
        for (_, by) in log.iter() {
            open += by;
            peak = peak.max(open);
        }
        (peak, log.first().map(|(at, _)| *at))
    }

    /// Request body bytes received, over all requests.
    pub fn request_body_bytes(&self) -> u64 {
        self.stats.request_body_bytes.load(Ordering::SeqCst)
    }

    /// Bytes read off the sockets of the hyper server (plain or TLS), as they came: for TLS,
    /// the records and handshakes.
    pub fn wire_bytes_received(&self) -> u64 {
        self.stats.wire_bytes_in.load(Ordering::SeqCst)
    }

    /// Requests received per method.
    /// Requests received, by method and path without the query (`GET /a`), counted as their
    /// bodies were read.
    pub fn routes(&self) -> BTreeMap<String, u64> {
        self.stats.routes.lock().unwrap().clone()
    }

    /// Requests per route ("METHOD /path") since `before` (an earlier [`TestServer::routes`]).
    pub fn routes_since(&self, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        let mut routes = self.routes();
        for (route, n) in before {
            *routes.get_mut(route).expect("a route seen before") -= n;
        }
        routes
    }

    pub fn methods(&self) -> BTreeMap<String, u64> {
        self.stats.methods.lock().unwrap().clone()
    }

    /// When the first request head arrived (None before any).
    pub fn first_request_at(&self) -> Option<Instant> {
        self.stats.first_at.get().copied()
    }

    /// When each request head arrived, in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.stats.arrived_at.lock().unwrap().clone()
    }

    /// When the latest request head arrived (None before any).
    pub fn latest_request_at(&self) -> Option<Instant> {
        *self.stats.latest_at.lock().unwrap()
    }

    /// With [`Behavior::fail_after`]: the instant the server began failing every request.
    pub fn breach(&self, after: Duration) -> Option<Instant> {
        self.first_request_at().map(|first| first + after)
    }

    /// With [`Behavior::fail_after`]: requests that arrived after the breach (all answered with
    /// its status).
    pub fn requests_after_breach(&self) -> u64 {
        self.stats.after_breach.load(Ordering::SeqCst)
    }

    /// With [`Behavior::rate_limit`]: requests answered 503 for want of a token.
    pub fn rate_limited(&self) -> u64 {
        self.stats.rate_limited.load(Ordering::SeqCst)
    }

    /// Responses sent with Retry-After, by (status, value), counted when the answer is made.
    pub fn retry_afters_sent(&self) -> BTreeMap<(u16, String), u64> {
        self.stats.retry_afters.lock().unwrap().clone()
    }

    /// The first [`SEEN_KEPT`] requests whose bodies were read completely, in that order.
    pub fn seen_requests(&self) -> Vec<SeenRequest> {
        self.stats.seen.lock().unwrap().clone()
    }

    /// The most recent request whose body was read completely.
    pub fn last_request(&self) -> Option<SeenRequest> {
        self.stats.last.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A socket that counts the bytes read from it into [`Stats::wire_bytes_in`].
struct WireCount {
    inner: tokio::net::TcpStream,
    stats: Arc<Stats>,
}

impl AsyncRead for WireCount {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        self.stats.wire_bytes_in.fetch_add(read as u64, Ordering::SeqCst);
        polled
    }
}

impl tokio::io::AsyncWrite for WireCount {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

async fn hyper_connection(
    stream: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    behavior: Arc<Behavior>,
    body: Bytes,
    stats: Arc<Stats>,
) {
    // Responses on this connection so far, for close_every.
    let served = Arc::new(AtomicU64::new(0));
    let stream = WireCount { inner: stream, stats: stats.clone() };
    let service = service_fn(move |req| handle(req, behavior.clone(), body.clone(), stats.clone(), served.clone()));
    let builder = auto::Builder::new(TokioExecutor::new());
    match tls {
        None => {
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        }
        Some(acceptor) => {
            if let Ok(stream) = acceptor.accept(stream).await {
                let _ = builder.serve_connection(TokioIo::new(stream), service).await;
            }
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    behavior: Arc<Behavior>,
    body: Bytes,
    stats: Arc<Stats>,
    served: Arc<AtomicU64>,
) -> Result<Response<TestBody>, hyper::Error> {
    let arrived = stats.head(req.method().as_str());
    // Judged on arrival, as the breach is: the requests counted after it are those it answers.
    let failing =
        behavior.fail_after.filter(|(after, _)| stats.first_at.get().is_some_and(|first| first.elapsed() >= *after));
    if failing.is_some() {
        stats.after_breach.fetch_add(1, Ordering::SeqCst);
    }
    // hyper never polls the body of an answer to HEAD, so such an answer is counted up front.
    let head = req.method() == hyper::Method::HEAD;
    let (parts, incoming) = req.into_parts();
    let request_body = incoming.collect().await?.to_bytes();
    let route = format!("{} {}", parts.method, parts.uri.path());
    *stats.routes.lock().unwrap().entry(route).or_default() += 1;
    let path_status = behavior.status_for.iter().find(|(path, _)| parts.uri.path() == path).map(|(_, s)| *s);
    let seen = SeenRequest {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map_or("/".to_string(), |p| p.to_string()),
        version: format!("{:?}", parts.version),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body: request_body.to_vec(),
    };
    let app_answer =
        behavior.app.as_ref().and_then(|app| app.answer(&seen.method, parts.uri.path(), &seen.headers, &seen.body));
    stats.complete(seen);
    if let Some(answer) = app_answer {
        let chunks = if answer.body.is_empty() { Vec::new() } else { vec![Bytes::from(answer.body)] };
        let mut response = Response::new(TestBody::new(chunks, true, head, stats.clone()));
        *response.status_mut() = StatusCode::from_u16(answer.status).unwrap();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &answer.headers {
            headers
                .append(HeaderName::try_from(name.as_str()).unwrap(), HeaderValue::try_from(value.as_str()).unwrap());
        }
        return Ok(response);
    }
    let mut delay = match behavior.slow_every {
        Some((k, slow)) if arrived.is_multiple_of(k) => slow,
        _ => behavior.delay_for.iter().find(|(path, _)| parts.uri.path() == path).map_or(behavior.delay, |(_, d)| *d),
    };
    if let Some((per_second, slope)) = behavior.knee {
        delay = delay.max(stats.knee_delay(per_second, slope));
    }
    // Judged on arrival, like a real limiter in front of the handler.
    let limited = behavior.rate_limit.is_some_and(|per_second| !stats.take_token(per_second));
    if let (Some((after, length)), Some(first)) = (behavior.stall, stats.first_at.get()) {
        let (from, until) = (*first + after, *first + after + length);
        let now = Instant::now();
        if (from..until).contains(&now) {
            delay = delay.max(until - now);
        }
    }
    if !delay.is_zero() {
        let start = Instant::now();
        tokio::time::sleep(delay).await;
        stats.delayed_nanos.fetch_add(start.elapsed().as_nanos() as u64, Ordering::SeqCst);
    }
    let nth = served.fetch_add(1, Ordering::SeqCst) + 1;
    let body = match behavior.body_for.iter().find(|(path, _)| parts.uri.path() == path) {
        Some((_, own)) => Bytes::from(own.clone()),
        None => body,
    };
    let chunks = match behavior.chunk_size {
        Some(size) => (0..body.len()).step_by(size).map(|at| body.slice(at..(at + size).min(body.len()))).collect(),
        None if body.is_empty() => Vec::new(),
        None => vec![body],
    };
    let mut response = Response::new(TestBody::new(chunks, behavior.chunk_size.is_none(), head, stats.clone()));
    let retry = behavior.retry_after.iter().find(|(k, ..)| arrived.is_multiple_of(*k));
    let status = match (failing, retry, behavior.status_every) {
        _ if limited => 503,
        (Some((_, status)), ..) => status,
        _ => match path_status {
            Some(status) => status,
            None => match (retry, behavior.status_every) {
                (Some((_, status, _)), _) => *status,
                (None, Some((k, status))) if arrived.is_multiple_of(k) => status,
                _ => behavior.status,
            },
        },
    };
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    for (name, value) in &behavior.headers {
        headers.append(HeaderName::try_from(name.as_str()).unwrap(), HeaderValue::try_from(value.as_str()).unwrap());
    }
    if let (None, Some((_, status, value))) = (failing, retry) {
        headers.insert(hyper::header::RETRY_AFTER, HeaderValue::try_from(value.as_str()).unwrap());
        *stats.retry_afters.lock().unwrap().entry((*status, value.clone())).or_default() += 1;
    }
    if behavior.close_every.is_some_and(|k| nth.is_multiple_of(k)) {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(response)
}

/// A response body of ready chunks that counts the response when its last chunk is handed over.
struct TestBody {
    chunks: std::collections::VecDeque<Bytes>,
    /// Known length (Content-Length) rather than chunked.
    exact: bool,
    /// Already counted (answers to HEAD, empty bodies): hyper may never poll those.
    counted: bool,
    stats: Arc<Stats>,
}

impl TestBody {
    fn new(chunks: Vec<Bytes>, exact: bool, count_now: bool, stats: Arc<Stats>) -> TestBody {
        let counted = count_now || chunks.is_empty();
        if counted {
            stats.responded();
        }
        TestBody { chunks: chunks.into(), exact, counted, stats }
    }
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(chunk) = self.chunks.pop_front() else { return Poll::Ready(None) };
        if self.chunks.is_empty() && !self.counted {
            self.counted = true;
            self.stats.responded();
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        if self.exact {
            SizeHint::with_exact(self.chunks.iter().map(|c| c.len() as u64).sum())
        } else {
            SizeHint::default()
        }
    }
}

/// Largest request head the raw server accepts before giving up on the connection.
const RAW_MAX_HEAD: usize = 1 << 20;

async fn raw_connection(mut stream: tokio::net::TcpStream, mode: Arc<RawMode>, stats: Arc<Stats>) {
    let mut buf = Vec::with_capacity(4096);
    if let RawMode::AnswerBeforeBody = &*mode {
        answer_before_body(&mut stream, &mut buf, &stats).await;
        return;
    }
    loop {
        if read_raw_request(&mut stream, &mut buf, &stats).await.is_err() {
            return;
        }
        match &*mode {
            RawMode::Garbage => {
                let _ = stream.write_all(b"this is not HTTP\r\n\x00\x01\x02\xfe\xff\r\n\r\n").await;
                close_gracefully(stream).await;
                return;
            }
            RawMode::Truncated { content_length, sent } => {
                let mut out =
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {content_length}\r\n\r\n")
                        .into_bytes();
                out.extend_from_slice(&body_bytes(*sent.min(content_length)));
                let _ = stream.write_all(&out).await;
                close_gracefully(stream).await;
                return;
            }
            RawMode::HugeHeaders { size } => {
                let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n".to_vec();
                let padding = "p".repeat(1000);
                let mut n = 0;
                while out.len() < *size {
                    out.extend_from_slice(format!("x-padding-{n}: {padding}\r\n").as_bytes());
                    n += 1;
                }
                out.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
                stats.responded();
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
            RawMode::Silent => {
                // Hold the connection until the client gives up; what it sends is ignored.
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            RawMode::EarlyHints { body_len } => {
                let hints = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n";
                if stream.write_all(hints).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
                let mut out =
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n\r\n")
                        .into_bytes();
                out.extend_from_slice(&body_bytes(*body_len));
                stats.responded();
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
            RawMode::Verbatim { response, close } => {
                stats.responded();
                if stream.write_all(response).await.is_err() {
                    return;
                }
                if *close {
                    close_gracefully(stream).await;
                    return;
                }
            }
            RawMode::AnswerBeforeBody => unreachable!("handled above"),
        }
    }
}

async fn answer_before_body(stream: &mut tokio::net::TcpStream, buf: &mut Vec<u8>, stats: &Stats) {
    loop {
        let Ok(head) = read_raw_head(stream, buf, stats).await else { return };
        stats.responded();
        if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await.is_err() {
            return;
        }
        if read_raw_body(stream, buf, head, stats).await.is_err() {
            return;
        }
    }
}

/// Sends FIN and waits (briefly) for the client to close, so the client sees an orderly close
/// after our last byte rather than a reset caused by unread data.
async fn close_gracefully(mut stream: tokio::net::TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Reads one request (head, then a Content-Length or chunked body) and records it.
async fn read_raw_request<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>, stats: &Stats) -> io::Result<()> {
    let head = read_raw_head(stream, buf, stats).await?;
    read_raw_body(stream, buf, head, stats).await
}

/// Reads and counts one request head.
async fn read_raw_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    stats: &Stats,
) -> io::Result<SeenRequest> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > RAW_MAX_HEAD {
            return Err(invalid("request head too large".into()));
        }
        fill(stream, buf).await?;
    };
    let head: Vec<u8> = buf.drain(..head_end).collect();
    let head = String::from_utf8_lossy(&head[..head.len() - 4]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let version = parts.next().unwrap_or("").to_string();
    stats.head(&method);
    let well_formed = !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && path.starts_with('/')
        && version.starts_with("HTTP/1.")
        && parts.next().is_none();
    if !well_formed {
        stats.bad_heads.fetch_add(1, Ordering::SeqCst);
    }
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(SeenRequest { method, path, version, headers, body: Vec::new() })
}

/// Reads the body `head` announces (Content-Length or chunked) and records the request.
async fn read_raw_body<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    head: SeenRequest,
    stats: &Stats,
) -> io::Result<()> {
    let SeenRequest { method, path, version, headers, .. } = head;
    let mut body = Vec::new();
    if header_lookup(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let line = take_line(stream, buf).await?;
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| invalid("bad chunk size".into()))?;
            if size == 0 {
                while !take_line(stream, buf).await?.is_empty() {}
                break;
            }
            while buf.len() < size + 2 {
                fill(stream, buf).await?;
            }
            body.extend(buf.drain(..size));
            buf.drain(..2);
        }
    } else if let Some(len) = header_lookup(&headers, "content-length") {
        let len: usize = len.parse().map_err(|_| invalid("bad content-length".into()))?;
        while buf.len() < len {
            fill(stream, buf).await?;
        }
        body.extend(buf.drain(..len));
    }
    stats.complete(SeenRequest { method, path, version, headers, body });
    Ok(())
}

async fn take_line<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> io::Result<String> {
    loop {
        if let Some(at) = find(buf, b"\r\n") {
            let line: Vec<u8> = buf.drain(..at + 2).collect();
            return Ok(String::from_utf8_lossy(&line[..at]).into_owned());
        }
        fill(stream, buf).await?;
    }
}

/// Appends what the socket has to `buf`; EOF is an error (the client went away mid-request).
async fn fill<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
