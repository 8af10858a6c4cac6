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

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{IoUring, cqueue};

use super::arrival::ArrivalClock;
use super::buf_ring::BufRing;
use super::conn::{Conn, Phase};
use super::lifecycle::Lifecycle;
use super::recvmsg::RecvMsg;
use super::socket::new_socket;
use super::udp::{self, GRO_BUF_SIZE, UdpSend};
use super::uring::{Completion, Op, Uring, untoken};
use super::{Shared, ThreadDone, ThreadPlan};
use crate::plan::ConnectionRamp;
use crate::session::{Event, Negotiated, Schedule, Session, Transmit, Units, Why};
use crate::stats::{ErrorKind, Spans, Stats};
use crate::tls::{self, TlsSession};

/// Receive buffers: small, since benchmark responses are small and RSS counts.
const BUF_SIZE: usize = 4096;
/// Requests up to this size go out as quiet sends: far below the smallest socket send buffer.
const QUIET_SEND_MAX: usize = 4096;
/// Requests a server may decline unprocessed, with no response in between, before declined
/// ones count as errors instead of being sent again.
const REFUSED_IN_A_ROW: u64 = 1000;
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
/// Open model: the loop sleeps through responses (`sleeps_through_responses`) only while
/// requests are due at least this far apart (up to 10,000 a second per thread). Faster, the
/// responses wake it often enough to send on time, and sleeping through them made the send
/// lateness worse on a 2-core VM (p99 0.3 to 3 ms at 50,000/s, against about 0.1 ms), since a
/// sleeping core wakes late at times.
const SLEEP_MIN_SPACING: Duration = Duration::from_micros(100);

pub(super) struct Loop<'r> {
    uring: Uring<'r>,
    bufs: BufRing,
    conns: Vec<Conn>,
    shared: Arc<Shared>,
    lifecycle: Lifecycle,
    /// Everything measured since the last interval was handed out.
    stats: Stats,
    schedule: Schedule,
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
    /// The connections are QUIC over UDP.
    udp: bool,
    /// The header every multishot RECVMSG is armed with.
    recvmsg: RecvMsg,
    /// Both clocks, read as the batch being handled was collected.
    clock: ArrivalClock,
    /// A TCP receive has come with its arrival time: the kernel stamps packets (it starts a
    /// moment after the first socket asks).
    arrivals_stamped: bool,
}

impl<'r> Loop<'r> {
    /// The ring for `connections` connections.
    pub(super) fn ring(connections: usize) -> io::Result<IoUring> {
        Uring::ring(connections)
    }

