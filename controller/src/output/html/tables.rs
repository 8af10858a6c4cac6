//! The page's text: the verdict, the totals, the thresholds, the workers and the warnings, as
//! HTML with every string from the report escaped (URLs, worker names and error text come from
//! the command line, from workers, or from a file).

use std::fmt::Write;

use volley_engine::CheckCounts;

use super::input::{Saved, SavedName, SavedVerdict, Summary};

/// `text` safe inside HTML elements and quoted attributes.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn ms(seconds: Option<f64>) -> String {
    seconds.map(|s| format!("{:.3}", s * 1e3)).unwrap_or_else(|| "–".into())
}

/// The verdict in one line: thresholds, and whether the measurement itself is whole.
pub(super) fn verdict(r: &Saved) -> String {
    let failed = r.thresholds.iter().filter(|t| !t.passed).count();
    let broken = r.workers.iter().any(|w| w.failure.is_some());
    let (class, text) = match (r.thresholds.len(), failed) {
        (0, _) => ("none", "No thresholds were set.".to_string()),
        (n, 0) => ("pass", format!("All {n} thresholds passed.")),
        (n, f) => ("fail", format!("{f} of {n} thresholds FAILED.")),
    };
    let mut out = format!("<p class=\"verdict {class}\">{}", escape(&text));
    if broken {
        out.push_str(" Some workers failed: the run is incomplete (see the warnings).");
    }
    out.push_str("</p>\n");
    out
}

pub(super) fn summary(r: &Saved) -> String {
    let q = &r.requests;
    let mut out = String::from("<table class=\"summary\">\n");
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "<tr><th>{name}</th><td>{value}</td></tr>");
    };
    row(
        "Requests",
        format!(
            "{} ({} ok, {} errors{}) in {:.3} s",
            q.total,
            q.ok,
            q.errors,
            if q.aborted > 0 { format!(", {} aborted at the end", q.aborted) } else { String::new() },
            r.duration_seconds
        ),
    );
    row("Requests/sec", format!("{:.1}", r.requests_per_sec));
    row("Connections", format!("{} on {} threads", r.connections, r.threads));
    row("Latency (ms)", latency(&r.latency_seconds));
    row("Connect (ms)", latency(&r.connect_seconds));
    row("First byte (ms)", latency(&r.first_byte_seconds));
    let statuses: Vec<String> = r.status_codes.iter().map(|(code, n)| format!("[{}] {n}", escape(code))).collect();
    row("Status codes", if statuses.is_empty() { "none".into() } else { statuses.join(", ") });
    let errors: Vec<String> =
        r.errors.iter().filter(|(_, n)| **n > 0).map(|(kind, n)| format!("{} {n}", escape(kind))).collect();
    row("Errors", if errors.is_empty() { "none".into() } else { errors.join(", ") });
    out.push_str("</table>\n");
    out
}

fn latency(s: &Summary) -> String {
    if s.count == 0 {
        return "no samples".into();
    }
    let p = |name: &str| ms(s.percentiles.get(name).copied());
    format!(
        "min {}  mean {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({} samples)",
        ms(s.min),
        ms(s.mean),
        p("p50"),
        p("p90"),
        p("p99"),
        p("p99.9"),
        ms(s.max),
        s.count
    )
}

/// A measured value or limit in the threshold's unit, for people.
fn in_unit(unit: &str, v: f64) -> String {
    match unit {
        "seconds" => format!("{:.3} ms", v * 1e3),
        "fraction" => format!("{:.3}%", v * 100.0),
        "requests/second" => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// A mix's names, a row each in the file's order: requests, rate, latency percentiles (ms)
/// from each name's merged histogram, statuses.
pub(super) fn names(r: &Saved) -> String {
    if r.names.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Names</h2>\n<table class=\"names\">\n<tr><th>name</th><th>requests</th><th>ok</th><th>errors</th>\
         <th>req/s</th><th>p50 (ms)</th><th>p90 (ms)</th><th>p99 (ms)</th><th>max (ms)</th><th>statuses</th></tr>\n",
    );
    for n in &r.names {
        let l = &n.latency_seconds;
        let p = |name: &str| ms(l.percentiles.get(name).copied());
        let statuses: Vec<String> = n.status_codes.iter().map(|(code, k)| format!("[{}] {k}", escape(code))).collect();
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&n.name),
            n.requests.total,
            n.requests.ok,
            n.requests.errors,
            n.requests_per_sec,
            p("p50"),
            p("p90"),
            p("p99"),
            ms(l.max),
            if statuses.is_empty() { "none".into() } else { statuses.join(", ") }
        );
    }
    out.push_str("</table>\n");
    out
}

