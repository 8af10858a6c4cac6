//! End to end, a mix's statistics per name in the outputs beyond the reports: thresholds of a
//! name (`login:p99<200ms`), judged at the end and watched live with `--abort-on-fail`, and the
//! files a run writes. The target is an in-test server that answers one route 404, so each
//! name's counts are what the server counted for its route.

use crate::support;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Behavior, TestServer, describe_output, json_report, one_error_line, run_volley};

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// The mix's names in the file's order: one holds a blank, which a threshold quotes.
pub(crate) const NAMES: [&str; 3] = ["list", "create item", "missing"];

/// A targets file of three names at `url`'s origin ("missing" is a route the server answers
/// 404), in a directory that lives as long as it.
pub(crate) fn targets_file(url: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let origin = url.trim_end_matches('/');
    let text = format!(
        "# name: list\nGET {origin}/items\n\n\
         # name: create item\nPOST {origin}/items\n\n\
         # name: missing\nGET {origin}/missing\n"
    );
    let path = dir.path().join("targets.http");
    std::fs::write(&path, text).expect("the targets file");
    (dir, path.to_str().expect("a UTF-8 path").to_string())
}

/// The server that answers /missing 404 and everything else 200.
fn server() -> TestServer {
    TestServer::start(Behavior::ok(10).status_for("/missing", 404))
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The verdict of `threshold` in a JSON report.
fn verdict<'a>(report: &'a Value, threshold: &str) -> &'a Value {
    report["thresholds"]
        .as_array()
        .and_then(|all| all.iter().find(|v| v["threshold"] == threshold))
        .unwrap_or_else(|| panic!("{threshold} is not among {}", report["thresholds"]))
}

#[test]
fn a_names_thresholds_are_judged_on_that_names_counts_as_the_server_counted_them() {
    let server = server();
    let (_dir, targets) = targets_file(&server.url());
    let cases = [
        ("missing:status_404>=1", true),
        ("missing:status_4xx<1%", false),
        ("list:status_4xx<1%", true),
        ("list:error_rate<1%", true),
        ("\"create item\":p99<5s", true),
        ("\"create item\":status_200<1", false),
        ("status_404>=1", true),
    ];
    let mut list = vec!["--targets".to_string(), targets, "-n".into(), "300".into(), "-c".into(), "3".into()];
    for (t, _) in cases {
        list.extend(["--threshold".to_string(), t.to_string()]);
    }
    list.push("-j".into());
    let out = run_volley(&list);
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let r = json_report(&out);
    for (t, pass) in cases {
        assert_eq!(verdict(&r, t)["passed"], pass, "{t}: {}", r["thresholds"]);
    }
    let names: Vec<&str> = r["names"].as_array().expect("names").iter().filter_map(|n| n["name"].as_str()).collect();
    assert_eq!(names, NAMES);
    let routes = server.routes();
    assert_eq!(verdict(&r, "missing:status_404>=1")["measured"].as_f64(), Some(routes["GET /missing"] as f64));
    assert_eq!(verdict(&r, "missing:status_4xx<1%")["name"], "missing");
    assert!(verdict(&r, "status_404>=1").get("name").is_none(), "the run's own threshold has no name");
    // The measured p99 is the name's own, as its row of the report has it.
    let create = r["names"].as_array().and_then(|n| n.iter().find(|n| n["name"] == "create item")).expect("a row");
    assert_eq!(verdict(&r, "\"create item\":p99<5s")["measured"], create["latencySeconds"]["percentiles"]["p99"]);
    let line = one_error_line(&out);
    assert!(line.contains("missing:status_4xx<1% (measured 100.000%)"), "{line}");
    assert!(!line.contains("list:"), "{line}");
}

