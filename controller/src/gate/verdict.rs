//! Judging thresholds on a report's merged statistics, and saying what was measured in the
//! threshold's own unit.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::parse::{Metric, Stat, Statuses, Threshold};
use super::scope::Scope;
use crate::report::Report;

/// One threshold judged: what was measured (None when there was nothing to measure, which
/// fails: a gate with no samples proves nothing) and whether it held.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    pub threshold: Threshold,
    pub measured: Option<f64>,
    pub passed: bool,
    /// With `--abort-on-fail`: this threshold stopped the run, this long into the load.
    pub aborted_after: Option<Duration>,
}

impl Verdict {
    /// The measured value for people: `3.214 ms`, `0.120%`, `1520.3`.
    pub(crate) fn measured_text(&self) -> String {
        match self.measured {
            Some(v) => show(self.threshold.metric, v),
            None => "no data".into(),
        }
    }

    /// The limit the same way, with its operator: `< 5.000 ms`.
    pub(crate) fn limit_text(&self) -> String {
        format!("{} {}", self.threshold.op, show(self.threshold.metric, self.threshold.limit))
    }

    /// ", aborted the run after 2.1 s" for the threshold that stopped the run, else nothing.
    pub(crate) fn aborted_text(&self) -> String {
        self.aborted_after.map(|d| format!(", aborted the run after {:.1} s", d.as_secs_f64())).unwrap_or_default()
    }

    /// " (baseline 1.200 ms, +2.8%)" for a comparison with a baseline, else nothing.
    pub(crate) fn baseline_text(&self) -> String {
        self.comparison().map(|c| format!(" ({c})")).unwrap_or_default()
    }

    /// What a failed threshold says on stderr: `p99<5ms (measured 6.1 ms)`, with `; baseline ...`
    /// or `, aborted the run ...` when they apply.
    pub(crate) fn failure_text(&self) -> String {
        let baseline = self.comparison().map(|c| format!("; {c}")).unwrap_or_default();
        format!("{} (measured {}{baseline}{})", self.threshold.text, self.measured_text(), self.aborted_text())
    }

    fn comparison(&self) -> Option<String> {
        let old = self.threshold.baseline?;
        let delta = self.delta().map(|d| format!(", {:+.1}%", d * 100.0)).unwrap_or_default();
        Some(format!("baseline {}{delta}", show(self.threshold.metric, old)))
    }

    /// (measured - baseline) / baseline; None without both or with a baseline of 0.
    pub(crate) fn delta(&self) -> Option<f64> {
        let (old, new) = (self.threshold.baseline?, self.measured?);
        (old > 0.0).then(|| (new - old) / old)
    }

    /// The unit of `measured` and of the limit in the JSON report.
    pub(crate) fn unit(&self) -> &'static str {
        match self.threshold.metric {
            Metric::Time(..) => "seconds",
            Metric::Rps => "requests/second",
            Metric::ErrorRate
            | Metric::Status { rate: true, .. }
            | Metric::RetryAfter { rate: true }
            | Metric::Checks => "fraction",
            Metric::Errors | Metric::Status { rate: false, .. } | Metric::RetryAfter { rate: false } => "count",
        }
    }
}

/// Judges each threshold on the report's merged statistics.
pub(crate) fn judge(thresholds: &[Threshold], report: &Report) -> Vec<Verdict> {
    thresholds
        .iter()
        .map(|t| {
            let measured = measure(t.metric, t.mix_name.as_deref(), report);
            let passed = measured.is_some_and(|m| t.op.holds(m, t.limit));
            Verdict { threshold: t.clone(), measured, passed, aborted_after: None }
        })
        .collect()
}

/// Marks the verdict of the threshold that aborted the run: failed, whatever the data of the
/// stopped run would say, since the run it was meant for did not happen.
pub(crate) fn mark_aborted(verdicts: &mut [Verdict], breach: &super::Breach) {
    if let Some(v) = verdicts.iter_mut().find(|v| v.threshold.text == breach.threshold) {
        v.passed = false;
        v.aborted_after = Some(breach.after);
        v.measured = v.measured.or(Some(breach.measured));
    }
}

/// `metric` on the whole run, or on one name of its mix (None when the report has no such
/// name: a gate on what was not run proves nothing).
pub(crate) fn measure(metric: Metric, mix_name: Option<&str>, report: &Report) -> Option<f64> {
    let Some(mix_name) = mix_name else { return read(metric, &Scope::run(&report.stats), report) };
    let line = report.name_lines().find(|l| l.name == mix_name)?;
    read(metric, &Scope::name(&line.stats), report)
}

fn read(metric: Metric, scope: &Scope<'_>, report: &Report) -> Option<f64> {
    let c = scope.counters;
    let share = |n: u64| (c.total() > 0).then(|| n as f64 / c.total() as f64);
    match metric {
        Metric::Time(timing, stat) => time(scope.histogram(timing)?, stat),
        // A run that did nothing has no rate, rather than a rate of zero that `rps<X` passes.
        Metric::Rps => (c.total() > 0).then(|| crate::report::per_sec(c.total(), report.duration)),
        Metric::ErrorRate => share(c.errors()),
        Metric::Errors => Some(c.errors() as f64),
        Metric::Status { statuses, rate } => {
            let n = status_count(c, statuses);
            if rate { share(n) } else { Some(n as f64) }
        }
        Metric::RetryAfter { rate: true } => share(c.retry_after.total()),
        Metric::RetryAfter { rate: false } => Some(c.retry_after.total() as f64),
        // A run without checks has no share, rather than one that `checks>X%` passes.
        Metric::Checks => scope.checks.share_passed(),
    }
}

/// Responses with one of `statuses`.
pub(crate) fn status_count(c: &volley_engine::Counters, statuses: Statuses) -> u64 {
    c.statuses()
        .filter(|(code, _)| match statuses {
            Statuses::Code(want) => *code == want,
            Statuses::Class(class) => *code / 100 == class,
        })
        .map(|(_, n)| n)
        .sum()
}

fn time(h: &Histogram<u64>, stat: Stat) -> Option<f64> {
    if h.is_empty() {
        return None;
    }
    let nanos = match stat {
        Stat::Quantile(q) => h.value_at_quantile(q) as f64,
        Stat::Mean => h.mean(),
        Stat::Min => h.min() as f64,
        Stat::Max => h.max() as f64,
    };
    Some(nanos / 1e9)
}

pub(crate) fn show(metric: Metric, v: f64) -> String {
    match metric {
        Metric::Time(..) => format!("{:.3} ms", v * 1e3),
        Metric::ErrorRate | Metric::Status { rate: true, .. } | Metric::RetryAfter { rate: true } | Metric::Checks => {
            format!("{:.3}%", v * 100.0)
        }
        Metric::Rps => format!("{v:.1}"),
        Metric::Errors | Metric::Status { rate: false, .. } | Metric::RetryAfter { rate: false } => format!("{v:.0}"),
    }
}

/// The text report's closing section: each threshold with its measured value and verdict.
pub(crate) fn to_text(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    if verdicts.is_empty() {
        return out;
    }
    out.push_str("Thresholds:\n");
    let width = verdicts.iter().map(|v| v.threshold.text.chars().count()).max().unwrap_or(0);
    for v in verdicts {
        let mark = if v.passed { "pass" } else { "FAIL" };
        let text = &v.threshold.text;
        let (measured, baseline, aborted) = (v.measured_text(), v.baseline_text(), v.aborted_text());
        out.push_str(&format!("  {mark}  {text:<width$}  measured {measured}{baseline}{aborted}\n"));
    }
    out
}

#[cfg(test)]
mod tests;
