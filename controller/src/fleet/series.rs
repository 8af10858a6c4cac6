//! What the per-second series says of each second beside its counts: whether it belongs to the
//! warm-up, and in the open model the stage under way and the requests the schedule asked for
//! in it (the sum of what every shard's schedule asked, so it is what was really scheduled);
//! with a ramp of the connection count, the stage and the connections it has open at the
//! second's end (the engine's own count, which the shards' add up to).

use std::time::Duration;

use volley_engine::{ConnectionIndices, Load, Plan, Stage, connections_at, requested_between, stage_at};

/// The run's profile, from its shards.
#[derive(Debug, Clone, Default)]
pub(crate) struct Profile {
    /// The first this many seconds are the warm-up.
    pub warm_up_seconds: u32,
    /// Per shard, the rate its schedule starts from; empty in the closed model.
    starts: Vec<u64>,
    /// Per shard, its share of each stage (all the same durations), and its phase.
    stages: Vec<Vec<Stage>>,
    phases: Vec<f64>,
    /// Closed model with stages: the whole run's connection counts (every shard has them), and
    /// per shard which of the run's connections are its own, and how many.
    connection_stages: Vec<Stage>,
    ramps: Vec<(ConnectionIndices, usize)>,
    /// For each name of the mix (every shard has the whole mix), how many checks it has: a
    /// worker's counts of more are not believed.
    pub checks: Vec<usize>,
}

/// One second's place in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Label {
    pub warm_up: bool,
    /// With stages: the stage under way in the second (from 1), by its start.
    pub stage: Option<usize>,
    /// Open model: the requests due in the second.
    pub requested: Option<u64>,
    /// A ramp of the connection count: the connections it has open at the second's end.
    pub target_connections: Option<u64>,
}

impl Profile {
    pub(crate) fn new(shards: &[&Plan]) -> Profile {
        let warm_up_seconds =
            shards.first().and_then(|s| s.warm_up).map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
        let checks = shards.first().map(|s| s.requests.check_names().iter().map(Vec::len).collect());
        let mut profile = Profile { warm_up_seconds, checks: checks.unwrap_or_default(), ..Default::default() };
        for shard in shards {
            match &shard.load {
                Load::Open { rate, stages, phase, .. } => {
                    profile.starts.push(rate.per_second);
                    profile.stages.push(stages.clone());
                    profile.phases.push(*phase);
                }
                Load::Closed { ramp, indices } if !ramp.is_empty() => {
                    // Every shard has the whole run's.
                    profile.connection_stages.clone_from(ramp);
                    profile.ramps.push((*indices, shard.connections));
                }
                Load::Closed { .. } => {}
            }
        }
        profile
    }

    /// A ramp of the connection count: its stages (the whole run's); empty otherwise.
    pub(crate) fn connection_stages(&self) -> &[Stage] {
        &self.connection_stages
    }

    /// Second `second` (from 1) of the whole run.
    pub(crate) fn whole(&self, second: u32) -> Label {
        self.label(second, 0..self.starts.len().max(self.ramps.len()))
    }

    /// Second `second` of shard `shard`'s run.
    pub(crate) fn shard(&self, shard: usize, second: u32) -> Label {
        self.label(second, shard..shard + 1)
    }

    fn label(&self, second: u32, shards: std::ops::Range<usize>) -> Label {
        let from = Duration::from_secs(u64::from(second.saturating_sub(1)));
        let to = Duration::from_secs(u64::from(second));
        let requested = (!self.starts.is_empty()).then(|| {
            let open = shards.start.min(self.starts.len())..shards.end.min(self.starts.len());
            open.map(|i| requested_between(self.starts[i], &self.stages[i], self.phases[i], from, to)).sum()
        });
        let ramp = &self.connection_stages;
        let target_connections = (!ramp.is_empty()).then(|| {
            let own = self.ramps.get(shards.start.min(self.ramps.len())..shards.end.min(self.ramps.len()));
            own.unwrap_or_default().iter().map(|(indices, n)| connections_at(ramp, *indices, *n, to)).sum()
        });
        Label {
            warm_up: second <= self.warm_up_seconds,
            stage: match self.stages.first() {
                Some(stages) => stage_at(stages, from),
                None => stage_at(ramp, from),
            },
            requested,
            target_connections,
        }
    }

    /// The seconds of warm-up as a duration.
    pub(crate) fn warm_up(&self) -> Duration {
        Duration::from_secs(u64::from(self.warm_up_seconds))
    }

    /// Open model: the requests per second asked for over the measured part of the run (after
    /// the warm-up, up to `end`): the rate with a constant one, the average with stages.
    pub(crate) fn asked_rate(&self, shard: Option<usize>, end: Duration) -> Option<u64> {
        if self.starts.is_empty() {
            return None;
        }
        let range = match shard {
            Some(i) => i..(i + 1).min(self.starts.len()),
            None => 0..self.starts.len(),
        };
        if self.stages.iter().all(Vec::is_empty) {
            return Some(range.map(|i| self.starts[i]).sum());
        }
        let from = self.warm_up().min(end);
        let secs = end.saturating_sub(from).as_secs_f64();
        let due: u64 =
            range.map(|i| requested_between(self.starts[i], &self.stages[i], self.phases[i], from, end)).sum();
        Some(if secs > 0.0 { (due as f64 / secs).round() as u64 } else { 0 })
    }
}
