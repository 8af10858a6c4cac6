//! One thread's event loop: submit, wait for a batch of completions, feed the bytes to the
//! codecs, submit what they produced.
//!
//! Every socket is a registered (fixed) file whose slot is its connection's index. Each
//! connection has one multishot receive into the thread's provided-buffer ring, at most one
//! send in flight, and a connect linked to a timeout. Closing cancels whatever is still in
//! flight on the slot and then closes it; the slot is reused only after every operation on it
//! has completed, so no operation ever points at memory that changed under it.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use io_uring::types::{CancelBuilder, Fixed, SubmitArgs, Timespec};
use io_uring::{CompletionQueue, IoUring, SubmissionQueue, Submitter, cqueue, opcode, squeue};

use super::buf_ring::BufRing;
use super::conn::{Conn, Phase};
use super::{Shared, ThreadDone, ThreadMsg, ThreadPlan};
use crate::h1::Response;
use crate::h2::conn::{Connection as H2Connection, Event as H2Event};
use crate::h2::frame::code as h2_code;
use crate::ring::build_ring;
use crate::stats::{ErrorKind, Stats};
use crate::tls::{self, TlsSession};

/// Receive buffers: small, since benchmark responses are small and RSS counts.
const BUF_SIZE: usize = 4096;
/// How often deadlines are checked and the stop flag is read.
const CHECK_EVERY: Duration = Duration::from_millis(50);
/// How often a thread waiting for its start looks at the gate: a controller sets the start at
/// least this far ahead.
const GATE_CHECK_EVERY: Duration = Duration::from_millis(5);
/// The last stretch before the start instant is spent spinning on the clock rather than
/// asleep: a sleeping thread wakes late by its timer slack plus however long the scheduler
/// takes to run it (milliseconds when another task holds the core), a spinning one is on the
/// CPU already. This costs at most this much CPU per thread per run.
const SPIN_BEFORE_START: Duration = Duration::from_millis(1);
/// How long the kernel may hold out for a full batch of completions (Linux 6.12+).
const MIN_WAIT_USEC: u32 = 50;
/// Requests up to this size go out as quiet sends: far below the smallest socket send buffer.
const QUIET_SEND_MAX: usize = 4096;
/// HTTP/2 requests a server may decline unprocessed, with no response in between, before
/// declined ones count as errors instead of being sent again.
const REFUSED_IN_A_ROW: u64 = 1000;
/// How long the final cancellation may take before the loop gives up on a clean exit.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Connect = 1,
    ConnectTimeout = 2,
    Recv = 3,
    Send = 4,
    Cancel = 5,
    Close = 6,
    /// A send whose success posts no completion (see `submit_send`).
    SendQuiet = 7,
}

fn token(op: Op, conn: usize, generation: u16) -> u64 {
    (op as u64) << 48 | u64::from(generation) << 32 | conn as u64
}

fn untoken(data: u64) -> Option<(Op, usize, u16)> {
    let op = match data >> 48 {
        1 => Op::Connect,
        2 => Op::ConnectTimeout,
        3 => Op::Recv,
        4 => Op::Send,
        5 => Op::Cancel,
        6 => Op::Close,
        7 => Op::SendQuiet,
        _ => return None,
    };
    Some((op, (data & 0xffff_ffff) as usize, (data >> 32) as u16))
}

pub(super) struct Loop<'r> {
    // The ring's parts, held for the whole run so the registered ring fd is used by every
    // enter (the registration lives in the Submitter).
    submitter: Submitter<'r>,
    sq: SubmissionQueue<'r>,
    cq: CompletionQueue<'r>,
    bufs: BufRing,
    conns: Vec<Conn>,
    shared: Arc<Shared>,
    plan: ThreadPlan,
    /// Everything measured since the last interval was handed out.
    stats: Stats,
    /// Requests this thread may still start; None means no limit.
    budget: Option<u64>,
    /// Decrypted bytes of the receive being handled.
    plain: Vec<u8>,
    cqes: Vec<(u64, i32, u32)>,
    connect_timespec: Timespec,
    tick: u32,
    next_tick: Instant,
    next_check: Instant,
    connects_ok: u64,
    connect_failures: u64,
    stopping: bool,
    /// The start gate opened and the load is on; before, connections open and park.
    released: bool,
    /// Every connection was tried once and the collector was told.
    ready_sent: bool,
    /// When a timed run ends, from the moment this thread started.
    deadline: Option<Instant>,
    /// Connections in Phase::Open, kept so the wait need not count them.
    open: usize,
    error_samples: Vec<(ErrorKind, String)>,
    /// HTTP/2 connections with output to write once this batch of completions is handled.
    dirty: Vec<usize>,
    /// HTTP/2 events of the receive being handled (reused).
    h2_events: Vec<H2Event>,
    /// HTTP/2 session output on its way into TLS (reused).
    h2_plain: Vec<u8>,
    /// The lowest SETTINGS_MAX_CONCURRENT_STREAMS seen below the streams asked for.
    stream_limit: Option<u32>,
    /// HTTP/2 requests declined unprocessed since the last response.
    refused_in_a_row: u64,
}

