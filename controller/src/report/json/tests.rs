use hdrhistogram::Histogram;
use serde_json::Value;
use volley_engine::new_histogram;

use super::to_json;
use crate::report::{PERCENTILES, mix_fixture};

/// One histogram fed every latency (or first byte) of name `name` on every worker.
fn all_of(name: usize, of: impl Fn(u64) -> u64) -> Histogram<u64> {
    let mut h = new_histogram();
    for worker in 0..2 {
        for v in mix_fixture::latencies(worker, name) {
            h.record(of(v)).expect("in range");
        }
    }
    h
}

/// `summary`'s percentiles in seconds equal those of `h`, read exactly.
fn assert_percentiles_of(summary: &Value, h: &Histogram<u64>) {
    assert_eq!(summary["count"], h.len());
    for (label, q) in PERCENTILES {
        let seconds = summary["percentiles"][format!("p{label}")].as_f64().expect("a percentile");
        assert_eq!(seconds, h.value_at_quantile(q) as f64 / 1e9, "p{label}");
    }
    assert_eq!(summary["max"].as_f64(), Some(h.max() as f64 / 1e9));
}

#[test]
fn each_name_of_a_mix_has_its_counts_and_the_percentiles_of_all_its_samples_in_the_files_order() {
    let json = to_json(&mix_fixture::report());
    let names = json["names"].as_array().expect("a list");
    assert_eq!(names.iter().map(|n| n["name"].as_str().expect("a name")).collect::<Vec<_>>(), mix_fixture::NAMES);
    let home = &names[0];
    assert_eq!(home["requests"], serde_json::json!({ "total": 15, "ok": 14, "errors": 1 }));
    assert_eq!(home["errors"]["timeout"], 1);
    assert_eq!(home["statusCodes"], serde_json::json!({ "200": 13, "404": 1 }));
    assert_eq!(home["requestsPerSec"], 15.0);
    assert_percentiles_of(&home["latencySeconds"], &all_of(0, |v| v));
    assert_percentiles_of(&home["firstByteSeconds"], &all_of(0, |v| v / 2));
    let search = &names[1];
    assert_eq!(search["requests"]["total"], 0);
    assert_eq!(search["latencySeconds"], serde_json::json!({ "count": 0 }));
    assert!(search["histograms"]["latency"].is_string(), "an empty histogram still merges");
    let login = &names[2];
    assert_eq!((login["requests"]["ok"].as_u64(), login["statusCodes"]["201"].as_u64()), (Some(3), Some(3)));
    assert_percentiles_of(&login["latencySeconds"], &all_of(2, |v| v));
}

#[test]
fn a_run_without_a_mix_has_an_empty_list_of_names() {
    let mut report = mix_fixture::report();
    report.names.clear();
    assert_eq!(to_json(&report)["names"], serde_json::json!([]));
}

#[test]
fn iterations_ended_early_and_failed_extractions_are_counted_per_name_and_for_a_scenario_run() {
    let mut report = mix_fixture::report();
    report.stats.counters.abandoned = 7;
    report.stats.counters.extract_failed = 3;
    let login = report.stats.names.entry(2);
    (login.counters.abandoned, login.counters.extract_failed) = (7, 3);
    // Without scenarios the run has no iterations to count.
    let json = to_json(&report);
    assert_eq!((&json["abandoned"], &json["extractFailed"]), (&Value::Null, &Value::Null));
    report.scenarios = vec![crate::report::ScenarioLine { name: "flow".into(), weight: 1, pacing: None }];
    let json = to_json(&report);
    assert_eq!((&json["abandoned"], &json["extractFailed"]), (&serde_json::json!(7), &serde_json::json!(3)));
    let names = &json["names"];
    assert_eq!((&names[2]["abandoned"], &names[2]["extractFailed"]), (&serde_json::json!(7), &serde_json::json!(3)));
    assert_eq!((&names[0]["abandoned"], &names[0]["extractFailed"]), (&serde_json::json!(0), &serde_json::json!(0)));
}
