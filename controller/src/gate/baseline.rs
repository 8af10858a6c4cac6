//! Baselines: `--baseline old.json --max-regression 5%` on a run, and `volley compare OLD NEW`.
//! Each compared metric becomes a threshold whose limit is the baseline's value plus the
//! regression allowed (`rps>=95% of baseline`, `p99<=105% of baseline`), so a comparison is
//! judged, printed and written (text, JSON, JUnit, Markdown) like any other threshold.
//!
//! Noise: one run against one run measures the machine's mood as much as the build. Several
//! reports on a side are compared by their medians (the median of requests/s, of p99, ...
//! each on its own), which one outlier run cannot move.

use std::path::{Path, PathBuf};

use super::parse::{Metric, Op, Stat, Threshold, Timing};
use super::verdict::{Verdict, measure};
use crate::error::CliError;
use crate::report::{Report, from_saved};

/// The regression allowed when `--max-regression` is not given.
const DEFAULT_REGRESSION: f64 = 0.05;

/// What is compared: requests/s, p50 and p99 of latency always, and every other time metric
/// a `--threshold` names (`p99.9`, `connect_p99`, `mean`...): what the gate cares about.
pub(crate) fn metrics(thresholds: &[Threshold]) -> Vec<(String, Metric)> {
    let mut out = vec![
        ("rps".to_string(), Metric::Rps),
        ("p50".to_string(), Metric::Time(Timing::Latency, Stat::Quantile(0.5))),
        ("p99".to_string(), Metric::Time(Timing::Latency, Stat::Quantile(0.99))),
    ];
    for t in thresholds {
        if matches!(t.metric, Metric::Time(..)) && !out.iter().any(|(_, m)| *m == t.metric) {
            out.push((t.name.clone(), t.metric));
        }
    }
    out
}

/// `--max-regression 5%` (or `5`) as a fraction; 5% when not given.
pub(crate) fn parse_regression(text: Option<&str>) -> Result<f64, CliError> {
    let Some(text) = text else { return Ok(DEFAULT_REGRESSION) };
    text.trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && (0.0..100.0).contains(p))
        .map(|p| p / 100.0)
        .ok_or_else(|| CliError::Usage(format!("--max-regression '{text}': expected a percent from 0 to 100, e.g. 5%")))
}

/// Reads saved JSON reports, each one on its own. A file that is absent or not a report is a
/// usage error naming it: it is an argument, and nothing was run yet.
pub(crate) fn load(paths: &[PathBuf], flag: &str) -> Result<Vec<Report>, CliError> {
    paths
        .iter()
        .map(|path| {
            from_saved(std::slice::from_ref(path)).map_err(|e| match e {
                CliError::BadReport { path, why } => CliError::Usage(format!("{flag} {path}: {why}")),
                other => CliError::Usage(format!("{flag} {}: {other}", path.display())),
            })
        })
        .collect()
}

/// The median of `metric` over `reports`; None when one of them has nothing to measure.
fn median(reports: &[Report], metric: Metric) -> Option<f64> {
    let mut values = reports.iter().map(|r| measure(metric, None, r)).collect::<Option<Vec<f64>>>()?;
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[mid]),
        _ => Some((values[mid - 1] + values[mid]) / 2.0),
    }
}

fn shown(path: &Path) -> String {
    crate::printable::one_line(&path.display().to_string())
}

/// One threshold per compared metric, its limit the baseline's median plus the regression
/// allowed: requests/s may fall by at most `regression`, a time may grow by at most that.
pub(crate) fn thresholds(
    baseline: &[Report],
    paths: &[PathBuf],
    metrics: &[(String, Metric)],
    regression: f64,
    flag: &str,
) -> Result<Vec<Threshold>, CliError> {
    let percent = regression * 100.0;
    metrics
        .iter()
        .map(|(name, metric)| {
            let old = median(baseline, *metric).ok_or_else(|| {
                let without = baseline.iter().zip(paths).find(|(r, _)| measure(*metric, None, r).is_none());
                let file = without.map(|(_, p)| shown(p)).unwrap_or_default();
                CliError::Usage(format!("{flag} {file}: it has no {name} to compare with (no responses)"))
            })?;
            let (op, limit, text) = match metric {
                Metric::Rps => (Op::Ge, old * (1.0 - regression), format!("{name}>={}% of baseline", 100.0 - percent)),
                _ => (Op::Le, old * (1.0 + regression), format!("{name}<={}% of baseline", 100.0 + percent)),
            };
            Ok(Threshold { text, name: name.clone(), mix_name: None, metric: *metric, op, limit, baseline: Some(old) })
        })
        .collect()
}

/// Judges each baseline threshold on the median of `new` (one report for a run); a metric
/// that `new` has no value for fails, as any threshold with nothing to measure does.
pub(crate) fn judge(thresholds: &[Threshold], new: &[Report]) -> Vec<Verdict> {
    thresholds
        .iter()
        .map(|t| {
            let measured = median(new, t.metric);
            let passed = measured.is_some_and(|m| t.op.holds(m, t.limit));
            Verdict { threshold: t.clone(), measured, passed, aborted_after: None }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_regression;

    #[test]
    fn a_regression_is_a_percent_with_or_without_its_sign_and_five_by_default() {
        assert_eq!(parse_regression(None).unwrap(), 0.05);
        assert_eq!(parse_regression(Some("10%")).unwrap(), 0.1);
        assert_eq!(parse_regression(Some("2.5")).unwrap(), 0.025);
        for bad in ["", "x", "-1%", "100%", "NaN"] {
            assert!(parse_regression(Some(bad)).is_err(), "{bad}");
        }
    }
}
