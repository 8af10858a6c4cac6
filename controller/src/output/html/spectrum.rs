//! The percentile spectrum: a histogram's latency at each percentile, on an axis of "nines"
//! (x = -log10(1 - q): 90% is 1, 99% is 2, 99.9% is 3), as HdrHistogram's plots draw it, so the
//! tail gets as much room as the body.

use base64::Engine;
use hdrhistogram::Histogram;
use volley_engine::decode_histogram;

/// Points per nine: enough for a smooth curve, few enough to keep the page small.
const STEPS_PER_NINE: u32 = 20;
/// The axis ends by 99.9999%: HdrHistogram keeps 3 significant digits, and no run here holds
/// the hundreds of millions of samples a finer tail would need.
const MAX_NINES: f64 = 6.0;

/// A histogram from the report's base64 HdrHistogram V2+DEFLATE text.
pub(super) fn decode(field: &str, text: &str) -> Result<Histogram<u64>, String> {
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("{field} is not base64: {e}"))?;
    decode_histogram(&bytes).map_err(|e| format!("{field}: {e}"))
}

/// One point of the axis: where it is drawn (nines) and the quantile it reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Point {
    pub nines: f64,
    pub quantile: f64,
}

pub(super) fn nines(quantile: f64) -> f64 {
    if quantile >= 1.0 { MAX_NINES } else { -(1.0 - quantile).log10() }
}

/// The axis for histograms of at most `samples` samples, plus `exact` quantiles (thresholds'),
/// which are read at exactly their quantile so a marker sits on the curve's own value.
pub(super) fn axis(samples: u64, exact: &[f64]) -> Vec<Point> {
    // Past 1/samples every quantile reads the maximum: the curve is flat there.
    let top = (samples.max(10) as f64).log10().min(MAX_NINES);
    let steps = (top * f64::from(STEPS_PER_NINE)).ceil() as u32;
    let exact: Vec<Point> = exact.iter().map(|&q| Point { nines: nines(q), quantile: q.min(1.0) }).collect();
    // A grid point where an exact one falls gives way to it (0.99 is 1.99999... nines, not 2).
    let mut points: Vec<Point> = (0..=steps)
        .map(|i| {
            let nines = (f64::from(i) / f64::from(STEPS_PER_NINE)).min(top);
            Point { nines, quantile: 1.0 - 10f64.powf(-nines) }
        })
        .filter(|p| !exact.iter().any(|e| (e.nines - p.nines).abs() < 1e-9))
        .chain(exact.iter().copied())
        .collect();
    points.sort_by(|a, b| a.nines.total_cmp(&b.nines));
    points.dedup_by(|a, b| (a.nines - b.nines).abs() < 1e-9);
    points
}

/// The histogram's value at each point, in milliseconds; none for an empty histogram.
pub(super) fn millis(h: &Histogram<u64>, axis: &[Point]) -> Vec<Option<f64>> {
    axis.iter().map(|p| (!h.is_empty()).then(|| h.value_at_quantile(p.quantile) as f64 / 1e6)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_reaches_the_samples_resolution_and_reads_exact_quantiles_at_their_place() {
        let points = axis(1_000, &[0.99, 0.9999]);
        assert_eq!(points.first().map(|p| p.nines), Some(0.0));
        // 1,000 samples resolve three nines; the 99.99% threshold adds its own point beyond.
        assert!(points.iter().any(|p| (p.nines - 3.0).abs() < 1e-9));
        let p99 = points.iter().find(|p| p.quantile == 0.99).expect("the exact 0.99");
        assert!((p99.nines - 2.0).abs() < 1e-9);
        assert!(points.windows(2).all(|w| w[0].nines < w[1].nines), "sorted, no duplicates");
        assert_eq!(points.iter().filter(|p| (p.nines - 2.0).abs() < 1e-9).count(), 1);
    }

    #[test]
    fn the_spectrum_reads_the_histograms_own_percentiles() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for ms in 1..=100u64 {
            h.record(ms * 1_000_000).unwrap();
        }
        let points = axis(h.len(), &[0.99]);
        let values = millis(&h, &points);
        let at = |q: f64| values[points.iter().position(|p| p.quantile == q).unwrap()].unwrap();
        assert_eq!(at(0.99), h.value_at_quantile(0.99) as f64 / 1e6);
        assert!((at(0.99) - 99.0).abs() < 0.1, "{}", at(0.99));
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "a spectrum never falls");
        let empty = Histogram::<u64>::new(3).unwrap();
        assert!(millis(&empty, &points).iter().all(Option::is_none));
    }
}
