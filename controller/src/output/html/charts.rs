//! What each chart of the page shows, decided here and handed to the page's script as data:
//! the x values, the lines, and the thresholds drawn where they apply (a limit line on the
//! chart of its metric, a marker at its percentile on a spectrum). The script only draws.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::input::{Saved, SavedSecond, SavedVerdict, SavedWorker};
use super::spectrum::{self, Point};
use crate::gate::{Metric, Stat, Threshold, Timing};

#[derive(Debug, Serialize)]
pub(super) struct Chart {
    pub id: &'static str,
    pub title: &'static str,
    /// "seconds" of the run, or "percentile" as nines.
    pub x: &'static str,
    /// The y axis' unit.
    pub unit: &'static str,
    /// A logarithmic y axis: latencies, whose tails are orders of magnitude above their body.
    pub log: bool,
    pub xs: Vec<f64>,
    pub series: Vec<Line>,
    /// Why there is nothing to draw, when there is not.
    pub empty: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub(super) struct Line {
    pub label: String,
    pub style: Style,
    pub values: Vec<Option<f64>>,
    /// For a threshold's line or marker: whether it held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub(super) enum Style {
    /// The run's own measurement.
    Main,
    /// One worker's part of a distributed run.
    Worker,
    /// A threshold's limit, as a line.
    Limit,
    /// A threshold's limit at one point (a percentile on a spectrum).
    Marker,
}

/// A threshold of the report whose text still parses, so the chart it belongs on is known.
pub(super) struct Drawn<'a> {
    pub verdict: &'a SavedVerdict,
    pub threshold: Threshold,
}

impl<'a> Drawn<'a> {
    /// The same threshold, for a list of its own.
    fn again(&self) -> Drawn<'a> {
        Drawn { verdict: self.verdict, threshold: self.threshold.clone() }
    }

    fn label(&self) -> String {
        format!("{} ({})", self.verdict.threshold, if self.verdict.passed { "pass" } else { "FAIL" })
    }

    fn line(&self, style: Style, values: Vec<Option<f64>>) -> Line {
        Line { label: self.label(), style, values, passed: Some(self.verdict.passed) }
    }
}

/// The thresholds of the whole run, which its charts draw; a name's threshold (`login:p99<...`)
/// says nothing about the run's lines.
/// The thresholds of a name are drawn on that name's line of the names' chart instead.
pub(super) fn drawable(verdicts: &[SavedVerdict]) -> Vec<Drawn<'_>> {
    verdicts
        .iter()
        .filter_map(|v| Threshold::parse(&v.threshold).ok().map(|threshold| Drawn { verdict: v, threshold }))
        .collect()
}

/// Names drawn on the names' chart at most: past a dozen lines a chart is a tangle, and the
/// table lists every name anyway.
const NAME_LINES: usize = 12;

const NO_SECONDS: &str = "this report has no per-second data (a merge of saved reports, or nothing completed)";
const NO_RESPONSES: &str = "no responses: nothing to draw";

/// Every chart of the page, in order. Histograms that do not decode make the report unreadable.
pub(super) fn all(r: &Saved, thresholds: &[Drawn]) -> Result<Vec<Chart>, String> {
    let workers = distributed(r);
    let (named, run): (Vec<&Drawn>, Vec<&Drawn>) = thresholds.iter().partition(|t| t.threshold.mix_name.is_some());
    let run: Vec<Drawn> = run.into_iter().map(Drawn::again).collect();
    let thresholds = run.as_slice();
    let mut charts = vec![
        requests(r, &workers, thresholds),
        latency_over_time(r, &workers, thresholds),
        latency_spectrum(r, thresholds)?,
        setup_spectrum(r, thresholds)?,
        statuses(r, thresholds),
    ];
    if !r.names.is_empty() {
        charts.push(names_spectrum(r, &named)?);
    }
    Ok(charts)
}

/// Each name's latency distribution, from its own merged histogram: a line per name (the
/// busiest [`NAME_LINES`] of them), and a marker at the percentile of each of its thresholds.
fn names_spectrum(r: &Saved, thresholds: &[&Drawn]) -> Result<Chart, String> {
    let mut names: Vec<_> = r.names.iter().filter(|n| n.requests.ok > 0).collect();
    // The busiest first, then the file's order among equals (a stable sort keeps it).
    names.sort_by_key(|n| std::cmp::Reverse(n.requests.ok));
    names.truncate(NAME_LINES);
    let mut decoded = Vec::with_capacity(names.len());
    for n in &names {
        decoded
            .push((n, spectrum::decode(&format!("names' histograms.latency of {}", n.name), &n.histograms.latency)?));
    }
    let most = decoded.iter().map(|(_, h)| h.len()).max().unwrap_or(0);
    let exact: Vec<f64> = thresholds
        .iter()
        .filter_map(|t| match t.threshold.metric {
            Metric::Time(Timing::Latency, Stat::Quantile(q)) if q < 1.0 => Some(q),
            _ => None,
        })
        .collect();
    let axis = spectrum::axis(most, &exact);
    let mut chart = Chart {
        id: "names",
        title: if r.names.len() > NAME_LINES {
            "Latency distribution per name (the 12 busiest)"
        } else {
            "Latency distribution per name"
        },
        x: "percentile",
        unit: "ms",
        log: true,
        xs: axis.iter().map(|p| p.nines).collect(),
        series: Vec::new(),
        empty: decoded.is_empty().then_some(NO_RESPONSES),
    };
    for (n, h) in &decoded {
        chart.series.push(Line {
            label: n.name.clone(),
            style: Style::Main,
            values: spectrum::millis(h, &axis),
            passed: None,
        });
    }
    let drawn: Vec<Drawn> = thresholds
        .iter()
        .filter(|t| decoded.iter().any(|(n, _)| t.threshold.mix_name.as_deref() == Some(n.name.as_str())))
        .map(|t| Drawn::again(t))
        .collect();
    spectrum_thresholds(&mut chart, &axis, Timing::Latency, &drawn);
    Ok(chart)
}

