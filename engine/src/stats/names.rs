//! Statistics per name of a mix: each name's outcomes, status codes, latency and time to first
//! byte, kept beside the run's (which stay the sum over names) and merged exactly like them.
//!
//! A name is an index into the mix's names (`Mix::names`), the same on every thread and worker;
//! names without a sample in a part (a thread's second, a worker's interval) are absent from
//! it, so a second in which few names moved costs only those.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::table::{Merge, Table};
use super::{Counters, Spans, Stats, new_histogram};
use crate::plan::CheckCounts;

/// What one name measured. Of its counters, the outcomes (ok, errors by kind) and the status
/// codes are kept; bytes, connections and the open model's counts are the run's only.
#[derive(Debug, Clone)]
pub struct NameStats {
    pub counters: Counters,
    /// From due (or sent, in the closed model) to the response's last byte, in nanoseconds.
    pub latency: Histogram<u64>,
    /// To the response's first byte.
    pub ttfb: Histogram<u64>,
    /// Its checks' counts, by the check's index among the name's (`Mix::check_names`); checks
    /// past the end have counted nothing.
    pub checks: Vec<CheckCounts>,
}

impl NameStats {
    pub fn new() -> Self {
        NameStats { counters: Counters::default(), latency: new_histogram(), ttfb: new_histogram(), checks: Vec::new() }
    }

    pub fn merge(&mut self, other: &NameStats) {
        self.counters.merge(&other.counters);
        self.latency.add(&other.latency).expect("volley histograms share one range");
        self.ttfb.add(&other.ttfb).expect("volley histograms share one range");
        for (k, counts) in other.checks.iter().enumerate() {
            self.check(k).merge(counts);
        }
    }

    /// The counts of check `k` (of the name's), made empty when it has none yet.
    pub fn check(&mut self, k: usize) -> &mut CheckCounts {
        if self.checks.len() <= k {
            self.checks.resize(k + 1, CheckCounts::default());
        }
        &mut self.checks[k]
    }
}

impl Default for NameStats {
    fn default() -> Self {
        NameStats::new()
    }
}

/// Each name's statistics, by its index; a name with nothing counted yet has none.
pub type Names = Table<NameStats>;

impl Merge for NameStats {
    fn merge(&mut self, other: &Self) {
        NameStats::merge(self, other);
    }
}

/// Which of a name's histograms a sample is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    FirstByte,
    Latency,
}

/// How many samples wait before they are recorded.
const BATCH: usize = 256;

/// Names whose runs of equal spans are gathered at once within a receive; a sample of
/// another name waits on its own.
const RUNS: usize = 8;

/// Names' samples on their way into their histograms, in two steps.
///
/// Within a receive, a name's spans often repeat (its responses share an arrival, and their
/// requests a send): equal spans in a row are one sample of n, as the run's totals' are
/// ([`Spans`]). A name's run ends at a different span, or at [`NameSamples::end_receive`].
///
/// Ended runs wait and are recorded a batch at a time. A mix's samples come in turn from each
/// of its names, and each name's two histograms cover the spread of its latencies (at 3
/// digits, some thousands of counts): recorded one at a time, as they came, nearly every one
/// missed the cache, 25 ns a sample with 8 names and 90 with 64. Recorded together, in one
/// tight loop, the misses overlap. [`NameSamples::record`] before the names are read: what
/// waits is in no histogram yet.
#[derive(Debug, Default)]
pub(crate) struct NameSamples {
    runs: Vec<NameRuns>,
    waiting: Vec<(u32, Kind, Duration, u64)>,
}

/// One name's runs of equal spans, pending within a receive.
#[derive(Debug)]
struct NameRuns {
    name: usize,
    ttfb: Spans,
    latency: Spans,
}

impl NameRuns {
    fn of(&mut self, kind: Kind) -> &mut Spans {
        match kind {
            Kind::FirstByte => &mut self.ttfb,
            Kind::Latency => &mut self.latency,
        }
    }
}

impl NameSamples {
    /// A span from `from` to `to` (zero if `to` is earlier) for `name`'s `kind` histogram.
    #[inline]
    pub(crate) fn span(&mut self, names: &mut Names, name: usize, kind: Kind, from: Instant, to: Instant) {
        let ended = match self.runs.iter().position(|r| r.name == name) {
            Some(k) => self.runs[k].of(kind).push(from, to),
            None if self.runs.len() < RUNS => {
                let mut runs = NameRuns { name, ttfb: Spans::default(), latency: Spans::default() };
                runs.of(kind).push(from, to);
                self.runs.push(runs);
                None
            }
            None => Some((to.saturating_duration_since(from), 1)),
        };
        if let Some((span, n)) = ended {
            self.wait(names, name, kind, span, n);
        }
    }

    /// The receive is handled: every name's run ends.
    #[inline]
    pub(crate) fn end_receive(&mut self, names: &mut Names) {
        if self.runs.is_empty() {
            return;
        }
        for r in &mut self.runs {
            for kind in [Kind::FirstByte, Kind::Latency] {
                if let Some((span, n)) = r.of(kind).take() {
                    self.waiting.push((r.name as u32, kind, span, n));
                }
            }
        }
        self.runs.clear();
        if self.waiting.len() >= BATCH {
            self.record_waiting(names);
        }
    }

