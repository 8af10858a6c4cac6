//! End to end, baselines: `--baseline old.json --max-regression P` on a run and `volley
//! compare OLD NEW`, against an in-test server whose fixed delay sets the latency and the rate
//! (10 connections, each answer 20 ms late: about 500 requests/s), so a slower server is a
//! regression of a known size and the same server is none.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{
    Behavior, TestServer, assert_valid_comparison, describe_output, json_report, one_error_line, run_volley,
};

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A run of 300 requests over 10 connections against `server`, saved as JSON to `file`.
fn saved_run(server: &TestServer, file: &Path) {
    let out = run_volley(args(&["-n", "300", "-c", "10", "-o", &format!("json:{}", file.display()), &server.url()]));
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
}

fn server(delay_ms: u64) -> TestServer {
    TestServer::start(Behavior::ok(14).delay(Duration::from_millis(delay_ms)))
}

/// The comparison of `metric` in a run's JSON report.
fn compared<'a>(r: &'a Value, metric: &str) -> &'a Value {
    r["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["metric"] == metric && v.get("baseline").is_some())
        .unwrap_or_else(|| panic!("{metric} was not compared: {}", r["thresholds"]))
}

#[test]
fn a_slower_server_fails_the_baseline_gate_and_the_same_server_passes_it() {
    let dir = tempfile::tempdir().unwrap();
    let fast = server(20);
    let baselines: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("base{i}.json"))).collect();
    baselines.iter().for_each(|b| saved_run(&fast, b));
    let mut gate = Vec::new();
    for b in &baselines {
        gate.extend(["--baseline".to_string(), b.display().to_string()]);
    }
    gate.extend(args(&["--max-regression", "20%", "--threshold", "p90<1s", "-n", "300", "-c", "10", "-j"]));

    // The same server: within 20% on every metric. The p99 of 300 requests is their third
    // slowest, so one stall of this machine while the other tests run (13 ms in one CI run,
    // with 10 requests in flight) can move it by half: a run that failed so may be repeated,
    // twice at most. A gate that failed the same server every time fails this test.
    let mut same = gate.clone();
    same.push(fast.url());
    let mut attempts = Vec::new();
    let passed = (0..3).any(|_| {
        let out = run_volley(&same);
        let r = json_report(&out);
        let within = ["rps", "p50", "p99", "p90"].iter().all(|metric| {
            let c = compared(&r, metric);
            c["passed"] == true && c["delta"].as_f64().is_some_and(|d| d.abs() < 0.2)
        });
        let ok = code(&out) == Some(0) && within;
        attempts.push(describe_output(&out));
        ok
    });
    assert!(passed, "the same server failed the gate three times:\n{}", attempts.join("\n"));

    // Twice as slow: half the rate, twice the latency, beyond 20% each way.
    let slow = server(40);
    let md = dir.path().join("summary.md");
    let xml = dir.path().join("gates.xml");
    let mut regressed = gate.clone();
    regressed.extend(args(&["-o", &format!("md:{}", md.display()), "-o", &format!("junit:{}", xml.display())]));
    regressed.push(slow.url());
    let out = run_volley(&regressed);
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let r = json_report(&out);
    let rps = compared(&r, "rps");
    assert_eq!((rps["threshold"].as_str(), rps["op"].as_str()), (Some("rps>=80% of baseline"), Some(">=")));
    let (old, new, delta) =
        (rps["baseline"].as_f64().unwrap(), rps["measured"].as_f64().unwrap(), rps["delta"].as_f64().unwrap());
    assert!(delta < -0.3 && ((new - old) / old - delta).abs() < 1e-9, "{rps}");
    assert_eq!(rps["limit"].as_f64(), Some(old * 0.8));
    for metric in ["rps", "p50", "p99", "p90"] {
        assert_eq!(compared(&r, metric)["passed"], false, "{}", compared(&r, metric));
    }
    assert!(compared(&r, "p50")["delta"].as_f64().unwrap() > 0.5, "{}", compared(&r, "p50"));
    // The threshold of its own still holds: only the comparison failed.
    let own = r["thresholds"].as_array().unwrap().iter().find(|v| v["threshold"] == "p90<1s").unwrap();
    assert_eq!(own["passed"], true);
    let line = one_error_line(&out);
    assert!(line.contains("p50<=120% of baseline (measured ") && line.contains("; baseline "), "{line}");

    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("| `rps>=80% of baseline` |") && md.contains("**FAIL**"), "{md}");
    assert!(md.lines().any(|l| l.contains("`p99<=120% of baseline`") && l.contains("(baseline ")), "{md}");
    let suites = junit_parser::from_reader(std::io::BufReader::new(std::fs::File::open(&xml).unwrap())).unwrap();
    // run, p90<1s, and rps, p50, p99, p90 against the baseline.
    assert_eq!((suites.tests, suites.failures, suites.errors), (6, 4, 0));

    // volley compare says the same from the saved reports.
    let new = dir.path().join("slow.json");
    saved_run(&slow, &new);
    let old_side = baselines.iter().map(|b| b.display().to_string()).collect::<Vec<_>>().join(",");
    let out = run_volley(args(&["compare", &old_side, &new.display().to_string(), "--max-regression", "20%", "-j"]));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_comparison(&c);
    assert_eq!(c["passed"], false);
    assert_eq!(c["old"].as_array().unwrap().len(), 3);
    let metrics: Vec<&str> = c["metrics"].as_array().unwrap().iter().map(|m| m["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["rps", "p50", "p99"]);
    // Without --max-regression: only the deltas, exit 0.
    let out = run_volley(args(&["compare", &old_side, &new.display().to_string()]));
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Old: the medians of 3 reports; new: 1 report\n"), "{text}");
    let p50 = text.lines().find(|l| l.trim_start().starts_with("p50 ")).unwrap_or_else(|| panic!("{text}"));
    assert!(p50.contains("ms") && p50.trim_end().ends_with('%') && p50.contains('+'), "{p50}");
}

#[test]
fn the_median_of_several_baselines_is_not_moved_by_one_outlier_run() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (server(20), server(60));
    let files: Vec<PathBuf> =
        ["a.json", "b.json", "outlier.json", "new.json"].iter().map(|f| dir.path().join(f)).collect();
    saved_run(&slow, &files[2]);
    let new = files[3].display().to_string();
    let all = |paths: &[PathBuf]| paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(",");
    // Against the outlier alone the same build looks 3x faster; the median of three is the
    // fast runs' value, and the comparison is close. The fast runs' p99 is one of their few
    // slowest requests, which one stall of this machine under the other tests can move by
    // half (+56% in one CI run): the fast runs are saved afresh and compared again, twice at
    // most. A median that followed the outlier would fail every time.
    let mut attempts = Vec::new();
    let close = (0..3).any(|_| {
        for i in [0, 1, 3] {
            saved_run(&fast, &files[i]);
        }
        let out = run_volley(args(&["compare", &all(&files[..3]), &new, "--max-regression", "20%", "-j"]));
        attempts.push(describe_output(&out));
        if code(&out) != Some(0) {
            return false;
        }
        let c: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid_comparison(&c);
        c["metrics"].as_array().unwrap().iter().all(|m| m["delta"].as_f64().unwrap().abs() < 0.2)
    });
    assert!(close, "the median of three moved towards the outlier three times:\n{}", attempts.join("\n"));
    // The outlier as the new side fails.
    let out =
        run_volley(args(&["compare", &all(&files[..2]), &files[2].display().to_string(), "--max-regression", "20%"]));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
}

