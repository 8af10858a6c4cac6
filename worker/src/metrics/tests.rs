//! The exposition read back by a small OpenMetrics parser, the counters' monotonicity across
//! seconds and runs, and the HTTP endpoint itself.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use volley_engine::{ErrorKind, Stats};

use super::buckets::{BOUNDS_NS, bucket_of};
use super::{Exporter, MetricsError};

/// One sample: its full name with labels, and its value.
type Samples = BTreeMap<String, f64>;

/// Parses OpenMetrics text as a scraper would, failing on anything out of place: every sample
/// must follow the `# TYPE` of its family with a suffix that type allows, histogram buckets must
/// be cumulative in ascending `le` and end with +Inf equal to `_count`, and the text must end
/// with `# EOF`. Returns each sample with its family's type.
fn parse(text: &str) -> BTreeMap<String, (String, f64)> {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end:\n{text}");
    let mut family: Option<(String, String)> = None;
    let mut out = BTreeMap::new();
    let mut last_bucket: Option<(f64, f64)> = None;
    let mut inf = None;
    for line in text.lines() {
        if line == "# EOF" {
            break;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(out.keys().all(|k: &String| !k.starts_with(&format!("{name}_")) && k != name), "{name} twice");
            family = Some((name.to_string(), kind.to_string()));
            last_bucket = None;
            inf = None;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# UNIT ").or_else(|| line.strip_prefix("# HELP ")) {
            let (name, value) = rest.split_once(' ').expect("name and text");
            assert_eq!(Some(name), family.as_ref().map(|f| f.0.as_str()), "{line} outside its family");
            if line.starts_with("# UNIT ") {
                assert!(name.ends_with(&format!("_{value}")), "{name} does not end in its unit {value}");
            }
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment: {line}");
        let (key, value) = line.rsplit_once(' ').expect("name and value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a number: {line}"));
        assert!(value.is_finite() && value >= 0.0, "{line}");
        let name = key.split('{').next().expect("a name");
        let (fam, kind) = family.as_ref().unwrap_or_else(|| panic!("{line} before any # TYPE"));
        let suffix = name.strip_prefix(fam.as_str()).unwrap_or_else(|| panic!("{name} is not in family {fam}"));
        let allowed: &[&str] = match kind.as_str() {
            "counter" => &["_total"],
            "gauge" => &[""],
            _ => &["_bucket", "_count", "_sum"],
        };
        assert!(allowed.contains(&suffix), "{name} in a {kind}");
        if suffix == "_total" || suffix == "_bucket" || suffix == "_count" {
            assert_eq!(value.fract(), 0.0, "a count that is not whole: {line}");
        }
        if suffix == "_bucket" {
            let le = key.split("le=\"").nth(1).and_then(|s| s.split('"').next()).expect("an le label");
            let le: f64 = if le == "+Inf" { f64::INFINITY } else { le.parse().expect("le is a number") };
            if let Some((prev_le, prev)) = last_bucket {
                assert!(le > prev_le, "le {le} after {prev_le}");
                assert!(value >= prev, "buckets not cumulative: {line} after {prev}");
            }
            last_bucket = Some((le, value));
            if le.is_infinite() {
                inf = Some(value);
            }
        }
        if suffix == "_count" {
            assert_eq!(inf, Some(value), "_count differs from the +Inf bucket");
        }
        if suffix == "_sum" {
            // One label set's series ends; another's buckets may follow (a name's).
            last_bucket = None;
            inf = None;
        }
        assert!(out.insert(key.to_string(), (kind.clone(), value)).is_none(), "{key} twice");
    }
    out
}

fn values(text: &str) -> Samples {
    parse(text).into_iter().map(|(k, (_, v))| (k, v)).collect()
}

/// Every counter and histogram sample of `after` is at least what it was in `before`.
fn assert_no_counter_fell(before: &str, after: &str) {
    let before = parse(before);
    let after = parse(after);
    for (key, (kind, was)) in &before {
        if kind == "gauge" {
            continue;
        }
        let now = after.get(key).unwrap_or_else(|| panic!("{key} vanished")).1;
        assert!(now >= *was, "{key} went from {was} to {now}");
    }
}

