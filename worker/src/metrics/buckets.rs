//! The latency histogram's fixed bucket bounds, the same in every volley process.
//!
//! Prometheus adds bucket counts across workers and across time only when every series has the
//! same bounds, so they are fixed here rather than derived from a run. They are log-spaced
//! because latencies span orders of magnitude: each bound is about 1.47 times the one below (the
//! E6 preferred numbers 1, 1.5, 2.2, 3.3, 4.7, 6.8 in each decade), so a quantile read from them
//! by `histogram_quantile` is off by at most one bucket, under half of the value, at any scale.
//! 100 µs to 10 s covers loopback answers to a timed-out request (`--timeout`'s default is 30 s;
//! slower ones land in +Inf, and the run's own report still has them exactly); 31 bounds keep a
//! scrape small (33 series for the histogram).

/// Bucket upper bounds, in nanoseconds, ascending.
pub(crate) const BOUNDS_NS: [u64; 31] = {
    const E6: [u64; 6] = [100, 150, 220, 330, 470, 680];
    let mut bounds = [0u64; 31];
    // 100 µs is 100 × 10^3 ns: the E6 steps scaled by 1000, then by 10 for each decade.
    let mut scale = 1_000u64;
    let mut i = 0;
    while i < 30 {
        bounds[i] = E6[i % 6] * scale;
        i += 1;
        if i % 6 == 0 {
            scale *= 10;
        }
    }
    bounds[30] = 10_000_000_000;
    bounds
};

/// The bucket a latency of `ns` falls into: the index of the first bound at least `ns`, or
/// `BOUNDS_NS.len()` (+Inf) above them all.
pub(crate) fn bucket_of(ns: u64) -> usize {
    BOUNDS_NS.partition_point(|&bound| bound < ns)
}

/// A bound in seconds as the `le` label shows it (`0.00015`, `1`, `6.8`).
pub(crate) fn le_label(bound_ns: u64) -> String {
    format!("{}", bound_ns as f64 / 1e9)
}