#[test]
fn a_threshold_of_a_name_the_run_does_not_have_is_a_usage_error_before_any_load() {
    let server = server();
    let (_dir, targets) = targets_file(&server.url());
    for (extra, said) in [
        (vec!["--targets", &targets], "no name 'lst': the run's names are 'list', 'create item', 'missing'"),
        (vec![&server.url()[..]], "no name 'lst': the run has no names"),
    ] {
        let mut list = args(&["--threshold", "lst:p99<1s", "-n", "10"]);
        list.extend(args(&extra));
        let out = run_volley(&list);
        assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.starts_with("volley: error: --threshold 'lst:p99<1s': "), "{line}");
        assert!(line.contains(said), "{line}");
    }
    let out = run_volley(args(&["--targets", &targets, "--threshold", "list:connect_p99<1s", "-n", "10"]));
    assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
    assert!(one_error_line(&out).contains("not kept per name"), "{}", describe_output(&out));
    assert_eq!(server.requests(), 0, "no load before the arguments are all good");
}

#[test]
fn abort_on_fail_watches_a_names_threshold_live_and_stops_the_run() {
    let server = server();
    let (_dir, targets) = targets_file(&server.url());
    let began = Instant::now();
    let out = run_volley(args(&[
        "--targets",
        &targets,
        "-z",
        "30s",
        "-c",
        "2",
        "--threshold",
        "list:status_4xx<1",
        "--threshold",
        "missing:status_404<50",
        "--abort-on-fail",
        "-j",
    ]));
    let took = began.elapsed();
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    assert!(took < Duration::from_secs(15), "a 30 s run aborted early took {took:?}");
    let r = json_report(&out);
    assert_eq!(r["abortedBy"]["threshold"], "missing:status_404<50", "{}", r["abortedBy"]);
    assert_eq!(verdict(&r, "list:status_4xx<1")["passed"], true, "{}", r["thresholds"]);
}

/// The server's count for each name's route (list and create share a path, not a method).
fn server_counts(server: &TestServer) -> [u64; 3] {
    let routes = server.routes();
    let of = |route: &str| routes.get(route).copied().unwrap_or(0);
    [of("GET /items"), of("POST /items"), of("GET /missing")]
}

#[test]
fn junit_has_a_testcase_per_name_failed_only_by_that_names_thresholds() {
    let server = server();
    let (dir, targets) = targets_file(&server.url());
    let xml = dir.path().join("gates.xml");
    let out = run_volley(args(&[
        "--targets",
        &targets,
        "-n",
        "300",
        "-c",
        "3",
        "--threshold",
        "missing:status_4xx<1%",
        "--threshold",
        "list:p99<5s",
        "-o",
        &format!("junit:{}", xml.display()),
    ]));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let suites = junit_parser::from_reader(std::io::BufReader::new(std::fs::File::open(&xml).expect("the file")))
        .expect("JUnit XML");
    // run, two thresholds, three names; the failed threshold and its name.
    assert_eq!((suites.tests, suites.failures, suites.errors), (6, 2, 0));
    let cases: Vec<_> =
        suites.suites[0].cases.iter().filter(|c| c.classname.as_deref() == Some("volley.names")).collect();
    let names: Vec<&str> = cases.iter().map(|c| c.original_name.as_str()).collect();
    assert_eq!(names, NAMES);
    for (case, counted) in cases.iter().zip(server_counts(&server)) {
        let requests = case.properties.hashmap.get("requests").map(String::as_str);
        assert_eq!(requests, Some(counted.to_string().as_str()), "{}", case.original_name);
        let out = case.system_out.as_deref().unwrap_or_default();
        assert!(out.starts_with(&format!("requests {counted}, ok {counted}, errors 0, p50 ")), "{out}");
        assert_eq!(
            case.status.is_success(),
            case.original_name != "missing",
            "{}: {:?}",
            case.original_name,
            case.status
        );
    }
}

