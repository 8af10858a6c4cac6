//! The UDP transport in the loop, as QUIC uses it: a connected socket opened at once, one
//! multishot RECVMSG of whole GRO batches, and the session's datagrams sent as one GSO send per
//! batch of completions (`driver/udp.rs` has the socket and the send's parts).

use std::io;
use std::time::Instant;

use io_uring::cqueue;

use super::Loop;
use crate::driver::conn::{Phase, Transport};
use crate::driver::ops::Io;
use crate::driver::udp::{self, GRO_BUF_SIZE};
use crate::session::{Negotiated, Session};
use crate::stats::ErrorKind;

impl<I: Io> Loop<I> {
    /// UDP: a receive completion, a datagram or a GRO batch, for the session.
    pub(super) fn on_datagram_recv(
        &mut self,
        i: usize,
        res: i32,
        flags: u32,
        buf: Option<u16>,
        now: Instant,
    ) -> io::Result<()> {
        if res < 0 {
            return if -res == libc::ECONNREFUSED { self.udp_refused(i) } else { self.recv_failed(i, res) };
        }
        if let Some(bid) = buf {
            self.on_datagrams(i, bid, res as usize, now)?;
        }
        if !cqueue::more(flags) { self.rearm(i) } else { Ok(()) }
    }

    /// A QUIC connection: its UDP socket is connected at once, its receive armed, and its
    /// session starts the handshake, whose datagrams leave with the batch's sends.
    pub(super) fn start_udp_conn(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let gro = self.shared.udp_buffer >= GRO_BUF_SIZE;
        let source = self.shared.sources.for_slot(self.lifecycle.thread(), i);
        if let Err(e) = udp::open_connected(&mut self.io, i, &self.shared.addr, source, gro) {
            self.setup_failed(i, ErrorKind::Connect, format!("UDP socket: {e}").into());
            return Ok(());
        }
        let c = &mut self.conns[i];
        c.transport = Transport::new(true);
        c.phase = Phase::SettingUp;
        self.arm_recv(i)?;
        match Session::new(&self.shared.session, Negotiated::Udp, now) {
            Ok(session) => {
                self.conns[i].session = Some(session);
                self.advance(i, now)
            }
            Err(why) => {
                self.setup_failed(i, ErrorKind::Tls, why);
                self.begin_close(i)
            }
        }
    }

    /// UDP: the session's next batch of datagrams goes out as one GSO send (or one send a
    /// datagram where GSO is off), unless the last batch is still being sent (its completion
    /// calls this again). QUIC's timers move when it sends, so its deadline is noted after.
    pub(super) fn flush_datagrams(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.sending {
            return Ok(());
        }
        let Some(session) = c.session.as_mut().and_then(Session::datagrams) else { return Ok(()) };
        let segment_size = session.poll_transmit(Instant::now(), &mut c.send_buf);
        let deadline = c.session.as_ref().and_then(Session::poll_timeout);
        self.note_deadline(deadline);
        let Some(segment_size) = segment_size else { return Ok(()) };
        self.submit_datagrams(i, Some(segment_size))
    }

    /// Sends the datagrams in `send_buf`: a new batch of `segment_size` each, or (None) the
    /// batch again, datagram by datagram, after the kernel refused GSO for it.
    pub(super) fn submit_datagrams(&mut self, i: usize, segment_size: Option<usize>) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Transport::Udp(udp) = &mut c.transport else { return Ok(()) };
        if let Some(size) = segment_size {
            udp.segment_size = size;
            self.stats.counters.bytes_sent += c.send_buf.len() as u64;
        }
        // SAFETY: `send_buf` and the boxed parts of `udp.send` are left alone while sends are in
        // flight (`sending`) and until every operation on the slot has completed.
        let queued = unsafe { udp.send.send(&mut self.io, i, c.generation, &c.send_buf, udp.segment_size)? };
        udp.sends_in_flight = queued;
        c.sending = queued > 0;
        c.pending_ops += queued;
        Ok(())
    }

    /// UDP: one send of the batch completed. A kernel refusing GSO gets the same batch again,
    /// datagram by datagram; a refused port fails the connection; any other failure lost a
    /// datagram, which QUIC repairs like one lost on the way.
    pub(super) fn on_datagrams_sent(&mut self, i: usize, res: i32) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Transport::Udp(udp) = &mut c.transport else { return Ok(()) };
        udp.sends_in_flight = udp.sends_in_flight.saturating_sub(1);
        if udp.sends_in_flight == 0 {
            c.sending = false;
        }
        if !matches!(c.phase, Phase::Open | Phase::SettingUp) {
            return Ok(());
        }
        if res < 0 {
            if udp.send.refused(res) {
                return self.submit_datagrams(i, None);
            }
            if -res == libc::ECONNREFUSED {
                return self.udp_refused(i);
            }
        }
        if self.conns[i].sending { Ok(()) } else { self.flush_datagrams(i) }
    }

    /// The target's UDP port answered with ICMP port unreachable: nothing listens there.
    pub(super) fn udp_refused(&mut self, i: usize) -> io::Result<()> {
        let (kind, why) = if self.conns[i].phase == Phase::SettingUp {
            (
                ErrorKind::Connect,
                format!("nothing listens on UDP port {} (connection refused)", self.shared.addr.port()),
            )
        } else {
            (ErrorKind::Reset, "the UDP port closed (connection refused)".to_string())
        };
        self.fail(i, kind, why.into());
        self.begin_close(i)
    }

    /// UDP: one RECVMSG completion, a datagram or a GRO batch, for the session.
    pub(super) fn on_datagrams(&mut self, i: usize, bid: u16, len: usize, now: Instant) -> io::Result<()> {
        let buf = self.io.bytes(bid, len);
        // A buffer without the kernel's layout cannot happen; one cut short (MSG_TRUNC, which
        // buffers of a whole GRO batch never see) is counted and its start is still given to
        // QUIC, which drops what does not decrypt and repairs it as a loss.
        let Some(received) = self.recvmsg.parse(buf) else { return Ok(()) };
        self.stats.counters.bytes_received += received.payload.len() as u64;
        self.stats.counters.truncated += u64::from(received.truncated);
        let c = &mut self.conns[i];
        let Some(session) = c.session.as_mut().and_then(Session::datagrams) else { return Ok(()) };
        session.receive(received.payload, received.segment_size, now, &mut self.events);
        self.advance(i, now)
    }

    /// UDP: a QUIC connection being closed sends its CONNECTION_CLOSE first, so the server can
    /// let go of it at once rather than at its idle timeout (a GOAWAY server's connections, one
    /// every few requests, would pile up there). It is queued before the cancel and close, and a
    /// UDP send completes at submit, so it leaves; if a send is still in flight it is skipped.
    pub(super) fn say_goodbye(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.sending {
            return Ok(());
        }
        let Some(session) = c.session.as_mut().and_then(Session::datagrams) else { return Ok(()) };
        let now = Instant::now();
        session.close(now);
        let Some(segment_size) = session.poll_transmit(now, &mut c.send_buf) else { return Ok(()) };
        self.submit_datagrams(i, Some(segment_size))
    }
}