/// A second with `ok` responses of `latency`, each a 200, and `resets` failed requests.
fn second(ok: u64, latency: Duration, resets: u64) -> Stats {
    let mut s = Stats::new();
    s.counters.ok = ok;
    s.counters.add_status(200, ok);
    s.counters.add_errors(ErrorKind::Reset, resets);
    s.counters.bytes_sent = 100 * (ok + resets);
    for _ in 0..ok {
        s.histograms.latency.record(latency.as_nanos() as u64).expect("in range");
    }
    s
}

/// An exporter on a free loopback port.
fn exporter() -> Exporter {
    Exporter::start("127.0.0.1:0".parse().expect("literal")).expect("binds a free port")
}

#[test]
fn the_bounds_are_log_spaced_from_100_microseconds_to_10_seconds() {
    assert_eq!(BOUNDS_NS[0], 100_000);
    assert_eq!(BOUNDS_NS[BOUNDS_NS.len() - 1], 10_000_000_000);
    for pair in BOUNDS_NS.windows(2) {
        let ratio = pair[1] as f64 / pair[0] as f64;
        assert!((1.4..=1.51).contains(&ratio), "{} to {}: {ratio}", pair[0], pair[1]);
    }
    assert_eq!(bucket_of(0), 0);
    assert_eq!(bucket_of(100_000), 0);
    assert_eq!(bucket_of(100_001), 1);
    assert_eq!(bucket_of(10_000_000_001), BOUNDS_NS.len());
}

#[test]
fn the_exposition_parses_back_with_each_response_in_its_bucket() {
    let m = exporter();
    m.run_started(Vec::new(), Vec::new());
    // 90 answers at 1.2 ms (bucket le=0.0015) and 10 at 40 ms (le=0.047), 5 resets.
    let mut s = second(90, Duration::from_micros(1200), 5);
    s.histograms.latency.record_n(40_000_000, 10).expect("in range");
    s.counters.ok += 10;
    s.counters.add_status(503, 10);
    m.second(&s);
    let v = values(&m.page());
    let get = |k: &str| *v.get(k).unwrap_or_else(|| panic!("no {k} in {v:?}"));
    assert_eq!(get("volley_requests_total"), 105.0);
    assert_eq!(get("volley_responses_total{status=\"200\"}"), 90.0);
    assert_eq!(get("volley_responses_total{status=\"503\"}"), 10.0);
    assert_eq!(get("volley_errors_total{kind=\"reset\"}"), 5.0);
    assert_eq!(get("volley_errors_total{kind=\"timeout\"}"), 0.0, "every kind is there, zero or not");
    assert_eq!(get("volley_request_duration_seconds_bucket{le=\"0.001\"}"), 0.0);
    assert_eq!(get("volley_request_duration_seconds_bucket{le=\"0.0015\"}"), 90.0);
    assert_eq!(get("volley_request_duration_seconds_bucket{le=\"0.033\"}"), 90.0);
    assert_eq!(get("volley_request_duration_seconds_bucket{le=\"0.047\"}"), 100.0);
    assert_eq!(get("volley_request_duration_seconds_count"), 100.0);
    let sum = get("volley_request_duration_seconds_sum");
    assert!((sum - (90.0 * 0.0012 + 10.0 * 0.040)).abs() < 0.001, "sum {sum}");
    assert_eq!(get("volley_request_rate"), 105.0);
    assert_eq!(get("volley_running"), 1.0);
    // 0.108 s + 0.4 s of latency in one second: about half a request in flight on average.
    let in_flight = get("volley_in_flight_requests");
    assert!((in_flight - 0.508).abs() < 0.001, "in flight {in_flight}");
}

