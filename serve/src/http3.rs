//! HTTP/3 for the built-in server: a quinn endpoint on UDP at the TCP listener's port, h3 on
//! each connection, the same answer and the same counters as HTTP/1.1 and HTTP/2.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::server::RequestResolver;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};

use crate::{Counters, ServeError, TlsPem, server_config};

/// Streams a client may have open at once on a connection: as generous as the HTTP/2 side's.
const MAX_STREAMS: u32 = 1024;

/// A connection with nothing in flight for this long is closed, as TCP ones are by their peer.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Binds the UDP socket and makes the endpoint; the caller must be inside the server's runtime.
pub(crate) fn endpoint(addr: SocketAddr, pem: &TlsPem) -> Result<quinn::Endpoint, ServeError> {
    let mut tls = server_config(pem, &[&rustls::version::TLS13])?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| ServeError::Tls(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(MAX_STREAMS.into());
    transport.max_idle_timeout(Some(IDLE_TIMEOUT.try_into().expect("30 s is a valid idle timeout")));
    config.transport_config(Arc::new(transport));
    let bind_error = |source| ServeError::Bind { addr, source };
    let socket = UdpSocket::bind(addr).map_err(bind_error)?;
    quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(config), socket, Arc::new(quinn::TokioRuntime))
        .map_err(bind_error)
}

pub(crate) async fn accept_loop(endpoint: quinn::Endpoint, body: Bytes, counters: Arc<Counters>) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(serve_connection(incoming, body.clone(), counters.clone()));
    }
}

async fn serve_connection(incoming: quinn::Incoming, body: Bytes, counters: Arc<Counters>) {
    // A failed handshake or a connection error ends only this connection, as with TCP.
    let Ok(connection) = incoming.await else {
        return;
    };
    counters.connections.fetch_add(1, Ordering::Relaxed);
    let Ok(mut h3) = h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(connection)).await else {
        return;
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        tokio::spawn(respond(resolver, body.clone(), counters.clone()));
    }
}

async fn respond(resolver: RequestResolver<h3_quinn::Connection, Bytes>, mut body: Bytes, counters: Arc<Counters>) {
    let Ok((request, mut stream)) = resolver.resolve_request().await else {
        return;
    };
    // Read (and drop) the whole request body first, so the answer never overtakes it.
    loop {
        match stream.recv_data().await {
            Ok(Some(mut chunk)) => chunk.advance(chunk.remaining()),
            Ok(None) => break,
            Err(_) => return,
        }
    }
    let location = super::redirect_of(request.uri().path()).and_then(|to| http::HeaderValue::from_str(to).ok());
    let response = if super::is_login(request.method(), request.uri().path()) {
        body = Bytes::from_static(super::LOGIN_BODY);
        http::Response::builder()
            .header(CONTENT_TYPE, "application/json")
            .header(http::header::SET_COOKIE, super::LOGIN_COOKIE)
    } else if let Some(location) = location {
        body = Bytes::new();
        http::Response::builder().status(http::StatusCode::FOUND).header(http::header::LOCATION, location)
    } else {
        http::Response::builder().header(CONTENT_TYPE, "text/plain")
    };
    let response = response.header(CONTENT_LENGTH, body.len()).body(()).expect("a fixed, valid response head");
    if stream.send_response(response).await.is_err() {
        return;
    }
    if request.method() != http::Method::HEAD && !body.is_empty() && stream.send_data(body).await.is_err() {
        return;
    }
    // Counted before the stream's end is sent: a client cannot have read the whole response
    // before then, so it always finds it counted.
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let _ = stream.finish().await;
}
