//! JUnit XML, as CI test-report viewers read it: one testcase per threshold (a failure when it
//! did not hold) and one for the run itself (an error when it could not run, was interrupted or
//! lost workers, so a broken measurement never shows as a green gate).

use std::fmt::Write;

use crate::gate::Verdict;
use crate::report::Report;

pub(crate) fn testsuites(report: &Report, verdicts: &[Verdict]) -> String {
    let failures = verdicts.iter().filter(|v| !v.passed).count();
    let run_error = report.outcome().err().map(|e| e.to_string());
    let errors = usize::from(run_error.is_some());
    let tests = verdicts.len() + 1;
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
                v.threshold.name,
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
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
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
