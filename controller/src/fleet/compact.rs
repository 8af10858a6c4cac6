//! A remote worker's running sum of intervals, kept small. The sum exists only so that a worker
//! lost before its result still counts exactly what its intervals said; most workers finish and
//! it is thrown away. Kept as HdrHistograms it was six dense count arrays of about 0.38 MB per
//! worker (1 ns resolution up to the largest latency), 380 MB at 1,000 workers; the counts that
//! are not zero (a few thousand even after an hour, the distribution's width at 3 digits) take
//! a tenth of that or less, kept here as (index, count) pairs in index order. Exact: turned back
//! into a histogram it has the same counts, so the same encoding, percentiles, min, max and mean.

use hdrhistogram::Histogram;
use volley_engine::{Counters, Histograms, Names, Scenarios, Stats, new_histogram};

/// Sub-buckets per bucket of volley's histograms (1 ns lowest, 3 significant digits: the
/// smallest power of two above 2 × 10³), and its half's magnitude.
const SUB_BUCKETS: u64 = 2048;
const HALF_MAGNITUDE: u32 = 10;
/// 64 − unit magnitude (0, lowest 1 ns) − half magnitude − 1: HdrHistogram's bucket of a value
/// is this less the leading zeros of the value with its sub-bucket bits set.
const LEADING_ZERO_BASE: u32 = 64 - HALF_MAGNITUDE - 1;

/// Where `value` is counted in a histogram of volley's shape (HdrHistogram's counts index).
fn index_of(value: u64) -> u32 {
    let bucket = LEADING_ZERO_BASE - (value | (SUB_BUCKETS - 1)).leading_zeros();
    let sub = value >> bucket;
    // At most 43 buckets of 1,024 counts past the first: far below u32::MAX.
    ((u64::from(bucket + 1) << HALF_MAGNITUDE) + sub - (SUB_BUCKETS / 2)) as u32
}

/// The lowest value counted at `index`: recorded, it lands at that index again.
fn value_at(index: u32) -> u64 {
    let index = u64::from(index);
    let half = SUB_BUCKETS / 2;
    match (index >> HALF_MAGNITUDE).checked_sub(1) {
        Some(bucket) => ((index & (half - 1)) + half) << bucket,
        None => index,
    }
}

/// A histogram of volley's shape as its counts that are not zero, by index, in index order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Sparse {
    index: Vec<u32>,
    count: Vec<u64>,
}

impl Sparse {
    /// Adds every sample of `h`, a histogram of volley's shape.
    pub(crate) fn add(&mut self, h: &Histogram<u64>) {
        if h.is_empty() {
            return;
        }
        let mut index = Vec::with_capacity(self.index.len() + 64);
        let mut count = Vec::with_capacity(index.capacity());
        let mut mine = self.index.iter().copied().zip(self.count.iter().copied()).peekable();
        // Index by index between the lowest and highest counted, asking for each count: the
        // crate's `iter_recorded` walks the same indices at more cost (this sum took 16% of
        // the controller's time at 1,000 workers through it, 10% this way).
        for at in index_of(h.min())..=index_of(h.max()) {
            let n = h.count_at(value_at(at));
            if n == 0 {
                continue;
            }
            while let Some((i, m)) = mine.next_if(|&(i, _)| i < at) {
                index.push(i);
                count.push(m);
            }
            let same = mine.next_if(|&(i, _)| i == at).map_or(0, |(_, m)| m);
            index.push(at);
            count.push(same.saturating_add(n));
        }
        for (i, n) in mine {
            index.push(i);
            count.push(n);
        }
        self.index = index;
        self.count = count;
    }

    /// The histogram these counts are.
    pub(crate) fn to_histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for (&i, &n) in self.index.iter().zip(&self.count) {
            h.record_n(value_at(i), n).expect("an index of volley's shape is within its range");
        }
        h
    }

    /// Bytes held, for the tests' bounds.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.index.capacity() * 4 + self.count.capacity() * 8
    }
}

/// A [`Stats`] whose histograms are [`Sparse`]: what a remote worker's intervals add up to.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompactStats {
    counters: Counters,
    /// A mix's names and scenarios, as they are (empty without).
    names: Names,
    scenarios: Scenarios,
    latency: Sparse,
    service: Sparse,
    lateness: Sparse,
    connect: Sparse,
    ttfb: Sparse,
    hold: Sparse,
}

impl CompactStats {
    pub(crate) fn of(s: &Stats) -> Self {
        let mut c = CompactStats::default();
        c.merge(s);
        c
    }

    pub(crate) fn merge(&mut self, s: &Stats) {
        self.counters.merge(&s.counters);
        self.names.merge(&s.names);
        self.scenarios.merge(&s.scenarios);
        let h = &s.histograms;
        for (into, from) in [
            (&mut self.latency, &h.latency),
            (&mut self.service, &h.service),
            (&mut self.lateness, &h.lateness),
            (&mut self.connect, &h.connect),
            (&mut self.ttfb, &h.ttfb),
            (&mut self.hold, &h.hold),
        ] {
            into.add(from);
        }
    }

