use super::{checks, to_text};
use crate::report::mix_fixture;

#[test]
fn a_mix_has_a_row_per_name_in_the_files_order_with_its_counts_and_percentiles() {
    let text = to_text(&mix_fixture::report());
    let table: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with("Names (latency in ms):")).skip(1).take(4).collect();
    let cells = |line: &str| line.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        cells(table[0]),
        ["name", "requests", "ok", "errors", "req/s", "p50", "p90", "p99", "max", "status", "codes"]
    );
    // home: 9 + 5 answered (a 404 among them) and a timeout, over the run's second.
    assert_eq!(cells(table[1])[..5], ["home", "15", "14", "1", "15.0"]);
    assert_eq!(cells(table[1])[9], "200×13,404×1");
    // Its percentiles are those of its 14 samples together (the median the first worker's 7 ms).
    let mut home = volley_engine::new_histogram();
    (0..2).flat_map(|w| mix_fixture::latencies(w, 0)).for_each(|v| home.record(v).expect("in range"));
    let at = |q: f64| format!("{:.3}", home.value_at_quantile(q) as f64 / 1e6);
    assert_eq!(cells(table[1])[5..9], [at(0.5), at(0.9), at(0.99), at(1.0)]);
    assert_eq!(cells(table[1])[5], "7.008");
    // Nothing of "search" finished: it is listed all the same.
    assert_eq!(cells(table[2]), ["search", "0", "0", "0", "0.0", "-", "-", "-", "-", "-"]);
    assert_eq!(cells(table[3])[..5], ["login", "3", "3", "0", "3.0"]);
    assert_eq!((cells(table[3])[5].as_str(), cells(table[3])[9].as_str()), ("0.500", "201×3"));
    // Columns line up: every row as wide as the header up to the status codes.
    let status_at = table[0].find("status").expect("header");
    assert!(table[1..].iter().all(|row| row.char_indices().nth(status_at).is_some_and(|(_, c)| c != ' ')), "{text}");
    // After the run's latencies, before the workers.
    let at = |label: &str| text.find(label).unwrap_or_else(|| panic!("no {label} in\n{text}"));
    assert!(at("Latency distribution:") < at("Names (") && at("Names (") < at("Workers:"), "{text}");
}

#[test]
fn a_run_without_a_mix_has_no_names_table() {
    let mut report = mix_fixture::report();
    report.names.clear();
    assert!(!to_text(&report).contains("Names"));
}

#[test]
fn past_the_series_budget_workers_are_one_line_but_for_those_that_failed() {
    use std::time::Duration;

    use volley_engine::Stats;

    use crate::fleet::SeriesBudget;
    use crate::report::{Digest, Report, WorkerLine};

    // 100 workers in full, then 4 summarised: 3 with 10, 20 and 30 requests over 2 s (at 10, 20
    // and 30 ms: 10.002 and 30.015 ms at 3 digits), one lost.
    let stats = |ok: u64, latency: u64| {
        let mut s = Stats::new();
        s.counters.ok = ok;
        s.histograms.latency.record_n(latency, ok).expect("in range");
        s
    };
    let mut workers: Vec<WorkerLine> =
        (0..100).map(|i| WorkerLine::measured(&format!("w{i}"), stats(5, 1_000_000))).collect();
    for (i, ok) in [10u64, 20, 30].into_iter().enumerate() {
        let mut line = WorkerLine::measured(&format!("s{i}"), stats(1, 1));
        line.stats = None;
        line.digest = Some(Box::new(Digest::of(&stats(ok, ok * 1_000_000))));
        line.duration = Duration::from_secs(2);
        workers.push(line);
    }
    let mut lost = WorkerLine::measured("s3", stats(1, 1));
    lost.stats = None;
    lost.failure = Some("cannot reach the worker".into());
    workers.push(lost);
    let mut report = Report::from_workers("http://x/".into(), workers, true, false, Vec::new());
    report.worker_series = Some((SeriesBudget::for_workers(104), false));
    let text = to_text(&report);
    let lines: Vec<&str> = text.lines().skip_while(|l| *l != "Workers:").skip(1).collect();
    assert!(lines[..100].iter().enumerate().all(|(i, l)| l.starts_with(&format!("  w{i}  "))), "{text}");
    assert_eq!(lines[100], "  s3  FAILED: cannot reach the worker");
    assert_eq!(
        lines[101],
        "  + 4 more workers (summarised; -j lists each): 4 conns  60 requests  30.0 req/s  0 errors; \
         each 5.0 to 15.0 req/s, p50 10.002 to 30.015 ms, p99 10.002 to 30.015 ms; 1 failed (above)"
    );
    assert!(!text.contains("  s0  "), "{text}");
}