#[test]
fn an_absent_or_malformed_baseline_is_one_line_and_a_usage_error_before_any_load() {
    let fast = server(0);
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let not_report = dir.path().join("other.json");
    std::fs::write(&not_report, r#"{"url": "http://x/"}"#).unwrap();
    let absent = dir.path().join("absent.json").display().to_string();
    for file in [absent.clone(), garbage.display().to_string(), not_report.display().to_string()] {
        let out = run_volley(args(&["--baseline", &file, "-n", "10", &fast.url()]));
        assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.starts_with("volley: error: --baseline ") && line.contains(&file), "{line}");
        let out = run_volley(args(&["compare", &file, &file]));
        assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
        one_error_line(&out);
    }
    let out = run_volley(args(&["--baseline", &absent, "--max-regression", "lots", "-n", "10", &fast.url()]));
    assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
    assert_eq!(fast.requests(), 0, "no load before the arguments are all good");
}

/// A targets file of 200 requests for `/fast` named "fast" and one for `/slow` named "slow",
/// paths only (the command line gives the origin). Each connection walks it in turn, so
/// "slow" is half a percent of the requests: too few to move the run's p99 (the 20th slowest
/// of 2000) however slow it gets.
fn fast_and_slow_targets(dir: &Path) -> String {
    let mut text = String::from("# name: slow\nGET /slow\n\n");
    for i in 0..199 {
        text.push_str(&format!("# name: fast\nGET /fast?i={i}\n\n"));
    }
    let path = dir.join("targets.http");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The thresholds of a run's JSON report that compare with the baseline and failed, as written.
fn failed_comparisons(r: &Value) -> Vec<(String, Value)> {
    let all = r["thresholds"].as_array().unwrap_or_else(|| panic!("no thresholds in {r}"));
    all.iter()
        .filter(|v| v.get("baseline").is_some() && v["passed"] == false)
        .map(|v| (v["threshold"].as_str().unwrap().to_string(), v["name"].clone()))
        .collect()
}

#[test]
fn a_name_that_got_slower_fails_its_own_comparison_and_the_others_pass() {
    let dir = tempfile::tempdir().unwrap();
    let targets = fast_and_slow_targets(dir.path());
    let run = |server: &TestServer, extra: &[&str]| {
        let mut list = args(&["-n", "2000", "-c", "10", "--targets", &targets]);
        list.extend(args(extra));
        list.push(server.url());
        run_volley(list)
    };
    let base = dir.path().join("base.json");
    let before = TestServer::start(Behavior::ok(14).delay(Duration::from_millis(10)));
    let out = run(&before, &["-o", &format!("json:{}", base.display())]);
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));

    // "slow" now answers in 80 ms, eight times its 10: its p50 and p99 fail by far. Its rate
    // and the rest hold within 50% (10 slow requests cost the run about 2.5% of its rate), but
    // a stall of this busy machine can still move a p99 of 10 ms by half, so a run whose other
    // verdicts failed too may be repeated, twice at most.
    let after = TestServer::start(
        Behavior::ok(14).delay(Duration::from_millis(10)).delay_for("/slow", Duration::from_millis(80)),
    );
    let gate = ["--baseline", &base.display().to_string(), "--max-regression", "50%", "-j"].map(String::from);
    let gate: Vec<&str> = gate.iter().map(String::as_str).collect();
    let mut attempts = Vec::new();
    let only_slow = (0..3).any(|_| {
        let out = run(&after, &gate);
        let r = json_report(&out);
        let failed = failed_comparisons(&r);
        attempts.push(describe_output(&out));
        let names = r["thresholds"].as_array().unwrap().iter().filter_map(|v| v["name"].as_str()).collect::<Vec<_>>();
        assert!(names.contains(&"fast") && names.contains(&"slow"), "each name is compared: {}", r["thresholds"]);
        code(&out) == Some(4)
            && failed
                == [
                    ("slow:p50<=150% of baseline".to_string(), Value::from("slow")),
                    ("slow:p99<=150% of baseline".to_string(), Value::from("slow")),
                ]
    });
    assert!(only_slow, "not only slow's comparisons failed, three times:\n{}", attempts.join("\n"));

    // volley compare says the same, a row per name and metric after the run's.
    let new = dir.path().join("new.json");
    let out = run(&after, &["-o", &format!("json:{}", new.display())]);
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
    let (old_file, new_file) = (base.display().to_string(), new.display().to_string());
    let out = run_volley(args(&["compare", &old_file, &new_file, "--max-regression", "50%", "-j"]));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_comparison(&c);
    let rows: Vec<(String, Option<&str>)> = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["metric"].as_str().unwrap().to_string(), m["name"].as_str()))
        .collect();
    let want: Vec<(String, Option<&str>)> = [None, Some("slow"), Some("fast")]
        .into_iter()
        .flat_map(|name| ["rps", "p50", "p99"].map(|m| (m.to_string(), name)))
        .collect();
    assert_eq!(rows, want, "the run's, then each name's in the file's order");
    let slow_p99 = c["metrics"].as_array().unwrap().iter().find(|m| m["name"] == "slow" && m["metric"] == "p99");
    assert!(slow_p99.is_some_and(|m| m["passed"] == false && m["delta"].as_f64().is_some_and(|d| d > 2.0)), "{c}");
    let out = run_volley(args(&["compare", &old_file, &new_file]));
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.trim_start().starts_with("p99 of slow ")), "{text}");
}
