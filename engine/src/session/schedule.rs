//! When a thread's next request is due. Closed model: a count of requests (or none, until a
//! deadline), each due as soon as a connection is free to send it. Open model: a rate, the
//! requests due at fixed, uniform spacing from the start whatever the server does, each taken
//! by the next connection (or stream) free; a request found late is sent at once and keeps its
//! due instant, so its latency counts the wait (coordinated omission, corrected).
//!
//! Sans-I/O: it is told instants and answers with instants. The event loop asks it for requests
//! and wakes at its next due instant; its tests use made-up instants.
//!
//! Requests and their instants are counted apart: a request taken and given back (declined
//! unprocessed, or claimed for a connection that closed before using it) is sent again in a
//! later slot, so `-n` stays exact while the pace never goes back.

use std::time::{Duration, Instant};

use crate::plan::{Curve, Load, Rate, Stage};

/// Requests a `-n` run may hand out during its warm-up, before its budget begins: more than any
/// warm-up can send, and far from overflow when added to.
const WARM_UP_UNITS: u64 = u64::MAX / 4;

/// What asking for a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Closed model: a request, due now.
    Now,
    /// Open model: a request, due at this instant (now, or earlier when it is late).
    Due(Instant),
    /// Open model: the next request is not due yet.
    NotYet,
    /// No request left: the budget is spent, or the run stops.
    Spent,
}

pub(crate) struct Schedule {
    /// Requests not yet claimed; None for no limit (a timed run).
    left: Option<u64>,
    /// Requests claimed for connections being opened, not yet used nor given back.
    held: u64,
    stopping: bool,
    /// The open model's pace; None for the closed model.
    pace: Option<Pace>,
    /// A `-n` budget that begins once the warm-up is over (`end_warm_up`); meanwhile `left`
    /// is `WARM_UP_UNITS`.
    deferred: Option<u64>,
}

/// When slot `k` (the k-th request sent, from 0) is due.
struct Pace {
    shape: Shape,
    offset: Duration,
    /// Slot 0's due instant; None until the load starts.
    first: Option<Instant>,
    /// Slots used: the next request sent takes slot `taken`.
    taken: u64,
    /// Slot `taken`'s due instant (once started); None when no slot is ever due again (the
    /// stages have ended).
    next_due: Option<Instant>,
    /// Slots below this have been counted as blocked (due with no connection free).
    blocked_upto: u64,
    /// A timed run's end: slots due at or after it are not part of the run.
    end: Option<Instant>,
}

enum Shape {
    /// A constant rate: slot k due at `first + k / rate`.
    Constant(u64),
    /// Stages: slot k due once k + phase requests' worth of the ramping rate has accumulated.
    /// `hint` is the segment of the last slot asked about.
    Stages { curve: Curve, hint: usize },
}

impl Pace {
    fn due(&mut self, first: Instant, slot: u64) -> Option<Instant> {
        let due = match &mut self.shape {
            Shape::Constant(per_second) => {
                let nanos = u128::from(slot) * 1_000_000_000 / u128::from(*per_second);
                Some(first + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)))
            }
            Shape::Stages { curve, hint } => curve.due(slot, hint).map(|d| first + d),
        }?;
        if self.end.is_some_and(|end| due >= end) {
            return None;
        }
        Some(due)
    }

    /// Slots due at or before `now` (and before the run's end).
    fn due_by(&self, now: Instant) -> u64 {
        let Some(first) = self.first else { return 0 };
        let now = match self.end {
            Some(end) if now >= end => match end.checked_sub(Duration::from_nanos(1)) {
                Some(last) => last,
                None => return 0,
            },
            _ => now,
        };
        let Some(since) = now.checked_duration_since(first) else { return 0 };
        match &self.shape {
            Shape::Constant(per_second) => {
                let slots = since.as_nanos() * u128::from(*per_second) / 1_000_000_000 + 1;
                u64::try_from(slots).unwrap_or(u64::MAX)
            }
            Shape::Stages { curve, .. } => curve.due_by(since),
        }
    }
}

/// Takes one request from `left`, unless the run stops or none is left.
fn claim_from(left: &mut Option<u64>, stopping: bool) -> bool {
    if stopping {
        return false;
    }
    match left {
        None => true,
        Some(0) => false,
        Some(n) => {
            *n -= 1;
            true
        }
    }
}