#[test]
fn a_mixs_names_have_series_of_their_own_under_a_name_label_that_add_up_across_runs() {
    let m = exporter();
    let names = vec!["login".to_string(), "say \"hi\"\\now".to_string()];
    let second_of = |login: u64, other: u64| {
        let mut s = Stats::new();
        for (index, n, latency) in [(0, login, 2_000_000), (1, other, 40_000_000)] {
            for (counters, histogram) in [(&mut s.counters, &mut s.histograms.latency), {
                let name = s.names.entry(index);
                (&mut name.counters, &mut name.latency)
            }] {
                counters.ok += n;
                counters.add_status(200, n);
                histogram.record_n(latency, n).expect("in range");
            }
        }
        s
    };
    for _ in 0..2 {
        m.run_started(names.clone(), Vec::new());
        m.second(&second_of(30, 5));
        m.run_finished(&second_of(30, 5));
    }
    let v = values(&m.page());
    let get = |k: &str| *v.get(k).unwrap_or_else(|| panic!("no {k} in {v:?}"));
    assert_eq!(get("volley_requests_total"), 70.0, "the run's series count every name once");
    assert_eq!(get("volley_name_requests_total{name=\"login\"}"), 60.0);
    // A quote and a backslash in a name are escaped in its label.
    let other = "name=\"say \\\"hi\\\"\\\\now\"";
    assert_eq!(get(&format!("volley_name_requests_total{{{other}}}")), 10.0);
    assert_eq!(get(&format!("volley_name_responses_total{{{other},status=\"200\"}}")), 10.0);
    assert_eq!(get("volley_name_errors_total{name=\"login\",kind=\"reset\"}"), 0.0);
    assert_eq!(get("volley_name_request_duration_seconds_bucket{name=\"login\",le=\"0.0022\"}"), 60.0);
    assert_eq!(get(&format!("volley_name_request_duration_seconds_count{{{other}}}")), 10.0);
    // Without a mix there are no name series at all.
    let plain = exporter();
    plain.run_started(Vec::new(), Vec::new());
    plain.second(&second(10, Duration::from_millis(1), 0));
    assert!(!plain.page().contains("volley_name_"));
}

#[test]
fn counters_only_rise_across_seconds_and_runs_and_take_the_result_at_the_end() {
    let m = exporter();
    let mut pages = vec![m.page().to_string()];
    m.run_started(Vec::new(), Vec::new());
    m.second(&second(100, Duration::from_millis(2), 0));
    pages.push(m.page().to_string());
    m.second(&second(50, Duration::from_millis(20), 3));
    pages.push(m.page().to_string());
    // The result has the seconds and the last partial one: 180 ok, 3 resets.
    let mut total = second(100, Duration::from_millis(2), 0);
    total.merge(&second(50, Duration::from_millis(20), 3));
    total.merge(&second(30, Duration::from_millis(2), 0));
    m.run_finished(&total);
    pages.push(m.page().to_string());
    let v = values(pages.last().expect("a page"));
    assert_eq!(v["volley_requests_total"], 183.0, "the result's totals, not the seconds' sum");
    assert_eq!(v["volley_request_duration_seconds_count"], 180.0);
    assert_eq!(v["volley_running"], 0.0);
    assert_eq!(v["volley_request_rate"], 0.0, "no rate between runs");
    assert_eq!(v["volley_runs_total"], 1.0);
    // A second run adds to the first, and a result below its seconds (a worker left out for
    // lying) does not take back what was shown.
    m.run_started(Vec::new(), Vec::new());
    m.second(&second(40, Duration::from_millis(2), 0));
    pages.push(m.page().to_string());
    m.run_finished(&second(10, Duration::from_millis(2), 0));
    pages.push(m.page().to_string());
    let v = values(pages.last().expect("a page"));
    assert_eq!(v["volley_requests_total"], 223.0);
    assert_eq!(v["volley_runs_total"], 2.0);
    // A run that fails keeps what its seconds showed.
    m.run_started(Vec::new(), Vec::new());
    m.second(&second(7, Duration::from_millis(2), 0));
    m.run_failed();
    pages.push(m.page().to_string());
    assert_eq!(values(pages.last().expect("a page"))["volley_requests_total"], 230.0);
    for pair in pages.windows(2) {
        assert_no_counter_fell(&pair[0], &pair[1]);
    }
}

/// One request on a new connection; the whole response as text.
fn fetch(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    stream.write_all(request.as_bytes()).expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("reads to the close");
    response
}

