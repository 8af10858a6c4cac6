//! JUnit XML, as CI test-report viewers read it: one testcase per threshold (a failure when it
//! did not hold), one for the run itself (an error when it could not run, was interrupted or
//! lost workers, so a broken measurement never shows as a green gate), and with a mix one per
//! name (classname `volley.names`), failed when a threshold of that name failed, its counts and
//! percentiles (and its scenario checks' counts, and the iterations that ended early at its
//! step, where some did) in its system-out and properties: a CI viewer
//! then lists the requests of a mix as it lists tests, and a slow one stands out by name. A
//! failed check fails no testcase by itself: `--threshold 'checks>X%'` is the gate. A scenario
//! run also has one per scenario (classname `volley.scenarios`) with its iterations (started,
//! completed, abandoned, and with pacing the late ones) and a flow's iteration durations, which
//! fails nothing either.

use std::fmt::Write;

use crate::gate::Verdict;
use crate::report::{NameLine, Report, ScenarioRow};

pub(crate) fn testsuites(report: &Report, verdicts: &[Verdict]) -> String {
    let names: Vec<NameLine<'_>> = report.name_lines().collect();
    let failed_names = names.iter().filter(|n| failed_of(verdicts, n.name).next().is_some()).count();
    let failures = verdicts.iter().filter(|v| !v.passed).count() + failed_names;
    let run_error = report.outcome().err().map(|e| e.to_string());
    let errors = usize::from(run_error.is_some());
    let scenarios: Vec<ScenarioRow<'_>> = report.scenario_rows().collect();
    let tests = verdicts.len() + 1 + names.len() + scenarios.len();
    let time = report.duration.as_secs_f64();
    let suite = format!("volley {}", report.url);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"volley\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{time:.3}\">",
        escape(&suite)
    );
    let _ = write!(out, "    <testcase name=\"run\" classname=\"volley\" time=\"{time:.3}\"");
    match &run_error {
        Some(why) => {
            let _ = writeln!(out, ">\n      <error message=\"{}\" type=\"run\"/>\n    </testcase>", escape(why));
        }
        None => out.push_str("/>\n"),
    }
    for v in verdicts {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"volley.thresholds\" time=\"0\"",
            escape(&v.threshold.text)
        );
        if v.passed {
            let measured = format!("{}{}", v.measured_text(), v.baseline_text());
            let _ = writeln!(out, ">\n      <system-out>{}</system-out>\n    </testcase>", escape(&measured));
        } else {
            let message = format!(
                "{} was {}{}, expected {}{}",
                v.threshold.what(),
                v.measured_text(),
                v.baseline_text(),
                v.limit_text(),
                v.aborted_text()
            );
            let _ = writeln!(
                out,
                ">\n      <failure message=\"{}\" type=\"threshold\"/>\n    </testcase>",
                escape(&message)
            );
        }
    }
    for line in &names {
        name_case(&mut out, line, verdicts);
    }
    for row in &scenarios {
        scenario_case(&mut out, row);
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The failed thresholds of mix name `name`.
fn failed_of<'a>(verdicts: &'a [Verdict], name: &'a str) -> impl Iterator<Item = &'a Verdict> {
    verdicts.iter().filter(move |v| !v.passed && v.threshold.mix_name.as_deref() == Some(name))
}

/// One name's testcase: its numbers as properties (for tools) and in system-out (for people),
/// and a failure listing the thresholds of that name that failed.
fn name_case(out: &mut String, line: &NameLine<'_>, verdicts: &[Verdict]) {
    let c = &line.stats.counters;
    let ms = |q: f64| {
        let h = &line.stats.latency;
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e6)
    };
    let (p50, p99) = (ms(0.5), ms(0.99));
    let shown = |v: Option<f64>| v.map(|v| format!("{v:.3} ms")).unwrap_or_else(|| "-".into());
    let statuses: Vec<String> = c.statuses().map(|(code, n)| format!("{code}: {n}")).collect();
    let _ = writeln!(out, "    <testcase name=\"{}\" classname=\"volley.names\" time=\"0\">", escape(line.name));
    out.push_str("      <properties>\n");
    let number = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
    for (key, value) in [
        ("requests", c.total().to_string()),
        ("ok", c.ok.to_string()),
        ("errors", c.errors().to_string()),
        ("p50_ms", number(p50)),
        ("p99_ms", number(p99)),
    ] {
        let _ = writeln!(out, "        <property name=\"{key}\" value=\"{value}\"/>");
    }
    // A flow's iterations that ended at this step, only where some did.
    let ended_early = c.abandoned > 0 || c.extract_failed > 0;
    if ended_early {
        let _ = writeln!(out, "        <property name=\"abandoned\" value=\"{}\"/>", c.abandoned);
        let _ = writeln!(out, "        <property name=\"extract_failed\" value=\"{}\"/>", c.extract_failed);
    }
    if c.redirects > 0 {
        let _ = writeln!(out, "        <property name=\"redirects\" value=\"{}\"/>", c.redirects);
    }
    for (k, (check, counts)) in line.check_lines().enumerate() {
        let _ = writeln!(out, "        <property name=\"check_{k}\" value=\"{}\"/>", escape(check));
        let _ = writeln!(out, "        <property name=\"check_{k}_passed\" value=\"{}\"/>", counts.passed);
        let _ = writeln!(out, "        <property name=\"check_{k}_failed\" value=\"{}\"/>", counts.failed);
    }
    out.push_str("      </properties>\n");
    let failed: Vec<String> = failed_of(verdicts, line.name).map(Verdict::failure_text).collect();
    if !failed.is_empty() {
        let message = format!("thresholds failed: {}", failed.join(", "));
        let _ = writeln!(out, "      <failure message=\"{}\" type=\"threshold\"/>", escape(&message));
    }
    let mut text = format!(
        "requests {}, ok {}, errors {}, p50 {}, p99 {}, statuses {}",
        c.total(),
        c.ok,
        c.errors(),
        shown(p50),
        shown(p99),
        if statuses.is_empty() { "none".to_string() } else { statuses.join(", ") }
    );
    for (check, counts) in line.check_lines() {
        let _ = write!(text, "\ncheck {check}: {} passed, {} failed", counts.passed, counts.failed);
    }
    if ended_early {
        let _ = write!(text, "\niterations abandoned here {}, extractions failed {}", c.abandoned, c.extract_failed);
    }
    if c.redirects > 0 {
        let _ = write!(text, "\nredirects followed {}", c.redirects);
    }
    let _ = writeln!(out, "      <system-out>{}</system-out>\n    </testcase>", escape(&text));
}