#[test]
fn checks_are_listed_under_their_names_with_the_share_passed_and_a_mark() {
    let mut report = mix_fixture::report();
    report.checks = vec![vec!["status is 200".into(), "fast".into()], vec![], vec!["never ran".into()]];
    let home = report.stats.names.entry(0);
    *home.check(0) = volley_engine::CheckCounts { passed: 14, failed: 0 };
    *home.check(1) = volley_engine::CheckCounts { passed: 7, failed: 1 };
    let mut text = String::new();
    checks(&mut text, &report, false);
    assert_eq!(
        text,
        "Checks:\n  home\n    ok   status is 200  100.00%  (14 passed, 0 failed)\n    FAIL fast  87.50%  (7 passed, 1 failed)\n  login\n    -    never ran  -  (0 passed, 0 failed)\n"
    );
    let mut text = String::new();
    checks(&mut text, &report, true);
    assert!(text.contains("✓ status is 200") && text.contains("✗ fast"), "{text}");
    // A run without checks has no section.
    report.checks.clear();
    let mut text = String::new();
    checks(&mut text, &report, false);
    assert_eq!(text, "");
}

#[test]
fn iterations_ended_early_are_in_the_summary_and_under_the_names_they_ended_at_only_when_some_did() {
    let mut report = mix_fixture::report();
    let quiet = to_text(&report);
    assert!(!quiet.contains("Abandoned"), "{quiet}");
    report.stats.counters.abandoned = 7;
    report.stats.counters.extract_failed = 3;
    let login = report.stats.names.entry(2);
    (login.counters.abandoned, login.counters.extract_failed) = (3, 3);
    report.stats.names.entry(0).counters.abandoned = 4;
    let text = to_text(&report);
    assert!(
        text.contains(
            "\nAbandoned:    7 iterations ended early, at a failed request or extraction (3 extractions failed)\n"
        ),
        "{text}"
    );
    let section: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Abandoned (")).take(3).collect();
    assert_eq!(
        section,
        [
            "Abandoned (by the step each iteration ended at):",
            "  home   4 iterations",
            "  login  3 iterations (3 extractions failed)",
        ],
        "{text}"
    );
    // The summary's line beside the run's other totals, the names' after the names table.
    let at = |label: &str| text.find(label).unwrap_or_else(|| panic!("no {label} in\n{text}"));
    assert!(at("Requests/sec:") < at("Abandoned:") && at("Abandoned:") < at("Transfer:"), "{text}");
    assert!(at("Names (") < at("Abandoned (") && at("Abandoned (") < at("Workers:"), "{text}");
}

#[test]
fn redirects_followed_are_in_the_summary_and_under_their_names_only_when_some_were() {
    let mut report = mix_fixture::report();
    let quiet = to_text(&report);
    assert!(!quiet.contains("Redirects"), "{quiet}");
    report.stats.counters.redirects = 5;
    report.stats.names.entry(2).counters.redirects = 5;
    let text = to_text(&report);
    assert!(text.contains("\nRedirects:    5 followed (each hop is among the requests)\n"), "{text}");
    let section: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Redirects followed")).take(2).collect();
    assert_eq!(section, ["Redirects followed (by step name; the final answers were checked):", "  login  5"], "{text}");
}

#[test]
fn think_time_is_under_the_names_that_paused_with_its_mean_only_when_some_did() {
    let mut report = mix_fixture::report();
    assert!(!to_text(&report).contains("Think time"));
    let login = &mut report.stats.names.entry(2).counters;
    (login.thinks, login.think_nanos) = (4, 10_000_000);
    let text = to_text(&report);
    let section: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Think time")).take(2).collect();
    assert_eq!(section, ["Think time (by step name; in no latency):", "  login  4 pauses, mean 2.500 ms"], "{text}");
}
