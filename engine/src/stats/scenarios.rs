//! Statistics per scenario of a scenario run: its iterations started, completed and
//! abandoned (and, paced, late, and the slots missed), and how long a flow's completed
//! iterations took, merged exactly like the rest.
//!
//! An iteration is complete when its scenario's last step has ended (answered, after any
//! redirects it follows, or failed), whatever the answers; it is abandoned when a failed step
//! of a flow ended it with steps left (`Counters::abandoned`, counted under that step's name
//! too). What neither counts of those started was under way when the run ended. Only a flow's
//! iterations have a duration: its user sends one request at a time, so an iteration is one
//! span of its connection's time; the steps of another scenario go out as fast as the
//! connection takes them, overlapping the next iteration's, and their latencies are the steps'.

use hdrhistogram::Histogram;

use super::new_histogram;
use super::table::{Merge, Table};

/// What one scenario counted.
#[derive(Debug, Clone)]
pub struct ScenarioStats {
    pub started: u64,
    pub completed: u64,
    pub abandoned: u64,
    /// Pacing: iterations that started over a millisecond after their slot (their user was
    /// still busy with the one before, or the client was).
    pub late: u64,
    /// Pacing: slots that came due by the run's end which their users had not started, being
    /// behind their cadence (counted when a timed run ends).
    pub missed: u64,
    /// A flow's completed iterations, from the first step's due instant (its start, in the
    /// closed model) to the end of its last step, in nanoseconds; think time included.
    pub duration: Histogram<u64>,
}

impl Default for ScenarioStats {
    fn default() -> Self {
        ScenarioStats { started: 0, completed: 0, abandoned: 0, late: 0, missed: 0, duration: new_histogram() }
    }
}

impl Merge for ScenarioStats {
    fn merge(&mut self, other: &Self) {
        self.started = self.started.saturating_add(other.started);
        self.completed = self.completed.saturating_add(other.completed);
        self.abandoned = self.abandoned.saturating_add(other.abandoned);
        self.late = self.late.saturating_add(other.late);
        self.missed = self.missed.saturating_add(other.missed);
        self.duration.add(&other.duration).expect("volley histograms share one range");
    }
}

/// Each scenario's statistics, by its index among the run's scenarios.
pub type Scenarios = Table<ScenarioStats>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stats::{Counters, Stats};

    #[test]
    fn scenarios_merge_their_counts_and_durations_by_index() {
        let (mut a, mut b) = (Scenarios::default(), Scenarios::default());
        let mut clamps = Counters::default();
        let one = a.entry(1);
        (one.started, one.completed) = (3, 2);
        Stats::record(&mut clamps, &mut one.duration, Duration::from_millis(40));
        let one = b.entry(1);
        (one.started, one.completed, one.abandoned) = (2, 1, 1);
        Stats::record(&mut clamps, &mut one.duration, Duration::from_millis(80));
        b.entry(0).started = 1;
        a.merge(&b);
        let one = a.get(1).expect("merged");
        assert_eq!((one.started, one.completed, one.abandoned, one.duration.len()), (5, 3, 1, 2));
        assert!(one.duration.max() >= 80_000_000);
        assert_eq!((a.get(0).expect("merged").started, a.len()), (1, 2));
    }
}
