//! The TCP transport in the loop: a connect linked to its timeout, TLS over it for https,
//! one send in flight per connection (a small HTTP/1.1 request as a quiet send), and a
//! multishot receive whose bytes go through TLS, when there is TLS, to the session.

use std::io;
use std::time::Instant;

use io_uring::cqueue;

use super::{Loop, os_error};
use crate::driver::conn::{Phase, Tcp, Transport};
use crate::driver::ops::{Io, SocketKind};
use crate::driver::socket::new_socket;
use crate::driver::source::bind_tcp;
use crate::session::{Negotiated, Session, Transmit, Why};
use crate::stats::ErrorKind;
use crate::tls::{self, TlsSession};

/// Requests up to this size go out as quiet sends: far below the smallest socket send buffer.
const QUIET_SEND_MAX: usize = 4096;

impl<I: Io> Loop<I> {
    /// A TCP connection: a registered socket and its connect, linked to the connect timeout.
    pub(super) fn start_tcp_conn(&mut self, i: usize) -> io::Result<()> {
        let fd = match new_socket(&self.shared.addr, self.stamped()) {
            Ok(fd) => fd,
            Err(e) => {
                self.setup_failed(i, ErrorKind::Connect, format!("socket: {e}").into());
                return Ok(());
            }
        };
        if let Some(source) = self.shared.sources.for_slot(self.lifecycle.thread(), i)
            && let Err(e) = bind_tcp(fd, source)
        {
            let why = format!("bind to {}: {e}", source.ip());
            // SAFETY: fd came from socket() above and is not used again.
            unsafe { libc::close(fd) };
            self.setup_failed(i, ErrorKind::Connect, why.into());
            return Ok(());
        }
        self.io.adopt_socket(i, fd, SocketKind::Stream)?;
        let c = &mut self.conns[i];
        c.pending_ops += 2;
        c.phase = Phase::Connecting;
        let (sockaddr, len) = (&raw const self.shared.sockaddr.0, self.shared.sockaddr.1);
        // SAFETY: the address lives in `shared`, which outlives the ring.
        unsafe { self.io.connect(i, c.generation, sockaddr.cast(), len) }
    }

    /// TCP: the session's output, through TLS when there is TLS, as one send.
    pub(super) fn flush_stream(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Transport::Tcp(tcp) = &mut c.transport else { return Ok(()) };
        if c.sending {
            return Ok(());
        }
        c.send_buf.clear();
        tcp.send_off = 0;
        let mut from_request = None;
        // The output is one HTTP/1.1 request (over TLS: its records, and any the receive
        // queued before them): a candidate for a quiet send.
        let mut one_request = false;
        if let Some(session) = c.session.as_mut().and_then(Session::stream) {
            match tcp.tls.as_mut() {
                Some(tls) => match session.poll_transmit(&mut self.plain_out) {
                    Transmit::Request(r) => {
                        tls.send(&self.shared.requests[r as usize]);
                        one_request = true;
                    }
                    Transmit::Bytes => {
                        tls.send(&self.plain_out);
                        self.plain_out.clear();
                    }
                    Transmit::Nothing => {}
                },
                None => {
                    if let Transmit::Request(r) = session.poll_transmit(&mut c.send_buf) {
                        from_request = Some(r);
                        one_request = true;
                    }
                }
            }
        }
        if let Some(tls) = &mut tcp.tls {
            tls.take_ciphertext(&mut c.send_buf);
        }
        if from_request.is_none() && c.send_buf.is_empty() {
            if let Some(session) = c.session.as_mut().and_then(Session::stream) {
                session.written();
            }
            return Ok(());
        }
        tcp.send_from_request = from_request;
        self.submit_send(i, one_request)
    }

    /// TCP: a send completed; the rest of its bytes, or the next output, go out.
    pub(super) fn on_stream_sent(&mut self, i: usize, res: i32) -> io::Result<()> {
        self.conns[i].sending = false;
        if !matches!(self.conns[i].phase, Phase::Open | Phase::Handshaking | Phase::SettingUp) {
            return Ok(());
        }
        if res <= 0 {
            let why = if res == 0 { "send wrote nothing".to_string() } else { os_error(res) };
            self.fail(i, ErrorKind::Reset, why.into());
            return self.begin_close(i);
        }
        self.stats.counters.bytes_sent += res as u64;
        let c = &mut self.conns[i];
        let Transport::Tcp(tcp) = &mut c.transport else { return Ok(()) };
        tcp.send_off += res as usize;
        let len = match tcp.send_from_request {
            Some(r) => self.shared.requests[r as usize].len(),
            None => c.send_buf.len(),
        };
        if tcp.send_off < len { self.submit_send(i, false) } else { self.flush(i) }
    }

