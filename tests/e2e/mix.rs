//! Request mixes end to end: several named requests to one origin, over HTTP/1.1, HTTP/2 and
//! HTTP/3, with and without TLS, each name's counts checked against what the server counted
//! per route, and the run's totals the sum over names.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use support::h3_server::{H3Options, H3TestServer};
use support::{Behavior, TestServer, WorkerProcess, number};
use volley_engine::{
    Load, Mix, NamedRequest, Order, Plan, Protocol, RequestSpec, Requests, RunControl, RunResult, Scenario, Stop,
    Target,
};

/// Four requests under three names: two GETs of one route with different queries share a
/// name, a POST carries a body, and one route the server answers 404.
fn mix(order: Order) -> Requests {
    let request = |name: &str, method: &str, path: &str, body: &[u8]| NamedRequest {
        name: name.into(),
        path_and_query: path.into(),
        spec: RequestSpec::new(method, vec![("x-mix".into(), name.into())], body.to_vec()),
        templated: false,
        checks: vec![],
        extract: vec![],
        think: None,
        cookies: false,
        follow_redirects: 0,
    };
    Requests::Mix(Mix {
        requests: vec![
            request("list", "GET", "/items?page=1", b""),
            request("create", "POST", "/items", &[b'x'; 1000]),
            request("list", "GET", "/items?page=2", b""),
            request("missing", "GET", "/missing", b""),
        ],
        order,
    })
}

fn run(url: &str, protocol: Protocol, requests: Requests, ca: Option<&str>, n: u64) -> RunResult {
    let target = Target::parse(url).expect("valid URL");
    let mut plan = Plan::new(target, RequestSpec::new("GET", vec![], vec![]), 4, Stop::Requests(n));
    plan.requests = requests;
    plan.protocol = protocol;
    plan.threads = 2;
    if let Some(ca) = ca {
        plan.tls.extra_ca_pem = ca.as_bytes().to_vec();
    }
    let result = volley_engine::run(&plan, &RunControl::new(), &mut |_| {});
    result.expect("the run")
}

/// Each name's ok responses (by name), checking on the way that every name's counts add up to
/// the run's and its histograms hold one sample per response.
fn per_name(result: &RunResult, names: &[&str]) -> BTreeMap<String, u64> {
    let stats = &result.stats;
    let mut ok = BTreeMap::new();
    let (mut sum_ok, mut sum_errors) = (0, 0);
    for (index, name) in stats.names.iter() {
        assert_eq!(name.latency.len(), name.counters.ok, "{}", names[index]);
        assert_eq!(name.ttfb.len(), name.counters.ok, "{}", names[index]);
        sum_ok += name.counters.ok;
        sum_errors += name.counters.errors();
        ok.insert(names[index].to_string(), name.counters.ok);
    }
    assert_eq!(sum_ok, stats.counters.ok, "the run's ok is the sum over names");
    assert_eq!(sum_errors, stats.counters.errors(), "and so are its errors");
    ok
}

/// The server's routes as the mix names them.
fn by_name(routes: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let name = |route: &str| match route {
        "GET /items" => "list",
        "POST /items" => "create",
        "GET /missing" => "missing",
        other => panic!("a route the mix does not have: {other}"),
    };
    let mut counts = BTreeMap::new();
    for (route, n) in routes {
        *counts.entry(name(route).to_string()).or_default() += n;
    }
    counts
}

const NAMES: [&str; 3] = ["list", "create", "missing"];

fn check_in_turn(result: &RunResult, server_routes: &BTreeMap<String, u64>, n: u64) {
    let ok = per_name(result, &NAMES);
    assert_eq!(result.stats.counters.ok, n, "{:?}", result.error_samples);
    assert_eq!(ok, by_name(server_routes), "each name's count is what the server counted for its route");
    // In turn, every connection walks the list: 2 of 4 requests are "list".
    let list = ok["list"] as f64 / n as f64;
    assert!((0.45..=0.55).contains(&list), "{ok:?}");
    let missing = result.stats.names.get(2).expect("missing was sent");
    assert_eq!(missing.counters.statuses().collect::<Vec<_>>(), [(404, ok["missing"])]);
    let list = result.stats.names.get(0).expect("list was sent");
    assert_eq!(list.counters.statuses().collect::<Vec<_>>(), [(200, ok["list"])]);
}

