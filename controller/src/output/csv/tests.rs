use super::series;
use crate::fleet::{Label, Second};
use crate::report::mix_fixture;

/// The fixture's run with a second per worker: second 1 is the first worker's, 2 the other's.
fn report() -> crate::report::Report {
    let mut report = mix_fixture::report();
    report.intervals =
        (0..2).map(|w| Second::of(w as u32 + 1, &mix_fixture::worker_stats(w), Label::default())).collect();
    report
}

#[test]
fn a_mix_adds_a_row_per_name_that_moved_in_a_second_after_the_runs_row() {
    let csv = series(&report());
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "second,requests,ok,errors,p50_seconds,p99_seconds,name");
    // Second 1: the run, home (9 answers and a timeout) and login (p50 0.5 ms); search never moved.
    assert!(rows[1].starts_with("1,13,12,1,") && rows[1].ends_with(','), "{csv}");
    assert!(rows[2].starts_with("1,10,9,1,") && rows[2].ends_with(",home"), "{csv}");
    assert!(rows[3].starts_with("1,3,3,0,0.000500") && rows[3].ends_with(",login"), "{csv}");
    // Second 2: the run and home only.
    assert!(rows[4].starts_with("2,5,5,0,") && rows[4].ends_with(','), "{csv}");
    assert!(rows[5].starts_with("2,5,5,0,") && rows[5].ends_with(",home"), "{csv}");
    assert_eq!(rows.len(), 6, "{csv}");
    // A name's percentiles are that second's of its own histogram.
    let home = &mix_fixture::worker_stats(1).names.get(0).expect("home").latency.clone();
    let p99 = format!("{:.9}", home.value_at_quantile(0.99) as f64 / 1e9);
    assert!(rows[5].contains(&format!(",{p99},home")), "{p99}: {}", rows[5]);
}

#[test]
fn a_name_with_a_comma_or_a_quote_is_quoted_as_rfc_4180_says() {
    let mut r = report();
    r.names[0] = "GET /a,b \"c\"".into();
    let csv = series(&r);
    assert!(csv.contains(",\"GET /a,b \"\"c\"\"\"\n"), "{csv}");
}

#[test]
fn without_a_mix_the_columns_are_what_they_always_were() {
    let mut r = report();
    r.names.clear();
    let csv = series(&r);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "second,requests,ok,errors,p50_seconds,p99_seconds");
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(rows.iter().all(|r| r.split(',').count() == 6), "{csv}");
}

#[test]
fn a_mix_with_checks_adds_each_seconds_verdicts_per_name_and_over_the_names() {
    let mut r = mix_fixture::report();
    r.checks = vec![vec!["ok".into(), "fast".into()], vec![], vec!["created".into()]];
    r.intervals = (0..2)
        .map(|w| {
            let mut stats = mix_fixture::worker_stats(w);
            *stats.names.entry(0).check(0) = volley_engine::CheckCounts { passed: 8 + w as u64, failed: 1 };
            *stats.names.entry(0).check(1) = volley_engine::CheckCounts { passed: 2, failed: 7 };
            if w == 0 {
                *stats.names.entry(2).check(0) = volley_engine::CheckCounts { passed: 3, failed: 0 };
            }
            Second::of(w as u32 + 1, &stats, Label::default())
        })
        .collect();
    let csv = series(&r);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "second,requests,ok,errors,p50_seconds,p99_seconds,name,checks_passed,checks_failed");
    // Second 1: home's two checks (8+2 passed, 1+7 failed) and login's one (3, 0); the run's row
    // adds them up.
    assert!(rows[1].starts_with("1,13,12,1,") && rows[1].ends_with(",,13,8"), "{csv}");
    assert!(rows[2].ends_with(",home,10,8"), "{csv}");
    assert!(rows[3].ends_with(",login,3,0"), "{csv}");
    assert!(rows[4].ends_with(",,11,8") && rows[5].ends_with(",home,11,8"), "{csv}");
    assert!(rows.iter().all(|row| row.split(',').count() == 9), "{csv}");
}

#[test]
fn a_run_of_scenarios_adds_each_seconds_abandoned_iterations_failed_extractions_and_redirects() {
    let mut r = mix_fixture::report();
    r.scenarios = vec![crate::report::ScenarioLine { name: "browse".into(), weight: 1, pacing: None }];
    r.intervals = (0..2)
        .map(|w| {
            let mut stats = mix_fixture::worker_stats(w);
            let home = &mut stats.names.entry(0).counters;
            (home.abandoned, home.extract_failed, home.redirects) = (2, 1, 3 + w as u64);
            if w == 0 {
                stats.names.entry(2).counters.redirects = 4;
            }
            Second::of(w as u32 + 1, &stats, Label::default())
        })
        .collect();
    let csv = series(&r);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "second,requests,ok,errors,p50_seconds,p99_seconds,name,abandoned,extract_failed,redirects");
    assert!(rows[1].ends_with(",,2,1,7"), "the run's row adds the names': {csv}");
    assert!(rows[2].ends_with(",home,2,1,3") && rows[3].ends_with(",login,0,0,4"), "{csv}");
    assert!(rows[4].ends_with(",,2,1,4") && rows[5].ends_with(",home,2,1,4"), "{csv}");
    assert!(rows.iter().all(|row| row.split(',').count() == 10), "{csv}");
}
