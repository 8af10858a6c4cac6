use super::{Metric, Op, Stat, Statuses, Threshold, Timing, written_name};

fn parsed(text: &str) -> (Metric, Op, f64) {
    let t = Threshold::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    (t.metric, t.op, t.limit)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn every_threshold_kind_parses_into_its_metric_and_a_limit_in_the_metrics_unit() {
    let cases: &[(&str, Metric, Op, f64)] = &[
        ("p99<5ms", Metric::Time(Timing::Latency, Stat::Quantile(0.99)), Op::Lt, 0.005),
        ("p99.99 <= 1s", Metric::Time(Timing::Latency, Stat::Quantile(0.9999)), Op::Le, 1.0),
        ("P50<250us", Metric::Time(Timing::Latency, Stat::Quantile(0.5)), Op::Lt, 250e-6),
        ("latency_p90<3µs", Metric::Time(Timing::Latency, Stat::Quantile(0.9)), Op::Lt, 3e-6),
        ("mean<2.5ms", Metric::Time(Timing::Latency, Stat::Mean), Op::Lt, 0.0025),
        ("max<100ns", Metric::Time(Timing::Latency, Stat::Max), Op::Lt, 100e-9),
        ("min>=1ms", Metric::Time(Timing::Latency, Stat::Min), Op::Ge, 0.001),
        ("connect_p99<10ms", Metric::Time(Timing::Connect, Stat::Quantile(0.99)), Op::Lt, 0.01),
        ("first_byte_p99<10ms", Metric::Time(Timing::FirstByte, Stat::Quantile(0.99)), Op::Lt, 0.01),
        ("rps>1000", Metric::Rps, Op::Gt, 1000.0),
        ("rps >= 12.5", Metric::Rps, Op::Ge, 12.5),
        ("error_rate<0.1%", Metric::ErrorRate, Op::Lt, 0.001),
        ("errors<=3", Metric::Errors, Op::Le, 3.0),
        ("errors<0.1%", Metric::ErrorRate, Op::Lt, 0.001),
        ("status_5xx<1%", Metric::Status { statuses: Statuses::Class(5), rate: true }, Op::Lt, 0.01),
        ("status_200>100", Metric::Status { statuses: Statuses::Code(200), rate: false }, Op::Gt, 100.0),
        ("status_404<=0", Metric::Status { statuses: Statuses::Code(404), rate: false }, Op::Le, 0.0),
        ("retry_after<1", Metric::RetryAfter { rate: false }, Op::Lt, 1.0),
        ("retry_after<=5%", Metric::RetryAfter { rate: true }, Op::Le, 0.05),
        ("checks>99.9%", Metric::Checks, Op::Gt, 0.999),
        ("checks>=100%", Metric::Checks, Op::Ge, 1.0),
    ];
    for (text, metric, op, limit) in cases {
        let (m, o, l) = parsed(text);
        assert_eq!((m, o), (*metric, *op), "{text}");
        assert!(close(l, *limit), "{text}: {l} != {limit}");
    }
}

#[test]
fn bad_thresholds_are_usage_errors_that_name_the_expression_and_say_what_is_wrong() {
    let cases = [
        ("p99", "expected METRIC<VALUE"),
        ("p99=5ms", "expected METRIC<VALUE"),
        ("p99<5", "needs a unit"),
        ("p99<5min", "unknown unit"),
        ("p101<5ms", "unknown metric 'p101'"),
        ("p0<5ms", "unknown metric"),
        ("latency<5ms", "unknown metric"),
        ("status_600>1", "unknown metric"),
        ("status_6xx>1", "unknown metric"),
        ("error_rate<0.01", "needs a percent sign"),
        ("error_rate<101%", "more than 100%"),
        ("checks>99", "needs a percent sign: checks>99.9%"),
        ("checks>101%", "more than 100%"),
        ("rps>10%", "a percent needs a rate"),
        ("rps>-1", "not a number"),
        ("rps>fast", "not a number"),
        ("<5ms", "unknown metric ''"),
        ("p99<", "not a number"),
    ];
    for (text, why) in cases {
        let e = Threshold::parse(text).expect_err(text).to_string();
        assert!(e.starts_with(&format!("--threshold '{text}': ")), "{e}");
        assert!(e.contains(why), "{text}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn a_threshold_of_a_name_takes_the_name_before_a_colon_bare_or_in_double_quotes() {
    let cases: &[(&str, &str, &str)] = &[
        ("login:p99<200ms", "login", "p99"),
        (" login : P99 < 200ms", "login", "p99"),
        ("\"GET /users\":p99<200ms", "GET /users", "p99"),
        ("\"a: b<c\" : errors<1", "a: b<c", "errors"),
        ("\"say \\\"hi\\\" \\\\o/\":rps>1", "say \"hi\" \\o/", "rps"),
        ("Login:status_5xx<1%", "Login", "status_5xx"),
        ("login:checks>99%", "login", "checks"),
    ];
    for (text, name, metric) in cases {
        let t = Threshold::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!((t.mix_name.as_deref(), t.name.as_str()), (Some(*name), *metric), "{text}");
        assert_eq!(t.text, text.trim(), "the text stays as written, for the report");
    }
    let whole = Threshold::parse("p99<5ms").expect("valid");
    assert_eq!((whole.mix_name.as_deref(), whole.what().as_str()), (None, "p99"));
    assert_eq!(Threshold::parse("login:p99<5ms").expect("valid").what(), "p99 of login");
}

#[test]
fn a_bad_name_or_a_metric_no_name_keeps_is_a_usage_error_on_one_line() {
    let cases = [
        (":p99<5ms", "the name before ':' is empty"),
        ("GET /users:p99<5ms", "quote a name that holds a blank"),
        ("\"login:p99<5ms", "no closing"),
        ("\"login\" p99<5ms", "expected ':' after the quoted name"),
        ("\"\":p99<5ms", "the name is empty"),
        ("login:connect_p99<5ms", "not kept per name"),
        ("login:retry_after<1", "whole run only"),
        ("login:p99<5", "needs a unit"),
        ("login:latency<5ms", "unknown metric 'latency'"),
    ];
    for (text, why) in cases {
        let e = Threshold::parse(text).expect_err(text).to_string();
        assert!(e.starts_with(&format!("--threshold '{text}': ")), "{e}");
        assert!(e.contains(why), "{text}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn a_name_the_plan_does_not_have_is_refused_naming_the_names_it_has() {
    let names: Vec<String> = ["home", "login"].map(String::from).to_vec();
    let thresholds = |texts: &[&str]| texts.iter().map(|t| Threshold::parse(t).expect("valid")).collect::<Vec<_>>();
    assert!(
        super::check_names(&thresholds(&["p99<1s", "login:p99<1s", "\"home\":errors<1"]), &names, "--threshold")
            .is_ok()
    );
    let e =
        super::check_names(&thresholds(&["p99<1s", "logout:p99<1s"]), &names, "--threshold").expect_err("no logout");
    assert_eq!(e.to_string(), "--threshold 'logout:p99<1s': no name 'logout': the run's names are 'home', 'login'");
    let e = super::check_names(&thresholds(&["home:p99<1s"]), &[], "--slo").expect_err("no mix");
    assert!(e.to_string().starts_with("--slo 'home:p99<1s': no name 'home': the run has no names"), "{e}");
    let many: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
    let e = super::check_names(&thresholds(&["x:p99<1s"]), &many, "--threshold").expect_err("no x").to_string();
    assert!(e.ends_with("'n9' and 990 more"), "{e}");
}

#[test]
fn a_name_written_for_a_threshold_reads_back_as_the_same_name() {
    for (name, written) in [
        ("login", "login"),
        ("GET /users", "\"GET /users\""),
        ("a:b", "\"a:b\""),
        ("say \"hi\"", "\"say \\\"hi\\\"\""),
        ("back\\slash", "\"back\\\\slash\""),
        ("x<y", "\"x<y\""),
    ] {
        assert_eq!(written_name(name), written);
        let t = Threshold::parse(&format!("{written}:p99<1s")).unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(t.mix_name.as_deref(), Some(name));
    }
}