#[test]
fn the_csv_series_has_a_row_per_name_per_second_that_adds_up_to_each_names_total() {
    // Whole seconds (a count-limited run's last part-second is in the totals, not the series).
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404).delay(Duration::from_millis(10)));
    let (dir, targets) = targets_file(&server.url());
    let csv = dir.path().join("series.csv");
    let out = run_volley(args(&[
        "--targets",
        &targets,
        "-z",
        "3s",
        "-c",
        "2",
        "-o",
        &format!("csv:{}", csv.display()),
        "-j",
    ]));
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
    let r = json_report(&out);
    let csv = std::fs::read_to_string(&csv).expect("the series");
    let mut rows = csv.lines();
    assert_eq!(rows.next(), Some("second,requests,ok,errors,p50_seconds,p99_seconds,name"));
    let (mut run, mut per_name, mut seconds) = (0, [0u64; 3], std::collections::BTreeSet::new());
    for row in rows {
        // No name of this mix holds a comma or a quote, so a plain split reads it.
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), 7, "{row}");
        let requests: u64 = cells[1].parse().unwrap_or_else(|_| panic!("{row}"));
        seconds.insert(cells[0].to_string());
        match NAMES.iter().position(|n| *n == cells[6]) {
            Some(i) => per_name[i] += requests,
            None => {
                assert_eq!(cells[6], "", "{row}");
                run += requests;
            }
        }
    }
    assert_eq!(seconds.len(), r["intervals"].as_array().expect("intervals").len(), "{csv}");
    assert_eq!(run, support::number(&r, "/requests/total"), "{csv}");
    let totals: Vec<u64> =
        r["names"].as_array().expect("names").iter().map(|n| support::number(n, "/requests/total")).collect();
    assert_eq!(per_name.to_vec(), totals, "{csv}");
    assert_eq!(per_name.iter().sum::<u64>(), run, "the names add up to the run, second by second");
    // What the client counted the server saw (it also saw the requests in flight at the end).
    for (counted, seen) in per_name.iter().zip(server_counts(&server)) {
        assert!(*counted <= seen && seen <= counted + 2, "{per_name:?} vs {:?}", server_counts(&server));
    }
}

#[test]
fn the_hlog_has_tags_per_name_that_hdrhistogram_py_reads_back_to_each_names_count() {
    let server = server();
    let (dir, targets) = targets_file(&server.url());
    let log = dir.path().join("run.hlog");
    let out =
        run_volley(args(&["--targets", &targets, "-z", "2s", "-c", "3", "--hlog", log.to_str().expect("UTF-8"), "-j"]));
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
    let r = json_report(&out);
    let Some(read) = crate::hlog::read_with_hdrhistogram_py(&log) else { return };
    for n in r["names"].as_array().expect("names") {
        // The blank of "create item" is percent-encoded: a tag ends at a comma, a line at a blank.
        let tag = n["name"].as_str().expect("a name").replace(' ', "%20");
        for (kind, histogram) in [("latency", "latency"), ("ttfb", "firstByte")] {
            let tag = format!("{kind}@{tag}");
            let got = &read["tags"][&tag];
            assert_eq!(got["count"], n["requests"]["ok"], "{tag}: {got}");
            // The log's intervals added up hold the name's samples, bucket for bucket.
            let ours = crate::hlog::decode(&n["histograms"][histogram]);
            crate::hlog::assert_same_buckets(&ours, got, &tag);
            // HdrHistogram_py's p99 and the report's take different ranks: with a name's few
            // tail samples those can be buckets apart, so the log's p99 is compared with the
            // sample its own rule names.
            let p99 = got["percentiles"]["99"].as_u64().expect("a p99");
            let mine = crate::hlog::value_at_py_percentile(&ours, 99.0);
            assert!(ours.equivalent(mine, p99), "{tag}: the log's p99 {p99} ns, the name's sample {mine} ns");
            let reported =
                n[if kind == "latency" { "latencySeconds" } else { "firstByteSeconds" }]["percentiles"]["p99"]
                    .as_f64()
                    .expect("a p99");
            assert_eq!(reported, ours.value_at_quantile(0.99) as f64 / 1e9, "{tag}: the p99 the report printed");
        }
    }
    assert_eq!(read["tags"]["latency"]["count"], r["requests"]["ok"], "the run's own tag is unchanged");
}