#[test]
fn a_scrape_gets_openmetrics_and_other_paths_are_refused() {
    let m = exporter();
    m.run_started(Vec::new(), Vec::new());
    m.second(&second(3, Duration::from_millis(1), 0));
    let response = fetch(m.addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    assert_eq!(values(body)["volley_requests_total"], 3.0);
    let other = fetch(m.addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
    let post = fetch(m.addr(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
}

#[test]
fn an_address_in_use_is_one_line_naming_it() {
    let m = exporter();
    let err = Exporter::start(m.addr()).expect_err("the port is taken");
    assert!(matches!(err, MetricsError::Bind { .. }), "{err}");
    let line = err.to_string();
    assert!(line.contains(&m.addr().to_string()) && !line.contains('\n'), "{line}");
}

#[test]
fn a_thousand_idle_sockets_do_not_lock_a_scraper_out() {
    let m = exporter();
    m.run_started(Vec::new(), Vec::new());
    m.second(&second(3, Duration::from_millis(1), 0));
    // A slowloris: connections that never send a request, many more than the server's slots.
    let idle: Vec<TcpStream> = (0..1_000).map(|_| TcpStream::connect(m.addr()).expect("connects")).collect();
    for round in 0..5 {
        let asked = std::time::Instant::now();
        let response = fetch(m.addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "round {round}: {response:?}");
        assert!(asked.elapsed() < Duration::from_millis(500), "round {round}: {:?}", asked.elapsed());
    }
    // Idle ones are closed within the head deadline, whether or not newcomers pushed them out.
    std::thread::sleep(super::server::HEAD_TIMEOUT + Duration::from_millis(500));
    let mut last = idle.into_iter().last().expect("a socket");
    last.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    let mut byte = [0u8; 1];
    assert_eq!(last.read(&mut byte).expect("closed, not timed out"), 0, "the idle socket is closed");
}

#[test]
fn a_names_checks_are_counted_by_check_and_result_and_add_up_across_seconds_and_runs() {
    let m = exporter();
    let names = vec!["login".to_string(), "home".to_string()];
    let checks = vec![vec!["status is 200".to_string(), "fast".to_string()], vec![]];
    let second_of = |passed: u64, failed: u64| {
        let mut s = Stats::new();
        s.counters.ok = passed + failed;
        s.histograms.latency.record_n(1_000_000, passed + failed).expect("in range");
        let login = s.names.entry(0);
        login.counters.ok = passed + failed;
        login.latency.record_n(1_000_000, passed + failed).expect("in range");
        *login.check(0) = volley_engine::CheckCounts { passed: passed + failed, failed: 0 };
        *login.check(1) = volley_engine::CheckCounts { passed, failed };
        s
    };
    for _ in 0..2 {
        m.run_started(names.clone(), checks.clone());
        m.second(&second_of(7, 3));
        m.second(&second_of(1, 1));
        let mut total = second_of(7, 3);
        total.merge(&second_of(1, 1));
        m.run_finished(&total);
    }
    let v = values(&m.page());
    let get = |k: &str| *v.get(k).unwrap_or_else(|| panic!("no {k} in {v:?}"));
    let series = |check: &str, result: &str| {
        format!("volley_name_checks_total{{name=\"login\",check=\"{check}\",result=\"{result}\"}}")
    };
    assert_eq!(get(&series("status is 200", "passed")), 24.0);
    assert_eq!(get(&series("status is 200", "failed")), 0.0);
    assert_eq!(get(&series("fast", "passed")), 16.0);
    assert_eq!(get(&series("fast", "failed")), 8.0);
    assert!(!v.keys().any(|k| k.contains("volley_name_checks_total{name=\"home\"")), "home has no checks");
}

#[test]
fn check_series_are_at_most_a_runs_checks_over_every_name_and_the_life_of_the_process() {
    use volley_engine::MAX_CHECKS;
    let names = vec!["a".to_string(), "b".to_string()];
    let half = MAX_CHECKS / 2 + 100;
    let checks: Vec<Vec<String>> = names.iter().map(|n| (0..half).map(|k| format!("{n}{k}")).collect()).collect();
    let mut s = Stats::new();
    for index in 0..2 {
        let name = s.names.entry(index);
        for k in 0..half {
            name.check(k).passed = 1;
        }
    }
    let series = |t: &super::tally::Tally| t.names.values().map(|n| n.checks.len()).sum::<usize>();
    let tally = super::tally::Tally::of(&s, &names, &checks);
    assert_eq!(series(&tally), MAX_CHECKS, "{half} checks each of two names");
    // Another run's new checks find no room either, whichever way the tallies are combined.
    let other: Vec<Vec<String>> = checks.iter().map(|c| c.iter().map(|n| format!("{n}'")).collect()).collect();
    let later = super::tally::Tally::of(&s, &names, &other);
    assert_eq!(series(&tally.plus(&later)), MAX_CHECKS);
    assert_eq!(series(&tally.at_least(&later)), MAX_CHECKS);
    // The checks kept go on counting.
    let again = tally.plus(&tally);
    assert_eq!(again.names["a"].checks["a0"], [2, 0]);
}
