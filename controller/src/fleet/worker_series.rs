//! How much of each worker's own part a run keeps beyond its totals: its per-second series and,
//! in the JSON report, its histograms. Full detail for the first [`DETAILED_WORKERS`] workers;
//! the rest are summarised (their counts, percentiles and failures, with no series and no
//! histograms), and each detailed worker's series stops at its share of [`SERIES_SECONDS`].
//! The run's merged totals, histograms and per-second series are never touched by this: they
//! are merged from every interval and result as before.
//!
//! Measured: a worker's second costs the controller about 200 bytes held and 300 bytes of JSON,
//! and its histograms about 8 KB of JSON; 1,000 workers over 60 s kept in full made a report of
//! about 30 MB, and an hour of 100 workers about 40 MB. With these bounds a report's per-worker
//! part is at most about 11 MB (series) plus 0.8 MB (histograms), whatever the run's size.

/// Workers whose series and histograms are kept in full.
pub(crate) const DETAILED_WORKERS: usize = 100;
/// Per-worker seconds kept over all detailed workers together (100 workers × 6 minutes, or
/// 10 workers × 1 hour).
pub(crate) const SERIES_SECONDS: usize = 36_000;

/// What a run keeps of its workers' own parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeriesBudget {
    /// Workers in the run.
    pub workers: usize,
    /// The first this many (by their place in `--workers`) keep series and histograms.
    pub detailed: usize,
    /// Seconds of series each detailed worker keeps at most.
    pub seconds_each: usize,
}

impl SeriesBudget {
    pub(crate) fn for_workers(workers: usize) -> SeriesBudget {
        let detailed = workers.min(DETAILED_WORKERS);
        SeriesBudget { workers, detailed, seconds_each: SERIES_SECONDS / detailed.max(1) }
    }

    pub(crate) fn is_detailed(&self, worker: usize) -> bool {
        worker < self.detailed
    }

    /// Workers whose series and histograms were not kept.
    pub(crate) fn summarised(&self) -> usize {
        self.workers - self.detailed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_fleet_keeps_everything_and_a_large_one_the_first_hundred() {
        let small = SeriesBudget::for_workers(3);
        assert_eq!((small.detailed, small.summarised(), small.seconds_each), (3, 0, 12_000));
        let large = SeriesBudget::for_workers(1_000);
        assert_eq!((large.detailed, large.summarised(), large.seconds_each), (100, 900, 360));
        assert!(large.is_detailed(99) && !large.is_detailed(100));
    }
}
