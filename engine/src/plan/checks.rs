//! Checks on a scenario step's responses: rules each response is held to, each counted as passed
//! or failed under its step's name. A failed check is not an error: the response came, and
//! counts as one; the check says whether it was the right one.
//!
//! These rules need only what the engine knows of every response (its status and latency), so
//! they cost nothing beyond the comparison.

use std::ops::RangeInclusive;
use std::time::Duration;

/// The most checks a mix may have in all: each name's are counted on every thread and worker.
pub const MAX_CHECKS: usize = 1000;

/// One check of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What the report calls it, under its step's name; steps sharing a name share the counts of
    /// checks of the same name.
    pub name: String,
    pub rule: Rule,
}

/// What a response must be for a check to pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Its status is one of these (each range inclusive; a single code is a range of one).
    Status(Vec<RangeInclusive<u16>>),
    /// Its latency (from due to the last byte, as the report's) is below this.
    LatencyBelow(Duration),
}

impl Rule {
    /// Whether a response of `status` that took `latency` passes.
    pub fn passes(&self, status: u16, latency: Duration) -> bool {
        match self {
            Rule::Status(ranges) => ranges.iter().any(|r| r.contains(&status)),
            Rule::LatencyBelow(bound) => latency < *bound,
        }
    }

    /// The name a check of this rule has unless the file gives one: `status is 200`,
    /// `status in 200-299, 304`, `latency < 200ms`.
    pub fn default_name(&self) -> String {
        match self {
            Rule::Status(ranges) => {
                let shown: Vec<String> = ranges
                    .iter()
                    .map(|r| {
                        if r.start() == r.end() { r.start().to_string() } else { format!("{}-{}", r.start(), r.end()) }
                    })
                    .collect();
                match ranges.as_slice() {
                    [one] if one.start() == one.end() => format!("status is {}", shown[0]),
                    _ => format!("status in {}", shown.join(", ")),
                }
            }
            Rule::LatencyBelow(bound) => format!("latency < {}", shown_duration(*bound)),
        }
    }
}

/// A bound as a person writes it: `200ms`, `1.5s`, `250us`.
fn shown_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos.is_multiple_of(1_000_000_000) {
        format!("{}s", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{}us", nanos / 1_000)
    } else {
        format!("{nanos}ns")
    }
}

/// How many responses passed and failed one check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckCounts {
    pub passed: u64,
    pub failed: u64,
}

impl CheckCounts {
    /// Adds `other`'s, saturating: a worker's counts are checked against its ok responses
    /// before they are merged, so only a lie could reach the top.
    pub fn merge(&mut self, other: &CheckCounts) {
        self.passed = self.passed.saturating_add(other.passed);
        self.failed = self.failed.saturating_add(other.failed);
    }

    /// Responses judged, saturating.
    pub fn total(&self) -> u64 {
        self.passed.saturating_add(self.failed)
    }

    /// The share of judged responses that passed, from 0 to 1; none when nothing was judged,
    /// rather than a share a `checks>X%` gate would pass.
    pub fn share_passed(&self) -> Option<f64> {
        match self.total() {
            0 => None,
            total => Some(self.passed as f64 / total as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_rule_passes_codes_in_any_of_its_ranges_and_no_other() {
        let rule = Rule::Status(vec![200..=299, 304..=304]);
        let ms = Duration::from_millis(1);
        for status in [200, 204, 299, 304] {
            assert!(rule.passes(status, ms), "{status}");
        }
        for status in [199, 300, 303, 305, 404, 500] {
            assert!(!rule.passes(status, ms), "{status}");
        }
    }

    #[test]
    fn a_latency_rule_passes_only_below_its_bound() {
        let rule = Rule::LatencyBelow(Duration::from_millis(200));
        assert!(rule.passes(200, Duration::from_micros(199_999)));
        assert!(!rule.passes(200, Duration::from_millis(200)));
        assert!(!rule.passes(200, Duration::from_secs(3)));
    }

    #[test]
    fn default_names_say_the_rule() {
        assert_eq!(Rule::Status(vec![200..=200]).default_name(), "status is 200");
        assert_eq!(Rule::Status(vec![200..=299, 304..=304]).default_name(), "status in 200-299, 304");
        assert_eq!(Rule::Status(vec![201..=201, 202..=202]).default_name(), "status in 201, 202");
        assert_eq!(Rule::LatencyBelow(Duration::from_millis(200)).default_name(), "latency < 200ms");
        assert_eq!(Rule::LatencyBelow(Duration::from_micros(1500)).default_name(), "latency < 1500us");
        assert_eq!(Rule::LatencyBelow(Duration::from_secs(2)).default_name(), "latency < 2s");
    }

    #[test]
    fn counts_merge_by_adding() {
        let mut a = CheckCounts { passed: 3, failed: 1 };
        a.merge(&CheckCounts { passed: 2, failed: 5 });
        assert_eq!(a, CheckCounts { passed: 5, failed: 6 });
        assert_eq!(a.total(), 11);
    }

    #[test]
    fn the_share_passed_is_none_until_something_is_judged() {
        assert_eq!(CheckCounts::default().share_passed(), None);
        assert_eq!(CheckCounts { passed: 3, failed: 1 }.share_passed(), Some(0.75));
        assert_eq!(CheckCounts { passed: 0, failed: 2 }.share_passed(), Some(0.0));
    }
}