/// The workers whose own seconds the report holds, when there are several of them: one
/// worker's lines would only repeat the run's.
fn distributed(r: &Saved) -> Vec<&SavedWorker> {
    let with_seconds: Vec<&SavedWorker> = r.workers.iter().filter(|w| !w.intervals.is_empty()).collect();
    if with_seconds.len() > 1 { with_seconds } else { Vec::new() }
}

fn seconds(r: &Saved) -> Vec<f64> {
    r.intervals.iter().map(|s| f64::from(s.second)).collect()
}

fn time_chart(id: &'static str, title: &'static str, unit: &'static str, r: &Saved) -> Chart {
    let empty = r.intervals.is_empty().then_some(NO_SECONDS);
    Chart { id, title, x: "seconds", unit, log: unit == "ms", xs: seconds(r), series: Vec::new(), empty }
}

/// A worker's value of each of the run's seconds; none where it reported nothing.
fn aligned(run: &[SavedSecond], worker: &SavedWorker, value: impl Fn(&SavedSecond) -> Option<f64>) -> Vec<Option<f64>> {
    let by_second: BTreeMap<u32, &SavedSecond> = worker.intervals.iter().map(|s| (s.second, s)).collect();
    run.iter().map(|s| by_second.get(&s.second).and_then(|w| value(w))).collect()
}

fn constant(n: usize, value: f64) -> Vec<Option<f64>> {
    vec![Some(value); n]
}

fn requests(r: &Saved, workers: &[&SavedWorker], thresholds: &[Drawn]) -> Chart {
    let mut chart = time_chart("requests", "Requests per second", "req/s", r);
    let n = chart.xs.len();
    chart.series.push(Line {
        label: "all workers".into(),
        style: Style::Main,
        values: r.intervals.iter().map(|s| Some(s.requests as f64)).collect(),
        passed: None,
    });
    for w in workers {
        chart.series.push(Line {
            label: w.label(),
            style: Style::Worker,
            values: aligned(&r.intervals, w, |s| Some(s.requests as f64)),
            passed: None,
        });
    }
    for t in thresholds.iter().filter(|t| t.threshold.metric == Metric::Rps) {
        chart.series.push(t.line(Style::Limit, constant(n, t.verdict.limit)));
    }
    chart
}

/// One number of a second's summary.
type OfSecond = fn(&SavedSecond) -> Option<f64>;

fn ms(seconds: Option<f64>) -> Option<f64> {
    seconds.map(|s| s * 1e3)
}

fn latency_over_time(r: &Saved, workers: &[&SavedWorker], thresholds: &[Drawn]) -> Chart {
    let mut chart = time_chart("latency", "Latency over time, per second", "ms", r);
    let n = chart.xs.len();
    let stats: [(&str, OfSecond); 4] = [
        ("p50", |s| s.p50_seconds),
        ("p90", |s| s.p90_seconds),
        ("p99", |s| s.p99_seconds),
        ("max", |s| s.max_seconds),
    ];
    for (label, stat) in stats {
        let values: Vec<Option<f64>> = r.intervals.iter().map(|s| ms(stat(s))).collect();
        // Reports from before p90 and max were kept per second have none.
        if values.iter().any(Option::is_some) || label == "p50" {
            chart.series.push(Line { label: label.into(), style: Style::Main, values, passed: None });
        }
    }
    for w in workers {
        chart.series.push(Line {
            label: format!("{} p99", w.label()),
            style: Style::Worker,
            values: aligned(&r.intervals, w, |s| ms(s.p99_seconds)),
            passed: None,
        });
    }
    for t in thresholds {
        if let Metric::Time(Timing::Latency, _) = t.threshold.metric {
            chart.series.push(t.line(Style::Limit, constant(n, t.verdict.limit * 1e3)));
        }
    }
    chart
}