    /// The sum as the report takes it.
    pub(crate) fn to_stats(&self) -> Stats {
        Stats {
            counters: self.counters.clone(),
            histograms: Histograms {
                latency: self.latency.to_histogram(),
                service: self.service.to_histogram(),
                lateness: self.lateness.to_histogram(),
                connect: self.connect.to_histogram(),
                ttfb: self.ttfb.to_histogram(),
                hold: self.hold.to_histogram(),
            },
            names: self.names.clone(),
            scenarios: self.scenarios.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bucket's count, in order: equal lists are histograms with equal counts, so equal
    /// percentiles, min, max and mean.
    fn counts(h: &Histogram<u64>) -> Vec<(u64, u64)> {
        h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
    }

    fn assert_same(a: &Histogram<u64>, b: &Histogram<u64>, what: &str) {
        assert_eq!(counts(a), counts(b), "{what}");
        assert_eq!((a.len(), a.min(), a.max()), (b.len(), b.min(), b.max()), "{what}");
        assert_eq!((a.mean(), a.stdev()), (b.mean(), b.stdev()), "{what}");
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(a.value_at_quantile(q), b.value_at_quantile(q), "{what}: quantile {q}");
        }
    }

    /// xorshift: deterministic samples without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Values from 1 ns to an hour, a few at each edge of the range and of buckets.
    fn histogram(rng: &mut Rng, samples: usize) -> Histogram<u64> {
        let mut h = new_histogram();
        for _ in 0..samples {
            let magnitude = rng.next() % 42;
            let v = (rng.next() % (1 << magnitude)).clamp(1, 3_600_000_000_000);
            h.record_n(v, 1 + rng.next() % 3).expect("in range");
        }
        for v in [1, 2047, 2048, 2049, 4095, 4096, 1 << 20, (1 << 20) - 1, 3_600_000_000_000] {
            h.record(v).expect("in range");
        }
        h
    }

    #[test]
    fn an_index_and_its_lowest_value_agree_with_hdrhistogram_across_the_range() {
        let h = new_histogram();
        let mut rng = Rng(99);
        for _ in 0..100_000 {
            let v = (rng.next() % (1 << (rng.next() % 42))).clamp(1, 3_600_000_000_000);
            let at = value_at(index_of(v));
            assert_eq!(at, h.lowest_equivalent(v), "value {v}");
            assert_eq!(index_of(at), index_of(v));
            assert_eq!(index_of(h.highest_equivalent(v)), index_of(v), "value {v}");
        }
    }

    #[test]
    fn a_sparse_sum_of_histograms_is_their_dense_sum_exactly() {
        let mut rng = Rng(7);
        let mut dense = new_histogram();
        let mut sparse = Sparse::default();
        for round in 0..40 {
            let mut h = histogram(&mut rng, if round % 5 == 0 { 0 } else { 300 });
            if round % 3 == 0 {
                // A hold of nothing is recorded as 0, below the 1 ns floor.
                h.record_n(0, 4).expect("0 is counted");
            }
            dense.add(&h).expect("one shape");
            sparse.add(&h);
            assert_same(&sparse.to_histogram(), &dense, &format!("round {round}"));
        }
    }

    #[test]
    fn a_minute_of_a_workers_latencies_takes_a_fraction_of_its_dense_histogram() {
        // 200 responses a second around 2 ms with a tail to 50 ms, for a minute, as the
        // simulated fleet's workers send.
        let mut rng = Rng(3);
        let mut sparse = Sparse::default();
        let mut dense = new_histogram();
        for _ in 0..60 {
            let mut second = new_histogram();
            for _ in 0..200 {
                let tail = if rng.next().is_multiple_of(50) { rng.next() % 48_000_000 } else { 0 };
                second.record(1_000_000 + rng.next() % 2_000_000 + tail).expect("in range");
            }
            sparse.add(&second);
            dense.add(&second).expect("one shape");
        }
        let dense_bytes = dense.distinct_values() * 8;
        assert!(sparse.bytes() * 4 < dense_bytes, "sparse {} B, dense {dense_bytes} B", sparse.bytes());
        assert_same(&sparse.to_histogram(), &dense, "a minute");
    }

    #[test]
    fn compact_stats_give_back_the_counters_and_every_histogram() {
        let mut rng = Rng(11);
        let mut sum = Stats::new();
        let mut compact = CompactStats::default();
        for _ in 0..5 {
            let mut s = Stats::new();
            s.counters.ok = 300;
            s.counters.status(200);
            s.histograms.latency = histogram(&mut rng, 300);
            s.histograms.connect = histogram(&mut rng, 3);
            s.histograms.hold = histogram(&mut rng, 10);
            sum.merge(&s);
            compact.merge(&s);
        }
        let back = compact.to_stats();
        assert_eq!(back.counters, sum.counters);
        let (b, s) = (&back.histograms, &sum.histograms);
        for (name, x, y) in [
            ("latency", &b.latency, &s.latency),
            ("service", &b.service, &s.service),
            ("lateness", &b.lateness, &s.lateness),
            ("connect", &b.connect, &s.connect),
            ("ttfb", &b.ttfb, &s.ttfb),
            ("hold", &b.hold, &s.hold),
        ] {
            assert_same(x, y, name);
        }
    }
}
