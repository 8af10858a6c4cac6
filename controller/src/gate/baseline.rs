//! Baselines: `--baseline old.json --max-regression 5%` on a run, and `volley compare OLD NEW`.
//! Each compared metric becomes a threshold whose limit is the baseline's value plus the
//! regression allowed (`rps>=95% of baseline`, `p99<=105% of baseline`), so a comparison is
//! judged, printed and written (text, JSON, JUnit, Markdown) like any other threshold.
//!
//! A mix's names are compared too, each on its own statistics (`login:p99<=105% of baseline`),
//! when every report on both sides has that name: a slower login hides in the run's p99 when
//! login is a tenth of the requests. A name only one side has is not compared, since there is
//! nothing to compare it with; renaming a name therefore drops it from the gate, silently.
//!
//! Noise: one run against one run measures the machine's mood as much as the build. Several
//! reports on a side are compared by their medians (the median of requests/s, of p99, ...
//! each on its own), which one outlier run cannot move.

use std::path::{Path, PathBuf};

use super::parse::{Metric, Op, Stat, Threshold, Timing, written_name};
use super::verdict::{Verdict, measure};
use crate::error::CliError;
use crate::report::{Report, from_saved};

/// The regression allowed when `--max-regression` is not given.
const DEFAULT_REGRESSION: f64 = 0.05;

/// One metric compared with the baseline: on the whole run, or on one name of its mix.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compared {
    /// The metric's name as a threshold writes it (`p99`, `connect_p99`).
    pub metric_name: String,
    /// The name of the mix it is read on; None for the whole run.
    pub mix_name: Option<String>,
    pub metric: Metric,
}

/// What is compared: requests/s, p50 and p99 of latency always, and every other time metric
/// a `--threshold` names (`p99.9`, `connect_p99`, `mean`...): what the gate cares about.
pub(crate) fn metrics(thresholds: &[Threshold]) -> Vec<Compared> {
    let mut out: Vec<Compared> = [
        ("rps", Metric::Rps),
        ("p50", Metric::Time(Timing::Latency, Stat::Quantile(0.5))),
        ("p99", Metric::Time(Timing::Latency, Stat::Quantile(0.99))),
    ]
    .into_iter()
    .map(|(name, metric)| Compared { metric_name: name.to_string(), mix_name: None, metric })
    .collect();
    for t in thresholds {
        if matches!(t.metric, Metric::Time(..)) && !out.iter().any(|c| c.metric == t.metric) {
            out.push(Compared { metric_name: t.name.clone(), mix_name: None, metric: t.metric });
        }
    }
    out
}

/// The run's metrics, then the same for each of `names` in turn, but for connect times: a
/// connection serves every name, so a name keeps none (as `login:connect_p99` is refused).
pub(crate) fn with_names(run: &[Compared], names: &[String]) -> Vec<Compared> {
    let per_name = names.iter().flat_map(|name| {
        run.iter()
            .filter(|c| !matches!(c.metric, Metric::Time(Timing::Connect, _)))
            .map(move |c| Compared { mix_name: Some(name.clone()), ..c.clone() })
    });
    run.iter().cloned().chain(per_name).collect()
}

/// Those of `names` that every report of every side has, in `names`' order.
pub(crate) fn shared_names(names: &[String], sides: &[&[Report]]) -> Vec<String> {
    names.iter().filter(|n| sides.iter().all(|side| side.iter().all(|r| r.names.contains(n)))).cloned().collect()
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

/// The median of `metric` (of a name's, with `mix_name`) over `reports`; None when one of them
/// has nothing to measure.
fn median(reports: &[Report], metric: Metric, mix_name: Option<&str>) -> Option<f64> {
    let mut values = reports.iter().map(|r| measure(metric, mix_name, r)).collect::<Option<Vec<f64>>>()?;
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
/// A run-wide metric the baseline has no value for is a usage error; a name's is skipped (a
/// name that finished nothing in the baseline sets no bar, and should not stop the gate).
pub(crate) fn thresholds(
    baseline: &[Report],
    paths: &[PathBuf],
    compared: &[Compared],
    regression: f64,
    flag: &str,
) -> Result<Vec<Threshold>, CliError> {
    let percent = regression * 100.0;
    let mut out = Vec::with_capacity(compared.len());
    for c in compared {
        let name = &c.metric_name;
        let mix_name = c.mix_name.as_deref();
        let Some(old) = median(baseline, c.metric, mix_name) else {
            if mix_name.is_some() {
                continue;
            }
            let without = baseline.iter().zip(paths).find(|(r, _)| measure(c.metric, None, r).is_none());
            let file = without.map(|(_, p)| shown(p)).unwrap_or_default();
            return Err(CliError::Usage(format!("{flag} {file}: it has no {name} to compare with (no responses)")));
        };
        let prefix = mix_name.map(|n| format!("{}:", written_name(n))).unwrap_or_default();
        let (op, limit, text) = match c.metric {
            Metric::Rps => {
                (Op::Ge, old * (1.0 - regression), format!("{prefix}{name}>={}% of baseline", 100.0 - percent))
            }
            _ => (Op::Le, old * (1.0 + regression), format!("{prefix}{name}<={}% of baseline", 100.0 + percent)),
        };
        let mix_name = c.mix_name.clone();
        out.push(Threshold { text, name: name.clone(), mix_name, metric: c.metric, op, limit, baseline: Some(old) });
    }
    Ok(out)
}

/// Judges each baseline threshold on the median of `new` (one report for a run); a metric
/// that `new` has no value for fails, as any threshold with nothing to measure does.
pub(crate) fn judge(thresholds: &[Threshold], new: &[Report]) -> Vec<Verdict> {
    thresholds
        .iter()
        .map(|t| {
            let measured = median(new, t.metric, t.mix_name.as_deref());
            let passed = measured.is_some_and(|m| t.op.holds(m, t.limit));
            Verdict { threshold: t.clone(), measured, passed, aborted_after: None }
        })
        .collect()
}

#[cfg(test)]
mod tests;
