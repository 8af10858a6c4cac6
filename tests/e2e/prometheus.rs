//! End to end, `--prometheus`: a real Prometheus server scrapes a distributed run (the
//! controller and two real `volley worker` processes, each with its own endpoint) every 200 ms,
//! and PromQL over what it stored must agree with the run's JSON report: the same request and
//! status totals, from the controller and from the workers' own endpoints added up, and a p99
//! from the histogram's buckets in the bucket where the report's exact p99 lies.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{
    Behavior, Prometheus, TestServer, WorkerProcess, describe_output, free_port, json_report, number, run_volley,
    sample_value,
};

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The values of a range-vector query's only series, in time order.
fn raw_samples(prometheus: &Prometheus, promql: &str) -> Vec<f64> {
    let result = prometheus.query(promql);
    assert_eq!(result.len(), 1, "{promql}: {result:?}");
    let values = result[0]["values"].as_array().unwrap_or_else(|| panic!("{promql}: no values in {result:?}"));
    values.iter().map(|pair| sample_value(pair).unwrap_or_else(|| panic!("{promql}: {pair}"))).collect()
}

#[test]
fn prometheus_scraping_a_distributed_run_gets_the_reports_totals_and_its_p99_within_one_bucket() {
    // Answers after 1 ms, every 20th after 15 ms: a p99 well inside the slow group, so the
    // buckets around it are tested rather than the first or the last. At most 8,000 requests/s
    // over 8 connections, so 12,000 take over 1.5 s, seen by several scrapes, and end within a
    // second: the last part is in the workers' results only, not in any interval.
    let server =
        TestServer::start(Behavior::ok(14).delay(Duration::from_millis(1)).slow_every(20, Duration::from_millis(15)));
    let worker_metrics = [loopback(free_port()), loopback(free_port())];
    let workers: Vec<WorkerProcess> =
        worker_metrics.iter().map(|m| WorkerProcess::start(&["--prometheus", &m.to_string()])).collect();
    let controller_metrics = loopback(free_port());
    let Some(prometheus) = Prometheus::start(
        &[("controller", &[controller_metrics]), ("worker", &worker_metrics)],
        Duration::from_millis(200),
    ) else {
        return;
    };
    let list: Vec<String> = workers.iter().map(|w| w.address()).collect();
    let out = run_volley([
        "--workers",
        &list.join(","),
        "-n",
        "12000",
        "-c",
        "8",
        "-t",
        "1",
        "--prometheus",
        &controller_metrics.to_string(),
        "--prometheus-linger",
        "2s",
        "-j",
        &server.url(),
    ]);
    assert!(out.status.success(), "{}\n{}", describe_output(&out), prometheus.log());
    let report = json_report(&out);
    let total = number(&report, "/requests/total");
    assert!(total > 100, "too few requests to say anything: {report}");

    // The controller's counter as scraped: it rose while the run went on and ended at the
    // report's total, which it never passed.
    let seen = raw_samples(&prometheus, "volley_requests_total{job=\"controller\"}[5m]");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "the counter went down: {seen:?}");
    assert_eq!(seen.last().copied(), Some(total as f64), "the last scrape is the report's total: {seen:?}");
    let live = seen.iter().filter(|v| **v > 0.0 && **v < total as f64).count();
    assert!(live >= 2, "fewer than two scrapes saw the run in progress: {seen:?}");
    let max = |promql: &str| prometheus.scalar(&format!("max_over_time({promql}[5m])"));
    assert_eq!(max("volley_requests_total{job=\"controller\"}"), total as f64);
    assert_eq!(
        max("volley_responses_total{job=\"controller\",status=\"200\"}"),
        number(&report, "/statusCodes/200") as f64
    );
    assert_eq!(max("volley_errors_total{job=\"controller\",kind=\"timeout\"}"), 0.0);
    assert_eq!(
        max("volley_request_duration_seconds_count{job=\"controller\"}"),
        number(&report, "/requests/ok") as f64
    );
    // Each worker's own endpoint counts its part; together they are the whole.
    let by_workers = prometheus.scalar("sum(max_over_time(volley_requests_total{job=\"worker\"}[5m]))");
    assert_eq!(by_workers, total as f64, "the workers' endpoints add up to the report");
    assert_eq!(prometheus.query("max_over_time(volley_requests_total{job=\"worker\"}[5m])").len(), 2);

    // Every rate the controller showed is one of the report's seconds.
    let seconds: Vec<f64> = report["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["requests"].as_f64().expect("requests"))
        .collect();
    let rates = raw_samples(&prometheus, "volley_request_rate{job=\"controller\"}[5m]");
    assert!(rates.iter().any(|r| *r > 0.0), "no scrape saw a rate: {rates:?}");
    for r in rates.iter().filter(|r| **r > 0.0) {
        assert!(seconds.contains(r), "rate {r} is none of the report's seconds {seconds:?}");
    }

    // p99 from the buckets, against the report's exact p99: the same bucket.
    let p99 = report["latencySeconds"]["percentiles"]["p99"].as_f64().expect("a p99");
    let buckets = "max_over_time(volley_request_duration_seconds_bucket{job=\"controller\"}[5m])";
    let mut bounds: Vec<f64> = prometheus
        .query(buckets)
        .iter()
        .filter_map(|s| s["metric"]["le"].as_str().and_then(|le| le.parse().ok()))
        .filter(|le: &f64| le.is_finite())
        .collect();
    bounds.sort_by(f64::total_cmp);
    let upper_at = bounds.iter().position(|b| *b >= p99).unwrap_or_else(|| panic!("p99 {p99} above every bound"));
    let (lower, upper) = (if upper_at == 0 { 0.0 } else { bounds[upper_at - 1] }, bounds[upper_at]);
    let from_buckets = prometheus.scalar(&format!("histogram_quantile(0.99, {buckets})"));
    assert!(
        lower <= from_buckets && from_buckets <= upper,
        "histogram_quantile gave {from_buckets}, the report's p99 {p99} is in ({lower}, {upper}]"
    );
    assert!(p99 > 0.015, "the slow answers did not reach p99: {p99}");
    // The workers' buckets, added up by Prometheus, give the same quantile: they aggregate.
    let merged = prometheus.scalar(
        "histogram_quantile(0.99, sum by (le) (max_over_time(volley_request_duration_seconds_bucket{job=\"worker\"}[5m])))",
    );
    assert!((merged - from_buckets).abs() < 1e-9, "workers' buckets give {merged}, the controller's {from_buckets}");
}