impl<'r> Loop<'r> {
    /// The ring for `connections` connections: room for a few operations each, within the
    /// kernel's limits (asking for more fails the set-up with EINVAL).
    ///
    /// Beyond about 16,000 connections on a thread, more operations can be in flight than the
    /// completion queue holds. Nothing is lost then: the kernel keeps the completions that do
    /// not fit on its overflow list (IORING_FEAT_NODROP, Linux 5.5+) and moves them into the
    /// queue as `drain` makes room, on the next wait, which every turn of the loop does. A
    /// multishot receive is never overflowed: when its completion does not fit, the kernel ends
    /// it with that completion (data included, no MORE flag), and `on_recv` arms a new one. Only
    /// if the kernel cannot allocate an overflow entry are completions dropped, and then the
    /// next wait fails (EBADR) and so does the thread: an error, not a count gone wrong.
    pub(super) fn ring(connections: usize) -> io::Result<IoUring> {
        // IORING_MAX_ENTRIES and IORING_MAX_CQ_ENTRIES.
        const SQ_MAX: usize = 32_768;
        const CQ_MAX: usize = 2 * SQ_MAX;
        let entries = connections.saturating_mul(4).saturating_add(64).next_power_of_two().min(SQ_MAX);
        build_ring(entries as u32, (entries * 4).min(CQ_MAX) as u32).map(|(ring, _)| ring)
    }

    pub(super) fn new(ring: &'r mut IoUring, shared: Arc<Shared>, plan: ThreadPlan) -> io::Result<Self> {
        let n = plan.connections.max(1);
        let entries = ring.params().sq_entries();
        let (mut submitter, sq, cq) = ring.split();
        // Not fatal: without it each enter looks the ring fd up, which only costs a little.
        let _ = submitter.register_ring_fd();
        submitter.register_files_sparse(n as u32)?;
        let buf_entries = (n * 2).next_power_of_two().clamp(64, 4096) as u16;
        let bufs = BufRing::new(&submitter, buf_entries, BUF_SIZE, 0)?;
        let now = Instant::now();
        let conns = (0..n).map(|_| Conn::new(now)).collect();
        Ok(Loop {
            submitter,
            sq,
            cq,
            bufs,
            conns,
            stats: Stats::new(),
            budget: plan.budget,
            plain: Vec::with_capacity(16 * 1024),
            cqes: Vec::with_capacity(entries as usize),
            connect_timespec: Timespec::from(shared.connect_timeout),
            tick: 1,
            next_tick: now + Duration::from_secs(1),
            next_check: now + CHECK_EVERY,
            connects_ok: 0,
            connect_failures: 0,
            stopping: false,
            released: false,
            ready_sent: false,
            deadline: None,
            open: 0,
            error_samples: Vec::new(),
            dirty: Vec::new(),
            h2_events: Vec::new(),
            h2_plain: Vec::new(),
            stream_limit: None,
            refused_in_a_row: 0,
            shared,
            plan,
        })
    }

    pub(super) fn run(mut self) -> io::Result<()> {
        let outcome = self.run_load();
        // Whatever ended the load, the kernel must let go of every buffer before it is freed.
        let clean = matches!(self.stop(), Ok(true));
        let ended = Instant::now();
        let rest = std::mem::take(&mut self.stats);
        let error_samples = std::mem::take(&mut self.error_samples);
        let cpu = super::thread_cpu_time();
        let thread = self.plan.index;
        let stream_limit = self.stream_limit;
        let done = ThreadDone { thread, rest, error_samples, ended, cpu, stream_limit };
        let _ = self.plan.tx.send(ThreadMsg::Done(done));
        if !clean {
            // Leak rather than free buffers the kernel may still write into.
            std::mem::forget(self);
        }
        outcome
    }

    fn run_load(&mut self) -> io::Result<()> {
        let now = Instant::now();
        self.try_release(now)?;
        if !self.released && self.shared.keepalive {
            // Open every connection now, so the first requests leave at the start instant.
            for i in 0..self.conns.len() {
                self.start_conn(i, now)?;
            }
        }
        loop {
            let now = Instant::now();
            if !self.released {
                self.try_release(now)?;
            }
            self.periodic(now)?;
            if !self.ready_sent {
                self.check_ready();
            }
            if self.should_stop(now) || self.finished() {
                return Ok(());
            }
            self.wait(now)?;
            self.drain()?;
        }
    }

