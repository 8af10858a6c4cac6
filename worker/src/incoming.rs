//! The daemon's listener: connections that are closed when their peer falls silent, and an
//! accept loop that waits when accepting fails instead of trying again at once.
//!
//! tonic's own loop retries a failed accept immediately. Out of file descriptors (EMFILE), the
//! connection waiting to be accepted stays queued and the listener stays readable, so that loop
//! turned at 100% of a core; and nothing ever closed a connection that sent nothing, so a few
//! hundred idle ones, opened before any authentication, held the descriptors for good and
//! locked every controller out.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tonic::transport::server::Connected;
use tracing::{debug, info, warn};

/// How long a peer may send nothing before its connection is closed. A controller is never
/// this quiet: it pings every second and, during a run, sends a heartbeat every 200 ms.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait after an accept failed for want of resources (descriptors, memory).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The accepted connections of `listener`, each with TCP_NODELAY (small messages both ways,
/// heartbeats and intervals, must not wait for Nagle) and closed after `idle` of silence.
pub(crate) struct Incoming {
    listener: TcpListener,
    idle: Duration,
    backoff: Pin<Box<Sleep>>,
    backing_off: bool,
}

impl Incoming {
    pub(crate) fn new(listener: TcpListener, idle: Duration) -> Incoming {
        Incoming { listener, idle, backoff: Box::pin(tokio::time::sleep(Duration::ZERO)), backing_off: false }
    }
}

impl Stream for Incoming {
    type Item = io::Result<IdleTimeout<TcpStream>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.backing_off {
                ready!(this.backoff.as_mut().poll(cx));
            }
            match ready!(this.listener.poll_accept(cx)) {
                Ok((stream, _)) => {
                    if this.backing_off {
                        this.backing_off = false;
                        info!("accepting connections again");
                    }
                    if let Err(e) = stream.set_nodelay(true) {
                        debug!(error = %e, "cannot set TCP_NODELAY");
                    }
                    return Poll::Ready(Some(Ok(IdleTimeout::new(stream, this.idle))));
                }
                // That one connection is gone; the next may be fine.
                Err(e) if is_per_connection(&e) => debug!(error = %e, "accept failed"),
                Err(e) => {
                    if !this.backing_off {
                        warn!(error = %e, "cannot accept connections; trying again every {ACCEPT_BACKOFF:?}");
                    }
                    this.backing_off = true;
                    this.backoff.as_mut().reset(Instant::now() + ACCEPT_BACKOFF);
                }
            }
        }
    }
}

fn is_per_connection(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted)
}

/// A connection whose reads fail with `TimedOut` once the peer has sent nothing for `idle`,
/// which makes the server drop it (before or after a TLS handshake, an HTTP/2 preface, or any
/// authentication alike). Only reads count: a peer that stops talking is gone, whatever we send.
pub(crate) struct IdleTimeout<IO> {
    io: IO,
    idle: Duration,
    last_read: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<IO> IdleTimeout<IO> {
    fn new(io: IO, idle: Duration) -> IdleTimeout<IO> {
        let now = Instant::now();
        IdleTimeout { io, idle, last_read: now, timer: Box::pin(tokio::time::sleep_until(now + idle)) }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for IdleTimeout<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.last_read = Instant::now();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                // The timer moves only when a read came in since it was set: one reset per
                // burst of reads, not one per read.
                let deadline = this.last_read + this.idle;
                if this.timer.deadline() != deadline {
                    this.timer.as_mut().reset(deadline);
                }
                ready!(this.timer.as_mut().poll(cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the peer sent nothing for {:?}", this.idle),
                )))
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The peer's address reaches the service as it would from a bare TcpStream.
impl<IO: Connected> Connected for IdleTimeout<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}
