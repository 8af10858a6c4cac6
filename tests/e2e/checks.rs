//! End to end: a scenario step's checks. Every response is judged by each check of its step and
//! counted as passed or failed under the step's name; the counts equal what the server did
//! (which routes it answered with which status and body), locally on HTTP/1.1 (with
//! Content-Length and chunked bodies), h2c and HTTP/3 and across three workers;
//! `--threshold 'checks>X%'` gates on the share passed, of the run or of a name.

use crate::support;

use std::collections::BTreeMap;
use std::process::Output;

use support::h3_server::{H3Options, H3TestServer};
use support::{Behavior, TestServer, WorkerProcess, describe_output, number};

/// Two scenarios whose steps carry checks. The server answers `/items/7` with 404 and an error,
/// `/items/9` and `/cart` with JSON, and `/` with its 10 bytes `abcdefghij`, every one as
/// text/plain and none with cache-control, so each check's verdict follows from the route alone:
/// "status is 200" of `item` fails exactly on `/items/7`, "not found" and "says error" pass
/// there, the item's id only on `/items/9`, "cached" never, and no response takes under 1 µs.
const SHOP: &str = r#"
[[scenario]]
name = "browse"
weight = 3
  [[scenario.step]]
  name = "home"
  path = "/"
    [[scenario.step.check]]
    status = 200
    [[scenario.step.check]]
    body_size = 10
    [[scenario.step.check]]
    body_matches = '^abc.{7}$'
    [[scenario.step.check]]
    header = "Content-Type"
    equals = "text/plain"
  [[scenario.step]]
  name = "item"
  path = "/items/7"
    [[scenario.step.check]]
    status = 200
    [[scenario.step.check]]
    name = "not found"
    status = "4xx"
    [[scenario.step.check]]
    json = "item.id"
    [[scenario.step.check]]
    name = "says error"
    body_contains = "error"
    [[scenario.step.check]]
    name = "cached"
    header = "cache-control"

[[scenario]]
name = "buy"
  [[scenario.step]]
  name = "item"
  path = "/items/9"
    [[scenario.step.check]]
    status = 200
    [[scenario.step.check]]
    name = "says error"
    body_contains = "error"
    [[scenario.step.check]]
    json = "item.id"
    [[scenario.step.check]]
    name = "cached"
    header = "cache-control"
  [[scenario.step]]
  name = "cart"
  method = "POST"
  path = "/cart"
  body = "{}"
    [[scenario.step.check]]
    latency_below = "60s"
    [[scenario.step.check]]
    name = "instant"
    latency_below = "1us"
    [[scenario.step.check]]
    json = "/ok"
    equals = true
"#;

