//! The packet numbers one space has received, for the ACK frames we send (RFC 9000 §13.2).
//!
//! Kept as a short list of disjoint ranges, oldest first. Under load packets arrive in order
//! and the list is one range that grows at its end; a lost or reordered packet adds a range.
//! Only the newest [`MAX_RANGES`] are kept: an ACK needs no more (the peer has long declared
//! older gaps lost), and a duplicate below them is one the peer cannot still be waiting on.

use std::time::Instant;

/// Ranges reported in an ACK frame, and kept.
const MAX_RANGES: usize = 32;

#[derive(Debug, Default)]
pub(crate) struct Received {
    /// Disjoint, non-adjacent `(smallest, largest)` ranges, ascending.
    ranges: Vec<(u64, u64)>,
    /// When the largest packet number arrived (for the ACK's delay field).
    largest_at: Option<Instant>,
    /// An ack-eliciting packet arrived since our last ACK in this space.
    pub ack_due: bool,
}

impl Received {
    /// The largest packet number received, for decoding truncated ones.
    pub(crate) fn largest(&self) -> Option<u64> {
        self.ranges.last().map(|&(_, hi)| hi)
    }

    /// Whether `pn` was received already (a duplicate, to be dropped unread). A number below
    /// every kept range counts as received: it is too old to matter.
    pub(crate) fn contains(&self, pn: u64) -> bool {
        match self.ranges.first() {
            None => false,
            Some(&(lo, _)) if pn < lo => self.ranges.len() == MAX_RANGES,
            _ => self.ranges.iter().rev().any(|&(lo, hi)| (lo..=hi).contains(&pn)),
        }
    }

    /// Records `pn`, received at `now`.
    pub(crate) fn insert(&mut self, pn: u64, now: Instant, ack_eliciting: bool) {
        self.ack_due |= ack_eliciting;
        match self.ranges.last_mut() {
            Some((_, hi)) if pn == *hi + 1 => {
                *hi = pn;
                self.largest_at = Some(now);
                return;
            }
            Some(&mut (_, hi)) if pn > hi + 1 => {
                self.ranges.push((pn, pn));
                self.largest_at = Some(now);
            }
            None => {
                self.ranges.push((pn, pn));
                self.largest_at = Some(now);
            }
            Some(_) => self.insert_below(pn),
        }
        if self.ranges.len() > MAX_RANGES {
            self.ranges.remove(0);
        }
    }

    /// A packet that arrived after a larger one: it joins, fills or splits the ranges below.
    fn insert_below(&mut self, pn: u64) {
        // The first range whose end is at or above pn - 1 (the one pn may join or precede).
        let i = self.ranges.partition_point(|&(_, hi)| hi + 1 < pn);
        let Some(&(lo, hi)) = self.ranges.get(i) else { return };
        if (lo..=hi).contains(&pn) {
            return;
        }
        if hi + 1 == pn {
            self.ranges[i].1 = pn;
            if let Some(&(next_lo, next_hi)) = self.ranges.get(i + 1)
                && next_lo == pn + 1
            {
                self.ranges[i].1 = next_hi;
                self.ranges.remove(i + 1);
            }
        } else if pn + 1 == lo {
            self.ranges[i].0 = pn;
        } else {
            self.ranges.insert(i, (pn, pn));
        }
    }

    /// The ranges for an ACK frame, largest first, and the delay since the largest arrived.
    pub(crate) fn for_ack(&self, now: Instant) -> (impl Iterator<Item = (u64, u64)> + '_, u64) {
        let delay = self.largest_at.map_or(0, |at| now.saturating_duration_since(at).as_micros() as u64);
        (self.ranges.iter().rev().copied(), delay)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    fn ranges(r: &Received) -> Vec<(u64, u64)> {
        r.for_ack(Instant::now()).0.collect()
    }

    #[test]
    fn packets_in_order_make_one_range() {
        let mut r = Received::default();
        let now = Instant::now();
        for pn in 0..100 {
            r.insert(pn, now, true);
        }
        assert_eq!(ranges(&r), vec![(0, 99)]);
        assert!(r.contains(50) && !r.contains(100));
        assert_eq!(r.largest(), Some(99));
    }

    #[test]
    fn a_gap_makes_two_ranges_and_the_late_packet_joins_them() {
        let mut r = Received::default();
        let now = Instant::now();
        for pn in [0, 1, 2, 4, 5] {
            r.insert(pn, now, true);
        }
        assert_eq!(ranges(&r), vec![(4, 5), (0, 2)]);
        r.insert(3, now, true);
        assert_eq!(ranges(&r), vec![(0, 5)]);
    }

    #[test]
    fn any_arrival_order_gives_the_same_ranges_as_a_set() {
        let mut rng = Rng(0x5eed);
        for _ in 0..200 {
            let mut pns: Vec<u64> = (0..40).filter(|_| !rng.chance(4)).collect();
            for i in (1..pns.len()).rev() {
                pns.swap(i, rng.below(i + 1));
            }
            let mut r = Received::default();
            for &pn in &pns {
                r.insert(pn, Instant::now(), true);
                r.insert(pn, Instant::now(), true);
            }
            pns.sort();
            let mut want: Vec<(u64, u64)> = Vec::new();
            for pn in pns {
                match want.last_mut() {
                    Some((_, hi)) if *hi + 1 == pn => *hi = pn,
                    _ => want.push((pn, pn)),
                }
            }
            want.reverse();
            assert_eq!(ranges(&r), want);
        }
    }

    #[test]
    fn only_the_newest_ranges_are_kept_and_older_numbers_count_as_received() {
        let mut r = Received::default();
        for i in 0..(MAX_RANGES as u64 + 5) {
            r.insert(i * 2, Instant::now(), true);
        }
        assert_eq!(ranges(&r).len(), MAX_RANGES);
        assert!(r.contains(0), "below every kept range: too old to accept again");
        assert!(!r.contains(2 * MAX_RANGES as u64 + 9));
    }
}