/// A scenario run's scenarios, a row each in the file's order: iterations started, completed
/// and abandoned, with pacing its cadence and the late starts, and a flow's iteration
/// durations (ms). Nothing without scenarios.
pub(super) fn scenarios(r: &Saved) -> String {
    if r.scenarios.is_empty() {
        return String::new();
    }
    let paced = r.scenarios.iter().any(|s| s.pacing_seconds.is_some());
    let mut out = String::from(
        "<h2>Scenarios</h2>\n<table class=\"scenarios\">\n<tr><th>scenario</th><th>weight</th><th>started</th>\
         <th>completed</th><th>abandoned</th>",
    );
    if paced {
        out.push_str("<th>pacing (ms)</th><th>late</th><th>missed</th>");
    }
    out.push_str("<th>duration p50 (ms)</th><th>p90 (ms)</th><th>p99 (ms)</th><th>max (ms)</th></tr>\n");
    for s in &r.scenarios {
        let (started, completed, abandoned, late, missed) =
            s.iterations.as_ref().map_or((0, 0, 0, 0, 0), |i| (i.started, i.completed, i.abandoned, i.late, i.missed));
        let class = if abandoned > 0 || late > 0 || missed > 0 { " class=\"fail\"" } else { "" };
        let _ = write!(
            out,
            "<tr{class}><td><code>{}</code></td><td>{}</td><td>{started}</td><td>{completed}</td><td>{abandoned}</td>",
            escape(&s.name),
            s.weight
        );
        if paced {
            let _ = write!(out, "<td>{}</td><td>{late}</td><td>{missed}</td>", ms(s.pacing_seconds));
        }
        let d = s.duration_seconds.as_ref();
        let p = |name: &str| ms(d.and_then(|d| d.percentiles.get(name).copied()));
        let _ = writeln!(
            out,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p("p50"),
            p("p90"),
            p("p99"),
            ms(d.and_then(|d| d.max))
        );
    }
    out.push_str("</table>\n");
    out
}

/// A scenario's checks, a row each under its name: passed, failed and the share passed.
pub(super) fn checks(r: &Saved) -> String {
    if r.names.iter().all(|n| n.checks.is_empty()) {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Checks</h2>\n<table class=\"checks\">\n<tr><th>name</th><th>check</th><th>passed</th><th>failed</th>\
         <th>share passed</th></tr>\n",
    );
    for n in &r.names {
        for c in &n.checks {
            let counts = CheckCounts { passed: c.passed, failed: c.failed };
            let share = counts.share_passed().map_or_else(|| "–".to_string(), |s| format!("{:.2}%", s * 100.0));
            let class = if c.failed > 0 { " class=\"fail\"" } else { "" };
            let _ = writeln!(
                out,
                "<tr{class}><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{share}</td></tr>",
                escape(&n.name),
                escape(&c.name),
                c.passed,
                c.failed
            );
        }
    }
    out.push_str("</table>\n");
    out
}

/// Where a flow's iterations ended early, a row per name that has any: the iterations
/// abandoned at its step and its failed extractions. Nothing when none did.
pub(super) fn abandoned(r: &Saved) -> String {
    let count = |v: Option<u64>| v.unwrap_or(0);
    let rows: Vec<&SavedName> =
        r.names.iter().filter(|n| count(n.abandoned) > 0 || count(n.extract_failed) > 0).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Iterations ended early</h2>\n<table class=\"abandoned\">\n<tr><th>name</th>\
         <th>iterations abandoned</th><th>extractions failed</th></tr>\n",
    );
    for n in rows {
        let _ = writeln!(
            out,
            "<tr class=\"fail\"><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(&n.name),
            count(n.abandoned),
            count(n.extract_failed)
        );
    }
    out.push_str("</table>\n");
    out
}

/// Where redirects were followed, a row per name that followed any. Nothing when none was.
pub(super) fn redirects(r: &Saved) -> String {
    let rows: Vec<&SavedName> = r.names.iter().filter(|n| n.redirects.unwrap_or(0) > 0).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Redirects followed</h2>\n<table class=\"redirects\">\n<tr><th>name</th><th>redirects</th></tr>\n",
    );
    for n in rows {
        let _ =
            writeln!(out, "<tr><td><code>{}</code></td><td>{}</td></tr>", escape(&n.name), n.redirects.unwrap_or(0));
    }
    out.push_str("</table>\n");
    out
}

pub(super) fn thresholds(verdicts: &[SavedVerdict]) -> String {
    if verdicts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Thresholds</h2>\n<table class=\"thresholds\">\n<tr><th>threshold</th><th>limit</th><th>measured</th><th>verdict</th></tr>\n",
    );
    for v in verdicts {
        let measured = v.measured.map(|m| in_unit(&v.unit, m)).unwrap_or_else(|| "no data".into());
        let (class, word) = if v.passed { ("pass", "pass") } else { ("fail", "FAIL") };
        let _ = writeln!(
            out,
            "<tr class=\"{class}\"><td><code>{}</code></td><td>{}</td><td>{}</td><td>{word}</td></tr>",
            escape(&v.threshold),
            in_unit(&v.unit, v.limit),
            measured
        );
    }
    out.push_str("</table>\n");
    out
}

