use super::testsuites;
use crate::gate::{Threshold, judge};
use crate::report::mix_fixture;

fn xml(thresholds: &[&str]) -> String {
    let report = mix_fixture::report();
    let thresholds: Vec<Threshold> = thresholds.iter().map(|t| Threshold::parse(t).expect("valid")).collect();
    testsuites(&report, &judge(&thresholds, &report))
}

/// The testcase of `name` (classname volley.names), from its opening tag to its end.
fn case<'a>(xml: &'a str, name: &str) -> &'a str {
    let start = xml
        .find(&format!("<testcase name=\"{name}\" classname=\"volley.names\""))
        .unwrap_or_else(|| panic!("no testcase for {name}:\n{xml}"));
    let len = xml[start..].find("</testcase>").expect("closed");
    &xml[start..start + len]
}

#[test]
fn each_name_is_a_testcase_with_its_counts_and_its_merged_percentiles() {
    let xml = xml(&["p99<1s"]);
    // run, the threshold, then the three names in the file's order.
    assert!(xml.contains("tests=\"5\" failures=\"0\" errors=\"0\""), "{xml}");
    let order: Vec<usize> =
        mix_fixture::NAMES.iter().map(|n| xml.find(&format!("name=\"{n}\"")).expect("a case")).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{xml}");
    let home = case(&xml, "home");
    assert!(home.contains("<property name=\"requests\" value=\"15\"/>"), "{home}");
    assert!(home.contains("<property name=\"errors\" value=\"1\"/>"), "{home}");
    let report = mix_fixture::report();
    let merged = &report.stats.names.get(0).expect("home").latency;
    let p99 = format!("{:.3} ms", merged.value_at_quantile(0.99) as f64 / 1e6);
    assert!(home.contains(&format!("p99 {p99}")), "{p99}: {home}");
    assert!(home.contains("statuses 200: 13, 404: 1"), "{home}");
    assert!(!home.contains("<failure"), "{home}");
    let search = case(&xml, "search");
    assert!(search.contains("requests 0, ok 0, errors 0, p50 -, p99 -, statuses none"), "{search}");
    assert!(search.contains("<property name=\"p99_ms\" value=\"\"/>"), "{search}");
}

#[test]
fn a_name_fails_when_a_threshold_of_that_name_failed_and_only_then() {
    let xml = xml(&["home:errors<1", "login:p99<1s", "p99<1ns"]);
    // Three thresholds (two failed), the run, three names (home failed).
    assert!(xml.contains("tests=\"7\" failures=\"3\" errors=\"0\""), "{xml}");
    let home = case(&xml, "home");
    assert!(home.contains("<failure message=\"thresholds failed: home:errors&lt;1 (measured 1)\""), "{home}");
    assert!(!case(&xml, "login").contains("<failure"), "login's threshold held");
    assert!(!case(&xml, "search").contains("<failure"), "the run's own threshold fails no name");
    assert!(xml.contains("message=\"errors of home was 1, expected &lt; 1\""), "{xml}");
}

#[test]
fn a_run_without_a_mix_has_no_name_testcases() {
    let mut report = mix_fixture::report();
    report.names.clear();
    let xml = testsuites(&report, &[]);
    assert!(!xml.contains("volley.names"), "{xml}");
    assert!(xml.contains("tests=\"1\""), "{xml}");
}