    /// TCP: a receive of `res` bytes (with their arrival time, when stamped) for TLS or the
    /// session; none is the peer's close.
    pub(super) fn on_stream_recv(
        &mut self,
        i: usize,
        res: i32,
        flags: u32,
        buf: Option<u16>,
        now: Instant,
    ) -> io::Result<()> {
        if res < 0 {
            return self.recv_failed(i, res);
        }
        if res == 0 && !self.stamped() {
            return self.on_eof(i, now);
        }
        // A receive that read something names its buffer.
        let Some(bid) = buf else { return Ok(()) };
        let (data, arrived) = if self.stamped() {
            // A buffer without the kernel's layout cannot happen.
            let Some(received) = self.recvmsg.parse(self.io.bytes(bid, res as usize)) else {
                return Ok(());
            };
            self.arrivals_stamped |= received.timestamp.is_some();
            // The session sees the bytes as of their arrival: a response's latency ends there.
            (received.payload, self.clock.instant(received.timestamp, now))
        } else {
            (self.io.bytes(bid, res as usize), now)
        };
        if data.is_empty() {
            return self.on_eof(i, now);
        }
        self.stats.counters.bytes_received += data.len() as u64;
        if matches!(&self.conns[i].transport, Transport::Tcp(Tcp { tls: Some(_), .. })) {
            // TLS opens records where they lie.
            // SAFETY: `data` is not used again, and `bid` goes back to the ring only after
            // this completion is handled.
            let data = unsafe { self.io.bytes_mut(bid, data) };
            self.on_ciphertext(i, data, arrived, now)?;
        } else {
            self.on_plaintext(i, data, arrived, now)?;
        }
        if !cqueue::more(flags) { self.rearm(i) } else { Ok(()) }
    }

    pub(super) fn on_connect(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        if self.conns[i].phase != Phase::Connecting {
            // The run stopped while connecting: the close is already under way.
            return Ok(());
        }
        if res < 0 {
            let why: Why = match -res {
                libc::ECANCELED => format!("connect timed out after {:?}", self.shared.connect_timeout).into(),
                libc::EADDRNOTAVAIL => self.shared.sources.ports_used_up().to_owned().into(),
                _ => os_error(res).into(),
            };
            self.setup_failed(i, ErrorKind::Connect, why);
            return self.begin_close(i);
        }
        self.arm_recv(i)?;
        let Some((config, name)) = &self.shared.tls else { return self.connected(i, now) };
        match TlsSession::new(config, name) {
            Ok(session) => {
                let c = &mut self.conns[i];
                let by = c.connect_started.checked_add(self.shared.connect_timeout);
                c.transport = Transport::Tcp(Tcp { tls: Some(Box::new(session)), handshake_by: by, ..Tcp::default() });
                c.phase = Phase::Handshaking;
                self.note_deadline(by);
                self.flush(i)
            }
            Err(e) => {
                self.setup_failed(i, ErrorKind::Tls, tls::describe(&e).into());
                self.begin_close(i)
            }
        }
    }

    /// TCP is up and, for https, the handshake done: the session starts.
    pub(super) fn connected(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Transport::Tcp(tcp) = &mut c.transport else { return Ok(()) };
        let negotiated = match &tcp.tls {
            Some(tls) => Negotiated::Tls(tls.alpn()),
            None => Negotiated::Tcp,
        };
        match Session::new(&self.shared.session, negotiated, c.connect_started) {
            Ok(session) => {
                tcp.handshake_by = None;
                c.session = Some(session);
                c.phase = Phase::SettingUp;
                self.advance(i, now)
            }
            Err(why) => {
                self.setup_failed(i, ErrorKind::Tls, why);
                self.begin_close(i)
            }
        }
    }

    /// TCP receives carry their arrival time (RECVMSG with SO_TIMESTAMPNS) in the open model,
    /// whose loop lets responses wait for the next send (`sleeps_through_responses`). The
    /// closed model wakes for every batch of responses anyway, and there the timestamps cost
    /// about a tenth more CPU per request (RECVMSG, and a clock read per packet on both sides,
    /// the server's included, since the kernel stamps every packet once one socket asks).
    pub(super) fn stamped(&self) -> bool {
        self.open_model
    }

