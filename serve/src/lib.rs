//! The built-in target server behind `volley serve` and `volley demo`, also used by the tests.
//!
//! A small, fast HTTP server: every request, whatever its method or path, is answered with
//! `200 OK`, `content-type: text/plain` and the configured body (by default `hello, world!\n`),
//! but `POST /login`, which is answered as a login service would (a JSON token and a session
//! cookie, the same for everyone: [`LOGIN_BODY`], [`LOGIN_COOKIE`]), so that a flow scenario
//! has something to extract and carry on (`examples/scenarios/login.toml`, bench/flow.sh),
//! and `/redirect/PATH`, answered `302 Found` with `location: /PATH` (a redirect to follow).
//! A request body is read to its end before the answer goes out. HTTP/1.1 and HTTP/2 share one
//! port: plain-text connections are told apart by the HTTP/2 prior-knowledge preface (h2c), and
//! with TLS the client picks by ALPN (`h2`, `http/1.1`). With TLS, [`ServeConfig::http3`] also
//! answers HTTP/3 (quinn and h3) on UDP at the same port number, with the same certificate.
//!
//! The server runs on its own multi-threaded tokio runtime, owned by a background thread, so it
//! can be started from synchronous code (the CLI, `#[test]` functions) and from inside another
//! runtime alike:
//!
//! ```no_run
//! let server = volley_serve::Server::start(volley_serve::ServeConfig::default()).unwrap();
//! println!("try http://{}/", server.local_addr());
//! // ... drive load at it ...
//! println!("{} requests answered", server.requests());
//! server.shutdown();
//! ```
//!
//! Nothing is logged per request: the server is meant to be cheap enough that a load generator
//! on the same machine measures itself rather than the target.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HeaderValue, LOCATION, SET_COOKIE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

mod http3;

/// The body served when none is configured.
pub const DEFAULT_BODY: &[u8] = b"hello, world!\n";

/// The body of the answer to `POST /login`: the token a flow extracts.
pub const LOGIN_BODY: &[u8] = br#"{"token":"volley-demo-token","user":"demo"}"#;

/// The `set-cookie` of the answer to `POST /login`: the session a flow carries on.
pub const LOGIN_COOKIE: &str = "sid=volley-demo-session; Path=/; HttpOnly";

/// Whether a request is the login, answered with [`LOGIN_BODY`] and [`LOGIN_COOKIE`].
fn is_login(method: &http::Method, path: &str) -> bool {
    method == http::Method::POST && path == "/login"
}

/// Where `/redirect/PATH` sends its client: `/PATH`; `None` for every other path.
fn redirect_of(path: &str) -> Option<&str> {
    path.strip_prefix("/redirect").filter(|rest| rest.starts_with('/'))
}

/// The port `volley serve` listens on when none is given.
pub const DEFAULT_PORT: u16 = 8080;

/// Listen backlog: a load generator opens many connections at once, and the default of 128
/// would make some of them wait for a SYN retransmit (a one-second stall in the latencies).
const BACKLOG: u32 = 4096;

/// A TLS handshake that has not finished by then is dropped, so idle sockets cannot pile up.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How the server is set up. Build it with [`ServeConfig::default`] and change the fields.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port (read it back with [`Server::local_addr`]).
    /// Default: `127.0.0.1:8080`.
    pub addr: SocketAddr,
    /// Body of every response. Default: [`DEFAULT_BODY`].
    pub body: Bytes,
    /// Serve HTTPS instead of plain HTTP. Default: `None`.
    pub tls: Option<TlsPem>,
    /// Worker threads of the server's runtime. Default: 2, few enough to leave the cores of a
    /// small machine to the load generator; 0 is taken as 1.
    pub workers: usize,
    /// Also answer HTTP/3 on UDP at the TCP listener's port (needs `tls`). Default: `false`.
    pub http3: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_PORT)),
            body: Bytes::from_static(DEFAULT_BODY),
            tls: None,
            workers: 2,
            http3: false,
        }
    }
}

/// A certificate chain and its private key, both PEM-encoded (as read from `.pem` files).
#[derive(Clone)]
pub struct TlsPem {
    /// One or more `CERTIFICATE` blocks, the server's own certificate first.
    pub cert_chain_pem: Vec<u8>,
    /// One private key block (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
}

impl TlsPem {
    /// A fresh self-signed certificate for these names (DNS names or IP addresses), for a
    /// server that has none of its own: clients must skip verification (`-k`) or trust it.
    pub fn self_signed(names: &[String]) -> Result<TlsPem, ServeError> {
        let made = rcgen::generate_simple_self_signed(names.to_vec()).map_err(|e| ServeError::Tls(e.to_string()))?;
        Ok(TlsPem {
            cert_chain_pem: made.cert.pem().into_bytes(),
            key_pem: made.signing_key.serialize_pem().into_bytes(),
        })
    }
}

