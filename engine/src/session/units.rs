//! How a session takes requests: from its connection's claimed one first, then from the
//! thread's schedule, each with the instant it was due.

use std::time::{Duration, Instant};

use super::schedule::{Schedule, Take};
use crate::stats::Stats;

/// A request sent more than this after its due instant counts as late.
pub(crate) const LATE: Duration = Duration::from_millis(1);

/// What a session may take requests from: first the one its connection claimed when it was
/// opened (a connection is only opened for a request), then the thread's schedule. In the open
/// model each request's send lateness is recorded here, where it is taken.
pub(crate) struct Units<'a> {
    claimed: &'a mut bool,
    schedule: &'a mut Schedule,
    stats: &'a mut Stats,
    /// A take found the next request not yet due: the session has room and waits for it.
    not_due: bool,
    /// Requests the session took (to send, or to fail unsent).
    taken: u32,
}

impl<'a> Units<'a> {
    pub(crate) fn new(claimed: &'a mut bool, schedule: &'a mut Schedule, stats: &'a mut Stats) -> Self {
        Units { claimed, schedule, stats, not_due: false, taken: 0 }
    }

    /// One request to start at `now`, with the instant it was due (`now` in the closed model);
    /// None when there is none, or none due yet.
    #[inline]
    pub(crate) fn take(&mut self, now: Instant) -> Option<Instant> {
        match self.schedule.take(now, self.claimed) {
            Take::Now => {
                self.taken += 1;
                Some(now)
            }
            Take::Due(due) => {
                self.taken += 1;
                let lateness = now.saturating_duration_since(due);
                let counters = &mut self.stats.counters;
                counters.late += u64::from(lateness > LATE);
                Stats::record(counters, &mut self.stats.histograms.lateness, lateness);
                Some(due)
            }
            Take::NotYet => {
                self.not_due = true;
                None
            }
            Take::Spent => None,
        }
    }

    /// The connection's own request is still unused: it was opened for a request that could
    /// not start. Taking it makes the caller answer for it (as an error).
    pub(crate) fn take_unused_claim(&mut self) -> bool {
        let unused = std::mem::take(self.claimed);
        if unused {
            self.schedule.drop_claim();
            self.taken += 1;
        }
        unused
    }

    /// Whether a request may still come from here, now or later (nothing is taken): the
    /// connection's claimed one, or one of the schedule's while the run goes on.
    pub(crate) fn has_more(&self) -> bool {
        self.schedule.has_more(*self.claimed)
    }

    /// How many requests the session took: each ends as a response, a failure or a refusal.
    pub(crate) fn taken(&self) -> u32 {
        self.taken
    }

    /// The session asked for a request and the next was not due yet: it has room, and waits.
    pub(crate) fn found_none_due(&self) -> bool {
        self.not_due
    }
}
