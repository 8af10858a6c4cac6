//! One thread's event loop: submit, wait for a batch of completions, feed the bytes through each
//! connection's transport to its session, count what the sessions report, submit what they
//! produced.
//!
//! Every socket is a registered (fixed) file whose slot is its connection's index. Each
//! connection has one multishot receive into the thread's provided-buffer ring, at most one
//! send in flight, and a connect linked to a timeout. A run over QUIC has a connected UDP socket
//! per connection instead (opened at once: a UDP connect sends nothing), one multishot RECVMSG
//! into buffers that hold a whole GRO batch, and one GSO send of the session's datagrams per
//! batch of completions; the loop matches on that transport kind, never on HTTP/3. Closing cancels whatever is still in
//! flight on the slot and then closes it; the slot is reused only after every operation on it
//! has completed, so no operation ever points at memory that changed under it.
//!
//! The loop knows no protocol: it matches on what a `Session` reports (events, output, its
//! next deadline) and keeps the run's accounting.
//!
//! Requests come from the thread's `Schedule`. In the closed model a connection (or stream)
//! takes the next one as soon as it is free. In the open model one is due at a time: a
//! connection with room and nothing due goes on the `waiting` list, the loop wakes at the next
//! due instant and hands it to the connection that has waited longest; a request found due
//! with nobody waiting is counted as blocked, and the next connection freed takes it.
//!
//! A closed-model ramp (stages without a rate) says how many of the thread's connections may be
//! open at each instant: the first ones by index, up to that count. The rest stay unconnected;
//! when the count falls, a connection beyond it takes no new request, finishes the ones it has
//! in flight (every stream of one, for HTTP/2 and HTTP/3: the connection is the unit) and
//! closes, so no request is aborted because the ramp went down. The loop wakes at the next
//! instant the count changes, as it does for a deadline.

mod counting;
mod datagrams;
mod pacing;
mod tcp;

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::cqueue;

use super::arrival::ArrivalClock;
use super::conn::{Conn, Phase, Tcp, Transport};
use super::lifecycle::Lifecycle;
use super::ops::Io;
use super::recvmsg::RecvMsg;
use super::uring::{Completion, Op, untoken};
use super::{Shared, ThreadDone, ThreadPlan};
use crate::feeder::Feeds;
use crate::plan::ConnectionRamp;
use crate::random::generator_state;
use crate::session::{Cursor, Event, Numbering, Picker, Schedule, Units};
use crate::stats::{ErrorKind, NameSamples, Stats};

/// Receive buffers: small, since benchmark responses are small and RSS counts.
const BUF_SIZE: usize = 4096;
/// How long the final cancellation may take before the loop gives up on a clean exit.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);
/// Open model: a request may wait past its due instant for the ones due after it, so that one
/// wake-up sends them together, for up to this share of `--max-hold` (100 µs of the default
/// 500 µs; 0 sends each at its instant). Each wake costs the client, and each send to an idle
/// server costs a cross-CPU wake-up, so at a moderate rate sending every request at its own
/// instant costs about twice the CPU per request; a larger hold trades schedule precision for
/// CPU, as a timer-tick client does (oha sends about ten at a time per 1 ms tick at 10,000/s).
/// Whatever this delays is in the send lateness and the latency from due.
const SEND_SLACK_SHARE: u32 = 5;

