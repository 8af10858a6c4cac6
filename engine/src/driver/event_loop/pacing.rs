//! The loop's time: when the load starts and ends, the open model's due requests and the
//! connections waiting for them, the closed model's ramp of open connections, the hold that
//! lets completions gather into a batch, and the deadlines the one wait wakes for.

use std::io;
use std::time::{Duration, Instant};

use super::Loop;
use crate::driver::conn::Phase;
use crate::driver::ops::Io;
use crate::stats::{ErrorKind, Stats};

/// Open model: the loop sleeps through responses (`sleeps_through_responses`) only while
/// requests are due at least this far apart (up to 10,000 a second per thread). Faster, the
/// responses wake it often enough to send on time, and sleeping through them made the send
/// lateness worse on a 2-core VM (p99 0.3 to 3 ms at 50,000/s, against about 0.1 ms), since a
/// sleeping core wakes late at times.
const SLEEP_MIN_SPACING: Duration = Duration::from_micros(100);

impl<I: Io> Loop<I> {
    /// Open model: whether to sleep until the next request must leave rather than wake for each
    /// response. A connection is free for that request, it is due within `--max-hold`, and a
    /// response's latency ends at its arrival (`arrival`), so the responses that wait for the
    /// wake-up lose nothing of their latency, and at a moderate rate the client wakes once per
    /// request (or bunch) instead of twice; up to `SLEEP_MIN_SPACING`'s rate. Until the kernel
    /// stamps arrivals the loop wakes for every completion; over UDP it always does, since only
    /// TCP receives are stamped (QUIC's packets carry no arrival time here, and its
    /// acknowledgements must not wait).
    pub(super) fn sleeps_through_responses(&mut self, now: Instant, send_by: Option<Instant>) -> bool {
        self.arrivals_stamped
            && self.waiting_count > 0
            && !self.shared.max_hold.is_zero()
            && send_by.is_some_and(|at| at.saturating_duration_since(now) <= self.shared.max_hold)
            && self.schedule.spacing().is_some_and(|s| s >= SLEEP_MIN_SPACING)
    }

    /// Hands out the second just completed, if one has. The warm-up ends with its last tick:
    /// what was counted until then is the warm-up's, and a `-n` budget begins.
    pub(super) fn tick(&mut self, now: Instant) {
        if !self.lifecycle.tick_due(now) {
            return;
        }
        self.name_samples.record(&mut self.stats.names);
        let resolved = self.stats.counters.total();
        self.lifecycle.tick(&mut self.stats);
        if self.warm_up_ticks > 0 {
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
    pub(super) fn batch_target(&self) -> usize {
        let in_flight = usize::try_from(self.in_flight).unwrap_or(usize::MAX);
        (in_flight / 3).min(self.open).min(32)
    }

    /// With a completion ready, holds out (at most `max_hold`, never past `until`) for a batch
    /// worth handling: fewer, larger sends and receives, and fewer wake-ups, for every request.
    /// Returns how long it held: what the completions ready before it waited on top of
    /// their latency.
    pub(super) fn hold(&mut self, until: Instant) -> io::Result<Duration> {
        let batch = self.batch_target();
        let ready = self.io.ready();
        if batch < 2 || ready == 0 || ready >= batch || self.shared.max_hold.is_zero() {
            return Ok(Duration::ZERO);
        }
        let start = Instant::now();
        let limit = self.shared.max_hold.min(until.saturating_duration_since(start));
        if limit.is_zero() {
            return Ok(Duration::ZERO);
        }
        self.io.hold(batch, limit)?;
        Ok(start.elapsed())
    }

    /// Every response of the batch just handled was seen `held` later than it could have been:
    /// the client's own share of its latency, recorded beside it.
    pub(super) fn note_hold(&mut self, held: Duration) {
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
    pub(super) fn try_release(&mut self, now: Instant) -> io::Result<()> {
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
    pub(super) fn follow_ramp(&mut self, now: Instant) -> io::Result<()> {
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
    pub(super) fn check_ready(&mut self) {
        if self.conns.iter().any(|c| matches!(c.phase, Phase::Connecting | Phase::Handshaking | Phase::SettingUp)) {
            return;
        }
        self.lifecycle.ready(self.open as u64, self.connect_failures);
    }

    pub(super) fn must_end(&self, now: Instant) -> bool {
        self.lifecycle.must_end(now)
            // Not one connection ever came up: the target is not there; say so rather than spin.
            || (self.connects_ok == 0 && self.connect_failures >= self.conns.len() as u64)
    }

    pub(super) fn finished(&self) -> bool {
        self.schedule.is_spent() && self.conns.iter().all(|c| c.phase == Phase::Idle)
    }

    /// Open model: the requests due by `now` go to the connections waiting, longest first; a
    /// request due with none waiting is counted as blocked (the next connection freed takes it).
    /// Once no request will ever be due again, the waiting connections are closed.
    pub(super) fn dispatch_due(&mut self, now: Instant) -> io::Result<()> {
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
    pub(super) fn set_waiting(&mut self, i: usize, room: bool) {
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

    /// Connections whose deadline has come: handshakes out of time, sessions' timers. The
    /// rest give the next deadline.
    pub(super) fn expire_deadlines(&mut self, now: Instant) -> io::Result<()> {
        self.next_deadline = None;
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            match c.phase {
                Phase::Handshaking => match c.transport.handshake_by() {
                    Some(d) if now >= d => {
                        let why = format!("TLS handshake not done within {:?}", self.shared.connect_timeout);
                        self.fail(i, ErrorKind::Connect, why.into());
                        self.begin_close(i)?;
                    }
                    d => self.note_deadline(d),
                },
                Phase::SettingUp | Phase::Open => {
                    let resume_at = c.cursor.resume_at;
                    let Some(session) = c.session.as_mut() else { continue };
                    match session.poll_timeout() {
                        Some(d) if now >= d => {
                            session.handle_timeout(now, &mut self.events);
                            self.advance(i, now)?;
                        }
                        // Its user's pause (think time) is over: it takes its next request.
                        _ if resume_at.is_some_and(|t| now >= t) => self.advance(i, now)?,
                        d => {
                            self.note_deadline(d);
                            self.note_deadline(resume_at);
                        }
                    }
                }
                _ => {}
            }
        }
        self.flush_dirty()
    }

    pub(super) fn note_deadline(&mut self, deadline: Option<Instant>) {
        if let Some(d) = deadline
            && self.next_deadline.is_none_or(|n| d < n)
        {
            self.next_deadline = Some(d);
        }
    }

    /// Idle connections get another try: one left idle by a failed socket(), or one that found
    /// the budget spent before requests came back into it (refused ones, to be sent again).
    pub(super) fn retry_idle(&mut self, now: Instant) -> io::Result<()> {
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
}