pub(super) fn workers(r: &Saved) -> String {
    if r.workers.len() < 2 {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Workers</h2>\n<table class=\"workers\">\n<tr><th>worker</th><th>connections</th><th>requests</th>\
         <th>req/s</th><th>p50 (ms)</th><th>p99 (ms)</th><th>start offset (ms)</th><th>state</th></tr>\n",
    );
    for w in &r.workers {
        let requests = w.requests.as_ref().map(|q| q.total.to_string()).unwrap_or_else(|| "–".into());
        let rps = w.requests_per_sec.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into());
        let p = |name: &str| ms(w.latency_seconds.as_ref().and_then(|s| s.percentiles.get(name).copied()));
        let state = match (&w.failure, w.partial) {
            (Some(why), true) => format!("lost, counted until then: {}", escape(why)),
            (Some(why), false) => format!("failed: {}", escape(why)),
            (None, _) => "ok".into(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{} ({} threads)</td><td>{requests}</td><td>{rps}</td><td>{}</td><td>{}</td><td>{}</td><td>{state}</td></tr>",
            escape(&w.label()),
            w.connections,
            w.threads,
            p("p50"),
            p("p99"),
            ms(w.start_offset_seconds),
        );
    }
    out.push_str("</table>\n");
    out
}

pub(super) fn warnings(r: &Saved) -> String {
    if r.warnings.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Warnings</h2>\n<ul class=\"warnings\">\n");
    for w in &r.warnings {
        let _ = writeln!(out, "<li>{}</li>", escape(w));
    }
    out.push_str("</ul>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::escape;
    use crate::report::mix_fixture;

    #[test]
    fn checks_have_a_table_of_a_row_each_failed_ones_marked_and_none_without_checks() {
        let mut report = mix_fixture::report();
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(!page.contains("<h2>Checks</h2>"), "no checks, no table");
        report.checks = vec![vec!["status is 200".into(), "<fast>".into()], vec![], vec![]];
        let home = report.stats.names.entry(0);
        *home.check(0) = volley_engine::CheckCounts { passed: 14, failed: 0 };
        *home.check(1) = volley_engine::CheckCounts { passed: 3, failed: 1 };
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(page.contains(
            "<tr><td><code>home</code></td><td>status is 200</td><td>14</td><td>0</td><td>100.00%</td></tr>"
        ));
        assert!(page.contains(
            "<tr class=\"fail\"><td><code>home</code></td><td>&lt;fast&gt;</td><td>3</td><td>1</td><td>75.00%</td></tr>"
        ));
    }

    #[test]
    fn names_where_iterations_ended_early_have_a_row_each_and_a_run_without_has_no_table() {
        let mut report = mix_fixture::report();
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(!page.contains("Iterations ended early"), "none ended early, no table");
        let login = &mut report.stats.names.entry(0).counters;
        (login.abandoned, login.extract_failed) = (5, 4);
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(page.contains("<h2>Iterations ended early</h2>"), "{page}");
        assert!(page.contains("<tr class=\"fail\"><td><code>home</code></td><td>5</td><td>4</td></tr>"), "{page}");
        assert_eq!(page.matches("<tr class=\"fail\"><td><code>").count(), 1, "only names that have any");
    }

    #[test]
    fn names_that_followed_redirects_have_a_row_each_and_a_run_without_has_no_table() {
        let mut report = mix_fixture::report();
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(!page.contains("Redirects followed"), "none followed, no table");
        report.stats.names.entry(2).counters.redirects = 3;
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(page.contains("<h2>Redirects followed</h2>"), "{page}");
        assert!(page.contains("<tr><td><code>login</code></td><td>3</td></tr>"), "{page}");
    }

    #[test]
    fn scenarios_have_a_row_each_from_the_saved_report_and_a_run_without_has_no_table() {
        let page = super::super::page(&crate::output::report_json(&mix_fixture::report(), &[])).expect("a page");
        assert!(!page.contains("<h2>Scenarios</h2>"), "no scenarios, no table");
        let report = mix_fixture::paced_report();
        let page = super::super::page(&crate::output::report_json(&report, &[])).expect("a page");
        assert!(page.contains("<th>pacing (ms)</th><th>late</th><th>missed</th>"), "{page}");
        let d = &report.stats.scenarios.get(0).expect("browse").duration;
        let at = |q: f64| format!("{:.3}", d.value_at_quantile(q) as f64 / 1e6);
        let browse = format!(
            "<tr class=\"fail\"><td><code>browse</code></td><td>3</td><td>10</td><td>8</td><td>1</td><td>20.000</td><td>2</td><td>1</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
            at(0.5),
            at(0.9),
            at(0.99),
            d.max() as f64 / 1e6
        );
        assert!(page.contains(&browse), "{browse}\n{page}");
        assert!(page.contains(
            "<tr><td><code>buy</code></td><td>1</td><td>0</td><td>0</td><td>0</td><td>20.000</td><td>0</td><td>0</td><td>–</td><td>–</td><td>–</td><td>–</td></tr>"
        ));
    }

    #[test]
    fn text_from_the_report_cannot_open_a_tag_or_leave_an_attribute() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