pub(super) struct Loop<I: Io> {
    /// The system calls beneath: io_uring, or epoll where it is blocked (`ops.rs`).
    io: I,
    conns: Vec<Conn>,
    shared: Arc<Shared>,
    lifecycle: Lifecycle,
    /// Everything measured since the last interval was handed out.
    stats: Stats,
    schedule: Schedule,
    /// Which request each connection sends next.
    picker: Picker,
    /// The open model: service time is recorded beside the latency from due.
    open_model: bool,
    /// Ticks of warm-up still to be handed out (0: none, or it is over), and the requests
    /// those handed out so far counted as ok or errors.
    warm_up_ticks: u32,
    warm_up_resolved: u64,
    /// Open model: connections with room for a request, waiting for the next one due, oldest
    /// first. An entry whose connection's `waiting` is false is stale and skipped.
    waiting: VecDeque<usize>,
    /// Connections whose `waiting` is true.
    waiting_count: usize,
    /// Closed-model stages: how many connections may be open at each instant of the load.
    ramp: Option<ConnectionRamp>,
    /// Connections with an index below this may be open (all, without a ramp); one above it
    /// finishes what it has in flight and closes.
    open_allowed: usize,
    /// When the load started, and the next instant the ramp's count changes.
    ramp_start: Option<Instant>,
    ramp_next: Option<Instant>,
    /// Decrypted bytes of the receive being handled (reused).
    plain: Vec<u8>,
    /// Session output on its way into TLS (reused).
    plain_out: Vec<u8>,
    /// The batch of completions being handled (reused).
    completions: Vec<Completion>,
    /// What the session being handled reported (reused).
    events: Vec<Event>,
    /// A mix's names' samples on their way into their histograms (`counting.rs`): recorded
    /// before the statistics are handed out.
    name_samples: NameSamples,
    /// Connections with output to write once this batch of completions is handled.
    dirty: Vec<usize>,
    /// No connection's deadline (TLS handshake, session timer) is before this: the one wait
    /// wakes for it. It may be early (a deadline since moved on), never late.
    next_deadline: Option<Instant>,
    connects_ok: u64,
    connect_failures: u64,
    /// Connections in Phase::Open, kept so the wait need not count them.
    open: usize,
    error_samples: Vec<(ErrorKind, String)>,
    /// The lowest limit a server set on requests in flight per connection, below what was asked.
    stream_limit: Option<u32>,
    /// Requests declined unprocessed since the last response.
    refused_in_a_row: u64,
    /// Responses in the batch being handled, to record its hold for each.
    batch_responses: u64,
    /// Requests taken and not yet answered, failed or refused: what a batch can be made of.
    in_flight: u64,
    /// The header every multishot RECVMSG is armed with.
    recvmsg: RecvMsg,
    /// Both clocks, read as the batch being handled was collected.
    clock: ArrivalClock,
    /// A TCP receive has come with its arrival time: the kernel stamps packets (it starts a
    /// moment after the first socket asks).
    arrivals_stamped: bool,
}

/// The receive buffers a thread of `connections` connections needs: how many, and their size.
/// A UDP receive buffer holds a whole GRO batch (a smaller one would cut a batch short and lose
/// the datagrams past the cut; see `Shared::udp_buffer`); its pages are touched only as far as
/// datagrams fill them, so fewer of them cost less than their size suggests. A TCP one is
/// touched whole as the ring cycles through them: at 256 HTTP/1.1 connections a second buffer
/// each was 0.6 MB of the peak RSS.
pub(super) fn receive_buffers(shared: &Shared, connections: usize) -> (u16, usize) {
    let n = connections.max(1);
    let entries = (n * shared.session.receive_buffers_per_connection()).next_power_of_two();
    if shared.session.is_udp() {
        (entries.clamp(16, 256) as u16, shared.udp_buffer)
    } else {
        (entries.clamp(64, 4096) as u16, BUF_SIZE)
    }
}