impl std::fmt::Debug for TlsPem {
    // The key stays out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPem").field("cert_chain_pem", &String::from_utf8_lossy(&self.cert_chain_pem)).finish()
    }
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listening socket could not be made (address in use, no permission, ...).
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    /// The tokio runtime or its thread could not be started.
    #[error("cannot start the server runtime: {0}")]
    Runtime(io::Error),
    /// The certificate or key could not be read or do not fit together.
    #[error("bad TLS certificate or key: {0}")]
    Tls(String),
    /// Waiting for Ctrl-C failed.
    #[error("cannot wait for Ctrl-C: {0}")]
    Signal(io::Error),
    /// HTTP/3 was asked for without TLS: QUIC always encrypts.
    #[error("HTTP/3 needs a TLS certificate")]
    Http3WithoutTls,
}

/// Counters shared by every connection task.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    connections: AtomicU64,
}

/// A running server. Dropping it stops the server, like [`Server::shutdown`].
pub struct Server {
    local_addr: SocketAddr,
    scheme: &'static str,
    counters: Arc<Counters>,
    handle: tokio::runtime::Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds the listening socket and starts serving on a background thread.
    ///
    /// Returns once the socket is listening, so connections made right after succeed.
    pub fn start(config: ServeConfig) -> Result<Server, ServeError> {
        if config.http3 && config.tls.is_none() {
            return Err(ServeError::Http3WithoutTls);
        }
        let tls = config.tls.as_ref().map(tls_acceptor).transpose()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.workers.max(1))
            .thread_name("volley-serve")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let listener = {
            // Registering the socket needs the runtime's reactor, hence the guard.
            let _guard = runtime.enter();
            bind(config.addr).map_err(|source| ServeError::Bind { addr: config.addr, source })?
        };
        let local_addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.addr, source })?;
        let counters = Arc::new(Counters::default());
        let quic = match (&config.tls, config.http3) {
            (Some(pem), true) => {
                let _guard = runtime.enter();
                let endpoint = http3::endpoint(local_addr, pem)?;
                runtime.spawn(http3::accept_loop(endpoint.clone(), config.body.clone(), counters.clone()));
                Some(endpoint)
            }
            _ => None,
        };
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let accept = accept_loop(listener, tls, config.body, counters.clone(), stopped);
        // The thread owns the runtime so that dropping it (which cancels every connection) never
        // happens inside the caller's async context, where tokio would panic.
        let thread = std::thread::Builder::new()
            .name("volley-serve-main".into())
            .spawn(move || {
                runtime.block_on(accept);
                if let Some(endpoint) = quic {
                    // Tells every HTTP/3 client at once, rather than leaving it to its idle timeout.
                    endpoint.close(0u32.into(), b"server shutting down");
                }
                runtime.shutdown_timeout(Duration::from_millis(100));
            })
            .map_err(ServeError::Runtime)?;
        Ok(Server { local_addr, scheme, counters, handle, stop: Some(stop), thread: Some(thread) })
    }

    /// The address the server listens on (with the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://ADDR/` or `https://ADDR/`.
    pub fn url(&self) -> String {
        format!("{}://{}/", self.scheme, self.local_addr)
    }

    /// Requests answered so far, over every protocol: counted when the last byte of a response's
    /// body is handed to the connection (for HTTP/3, before the stream is finished), so a client
    /// that has read a response always finds it counted.
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Connections accepted so far (TCP accepts, whether or not a TLS handshake followed, and
    /// QUIC connections whose handshake completed).
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// Stops accepting, closes every connection and waits for the server's threads to end.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Runs a server until Ctrl-C: what `volley serve` does.
///
/// Prints `volley serve: listening on http://ADDR/` to stderr once the socket is listening.
pub fn serve_forever(config: ServeConfig) -> Result<(), ServeError> {
    let http3 = config.http3;
    let server = Server::start(config)?;
    if http3 {
        eprintln!("volley serve: listening on {} (HTTP/1.1 and HTTP/2 on TCP, HTTP/3 on UDP)", server.url());
    } else {
        eprintln!("volley serve: listening on {}", server.url());
    }
    // The server's own runtime drives the signal listener; this thread only waits.
    let handle = server.handle.clone();
    handle.block_on(tokio::signal::ctrl_c()).map_err(ServeError::Signal)?;
    server.shutdown();
    Ok(())
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // A restarted `volley serve` must not fail on the previous run's TIME_WAIT sockets.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

fn tls_acceptor(pem: &TlsPem) -> Result<TlsAcceptor, ServeError> {
    let mut config = server_config(pem, &[&rustls::version::TLS13, &rustls::version::TLS12])?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A rustls server configuration with this certificate, for these TLS versions.
fn server_config(
    pem: &TlsPem,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ServerConfig, ServeError> {
    let certs = CertificateDer::pem_slice_iter(&pem.cert_chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServeError::Tls(format!("certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(ServeError::Tls("no CERTIFICATE block in the certificate chain".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&pem.key_pem).map_err(|e| ServeError::Tls(format!("private key: {e}")))?;
    // The same provider as the engine's client (ring), so the workspace builds one crypto library.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| ServeError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ServeError::Tls(e.to_string()))
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    body: Bytes,
    counters: Arc<Counters>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Answers to pipelined HTTP/1.1 requests go out in one write instead of one each.
    builder.http1().pipeline_flush(true);
    // Generous, so a client asking for many streams per connection is not held back by us.
    builder.http2().max_concurrent_streams(1024);
    let builder = Arc::new(builder);
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if is_per_connection_error(&e) => continue,
            Err(_) => {
                // Out of file descriptors or similar: wait for connections to close instead of
                // spinning on accept.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        counters.connections.fetch_add(1, Ordering::Relaxed);
        // Responses are small and latency is what gets measured: never wait for Nagle.
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_connection(stream, tls.clone(), builder.clone(), body.clone(), counters.clone()));
    }
}

fn is_per_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    )
}

async fn serve_connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    body: Bytes,
    counters: Arc<Counters>,
) {
    let service = service_fn(move |request| respond(request, body.clone(), counters.clone()));
    // Connection errors (resets, protocol errors, a client that goes away) end only that
    // connection; the peer already knows, and there is nobody else to tell.
    match tls {
        None => {
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        }
        Some(acceptor) => {
            let Ok(Ok(stream)) = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await else {
                return;
            };
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        }
    }
}

async fn respond(
    request: Request<Incoming>,
    body: Bytes,
    counters: Arc<Counters>,
) -> Result<Response<CountedBody>, hyper::Error> {
    // hyper never polls the body of an answer to HEAD, so such an answer is counted up front.
    let head = request.method() == hyper::Method::HEAD;
    let login = is_login(request.method(), request.uri().path());
    // The path came in as a valid URI, so it is a valid header value too; checked all the same.
    let location = redirect_of(request.uri().path()).and_then(|to| HeaderValue::from_str(to).ok());
    let mut incoming = request.into_body();
    // Read (and drop) the whole request body first, so the answer never overtakes it.
    while !incoming.is_end_stream() {
        match incoming.frame().await {
            Some(frame) => {
                frame?;
            }
            None => break,
        }
    }
    if login {
        let mut response = Response::new(CountedBody::new(Bytes::from_static(LOGIN_BODY), head, counters));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(SET_COOKIE, HeaderValue::from_static(LOGIN_COOKIE));
        return Ok(response);
    }
    if let Some(location) = location {
        let mut response = Response::new(CountedBody::new(Bytes::new(), head, counters));
        *response.status_mut() = StatusCode::FOUND;
        response.headers_mut().insert(LOCATION, location);
        return Ok(response);
    }
    let mut response = Response::new(CountedBody::new(body, head, counters));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}

/// A fixed response body that counts the request as answered when its data is handed over.
///
/// Counting here rather than in the handler means a request whose connection died before its
/// answer could be written is not counted.
struct CountedBody {
    data: Option<Bytes>,
    /// Already counted (answers to HEAD, empty bodies): hyper may never poll those.
    counted: bool,
    counters: Arc<Counters>,
}

impl CountedBody {
    fn new(data: Bytes, count_now: bool, counters: Arc<Counters>) -> CountedBody {
        let counted = count_now || data.is_empty();
        if counted {
            counters.requests.fetch_add(1, Ordering::Relaxed);
        }
        let data = if data.is_empty() { None } else { Some(data) };
        CountedBody { data, counted, counters }
    }
}

impl Body for CountedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.data.take() {
            Some(data) => {
                if !self.counted {
                    self.counted = true;
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                }
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // Exact, so hyper sends Content-Length rather than chunked encoding.
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::redirect_of;

    #[test]
    fn redirect_paths_send_the_client_to_the_rest_of_the_path() {
        assert_eq!(redirect_of("/redirect/items"), Some("/items"));
        assert_eq!(redirect_of("/redirect/a/b"), Some("/a/b"));
        assert_eq!(redirect_of("/redirect/"), Some("/"));
        assert_eq!(redirect_of("/redirect"), None);
        assert_eq!(redirect_of("/redirects/items"), None);
        assert_eq!(redirect_of("/items"), None);
    }
}
