//! `Retry-After` (RFC 9110 §10.2.3): what a response asked of the client, and the counts a run
//! keeps of it, so a capacity run shows when the server asked the client to back off.

/// A `Retry-After` value as a response carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// delay-seconds: wait this many seconds (saturating at u64::MAX).
    Seconds(u64),
    /// Anything that is not delay-seconds, which RFC 9110 allows only as an HTTP-date. It is
    /// not parsed: its size would be its distance from the server's clock, which the client
    /// does not know, so it is counted apart from the seconds.
    Date,
}

impl RetryAfter {
    /// Reads a field value (surrounding whitespace allowed).
    pub(crate) fn parse(value: &[u8]) -> RetryAfter {
        let value = value.trim_ascii();
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return RetryAfter::Date;
        }
        RetryAfter::Seconds(value.iter().fold(0u64, |n, &d| n.saturating_mul(10).saturating_add(u64::from(d - b'0'))))
    }
}

/// Responses that carried `Retry-After`: how many per status, the largest delay-seconds asked,
/// and how many gave a date instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryAfterCounts {
    /// (status, responses), sorted by status. Few statuses carry it (503, 429, 3xx), so a short
    /// list beats another thousand-slot array in every interval's counters.
    by_status: Vec<(u16, u64)>,
    /// The largest delay-seconds value seen; None when every one was a date (or none came).
    pub largest_seconds: Option<u64>,
    /// Values that were not delay-seconds (HTTP-dates): counted, their size unknown.
    pub dates: u64,
}

impl RetryAfterCounts {
    /// One response of `status` carried `value`.
    pub(crate) fn record(&mut self, status: u16, value: RetryAfter) {
        self.add_status(status, 1);
        match value {
            RetryAfter::Seconds(s) => self.largest_seconds = Some(self.largest_seconds.map_or(s, |l| l.max(s))),
            RetryAfter::Date => self.dates = self.dates.saturating_add(1),
        }
    }

    /// `n` responses of `status` carried one (what a worker or a saved report says).
    pub fn add_status(&mut self, status: u16, n: u64) {
        if n == 0 {
            return;
        }
        match self.by_status.binary_search_by_key(&status, |(s, _)| *s) {
            Ok(at) => self.by_status[at].1 = self.by_status[at].1.saturating_add(n),
            Err(at) => self.by_status.insert(at, (status, n)),
        }
    }

    /// Statuses that carried it, in order, with their counts.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.by_status.iter().copied()
    }

    /// Responses that carried it, whatever their status.
    pub fn total(&self) -> u64 {
        self.by_status.iter().fold(0, |sum, (_, n)| sum.saturating_add(*n))
    }

    pub(crate) fn merge(&mut self, other: &RetryAfterCounts) {
        for &(status, n) in &other.by_status {
            self.add_status(status, n);
        }
        self.largest_seconds = match (self.largest_seconds, other.largest_seconds) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.dates = self.dates.saturating_add(other.dates);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_seconds_are_read_and_anything_else_is_a_date() {
        assert_eq!(RetryAfter::parse(b"120"), RetryAfter::Seconds(120));
        assert_eq!(RetryAfter::parse(b" 0\t"), RetryAfter::Seconds(0));
        assert_eq!(RetryAfter::parse(b"99999999999999999999999"), RetryAfter::Seconds(u64::MAX));
        assert_eq!(RetryAfter::parse(b"Fri, 31 Dec 1999 23:59:59 GMT"), RetryAfter::Date);
        assert_eq!(RetryAfter::parse(b"-1"), RetryAfter::Date);
        assert_eq!(RetryAfter::parse(b""), RetryAfter::Date);
    }

    #[test]
    fn counts_merge_per_status_with_the_largest_value_and_the_dates() {
        let mut a = RetryAfterCounts::default();
        a.record(503, RetryAfter::Seconds(30));
        a.record(429, RetryAfter::Seconds(2));
        a.record(503, RetryAfter::Date);
        let mut b = RetryAfterCounts::default();
        b.record(503, RetryAfter::Seconds(45));
        b.record(301, RetryAfter::Date);
        a.merge(&b);
        assert_eq!(a.statuses().collect::<Vec<_>>(), vec![(301, 1), (429, 1), (503, 3)]);
        assert_eq!(a.total(), 5);
        assert_eq!(a.largest_seconds, Some(45));
        assert_eq!(a.dates, 2);
        let mut only_dates = RetryAfterCounts::default();
        only_dates.record(503, RetryAfter::Date);
        assert_eq!(only_dates.largest_seconds, None);
    }
}
