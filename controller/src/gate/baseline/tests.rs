use std::path::PathBuf;

use super::super::parse::{Metric, Stat, Threshold, Timing};
use super::{Compared, judge, metrics, parse_regression, shared_names, thresholds, with_names};
use crate::report::{Report, mix_fixture};

#[test]
fn a_regression_is_a_percent_with_or_without_its_sign_and_five_by_default() {
    assert_eq!(parse_regression(None).unwrap(), 0.05);
    assert_eq!(parse_regression(Some("10%")).unwrap(), 0.1);
    assert_eq!(parse_regression(Some("2.5")).unwrap(), 0.025);
    for bad in ["", "x", "-1%", "100%", "NaN"] {
        assert!(parse_regression(Some(bad)).is_err(), "{bad}");
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

/// The fixture's report with `names` as its mix's names (their statistics stay the fixture's).
fn named(list: &[&str]) -> Report {
    let mut r = mix_fixture::report();
    r.names = names(list);
    r
}

#[test]
fn each_name_gets_the_runs_metrics_but_connect_times_which_a_name_does_not_keep() {
    let own = Threshold::parse("connect_p99<1s").unwrap();
    let run = metrics(&[own, Threshold::parse("p90<1s").unwrap()]);
    let all = with_names(&run, &names(&["home", "login"]));
    let shown: Vec<String> = all
        .iter()
        .map(|c| format!("{}{}", c.mix_name.as_deref().map(|n| format!("{n}:")).unwrap_or_default(), c.metric_name))
        .collect();
    assert_eq!(
        shown,
        [
            "rps",
            "p50",
            "p99",
            "connect_p99",
            "p90",
            "home:rps",
            "home:p50",
            "home:p99",
            "home:p90",
            "login:rps",
            "login:p50",
            "login:p99",
            "login:p90"
        ]
    );
    assert_eq!(with_names(&run, &[]), run, "no names: the run's metrics only");
}

#[test]
fn only_names_every_report_on_every_side_has_are_compared_in_the_runs_order() {
    let (a, b) = (named(&["home", "search", "login"]), named(&["login", "home"]));
    let new = named(&["home", "login", "signup"]);
    let old = [a, b];
    let shared = shared_names(&names(&["signup", "login", "home", "search"]), &[&old, std::slice::from_ref(&new)]);
    assert_eq!(shared, ["login", "home"]);
    assert!(shared_names(&names(&["home"]), &[&old, &[named(&[])]]).is_empty(), "a run without a mix");
}

fn baseline_of(report: Report, compared: &[Compared], regression: f64) -> Vec<Threshold> {
    thresholds(&[report], &[PathBuf::from("old.json")], compared, regression, "--baseline").expect("thresholds")
}

#[test]
fn a_names_thresholds_carry_its_name_and_a_name_that_finished_nothing_sets_no_bar() {
    let compared = with_names(&metrics(&[]), &names(&["home", "search", "login"]));
    let ts = baseline_of(mix_fixture::report(), &compared, 0.05);
    let texts: Vec<&str> = ts.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "rps>=95% of baseline",
            "p50<=105% of baseline",
            "p99<=105% of baseline",
            "home:rps>=95% of baseline",
            "home:p50<=105% of baseline",
            "home:p99<=105% of baseline",
            "login:rps>=95% of baseline",
            "login:p50<=105% of baseline",
            "login:p99<=105% of baseline",
        ],
        "search has no requests, so no rate and no times to compare"
    );
    let login_p99 = ts.iter().find(|t| t.text.starts_with("login:p99")).unwrap();
    assert_eq!(login_p99.mix_name.as_deref(), Some("login"));
    // login answered in 0.4 to 0.6 ms, far below the run's p99 (home's slow worker).
    let old = login_p99.baseline.unwrap();
    assert!((0.0006..0.0007).contains(&old), "{old}");
    assert!((login_p99.limit - old * 1.05).abs() < 1e-12);
    // The text reads back as the same threshold, a name with a blank in quotes.
    let back = Threshold::parse(&login_p99.text.replace("105% of baseline", "1s")).unwrap();
    assert_eq!(
        (back.mix_name, back.metric),
        (Some("login".into()), Metric::Time(Timing::Latency, Stat::Quantile(0.99)))
    );
    let mut spaced = mix_fixture::report();
    spaced.names[2] = "GET /login".into();
    let ts = baseline_of(spaced, &with_names(&metrics(&[]), &names(&["GET /login"])), 0.05);
    assert_eq!(ts[3].text, "\"GET /login\":rps>=95% of baseline");
}

#[test]
fn a_slower_name_fails_its_own_comparison_while_the_runs_and_the_other_names_pass() {
    let compared = with_names(&metrics(&[]), &names(&["home", "login"]));
    let ts = baseline_of(mix_fixture::report(), &compared, 0.05);
    // The same three login requests, ten times slower: as many (the same rate), and the run's
    // own statistics untouched, as home's slow worker hides login in the run's p99.
    let mut new = mix_fixture::report();
    let login = new.stats.names.entry(2);
    login.latency.reset();
    for v in [4_000_000, 5_000_000, 6_000_000] {
        login.latency.record(v).expect("in range");
    }
    let failed: Vec<String> =
        judge(&ts, std::slice::from_ref(&new)).iter().filter(|v| !v.passed).map(|v| v.threshold.text.clone()).collect();
    assert_eq!(failed, ["login:p50<=105% of baseline", "login:p99<=105% of baseline"]);
    assert!(judge(&ts, &[mix_fixture::report()]).iter().all(|v| v.passed), "the same run passes");
    // Judged on a report without the name (which `shared_names` keeps from happening), it
    // measures nothing and fails, as any threshold with no data does.
    let mut renamed = mix_fixture::report();
    renamed.names[2] = "signin".into();
    let verdicts = judge(&ts, &[renamed]);
    assert!(verdicts.iter().filter(|v| v.threshold.mix_name.as_deref() == Some("login")).all(|v| !v.passed));
}
