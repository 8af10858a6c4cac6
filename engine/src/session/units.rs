//! The requests a thread may still start, and how a session takes them.

/// A thread's request budget: `-n` split over threads, or unlimited for a timed run. Once the
/// run stops, nothing more is handed out.
#[derive(Debug)]
pub(crate) struct Budget {
    /// None: no limit.
    left: Option<u64>,
    stopping: bool,
}

impl Budget {
    pub(crate) fn new(left: Option<u64>) -> Self {
        Budget { left, stopping: false }
    }

    /// Takes one request. False when the budget is spent or the run stops.
    pub(crate) fn claim(&mut self) -> bool {
        if self.stopping {
            return false;
        }
        match &mut self.left {
            None => true,
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }

    /// Requests taken but never sent (or sent and declined unprocessed) come back.
    pub(crate) fn give_back(&mut self, n: u64) {
        if let Some(left) = &mut self.left {
            *left += n;
        }
    }

    /// The run stops: no request is handed out any more.
    pub(crate) fn stop(&mut self) {
        self.stopping = true;
    }

    /// Every request of a `-n` budget has been taken.
    pub(crate) fn is_spent(&self) -> bool {
        self.left == Some(0)
    }
}

/// What a session may take requests from: first the one its connection claimed when it was
/// opened (a connection is only opened for a request), then the thread's budget.
pub(crate) struct Units<'a> {
    claimed: &'a mut bool,
    budget: &'a mut Budget,
}

impl<'a> Units<'a> {
    pub(crate) fn new(claimed: &'a mut bool, budget: &'a mut Budget) -> Self {
        Units { claimed, budget }
    }

    /// One request to start; false when there is none.
    pub(crate) fn take(&mut self) -> bool {
        if *self.claimed {
            *self.claimed = false;
            return true;
        }
        self.budget.claim()
    }

    /// The connection's own request is still unused: it was opened for a request that could
    /// not start. Taking it makes the caller answer for it (as an error).
    pub(crate) fn take_unused_claim(&mut self) -> bool {
        std::mem::take(self.claimed)
    }
}
