//! `--abort-on-fail`: the thresholds watched during the run, on the merged data so far, so that
//! a run whose gate can no longer pass is stopped at once instead of loading a broken build for
//! the rest of its time.
//!
//! "Can no longer pass" is certain for what only grows (counts, `max`) or only falls (`min`):
//! `errors<10` is lost at the tenth error, `max<1s` at the first answer slower than a second.
//! A rate, a percentile or a mean can still come back, so those are judged as estimates: the
//! run is aborted only when the data so far puts them past the limit with 99.9% confidence
//! (a Wilson score bound on the share of requests that count against the limit, a standard
//! error for the mean) and on at least [`FLOOR`] samples. `p99<L` is such a share: it fails
//! when more than 1% of responses took longer than L. `rps` is never judged mid-run: a slow
//! start is ordinary warm-up, and the rate of the whole run is only known at its end. Nothing
//! is judged before `--abort-grace` has passed, though what happened in it counts.
//!
//! A threshold of a name (`login:p99<200ms`) is watched on that name's statistics, which every
//! interval carries beside the run's.

use std::time::Duration;

use hdrhistogram::Histogram;
use volley_engine::Stats;

use super::parse::{Metric, Op, Stat, Threshold};
use super::scope::Scope;
use super::verdict::status_count;

/// Samples a rate, a percentile or a mean needs before it is judged mid-run: below this one
/// unlucky request would be a large share. The confidence bound does the rest.
pub(crate) const FLOOR: u64 = 100;
/// z for a two-sided 99.9% interval: a healthy run is aborted by chance about once in 2,000
/// judgements of a threshold that sits exactly at its limit, and far less often below it.
const Z: f64 = 3.29;

/// Why the run was stopped early: which threshold, when, and what it measured then.
#[derive(Debug, Clone)]
pub(crate) struct Breach {
    /// The threshold as written.
    pub threshold: String,
    /// Since the start of the load.
    pub after: Duration,
    /// The estimate so far, in the threshold's unit.
    pub measured: f64,
}

/// The thresholds watched while a run goes on, and every interval merged so far.
pub(crate) struct Watch {
    thresholds: Vec<Threshold>,
    /// The mix's names in index order, to find a threshold's name in the intervals.
    names: Vec<String>,
    grace: Duration,
    so_far: Stats,
    breach: Option<Breach>,
}

impl Watch {
    pub(crate) fn new(thresholds: &[Threshold], grace: Duration, names: &[String]) -> Watch {
        Watch { thresholds: thresholds.to_vec(), names: names.to_vec(), grace, so_far: Stats::new(), breach: None }
    }

    /// Takes one worker's interval, `elapsed` into the load; true when a threshold can no
    /// longer pass (the first such breach is kept, and the run should stop).
    pub(crate) fn interval(&mut self, delta: &Stats, elapsed: Duration) -> bool {
        self.so_far.merge(delta);
        if self.breach.is_some() || elapsed < self.grace {
            return self.breach.is_some();
        }
        self.breach = self.thresholds.iter().find_map(|t| {
            lost(t, &self.so_far, &self.names).map(|measured| Breach {
                threshold: t.text.clone(),
                after: elapsed,
                measured,
            })
        });
        self.breach.is_some()
    }

    pub(crate) fn breach(self) -> Option<Breach> {
        self.breach
    }
}

/// The estimate so far when `t` can no longer pass on `s`, the data of the run until now
/// (`names`: the mix's, in index order).
pub(crate) fn lost(t: &Threshold, s: &Stats, names: &[String]) -> Option<f64> {
    let scope = match &t.mix_name {
        None => Scope::run(s),
        // A name with nothing counted yet has lost nothing yet.
        Some(name) => Scope::name(s.names.get(names.iter().position(|n| n == name)?)?),
    };
    let c = scope.counters;
    let upper_limit = matches!(t.op, Op::Lt | Op::Le);
    let certain = |now: f64| (!t.op.holds(now, t.limit)).then_some(now);
    match t.metric {
        Metric::Rps => None,
        Metric::Errors if upper_limit => certain(c.errors() as f64),
        Metric::Status { statuses, rate: false } if upper_limit => certain(status_count(c, statuses) as f64),
        Metric::RetryAfter { rate: false } if upper_limit => certain(c.retry_after.total() as f64),
        Metric::Errors | Metric::Status { rate: false, .. } | Metric::RetryAfter { rate: false } => None,
        Metric::RetryAfter { rate: true } => share(t, c.retry_after.total(), c.total()),
        Metric::ErrorRate => share(t, c.errors(), c.total()),
        Metric::Checks => share(t, scope.checks.passed, scope.checks.total()),
        Metric::Status { statuses, rate: true } => share(t, status_count(c, statuses), c.total()),
        Metric::Time(timing, stat) => {
            let h = scope.histogram(timing)?;
            if h.is_empty() {
                return None;
            }
            match stat {
                Stat::Max if upper_limit => certain(h.max() as f64 / 1e9),
                Stat::Min if !upper_limit => certain(h.min() as f64 / 1e9),
                Stat::Max | Stat::Min => None,
                Stat::Mean => mean(t, h),
                Stat::Quantile(q) => quantile(t, h, q),
            }
        }
    }
}

/// A rate: `k` of `n` so far. Lost when the whole Wilson interval lies on the wrong side.
fn share(t: &Threshold, k: u64, n: u64) -> Option<f64> {
    if n < FLOOR {
        return None;
    }
    let (low, high) = wilson(k, n);
    let lost = match t.op {
        Op::Lt | Op::Le => !t.op.holds(low, t.limit),
        Op::Gt | Op::Ge => !t.op.holds(high, t.limit),
    };
    lost.then_some(k as f64 / n as f64)
}

/// `pQ<L` holds when at most a share 1-Q of the samples is above L; `pQ>L` when at most Q is
/// at or below it. Lost when the share on the wrong side of L is past that with confidence.
fn quantile(t: &Threshold, h: &Histogram<u64>, q: f64) -> Option<f64> {
    let n = h.len();
    if n < FLOOR {
        return None;
    }
    let limit = (t.limit * 1e9).round() as u64;
    let at_or_below = h.count_between(0, limit);
    let (against, allowed) = match t.op {
        Op::Lt | Op::Le => (n.saturating_sub(at_or_below), 1.0 - q),
        Op::Gt | Op::Ge => (at_or_below, q),
    };
    let (low, _) = wilson(against, n);
    (low > allowed).then(|| h.value_at_quantile(q) as f64 / 1e9)
}

fn mean(t: &Threshold, h: &Histogram<u64>) -> Option<f64> {
    let n = h.len();
    if n < FLOOR {
        return None;
    }
    let (m, se) = (h.mean() / 1e9, h.stdev() / 1e9 / (n as f64).sqrt());
    let lost = match t.op {
        Op::Lt | Op::Le => !t.op.holds(m - Z * se, t.limit),
        Op::Gt | Op::Ge => !t.op.holds(m + Z * se, t.limit),
    };
    lost.then_some(m)
}

/// The Wilson score interval of a share `k` of `n`: unlike the normal approximation it stays
/// within 0..1 and is honest at shares near 0, where error rates live.
fn wilson(k: u64, n: u64) -> (f64, f64) {
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests;