    /// Starts the load once the gate's instant has come: parked connections send their first
    /// requests, the others connect.
    fn try_release(&mut self, mut now: Instant) -> io::Result<()> {
        let Some(at) = self.plan.gate.at() else { return Ok(()) };
        if now + SPIN_BEFORE_START < at {
            return Ok(());
        }
        while now < at {
            std::hint::spin_loop();
            now = Instant::now();
        }
        self.released = true;
        self.deadline = self.plan.duration.map(|d| now + d);
        self.next_tick = now + Duration::from_secs(1);
        let _ = self.plan.tx.send(ThreadMsg::Started { thread: self.plan.index, at: now });
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.parked {
                c.parked = false;
                if c.h2.is_some() {
                    self.start_streams(i, now)?;
                    self.flush(i)?;
                } else {
                    self.send_request(i, now)?;
                }
            } else if c.phase == Phase::Idle && c.pending_ops == 0 {
                self.start_conn(i, now)?;
            }
        }
        Ok(())
    }

    /// Tells the collector once no connection is still being set up.
    fn check_ready(&mut self) {
        if self.conns.iter().any(|c| matches!(c.phase, Phase::Connecting | Phase::Handshaking | Phase::H2Preface)) {
            return;
        }
        self.ready_sent = true;
        let (connected, failed) = (self.open as u64, self.connect_failures);
        let _ = self.plan.tx.send(ThreadMsg::Ready { thread: self.plan.index, connected, failed });
    }

    fn should_stop(&self, now: Instant) -> bool {
        self.plan.stop.load(Ordering::Relaxed)
            || self.deadline.is_some_and(|d| now >= d)
            // Not one connection ever came up: the target is not there; say so rather than spin.
            || (self.connects_ok == 0 && self.connect_failures >= self.conns.len() as u64)
    }

    fn finished(&self) -> bool {
        self.budget == Some(0) && self.conns.iter().all(|c| c.phase == Phase::Idle)
    }

    /// Submits what is queued and waits for a batch of completions, or for the next timer.
    fn wait(&mut self, now: Instant) -> io::Result<()> {
        let mut until = self.next_check;
        if self.released {
            until = until.min(self.next_tick);
        } else {
            let wake = self.plan.gate.at().map(|at| at.checked_sub(SPIN_BEFORE_START).unwrap_or(at));
            until = until.min(wake.unwrap_or(now + GATE_CHECK_EVERY));
        }
        if let Some(d) = self.deadline {
            until = until.min(d);
        }
        let ts = Timespec::from(until.saturating_duration_since(now).max(Duration::from_micros(1)));
        let mut want = 1;
        let mut args = SubmitArgs::new().timespec(&ts);
        if self.shared.min_wait {
            // Hold out for a share of the connections, but not for long: a completion is what
            // lets its connection send the next request.
            want = (self.open / 4).clamp(1, 8);
            args = args.min_wait_usec(MIN_WAIT_USEC);
        }
        self.enter(want, &args)
    }

    /// Submits what is queued and waits as `args` says; a timeout or a signal is not an error.
    fn enter(&mut self, want: usize, args: &SubmitArgs<'_, '_>) -> io::Result<()> {
        self.sq.sync();
        match self.submitter.submit_with_args(want, args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Hands what is queued to the kernel without waiting, to make room in the queue.
    fn submit_now(&mut self) -> io::Result<()> {
        self.sq.sync();
        self.submitter.submit()?;
        self.sq.sync();
        Ok(())
    }

    fn drain(&mut self) -> io::Result<()> {
        self.cqes.clear();
        self.cq.sync();
        self.cqes.extend((&mut self.cq).map(|c| (c.user_data(), c.result(), c.flags())));
        self.cq.sync();
        for k in 0..self.cqes.len() {
            let (data, res, flags) = self.cqes[k];
            self.complete(data, res, flags)?;
        }
        self.bufs.publish();
        // One write per HTTP/2 connection for everything this batch freed its streams to send.
        while let Some(i) = self.dirty.pop() {
            self.conns[i].dirty = false;
            self.flush(i)?;
        }
        Ok(())
    }

    /// Pushes two linked entries; they must reach the kernel in the same submit, or the link
    /// is lost.
    fn push_pair(&mut self, first: squeue::Entry, second: squeue::Entry) -> io::Result<()> {
        if self.sq.capacity() - self.sq.len() < 2 {
            self.submit_now()?;
        }
        self.push(first)?;
        self.push(second)
    }

    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        // SAFETY: every entry points at memory owned by `self` that outlives the operation:
        // the shared request or address, a connection's send buffer (left alone while
        // `pending_ops` is non-zero), or the connect timespec.
        while unsafe { self.sq.push(&sqe) }.is_err() {
            self.submit_now()?;
        }
        Ok(())
    }

    fn periodic(&mut self, now: Instant) -> io::Result<()> {
        if self.released && now >= self.next_tick {
            let delta = std::mem::take(&mut self.stats);
            let _ = self.plan.tx.send(ThreadMsg::Interval { thread: self.plan.index, tick: self.tick, delta });
            self.tick += 1;
            self.next_tick += Duration::from_secs(1);
        }
        if now >= self.next_check {
            self.next_check = now + CHECK_EVERY;
            let cutoff = self.shared.request_timeout.and_then(|t| now.checked_sub(t));
            for i in 0..self.conns.len() {
                if self.conns[i].deadline.is_some_and(|d| now >= d) {
                    self.expire(i)?;
                }
                if let (Some(cutoff), Some(h2)) = (cutoff, self.conns[i].h2.as_mut()) {
                    let expired = h2.expire(cutoff);
                    if expired > 0 {
                        let why = "no complete response within --timeout".to_string();
                        self.count_errors(ErrorKind::Timeout, u64::from(expired), why);
                        self.start_streams(i, now)?;
                        self.flush(i)?;
                    }
                }
                // A connection left idle by a failed socket() gets another try.
                if self.released && self.conns[i].phase == Phase::Idle && self.conns[i].pending_ops == 0 {
                    self.start_conn(i, now)?;
                }
            }
        }
        Ok(())
    }

    /// A request or handshake ran out of time.
    fn expire(&mut self, i: usize) -> io::Result<()> {
        match self.conns[i].phase {
            Phase::Handshaking => {
                let why = format!("TLS handshake not done within {:?}", self.shared.connect_timeout);
                self.connect_failures += 1;
                self.fail(i, ErrorKind::Connect, why);
            }
            Phase::H2Preface => {
                let why = format!("no HTTP/2 SETTINGS from the server within {:?}", self.shared.connect_timeout);
                self.fail(i, ErrorKind::Connect, why);
            }
            Phase::Open => self.fail(i, ErrorKind::Timeout, "no complete response within --timeout".into()),
            _ => {}
        }
        self.begin_close(i)
    }

    /// Takes one request from the budget. False when the budget is spent or the run stops.
    fn claim(&mut self) -> bool {
        if self.stopping {
            return false;
        }
        match &mut self.budget {
            None => true,
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }

    fn start_conn(&mut self, i: usize, now: Instant) -> io::Result<()> {
        if !self.claim() {
            return Ok(());
        }
        let c = &mut self.conns[i];
        c.outstanding = true;
        c.request_queued = false;
        c.generation = c.generation.wrapping_add(1);
        c.connect_started = now;
        c.deadline = None;
        c.peer_closed = false;
        c.scanner = Default::default();
        c.goaway_error = None;
        let fd = match new_socket(&self.shared.addr) {
            Ok(fd) => fd,
            Err(e) => {
                self.connect_failures += 1;
                self.fail(i, ErrorKind::Connect, format!("socket: {e}"));
                return Ok(());
            }
        };
        let registered = self.submitter.register_files_update(i as u32, &[fd]);
        // SAFETY: fd came from socket() above; the registered table keeps its own reference.
        unsafe { libc::close(fd) };
        registered?;
        let c = &mut self.conns[i];
        let g = c.generation;
        let (sockaddr, len) = (&raw const self.shared.sockaddr.0, self.shared.sockaddr.1);
        let connect = opcode::Connect::new(Fixed(i as u32), sockaddr.cast(), len)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(token(Op::Connect, i, g));
        let timeout =
            opcode::LinkTimeout::new(&self.connect_timespec).build().user_data(token(Op::ConnectTimeout, i, g));
        c.pending_ops += 2;
        c.phase = Phase::Connecting;
        self.push_pair(connect, timeout)
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
            // Before the start, a connection that failed waits for it rather than retrying.
            if self.released {
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
                io::Error::from_raw_os_error(-res).to_string()
            };
            self.connect_failures += 1;
            self.fail(i, ErrorKind::Connect, why);
            return self.begin_close(i);
        }
        self.arm_recv(i)?;
        if let Some((config, name)) = &self.shared.tls {
            match TlsSession::new(config, name) {
                Ok(session) => {
                    let c = &mut self.conns[i];
                    c.tls = Some(Box::new(session));
                    c.phase = Phase::Handshaking;
                    c.deadline = Some(c.connect_started + self.shared.connect_timeout);
                    self.flush(i)
                }
                Err(e) => {
                    self.fail(i, ErrorKind::Tls, tls::describe(&e));
                    self.begin_close(i)
                }
            }
        } else {
            self.connected(i, now)
        }
    }

    /// TCP is up and, for https, the handshake done.
    fn connected(&mut self, i: usize, now: Instant) -> io::Result<()> {
        if let (Some(_), Some(tls)) = (&self.shared.h2, &self.conns[i].tls)
            && tls.alpn() != Some(b"h2")
        {
            let chose = match tls.alpn() {
                Some(p) => format!("it chose {}", String::from_utf8_lossy(p)),
                None => "it chose no protocol".to_string(),
            };
            self.connect_failures += 1;
            let why = format!("the server does not offer HTTP/2 over TLS (ALPN: we offered h2, {chose})");
            self.fail(i, ErrorKind::Tls, why);
            return self.begin_close(i);
        }
        if let Some(h2) = &self.shared.h2 {
            // The preface and SETTINGS go out now, even before the start: they are set-up, and
            // the connection counts as made once the server's SETTINGS (with its stream limit)
            // are in, within the connect timeout.
            let session = H2Connection::new(h2.request_block.clone(), h2.body.clone(), h2.streams);
            let c = &mut self.conns[i];
            c.h2 = Some(Box::new(session));
            c.phase = Phase::H2Preface;
            c.deadline = Some(c.connect_started + self.shared.connect_timeout);
            return self.flush(i);
        }
        self.established(i, now)
    }

    /// The connection is set up (HTTP/2: the server's SETTINGS are in): counted, and then it
    /// sends its first request, or parks until the start.
    fn established(&mut self, i: usize, now: Instant) -> io::Result<()> {
        self.connects_ok += 1;
        self.stats.counters.connects += 1;
        let started = self.conns[i].connect_started;
        Stats::record(&mut self.stats.counters, &mut self.stats.histograms.connect, now - started);
        let c = &mut self.conns[i];
        c.phase = Phase::Open;
        c.deadline = None;
        self.open += 1;
        if c.h2.is_some() {
            c.parked = !self.released;
            return self.start_streams(i, now);
        }
        if self.released {
            return self.send_request(i, now);
        }
        let c = &mut self.conns[i];
        c.parked = true;
        c.deadline = None;
        Ok(())
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        let sqe = opcode::RecvMulti::new(Fixed(i as u32), self.bufs.group).build().user_data(token(
            Op::Recv,
            i,
            c.generation,
        ));
        c.recv_armed = true;
        c.pending_ops += 1;
        self.push(sqe)
    }

    /// Sends the run's request on connection `i`, whose budget unit is already claimed.
    fn send_request(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let head = self.shared.head;
        let timeout = self.shared.request_timeout;
        let c = &mut self.conns[i];
        c.scanner.start(head);
        c.request_queued = false;
        c.first_byte_seen = false;
        c.sent_at = now;
        c.deadline = timeout.map(|t| now + t);
        if let Some(tls) = &mut c.tls {
            tls.send(&self.shared.request);
            self.flush(i)
        } else {
            c.send_from_request = true;
            c.send_off = 0;
            self.submit_send(i)
        }
    }

    /// Sends pending HTTP/2 output and TLS records unless a send is already in flight (its
    /// completion calls this again).
    fn flush(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.sending {
            return Ok(());
        }
        c.send_buf.clear();
        c.send_off = 0;
        if let Some(h2) = &mut c.h2
            && h2.wants_write()
        {
            match &mut c.tls {
                Some(tls) => {
                    h2.take_output(&mut self.h2_plain);
                    tls.send(&self.h2_plain);
                    self.h2_plain.clear();
                }
                None => h2.take_output(&mut c.send_buf),
            }
        }
        if let Some(tls) = &mut c.tls {
            tls.take_ciphertext(&mut c.send_buf);
        }
        if c.send_buf.is_empty() {
            return Ok(());
        }
        c.send_from_request = false;
        self.submit_send(i)
    }

    fn submit_send(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        let bytes: &[u8] = if c.send_from_request { &self.shared.request } else { &c.send_buf };
        let rest = &bytes[c.send_off.min(bytes.len())..];
        if c.send_from_request && c.send_off == 0 && rest.len() <= QUIET_SEND_MAX {
            // One request at a time never fills the socket buffer, so the kernel takes all of
            // a small request at submit; MSG_WAITALL covers the rest, and only a failure posts
            // a completion. That is one completion per request fewer on the hot path.
            let sqe = opcode::Send::new(Fixed(i as u32), rest.as_ptr(), rest.len() as u32)
                .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(token(Op::SendQuiet, i, c.generation));
            c.request_queued = true;
            self.stats.counters.bytes_sent += rest.len() as u64;
            return self.push(sqe);
        }
        let sqe = opcode::Send::new(Fixed(i as u32), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(token(Op::Send, i, c.generation));
        c.sending = true;
        c.pending_ops += 1;
        c.request_queued |= c.phase == Phase::Open;
        self.push(sqe)
    }

    fn on_send(&mut self, i: usize, res: i32) -> io::Result<()> {
        self.conns[i].sending = false;
        if !matches!(self.conns[i].phase, Phase::Open | Phase::Handshaking | Phase::H2Preface) {
            return Ok(());
        }
        if res <= 0 {
            let why = if res == 0 { "send wrote nothing".to_string() } else { os_error(res) };
            self.fail(i, ErrorKind::Reset, why);
            return self.begin_close(i);
        }
        self.stats.counters.bytes_sent += res as u64;
        let c = &mut self.conns[i];
        c.send_off += res as usize;
        let len = if c.send_from_request { self.shared.request.len() } else { c.send_buf.len() };
        if c.send_off < len { self.submit_send(i) } else { self.flush(i) }
    }

    fn on_recv(&mut self, i: usize, res: i32, flags: u32, buf: Option<u16>, now: Instant) -> io::Result<()> {
        if !matches!(self.conns[i].phase, Phase::Open | Phase::Handshaking | Phase::H2Preface) {
            return Ok(());
        }
        if res < 0 {
            return match -res {
                // The buffer ring ran dry; buffers come back as this batch is handled.
                libc::ENOBUFS => self.rearm(i),
                libc::ECANCELED => Ok(()),
                _ => {
                    if self.conns[i].phase == Phase::Handshaking {
                        self.connect_failures += 1;
                        self.fail(i, ErrorKind::Tls, format!("during the TLS handshake: {}", os_error(res)));
                    } else {
                        self.fail(i, ErrorKind::Reset, os_error(res));
                    }
                    self.begin_close(i)
                }
            };
        }
        if res == 0 {
            return self.on_eof(i, now);
        }
        let Some(bid) = buf else { return Ok(()) };
        let data = self.bufs.bytes(bid, res as usize);
        self.stats.counters.bytes_received += res as u64;
        if self.conns[i].tls.is_some() {
            self.on_ciphertext(i, data, now)?;
        } else {
            self.on_plaintext(i, data, now)?;
        }
        if !cqueue::more(flags) { self.rearm(i) } else { Ok(()) }
    }

    fn rearm(&mut self, i: usize) -> io::Result<()> {
        let c = &self.conns[i];
        if !c.recv_armed && matches!(c.phase, Phase::Open | Phase::Handshaking | Phase::H2Preface) {
            self.arm_recv(i)
        } else {
            Ok(())
        }
    }

    fn on_ciphertext(&mut self, i: usize, data: &[u8], now: Instant) -> io::Result<()> {
        let mut plain = std::mem::take(&mut self.plain);
        plain.clear();
        let Some(tls) = self.conns[i].tls.as_mut() else { return Ok(()) };
        let received = tls.receive(data, &mut plain);
        let handshake_done = !tls.is_handshaking();
        if let Ok(r) = &received {
            self.conns[i].peer_closed |= r.closed;
        }
        let result = match received {
            Err(e) => {
                if self.conns[i].phase == Phase::Handshaking {
                    self.connect_failures += 1;
                }
                self.fail(i, ErrorKind::Tls, tls::describe(&e));
                self.begin_close(i)
            }
            Ok(received) => {
                let mut r = Ok(());
                if self.conns[i].phase == Phase::Handshaking && handshake_done {
                    r = self.connected(i, now);
                }
                if r.is_ok() {
                    r = self.flush(i);
                }
                if r.is_ok() && !plain.is_empty() {
                    r = self.on_plaintext(i, &plain, now);
                }
                if r.is_ok() && received.closed { self.on_eof(i, now) } else { r }
            }
        };
        self.plain = plain;
        result
    }

    /// HTTP/1.1 bytes of the response to the request in flight.
    fn on_plaintext(&mut self, i: usize, data: &[u8], now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.h2.is_some() && matches!(c.phase, Phase::Open | Phase::H2Preface) {
            return self.on_h2_bytes(i, data, now);
        }
        if c.phase != Phase::Open {
            return Ok(());
        }
        if c.parked {
            // The server spoke before we asked (a 408 on an idle connection, say).
            self.fail(i, ErrorKind::Reset, "bytes on a connection waiting for the start".into());
            return self.begin_close(i);
        }
        if !c.outstanding {
            // Bytes nobody asked for (a 408 on an idle connection, say): not a response to
            // count, and the connection can no longer be trusted.
            return self.begin_close(i);
        }
        if !c.first_byte_seen {
            c.first_byte_seen = true;
            let ttfb = now - c.sent_at;
            Stats::record(&mut self.stats.counters, &mut self.stats.histograms.ttfb, ttfb);
        }
        match self.conns[i].scanner.feed(data) {
            Err(e) => {
                self.fail(i, ErrorKind::Protocol, e.to_string());
                self.begin_close(i)
            }
            Ok((_, None)) => Ok(()),
            Ok((used, Some(response))) => {
                self.finish(i, response, now);
                let c = &self.conns[i];
                // Extra bytes after a response we did not pipeline are not ours to count; a
                // request body still being sent (the server answered early) or a TLS
                // close_notify means no further request may share this connection.
                if used < data.len() || response.close || !self.shared.keepalive || c.sending || c.peer_closed {
                    return self.begin_close(i);
                }
                self.next_request(i, now)
            }
        }
    }

    /// HTTP/2 bytes: frames for any of the connection's streams.
    fn on_h2_bytes(&mut self, i: usize, data: &[u8], now: Instant) -> io::Result<()> {
        let mut events = std::mem::take(&mut self.h2_events);
        let received = match self.conns[i].h2.as_mut() {
            Some(h2) => h2.receive(data, now, &mut events),
            None => Ok(()),
        };
        for event in events.drain(..) {
            self.on_h2_event(i, event, now);
        }
        self.h2_events = events;
        if let Err(e) = received {
            self.fail(i, ErrorKind::Protocol, e.to_string());
            return self.begin_close(i);
        }
        let c = &self.conns[i];
        let Some(h2) = &c.h2 else { return Ok(()) };
        if c.phase == Phase::H2Preface && h2.peer_settings_seen() {
            return self.established(i, now);
        }
        if c.parked && h2.is_goaway() {
            // Going away before the start: a fresh connection takes its place at the start.
            self.release_claim(i);
            return self.begin_close(i);
        }
        self.start_streams(i, now)
    }

    fn on_h2_event(&mut self, i: usize, event: H2Event, now: Instant) {
        let counters = &mut self.stats.counters;
        match event {
            H2Event::Response { status, sent_at, first_byte_at, .. } => {
                self.refused_in_a_row = 0;
                counters.ok += 1;
                counters.status(status);
                Stats::record(counters, &mut self.stats.histograms.latency, now - sent_at);
                Stats::record(counters, &mut self.stats.histograms.ttfb, first_byte_at - sent_at);
            }
            H2Event::StreamReset { code: h2_code::REFUSED_STREAM, .. } => self.refused(1),
            H2Event::StreamReset { code, .. } => {
                let why = format!("the server reset a stream (RST_STREAM {})", h2_code::name(code));
                self.count_errors(ErrorKind::Reset, 1, why);
            }
            H2Event::GoAway { code: h2_code::NO_ERROR, unanswered, .. } => self.refused(unanswered.len() as u64),
            H2Event::GoAway { code, unanswered, .. } => {
                self.conns[i].goaway_error = Some(code);
                let why = format!("the server sent GOAWAY {}", h2_code::name(code));
                self.count_errors(ErrorKind::Protocol, unanswered.len() as u64, why);
            }
            H2Event::StreamsLimited { limit } => {
                self.stream_limit = Some(self.stream_limit.map_or(limit, |l| l.min(limit)));
            }
        }
    }

    /// Requests the server declined unprocessed: they go back into the budget to be sent again,
    /// unless the server has declined everything for a while; then they fail, so that a server
    /// refusing every request cannot keep a `-n` run going forever.
    fn refused(&mut self, n: u64) {
        self.refused_in_a_row += n;
        if self.refused_in_a_row > REFUSED_IN_A_ROW {
            let why = format!(
                "the server declined over {REFUSED_IN_A_ROW} requests in a row unprocessed (GOAWAY or REFUSED_STREAM); they are no longer sent again"
            );
            self.count_errors(ErrorKind::Reset, n, why);
            return;
        }
        self.stats.counters.refused += n;
        if let Some(budget) = &mut self.budget {
            *budget += n;
        }
    }

    /// Starts as many streams on HTTP/2 connection `i` as the budget, `-p` and the server allow,
    /// to be written with the rest of this batch; closes the connection once it has nothing left
    /// to do (budget spent, or GOAWAY and its last streams answered).
    fn start_streams(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &self.conns[i];
        let Some(h2) = &c.h2 else { return Ok(()) };
        // Before the start nothing goes out but set-up. And the server's SETTINGS come within a
        // round trip of the connection: wait for them rather than guess its stream limit and
        // have it refuse what went beyond.
        if !c.parked && h2.peer_settings_seen() {
            self.fill_streams(i, now);
            let c = &mut self.conns[i];
            if c.h2.as_ref().is_some_and(|h2| h2.open_streams() == 0) {
                if c.outstanding {
                    // Its first request could not start: the server allows none here.
                    c.outstanding = false;
                    let why = "the server allowed no stream on a fresh connection (SETTINGS_MAX_CONCURRENT_STREAMS 0, or GOAWAY first)";
                    self.count_errors(ErrorKind::Protocol, 1, why.into());
                }
                return self.begin_close(i);
            }
        }
        let c = &mut self.conns[i];
        if c.h2.as_ref().is_some_and(|h2| h2.wants_write()) && !c.dirty {
            c.dirty = true;
            self.dirty.push(i);
        }
        Ok(())
    }

    fn fill_streams(&mut self, i: usize, now: Instant) {
        // can_start is asked before every claim, so no unit is claimed for a stream that cannot
        // start (start_request succeeds whenever it is above 0).
        while self.conns[i].h2.as_ref().is_some_and(|h2| h2.can_start() > 0) {
            // A connection's first stream uses the unit claimed when it was opened.
            if !self.conns[i].outstanding && !self.claim() {
                break;
            }
            let c = &mut self.conns[i];
            c.outstanding = false;
            if let Some(h2) = c.h2.as_mut() {
                h2.start_request(now);
            }
        }
    }

    fn on_eof(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.phase == Phase::H2Preface {
            self.fail(i, ErrorKind::Connect, "the server closed the connection before its HTTP/2 SETTINGS".into());
            return self.begin_close(i);
        }
        if let Some(h2) = &c.h2 {
            let open = h2.open_streams();
            if open > 0 {
                let kind = if c.goaway_error.is_some() { ErrorKind::Protocol } else { ErrorKind::Reset };
                self.fail(i, kind, format!("the server closed the connection with {open} HTTP/2 streams in flight"));
            } else {
                self.release_claim(i);
            }
            return self.begin_close(i);
        }
        if c.outstanding {
            match c.phase {
                Phase::Handshaking => {
                    self.connect_failures += 1;
                    self.fail(i, ErrorKind::Tls, "connection closed during the TLS handshake".into());
                }
                _ if !c.first_byte_seen => {
                    self.fail(i, ErrorKind::Reset, "connection closed before any response byte".into())
                }
                _ => match c.scanner.eof() {
                    Ok(Some(response)) => self.finish(i, response, now),
                    Ok(None) => {}
                    Err(e) => self.fail(i, ErrorKind::Reset, e.to_string()),
                },
            }
        }
        self.begin_close(i)
    }

    /// A complete response to the request in flight on `i`.
    fn finish(&mut self, i: usize, response: Response, now: Instant) {
        let c = &mut self.conns[i];
        c.outstanding = false;
        c.deadline = None;
        let counters = &mut self.stats.counters;
        counters.ok += 1;
        counters.status(response.status);
        Stats::record(counters, &mut self.stats.histograms.latency, now - c.sent_at);
    }

    fn next_request(&mut self, i: usize, now: Instant) -> io::Result<()> {
        if self.claim() {
            self.conns[i].outstanding = true;
            self.send_request(i, now)
        } else {
            self.begin_close(i)
        }
    }

    /// The connection `i` failed, and with it every request claimed on it: the one in flight
    /// (HTTP/1.1) or every open stream (HTTP/2). The caller closes it.
    fn fail(&mut self, i: usize, kind: ErrorKind, why: String) {
        if let Some(h2) = self.conns[i].h2.take() {
            if self.conns[i].phase == Phase::H2Preface {
                // Set-up failed: as a failed connect, the unit claimed for it is an error.
                self.connect_failures += 1;
            } else {
                // Taken, so that its streams cannot be counted twice.
                let open = h2.open_streams() as u64;
                self.release_claim(i);
                self.count_errors(kind, open, why);
                return;
            }
        }
        let c = &mut self.conns[i];
        if !c.outstanding {
            return;
        }
        if c.parked {
            // Its request never went out: give the budget unit back; the connection is made
            // again at the start.
            c.parked = false;
            c.outstanding = false;
            if let Some(n) = &mut self.budget {
                *n += 1;
            }
            return;
        }
        c.outstanding = false;
        c.deadline = None;
        self.count_errors(kind, 1, why);
    }

    /// `n` requests failed for one reason.
    fn count_errors(&mut self, kind: ErrorKind, n: u64, why: String) {
        if n == 0 {
            return;
        }
        self.stats.counters.add_errors(kind, n);
        if !self.error_samples.iter().any(|(k, _)| *k == kind) {
            self.error_samples.push((kind, why));
        }
    }

    /// An HTTP/2 connection lets go of the budget unit it claimed for a stream it never started
    /// (parked, or closing before it could): nothing was sent for it.
    fn release_claim(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.outstanding {
            c.outstanding = false;
            c.parked = false;
            if let Some(n) = &mut self.budget {
                *n += 1;
            }
        }
    }

    /// Cancels what is in flight on `i` and closes its socket; the slot is reused once every
    /// operation has completed.
    fn begin_close(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if matches!(c.phase, Phase::Idle | Phase::Closing) {
            return Ok(());
        }
        if c.phase == Phase::Open {
            self.open -= 1;
        }
        c.phase = Phase::Closing;
        c.deadline = None;
        c.tls = None;
        c.h2 = None;
        let g = c.generation;
        c.pending_ops += 2;
        // A hard link: the close must run even when there was nothing left to cancel.
        let cancel = opcode::AsyncCancel2::new(CancelBuilder::fd(Fixed(i as u32)).all())
            .build()
            .flags(squeue::Flags::IO_HARDLINK)
            .user_data(token(Op::Cancel, i, g));
        let close = opcode::Close::new(Fixed(i as u32)).build().user_data(token(Op::Close, i, g));
        self.push_pair(cancel, close)
    }

    /// The run is over: requests in flight are counted as aborted, every socket is closed, and
    /// the loop waits (briefly) until the kernel is done with every buffer.
    /// Returns false when the kernel did not let go of everything in time.
    fn stop(&mut self) -> io::Result<bool> {
        self.stopping = true;
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            // A request whose send was queued goes out (the final submit carries it before the
            // cancel), so the server may see it; one not yet queued is not counted at all.
            if let Some(h2) = &c.h2 {
                // Streams whose requests reached the kernel; the parked claim never went out.
                self.stats.counters.aborted += h2.sent_open_streams() as u64;
            } else if c.outstanding && c.phase == Phase::Open && c.request_queued {
                self.stats.counters.aborted += 1;
            }
            c.outstanding = false;
            self.begin_close(i)?;
        }
        let limit = Instant::now() + DRAIN_LIMIT;
        while self.conns.iter().any(|c| c.pending_ops > 0) {
            let now = Instant::now();
            if now >= limit {
                return Ok(false);
            }
            let ts = Timespec::from(limit - now);
            self.enter(1, &SubmitArgs::new().timespec(&ts))?;
            self.drain()?;
        }
        Ok(true)
    }
}

fn os_error(res: i32) -> String {
    io::Error::from_raw_os_error(-res).to_string()
}

/// A TCP socket with Nagle off: requests are small and must leave at once.
fn new_socket(addr: &std::net::SocketAddr) -> io::Result<i32> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscalls on a descriptor we own.
    unsafe {
        let fd = libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        Ok(fd)
    }
}

/// The address in the form connect(2) takes, encoded once per run.
pub(crate) fn encode_sockaddr(addr: &std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut out: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = write_sockaddr(addr, &mut out);
    (out, len)
}

fn write_sockaddr(addr: &std::net::SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is large enough and aligned for any sockaddr.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for op in [Op::Connect, Op::ConnectTimeout, Op::Recv, Op::Send, Op::Cancel, Op::Close, Op::SendQuiet] {
            assert_eq!(untoken(token(op, 4095, 65535)), Some((op, 4095, 65535)));
        }
        assert_eq!(untoken(0), None);
    }
}
