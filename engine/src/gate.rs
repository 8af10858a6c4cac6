//! The start gate: the instant a run's load may begin, set once from outside (a controller
//! starting many engines together) and read by every engine thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// When the load may start: closed until an instant is set.
#[derive(Debug)]
pub(crate) struct StartGate {
    base: Instant,
    /// Nanoseconds after `base`, plus one; zero while the gate is closed.
    at: AtomicU64,
}

impl StartGate {
    pub(crate) fn closed() -> Self {
        StartGate { base: Instant::now(), at: AtomicU64::new(0) }
    }

    /// The earliest instant the gate can name: a start at or before it is a start at once.
    pub(crate) fn base(&self) -> Instant {
        self.base
    }

    /// Opens the gate at `at` (at once if it is past). Only the first call counts.
    pub(crate) fn open_at(&self, at: Instant) {
        let nanos = at.saturating_duration_since(self.base).as_nanos().min(u128::from(u64::MAX - 1)) as u64;
        let _ = self.at.compare_exchange(0, nanos + 1, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The start instant, once one is set.
    pub(crate) fn at(&self) -> Option<Instant> {
        match self.at.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.base + Duration::from_nanos(n - 1)),
        }
    }
}