impl Schedule {
    /// `budget` requests (None: until the run's deadline or stop) offered as `load` says.
    pub(crate) fn for_load(budget: Option<u64>, load: &Load) -> Self {
        match load {
            Load::Closed { .. } => Schedule::closed(budget),
            Load::Open { rate, stages, .. } if stages.is_empty() => Schedule::open(budget, *rate),
            Load::Open { rate, stages, phase, .. } => Schedule::staged(budget, *rate, stages, *phase),
        }
    }

    /// The closed model: `budget` requests (None: until the run's deadline or stop).
    pub(crate) fn closed(budget: Option<u64>) -> Self {
        Schedule { left: budget, held: 0, stopping: false, pace: None, deferred: None }
    }

    /// The open model: `budget` requests (None: until the deadline) due at `rate`.
    pub(crate) fn open(budget: Option<u64>, rate: Rate) -> Self {
        Schedule::paced(budget, rate, Shape::Constant(rate.per_second.max(1)))
    }

    /// The open model with stages: the rate ramps from `rate` through `stages`, and nothing is
    /// due after the last.
    pub(crate) fn staged(budget: Option<u64>, rate: Rate, stages: &[Stage], phase: f64) -> Self {
        let curve = Curve::new(rate.per_second, stages, phase);
        Schedule::paced(budget, rate, Shape::Stages { curve, hint: 0 })
    }

    fn paced(budget: Option<u64>, rate: Rate, shape: Shape) -> Self {
        let pace =
            Pace { shape, offset: rate.offset, first: None, taken: 0, next_due: None, blocked_upto: 0, end: None };
        Schedule { pace: Some(pace), ..Schedule::closed(budget) }
    }

    /// A `-n` budget begins only once the warm-up is over (`end_warm_up`): until then requests
    /// are handed out without limit.
    pub(crate) fn defer_budget(&mut self) {
        if let Some(budget) = self.left {
            self.deferred = Some(budget);
            self.left = Some(WARM_UP_UNITS);
        }
    }

    /// The warm-up is over, `resolved` of its requests having been counted (ok or an error):
    /// the deferred budget begins. Requests in flight now, and those claimed for connections
    /// being opened, will be counted after it, so they are taken from it: the requests counted
    /// after the warm-up are exactly the budget (unless more than it were in flight already).
    pub(crate) fn end_warm_up(&mut self, resolved: u64) {
        let (Some(budget), Some(left)) = (self.deferred.take(), self.left) else { return };
        // Handed out and not given back: sent (resolved or in flight) or failed unsent.
        let handed = WARM_UP_UNITS.saturating_sub(left).saturating_sub(self.held);
        let in_flight = handed.saturating_sub(resolved);
        self.left = Some(budget.saturating_sub(in_flight.saturating_add(self.held)));
    }

    /// The load starts at `at`: the open model's instants count from here.
    pub(crate) fn start(&mut self, at: Instant) {
        if let Some(pace) = &mut self.pace {
            let first = at + pace.offset;
            pace.first = Some(first);
            pace.next_due = pace.due(first, 0);
        }
    }

    /// A timed run's load ends at `end`: a slot due then or later is not part of the run, so
    /// that a run of D seconds at R per second has R × D slots, however late the loop wakes
    /// at its end.
    pub(crate) fn end_at(&mut self, end: Instant) {
        if let Some(pace) = &mut self.pace {
            pace.end = Some(end);
            if pace.next_due.is_some_and(|due| due >= end) {
                pace.next_due = None;
            }
        }
    }

    /// Claims one request for a connection about to be opened for it: false when none is left.
    /// The connection then uses it (`take`), gives it back (`return_claim`) or fails it
    /// (`drop_claim`).
    pub(crate) fn claim(&mut self) -> bool {
        if self.pace.as_ref().is_some_and(|p| p.first.is_some() && p.next_due.is_none()) {
            // The stages are over: a connection opened now would only close again.
            return false;
        }
        let claimed = claim_from(&mut self.left, self.stopping);
        self.held += u64::from(claimed);
        claimed
    }

    /// A connection's claimed request was never used: it comes back.
    pub(crate) fn return_claim(&mut self) {
        self.held = self.held.saturating_sub(1);
        self.give_back(1);
    }

    /// A connection's claimed request ended without being sent (it failed as an error).
    pub(crate) fn drop_claim(&mut self) {
        self.held = self.held.saturating_sub(1);
    }

    /// Requests taken but never sent, or sent and declined unprocessed, come back.
    pub(crate) fn give_back(&mut self, n: u64) {
        if let Some(left) = &mut self.left {
            *left += n;
        }
    }