#[test]
fn a_names_checks_are_properties_and_lines_of_its_testcase_and_fail_nothing_by_themselves() {
    let mut report = mix_fixture::report();
    report.checks = vec![vec!["status is 200".into(), "fast & <small>".into()], vec![], vec![]];
    let home = report.stats.names.entry(0);
    *home.check(0) = volley_engine::CheckCounts { passed: 13, failed: 1 };
    *home.check(1) = volley_engine::CheckCounts { passed: 0, failed: 14 };
    let xml = testsuites(&report, &[]);
    let home = case(&xml, "home");
    for property in [
        r#"<property name="check_0" value="status is 200"/>"#,
        r#"<property name="check_0_passed" value="13"/>"#,
        r#"<property name="check_0_failed" value="1"/>"#,
        r#"<property name="check_1" value="fast &amp; &lt;small&gt;"/>"#,
        r#"<property name="check_1_failed" value="14"/>"#,
    ] {
        assert!(home.contains(property), "{property} missing:\n{home}");
    }
    assert!(
        home.contains(
            "\ncheck status is 200: 13 passed, 1 failed\ncheck fast &amp; &lt;small&gt;: 0 passed, 14 failed"
        )
    );
    assert!(!home.contains("<failure"), "a failed check is not a failed gate:\n{home}");
    assert!(xml.contains(r#"failures="0""#), "{xml}");
}

#[test]
fn a_names_iterations_ended_early_are_properties_and_a_line_of_its_testcase_only_where_some_did() {
    let mut report = mix_fixture::report();
    let home = &mut report.stats.names.entry(0).counters;
    (home.abandoned, home.extract_failed) = (6, 5);
    let xml = testsuites(&report, &[]);
    let home = case(&xml, "home");
    assert!(home.contains("<property name=\"abandoned\" value=\"6\"/>"), "{home}");
    assert!(home.contains("<property name=\"extract_failed\" value=\"5\"/>"), "{home}");
    assert!(home.contains("iterations abandoned here 6, extractions failed 5"), "{home}");
    assert!(!home.contains("<failure"), "ending early fails nothing by itself: {home}");
    assert!(!case(&xml, "search").contains("abandoned"), "{xml}");
}

#[test]
fn a_names_redirects_followed_are_a_property_and_a_line_of_its_testcase_only_where_some_were() {
    let mut report = mix_fixture::report();
    report.stats.names.entry(0).counters.redirects = 4;
    let xml = testsuites(&report, &[]);
    let home = case(&xml, "home");
    assert!(home.contains("<property name=\"redirects\" value=\"4\"/>"), "{home}");
    assert!(home.contains("redirects followed 4"), "{home}");
    assert!(!case(&xml, "search").contains("redirects"), "{xml}");
}

#[test]
fn each_scenario_is_a_testcase_with_its_iterations_and_durations_that_fails_nothing() {
    let report = mix_fixture::paced_report();
    let xml = testsuites(&report, &[]);
    // run, the three names, the two scenarios; none failed.
    assert!(xml.contains("tests=\"6\" failures=\"0\" errors=\"0\""), "{xml}");
    let scenario = |name: &str| {
        let start = xml
            .find(&format!("<testcase name=\"{name}\" classname=\"volley.scenarios\""))
            .unwrap_or_else(|| panic!("no testcase for {name}:\n{xml}"));
        let len = xml[start..].find("</testcase>").expect("closed");
        xml[start..start + len].to_string()
    };
    let browse = scenario("browse");
    for property in [
        ("started", "10"),
        ("completed", "8"),
        ("abandoned", "1"),
        ("late", "2"),
        ("missed", "1"),
        ("pacing_ms", "20.000000"),
    ] {
        assert!(browse.contains(&format!("<property name=\"{}\" value=\"{}\"/>", property.0, property.1)), "{browse}");
    }
    let p99 = report.stats.scenarios.get(0).expect("browse").duration.value_at_quantile(0.99) as f64 / 1e6;
    assert!(browse.contains("iteration duration p50 ") && browse.contains(&format!("p99 {p99:.3} ms")), "{browse}");
    assert!(
        browse.contains("iterations started 10, completed 8, abandoned 1\npacing 20.000 ms, late 2, slots missed 1"),
        "{browse}"
    );
    let buy = scenario("buy");
    assert!(!buy.contains("duration") && !buy.contains("<failure"), "no durations, no failure: {buy}");
    assert!(!testsuites(&mix_fixture::report(), &[]).contains("volley.scenarios"), "a run without scenarios has none");
}
