//! Statistics a run keeps: counters and HdrHistograms, kept per thread and merged exactly.

mod counters;
mod histogram;
mod names;
mod retry_after;
mod scenarios;
mod spans;
mod table;

pub use counters::{Counters, ErrorKind};
pub use histogram::{HistogramError, decode_histogram, encode_histogram, new_histogram};
pub(crate) use names::{Kind, NameSamples};
pub use names::{NameStats, Names};
pub use retry_after::{RetryAfter, RetryAfterCounts};
pub use scenarios::{ScenarioStats, Scenarios};
pub(crate) use spans::Spans;
pub use table::Merge;

use hdrhistogram::Histogram;
use std::time::Duration;

/// Histograms of one run or of one interval; every value is in nanoseconds.
#[derive(Debug, Clone)]
pub struct Histograms {
    /// Request latency: from when the request was due to the last byte of its response. In the
    /// closed model a request is due when it is sent; in the open model (a rate) it may be
    /// sent late, and the wait counts (corrected for coordinated omission).
    pub latency: Histogram<u64>,
    /// Open model: service time, from when the request was sent to the last byte of its
    /// response. Empty in the closed model, where it equals the latency.
    pub service: Histogram<u64>,
    /// Open model: for each request sent, how long after its due instant.
    pub lateness: Histogram<u64>,
    /// Connection set-up: TCP connect plus, for https, the TLS handshake.
    pub connect: Histogram<u64>,
    /// Time to the first byte of the response.
    pub ttfb: Histogram<u64>,
    /// The client's hold: for each response, how long its completion was held to collect a
    /// larger batch before it was seen (part of its latency). Zero for most at light loads.
    pub hold: Histogram<u64>,
}

impl Histograms {
    pub fn new() -> Self {
        Histograms {
            latency: new_histogram(),
            connect: new_histogram(),
            ttfb: new_histogram(),
            hold: new_histogram(),
            service: new_histogram(),
            lateness: new_histogram(),
        }
    }

    /// Adds every sample of `other`. Both sides share the same bounds, so this cannot fail.
    pub fn merge(&mut self, other: &Histograms) {
        for (into, from) in [
            (&mut self.latency, &other.latency),
            (&mut self.connect, &other.connect),
            (&mut self.ttfb, &other.ttfb),
            (&mut self.hold, &other.hold),
            (&mut self.service, &other.service),
            (&mut self.lateness, &other.lateness),
        ] {
            into.add(from).expect("volley histograms share one range");
        }
    }
}

impl Default for Histograms {
    fn default() -> Self {
        Self::new()
    }
}

/// Counters and histograms together: what a thread, a worker or a whole run measured.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub counters: Counters,
    pub histograms: Histograms,
    /// A mix's statistics per name (empty without a mix): each request is in its name's as
    /// well as in `counters` and `histograms`.
    pub names: Names,
    /// A scenario run's statistics per scenario (empty otherwise), by its index.
    pub scenarios: Scenarios,
}

impl Stats {
    pub fn new() -> Self {
        Stats::default()
    }

    pub fn merge(&mut self, other: &Stats) {
        self.counters.merge(&other.counters);
        self.histograms.merge(&other.histograms);
        self.names.merge(&other.names);
        self.scenarios.merge(&other.scenarios);
    }

    /// Records one sample, clamping (and counting) a value beyond the histogram's range so that
    /// no sample is ever dropped silently.
    pub(crate) fn record(counters: &mut Counters, hist: &mut Histogram<u64>, value: Duration) {
        Stats::record_n(counters, hist, value, 1);
    }

    /// Records `n` samples of one value, as [`Stats::record`] does one.
    pub(crate) fn record_n(counters: &mut Counters, hist: &mut Histogram<u64>, value: Duration, n: u64) {
        let mut nanos = nanos_of(value).max(1);
        if nanos > histogram::HIGHEST {
            counters.clamped += n;
            nanos = histogram::HIGHEST;
        }
        // Grows the counts to cover the value if needed (never saturating_record, which would
        // clamp to what the counts cover so far); within HIGHEST it cannot fail.
        hist.record_n(nanos, n).expect("a value within HIGHEST fits an auto-resizing histogram");
    }
}

/// `d` in nanoseconds, saturating (at 584 years).
pub(crate) fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One interval's worth of progress, handed out once per second while a run goes on.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Time since the run's start at the end of this interval.
    pub elapsed: Duration,
    /// What happened during the interval alone.
    pub delta: Stats,
    /// The interval is one of the warm-up's: its counts are the warm-up's, not the measurement's.
    pub warm_up: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    #[test]
    fn merged_histograms_have_the_percentiles_of_all_samples_together() {
        let mut parts = [Stats::new(), Stats::new(), Stats::new()];
        let mut all = Stats::new();
        let mut rng = Rng(12345);
        for i in 0..30_000u64 {
            // Spread over six orders of magnitude.
            let v = Duration::from_nanos(1_000 + rng.next() % 1_000_000_000);
            let part = &mut parts[(i % 3) as usize];
            Stats::record(&mut part.counters, &mut part.histograms.latency, v);
            Stats::record(&mut all.counters, &mut all.histograms.latency, v);
        }
        let mut merged = Stats::new();
        for p in &parts {
            merged.merge(p);
        }
        let (m, a) = (&merged.histograms.latency, &all.histograms.latency);
        assert_eq!(m.len(), a.len());
        for q in [0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(m.value_at_quantile(q), a.value_at_quantile(q), "q={q}");
        }
        assert_eq!(m.min(), a.min());
        assert_eq!(m.max(), a.max());
    }

    #[test]
    fn a_value_beyond_what_the_counts_cover_so_far_is_recorded_where_it_belongs() {
        let mut s = Stats::new();
        Stats::record_n(&mut s.counters, &mut s.histograms.hold, Duration::from_millis(5), 7);
        Stats::record(&mut s.counters, &mut s.histograms.latency, Duration::from_secs(100));
        assert!(s.histograms.hold.equivalent(s.histograms.hold.value_at_quantile(0.5), 5_000_000));
        assert_eq!(s.histograms.hold.len(), 7);
        assert!(s.histograms.latency.equivalent(s.histograms.latency.max(), 100_000_000_000));
        assert_eq!(s.counters.clamped, 0);
    }

    #[test]
    fn a_value_beyond_the_range_is_clamped_and_counted() {
        let mut s = Stats::new();
        Stats::record(&mut s.counters, &mut s.histograms.latency, Duration::from_secs(10 * 3600));
        assert_eq!(s.histograms.latency.len(), 1);
        assert_eq!(s.counters.clamped, 1);
        let h = &s.histograms.latency;
        assert!(h.equivalent(h.max(), histogram::HIGHEST));
    }
}