impl<I: Io> Loop<I> {
    /// The loop over `io`, made for `plan.connections` sockets and `receive_buffers`.
    pub(super) fn new(io: I, shared: Arc<Shared>, plan: ThreadPlan) -> io::Result<Self> {
        let n = plan.connections.max(1);
        let ramp = ConnectionRamp::for_load(&plan.load, plan.connections);
        let udp = shared.session.is_udp();
        let now = Instant::now();
        let numbering = Numbering {
            worker: plan.worker,
            thread: plan.index as u64,
            rng: template_seed(plan.seed, plan.worker, plan.index),
            unique: template_seed(None, plan.worker, plan.index),
        };
        let feeds = Feeds::new(&plan.feeders, plan.seed.unwrap_or(0), plan.worker << 16 ^ plan.index as u64);
        let mut picker = Picker::new(shared.heads.clone(), plan.seed, shared.scenarios.as_deref())
            .with_flows(shared.flows.clone())
            .with_cookies(shared.cookies.clone())
            .numbered(numbering)
            .feeding(feeds, &shared.feeder_uses);
        let indices = plan.load.indices();
        let conns = (0..n)
            .map(|slot| {
                let vu = indices.first.saturating_add(indices.step.saturating_mul(slot as u64));
                Conn::new(now, udp, Cursor::at(picker.first(slot), vu))
            })
            .collect();
        let mut l = Loop {
            completions: Vec::with_capacity(io.batch_room()),
            io,
            conns,
            picker,
            lifecycle: Lifecycle::new(&plan, now),
            stats: Stats::new(),
            schedule: Schedule::for_load(plan.budget, &plan.load),
            open_model: plan.load.is_open(),
            warm_up_ticks: plan.warm_up_ticks,
            warm_up_resolved: 0,
            waiting: VecDeque::new(),
            waiting_count: 0,
            open_allowed: ramp.as_ref().map_or(n, |r| r.open_at(Duration::ZERO)),
            ramp,
            ramp_start: None,
            ramp_next: None,
            plain: Vec::with_capacity(16 * 1024),
            plain_out: Vec::new(),
            events: Vec::new(),
            name_samples: NameSamples::default(),
            dirty: Vec::new(),
            next_deadline: None,
            connects_ok: 0,
            connect_failures: 0,
            open: 0,
            error_samples: Vec::new(),
            stream_limit: None,
            refused_in_a_row: 0,
            batch_responses: 0,
            in_flight: 0,
            recvmsg: RecvMsg::new(),
            clock: ArrivalClock::read(),
            arrivals_stamped: false,
            shared,
        };
        if l.warm_up_ticks > 0 {
            l.schedule.defer_budget();
        }
        Ok(l)
    }

    pub(super) fn run(mut self) -> io::Result<()> {
        let outcome = self.run_load();
        // The load's end: closing what is left is not part of the run's measured time.
        let ended = Instant::now();
        if outcome.is_ok() && !self.schedule.is_spent() {
            self.count_missed_slots(self.lifecycle.end().map_or(ended, |end| end.min(ended)));
        }
        if outcome.is_err() {
            // One thread failing fails the run: the others need not go on to the deadline.
            self.lifecycle.stop_all();
        }
        let closing = self.end_load();
        self.name_samples.record(&mut self.stats.names);
        // The counts are final once every connection is closing, so the report need not wait
        // for the kernel to close them: 10,000 TCP closes over loopback cost this thread 200 ms
        // of FINs (the server's side of each included), a late report on a loaded machine.
        let done = ThreadDone {
            thread: self.lifecycle.thread(),
            rest: std::mem::take(&mut self.stats),
            error_samples: std::mem::take(&mut self.error_samples),
            ended,
            cpu: super::thread_cpu_time(),
            stream_limit: self.stream_limit,
            failure: outcome.as_ref().err().map(|e| e.to_string()),
        };
        self.lifecycle.done(done);
        // Whatever ended the load, the kernel must let go of every buffer before it is freed.
        let clean = closing.is_ok() && matches!(self.wait_closed(), Ok(true));
        if !clean {
            // Leak rather than free buffers the kernel may still write into.
            std::mem::forget(self);
        }
        outcome
    }

    /// Pacing, when the run stops (its time is up, or it is stopped) rather than its budget
    /// ending it: the slots its users had come due for by `end` and not started, each user
    /// behind its cadence. Users a ramp has closed have no cadence to keep.
    fn count_missed_slots(&mut self, end: Instant) {
        for c in &self.conns[..self.open_allowed.min(self.conns.len())] {
            self.picker.count_missed(&c.cursor, end, &mut self.stats);
        }
    }