    /// Records every sample pending, runs and batch, into `names`.
    pub(crate) fn record(&mut self, names: &mut Names) {
        self.end_receive(names);
        self.record_waiting(names);
    }

    /// Records the batch (not the runs still pending) into `names`.
    fn record_waiting(&mut self, names: &mut Names) {
        for (name, kind, span, n) in self.waiting.drain(..) {
            let stats = names.entry(name as usize);
            let hist = match kind {
                Kind::FirstByte => &mut stats.ttfb,
                Kind::Latency => &mut stats.latency,
            };
            Stats::record_n(&mut stats.counters, hist, span, n);
        }
    }

    /// `n` samples of `span`, waiting; the batch is recorded once it is full.
    #[inline]
    fn wait(&mut self, names: &mut Names, name: usize, kind: Kind, span: Duration, n: u64) {
        self.waiting.push((name as u32, kind, span, n));
        if self.waiting.len() >= BATCH {
            self.record_waiting(names);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::stats::Stats;

    #[test]
    fn check_counts_merge_by_the_checks_index() {
        let mut a = NameStats::new();
        a.check(0).passed += 2;
        let mut b = NameStats::new();
        b.check(2).failed += 1;
        b.check(0).passed += 1;
        a.merge(&b);
        assert_eq!(
            a.checks,
            [CheckCounts { passed: 3, failed: 0 }, CheckCounts::default(), CheckCounts { passed: 0, failed: 1 }]
        );
    }

    #[test]
    fn names_samples_wait_for_a_full_batch_or_a_record_and_each_goes_to_its_names_histogram() {
        let (mut names, mut samples) = (Names::default(), NameSamples::default());
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        for _ in 0..3 {
            samples.span(&mut names, 2, Kind::FirstByte, t0, ms(1));
        }
        samples.span(&mut names, 0, Kind::Latency, t0, ms(2));
        samples.span(&mut names, 2, Kind::Latency, t0, t0 + Duration::from_secs(7200));
        samples.span(&mut names, 2, Kind::Latency, t0, t0 + Duration::from_secs(7200));
        samples.end_receive(&mut names);
        assert!(names.is_empty(), "nothing is recorded before the batch is full");
        samples.record(&mut names);
        let two = names.get(2).expect("recorded");
        assert_eq!((two.ttfb.len(), two.ttfb.count_at(1_000_000)), (3, 3));
        assert_eq!(two.latency.len(), 2);
        assert_eq!(two.counters.clamped, 2, "a span beyond the range is clamped and counted");
        assert_eq!(names.get(0).expect("recorded").latency.count_at(2_000_000), 1);
        samples.record(&mut names);
        assert_eq!(names.get(2).expect("recorded").ttfb.len(), 3, "a second record adds nothing again");
        // Each span differs from the one before: BATCH runs end, and the batch is recorded.
        for k in 0..=BATCH as u64 {
            samples.span(&mut names, 1, Kind::Latency, t0, t0 + Duration::from_micros(k + 1));
        }
        assert_eq!(names.get(1).expect("a full batch is recorded").latency.len(), BATCH as u64);
        samples.record(&mut names);
        assert_eq!(names.get(1).expect("recorded").latency.len(), BATCH as u64 + 1);
    }

    #[test]
    fn a_receive_of_more_names_than_runs_records_every_names_samples() {
        let (mut names, mut samples) = (Names::default(), NameSamples::default());
        let t0 = Instant::now();
        let names_n = RUNS + 3;
        for round in 0..2 {
            for name in 0..names_n {
                samples.span(&mut names, name, Kind::Latency, t0, t0 + Duration::from_micros(100 + round));
                samples.span(&mut names, name, Kind::FirstByte, t0, t0 + Duration::from_micros(50));
            }
        }
        samples.record(&mut names);
        for name in 0..names_n {
            let stats = names.get(name).expect("recorded");
            assert_eq!((stats.latency.len(), stats.ttfb.len()), (2, 2), "name {name}");
            assert_eq!(stats.latency.count_at(100_000), 1, "name {name}");
            assert_eq!(stats.ttfb.count_at(50_000), 2, "name {name}");
        }
    }

    #[test]
    fn names_merge_by_index_and_absent_names_stay_absent() {
        let mut a = Names::default();
        let mut b = Names::default();
        let one = a.entry(1);
        one.counters.ok += 2;
        Stats::record(&mut one.counters, &mut one.latency, Duration::from_millis(3));
        let three = b.entry(3);
        three.counters.status(404);
        let one = b.entry(1);
        one.counters.ok += 1;
        Stats::record(&mut one.counters, &mut one.latency, Duration::from_millis(9));
        a.merge(&b);
        assert_eq!(a.iter().map(|(i, _)| i).collect::<Vec<_>>(), [1, 3]);
        assert!(a.get(0).is_none() && a.get(2).is_none());
        let one = a.get(1).expect("merged");
        assert_eq!((one.counters.ok, one.latency.len()), (3, 2));
        assert_eq!(a.get(3).expect("merged").counters.statuses().collect::<Vec<_>>(), [(404, 1)]);
        assert_eq!(a.len(), 4);
        assert!(a.get(1).expect("merged").checks.is_empty());
        assert!(Names::default().is_empty());
    }
}
