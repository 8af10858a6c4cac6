use hdrhistogram::Histogram;

use super::super::parse::Threshold;
use super::judge;
use crate::report::mix_fixture;

/// Judges one threshold on the fixture's run of two workers: (measured, passed).
fn judged(text: &str) -> (Option<f64>, bool) {
    let t = Threshold::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let v = judge(&[t], &mix_fixture::report()).pop().expect("one verdict");
    (v.measured, v.passed)
}

#[test]
fn a_names_percentile_is_read_from_its_histogram_merged_over_the_workers() {
    let mut home = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
    for worker in 0..2 {
        for v in mix_fixture::latencies(worker, 0) {
            home.record(v).expect("in range");
        }
    }
    for (q, text) in [(0.5, "home:p50<1s"), (0.99, "home:p99<1s"), (0.9, "home:first_byte_p90<1s")] {
        let want = if text.contains("first_byte") { home.value_at_quantile(q) / 2 } else { home.value_at_quantile(q) };
        let (measured, _) = judged(text);
        let measured = measured.expect("home has latencies");
        assert!((measured * 1e9 - want as f64).abs() <= want as f64 * 1e-3, "{text}: {measured} vs {want} ns");
    }
    // Neither worker's own p99 nor their mean: the slow worker's tail decides.
    assert!(judged("home:p99<100ms").0.expect("measured") > 0.1);
    assert!(!judged("home:p99<100ms").1);
    assert!(judged("login:p99<1ms").1, "login answered in under a millisecond");
}

#[test]
fn counts_rates_and_statuses_of_a_name_are_its_own_not_the_runs() {
    assert_eq!(judged("home:errors<1"), (Some(1.0), false));
    assert_eq!(judged("login:errors<1"), (Some(0.0), true));
    let (rate, _) = judged("home:error_rate<10%");
    assert_eq!(rate, Some(1.0 / 15.0), "one timeout of home's 14 answers and 1 error");
    assert_eq!(judged("login:status_201>=3"), (Some(3.0), true));
    assert_eq!(judged("home:status_201>=1"), (Some(0.0), false));
    assert_eq!(judged("home:status_4xx<=1"), (Some(1.0), true));
    // Both workers ran a second: login's 3 requests over 1 s.
    assert_eq!(judged("login:rps>=3"), (Some(3.0), true));
    assert_eq!(judged("rps>=18"), (Some(18.0), true), "the run's own rate stays the sum");
}

#[test]
fn a_name_that_finished_nothing_has_no_times_and_fails_a_time_threshold() {
    assert_eq!(judged("search:p99<1s"), (None, false));
    assert_eq!(judged("search:errors<1"), (Some(0.0), true));
    assert_eq!(judged("search:rps>0"), (None, false), "no requests: no rate, as for a run");
    assert_eq!(judged("nowhere:errors<1"), (None, false), "a name the report lacks measures nothing");
}

#[test]
fn the_share_of_checks_passed_is_over_every_name_for_the_run_and_over_its_own_for_a_name() {
    let mut report = mix_fixture::report();
    report.checks = vec![vec!["ok".into(), "fast".into()], vec![], vec!["ok".into()]];
    let home = report.stats.names.entry(0);
    *home.check(0) = volley_engine::CheckCounts { passed: 9, failed: 1 };
    *home.check(1) = volley_engine::CheckCounts { passed: 10, failed: 0 };
    *report.stats.names.entry(2).check(0) = volley_engine::CheckCounts { passed: 3, failed: 0 };
    let judge_one = |text: &str| {
        let t = Threshold::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let v = judge(&[t], &report).pop().expect("one verdict");
        (v.measured, v.passed)
    };
    assert_eq!(judge_one("checks>95%"), (Some(22.0 / 23.0), true));
    assert_eq!(judge_one("checks>=96%"), (Some(22.0 / 23.0), false));
    assert_eq!(judge_one("home:checks>=95%"), (Some(0.95), true));
    assert_eq!(judge_one("login:checks>=100%"), (Some(1.0), true));
    assert_eq!(judge_one("search:checks>0%"), (None, false), "no checks: nothing measured, which fails");
}