#[test]
fn an_http1_mix_counts_each_name_as_the_server_counted_its_route() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let result = run(&server.url(), Protocol::Http1, mix(Order::InTurn), None, 2000);
    check_in_turn(&result, &server.routes(), 2000);
    assert_eq!(server.request_body_bytes(), 1000 * by_name(&server.routes())["create"]);
}

#[test]
fn an_http2_mix_over_tls_counts_each_name_as_the_server_counted_its_route() {
    let server = TestServer::start_tls(Behavior::ok(10).status_for("/missing", 404));
    let ca = server.cert().expect("a TLS server").ca_pem.clone();
    let result = run(&server.url(), Protocol::Http2 { streams: 8 }, mix(Order::InTurn), Some(&ca), 2000);
    check_in_turn(&result, &server.routes(), 2000);
    assert_eq!(server.request_body_bytes(), 1000 * by_name(&server.routes())["create"]);
}

#[test]
fn an_h2c_mix_counts_each_name_as_the_server_counted_its_route() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let result = run(&server.url(), Protocol::Http2 { streams: 8 }, mix(Order::InTurn), None, 2000);
    check_in_turn(&result, &server.routes(), 2000);
}

#[test]
fn an_http3_mix_counts_each_name_as_the_server_counted_its_route() {
    let server = H3TestServer::start(H3Options::default());
    let ca = server.cert().ca_pem.clone();
    let result = run(&server.url(), Protocol::Http3 { streams: 8 }, mix(Order::InTurn), Some(&ca), 2000);
    let ok = per_name(&result, &NAMES);
    assert_eq!(result.stats.counters.ok, 2000, "{:?}", result.error_samples);
    assert_eq!(ok, by_name(&server.routes()));
}

#[test]
fn a_random_order_draws_each_request_within_a_binomial_bound_and_counts_stay_exact() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let n = 4000;
    let result = run(&server.url(), Protocol::Http1, mix(Order::Random { seed: 42 }), None, n);
    let ok = per_name(&result, &NAMES);
    assert_eq!(result.stats.counters.ok, n);
    assert_eq!(ok, by_name(&server.routes()));
    // Each of the four requests is drawn with p = ¼: "list" (two of them) ½, the others ¼.
    // Five standard deviations of a binomial(4000, p) either side: a fixed seed does not fail
    // by chance, and a picker that favoured one request by a few percent would.
    for (name, p) in [("list", 0.5), ("create", 0.25), ("missing", 0.25)] {
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        let got = ok[name] as f64;
        assert!((got - mean).abs() <= 5.0 * sd, "{name}: {got} against {mean} ± {}", 5.0 * sd);
    }
}

#[test]
fn a_mix_of_a_timed_run_counts_every_finished_request_under_a_name() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let target = Target::parse(&server.url()).expect("valid URL");
    let mut plan =
        Plan::new(target, RequestSpec::new("GET", vec![], vec![]), 4, Stop::Duration(Duration::from_secs(1)));
    plan.requests = mix(Order::InTurn);
    plan.threads = 2;
    let result = volley_engine::run(&plan, &RunControl::new(), &mut |_| {}).expect("the run");
    let ok = per_name(&result, &NAMES);
    assert!(result.stats.counters.ok > 100, "{:?}", result.error_samples);
    // The server may have counted the requests the end aborted; it counted every finished one.
    let server = by_name(&server.routes());
    for name in NAMES {
        assert!(ok[name] <= server[name], "{name}: {} > {}", ok[name], server[name]);
    }
    let aborted = result.stats.counters.aborted;
    assert!(server.values().sum::<u64>() <= result.stats.counters.ok + aborted, "{server:?} {aborted}");
}

#[test]
fn connections_that_cannot_connect_fail_their_requests_under_their_names() {
    // A port nothing listens on: each connection fails to connect, and the request it was
    // opened for fails with it, under the name it was to be sent as (the run ends once every
    // connection has failed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}/", closed.local_addr().expect("its address"));
    drop(closed);
    let result = run(&url, Protocol::Http1, mix(Order::InTurn), None, 40);
    let stats = &result.stats;
    assert!(stats.counters.errors() > 0);
    let errors: u64 = stats.names.iter().map(|(_, s)| s.counters.errors()).sum();
    assert_eq!(errors, stats.counters.errors(), "every failed request is under a name");
    // Each thread's connection k starts at request k: the first two requests, "list" and
    // "create", are the ones their connections were opened for.
    let list = stats.names.get(0).map_or(0, |s| s.counters.errors());
    let create = stats.names.get(1).map_or(0, |s| s.counters.errors());
    assert!(list > 0 && create > 0, "{list} {create}");
}

