//! A Markdown summary for CI step summaries ($GITHUB_STEP_SUMMARY and the like): the verdict,
//! the thresholds, the headline numbers, a mix's names and the warnings.

use std::fmt::Write;

use crate::gate::Verdict;
use crate::report::{PERCENTILES, Report};

pub(crate) fn summary(report: &Report, verdicts: &[Verdict]) -> String {
    let c = &report.stats.counters;
    let mut out = String::new();
    let verdict = match (report.outcome(), verdicts.iter().all(|v| v.passed)) {
        (Err(e), _) => format!("run failed: {e}"),
        (Ok(()), false) => "thresholds failed".to_string(),
        (Ok(()), true) if verdicts.is_empty() => "completed".to_string(),
        (Ok(()), true) => "thresholds passed".to_string(),
    };
    let _ = writeln!(out, "### volley: {}\n", cell(&verdict));
    let _ = writeln!(
        out,
        "Target `{}`, {}, {} connections\n",
        report.url.replace('`', "'"),
        report.protocol,
        report.connections
    );
    if !verdicts.is_empty() {
        out.push_str("| Threshold | Measured | Verdict |\n| --- | --: | --- |\n");
        for v in verdicts {
            let mark = if v.passed { "pass" } else { "**FAIL**" };
            let (text, measured) = (cell(&v.threshold.text), format!("{}{}", v.measured_text(), v.baseline_text()));
            let _ = writeln!(out, "| `{text}` | {measured} | {mark}{} |", v.aborted_text());
        }
        out.push('\n');
    }
    out.push_str("| Requests | OK | Errors | Requests/s | Duration |\n| --: | --: | --: | --: | --: |\n");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {:.1} | {:.3} s |\n",
        c.total(),
        c.ok,
        c.errors(),
        report.requests_per_sec(),
        report.duration.as_secs_f64()
    );
    let lat = &report.stats.histograms.latency;
    if !lat.is_empty() {
        let shown: Vec<_> = PERCENTILES.iter().filter(|(l, _)| ["50", "90", "99", "99.9"].contains(l)).collect();
        out.push_str("| Latency (ms) | mean |");
        for (label, _) in &shown {
            let _ = write!(out, " p{label} |");
        }
        out.push_str(" max |\n| --- |");
        out.push_str(&" --: |".repeat(shown.len() + 2));
        let _ = write!(out, "\n| | {:.3} |", lat.mean() / 1e6);
        for (_, q) in &shown {
            let _ = write!(out, " {:.3} |", lat.value_at_quantile(*q) as f64 / 1e6);
        }
        let _ = writeln!(out, " {:.3} |\n", lat.max() as f64 / 1e6);
    }
    let statuses: Vec<String> = c.statuses().map(|(code, n)| format!("{code}: {n}")).collect();
    if !statuses.is_empty() {
        let _ = writeln!(out, "Status codes: {}\n", statuses.join(", "));
    }
    names(&mut out, report);
    scenarios(&mut out, report);
    checks(&mut out, report);
    abandoned(&mut out, report);
    redirects(&mut out, report);
    for w in report.warnings() {
        let _ = writeln!(out, "> **Warning:** {}\n", cell(&w));
    }
    out
}

/// A mix's names, a row each in the file's order: requests, errors, p50 and p99 (ms), statuses.
fn names(out: &mut String, report: &Report) {
    let mut lines = report.name_lines().peekable();
    if lines.peek().is_none() {
        return;
    }
    out.push_str("| Name | Requests | OK | Errors | p50 (ms) | p99 (ms) | Status codes |\n");
    out.push_str("| --- | --: | --: | --: | --: | --: | --- |\n");
    for line in lines {
        let (c, lat) = (&line.stats.counters, &line.stats.latency);
        let ms = |q: f64| {
            if lat.is_empty() { "–".to_string() } else { format!("{:.3}", lat.value_at_quantile(q) as f64 / 1e6) }
        };
        let statuses: Vec<String> = c.statuses().map(|(code, n)| format!("{code}: {n}")).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(line.name),
            c.total(),
            c.ok,
            c.errors(),
            ms(0.5),
            ms(0.99),
            statuses.join(", ")
        );
    }
    out.push('\n');
}

/// A scenario run's scenarios, a row each in the file's order: iterations started, completed
/// and abandoned, with pacing its cadence, the late starts and the slots missed, and a flow's
/// iteration durations (ms).
fn scenarios(out: &mut String, report: &Report) {
    let rows: Vec<_> = report.scenario_rows().collect();
    if rows.is_empty() {
        return;
    }
    let paced = report.is_paced();
    out.push_str("| Scenario | Weight | Started | Completed | Abandoned |");
    if paced {
        out.push_str(" Pacing (ms) | Late | Missed |");
    }
    out.push_str(" Duration p50 (ms) | Duration p99 (ms) |\n| --- |");
    out.push_str(&" --: |".repeat(if paced { 9 } else { 6 }));
    out.push('\n');
    let ms = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
    for row in &rows {
        let s = &row.stats;
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&row.line.name),
            row.line.weight,
            s.started,
            s.completed,
            s.abandoned
        );
        if paced {
            let _ = write!(out, " {} | {} | {} |", ms(row.pacing_ms()), s.late, s.missed);
        }
        let _ = writeln!(out, " {} | {} |", ms(row.duration_ms(0.5)), ms(row.duration_ms(0.99)));
    }
    out.push('\n');
}