#[test]
fn prometheus_sees_each_name_of_a_mix_under_a_name_label_with_the_reports_counts() {
    let server = TestServer::start(Behavior::ok(14).status_for("/missing", 404));
    let dir = tempfile::tempdir().expect("a temp dir");
    let targets = dir.path().join("targets.http");
    let origin = server.url().trim_end_matches('/').to_string();
    std::fs::write(
        &targets,
        format!("# name: list\nGET {origin}/items\n\n# name: \"odd\" one\nGET {origin}/missing\n"),
    )
    .expect("the targets file");
    let metrics = loopback(free_port());
    let Some(prometheus) = Prometheus::start(&[("controller", &[metrics])], Duration::from_millis(200)) else {
        return;
    };
    let out = run_volley([
        "--targets",
        targets.to_str().expect("a UTF-8 path"),
        "-n",
        "4000",
        "-c",
        "4",
        "--prometheus",
        &metrics.to_string(),
        "--prometheus-linger",
        "2s",
        "-j",
    ]);
    assert!(out.status.success(), "{}\n{}", describe_output(&out), prometheus.log());
    let report = json_report(&out);
    let name_total = |i: usize| report["names"][i]["requests"]["total"].as_f64().expect("a name's total");
    let max = |promql: &str| prometheus.scalar(&format!("max_over_time({promql}[5m])"));
    assert_eq!(max("volley_name_requests_total{job=\"controller\",name=\"list\"}"), name_total(0));
    // A quote in a name survives the label's escaping as Prometheus reads it.
    assert_eq!(max("volley_name_requests_total{job=\"controller\",name=\"\\\"odd\\\" one\"}"), name_total(1));
    assert_eq!(
        max("volley_name_responses_total{job=\"controller\",name=\"\\\"odd\\\" one\",status=\"404\"}"),
        name_total(1)
    );
    assert_eq!(name_total(0) + name_total(1), 4000.0);
    assert_eq!(max("volley_name_request_duration_seconds_count{job=\"controller\",name=\"list\"}"), name_total(0));
}

#[test]
fn a_slowloris_of_a_thousand_sockets_does_not_cost_prometheus_a_scrape() {
    let metrics = loopback(free_port());
    let _worker = WorkerProcess::start(&["--prometheus", &metrics.to_string()]);
    let Some(prometheus) = Prometheus::start(&[("worker", &[metrics])], Duration::from_millis(200)) else {
        return;
    };
    // 1,000 sockets that connect and never ask anything, reopened as the server closes them,
    // for three seconds: fifteen scrape intervals.
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let mut idle: Vec<std::net::TcpStream> = Vec::with_capacity(1_000);
    let mut opened = 0;
    while std::time::Instant::now() < until {
        idle.retain(|s| {
            let _ = s.set_nonblocking(true);
            let mut byte = [0u8; 1];
            // Still open: the read would block.
            matches!(std::io::Read::read(&mut &*s, &mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        while idle.len() < 1_000 {
            idle.push(std::net::TcpStream::connect(metrics).expect("the metrics port accepts"));
            opened += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(opened >= 1_000);
    // Every scrape of those seconds got its page: `up` was 1 at each, and there was one about
    // every interval.
    let up = raw_samples(&prometheus, "up{job=\"worker\"}[3s]");
    assert!(up.len() >= 10, "only {} scrapes in 3 s of 200 ms intervals: {up:?}", up.len());
    assert!(up.iter().all(|v| *v == 1.0), "a scrape failed during the slowloris: {up:?}\n{}", prometheus.log());
    drop(idle);
}

/// The one line a failed command printed on stderr.
fn one_line(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{}", describe_output(out));
    lines[0].to_string()
}

#[test]
fn a_prometheus_address_that_cannot_be_used_is_a_usage_error_in_one_line() {
    let server = TestServer::start(Behavior::ok(14));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = taken.local_addr().expect("addr").to_string();
    for args in [
        vec!["--prometheus", "localhost:nine", "-n", "5", &server.url()],
        vec!["--prometheus", &taken, "-n", "5", &server.url()],
        vec!["--prometheus-linger", "2s", "-n", "5", &server.url()],
        vec!["--prometheus", "127.0.0.1:0", "--prometheus-linger", "soon", "-n", "5", &server.url()],
        vec!["worker", "--listen", "127.0.0.1:0", "--prometheus", "nowhere"],
        vec!["worker", "--listen", "127.0.0.1:0", "--prometheus", &taken],
    ] {
        let out = run_volley(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{}", describe_output(&out));
        let line = one_line(&out);
        assert!(line.starts_with("volley: error: ") && line.contains("prometheus"), "{args:?}: {line}");
    }
    assert_eq!(server.requests(), 0, "no load before the address is checked");
}