// ---------------------------------------------------------------------------------------------
// Scenarios: the same four requests as the steps of two weighted scenarios
// ---------------------------------------------------------------------------------------------

/// "browse" (weight 3): list page 1, then page 2; "buy" (weight 1): create, then missing.
fn scenarios(seed: u64) -> Requests {
    let Requests::Mix(mut m) = mix(Order::InTurn) else { unreachable!("mix() is a mix") };
    // In the scenarios' order: browse's two steps, then buy's.
    m.requests.swap(1, 2);
    m.order = Order::Scenarios {
        scenarios: vec![
            Scenario { name: "browse".into(), weight: 3, steps: 2, pacing: None },
            Scenario { name: "buy".into(), weight: 1, steps: 2, pacing: None },
        ],
        seed,
    };
    Requests::Mix(m)
}

/// A run of `n` iterations: exactly `n` counted, each with both of its steps answered and
/// counted under their names as the server counted their routes, "browse" drawn within a
/// binomial bound of its weight.
fn check_iterations(result: &RunResult, server_routes: &BTreeMap<String, u64>, n: u64) {
    let ok = per_name(result, &NAMES);
    let c = &result.stats.counters;
    assert_eq!(c.iterations, n, "-n counts iterations");
    assert_eq!(c.ok, 2 * n, "each iteration sends both steps of its scenario: {:?}", result.error_samples);
    assert_eq!(ok, by_name(server_routes), "each name's count is what the server counted for its route");
    // A buy iteration sends one create and one missing; a browse iteration two lists.
    assert_eq!(ok["create"], ok["missing"]);
    let browse = ok["list"] / 2;
    assert_eq!(browse + ok["create"], n);
    let (mean, sd) = (n as f64 * 0.75, (n as f64 * 0.75 * 0.25).sqrt());
    assert!((browse as f64 - mean).abs() <= 5.0 * sd, "browse {browse} against {mean} ± {}", 5.0 * sd);
}

#[test]
fn an_http1_scenario_run_counts_iterations_and_sends_every_step_of_each() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let result = run(&server.url(), Protocol::Http1, scenarios(7), None, 2000);
    check_iterations(&result, &server.routes(), 2000);
}

#[test]
fn an_h2c_scenario_run_counts_iterations_and_sends_every_step_of_each() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let result = run(&server.url(), Protocol::Http2 { streams: 8 }, scenarios(8), None, 2000);
    check_iterations(&result, &server.routes(), 2000);
}

#[test]
fn an_http3_scenario_run_counts_iterations_and_sends_every_step_of_each() {
    let server = H3TestServer::start(H3Options::default());
    let ca = server.cert().ca_pem.clone();
    let result = run(&server.url(), Protocol::Http3 { streams: 8 }, scenarios(9), Some(&ca), 1000);
    let c = &result.stats.counters;
    assert_eq!((c.iterations, c.ok), (1000, 2000), "{:?}", result.error_samples);
    assert_eq!(per_name(&result, &NAMES), by_name(&server.routes()));
}

#[test]
fn iterations_go_on_across_connections_the_server_closes_between_their_steps() {
    // Every third response closes its connection: an iteration cut there sends its next step
    // on the slot's new connection, with no new unit of the budget.
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404).close_every(3));
    let result = run(&server.url(), Protocol::Http1, scenarios(11), None, 1000);
    check_iterations(&result, &server.routes(), 1000);
    assert!(result.stats.counters.connects > 600, "the server closed connections: {:?}", result.stats.counters);
}

#[test]
fn under_a_rate_scenario_iterations_are_what_is_paced_and_each_sends_all_its_steps() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let target = Target::parse(&server.url()).expect("valid URL");
    let mut plan = Plan::new(target, RequestSpec::new("GET", vec![], vec![]), 4, Stop::Requests(300));
    plan.requests = scenarios(10);
    plan.load = Load::rate(1000);
    plan.threads = 2;
    let result = volley_engine::run(&plan, &RunControl::new(), &mut |_| {}).expect("the run");
    check_iterations(&result, &server.routes(), 300);
    // 300 iterations due 1 ms apart, each taken from the schedule once: its lateness histogram
    // has one sample per iteration, not per step.
    assert_eq!(result.stats.histograms.lateness.len(), 300);
}

