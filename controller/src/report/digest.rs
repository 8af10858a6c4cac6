//! A summarised worker's line: the few numbers the text and JSON reports show of a worker past
//! the run's series budget (`fleet::SeriesBudget`), taken from its statistics as they arrive,
//! after which the statistics themselves go into the run's totals and are dropped. A worker's
//! full statistics are six histograms of about 0.38 MB; a thousand workers' results arriving at
//! the run's end would otherwise all be held until the report merged them.

use hdrhistogram::Histogram;
use volley_engine::{Counters, Stats};

/// Percentiles the report lists, as (label, quantile): here, beside the digest that keeps them
/// of a summarised worker.
pub(crate) const PERCENTILES: [(&str, f64); 9] = [
    ("10", 0.10),
    ("25", 0.25),
    ("50", 0.50),
    ("75", 0.75),
    ("90", 0.90),
    ("95", 0.95),
    ("99", 0.99),
    ("99.9", 0.999),
    ("99.99", 0.9999),
];

/// What the report shows of one histogram: its count, min, mean, max and [`PERCENTILES`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistogramDigest {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    /// At each of [`PERCENTILES`], in order.
    pub percentiles: [u64; PERCENTILES.len()],
}

impl HistogramDigest {
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        HistogramDigest {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            max: h.max(),
            percentiles: PERCENTILES.map(|(_, q)| h.value_at_quantile(q)),
        }
    }

    /// The value at `quantile`, one of [`PERCENTILES`]'s; 0 for another, or when empty.
    pub(crate) fn at(&self, quantile: f64) -> u64 {
        PERCENTILES.iter().position(|&(_, q)| q == quantile).map_or(0, |i| self.percentiles[i])
    }
}

/// A summarised worker's counters and the histograms its line reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Digest {
    pub counters: Counters,
    pub latency: HistogramDigest,
    pub service: HistogramDigest,
    pub lateness: HistogramDigest,
}

impl Digest {
    pub(crate) fn of(s: &Stats) -> Self {
        let h = &s.histograms;
        Digest {
            counters: s.counters.clone(),
            latency: HistogramDigest::of(&h.latency),
            service: HistogramDigest::of(&h.service),
            lateness: HistogramDigest::of(&h.lateness),
        }
    }
}
