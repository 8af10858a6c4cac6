//! The rules every plan keeps, whoever built it: the command line, or a controller over the
//! wire. One function, called by the engine before a run and by the worker as a shard arrives,
//! so a rule the command line keeps cannot be broken by a shard (a plan of stages and a request
//! count, say, that would never end).

use std::time::Duration;

use super::{
    MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_DURATION, MAX_HOLD, MAX_RATE, MAX_STAGES, MAX_THREADS, Plan, Protocol, Stop,
};

/// Why a plan cannot run, in words that name the limit it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(String);

impl Plan {
    /// Checks the plan against every limit a run has; the first broken one is the error.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |why: String| Err(PlanError(why));
        if self.connections == 0 {
            return bad("connections must be at least 1".into());
        }
        if self.connections > MAX_CONNECTIONS {
            return bad(format!("{} connections is more than the {MAX_CONNECTIONS} a run may have", self.connections));
        }
        if self.threads == 0 {
            return bad("threads must be at least 1".into());
        }
        if self.threads > MAX_THREADS {
            return bad(format!("{} threads is more than the {MAX_THREADS} a run may have", self.threads));
        }
        if self.stop == Stop::Requests(0) {
            return bad("requests must be at least 1".into());
        }
        if self.request.body.len() > MAX_BODY_BYTES {
            return bad(format!(
                "a body of {} bytes is more than the {MAX_BODY_BYTES} bytes (64 MiB) a request may carry",
                self.request.body.len()
            ));
        }
        match self.protocol {
            Protocol::Http2 { streams: 0 } | Protocol::Http3 { streams: 0 } => {
                return bad("streams per connection must be at least 1".into());
            }
            _ => {}
        }
        let run_length = match self.stop {
            Stop::Duration(d) => d,
            Stop::Requests(_) => Duration::ZERO,
        };
        let days = MAX_DURATION.as_secs() / 86_400;
        if [run_length, self.connect_timeout, self.request_timeout.unwrap_or_default()]
            .iter()
            .any(|d| *d > MAX_DURATION)
        {
            return bad(format!("the run's duration and timeouts must be at most {days} days"));
        }
        if self.connect_timeout.is_zero() {
            return bad("the connect timeout must be longer than zero".into());
        }
        if let Some(rate) = self.rate {
            let peak = self.peak_rate().unwrap_or(0);
            if peak == 0 {
                return bad("the rate must be at least 1 request per second".into());
            }
            if peak > MAX_RATE {
                return bad(format!("a rate of {peak} requests per second is more than the {MAX_RATE} a run may ask"));
            }
            if rate.offset > MAX_DURATION {
                return bad(format!("the rate's offset must be at most {days} days"));
            }
        }
        self.validate_stages()?;
        if let Some(warm_up) = self.warm_up {
            if warm_up.is_zero() || warm_up.subsec_nanos() != 0 {
                return bad("the warm-up must be a whole number of seconds, at least 1".into());
            }
            if warm_up > MAX_DURATION {
                return bad(format!("the warm-up must be at most {days} days"));
            }
            if matches!(self.stop, Stop::Duration(d) if warm_up >= d) {
                return bad("the warm-up must be shorter than the run".into());
            }
        }
        if self.max_hold > MAX_HOLD {
            return bad(format!("a hold of {:?} is more than the {MAX_HOLD:?} a run may ask", self.max_hold));
        }
        Ok(())
    }

    /// The stages (the rate's, or without one the connection count's): within the limits, and
    /// the run's whole length.
    fn validate_stages(&self) -> Result<(), PlanError> {
        let bad = |why: String| Err(PlanError(why));
        if self.stages.is_empty() {
            return Ok(());
        }
        if matches!(self.stop, Stop::Requests(_)) {
            return bad("stages with a request count: the stages are the run's length, so it would never end".into());
        }
        if self.stages.len() > MAX_STAGES {
            return bad(format!("{} stages is more than the {MAX_STAGES} a run may have", self.stages.len()));
        }
        if self.ramps_connections() {
            if self.stages.iter().all(|s| s.target == 0) {
                return bad("stages that never open a connection".into());
            }
            if self.stages.iter().any(|s| s.target > MAX_CONNECTIONS as u64) {
                return bad(format!("a stage of more than the {MAX_CONNECTIONS} connections a run may have"));
            }
            let indices = self.connection_indices;
            let last = indices.step.checked_mul(self.connections as u64 - 1).and_then(|l| l.checked_add(indices.first));
            if indices.step == 0 || last.is_none_or(|l| l >= MAX_CONNECTIONS as u64) {
                return bad(format!("connection indices beyond the {MAX_CONNECTIONS} connections a run may have"));
            }
        } else if !(self.stage_phase > 0.0 && self.stage_phase <= 1.0) {
            return bad("the stages' phase must be above 0 and at most 1".into());
        }
        if self.stages.iter().any(|s| s.duration.is_zero()) {
            return bad("a stage must last longer than zero".into());
        }
        let total = self.stages.iter().try_fold(Duration::ZERO, |sum, s| sum.checked_add(s.duration));
        if total.is_none_or(|t| t > MAX_DURATION) {
            return bad(format!("the stages must last at most {} days in all", MAX_DURATION.as_secs() / 86_400));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