// ---------------------------------------------------------------------------------------------
// Through the command line: a targets file, locally and across workers
// ---------------------------------------------------------------------------------------------

/// A targets file (Vegeta's http format) of the same four requests at `url`'s origin, in a
/// directory that lives as long as it; the POST's body comes from a file beside it.
fn targets_file(url: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let origin = url.trim_end_matches('/');
    std::fs::write(dir.path().join("body.bin"), [b'x'; 1000]).expect("the body file");
    let text = format!(
        "# name: list\nGET {origin}/items?page=1\nX-Mix: list\n\n\
         # name: create\nPOST {origin}/items\nX-Mix: create\n@body.bin\n\n\
         # name: list\nGET {origin}/items?page=2\n\n\
         # name: missing\nGET {origin}/missing\n"
    );
    let path = dir.path().join("targets.http");
    std::fs::write(&path, text).expect("the targets file");
    (dir, path.to_str().expect("a UTF-8 path").to_string())
}

/// The report's names: each name's ok count, in the report's order, checking that the
/// names' totals add up to the run's.
fn report_names(r: &serde_json::Value) -> Vec<(String, u64)> {
    let names = r["names"].as_array().unwrap_or_else(|| panic!("no names in {r}"));
    let mut total = 0;
    let mut out = Vec::new();
    for n in names {
        total += number(n, "/requests/total");
        out.push((n["name"].as_str().expect("a name").to_string(), number(n, "/requests/ok")));
    }
    assert_eq!(total, number(r, "/requests/total"), "the run's total is the sum over names");
    out
}

fn names_in_file_order(ok: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    NAMES.iter().map(|n| (n.to_string(), ok.get(*n).copied().unwrap_or(0))).collect()
}

#[test]
fn a_targets_file_over_each_protocol_reports_each_name_as_the_server_counted_it() {
    let tcp = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let (_dir, targets) = targets_file(&tcp.url());
    for flags in [&[][..], &["--http2", "-p", "4"][..]] {
        let before = tcp.routes();
        let mut args = vec!["-c", "4", "-t", "2", "-n", "1000", "-j", "--targets", &targets];
        args.extend_from_slice(flags);
        let out = support::run_volley(&args);
        let r = support::json_report(&out);
        let mut served = tcp.routes();
        for (route, n) in before {
            *served.get_mut(&route).expect("a route seen before") -= n;
        }
        assert_eq!(report_names(&r), names_in_file_order(&by_name(&served)), "{flags:?}: {r}");
        assert_eq!(r["names"][2]["statusCodes"]["404"], r["names"][2]["requests"]["ok"], "{r}");
    }
    let quic = H3TestServer::start(H3Options::default());
    let (_dir, targets) = targets_file(&quic.url());
    let dir = tempfile::tempdir().expect("a temp dir");
    let ca = quic.cert().write_ca(dir.path());
    let ca = ca.to_str().expect("a UTF-8 path");
    let args = ["--http3", "-p", "4", "-c", "4", "-t", "2", "-n", "1000", "--cacert", ca, "-j", "--targets", &targets];
    let r = support::json_report(&support::run_volley(args));
    assert_eq!(report_names(&r), names_in_file_order(&by_name(&quic.routes())), "{r}");
}

#[test]
fn a_targets_file_across_three_workers_reports_each_name_as_the_server_counted_it() {
    let server = TestServer::start(Behavior::ok(10).status_for("/missing", 404));
    let (_dir, targets) = targets_file(&server.url());
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let out = support::run_volley(["--workers", &list, "-c", "9", "-n", "3001", "-j", "--targets", &targets]);
    let r = support::json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 3001, "{r}");
    assert_eq!(report_names(&r), names_in_file_order(&by_name(&server.routes())), "{r}");
    // Each name's latency histogram is the merge of the workers': one sample per response.
    for n in r["names"].as_array().expect("names") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(n["histograms"]["latency"].as_str().expect("a histogram"))
            .expect("base64");
        let h = volley_engine::decode_histogram(&bytes).expect("an HdrHistogram");
        assert_eq!(h.len(), number(n, "/requests/ok"), "{n}");
    }
}
