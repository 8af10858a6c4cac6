//! A small HTTP/1.1 responder for scrapes: `GET /metrics` gets the current exposition, anything
//! else a 404 or 405. One response per connection, then it closes (Prometheus opens another).
//!
//! It runs on a thread of its own with a one-thread tokio runtime, so it serves whether or not
//! the process has a runtime (a local run has none), and the engine's threads never wait on it.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};

use super::Shared;
use super::exposition::CONTENT_TYPE;

/// A scraper that has not sent its request head within this long is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Request heads are small; a client sending more is not a scraper.
const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once; more are closed at accept, so a flood cannot take memory.
const MAX_CONNECTIONS: usize = 64;

/// Serves `shared`'s page on `listener` until `stop` fires or is dropped.
pub(super) async fn serve(listener: StdListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let Ok(listener) = TcpListener::from_std(listener) else { return };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors, most likely: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &shared)).await;
                });
            }
        }
    }
}

/// Reads one request head and writes the response.
async fn answer(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
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
