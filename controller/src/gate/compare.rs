//! `volley compare OLD NEW`: the deltas between saved reports, each side one report or the
//! medians of several, and with `--max-regression` a verdict on each (exit 4 on a regression).
//! The run's metrics come first, then each name every report has (`p99 of login`).

use std::fmt::Write;
use std::path::PathBuf;

use serde_json::json;

use super::baseline;
use super::verdict::show;
use crate::error::CliError;

pub(crate) fn compare(
    old: &[PathBuf],
    new: &[PathBuf],
    max_regression: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let regression = baseline::parse_regression(max_regression)?;
    let (old_reports, new_reports) = (baseline::load(old, "compare")?, baseline::load(new, "compare")?);
    // Each name every report on both sides has is compared on its own too.
    let candidates = old_reports.first().map(|r| r.names.clone()).unwrap_or_default();
    let names = baseline::shared_names(&candidates, &[&old_reports, &new_reports]);
    let compared = baseline::with_names(&baseline::metrics(&[]), &names);
    let thresholds = baseline::thresholds(&old_reports, old, &compared, regression, "compare")?;
    let verdicts = baseline::judge(&thresholds, &new_reports);
    // Without --max-regression this only shows the deltas: no verdict, exit 0.
    let judged = max_regression.is_some();
    let text = if json {
        let metrics: Vec<_> = verdicts
            .iter()
            .map(|v| {
                json!({
                    "metric": v.threshold.name,
                    "name": v.threshold.mix_name,
                    "unit": v.unit(),
                    "old": v.threshold.baseline,
                    "new": v.measured,
                    "delta": v.delta(),
                    "limit": judged.then_some(v.threshold.limit),
                    "passed": judged.then_some(v.passed),
                })
            })
            .collect();
        let files = |paths: &[PathBuf]| paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
        let value = json!({
            "old": files(old),
            "new": files(new),
            "maxRegression": judged.then_some(regression),
            "metrics": metrics,
            "passed": judged.then(|| verdicts.iter().all(|v| v.passed)),
        });
        let mut s = serde_json::to_string_pretty(&value).unwrap_or_default();
        s.push('\n');
        s
    } else {
        let mut out = String::new();
        let side = |n: usize| if n == 1 { "1 report".to_string() } else { format!("the medians of {n} reports") };
        let _ = writeln!(out, "Old: {}; new: {}", side(old.len()), side(new.len()));
        // `p99 of login`: as wide as the widest, the run's own `metric` at least.
        let width = verdicts.iter().map(|v| v.threshold.what().chars().count()).max().unwrap_or(0).max(8);
        let _ = write!(out, "  {:<width$} {:>14} {:>14} {:>9}", "metric", "old", "new", "delta");
        out.push_str(if judged { "  verdict\n" } else { "\n" });
        for v in &verdicts {
            let old = v.threshold.baseline.map(|o| show(v.threshold.metric, o)).unwrap_or_default();
            let delta = v.delta().map(|d| format!("{:+.1}%", d * 100.0)).unwrap_or_else(|| "-".into());
            // Names from saved reports are one line already (`report::from_saved`).
            let what = v.threshold.what();
            let _ = write!(out, "  {what:<width$} {old:>14} {:>14} {delta:>9}", v.measured_text());
            if judged {
                let mark = if v.passed { "pass" } else { "FAIL" };
                let _ = write!(out, "  {mark} ({})", v.limit_text());
            }
            out.push('\n');
        }
        out
    };
    crate::output::to_stdout(&text)?;
    let failed: Vec<String> = verdicts.iter().filter(|v| judged && !v.passed).map(|v| v.failure_text()).collect();
    if failed.is_empty() { Ok(()) } else { Err(CliError::ThresholdsFailed(failed.join(", "))) }
}
