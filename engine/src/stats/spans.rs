//! Spans of time recorded into a histogram a run of equal ones at a time.
//!
//! A receive's responses end at one instant (the kernel stamps the receive), and the requests
//! they answer often left in one send, stamped once: in a batch, many latencies are the same span
//! between the same two instants. Recording each one (a histogram index worked out per sample)
//! was 8.7% of HTTP/2's userspace time at 16 connections × 32 streams; a run at a time, 4.1%.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::{Counters, Stats};

/// Consecutive spans between the same two instants, not yet recorded. Call [`Spans::flush`]
/// before the histogram is read: what is pending is in no histogram yet.
#[derive(Debug, Default)]
pub(crate) struct Spans {
    /// The two instants of the spans pending, if any.
    pending: Option<(Instant, Instant)>,
    n: u64,
}

impl Spans {
    /// One span from `from` to `to` (zero if `to` is earlier), for `hist`: counted with those
    /// pending if it is theirs, otherwise those pending are recorded first.
    #[inline]
    pub(crate) fn add(&mut self, from: Instant, to: Instant, counters: &mut Counters, hist: &mut Histogram<u64>) {
        if let Some((span, n)) = self.push(from, to) {
            Stats::record_n(counters, hist, span, n);
        }
    }

    /// Records what is pending into `hist`, the histogram every span since the last flush was for.
    pub(crate) fn flush(&mut self, counters: &mut Counters, hist: &mut Histogram<u64>) {
        if let Some((span, n)) = self.take() {
            Stats::record_n(counters, hist, span, n);
        }
    }

    /// [`Spans::add`] for a caller that records elsewhere: the run of spans this one ends, if
    /// any, as the span and how many.
    #[inline]
    pub(crate) fn push(&mut self, from: Instant, to: Instant) -> Option<(Duration, u64)> {
        if self.pending == Some((from, to)) {
            self.n += 1;
            return None;
        }
        let ended = self.take();
        self.pending = Some((from, to));
        self.n = 1;
        ended
    }

    /// The run pending, if any, as the span and how many; none is pending after.
    pub(crate) fn take(&mut self) -> Option<(Duration, u64)> {
        self.pending.take().map(|(from, to)| (to.saturating_duration_since(from), self.n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn equal_spans_in_a_row_are_one_record_and_every_sample_counts() {
        let (mut counters, mut hist) = (Counters::default(), new_histogram());
        let t0 = Instant::now();
        let (t1, t2) = (t0 + Duration::from_micros(100), t0 + Duration::from_micros(300));
        let mut spans = Spans::default();
        for (from, to) in [(t0, t1), (t0, t1), (t0, t1), (t1, t2), (t0, t1), (t0, t2), (t0, t2)] {
            spans.add(from, to, &mut counters, &mut hist);
        }
        // The last run is still pending until flushed.
        assert_eq!(hist.len(), 5);
        spans.flush(&mut counters, &mut hist);
        assert_eq!(hist.len(), 7);
        assert_eq!(hist.count_at(100_000), 4);
        assert_eq!(hist.count_at(200_000), 1);
        assert_eq!(hist.count_at(300_000), 2);
        spans.flush(&mut counters, &mut hist);
        assert_eq!(hist.len(), 7, "a second flush records nothing again");
    }

    #[test]
    fn a_span_that_ends_before_it_starts_is_zero_and_beyond_the_range_is_clamped_and_counted() {
        let (mut counters, mut hist) = (Counters::default(), new_histogram());
        let t0 = Instant::now();
        let mut spans = Spans::default();
        spans.add(t0 + Duration::from_millis(1), t0, &mut counters, &mut hist);
        spans.add(t0, t0 + Duration::from_secs(7200), &mut counters, &mut hist);
        spans.add(t0, t0 + Duration::from_secs(7200), &mut counters, &mut hist);
        spans.flush(&mut counters, &mut hist);
        assert_eq!(hist.len(), 3);
        assert_eq!(hist.min(), 1, "a zero span is recorded at the floor, 1 ns");
        assert_eq!(counters.clamped, 2);
    }
}