/// A scenario's checks, a row each under its name: passed, failed and the share passed.
fn checks(out: &mut String, report: &Report) {
    let lines: Vec<_> = report.name_lines().filter(|l| !l.checks.is_empty()).collect();
    if lines.is_empty() {
        return;
    }
    out.push_str("| Name | Check | Passed | Failed | Share passed |\n");
    out.push_str("| --- | --- | --: | --: | --: |\n");
    for line in &lines {
        for (check, c) in line.check_lines() {
            let share = c.share_passed().map_or_else(|| "–".to_string(), |s| format!("{:.2}%", s * 100.0));
            let _ = writeln!(out, "| {} | {} | {} | {} | {share} |", cell(line.name), cell(check), c.passed, c.failed);
        }
    }
    out.push('\n');
}

/// Where a flow's iterations ended early, a row per name that has any: the iterations abandoned
/// there and the extractions that failed. Nothing when none did.
fn abandoned(out: &mut String, report: &Report) {
    let lines: Vec<_> =
        report.name_lines().filter(|l| l.stats.counters.abandoned > 0 || l.stats.counters.extract_failed > 0).collect();
    if lines.is_empty() {
        return;
    }
    out.push_str("| Name | Iterations abandoned | Extractions failed |\n| --- | --: | --: |\n");
    for line in &lines {
        let c = &line.stats.counters;
        let _ = writeln!(out, "| {} | {} | {} |", cell(line.name), c.abandoned, c.extract_failed);
    }
    out.push('\n');
}

/// Where redirects were followed, a row per name that followed any. Nothing when none was.
fn redirects(out: &mut String, report: &Report) {
    let lines: Vec<_> = report.name_lines().filter(|l| l.stats.counters.redirects > 0).collect();
    if lines.is_empty() {
        return;
    }
    out.push_str("| Name | Redirects followed |\n| --- | --: |\n");
    for line in &lines {
        let _ = writeln!(out, "| {} | {} |", cell(line.name), line.stats.counters.redirects);
    }
    out.push('\n');
}

/// Text safe inside a table cell or a heading: no pipes, no line breaks.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::mix_fixture;

    #[test]
    fn a_mix_has_a_row_per_name_in_the_files_order_and_a_run_without_one_has_none() {
        let report = mix_fixture::report();
        let text = summary(&report, &[]);
        let rows: Vec<&str> =
            text.lines().filter(|l| mix_fixture::NAMES.iter().any(|n| l.starts_with(&format!("| {n} |")))).collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(rows[0].starts_with("| home | 15 | 14 | 1 |"), "{text}");
        assert!(rows[0].ends_with("| 200: 13, 404: 1 |"), "{text}");
        assert!(rows[1].starts_with("| search | 0 | 0 | 0 | – | – |"), "{text}");
        assert!(rows[2].starts_with("| login | 3 | 3 | 0 | 0.500 |"), "{text}");
        assert!(!text.contains("| Check |"), "no checks, no checks table: {text}");
        let mut plain = report;
        plain.names.clear();
        assert!(!summary(&plain, &[]).contains("| Name |"));
    }

    #[test]
    fn names_that_followed_redirects_have_a_row_and_a_run_without_any_has_no_table() {
        let mut report = mix_fixture::report();
        assert!(!summary(&report, &[]).contains("Redirects followed"));
        report.stats.names.entry(0).counters.redirects = 9;
        let text = summary(&report, &[]);
        let rows: Vec<&str> =
            text.lines().skip_while(|l| !l.starts_with("| Name | Redirects followed |")).skip(2).take(2).collect();
        assert_eq!(rows, ["| home | 9 |", ""], "{text}");
    }

    #[test]
    fn names_where_iterations_ended_early_have_a_row_and_a_run_without_any_has_no_table() {
        let mut report = mix_fixture::report();
        assert!(!summary(&report, &[]).contains("Iterations abandoned"));
        let login = &mut report.stats.names.entry(2).counters;
        (login.abandoned, login.extract_failed) = (3, 2);
        let text = summary(&report, &[]);
        let rows: Vec<&str> =
            text.lines().skip_while(|l| !l.starts_with("| Name | Iterations abandoned |")).skip(2).take(2).collect();
        assert_eq!(rows, ["| login | 3 | 2 |", ""], "{text}");
    }

    #[test]
    fn checks_have_a_row_each_under_their_names_name() {
        let mut report = mix_fixture::report();
        report.checks = vec![vec!["status is 200".into(), "a|b".into()], vec![], vec!["never".into()]];
        *report.stats.names.entry(0).check(0) = volley_engine::CheckCounts { passed: 13, failed: 1 };
        let text = summary(&report, &[]);
        let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("| Name | Check |")).skip(2).take(3).collect();
        assert_eq!(
            rows,
            [
                "| home | status is 200 | 13 | 1 | 92.86% |",
                "| home | a\\|b | 0 | 0 | – |",
                "| login | never | 0 | 0 | – |"
            ],
            "{text}"
        );
    }

    #[test]
    fn scenarios_have_a_row_each_with_pacing_and_late_starts_when_paced_and_a_run_without_has_none() {
        assert!(!summary(&mix_fixture::report(), &[]).contains("| Scenario |"));
        let text = summary(&mix_fixture::paced_report(), &[]);
        let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("| Scenario |")).take(5).collect();
        assert_eq!(
            rows,
            [
                "| Scenario | Weight | Started | Completed | Abandoned | Pacing (ms) | Late | Missed | Duration p50 (ms) | Duration p99 (ms) |",
                "| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: |",
                // 55 and 80 ms as the histogram holds them: the top of each's bucket.
                "| browse | 3 | 10 | 8 | 1 | 20.000 | 2 | 1 | 55.017 | 80.019 |",
                "| buy | 1 | 0 | 0 | 0 | 20.000 | 0 | 0 | – | – |",
                ""
            ],
            "{text}"
        );
    }
}
