//! `--stages` without a rate: the closed model's connection count ramps, piecewise linear as
//! the rate does with one (stage `i` from the previous stage's target, the first from 0, like
//! k6's ramping VUs), and this is the one place that says how many of a plan's connections are
//! open at an instant and when that changes next.
//!
//! The whole run's connection `j` (from 0) is open while the ramp is above `j + ½`: the count
//! is the ramp rounded to the nearest whole (halves down), a ramp from 0 opens its first
//! connection half a connection's worth in, and one down to 0 closes its last before the run
//! ends. A part of a split knows which of the whole's connections are its own
//! ([`ConnectionIndices`]) and evaluates the whole's ramp, so at every instant the parts' open
//! connections add up to exactly the whole's count, with no word between them after the start.

use std::time::Duration;

use super::Stage;
use super::stages::{Segment, segments};

/// Which of the whole plan's connections a plan's are: its m-th (from 0) is the whole's
/// `first + m × step`. A whole plan's are (0, 1); a split interleaves its parts (part i of P
/// takes every P-th, from the i-th), so split again over threads they stay evenly spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionIndices {
    pub first: u64,
    pub step: u64,
}

impl ConnectionIndices {
    /// A whole plan's: all of them, in order.
    pub const WHOLE: ConnectionIndices = ConnectionIndices { first: 0, step: 1 };

    /// Part `i` of `parts`: every `parts`-th of these, from the i-th. Even shares of the
    /// connections (the first parts taking the remainder) are exactly these counts.
    pub(crate) fn part(self, i: usize, parts: usize) -> ConnectionIndices {
        ConnectionIndices {
            first: self.first.saturating_add(self.step.saturating_mul(i as u64)),
            step: self.step.saturating_mul(parts as u64),
        }
    }

    /// The whole's index of connection `m` of these, as the ramp compares it: exact, since
    /// indices stay far below 2⁵³.
    fn whole(self, m: u64) -> f64 {
        self.first.saturating_add(self.step.saturating_mul(m)) as f64
    }
}

/// One plan's connections under a ramp of the whole run's connection count.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionRamp {
    /// The whole run's count, from 0 through the stages.
    segments: Vec<Segment>,
    indices: ConnectionIndices,
    /// This plan's connections: at most this many are ever open.
    connections: u64,
}

impl ConnectionRamp {
    /// A closed-model `load`'s ramp over `connections` connections; None when every connection
    /// stays open (no ramp, or the open model).
    pub(crate) fn for_load(load: &super::Load, connections: usize) -> Option<ConnectionRamp> {
        match load {
            super::Load::Closed { ramp, indices } if !ramp.is_empty() => {
                Some(ConnectionRamp::new(ramp, *indices, connections))
            }
            _ => None,
        }
    }

    /// `connections` connections, the whole's `indices`, under the whole run's `stages`.
    pub(crate) fn new(stages: &[Stage], indices: ConnectionIndices, connections: usize) -> ConnectionRamp {
        ConnectionRamp { segments: segments(0, stages), indices, connections: connections as u64 }
    }

    /// The whole run's count, `t` seconds after the start (the last target after the last).
    fn value(&self, t: f64) -> f64 {
        match self.segments.iter().rev().find(|s| s.from <= t) {
            Some(seg) => seg.value(t - seg.from),
            None => self.segments.first().map_or(0.0, |s| s.rate),
        }
    }

    /// The ramp's level at which connection `m` of this plan opens (above) and closes (at or
    /// below).
    fn level(&self, m: u64) -> f64 {
        self.indices.whole(m) + 0.5
    }

    /// This plan's connections open at `value` of the whole's count: those whose level is
    /// below it. Estimated by division, then settled by comparing levels, so that every part
    /// decides each connection exactly as the comparison does.
    fn open_at_value(&self, value: f64) -> u64 {
        let step = self.indices.step.max(1) as f64;
        let estimate = ((value - self.level(0)) / step).ceil();
        let mut open = if estimate > 0.0 { (estimate as u64).min(self.connections) } else { 0 };
        while open > 0 && self.level(open - 1) >= value {
            open -= 1;
        }
        while open < self.connections && self.level(open) < value {
            open += 1;
        }
        open
    }

    /// This plan's connections open `since` the start: its first ones (by index) up to this.
    pub(crate) fn open_at(&self, since: Duration) -> usize {
        usize::try_from(self.open_at_value(self.value(since.as_secs_f64()))).unwrap_or(usize::MAX)
    }

    /// The next instant after `since` (strictly) at which this plan's open count changes; None
    /// when it never does again. It may come a nanosecond early (floating-point rounding): asked
    /// again then, it answers the next.
    pub(crate) fn next_change(&self, since: Duration) -> Option<Duration> {
        let t = since.as_secs_f64();
        let open = self.open_at_value(self.value(t));
        let after = |at: f64, rising: bool| {
            // Opening is once the count is above the level, strictly: the nanosecond after it.
            let nanos = at.max(0.0) * 1e9;
            let nanos = if rising { nanos.floor() as u64 + 1 } else { nanos.ceil() as u64 };
            Duration::from_nanos(nanos).max(since + Duration::from_nanos(1))
        };
        for seg in self.segments.iter().filter(|s| s.from + s.length > t) {
            if seg.slope > 0.0 && open < self.connections {
                let level = self.level(open);
                if seg.end_value() > level {
                    return Some(after(seg.from + (level - seg.rate) / seg.slope, true));
                }
            } else if seg.slope < 0.0 && open > 0 {
                let level = self.level(open - 1);
                if seg.end_value() <= level {
                    return Some(after(seg.from + (level - seg.rate) / seg.slope, false));
                }
            }
        }
        None
    }
}

/// The connections of a plan (`connections` of them, the whole run's `indices`) open under the
/// whole run's `stages` at `at` after the start: the per-second series' target count.
pub fn connections_at(stages: &[Stage], indices: ConnectionIndices, connections: usize, at: Duration) -> u64 {
    let ramp = ConnectionRamp::new(stages, indices, connections);
    ramp.open_at_value(ramp.value(at.as_secs_f64()))
}

#[cfg(test)]
mod tests;
