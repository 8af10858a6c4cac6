//! What the daemon's handlers share: the worker's identity, its limits, and the one run it may
//! have going.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use volley_engine::RunControl;

use crate::allow::AllowList;
use crate::metrics::Exporter;
use crate::runner::ShardRunner;

pub(crate) struct State {
    pub(crate) name: String,
    /// Physical cores, as Hello tells the controller: it decides a shard's threads from them
    /// unless the run names its own (`-t`).
    pub(crate) cores: usize,
    pub(crate) kernel: String,
    pub(crate) allow: AllowList,
    /// `--prometheus`: every run's seconds and totals go here too.
    pub(crate) metrics: Option<Arc<Exporter>>,
    /// What runs each admitted shard.
    pub(crate) runner: ShardRunner,
    busy: AtomicBool,
    /// The run in progress, so that shutting down can stop it and say why.
    current: Mutex<Option<(RunControl, StopCause)>>,
}

impl State {
    pub(crate) fn new(name: String, cores: usize, kernel: String, allow: AllowList) -> State {
        State {
            name,
            cores,
            kernel,
            allow,
            metrics: None,
            runner: ShardRunner::engine(),
            busy: AtomicBool::new(false),
            current: Mutex::new(None),
        }
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Takes the worker for a run controlled by `control`, whose early end the worker explains
    /// in `cause`; None when another run has it.
    pub(crate) fn try_begin(self: &Arc<Self>, control: &RunControl, cause: &StopCause) -> Option<Busy> {
        self.busy.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok()?;
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some((control.clone(), cause.clone()));
        Some(Busy { state: self.clone() })
    }

    /// Stops the run in progress, if any, telling its controller `why`.
    pub(crate) fn stop_current(&self, why: &str) {
        if let Some((control, cause)) = &*self.current.lock().unwrap_or_else(PoisonError::into_inner) {
            cause.stop(control, why);
        }
    }
}

/// Why the worker stopped a run itself, before its end (not on the controller's Stop): the
/// first reason given is kept, and the run's Finished carries it (`stopped_by`), so that the
/// controller names what ended the worker early instead of taking it for its own Ctrl-C.
#[derive(Clone, Default)]
pub(crate) struct StopCause(Arc<Mutex<Option<String>>>);

impl StopCause {
    /// Stops `control`, with `why` as the reason unless one was given already. The reason is
    /// kept before the stop, so the engine's Finished, which follows the stop, finds it.
    pub(crate) fn stop(&self, control: &RunControl, why: &str) {
        {
            let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.is_none() {
                *kept = Some(why.to_string());
            }
        }
        control.stop();
    }

    /// The reason, when the worker stopped the run itself.
    pub(crate) fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
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
        let (control, cause) = (RunControl::new(), StopCause::default());
        let busy = state.try_begin(&control, &cause).expect("free");
        assert!(state.is_busy());
        assert!(state.try_begin(&RunControl::new(), &StopCause::default()).is_none());
        assert_eq!(cause.get(), None);
        state.stop_current("the worker got SIGTERM and shut down");
        assert!(control.is_stopped());
        // The first reason stays.
        cause.stop(&control, "the worker lost its controller");
        assert_eq!(cause.get().as_deref(), Some("the worker got SIGTERM and shut down"));
        drop(busy);
        assert!(!state.is_busy());
        assert!(state.try_begin(&RunControl::new(), &StopCause::default()).is_some());
    }
}
