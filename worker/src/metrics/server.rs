//! A small HTTP/1.1 responder for scrapes: `GET /metrics` gets the current exposition, anything
//! else a 404 or 405. One response per connection, then it closes (Prometheus opens another).
//!
//! It runs on a thread of its own with a one-thread tokio runtime, so it serves whether or not
//! the process has a runtime (a local run has none), and the engine's threads never wait on it.

use std::collections::VecDeque;
use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::Shared;
use super::exposition::CONTENT_TYPE;

/// A scraper sends its request head as soon as it connects: one that has not within this long
/// is dropped, so idle sockets cannot hold the server's slots for long.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(1);
/// The whole exchange, head and response, ends within this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Request heads are small; a client sending more is not a scraper.
const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once: each holds at most a head of `MAX_HEAD` and a socket, so a
/// flood takes at most about 2.3 MB. When all are taken the oldest is closed for the newcomer: a
/// scraper is answered within a millisecond of connecting, so what has been there longest is an
/// idle or slow socket. 64 let 1,000 reconnecting idle sockets cost Prometheus one scrape in
/// fifteen on a busy machine (a burst of accepts pushed a scraper out before it was read).
const MAX_CONNECTIONS: usize = 256;

/// Serves `shared`'s page on `listener` until `stop` fires or is dropped.
pub(super) async fn serve(listener: StdListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let Ok(listener) = TcpListener::from_std(listener) else { return };
    // The connections being served, oldest first.
    let mut serving: VecDeque<JoinHandle<()>> = VecDeque::with_capacity(MAX_CONNECTIONS);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors, most likely: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                serving.retain(|task| !task.is_finished());
                if serving.len() >= MAX_CONNECTIONS
                    && let Some(oldest) = serving.pop_front()
                {
                    // Dropping its future closes its socket.
                    oldest.abort();
                }
                let shared = shared.clone();
                serving.push_back(tokio::spawn(async move {
                    let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &shared)).await;
                }));
                // Let the connection read its head before the next accept: in a burst of
                // accepts, a scraper would otherwise wait behind all of them.
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Reads one request head and writes the response.
async fn answer(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let head_by = tokio::time::Instant::now() + HEAD_TIMEOUT;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let Ok(read) = tokio::time::timeout_at(head_by, stream.read(&mut buf)).await else { return Ok(()) };
        let n = read?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = target.split(|b| *b == b'?').next().unwrap_or_default();
    let response = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => {
            let body = shared.page();
            let mut r = head_of("200 OK", CONTENT_TYPE, body.len());
            if method == b"GET" {
                r.push_str(&body);
            }
            r
        }
        (_, b"/metrics") => head_of("405 Method Not Allowed", "text/plain; charset=utf-8", 0),
        _ => {
            let body = "volley serves its metrics at /metrics\n";
            head_of("404 Not Found", "text/plain; charset=utf-8", body.len()) + body
        }
    };
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

fn head_of(status: &str, content_type: &str, length: usize) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}