    /// Sends the connection's output from `send_off` on; `one_request` says it is a whole
    /// HTTP/1.1 request (see `flush`).
    pub(super) fn submit_send(&mut self, i: usize, one_request: bool) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Transport::Tcp(tcp) = &c.transport else { return Ok(()) };
        let bytes: &[u8] = match tcp.send_from_request {
            Some(r) => &self.shared.requests[r as usize],
            None => &c.send_buf,
        };
        let rest = &bytes[tcp.send_off.min(bytes.len())..];
        if one_request && tcp.send_off == 0 && rest.len() <= QUIET_SEND_MAX {
            // One request at a time never fills the socket buffer, so the kernel takes all of
            // a small request at submit; MSG_WAITALL covers the rest, and only a failure posts
            // a completion. That is one completion per request fewer on the hot path.
            self.stats.counters.bytes_sent += rest.len() as u64;
            if let Some(session) = c.session.as_mut().and_then(Session::stream) {
                session.written();
            }
            // SAFETY: a plain request is the run's, in `shared`, which outlives the ring. TLS
            // records stay unchanged in `send_buf` until this connection's next flush, which
            // only follows bytes from the server (`queue_output`, `on_ciphertext`): its answer
            // to this request, sent after reading it, by which time the kernel has long taken
            // the records. Only a server that answered without reading, and then let its
            // receive buffer fill, could have them sent after the buffer moved on (to later
            // records, or freed at the slot's close, whose cancel then ends the send): the
            // kernel only reads the memory, so that server gets wrong bytes and its TLS fails.
            return unsafe { self.io.send_quiet(i, c.generation, rest) };
        }
        c.sending = true;
        c.pending_ops += 1;
        // SAFETY: the shared request outlives the ring, and `send_buf` is left alone while a
        // send is in flight (`sending`) and until every operation on the slot has completed.
        unsafe { self.io.send(i, c.generation, rest) }
    }

    /// Received TLS records: their plaintext for the session, as of `arrived` (see `on_plaintext`).
    pub(super) fn on_ciphertext(
        &mut self,
        i: usize,
        data: &mut [u8],
        arrived: Instant,
        now: Instant,
    ) -> io::Result<()> {
        let mut plain = std::mem::take(&mut self.plain);
        plain.clear();
        let Transport::Tcp(Tcp { tls: Some(tls), .. }) = &mut self.conns[i].transport else {
            self.plain = plain;
            return Ok(());
        };
        let received = tls.receive(data, &mut plain);
        let handshake_done = !tls.is_handshaking();
        let tls_output = tls.wants_write();
        let result = match received {
            Err(e) => {
                self.fail(i, ErrorKind::Tls, tls::describe(&e).into());
                self.begin_close(i)
            }
            Ok(received) => {
                self.conns[i].peer_closed |= received.closed;
                let mut r = Ok(());
                if self.conns[i].phase == Phase::Handshaking && handshake_done {
                    r = self.connected(i, now);
                }
                // What TLS has to say (the handshake's next flight, an alert) goes out with the
                // batch's other sends, as the session's output does (`advance`): flushing here
                // would also send the requests queued by this connection's earlier receive in
                // the batch, splitting one send into several (at 64 × 100 over TLS, 1.7 times
                // shb's segments per request).
                if tls_output {
                    self.mark_dirty(i);
                }
                if r.is_ok() && !plain.is_empty() {
                    r = self.on_plaintext(i, &plain, arrived, now);
                }
                if r.is_ok() && received.closed { self.on_eof(i, now) } else { r }
            }
        };
        self.plain = plain;
        result
    }

    /// Received plaintext, for the session: its responses end at `arrived` (when the bytes
    /// reached the host, if known), while the requests it starts next leave `now`.
    pub(super) fn on_plaintext(&mut self, i: usize, data: &[u8], arrived: Instant, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        if !matches!(c.phase, Phase::Open | Phase::SettingUp) {
            return Ok(());
        }
        let Some(session) = c.session.as_mut().and_then(Session::stream) else { return Ok(()) };
        session.receive(data, arrived, &mut self.events);
        self.advance(i, now)
    }

    /// The peer closed the connection.
    pub(super) fn on_eof(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        match c.phase {
            Phase::Handshaking => self.fail(i, ErrorKind::Tls, "connection closed during the TLS handshake".into()),
            Phase::SettingUp | Phase::Open => {
                if let Some(session) = c.session.as_mut().and_then(Session::stream) {
                    session.peer_closed(now, &mut self.events);
                    self.count_events(i);
                }
            }
            _ => {}
        }
        self.begin_close(i)
    }
}
