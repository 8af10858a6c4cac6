//! One thread's run lifecycle: waiting for the start gate, the per-second ticks, telling the
//! collector what happened, and when the load must end. Knows nothing of connections or
//! protocols.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use super::{ThreadDone, ThreadMsg, ThreadPlan};
use crate::gate::StartGate;
use crate::stats::Stats;

/// How often the stop flag is read (and idle connections are given another try).
const CHECK_EVERY: Duration = Duration::from_millis(50);
/// How often a thread waiting for its start looks at the gate: a controller sets the start at
/// least this far ahead.
const GATE_CHECK_EVERY: Duration = Duration::from_millis(5);
/// The last stretch before the start instant is spent spinning on the clock rather than
/// asleep: a sleeping thread wakes late by its timer slack plus however long the scheduler
/// takes to run it (milliseconds when another task holds the core), a spinning one is on the
/// CPU already. This costs at most this much CPU per thread per run.
const SPIN_BEFORE_START: Duration = Duration::from_millis(1);

pub(super) struct Lifecycle {
    thread: usize,
    gate: Arc<StartGate>,
    stop_flag: Arc<AtomicBool>,
    tx: Sender<ThreadMsg>,
    /// How long the load runs once started; None for a request budget.
    duration: Option<Duration>,
    /// The start gate opened and the load is on; before, connections open and park.
    released: bool,
    /// The collector was told that every connection was tried once.
    ready_sent: bool,
    tick: u32,
    next_tick: Instant,
    next_check: Instant,
    /// When a timed run ends, from the moment this thread started.
    end: Option<Instant>,
}

impl Lifecycle {
    pub(super) fn new(plan: &ThreadPlan, now: Instant) -> Self {
        Lifecycle {
            thread: plan.index,
            gate: plan.gate.clone(),
            stop_flag: plan.stop_flag.clone(),
            tx: plan.tx.clone(),
            duration: plan.duration,
            released: false,
            ready_sent: false,
            tick: 1,
            next_tick: now + Duration::from_secs(1),
            next_check: now + CHECK_EVERY,
            end: None,
        }
    }

    pub(super) fn thread(&self) -> usize {
        self.thread
    }

    pub(super) fn released(&self) -> bool {
        self.released
    }

    /// Opens the load once the gate's instant has come, spinning through the last stretch so
    /// the start is on time. The instant it opened, when that was just now.
    pub(super) fn try_release(&mut self, mut now: Instant) -> Option<Instant> {
        if self.released {
            return None;
        }
        let at = self.gate.at()?;
        if now + SPIN_BEFORE_START < at {
            return None;
        }
        while now < at {
            std::hint::spin_loop();
            now = Instant::now();
        }
        self.released = true;
        self.end = self.duration.map(|d| now + d);
        self.next_tick = now + Duration::from_secs(1);
        let _ = self.tx.send(ThreadMsg::Started { thread: self.thread, at: now });
        Some(now)
    }

    /// When a timed run's load ends (None for a request budget, or before the start).
    pub(super) fn end(&self) -> Option<Instant> {
        self.end
    }

    /// Whether a second has completed since the last tick.
    pub(super) fn tick_due(&self, now: Instant) -> bool {
        self.released && now >= self.next_tick
    }

    /// Hands the second just completed to the collector; call it once [`Lifecycle::tick_due`].
    pub(super) fn tick(&mut self, stats: &mut Stats) {
        let delta = std::mem::take(stats);
        let _ = self.tx.send(ThreadMsg::Interval { thread: self.thread, tick: self.tick, delta });
        self.tick += 1;
        self.next_tick += Duration::from_secs(1);
    }

    /// True every `CHECK_EVERY`: time to read the stop flag and retry idle connections.
    pub(super) fn check_due(&mut self, now: Instant) -> bool {
        if now < self.next_check {
            return false;
        }
        self.next_check = now + CHECK_EVERY;
        true
    }

    pub(super) fn ready_sent(&self) -> bool {
        self.ready_sent
    }

    /// Every connection was tried once: `connected` are up, `failed` could not be set up.
    pub(super) fn ready(&mut self, connected: u64, failed: u64) {
        self.ready_sent = true;
        let _ = self.tx.send(ThreadMsg::Ready { thread: self.thread, connected, failed });
    }

    /// Stopped from outside, or a timed run's end has come.
    pub(super) fn must_end(&self, now: Instant) -> bool {
        self.stop_flag.load(Ordering::Relaxed) || self.end.is_some_and(|d| now >= d)
    }

    /// When the loop must look at the lifecycle again: the next check, the next tick (or the
    /// gate), the end of a timed run.
    pub(super) fn wake_at(&self, now: Instant) -> Instant {
        let mut until = self.next_check;
        if self.released {
            until = until.min(self.next_tick);
        } else {
            let wake = self.gate.at().map(|at| at.checked_sub(SPIN_BEFORE_START).unwrap_or(at));
            until = until.min(wake.unwrap_or(now + GATE_CHECK_EVERY));
        }
        match self.end {
            Some(end) => until.min(end),
            None => until,
        }
    }

    /// Ends every thread's load, this one's included.
    pub(super) fn stop_all(&self) {
        self.stop_flag.store(true, Ordering::Relaxed);
    }

    /// The thread's last word: sent once its counts are final, before its connections are
    /// closed.
    pub(super) fn done(&self, done: ThreadDone) {
        let _ = self.tx.send(ThreadMsg::Done(done));
    }
}