/// The thresholds on `timing`, as markers on its spectrum (a line for a mean, which has no
/// percentile).
fn spectrum_thresholds(chart: &mut Chart, axis: &[Point], timing: Timing, thresholds: &[Drawn]) {
    let n = axis.len();
    for t in thresholds {
        let Metric::Time(on, stat) = t.threshold.metric else { continue };
        if on != timing {
            continue;
        }
        let limit = t.verdict.limit * 1e3;
        let at = match stat {
            Stat::Mean => {
                chart.series.push(t.line(Style::Limit, constant(n, limit)));
                continue;
            }
            Stat::Min => 0,
            Stat::Max => n - 1,
            Stat::Quantile(q) if q >= 1.0 => n - 1,
            Stat::Quantile(q) => axis.iter().position(|p| p.quantile == q).unwrap_or(n - 1),
        };
        let mut values = vec![None; n];
        values[at] = Some(limit);
        chart.series.push(t.line(Style::Marker, values));
    }
}

/// The quantiles of the thresholds on `timing`, to be read exactly.
fn quantiles(timing: Timing, thresholds: &[Drawn]) -> Vec<f64> {
    thresholds
        .iter()
        .filter_map(|t| match t.threshold.metric {
            Metric::Time(on, Stat::Quantile(q)) if on == timing && q < 1.0 => Some(q),
            _ => None,
        })
        .collect()
}

fn latency_spectrum(r: &Saved, thresholds: &[Drawn]) -> Result<Chart, String> {
    let merged = spectrum::decode("histograms.latency", &r.histograms.latency)?;
    let mut own = Vec::new();
    // Each worker's curve beside the merged one, when there are several.
    if r.workers.iter().filter(|w| w.histograms.is_some()).count() > 1 {
        for w in &r.workers {
            if let Some(h) = &w.histograms {
                own.push((w.label(), spectrum::decode(&format!("histograms.latency of {}", w.address), &h.latency)?));
            }
        }
    }
    let axis = spectrum::axis(merged.len(), &quantiles(Timing::Latency, thresholds));
    let mut chart = Chart {
        id: "spectrum",
        title: "Latency distribution (percentile spectrum)",
        x: "percentile",
        unit: "ms",
        log: true,
        xs: axis.iter().map(|p| p.nines).collect(),
        series: vec![Line {
            label: "all workers".into(),
            style: Style::Main,
            values: spectrum::millis(&merged, &axis),
            passed: None,
        }],
        empty: merged.is_empty().then_some(NO_RESPONSES),
    };
    for (label, h) in own.iter().filter(|(_, h)| !h.is_empty()) {
        chart.series.push(Line {
            label: label.clone(),
            style: Style::Worker,
            values: spectrum::millis(h, &axis),
            passed: None,
        });
    }
    spectrum_thresholds(&mut chart, &axis, Timing::Latency, thresholds);
    Ok(chart)
}

fn setup_spectrum(r: &Saved, thresholds: &[Drawn]) -> Result<Chart, String> {
    let connect = spectrum::decode("histograms.connect", &r.histograms.connect)?;
    let first_byte = spectrum::decode("histograms.firstByte", &r.histograms.first_byte)?;
    let mut exact = quantiles(Timing::Connect, thresholds);
    exact.extend(quantiles(Timing::FirstByte, thresholds));
    let axis = spectrum::axis(connect.len().max(first_byte.len()), &exact);
    let mut chart = Chart {
        id: "setup",
        title: "Connect and first byte (percentile spectrum)",
        x: "percentile",
        unit: "ms",
        log: true,
        xs: axis.iter().map(|p| p.nines).collect(),
        series: vec![
            Line {
                label: "first byte".into(),
                style: Style::Main,
                values: spectrum::millis(&first_byte, &axis),
                passed: None,
            },
            Line {
                label: "connect".into(),
                style: Style::Main,
                values: spectrum::millis(&connect, &axis),
                passed: None,
            },
        ],
        empty: (connect.is_empty() && first_byte.is_empty()).then_some(NO_RESPONSES),
    };
    spectrum_thresholds(&mut chart, &axis, Timing::Connect, thresholds);
    spectrum_thresholds(&mut chart, &axis, Timing::FirstByte, thresholds);
    Ok(chart)
}

fn statuses(r: &Saved, thresholds: &[Drawn]) -> Chart {
    let mut chart = time_chart("statuses", "Status codes and errors per second", "count/s", r);
    let codes: BTreeSet<&str> = r.intervals.iter().flat_map(|s| s.status_codes.keys().map(String::as_str)).collect();
    for code in codes {
        chart.series.push(Line {
            label: code.to_string(),
            style: Style::Main,
            values: r.intervals.iter().map(|s| Some(s.status_codes.get(code).copied().unwrap_or(0) as f64)).collect(),
            passed: None,
        });
    }
    chart.series.push(Line {
        label: "errors".into(),
        style: Style::Main,
        values: r.intervals.iter().map(|s| Some(s.errors as f64)).collect(),
        passed: None,
    });
    // A rate's limit is drawn as the count it allows in each second: that second's requests
    // times the limit. Count thresholds are about the whole run and have no line in time.
    for t in thresholds {
        if matches!(t.threshold.metric, Metric::ErrorRate | Metric::Status { rate: true, .. }) {
            let values = r.intervals.iter().map(|s| Some(s.requests as f64 * t.verdict.limit)).collect();
            chart.series.push(t.line(Style::Limit, values));
        }
    }
    chart
}

#[cfg(test)]
mod tests;