    fn run_load(&mut self) -> io::Result<()> {
        let now = Instant::now();
        self.try_release(now)?;
        if !self.lifecycle.released() && self.shared.keepalive {
            // Open every connection now (those a ramp has open at the start), so the first
            // requests leave at the start instant.
            for i in 0..self.open_allowed {
                self.start_conn(i, now)?;
            }
            // A QUIC connection's handshake is the session's output.
            self.flush_dirty()?;
        }
        loop {
            let now = Instant::now();
            self.try_release(now)?;
            self.tick(now);
            if self.next_deadline.is_some_and(|d| now >= d) {
                self.expire_deadlines(now)?;
            }
            if self.ramp_next.is_some_and(|at| now >= at) {
                self.follow_ramp(now)?;
            }
            if self.lifecycle.check_due(now) {
                self.retry_idle(now)?;
            }
            if self.open_model && self.lifecycle.released() {
                self.dispatch_due(now)?;
            }
            if !self.lifecycle.ready_sent() {
                self.check_ready();
            }
            if self.must_end(now) || self.finished() {
                return Ok(());
            }
            let mut until = self.lifecycle.wake_at(now);
            if let Some(d) = self.next_deadline {
                until = until.min(d);
            }
            if let Some(at) = self.ramp_next {
                until = until.min(at);
            }
            // Open model: when the next request must leave, slack included.
            let send_by = self.schedule.next_due().map(|due| due + self.shared.max_hold / SEND_SLACK_SHARE);
            // Only a connection waiting can take the next request due: with none, the next
            // completion frees one.
            if self.waiting_count > 0
                && let Some(at) = send_by
            {
                until = until.min(at);
            }
            if self.sleeps_through_responses(now, send_by) {
                self.io.sleep(now, until)?;
            } else {
                self.io.wait(now, until)?;
            }
            if self.open_model && self.waiting_count == 0 && self.lifecycle.released() {
                // Nothing was free while the thread slept: whatever came due meanwhile waited
                // for a connection. Counted now, before the completions free some.
                self.stats.counters.blocked += self.schedule.mark_blocked(Instant::now());
            }
            // Nor may a hold keep the completions that would free a connection past that
            // instant: with every connection busy and a quarter of those in flight to wait
            // for, it held a run at 37,000/s 2 to 13 ms late at p99.
            let held = self.hold(send_by.map_or(until, |at| until.min(at)))?;
            self.drain()?;
            self.note_hold(held);
        }
    }

    /// Handles a batch of completions, then writes what it left to send.
    fn drain(&mut self) -> io::Result<()> {
        self.io.completions(&mut self.completions);
        if self.stamped() {
            self.clock = ArrivalClock::read();
        }
        for k in 0..self.completions.len() {
            let (data, res, flags) = self.completions[k];
            self.complete(data, res, flags)?;
        }
        self.io.publish();
        self.flush_dirty()
    }

    /// One write per connection for everything this batch gave it to send.
    fn flush_dirty(&mut self) -> io::Result<()> {
        while let Some(i) = self.dirty.pop() {
            self.conns[i].dirty = false;
            self.flush(i)?;
        }
        Ok(())
    }

    fn start_conn(&mut self, i: usize, now: Instant) -> io::Result<()> {
        // A slot in the middle of an iteration opens for its next step, which takes no unit.
        let owed = self.picker.owes(&self.conns[i].cursor) && !self.schedule.is_stopping();
        if !owed && !self.schedule.claim() {
            return Ok(());
        }
        let c = &mut self.conns[i];
        c.claimed = !owed;
        c.generation = c.generation.wrapping_add(1);
        c.connect_started = now;
        c.peer_closed = false;
        match c.transport {
            Transport::Tcp(_) => self.start_tcp_conn(i),
            Transport::Udp(_) => self.start_udp_conn(i, now),
        }
    }

    fn complete(&mut self, data: u64, res: i32, flags: u32) -> io::Result<()> {
        let Some((op, i, generation)) = untoken(data) else { return Ok(()) };
        let buf = cqueue::buffer_select(flags);
        let now = Instant::now();
        {
            let c = &mut self.conns[i];
            // A quiet send was never counted: its memory is the run's request, which outlives
            // the ring, and the cancel on close reaches it like any other operation.
            if op != Op::SendQuiet && (op != Op::Recv || !cqueue::more(flags)) {
                c.pending_ops -= 1;
            }
            if op == Op::Recv && !cqueue::more(flags) {
                c.recv_armed = false;
            }
        }
        if generation == self.conns[i].generation {
            match op {
                Op::Connect => self.on_connect(i, res, now)?,
                Op::Recv => self.on_recv(i, res, flags, buf, now)?,
                Op::Send => self.on_send(i, res)?,
                // Only a failure completes (success is skipped), so `res` is an error here.
                Op::SendQuiet => self.on_send(i, res)?,
                Op::ConnectTimeout | Op::Cancel | Op::Close => {}
            }
        }
        if let Some(bid) = buf {
            self.io.recycle(bid);
        }
        let c = &mut self.conns[i];
        if c.phase == Phase::Closing && c.pending_ops == 0 {
            c.phase = Phase::Idle;
            c.sending = false;
            // Before the start, a connection that failed waits for it rather than retrying; one
            // the ramp has closed waits until it opens it again.
            if self.lifecycle.released() && i < self.open_allowed {
                self.start_conn(i, now)?;
            }
        }
        Ok(())
    }

