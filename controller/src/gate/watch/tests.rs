use std::time::Duration;

use volley_engine::{ErrorKind, Stats};

use super::super::parse::Threshold;
use super::{FLOOR, Watch, lost};

fn t(text: &str) -> Threshold {
    Threshold::parse(text).expect("a valid threshold")
}

/// `ok` responses of `latency_ms` each with status `status`, and `errors` timeouts.
fn stats(ok: u64, status: u16, latency_ms: u64, errors: u64) -> Stats {
    let mut s = Stats::new();
    for _ in 0..ok {
        s.counters.ok += 1;
        s.counters.status(status);
        s.histograms.latency.record(latency_ms * 1_000_000).expect("in range");
    }
    s.counters.add_errors(ErrorKind::Timeout, errors);
    s
}

#[test]
fn counts_and_max_are_lost_the_moment_they_are_past_their_limit_whatever_the_sample_size() {
    assert_eq!(lost(&t("errors<3"), &stats(1, 200, 1, 3), &[]), Some(3.0));
    assert_eq!(lost(&t("errors<3"), &stats(1, 200, 1, 2), &[]), None);
    assert_eq!(lost(&t("status_500<=1"), &stats(2, 500, 1, 0), &[]), Some(2.0));
    assert!(lost(&t("max<5ms"), &stats(1, 200, 6, 0), &[]).is_some());
    assert!(lost(&t("min>5ms"), &stats(1, 200, 4, 0), &[]).is_some());
    // What can still be reached later is never lost mid-run.
    assert_eq!(lost(&t("errors>3"), &stats(1, 200, 1, 0), &[]), None);
    assert_eq!(lost(&t("max>5ms"), &stats(1, 200, 1, 0), &[]), None);
    assert_eq!(lost(&t("rps>1000000"), &stats(500, 200, 1, 0), &[]), None);
}

#[test]
fn a_rate_is_lost_only_past_its_limit_with_confidence_on_enough_requests() {
    // 50% errors on fewer requests than the floor: not judged yet.
    assert_eq!(lost(&t("error_rate<1%"), &stats(FLOOR / 2 - 1, 200, 1, FLOOR / 2 - 1), &[]), None);
    assert_eq!(lost(&t("error_rate<1%"), &stats(FLOOR / 2, 200, 1, FLOOR / 2), &[]), Some(0.5));
    // 2% measured against a 1% limit on 1,000 requests could be chance; on 20,000 it is not.
    assert_eq!(lost(&t("error_rate<1%"), &stats(980, 200, 1, 20), &[]), None);
    assert!(lost(&t("error_rate<1%"), &stats(19_600, 200, 1, 400), &[]).is_some());
    // A share that must be reached: status_200>=99% with half of them 500s.
    let mut half = stats(100, 200, 1, 0);
    half.merge(&stats(100, 500, 1, 0));
    assert_eq!(lost(&t("status_200>=99%"), &half, &[]), Some(0.5));
    assert_eq!(lost(&t("status_5xx<60%"), &half, &[]), None);
}

#[test]
fn a_percentile_is_lost_when_more_than_its_tail_is_past_the_limit_with_confidence() {
    // 10% of 1,000 responses at 50 ms: p99<10ms cannot pass, p50<10ms still can.
    let mut s = stats(900, 200, 1, 0);
    s.merge(&stats(100, 200, 50, 0));
    assert!(lost(&t("p99<10ms"), &s, &[]).is_some());
    assert_eq!(lost(&t("p50<10ms"), &s, &[]), None);
    assert_eq!(lost(&t("p80<10ms"), &s, &[]), None);
    // p50>=10ms needs half of them at 10 ms or more: 90% are below.
    assert!(lost(&t("p50>=10ms"), &s, &[]).is_some());
    assert!(lost(&t("mean<2ms"), &s, &[]).is_some());
    assert_eq!(lost(&t("mean<10ms"), &s, &[]), None);
}

#[test]
fn nothing_is_judged_within_the_grace_but_what_happened_in_it_counts_after() {
    let mut watch = Watch::new(&[t("errors<5")], Duration::from_secs(2), &[]);
    assert!(!watch.interval(&stats(10, 200, 1, 5), Duration::from_secs(1)));
    assert!(watch.interval(&stats(10, 200, 1, 0), Duration::from_secs(2)));
    let breach = watch.breach().expect("a breach");
    assert_eq!((breach.threshold.as_str(), breach.after, breach.measured), ("errors<5", Duration::from_secs(2), 5.0));
}

#[test]
fn a_names_threshold_is_watched_on_that_names_statistics_only() {
    let names: Vec<String> = ["home", "login"].map(String::from).to_vec();
    let mut s = stats(0, 200, 1, 0);
    // login times out 3 times, home never: the run's errors are login's.
    let login = s.names.entry(1);
    login.counters.add_errors(ErrorKind::Timeout, 3);
    s.counters.add_errors(ErrorKind::Timeout, 3);
    assert_eq!(lost(&t("login:errors<3"), &s, &names), Some(3.0));
    assert_eq!(lost(&t("home:errors<1"), &s, &names), None, "home has counted nothing yet");
    let home = s.names.entry(0);
    for _ in 0..200 {
        home.counters.ok += 1;
        home.latency.record(50_000_000).expect("in range");
    }
    assert!(lost(&t("home:p99<10ms"), &s, &names).is_some(), "every home answer took 50 ms");
    assert_eq!(lost(&t("login:p99<10ms"), &s, &names), None, "login has no answer to judge");
    let mut watch = Watch::new(&[t("home:errors<1"), t("login:errors<2")], Duration::ZERO, &names);
    assert!(watch.interval(&s, Duration::from_secs(1)));
    assert_eq!(watch.breach().map(|b| b.threshold), Some("login:errors<2".to_string()));
}
