//! What the daemon's handlers share: the worker's identity, its limits, and the one run it may
//! have going.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use volley_engine::RunControl;

use crate::allow::AllowList;
use crate::metrics::Exporter;

pub(crate) struct State {
    pub(crate) name: String,
    /// Physical cores: the thread count of a shard that leaves it to the worker.
    pub(crate) cores: usize,
    pub(crate) kernel: String,
    pub(crate) allow: AllowList,
    /// `--prometheus`: every run's seconds and totals go here too.
    pub(crate) metrics: Option<Arc<Exporter>>,
    busy: AtomicBool,
    /// The run in progress, so that shutting down can stop it.
    current: Mutex<Option<RunControl>>,
}

impl State {
    pub(crate) fn new(name: String, cores: usize, kernel: String, allow: AllowList) -> State {
        State { name, cores, kernel, allow, metrics: None, busy: AtomicBool::new(false), current: Mutex::new(None) }
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Takes the worker for a run controlled by `control`; None when another run has it.
    pub(crate) fn try_begin(self: &Arc<Self>, control: &RunControl) -> Option<Busy> {
        self.busy.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok()?;
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(control.clone());
        Some(Busy { state: self.clone() })
    }

    /// Stops the run in progress, if any.
    pub(crate) fn stop_current(&self) {
        if let Some(control) = &*self.current.lock().unwrap_or_else(PoisonError::into_inner) {
            control.stop();
        }
    }
}

/// The worker is taken while this lives; dropping it (however the run ends, a panic included)
/// frees the worker for the next run.
pub(crate) struct Busy {
    state: Arc<State>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.state.current.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.state.busy.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_at_a_time_and_free_again_after_it() {
        let state = Arc::new(State::new("w".into(), 1, String::new(), AllowList::default()));
        let control = RunControl::new();
        let busy = state.try_begin(&control).expect("free");
        assert!(state.is_busy());
        assert!(state.try_begin(&RunControl::new()).is_none());
        state.stop_current();
        assert!(control.is_stopped());
        drop(busy);
        assert!(!state.is_busy());
        assert!(state.try_begin(&RunControl::new()).is_some());
    }
}
