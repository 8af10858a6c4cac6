//! The per-second series as CSV: one row per second of the run, merged over the workers,
//! latencies in seconds as in the JSON report. A run of a mix adds a last column, `name`: each
//! second's row for the whole run leaves it empty and is followed by a row for each name that
//! finished requests in that second (in the mix's order), as k6's CSV tags each sample with its
//! request's name; filtering on `name` gives one name's series, and the empty name the run's.
//! Without a mix the columns are what they always were, so existing readers keep working. A mix
//! with checks adds two more after `name`, `checks_passed` and `checks_failed`: the verdicts of
//! that second's responses over all the name's checks (or every name's, on the run's row). A run
//! of scenarios adds three more at the end, `abandoned`, `extract_failed` and `redirects`: the
//! iterations that ended early at the name's steps in that second, its failed extractions and
//! the redirects it followed (on the run's row, every name's).

use std::fmt::Write;

use volley_engine::CheckCounts;

use crate::fleet::FlowCounts;
use crate::report::Report;

const HEADER: &str = "second,requests,ok,errors,p50_seconds,p99_seconds";

pub(crate) fn series(report: &Report) -> String {
    let mix = !report.names.is_empty();
    let checked = report.checks.iter().any(|c| !c.is_empty());
    let flows = mix && !report.scenarios.is_empty();
    let mut out = String::from(HEADER);
    out.push_str(match (mix, checked) {
        (false, _) => "",
        (true, false) => ",name",
        (true, true) => ",name,checks_passed,checks_failed",
    });
    out.push_str(if flows { ",abandoned,extract_failed,redirects\n" } else { "\n" });
    let secs = |ns: Option<u64>| ns.map(|n| format!("{:.9}", n as f64 / 1e9)).unwrap_or_default();
    let verdicts = |c: CheckCounts, f: FlowCounts| {
        let mut cells = String::new();
        if checked {
            let _ = write!(cells, ",{},{}", c.passed, c.failed);
        }
        if flows {
            let _ = write!(cells, ",{},{},{}", f.abandoned, f.extract_failed, f.redirects);
        }
        cells
    };
    for s in &report.intervals {
        let _ = write!(out, "{},{},{},{},{},{}", s.second, s.ok + s.errors, s.ok, s.errors, secs(s.p50), secs(s.p99));
        if !mix {
            out.push('\n');
            continue;
        }
        let (checks, flow) = s.names.iter().fold((CheckCounts::default(), FlowCounts::default()), |(mut c, f), n| {
            c.merge(&n.checks);
            (c, f.plus(n.flow))
        });
        let _ = writeln!(out, ",{}", verdicts(checks, flow));
        for n in &s.names {
            let Some(name) = report.names.get(n.index) else { continue };
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{}{}",
                s.second,
                n.ok + n.errors,
                n.ok,
                n.errors,
                secs(n.p50),
                secs(n.p99),
                field(name),
                verdicts(n.checks, n.flow)
            );
        }
    }
    out
}

/// A CSV field (RFC 4180): quoted, its quotes doubled, when it holds a comma, a quote or a line
/// break; a name may hold the first two.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

#[cfg(test)]
mod tests;