    /// The session of `i` took something in (bytes, the clock, a close, the start): count what
    /// it reported, then move the connection on: made once its session is set up; requests
    /// started once the load is on; closed when it has nothing left to do; its output queued
    /// for the end of the batch and its deadline noted.
    fn advance(&mut self, i: usize, now: Instant) -> io::Result<()> {
        self.count_events(i);
        let c = &self.conns[i];
        let Some(session) = &c.session else { return Ok(()) };
        if c.phase == Phase::SettingUp {
            if session.must_close() {
                return self.begin_close(i);
            }
            if !session.is_established() {
                return self.queue_output(i);
            }
            self.established(i, now);
        }
        let released = self.lifecycle.released();
        let c = &mut self.conns[i];
        let Some(session) = &mut c.session else { return Ok(()) };
        // Open model: the session has room and the next request is not due yet.
        let mut room = false;
        // Requests may still come to this connection (its user may be pausing).
        let mut more = false;
        // Beyond the ramp's count, no new request: it closes once idle.
        if released && !c.peer_closed && i < self.open_allowed {
            let mut units = Units::new(&mut c.claimed, &mut self.schedule, &mut self.stats)
                .picking(&mut c.cursor, &mut self.picker);
            session.start_requests(now, &mut units, &mut self.events);
            room = units.found_none_due();
            more = units.has_more();
            self.in_flight += u64::from(units.taken());
            if !self.events.is_empty() {
                self.count_events(i);
            }
        }
        self.set_waiting(i, room);
        let c = &self.conns[i];
        let Some(session) = &c.session else { return Ok(()) };
        // A user pausing (think time) keeps its connection while it has requests to come.
        let thinking = more && c.cursor.resume_at.is_some_and(|t| t > now);
        if session.must_close() || (released && session.is_idle() && !room && !thinking) {
            return self.begin_close(i);
        }
        if thinking {
            self.note_deadline(c.cursor.resume_at);
        }
        self.queue_output(i)
    }

    /// Puts `i` on the list to write at the end of the batch if its session has output, and
    /// notes its deadline.
    fn queue_output(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Some(session) = &c.session else { return Ok(()) };
        let wants = session.wants_transmit();
        let deadline = session.poll_timeout();
        if wants {
            self.mark_dirty(i);
        }
        self.note_deadline(deadline);
        Ok(())
    }

