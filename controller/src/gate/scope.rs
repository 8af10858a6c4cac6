//! What a threshold reads: the whole run's statistics, or one name's of a mix. A name keeps its
//! outcomes, statuses, latency and time to first byte, but not connect times (a connection
//! serves every name) nor Retry-After counts, so the parser refuses those metrics per name and
//! a scope of a name has no connect histogram.

use hdrhistogram::Histogram;
use volley_engine::{CheckCounts, Counters, NameStats, Stats};

use super::parse::Timing;

pub(crate) struct Scope<'a> {
    pub counters: &'a Counters,
    pub latency: &'a Histogram<u64>,
    pub ttfb: &'a Histogram<u64>,
    /// None for a name.
    pub connect: Option<&'a Histogram<u64>>,
    /// Every check's counts together: the run's (all names') or the name's.
    pub checks: CheckCounts,
}

/// The counts of every check of `names` together.
fn all_checks<'a>(names: impl Iterator<Item = &'a NameStats>) -> CheckCounts {
    let mut all = CheckCounts::default();
    for c in names.flat_map(|n| &n.checks) {
        all.merge(c);
    }
    all
}

impl<'a> Scope<'a> {
    pub(crate) fn run(s: &'a Stats) -> Self {
        Scope {
            counters: &s.counters,
            latency: &s.histograms.latency,
            ttfb: &s.histograms.ttfb,
            connect: Some(&s.histograms.connect),
            checks: all_checks(s.names.iter().map(|(_, n)| n)),
        }
    }

    pub(crate) fn name(n: &'a NameStats) -> Self {
        Scope {
            counters: &n.counters,
            latency: &n.latency,
            ttfb: &n.ttfb,
            connect: None,
            checks: all_checks(std::iter::once(n)),
        }
    }

    pub(crate) fn histogram(&self, timing: Timing) -> Option<&'a Histogram<u64>> {
        match timing {
            Timing::Latency => Some(self.latency),
            Timing::FirstByte => Some(self.ttfb),
            Timing::Connect => self.connect,
        }
    }
}
