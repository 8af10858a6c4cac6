use super::{Metric, Op, Stat, Statuses, Threshold, Timing};

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