    /// `i` has output for the end of the batch (`flush_dirty`).
    fn mark_dirty(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(i);
        }
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let with_header = match self.conns[i].transport {
            Transport::Tcp(_) => self.stamped(),
            Transport::Udp(_) => true,
        };
        let c = &mut self.conns[i];
        c.recv_armed = true;
        c.pending_ops += 1;
        if with_header {
            // SAFETY: the header lives in `self.recvmsg` for the whole loop, which drains every
            // operation before it drops.
            return unsafe { self.io.recvmsg_multishot(i, c.generation, self.recvmsg.header()) };
        }
        self.io.recv_multishot(i, c.generation)
    }

    /// Sends the session's output and TLS records unless a send is already in flight (its
    /// completion calls this again).
    fn flush(&mut self, i: usize) -> io::Result<()> {
        match self.conns[i].transport {
            Transport::Tcp(_) => self.flush_stream(i),
            Transport::Udp(_) => self.flush_datagrams(i),
        }
    }

    fn on_send(&mut self, i: usize, res: i32) -> io::Result<()> {
        match self.conns[i].transport {
            Transport::Tcp(_) => self.on_stream_sent(i, res),
            Transport::Udp(_) => self.on_datagrams_sent(i, res),
        }
    }

    fn on_recv(&mut self, i: usize, res: i32, flags: u32, buf: Option<u16>, now: Instant) -> io::Result<()> {
        if !matches!(self.conns[i].phase, Phase::Open | Phase::Handshaking | Phase::SettingUp) {
            return Ok(());
        }
        match self.conns[i].transport {
            Transport::Tcp(_) => self.on_stream_recv(i, res, flags, buf, now),
            Transport::Udp(_) => self.on_datagram_recv(i, res, flags, buf, now),
        }
    }

    /// A receive that failed with `res`, on either transport.
    fn recv_failed(&mut self, i: usize, res: i32) -> io::Result<()> {
        match -res {
            // The buffer ring ran dry; buffers come back as this batch is handled (UDP's
            // datagrams wait in the socket meanwhile).
            libc::ENOBUFS => self.rearm(i),
            libc::ECANCELED => Ok(()),
            _ => {
                if self.conns[i].phase == Phase::Handshaking {
                    self.fail(i, ErrorKind::Tls, format!("during the TLS handshake: {}", os_error(res)).into());
                } else {
                    self.fail(i, ErrorKind::Reset, os_error(res).into());
                }
                self.begin_close(i)
            }
        }
    }

    fn rearm(&mut self, i: usize) -> io::Result<()> {
        let c = &self.conns[i];
        if !c.recv_armed && matches!(c.phase, Phase::Open | Phase::Handshaking | Phase::SettingUp) {
            self.arm_recv(i)
        } else {
            Ok(())
        }
    }

    /// Cancels what is in flight on `i` and closes its socket; the slot is reused once every
    /// operation has completed. A request claimed for the connection and never used goes back
    /// into the budget: nothing was sent for it.
    fn begin_close(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if matches!(c.phase, Phase::Idle | Phase::Closing) {
            return Ok(());
        }
        if c.phase == Phase::Open {
            self.open -= 1;
        }
        if std::mem::take(&mut c.claimed) {
            self.schedule.return_claim();
        }
        if c.waiting {
            c.waiting = false;
            self.waiting_count -= 1;
        }
        match self.conns[i].transport {
            // TLS ends with the socket (the server learns of the close from TCP).
            Transport::Tcp(_) => self.conns[i].transport = Transport::Tcp(Tcp::default()),
            Transport::Udp(_) => self.say_goodbye(i)?,
        }
        let c = &mut self.conns[i];
        c.phase = Phase::Closing;
        c.session = None;
        c.pending_ops += I::CLOSE_COMPLETIONS;
        self.io.cancel_and_close(i, c.generation)
    }

    /// The load is over: requests in flight are counted as aborted and every socket begins to
    /// close. Nothing counts after this: a closing connection's completions are not looked at.
    fn end_load(&mut self) -> io::Result<()> {
        if self.lifecycle.released() {
            // Requests due before the load ended and never sent: none, unless the server (or
            // the client) fell behind the rate at the end.
            let now = Instant::now();
            let end = self.lifecycle.end().map_or(now, |e| e.min(now));
            self.stats.counters.unsent += self.schedule.overdue(end);
        }
        self.schedule.stop();
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            // A request whose send was queued goes out (the final submit carries it before the
            // cancel), so the server may see it; one not yet queued is not counted at all.
            if let Some(session) = &c.session {
                self.stats.counters.aborted += session.sent_in_flight();
            }
            c.claimed = false;
            self.begin_close(i)?;
        }
        Ok(())
    }

    /// Waits (briefly) until the kernel is done with every buffer of the connections that
    /// `end_load` closed. Returns false when it did not let go of everything in time.
    fn wait_closed(&mut self) -> io::Result<bool> {
        let limit = Instant::now() + DRAIN_LIMIT;
        // Nothing opens again once the load has ended, so a connection found done stays done.
        let mut first_open = 0;
        loop {
            while self.conns.get(first_open).is_some_and(|c| c.pending_ops == 0) {
                first_open += 1;
            }
            if first_open == self.conns.len() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= limit {
                return Ok(false);
            }
            self.io.wait(now, limit)?;
            self.drain()?;
        }
    }
}

fn os_error(res: i32) -> String {
    io::Error::from_raw_os_error(-res).to_string()
}

/// The state of a thread's generator for templates' random values: apart from the mix's
/// choices (which templates then leave as they were), distinct for every worker and thread,
/// and the same for the same `seed` (a part's, which the fleet's split makes distinct too);
/// without one, from the clock: different on every run, as UUIDs must be.
fn template_seed(seed: Option<u64>, worker: u64, thread: usize) -> u64 {
    let base = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    generator_state(
        base ^ worker.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ (thread as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
}
