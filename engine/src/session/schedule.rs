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

use std::time::Instant;

use crate::plan::Rate;

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
}

/// Slot `k` (the k-th request sent, from 0) is due at `first + k / rate`.
struct Pace {
    per_second: u64,
    offset: std::time::Duration,
    /// Slot 0's due instant; None until the load starts.
    first: Option<Instant>,
    /// Slots used: the next request sent takes slot `taken`.
    taken: u64,
    /// Slot `taken`'s due instant (once started).
    next_due: Instant,
    /// Slots below this have been counted as blocked (due with no connection free).
    blocked_upto: u64,
}

impl Pace {
    fn due(&self, first: Instant, slot: u64) -> Instant {
        let nanos = u128::from(slot) * 1_000_000_000 / u128::from(self.per_second);
        first + std::time::Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Slots due at or before `now`.
    fn due_by(&self, now: Instant) -> u64 {
        let Some(first) = self.first else { return 0 };
        let Some(since) = now.checked_duration_since(first) else { return 0 };
        let slots = since.as_nanos() * u128::from(self.per_second) / 1_000_000_000 + 1;
        u64::try_from(slots).unwrap_or(u64::MAX)
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
    /// The closed model: `budget` requests (None: until the run's deadline or stop).
    pub(crate) fn closed(budget: Option<u64>) -> Self {
        Schedule { left: budget, held: 0, stopping: false, pace: None }
    }

    /// The open model: `budget` requests (None: until the deadline) due at `rate`.
    pub(crate) fn open(budget: Option<u64>, rate: Rate) -> Self {
        let pace = Pace {
            per_second: rate.per_second.max(1),
            offset: rate.offset,
            first: None,
            taken: 0,
            next_due: Instant::now(),
            blocked_upto: 0,
        };
        Schedule { pace: Some(pace), ..Schedule::closed(budget) }
    }

    /// The load starts at `at`: the open model's instants count from here.
    pub(crate) fn start(&mut self, at: Instant) {
        if let Some(pace) = &mut self.pace {
            let first = at + pace.offset;
            pace.first = Some(first);
            pace.next_due = first;
        }
    }

    /// Claims one request for a connection about to be opened for it: false when none is left.
    /// The connection then uses it (`take`), gives it back (`return_claim`) or fails it
    /// (`drop_claim`).
    pub(crate) fn claim(&mut self) -> bool {
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

    /// The run stops: nothing more is handed out.
    pub(crate) fn stop(&mut self) {
        self.stopping = true;
    }

    /// Every request of a `-n` budget has been claimed or taken.
    pub(crate) fn is_spent(&self) -> bool {
        self.left == Some(0)
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
        if self.stopping || (!*claimed && self.left == Some(0)) {
            // Nothing for this connection, now or later: it need not wait.
            return Take::Spent;
        }
        if now < pace.next_due {
            return Take::NotYet;
        }
        if std::mem::take(claimed) {
            self.held = self.held.saturating_sub(1);
        } else if !claim_from(&mut self.left, self.stopping) {
            return Take::Spent;
        }
        let due = pace.next_due;
        pace.taken += 1;
        pace.next_due = pace.due(first, pace.taken);
        Take::Due(due)
    }

    /// When the next request is due (open model, once started, while requests are left).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let pace = self.pace.as_ref()?;
        pace.first?;
        (!self.stopping && self.remaining() != Some(0)).then_some(pace.next_due)
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
