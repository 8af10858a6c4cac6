//! `--stages`: a rate that changes over the run, piecewise linear. Stage `i` lasts its duration
//! and ramps linearly from the previous stage's target (the first from the plan's starting
//! rate, `--rate`) to its own; the run lasts the stages' sum. This module is the one place the
//! curve's arithmetic lives: how many requests are due by an instant (the rate integrated), and
//! when the k-th is due (that integral inverted: within a linear ramp, a quadratic), for the
//! schedule and for the report's per-second requested rate alike.
//!
//! Request `k` (from 0) is due once `k + phase` requests' worth of the rate has accumulated. A
//! whole plan's phase is ½: each request in the middle of its unit of the integral, so a curve
//! starting at 0 sends nothing at its first instant and one ending at 0 sends its last before
//! its end (not at the instant the run stops, where it could only be aborted); by any instant
//! the integral rounded requests are due, and a stage `d:r` held flat sends `d × r` of them,
//! `(k + ½) / r` from its start. Split over P parts, part i's phase is `(phase + i) / P`: the
//! parts' requests interleave evenly in the whole's integral, at every rate of a ramp.

use std::time::Duration;

/// The most stages one plan may have: far more than a load profile needs, and it bounds what
/// a plan off the wire can make a worker hold.
pub const MAX_STAGES: usize = 100;

/// One stage of a rate profile: over `duration`, the rate moves linearly to `target` requests
/// per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    pub duration: Duration,
    pub target: u64,
}

/// A rate profile as segments with their integrals precomputed, in seconds and requests.
#[derive(Debug, Clone)]
pub(crate) struct Curve {
    segments: Vec<Segment>,
    /// Request k is due at k + phase requests' worth.
    phase: f64,
    /// Requests due over the whole curve.
    total: u64,
}

/// One stage as a linear piece: its value (a rate, or a connection count) moves from `rate` by
/// `slope` per second for `length` seconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    /// When it begins, in seconds from the curve's start.
    pub(super) from: f64,
    pub(super) length: f64,
    /// Rate at its start (requests per second) and its slope (per second per second).
    pub(super) rate: f64,
    pub(super) slope: f64,
    /// Requests accumulated before it.
    before: f64,
}

/// The stages as linear pieces from `start`, each from the previous one's target to its own
/// (stages of no time left out, though plans refuse them).
pub(super) fn segments(start: u64, stages: &[Stage]) -> Vec<Segment> {
    let mut segments = Vec::with_capacity(stages.len());
    let (mut from, mut before, mut rate) = (0.0, 0.0, start as f64);
    for stage in stages {
        let length = stage.duration.as_secs_f64();
        if length <= 0.0 {
            continue;
        }
        let target = stage.target as f64;
        let segment = Segment { from, length, rate, slope: (target - rate) / length, before };
        before += segment.requests();
        from += length;
        rate = target;
        segments.push(segment);
    }
    segments
}

impl Segment {
    /// Its value `tau` seconds in (0 ≤ tau ≤ length).
    pub(super) fn value(&self, tau: f64) -> f64 {
        self.rate + self.slope * tau.min(self.length)
    }

    /// Its value at its end.
    pub(super) fn end_value(&self) -> f64 {
        self.value(self.length)
    }

    /// Requests accumulated `tau` seconds into it (0 ≤ tau ≤ length).
    fn integral(&self, tau: f64) -> f64 {
        self.rate * tau + self.slope * tau * tau / 2.0
    }

    fn requests(&self) -> f64 {
        self.integral(self.length)
    }

    /// Seconds into the segment at which `r` requests (0 ≤ r ≤ its own) have accumulated: the
    /// root of slope/2·τ² + rate·τ − r, in the form that loses no precision when the slope is
    /// small (2r / (rate + √(rate² + 2·slope·r))).
    fn time_of(&self, r: f64) -> f64 {
        if r <= 0.0 {
            return 0.0;
        }
        let disc = (self.rate * self.rate + 2.0 * self.slope * r).max(0.0);
        let denom = self.rate + disc.sqrt();
        if denom <= 0.0 {
            return self.length;
        }
        (2.0 * r / denom).min(self.length)
    }
}

impl Curve {
    /// The curve of `stages`, starting at `start` requests per second, its requests due at
    /// `phase` within their units.
    pub(crate) fn new(start: u64, stages: &[Stage], phase: f64) -> Curve {
        let segments = segments(start, stages);
        let before = segments.last().map_or(0.0, |s| s.before + s.requests());
        let total = due_at(before, phase);
        Curve { segments, phase, total }
    }

    /// Requests due over the whole curve.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Requests due by `since` after the start (at most the total).
    pub(crate) fn due_by(&self, since: Duration) -> u64 {
        let t = since.as_secs_f64();
        let Some(seg) = self.segments.iter().rev().find(|s| s.from <= t) else { return 0 };
        let accumulated = seg.before + seg.integral((t - seg.from).min(seg.length));
        due_at(accumulated, self.phase).min(self.total())
    }

    /// When request `k` (from 0) is due, after the start; None when the curve never gets to it.
    /// `hint` is where to start looking (the segment of the last request asked about), and is
    /// moved on: requests are asked about in order.
    pub(crate) fn due(&self, k: u64, hint: &mut usize) -> Option<Duration> {
        if k >= self.total {
            return None;
        }
        let needed = k as f64 + self.phase;
        let mut i = (*hint).min(self.segments.len().saturating_sub(1));
        // Back up if asked about an earlier request; then on to the segment that reaches it.
        while i > 0 && self.segments[i].before >= needed {
            i -= 1;
        }
        while i + 1 < self.segments.len() && self.segments[i + 1].before < needed {
            i += 1;
        }
        *hint = i;
        let seg = &self.segments[i];
        let at = seg.from + seg.time_of(needed - seg.before);
        // Rounded up to the nanosecond, so that by its due instant it is due.
        Some(Duration::from_nanos((at.max(0.0) * 1e9).ceil() as u64))
    }

    /// The highest rate anywhere on the curve, with `start`: what the plan must carry at most.
    pub(crate) fn peak(start: u64, stages: &[Stage]) -> u64 {
        stages.iter().map(|s| s.target).fold(start, u64::max)
    }
}

/// Requests due once `accumulated` requests' worth of the rate has: those k with
/// k + phase ≤ accumulated. A hair is added so that floating-point rounding never makes one
/// fewer due than the arithmetic says (at 2000/s over 0.25 s, 500 are due, not 499).
fn due_at(accumulated: f64, phase: f64) -> u64 {
    let past = accumulated + 1e-6 - phase;
    if past < 0.0 { 0 } else { past.floor() as u64 + 1 }
}

/// Requests a run (or a part) with this profile asks for between `from` and `to` after its
/// start: the per-second series' requested rate. With no stages, `start` per second throughout.
pub fn requested_between(start: u64, stages: &[Stage], phase: f64, from: Duration, to: Duration) -> u64 {
    if stages.is_empty() {
        return ((to.saturating_sub(from)).as_secs_f64() * start as f64).round() as u64;
    }
    let curve = Curve::new(start, stages, phase);
    curve.due_by(to).saturating_sub(curve.due_by(from))
}

/// The stage (from 1) under way at `at` after the start; None past the last.
pub fn stage_at(stages: &[Stage], at: Duration) -> Option<usize> {
    let mut end = Duration::ZERO;
    for (i, stage) in stages.iter().enumerate() {
        end += stage.duration;
        if at < end {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests;