    pub(super) fn new(ring: &'r mut IoUring, shared: Arc<Shared>, plan: ThreadPlan) -> io::Result<Self> {
        let n = plan.connections.max(1);
        let ramp = ConnectionRamp::for_load(&plan.load, plan.connections);
        let uring = Uring::new(ring, n as u32, shared.connect_timeout)?;
        let udp = shared.session.is_udp();
        let entries = (n * shared.session.receive_buffers_per_connection()).next_power_of_two();
        // A UDP receive buffer holds a whole GRO batch (a smaller one would cut a batch short
        // and lose the datagrams past the cut; see `Shared::udp_buffer`); its pages are touched
        // only as far as datagrams fill them, so fewer of them cost less than their size suggests.
        // A TCP one is touched whole as the ring cycles through them: at 256 HTTP/1.1
        // connections a second buffer each was 0.6 MB of the peak RSS.
        let bufs = if udp {
            BufRing::new(uring.submitter(), entries.clamp(16, 256) as u16, shared.udp_buffer, 0)?
        } else {
            BufRing::new(uring.submitter(), entries.clamp(64, 4096) as u16, BUF_SIZE, 0)?
        };
        let now = Instant::now();
        let mut l = Loop {
            completions: Vec::with_capacity(uring.sq_entries()),
            uring,
            bufs,
            conns: (0..n).map(|_| Conn::new(now)).collect(),
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
            udp,
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
        // The load's end: closing what is left (10,000 connections take a few tens of ms) is
        // not part of the run's measured time.
        let ended = Instant::now();
        // Whatever ended the load, the kernel must let go of every buffer before it is freed.
        let clean = matches!(self.drain_and_close(), Ok(true));
        let done = ThreadDone {
            thread: self.lifecycle.thread(),
            rest: std::mem::take(&mut self.stats),
            error_samples: std::mem::take(&mut self.error_samples),
            ended,
            cpu: super::thread_cpu_time(),
            stream_limit: self.stream_limit,
        };
        self.lifecycle.done(done);
        if !clean {
            // Leak rather than free buffers the kernel may still write into.
            std::mem::forget(self);
        }
        outcome
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
                self.uring.sleep(now, until)?;
            } else {
                self.uring.wait(now, until)?;
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

    /// Open model: whether to sleep until the next request must leave rather than wake for each
    /// response. A connection is free for that request, it is due within `--max-hold`, and a
    /// response's latency ends at its arrival (`arrival`), so the responses that wait for the
    /// wake-up lose nothing of their latency, and at a moderate rate the client wakes once per
    /// request (or bunch) instead of twice; up to `SLEEP_MIN_SPACING`'s rate. Until the kernel
    /// stamps arrivals, and over UDP
    /// (QUIC's packets carry no arrival time here, and its acknowledgements must not wait), the
    /// loop wakes for every completion.
    fn sleeps_through_responses(&mut self, now: Instant, send_by: Option<Instant>) -> bool {
        self.arrivals_stamped
            && !self.udp
            && self.waiting_count > 0
            && !self.shared.max_hold.is_zero()
            && send_by.is_some_and(|at| at.saturating_duration_since(now) <= self.shared.max_hold)
            && self.schedule.spacing().is_some_and(|s| s >= SLEEP_MIN_SPACING)
    }

    /// Hands out the second just completed, if one has. The warm-up ends with its last tick:
    /// what was counted until then is the warm-up's, and a `-n` budget begins.
    fn tick(&mut self, now: Instant) {
        if self.warm_up_ticks == 0 {
            self.lifecycle.tick(now, &mut self.stats);
            return;
        }
        let resolved = self.stats.counters.total();
        if self.lifecycle.tick(now, &mut self.stats).is_some() {
            self.warm_up_resolved += resolved;
            self.warm_up_ticks -= 1;
            if self.warm_up_ticks == 0 {
                self.schedule.end_warm_up(self.warm_up_resolved);
            }
        }
    }

    /// Completions worth collecting before handling a batch: one per three requests in flight,
    /// up to 32, and no more than there are open connections, since a connection's responses
    /// often come in one receive. A load too light for two (under 6 requests in flight, or one
    /// connection) is handled completion by completion. A third, not less: at 50 HTTP/1.1
    /// connections over TLS, holding for 12 instead of 3 cut the system calls per request to a
    /// third and the sleeps by half, and took about a tenth off the client's CPU per request,
    /// with a mean hold of some 50 µs in a latency of 550 µs; 16 instead of 12 then gave nginx
    /// larger batches and fewer wake-ups of this thread to pay for, 5% more requests a second
    /// from its core, and the median latency fell (bench/README.md). In flight, not
    /// the connections' capacity: an open-model run at a moderate rate has most connections idle, and holding
    /// for completions that are not coming would only delay those that are.
    fn batch_target(&self) -> usize {
        let in_flight = usize::try_from(self.in_flight).unwrap_or(usize::MAX);
        (in_flight / 3).min(self.open).min(32)
    }

    /// With a completion ready, holds out (at most `max_hold`, never past `until`) for a batch
    /// worth handling: fewer, larger sends and receives, and fewer wake-ups, for every request.
    /// Returns how long it held: what the completions ready before it waited on top of
    /// their latency.
    fn hold(&mut self, until: Instant) -> io::Result<Duration> {
        let batch = self.batch_target();
        let ready = self.uring.ready();
        if batch < 2 || ready == 0 || ready >= batch || self.shared.max_hold.is_zero() {
            return Ok(Duration::ZERO);
        }
        let start = Instant::now();
        let limit = self.shared.max_hold.min(until.saturating_duration_since(start));
        if limit.is_zero() {
            return Ok(Duration::ZERO);
        }
        self.uring.hold(batch, limit)?;
        Ok(start.elapsed())
    }

    /// Every response of the batch just handled was seen `held` later than it could have been:
    /// the client's own share of its latency, recorded beside it.
    fn note_hold(&mut self, held: Duration) {
        let n = std::mem::take(&mut self.batch_responses);
        if n == 0 {
            return;
        }
        let hold = &mut self.stats.histograms.hold;
        if held.is_zero() {
            // Nothing held is recorded as 0 (a sample's floor is 1 ns): always in range.
            hold.saturating_record_n(0, n);
        } else {
            Stats::record_n(&mut self.stats.counters, hold, held, n);
        }
    }

    /// Starts the load once the gate's instant has come: parked connections send their first
    /// requests (in the open model, those due), the others connect.
    fn try_release(&mut self, now: Instant) -> io::Result<()> {
        let Some(now) = self.lifecycle.try_release(now) else { return Ok(()) };
        self.schedule.start(now);
        if let Some(end) = self.lifecycle.end() {
            self.schedule.end_at(end);
        }
        if let Some(ramp) = &self.ramp {
            self.ramp_start = Some(now);
            self.open_allowed = ramp.open_at(Duration::ZERO);
            self.ramp_next = ramp.next_change(Duration::ZERO).map(|d| now + d);
        }
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.phase == Phase::Open {
                self.advance(i, now)?;
            } else if c.phase == Phase::Idle && c.pending_ops == 0 && i < self.open_allowed {
                self.start_conn(i, now)?;
            }
        }
        self.flush_dirty()
    }

    /// The ramp's count changed: connections now allowed are opened; those no longer allowed
    /// take no new request and close once what they have in flight is answered (at once when
    /// idle; one still being set up closes when it is, its claimed request unused).
    fn follow_ramp(&mut self, now: Instant) -> io::Result<()> {
        let (Some(ramp), Some(start)) = (&self.ramp, self.ramp_start) else { return Ok(()) };
        let since = now.saturating_duration_since(start);
        let allowed = ramp.open_at(since).min(self.conns.len());
        self.ramp_next = ramp.next_change(since).map(|d| start + d);
        let before = std::mem::replace(&mut self.open_allowed, allowed);
        for i in allowed.min(before)..allowed.max(before) {
            let c = &self.conns[i];
            match c.phase {
                Phase::Idle if i < allowed && c.pending_ops == 0 => self.start_conn(i, now)?,
                Phase::Open if i >= allowed => self.advance(i, now)?,
                // Closing ones reopen as they complete if allowed; ones being set up go on.
                _ => {}
            }
        }
        self.flush_dirty()
    }

    /// Tells the collector once no connection is still being set up.
    fn check_ready(&mut self) {
        if self.conns.iter().any(|c| matches!(c.phase, Phase::Connecting | Phase::Handshaking | Phase::SettingUp)) {
            return;
        }
        self.lifecycle.ready(self.open as u64, self.connect_failures);
    }

    fn must_end(&self, now: Instant) -> bool {
        self.lifecycle.must_end(now)
            // Not one connection ever came up: the target is not there; say so rather than spin.
            || (self.connects_ok == 0 && self.connect_failures >= self.conns.len() as u64)
    }

    fn finished(&self) -> bool {
        self.schedule.is_spent() && self.conns.iter().all(|c| c.phase == Phase::Idle)
    }

    /// Open model: the requests due by `now` go to the connections waiting, longest first; a
    /// request due with none waiting is counted as blocked (the next connection freed takes it).
    /// Once no request will ever be due again, the waiting connections are closed.
    fn dispatch_due(&mut self, now: Instant) -> io::Result<()> {
        let exhausted = self.schedule.next_due().is_none();
        while self.waiting_count > 0 && (exhausted || self.schedule.next_due().is_some_and(|d| d <= now)) {
            let Some(i) = self.waiting.pop_front() else { break };
            if !self.conns[i].waiting {
                continue;
            }
            self.conns[i].waiting = false;
            self.waiting_count -= 1;
            self.advance(i, now)?;
        }
        if self.waiting_count == 0 && self.schedule.next_due().is_some_and(|d| d <= now) {
            self.stats.counters.blocked += self.schedule.mark_blocked(now);
        }
        self.flush_dirty()
    }

    /// Connection `i` has room and waits for the next request due (`room`), or no longer does.
    fn set_waiting(&mut self, i: usize, room: bool) {
        let c = &mut self.conns[i];
        if c.waiting == room {
            return;
        }
        c.waiting = room;
        if !room {
            // Its entry stays on the list, stale, until popped or swept.
            self.waiting_count -= 1;
            return;
        }
        self.waiting_count += 1;
        self.waiting.push_back(i);
        if self.waiting.len() > 2 * self.conns.len() + 16 {
            // Stale entries pile up when connections fill and free between dispatches: sweep
            // them, keeping one entry per waiting connection.
            self.waiting.clear();
            let conns = &self.conns;
            self.waiting.extend((0..conns.len()).filter(|&j| conns[j].waiting));
        }
    }

    /// Handles a batch of completions, then writes what it left to send.
    fn drain(&mut self) -> io::Result<()> {
        self.uring.completions(&mut self.completions);
        if self.stamped() {
            self.clock = ArrivalClock::read();
        }
        for k in 0..self.completions.len() {
            let (data, res, flags) = self.completions[k];
            self.complete(data, res, flags)?;
        }
        self.bufs.publish();
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

    /// Connections whose deadline has come: handshakes out of time, sessions' timers. The
    /// rest give the next deadline.
    fn expire_deadlines(&mut self, now: Instant) -> io::Result<()> {
        self.next_deadline = None;
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            match c.phase {
                Phase::Handshaking => match c.handshake_by {
                    Some(d) if now >= d => {
                        let why = format!("TLS handshake not done within {:?}", self.shared.connect_timeout);
                        self.fail(i, ErrorKind::Connect, why.into());
                        self.begin_close(i)?;
                    }
                    d => self.note_deadline(d),
                },
                Phase::SettingUp | Phase::Open => {
                    let Some(session) = c.session.as_mut() else { continue };
                    match session.poll_timeout() {
                        Some(d) if now >= d => {
                            session.handle_timeout(now, &mut self.events);
                            self.advance(i, now)?;
                        }
                        d => self.note_deadline(d),
                    }
                }
                _ => {}
            }
        }
        self.flush_dirty()
    }

    fn note_deadline(&mut self, deadline: Option<Instant>) {
        if let Some(d) = deadline
            && self.next_deadline.is_none_or(|n| d < n)
        {
            self.next_deadline = Some(d);
        }
    }

    /// Idle connections get another try: one left idle by a failed socket(), or one that found
    /// the budget spent before requests came back into it (refused ones, to be sent again).
    fn retry_idle(&mut self, now: Instant) -> io::Result<()> {
        if !self.lifecycle.released() {
            return Ok(());
        }
        for i in 0..self.open_allowed {
            if self.conns[i].phase == Phase::Idle && self.conns[i].pending_ops == 0 {
                self.start_conn(i, now)?;
            }
        }
        self.flush_dirty()
    }

    fn start_conn(&mut self, i: usize, now: Instant) -> io::Result<()> {
        if !self.schedule.claim() {
            return Ok(());
        }
        let c = &mut self.conns[i];
        c.claimed = true;
        c.generation = c.generation.wrapping_add(1);
        c.connect_started = now;
        c.handshake_by = None;
        c.peer_closed = false;
        if self.udp {
            return self.start_udp_conn(i, now);
        }
        let fd = match new_socket(&self.shared.addr, self.stamped()) {
            Ok(fd) => fd,
            Err(e) => {
                self.setup_failed(i, ErrorKind::Connect, format!("socket: {e}").into());
                return Ok(());
            }
        };
        let registered = self.uring.register_socket(i, fd);
        // SAFETY: fd came from socket() above; the registered table keeps its own reference.
        unsafe { libc::close(fd) };
        registered?;
        let c = &mut self.conns[i];
        c.pending_ops += 2;
        c.phase = Phase::Connecting;
        let (sockaddr, len) = (&raw const self.shared.sockaddr.0, self.shared.sockaddr.1);
        // SAFETY: the address lives in `shared`, which outlives the ring.
        unsafe { self.uring.connect(i, c.generation, sockaddr.cast(), len) }
    }

    /// A QUIC connection: its UDP socket is connected at once, its receive armed, and its
    /// session starts the handshake, whose datagrams leave with the batch's sends.
    fn start_udp_conn(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let gro = self.shared.udp_buffer >= GRO_BUF_SIZE;
        if let Err(e) = udp::open_connected(&mut self.uring, i, &self.shared.addr, gro) {
            self.setup_failed(i, ErrorKind::Connect, format!("UDP socket: {e}").into());
            return Ok(());
        }
        let c = &mut self.conns[i];
        c.udp_send = Some(UdpSend::new());
        c.sends_in_flight = 0;
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
            self.bufs.push(bid);
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

    fn on_connect(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        if self.conns[i].phase != Phase::Connecting {
            // The run stopped while connecting: the close is already under way.
            return Ok(());
        }
        if res < 0 {
            let why = if -res == libc::ECANCELED {
                format!("connect timed out after {:?}", self.shared.connect_timeout)
            } else {
                os_error(res)
            };
            self.setup_failed(i, ErrorKind::Connect, why.into());
            return self.begin_close(i);
        }
        self.arm_recv(i)?;
        let Some((config, name)) = &self.shared.tls else { return self.connected(i, now) };
        match TlsSession::new(config, name) {
            Ok(session) => {
                let c = &mut self.conns[i];
                c.tls = Some(Box::new(session));
                c.phase = Phase::Handshaking;
                c.handshake_by = c.connect_started.checked_add(self.shared.connect_timeout);
                let by = c.handshake_by;
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
    fn connected(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        let negotiated = match &c.tls {
            Some(tls) => Negotiated::Tls(tls.alpn()),
            None => Negotiated::Tcp,
        };
        match Session::new(&self.shared.session, negotiated, c.connect_started) {
            Ok(session) => {
                c.session = Some(session);
                c.phase = Phase::SettingUp;
                c.handshake_by = None;
                self.advance(i, now)
            }
            Err(why) => {
                self.setup_failed(i, ErrorKind::Tls, why);
                self.begin_close(i)
            }
        }
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
        // Beyond the ramp's count, no new request: it closes once idle.
        if released && !c.peer_closed && i < self.open_allowed {
            let mut units = Units::new(&mut c.claimed, &mut self.schedule, &mut self.stats);
            session.start_requests(now, &mut units, &mut self.events);
            room = units.found_none_due();
            self.in_flight += u64::from(units.taken());
            if !self.events.is_empty() {
                self.count_events(i);
            }
        }
        self.set_waiting(i, room);
        let c = &self.conns[i];
        let Some(session) = &c.session else { return Ok(()) };
        if session.must_close() || (released && session.is_idle() && !room) {
            return self.begin_close(i);
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

    /// The connection is set up: counted, and its connect time recorded.
    fn established(&mut self, i: usize, now: Instant) {
        self.connects_ok += 1;
        self.stats.counters.connects += 1;
        let started = self.conns[i].connect_started;
        Stats::record(
            &mut self.stats.counters,
            &mut self.stats.histograms.connect,
            now.saturating_duration_since(started),
        );
        self.conns[i].phase = Phase::Open;
        self.open += 1;
    }

    /// Counts what the session of `i` reported.
    fn count_events(&mut self, i: usize) {
        let mut events = std::mem::take(&mut self.events);
        // Recorded a run of equal spans at a time (a receive's responses share an arrival).
        let (mut ttfb, mut latency, mut service) = (Spans::default(), Spans::default(), Spans::default());
        for event in events.drain(..) {
            match event {
                Event::FirstByte { sent_at, at } => {
                    ttfb.add(sent_at, at, &mut self.stats.counters, &mut self.stats.histograms.ttfb);
                }
                Event::Response { status, due, sent_at, at } => {
                    self.refused_in_a_row = 0;
                    self.batch_responses += 1;
                    self.in_flight = self.in_flight.saturating_sub(1);
                    let counters = &mut self.stats.counters;
                    counters.ok += 1;
                    counters.status(status);
                    let h = &mut self.stats.histograms;
                    latency.add(due, at, counters, &mut h.latency);
                    if self.open_model {
                        service.add(sent_at, at, counters, &mut h.service);
                    }
                }
                Event::RetryAfter { status, value } => self.stats.counters.retry_after.record(status, value),
                Event::Refused(n) => {
                    self.in_flight = self.in_flight.saturating_sub(n);
                    self.refused(n);
                }
                Event::Failed { kind, n, why } => {
                    self.in_flight = self.in_flight.saturating_sub(n);
                    self.count_errors(kind, n, why);
                }
                Event::SetupFailed { kind, why } => self.setup_failed(i, kind, why),
                Event::Limited(limit) => {
                    self.stream_limit = Some(self.stream_limit.map_or(limit, |l| l.min(limit)));
                }
                Event::DroppedPackets(n) => self.stats.counters.dropped_packets += n,
            }
        }
        let (counters, h) = (&mut self.stats.counters, &mut self.stats.histograms);
        ttfb.flush(counters, &mut h.ttfb);
        latency.flush(counters, &mut h.latency);
        service.flush(counters, &mut h.service);
        self.events = events;
    }

    /// Requests the server declined unprocessed: they go back into the budget to be sent again,
    /// unless the server has declined everything for a while; then they fail, so that a server
    /// refusing every request cannot keep a `-n` run going forever.
    fn refused(&mut self, n: u64) {
        self.refused_in_a_row += n;
        if self.refused_in_a_row > REFUSED_IN_A_ROW {
            let why = format!(
                "the server declined over {REFUSED_IN_A_ROW} requests in a row unprocessed; they are no longer sent again"
            );
            self.count_errors(ErrorKind::Reset, n, why.into());
            return;
        }
        self.stats.counters.refused += n;
        self.schedule.give_back(n);
    }

    /// `n` requests failed for one reason.
    fn count_errors(&mut self, kind: ErrorKind, n: u64, why: Why) {
        if n == 0 {
            return;
        }
        self.stats.counters.add_errors(kind, n);
        if !self.error_samples.iter().any(|(k, _)| *k == kind) {
            self.error_samples.push((kind, why.into_owned()));
        }
    }

    /// Connection `i` could not be set up: a failed connect, and the request it was opened for
    /// fails as `kind`.
    fn setup_failed(&mut self, i: usize, kind: ErrorKind, why: Why) {
        self.connect_failures += 1;
        if std::mem::take(&mut self.conns[i].claimed) {
            self.schedule.drop_claim();
            self.count_errors(kind, 1, why);
        }
    }

    /// The transport of `i` failed, and with it every request in flight on it (or its set-up).
    /// The caller closes it.
    fn fail(&mut self, i: usize, kind: ErrorKind, why: Why) {
        match self.conns[i].session.as_mut() {
            Some(session) => {
                session.fail(kind, why, &mut self.events);
                self.count_events(i);
            }
            None => self.setup_failed(i, kind, why),
        }
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let with_header = self.udp || self.stamped();
        let c = &mut self.conns[i];
        c.recv_armed = true;
        c.pending_ops += 1;
        if with_header {
            // SAFETY: the header lives in `self.recvmsg` for the whole loop, which drains every
            // operation before it drops.
            return unsafe { self.uring.recvmsg_multishot(i, c.generation, self.bufs.group, self.recvmsg.header()) };
        }
        self.uring.recv_multishot(i, c.generation, self.bufs.group)
    }

    /// TCP receives carry their arrival time (RECVMSG with SO_TIMESTAMPNS) in the open model,
    /// whose loop lets responses wait for the next send (`sleeps_through_responses`). The
    /// closed model wakes for every batch of responses anyway, and there the timestamps cost
    /// about a tenth more CPU per request (RECVMSG, and a clock read per packet on both sides,
    /// the server's included, since the kernel stamps every packet once one socket asks).
    fn stamped(&self) -> bool {
        self.open_model && !self.udp
    }

    /// Sends the session's output and TLS records unless a send is already in flight (its
    /// completion calls this again).
    fn flush(&mut self, i: usize) -> io::Result<()> {
        if self.udp {
            return self.flush_datagrams(i);
        }
        let c = &mut self.conns[i];
        if c.sending {
            return Ok(());
        }
        c.send_buf.clear();
        c.send_off = 0;
        let mut from_request = false;
        // The output is one HTTP/1.1 request (over TLS: its records, and any the receive
        // queued before them): a candidate for a quiet send.
        let mut one_request = false;
        if let Some(session) = c.session.as_mut() {
            match c.tls.as_mut() {
                Some(tls) => match session.poll_transmit(&mut self.plain_out) {
                    Transmit::Request => {
                        tls.send(&self.shared.request);
                        one_request = true;
                    }
                    Transmit::Bytes => {
                        tls.send(&self.plain_out);
                        self.plain_out.clear();
                    }
                    Transmit::Nothing | Transmit::Datagrams { .. } => {}
                },
                None => {
                    from_request = session.poll_transmit(&mut c.send_buf) == Transmit::Request;
                    one_request = from_request;
                }
            }
        }
        if let Some(tls) = &mut c.tls {
            tls.take_ciphertext(&mut c.send_buf);
        }
        if !from_request && c.send_buf.is_empty() {
            if let Some(session) = c.session.as_mut() {
                session.written();
            }
            return Ok(());
        }
        c.send_from_request = from_request;
        self.submit_send(i, one_request)
    }

    /// UDP: the session's next batch of datagrams goes out as one GSO send (or one send a
    /// datagram where GSO is off), unless the last batch is still being sent (its completion
    /// calls this again). QUIC's timers move when it sends, so its deadline is noted after.
    fn flush_datagrams(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.sending {
            return Ok(());
        }
        let Some(session) = c.session.as_mut() else { return Ok(()) };
        let transmit = session.poll_datagrams(Instant::now(), &mut c.send_buf);
        let deadline = session.poll_timeout();
        self.note_deadline(deadline);
        let Transmit::Datagrams { segment_size } = transmit else { return Ok(()) };
        let c = &mut self.conns[i];
        c.segment_size = segment_size;
        self.stats.counters.bytes_sent += c.send_buf.len() as u64;
        self.submit_datagrams(i)
    }

    fn submit_datagrams(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Some(udp) = c.udp_send.as_mut() else { return Ok(()) };
        // SAFETY: `send_buf` and the boxed parts of `udp_send` are left alone while sends are in
        // flight (`sending`) and until every operation on the slot has completed.
        let queued = unsafe { udp.send(&mut self.uring, i, c.generation, &c.send_buf, c.segment_size)? };
        c.sending = queued > 0;
        c.sends_in_flight = queued;
        c.pending_ops += queued;
        Ok(())
    }

    /// UDP: one send of the batch completed. A kernel refusing GSO gets the same batch again,
    /// datagram by datagram; a refused port fails the connection; any other failure lost a
    /// datagram, which QUIC repairs like one lost on the way.
    fn on_datagrams_sent(&mut self, i: usize, res: i32) -> io::Result<()> {
        let c = &mut self.conns[i];
        c.sends_in_flight = c.sends_in_flight.saturating_sub(1);
        if c.sends_in_flight == 0 {
            c.sending = false;
        }
        if !matches!(c.phase, Phase::Open | Phase::SettingUp) {
            return Ok(());
        }
        if res < 0 {
            if c.udp_send.as_mut().is_some_and(|u| u.refused(res)) {
                return self.submit_datagrams(i);
            }
            if -res == libc::ECONNREFUSED {
                return self.udp_refused(i);
            }
        }
        if self.conns[i].sending { Ok(()) } else { self.flush_datagrams(i) }
    }

    /// The target's UDP port answered with ICMP port unreachable: nothing listens there.
    fn udp_refused(&mut self, i: usize) -> io::Result<()> {
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

    /// Sends the connection's output from `send_off` on; `one_request` says it is a whole
    /// HTTP/1.1 request (see `flush`).
    fn submit_send(&mut self, i: usize, one_request: bool) -> io::Result<()> {
        let c = &mut self.conns[i];
        let bytes: &[u8] = if c.send_from_request { &self.shared.request } else { &c.send_buf };
        let rest = &bytes[c.send_off.min(bytes.len())..];
        if one_request && c.send_off == 0 && rest.len() <= QUIET_SEND_MAX {
            // One request at a time never fills the socket buffer, so the kernel takes all of
            // a small request at submit; MSG_WAITALL covers the rest, and only a failure posts
            // a completion. That is one completion per request fewer on the hot path.
            self.stats.counters.bytes_sent += rest.len() as u64;
            if let Some(session) = c.session.as_mut() {
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
            return unsafe { self.uring.send_quiet(i, c.generation, rest) };
        }
        c.sending = true;
        c.pending_ops += 1;
        // SAFETY: the shared request outlives the ring, and `send_buf` is left alone while a
        // send is in flight (`sending`) and until every operation on the slot has completed.
        unsafe { self.uring.send(i, c.generation, rest) }
    }

    fn on_send(&mut self, i: usize, res: i32) -> io::Result<()> {
        if self.udp {
            return self.on_datagrams_sent(i, res);
        }
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
        c.send_off += res as usize;
        let len = if c.send_from_request { self.shared.request.len() } else { c.send_buf.len() };
        if c.send_off < len { self.submit_send(i, false) } else { self.flush(i) }
    }

    fn on_recv(&mut self, i: usize, res: i32, flags: u32, buf: Option<u16>, now: Instant) -> io::Result<()> {
        if !matches!(self.conns[i].phase, Phase::Open | Phase::Handshaking | Phase::SettingUp) {
            return Ok(());
        }
        if res < 0 {
            return match -res {
                // The buffer ring ran dry; buffers come back as this batch is handled (UDP's
                // datagrams wait in the socket meanwhile).
                libc::ENOBUFS => self.rearm(i),
                libc::ECANCELED => Ok(()),
                libc::ECONNREFUSED if self.udp => self.udp_refused(i),
                _ => {
                    if self.conns[i].phase == Phase::Handshaking {
                        self.fail(i, ErrorKind::Tls, format!("during the TLS handshake: {}", os_error(res)).into());
                    } else {
                        self.fail(i, ErrorKind::Reset, os_error(res).into());
                    }
                    self.begin_close(i)
                }
            };
        }
        if self.udp {
            if let Some(bid) = buf {
                self.on_datagrams(i, bid, res as usize, now)?;
            }
            return if !cqueue::more(flags) { self.rearm(i) } else { Ok(()) };
        }
        if res == 0 && !self.stamped() {
            return self.on_eof(i, now);
        }
        // A receive that read something names its buffer.
        let Some(bid) = buf else { return Ok(()) };
        let (data, arrived) = if self.stamped() {
            // A buffer without the kernel's layout cannot happen.
            let Some(received) = self.recvmsg.parse(self.bufs.bytes(bid, res as usize)) else {
                return Ok(());
            };
            self.arrivals_stamped |= received.timestamp.is_some();
            // The session sees the bytes as of their arrival: a response's latency ends there.
            (received.payload, self.clock.instant(received.timestamp, now))
        } else {
            (self.bufs.bytes(bid, res as usize), now)
        };
        if data.is_empty() {
            return self.on_eof(i, now);
        }
        self.stats.counters.bytes_received += data.len() as u64;
        if self.conns[i].tls.is_some() {
            // TLS opens records where they lie.
            // SAFETY: `data` is not used again, and `bid` goes back to the ring only after
            // this completion is handled.
            let data = unsafe { self.bufs.bytes_mut(bid, data) };
            self.on_ciphertext(i, data, arrived, now)?;
        } else {
            self.on_plaintext(i, data, arrived, now)?;
        }
        if !cqueue::more(flags) { self.rearm(i) } else { Ok(()) }
    }

    /// UDP: one RECVMSG completion, a datagram or a GRO batch, for the session.
    fn on_datagrams(&mut self, i: usize, bid: u16, len: usize, now: Instant) -> io::Result<()> {
        let buf = self.bufs.bytes(bid, len);
        // A buffer without the kernel's layout cannot happen; one cut short (MSG_TRUNC, which
        // buffers of a whole GRO batch never see) is counted and its start is still given to
        // QUIC, which drops what does not decrypt and repairs it as a loss.
        let Some(received) = self.recvmsg.parse(buf) else { return Ok(()) };
        self.stats.counters.bytes_received += received.payload.len() as u64;
        self.stats.counters.truncated += u64::from(received.truncated);
        let c = &mut self.conns[i];
        let Some(session) = c.session.as_mut() else { return Ok(()) };
        session.receive_datagrams(received.payload, received.segment_size, now, &mut self.events);
        self.advance(i, now)
    }

    fn rearm(&mut self, i: usize) -> io::Result<()> {
        let c = &self.conns[i];
        if !c.recv_armed && matches!(c.phase, Phase::Open | Phase::Handshaking | Phase::SettingUp) {
            self.arm_recv(i)
        } else {
            Ok(())
        }
    }

    /// Received TLS records: their plaintext for the session, as of `arrived` (see `on_plaintext`).
    fn on_ciphertext(&mut self, i: usize, data: &mut [u8], arrived: Instant, now: Instant) -> io::Result<()> {
        let mut plain = std::mem::take(&mut self.plain);
        plain.clear();
        let Some(tls) = self.conns[i].tls.as_mut() else { return Ok(()) };
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
    fn on_plaintext(&mut self, i: usize, data: &[u8], arrived: Instant, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        if !matches!(c.phase, Phase::Open | Phase::SettingUp) {
            return Ok(());
        }
        let Some(session) = c.session.as_mut() else { return Ok(()) };
        session.receive(data, arrived, &mut self.events);
        self.advance(i, now)
    }

    /// The peer closed the connection.
    fn on_eof(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        match c.phase {
            Phase::Handshaking => self.fail(i, ErrorKind::Tls, "connection closed during the TLS handshake".into()),
            Phase::SettingUp | Phase::Open => {
                if let Some(session) = c.session.as_mut() {
                    session.peer_closed(now, &mut self.events);
                    self.count_events(i);
                }
            }
            _ => {}
        }
        self.begin_close(i)
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
        if self.udp {
            self.say_goodbye(i)?;
        }
        let c = &mut self.conns[i];
        c.phase = Phase::Closing;
        c.handshake_by = None;
        c.tls = None;
        c.session = None;
        c.pending_ops += super::uring::CLOSE_COMPLETIONS;
        self.uring.cancel_and_close(i, c.generation)
    }

    /// UDP: a QUIC connection being closed sends its CONNECTION_CLOSE first, so the server can
    /// let go of it at once rather than at its idle timeout (a GOAWAY server's connections, one
    /// every few requests, would pile up there). It is queued before the cancel and close, and a
    /// UDP send completes at submit, so it leaves; if a send is still in flight it is skipped.
    fn say_goodbye(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.sending {
            return Ok(());
        }
        let Some(session) = c.session.as_mut() else { return Ok(()) };
        let now = Instant::now();
        session.close(now);
        let Transmit::Datagrams { segment_size } = session.poll_datagrams(now, &mut c.send_buf) else { return Ok(()) };
        c.segment_size = segment_size;
        self.stats.counters.bytes_sent += c.send_buf.len() as u64;
        self.submit_datagrams(i)
    }

    /// The load is over: requests in flight are counted as aborted, every socket is closed, and
    /// the loop waits (briefly) until the kernel is done with every buffer.
    /// Returns false when the kernel did not let go of everything in time.
    fn drain_and_close(&mut self) -> io::Result<bool> {
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
        let limit = Instant::now() + DRAIN_LIMIT;
        while self.conns.iter().any(|c| c.pending_ops > 0) {
            let now = Instant::now();
            if now >= limit {
                return Ok(false);
            }
            self.uring.wait(now, limit)?;
            self.drain()?;
        }
        Ok(true)
    }
}

fn os_error(res: i32) -> String {
    io::Error::from_raw_os_error(-res).to_string()
}