/// One scenario's testcase: its iterations and a flow's durations, as properties and in
/// system-out.
fn scenario_case(out: &mut String, row: &ScenarioRow<'_>) {
    let s = &row.stats;
    let _ =
        writeln!(out, "    <testcase name=\"{}\" classname=\"volley.scenarios\" time=\"0\">", escape(&row.line.name));
    let mut properties = vec![
        ("weight", row.line.weight.to_string()),
        ("started", s.started.to_string()),
        ("completed", s.completed.to_string()),
        ("abandoned", s.abandoned.to_string()),
    ];
    let mut text = format!("iterations started {}, completed {}, abandoned {}", s.started, s.completed, s.abandoned);
    if let Some(pacing) = row.pacing_ms() {
        let (late, missed) = (s.late.to_string(), s.missed.to_string());
        properties.extend([("pacing_ms", format!("{pacing:.6}")), ("late", late), ("missed", missed)]);
        let _ = write!(text, "\npacing {pacing:.3} ms, late {}, slots missed {}", s.late, s.missed);
    }
    if let (Some(p50), Some(p99)) = (row.duration_ms(0.5), row.duration_ms(0.99)) {
        properties.extend([("duration_p50_ms", format!("{p50:.6}")), ("duration_p99_ms", format!("{p99:.6}"))]);
        let _ = write!(text, "\niteration duration p50 {p50:.3} ms, p99 {p99:.3} ms");
    }
    out.push_str("      <properties>\n");
    for (key, value) in properties {
        let _ = writeln!(out, "        <property name=\"{key}\" value=\"{value}\"/>");
    }
    out.push_str("      </properties>\n");
    let _ = writeln!(out, "      <system-out>{}</system-out>\n    </testcase>", escape(&text));
}

/// XML attribute and text escaping; control characters other than tab and newlines cannot
/// appear in XML 1.0 at all, so they become spaces.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