/// What the server answers on each route, besides `/`'s 10 bytes.
const BODIES: [(&str, &[u8]); 3] = [
    ("/items/7", br#"{"error":"no such item"}"#),
    ("/items/9", br#"{"item":{"id":9,"tags":["a","b"]}}"#),
    ("/cart", br#"{"ok":true}"#),
];

fn shop_server(behavior: Behavior) -> TestServer {
    let behavior = BODIES.iter().fold(behavior.status_for("/items/7", 404), |b, (path, body)| b.body_for(path, body));
    TestServer::start(behavior)
}

/// Each name's checks in the report, in order: (check, passed, failed).
fn report_checks(r: &serde_json::Value) -> BTreeMap<String, Vec<(String, u64, u64)>> {
    let names = r["names"].as_array().unwrap_or_else(|| panic!("no names in {r}"));
    names
        .iter()
        .map(|n| {
            let checks = n["checks"].as_array().unwrap_or_else(|| panic!("no checks in {n}"));
            let checks = checks
                .iter()
                .map(|c| (c["name"].as_str().expect("a name").to_string(), number(c, "/passed"), number(c, "/failed")))
                .collect();
            (n["name"].as_str().expect("a name").to_string(), checks)
        })
        .collect()
}

/// What each check should have counted, from the routes the server answered.
fn expected(routes: &BTreeMap<String, u64>) -> BTreeMap<String, Vec<(String, u64, u64)>> {
    let served = |route: &str| routes.get(route).copied().unwrap_or(0);
    let (home, seven, nine, cart) =
        (served("GET /"), served("GET /items/7"), served("GET /items/9"), served("POST /cart"));
    let check = |name: &str, passed, failed| (name.to_string(), passed, failed);
    BTreeMap::from([
        (
            "home".to_string(),
            vec![
                check("status is 200", home, 0),
                check("body size is 10", home, 0),
                check("body matches /^abc.{7}$/", home, 0),
                check(r#"header content-type == "text/plain""#, home, 0),
            ],
        ),
        (
            "item".to_string(),
            vec![
                check("status is 200", nine, seven),
                check("not found", seven, 0),
                check("json /item/id exists", nine, seven),
                check("says error", seven, nine),
                check("cached", 0, seven + nine),
            ],
        ),
        (
            "cart".to_string(),
            vec![check("latency < 60s", cart, 0), check("instant", 0, cart), check("json /ok == true", cart, 0)],
        ),
    ])
}

fn shop(origin: &str) -> (tempfile::TempDir, String) {
    support::scenario_file("shop.toml", origin, SHOP)
}

fn run(file: &str, extra: &[&str]) -> Output {
    let args = [&["-c", "4", "-t", "2", "-n", "300", "--seed", "3", "-j", "--scenario", file][..], extra].concat();
    support::run_volley(&args)
}

#[test]
fn each_checks_counts_are_what_the_server_answered_over_http1_h2c_and_across_three_workers() {
    let server = shop_server(Behavior::ok(10));
    let (_dir, file) = shop(server.url().trim_end_matches('/'));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    for extra in [&[][..], &["--http2"][..], &["--workers", &list][..], &["--http2", "--workers", &list][..]] {
        let before = server.routes();
        let out = run(&file, extra);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        let routes = server.routes_since(&before);
        assert_eq!(number(&r, "/requests/ok"), 600, "{extra:?}: 300 iterations of 2 steps\n{r}");
        assert!(routes["GET /items/7"] > 0 && routes["POST /cart"] > 0, "{extra:?}: both scenarios drawn: {routes:?}");
        assert_eq!(report_checks(&r), expected(&routes), "{extra:?}");
    }
}

#[test]
fn checks_on_the_body_see_a_chunked_body_whole() {
    // Chunks of 3 bytes: every body of the shop arrives in several chunks.
    let server = shop_server(Behavior::ok(10).chunked(3));
    let (_dir, file) = shop(server.url().trim_end_matches('/'));
    let out = run(&file, &[]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = support::json_report(&out);
    assert_eq!(report_checks(&r), expected(&server.routes()));
}

#[test]
fn keep_body_lets_checks_see_past_64_kib_locally_and_on_workers_and_a_bound_out_of_range_is_refused() {
    // The word is past the default bound of 64 KiB; the body's size is counted whole either way.
    let big = [vec![b'x'; 70_000], b"tail".to_vec()].concat();
    let server = TestServer::start(Behavior::ok(10).body_for("/big", &big));
    let text = "[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  name = \"big\"\n  path = \"/big\"\n    \
                [[scenario.step.check]]\n    body_contains = \"tail\"\n    [[scenario.step.check]]\n    body_size = 70004\n";
    let (_dir, file) = support::scenario_file("big.toml", server.url().trim_end_matches('/'), text);
    let workers = [WorkerProcess::start(&[])];
    let verdicts = |extra: &[&str]| {
        let args = [&["-c", "2", "-n", "20", "-j", "--scenario", &file][..], extra].concat();
        let out = support::run_volley(&args);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        report_checks(&support::json_report(&out))["big"].iter().map(|(_, p, f)| (*p, *f)).collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&[]), [(0, 20), (20, 0)], "64 KiB kept: the word is not seen, the size is");
    assert_eq!(verdicts(&["--keep-body", "70004"]), [(20, 0), (20, 0)]);
    assert_eq!(verdicts(&["--keep-body", "80000", "--workers", &workers[0].address()]), [(20, 0), (20, 0)]);
    for bad in ["0", "16777217"] {
        let out = support::run_volley(["--keep-body", bad, "--scenario", &file]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", describe_output(&out));
        assert!(support::one_error_line(&out).contains("--keep-body"), "{}", describe_output(&out));
    }
}

#[test]
fn each_checks_counts_are_what_the_server_answered_over_http3() {
    let server = H3TestServer::start(H3Options {
        status_for: vec![("/items/7".into(), 404)],
        body: b"abcdefghij".to_vec(),
        body_for: BODIES.iter().map(|(path, body)| (path.to_string(), body.to_vec())).collect(),
        ..Default::default()
    });
    let (dir, file) = shop(server.url().trim_end_matches('/'));
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &server.cert().ca_pem).unwrap();
    let out = run(&file, &["--http3", "--cacert", ca.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = support::json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 600, "{r}");
    assert_eq!(report_checks(&r), expected(&server.routes()));
}

#[test]
fn a_checks_threshold_gates_on_the_share_passed_of_the_run_or_of_one_name() {
    let server = shop_server(Behavior::ok(10));
    let (_dir, file) = shop(server.url().trim_end_matches('/'));
    // home's checks always pass; over the run, "instant" never does.
    let out = run(&file, &["--threshold", "home:checks>=100%", "--threshold", "checks>99%"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checks>99%") && !stderr.contains("home:checks"), "{stderr}");
    let r = support::json_report(&out);
    let verdicts = r["thresholds"].as_array().unwrap_or_else(|| panic!("no thresholds in {r}"));
    let passed: Vec<bool> = verdicts.iter().map(|v| v["passed"].as_bool().expect("a verdict")).collect();
    assert_eq!(passed, [true, false], "{r}");
    // The share the run measured is the checks' own: passed over judged, every name together.
    let all: Vec<(String, u64, u64)> = report_checks(&r).into_values().flatten().collect();
    let (p, judged) = all.iter().fold((0, 0), |(p, t), (_, passed, failed)| (p + passed, t + passed + failed));
    let measured = verdicts[1]["measured"].as_f64().expect("a measured share");
    assert!((measured - p as f64 / judged as f64).abs() < 1e-12, "{measured} vs {p}/{judged}");
    // The text report marks each check; out of a terminal, in ASCII.
    let out = support::run_volley(["-c", "2", "-n", "20", "--scenario", &file]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Checks:") && text.contains("FAIL instant") && text.contains("ok   status is 200"), "{text}");
}

#[test]
fn find_max_holds_each_step_to_a_checks_slo_of_the_run_or_of_one_name() {
    let server = shop_server(Behavior::ok(10));
    let (_dir, file) = shop(server.url().trim_end_matches('/'));
    let args = [
        "find-max",
        "--scenario",
        &file,
        "--slo",
        "home:checks>=100%",
        "--slo",
        "cart:checks>70%",
        "--start",
        "200",
        "--max-steps",
        "1",
        "--step-duration",
        "1s",
        "-c",
        "4",
        "--seed",
        "3",
        "-j",
    ];
    let out = support::run_volley(args);
    let r: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", describe_output(&out)));
    let slos = r["steps"][0]["slos"].as_array().unwrap_or_else(|| panic!("no SLOs in {r}"));
    let verdicts: Vec<(&str, bool)> = slos
        .iter()
        .map(|v| (v["threshold"].as_str().expect("a text"), v["passed"].as_bool().expect("a verdict")))
        .collect();
    // home's checks all pass; of cart's three, "instant" fails on every response: 2/3 pass.
    assert_eq!(verdicts, [("home:checks>=100%", true), ("cart:checks>70%", false)], "{r}");
    let measured = slos[1]["measured"].as_f64().expect("a share");
    assert!((measured - 2.0 / 3.0).abs() < 1e-9, "{measured}");
    assert_eq!(r["steps"][0]["verdict"], "fail", "{r}");
    assert!(r["capacityPerSec"].is_null(), "no step held: {r}");
}

#[test]
fn the_csv_series_counts_each_seconds_verdicts_per_name_and_over_the_names() {
    let server = shop_server(Behavior::ok(10));
    let (dir, file) = shop(server.url().trim_end_matches('/'));
    let csv = dir.path().join("series.csv");
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    for extra in [&[][..], &["--workers", &list][..]] {
        // Long enough for whole seconds: a series has a row for each whole second of the run.
        let series = format!("csv:{}", csv.display());
        let args = [
            &["-c", "4", "-z", "2500ms", "--rate", "300", "--seed", "3", "-j", "--scenario", &file, "-o", &series][..],
            extra,
        ];
        let out = support::run_volley(args.concat());
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        let text = std::fs::read_to_string(&csv).expect("the series");
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "second,requests,ok,errors,p50_seconds,p99_seconds,name,checks_passed,checks_failed,\
                 abandoned,extract_failed,redirects"
            )
        );
        // Per second: (ok, passed, failed) of the run and of each name. The shop's names hold no
        // comma, so no field is quoted.
        let mut seconds: BTreeMap<u64, BTreeMap<String, (u64, u64, u64)>> = BTreeMap::new();
        for line in lines {
            let row: Vec<&str> = line.split(',').collect();
            let count = |i: usize| row[i].parse::<u64>().unwrap_or_else(|_| panic!("{row:?}"));
            // The shop is no flow and follows no redirect: nothing ends early.
            assert_eq!((count(9), count(10), count(11)), (0, 0, 0), "{row:?}");
            seconds.entry(count(0)).or_default().insert(row[6].to_string(), (count(2), count(7), count(8)));
        }
        assert!(seconds.len() >= 2, "{extra:?}: {text}");
        let mut summed: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (second, rows) in &seconds {
            let (home, cart) = (rows["home"], rows["cart"]);
            // Every response of home passes its 4 checks; of cart's 3, "instant" always fails.
            assert_eq!((home.1, home.2), (4 * home.0, 0), "{extra:?} second {second}: {text}");
            assert_eq!((cart.1, cart.2), (2 * cart.0, cart.0), "{extra:?} second {second}: {text}");
            let names = rows.iter().filter(|(name, _)| !name.is_empty());
            let (p, f) = names.fold((0, 0), |(p, f), (name, row)| {
                let entry = summed.entry(name.clone()).or_default();
                *entry = (entry.0 + row.1, entry.1 + row.2);
                (p + row.1, f + row.2)
            });
            assert_eq!((rows[""].1, rows[""].2), (p, f), "{extra:?} second {second}: the run's row is the names' sum");
        }
        // The whole seconds hold most of the run's verdicts, and none beyond them.
        for (name, checks) in report_checks(&r) {
            let (p, f) = checks.iter().fold((0, 0), |(p, f), (_, passed, failed)| (p + passed, f + failed));
            let (sp, sf) = summed[&name];
            assert!(sp <= p && sf <= f && 2 * (sp + sf) > p + f, "{extra:?} {name}: {sp}/{sf} of {p}/{f}");
        }
    }
}