    /// Nothing more is handed out, as if a budget were spent (a shard feeder's rows ran out):
    /// what is under way goes on, and a warm-up's deferred budget never begins.
    pub(crate) fn exhaust(&mut self) {
        self.left = Some(0);
        self.deferred = None;
    }

    /// The run stops: nothing more is handed out.
    pub(crate) fn stop(&mut self) {
        self.stopping = true;
    }

    /// The run stops: not even an iteration already started goes on.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Every request of a `-n` budget has been claimed or taken.
    pub(crate) fn is_spent(&self) -> bool {
        self.left == Some(0)
    }

    /// Whether `take` may still give a connection (holding its claimed request, if `claimed`) a
    /// request, now or later: false once the run stops, the stages are over, or a `-n` budget
    /// is spent and the connection holds no claim.
    pub(crate) fn has_more(&self, claimed: bool) -> bool {
        let left = !self.is_spent();
        match &self.pace {
            // As `take`: the closed model gives a claimed request even when stopping.
            None => claimed || (left && !self.stopping),
            Some(p) => {
                let stages_over = p.first.is_some() && p.next_due.is_none();
                !stages_over && !self.stopping && (claimed || left)
            }
        }
    }

    /// A request for a connection (or stream) free at `now`, using the connection's own claimed
    /// request first. Open model: only once the next slot is due; the request keeps that due
    /// instant however late it is taken.
    #[inline]
    pub(crate) fn take(&mut self, now: Instant, claimed: &mut bool) -> Take {
        let Some(pace) = &mut self.pace else {
            if std::mem::take(claimed) {
                self.held = self.held.saturating_sub(1);
                return Take::Now;
            }
            return if claim_from(&mut self.left, self.stopping) { Take::Now } else { Take::Spent };
        };
        let Some(first) = pace.first else { return Take::NotYet };
        let Some(due) = pace.next_due else { return Take::Spent };
        if self.stopping || (!*claimed && self.left == Some(0)) {
            // Nothing for this connection, now or later: it need not wait.
            return Take::Spent;
        }
        if now < due {
            return Take::NotYet;
        }
        if std::mem::take(claimed) {
            self.held = self.held.saturating_sub(1);
        } else if !claim_from(&mut self.left, self.stopping) {
            return Take::Spent;
        }
        pace.taken += 1;
        pace.next_due = pace.due(first, pace.taken);
        Take::Due(due)
    }

    /// When the next request is due (open model, once started, while requests are left).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let pace = self.pace.as_ref()?;
        pace.first?;
        if self.stopping || self.remaining() == Some(0) {
            return None;
        }
        pace.next_due
    }

    /// How far apart the next request due and the one after it are: the pace now, under
    /// stages too. None in the closed model, and when the next request due is the last.
    pub(crate) fn spacing(&mut self) -> Option<Duration> {
        let next = self.next_due()?;
        let last = self.last_slot(self.pace.as_ref()?);
        let pace = self.pace.as_mut()?;
        let slot = pace.taken.checked_add(1).filter(|&k| k < last)?;
        let after = pace.due(pace.first?, slot)?;
        Some(after.saturating_duration_since(next))
    }

    /// Requests still to be sent: those unclaimed and those held for connections.
    fn remaining(&self) -> Option<u64> {
        self.left.map(|l| l.saturating_add(self.held))
    }

    /// The slot after the last one that is a request: slots up to here may still be sent.
    fn last_slot(&self, pace: &Pace) -> u64 {
        match self.remaining() {
            Some(r) => pace.taken.saturating_add(r),
            None => u64::MAX,
        }
    }

    /// The loop found requests due at `now` and no connection or stream free to take them:
    /// returns how many requests this adds to those counted so, each request counted once.
    pub(crate) fn mark_blocked(&mut self, now: Instant) -> u64 {
        let Some(pace) = &self.pace else { return 0 };
        let end = pace.due_by(now).min(self.last_slot(pace));
        let from = pace.blocked_upto.max(pace.taken);
        let n = end.saturating_sub(from);
        if let Some(pace) = &mut self.pace {
            pace.blocked_upto = pace.blocked_upto.max(end);
        }
        n
    }

    /// Requests due by `now` and not sent: at the end of a run, those it never got to.
    pub(crate) fn overdue(&self, now: Instant) -> u64 {
        let Some(pace) = &self.pace else { return 0 };
        pace.due_by(now).min(self.last_slot(pace)).saturating_sub(pace.taken)
    }
}

#[cfg(test)]
mod tests;
