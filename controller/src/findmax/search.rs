//! The search policy, as a state machine that does no I/O: given the steps judged so far, the
//! next rate to try or the conclusion. Up from `start`, doubling while steps hold (never past
//! `max_rate`); after the first failure, bisection between the highest rate that held and the
//! lowest that failed, until the failure is within `precision` above the pass. At most
//! `max_steps` steps, so the search always ends.

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Run a step at this many requests per second.
    Run(u64),
    Done(Conclusion),
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conclusion {
    /// `capacity` held and `failed`, within the precision above it, did not.
    Found { capacity: u64, failed: u64 },
    /// Every step held, up to the highest rate allowed: the capacity is at least that.
    ReachedMax { capacity: u64 },
    /// The step budget ran out first: `capacity` is the highest rate that held, and `failed`
    /// the lowest that did not (if any), further apart than the precision asked.
    StepLimit { capacity: u64, failed: Option<u64> },
    /// Even the first step, at the start rate, failed.
    FirstStepFailed { failed: u64 },
}

impl Conclusion {
    /// The highest rate that held every SLO and the cadence, if any.
    pub(crate) fn capacity(self) -> Option<u64> {
        match self {
            Conclusion::Found { capacity, .. }
            | Conclusion::ReachedMax { capacity }
            | Conclusion::StepLimit { capacity, .. } => Some(capacity),
            Conclusion::FirstStepFailed { .. } => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Search {
    start: u64,
    max_rate: u64,
    max_steps: u32,
    precision: f64,
    steps: u32,
    /// The highest rate that held.
    held: Option<u64>,
    /// The lowest rate that failed.
    failed: Option<u64>,
}

impl Search {
    /// `1 <= start <= max_rate`, `max_steps >= 1` and `precision > 0`, as the flags are checked.
    pub(crate) fn new(start: u64, max_rate: u64, max_steps: u32, precision: f64) -> Search {
        Search { start, max_rate, max_steps, precision, steps: 0, held: None, failed: None }
    }

    /// The highest rate that held so far.
    pub(crate) fn held(&self) -> Option<u64> {
        self.held
    }

    /// The lowest rate that failed so far.
    pub(crate) fn failed(&self) -> Option<u64> {
        self.failed
    }

    /// A step at `rate` was judged.
    pub(crate) fn record(&mut self, rate: u64, held: bool) {
        self.steps += 1;
        if held {
            self.held = Some(self.held.map_or(rate, |h| h.max(rate)));
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
    }

    pub(crate) fn next(&self) -> Next {
        let wanted = match (self.held, self.failed) {
            (None, None) => self.start,
            (None, Some(failed)) => return Next::Done(Conclusion::FirstStepFailed { failed }),
            (Some(held), None) if held >= self.max_rate => {
                return Next::Done(Conclusion::ReachedMax { capacity: held });
            }
            (Some(held), None) => held.saturating_mul(2).min(self.max_rate),
            (Some(held), Some(failed)) => {
                // Only rates between the two are ever tried, so `held < failed`.
                let gap = failed.saturating_sub(held);
                if gap <= 1 || gap as f64 <= self.precision * held as f64 {
                    return Next::Done(Conclusion::Found { capacity: held, failed });
                }
                held + gap / 2
            }
        };
        if self.steps >= self.max_steps {
            return Next::Done(match self.held {
                Some(capacity) => Conclusion::StepLimit { capacity, failed: self.failed },
                None => Conclusion::FirstStepFailed { failed: self.failed.unwrap_or(self.start) },
            });
        }
        Next::Run(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a target that holds every rate up to `capacity`, and returns
    /// the rates it tried and how it ended.
    fn against(mut search: Search, capacity: u64) -> (Vec<u64>, Conclusion) {
        let mut tried = Vec::new();
        loop {
            match search.next() {
                Next::Run(rate) => {
                    assert!(tried.len() < 1000, "the search does not end: {tried:?}");
                    tried.push(rate);
                    search.record(rate, rate <= capacity);
                }
                Next::Done(conclusion) => return (tried, conclusion),
            }
        }
    }

    #[test]
    fn it_doubles_from_the_start_then_bisects_until_the_failure_is_within_the_precision() {
        let (tried, end) = against(Search::new(100, 1_000_000, 30, 0.05), 640);
        assert_eq!(tried, vec![100, 200, 400, 800, 600, 700, 650, 625]);
        assert_eq!(end, Conclusion::Found { capacity: 625, failed: 650 });
    }

    #[test]
    fn the_answer_is_within_the_precision_below_any_capacity() {
        for capacity in [1, 2, 3, 7, 99, 100, 101, 640, 1000, 12_345, 999_999] {
            for precision in [0.01, 0.05, 0.2] {
                let (tried, end) = against(Search::new(1, 1_000_000, 1000, precision), capacity);
                let Conclusion::Found { capacity: found, failed } = end else { panic!("{capacity}: {end:?}") };
                assert!(found <= capacity && failed > capacity, "{capacity}: {end:?} after {tried:?}");
                assert!(
                    (failed - found) as f64 <= precision * found as f64 || failed - found == 1,
                    "{capacity} at {precision}: {end:?}"
                );
                assert!(tried.len() <= 60, "{capacity}: {} steps", tried.len());
            }
        }
    }

    #[test]
    fn a_target_that_holds_everything_stops_at_the_max_rate_never_beyond() {
        let (tried, end) = against(Search::new(100, 1000, 30, 0.05), u64::MAX);
        assert_eq!(tried, vec![100, 200, 400, 800, 1000]);
        assert_eq!(end, Conclusion::ReachedMax { capacity: 1000 });
        let (tried, end) = against(Search::new(5, 5, 30, 0.05), u64::MAX);
        assert_eq!((tried, end), (vec![5], Conclusion::ReachedMax { capacity: 5 }));
    }

    #[test]
    fn a_first_step_that_fails_ends_the_search_with_no_capacity() {
        let (tried, end) = against(Search::new(100, 1000, 30, 0.05), 50);
        assert_eq!(tried, vec![100]);
        assert_eq!(end, Conclusion::FirstStepFailed { failed: 100 });
        assert_eq!(end.capacity(), None);
    }

    #[test]
    fn the_step_limit_ends_the_search_with_the_highest_rate_that_held() {
        let (tried, end) = against(Search::new(100, 1_000_000, 5, 0.01), 640);
        assert_eq!(tried, vec![100, 200, 400, 800, 600]);
        assert_eq!(end, Conclusion::StepLimit { capacity: 600, failed: Some(800) });
        let (tried, end) = against(Search::new(100, 1_000_000, 1, 0.01), 640);
        assert_eq!((tried, end), (vec![100], Conclusion::StepLimit { capacity: 100, failed: None }));
        let (_, end) = against(Search::new(100, 1_000_000, 1, 0.01), 10);
        assert_eq!(end, Conclusion::FirstStepFailed { failed: 100 });
    }
}
