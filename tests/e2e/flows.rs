//! End to end: flows. A scenario logs each virtual user in, extracts the token the server issued
//! it (from the JSON body) and its session cookie (from `set-cookie`), and sends them on in later
//! steps' headers and path. The server (tests/support/flow_app.rs) issues a different token per
//! login and answers 401 to any token not issued to the user the request names, so every check's
//! counts, the extraction failures and the iterations abandoned in the report must equal what
//! the server did, locally on HTTP/1.1, h2c and HTTP/3, and across three workers.

use crate::support;

use std::process::Output;
use std::sync::Arc;

use support::h3_server::{H3Options, H3TestServer};
use support::{Behavior, FlowApp, TestServer, WorkerProcess, describe_output, number, scenario_file};

/// Log in, see the profile with the token, list the items with the token in the path and the
/// session cookie. The server answers every 7th login without a token or cookie.
const LOGIN: &str = r#"
[[scenario]]
name = "user"
  [[scenario.step]]
  name = "login"
  method = "POST"
  path = "/login"
  body = '{"user":"{{vu}}"}'
    [[scenario.step.extract]]
    var = "token"
    json = "token"
    [[scenario.step.extract]]
    var = "sid"
    cookie = "sid"
  [[scenario.step]]
  name = "profile"
  path = "/profile"
  headers = { authorization = "Bearer {{token}}", x-user = "{{vu}}" }
    [[scenario.step.check]]
    status = 200
    [[scenario.step.check]]
    json = "user"
  [[scenario.step]]
  name = "items"
  path = "/items/{{token}}"
  headers = { cookie = "sid={{sid}}", x-user = "{{vu}}" }
    [[scenario.step.check]]
    status = 200
"#;

const ITERATIONS: u64 = 300;

fn run(file: &str, extra: &[&str]) -> Output {
    let n = ITERATIONS.to_string();
    let args = [&["-c", "6", "-t", "2", "-n", &n, "--seed", "5", "-j", "--scenario", file][..], extra].concat();
    support::run_volley(&args)
}

/// One name's entry in the report.
fn name<'a>(r: &'a serde_json::Value, wanted: &str) -> &'a serde_json::Value {
    let names = r["names"].as_array().unwrap_or_else(|| panic!("no names in {r}"));
    names.iter().find(|n| n["name"] == wanted).unwrap_or_else(|| panic!("no {wanted} in {r}"))
}

/// Each check of a name, as (passed, failed).
fn checks(r: &serde_json::Value, of: &str) -> Vec<(u64, u64)> {
    let n = name(r, of);
    let list = n["checks"].as_array().unwrap_or_else(|| panic!("no checks in {n}"));
    list.iter().map(|c| (number(c, "/passed"), number(c, "/failed"))).collect()
}

/// The report agrees with what `app` did over `ITERATIONS` iterations of which `tokenless`
/// logins gave no token: those iterations end after their login, counted as an extraction
/// failure and an abandoned iteration under "login"; every other one sends its profile and
/// items requests with the token and cookie issued to its own user, which the server accepts.
fn assert_agrees(r: &serde_json::Value, app: &FlowApp, how: &str) {
    let counts = app.counts();
    let tokenless = app.count("login without token");
    let issued = app.count("login");
    assert_eq!(issued + tokenless, ITERATIONS, "{how}: {counts:?}");
    assert_eq!(tokenless, ITERATIONS / 7, "{how}: every 7th login of {ITERATIONS}: {counts:?}");
    assert_eq!(app.count("profile refused") + app.count("items refused"), 0, "{how}: {counts:?}");
    assert_eq!((app.count("profile ok"), app.count("items ok")), (issued, issued), "{how}: {counts:?}");
    assert_eq!(number(r, "/iterations"), ITERATIONS, "{how}: {r}");
    let login = name(r, "login");
    assert_eq!(number(login, "/requests/ok"), ITERATIONS, "{how}: {login}");
    assert_eq!(number(login, "/extractFailed"), tokenless, "{how}: {login}");
    assert_eq!(number(login, "/abandoned"), tokenless, "{how}: {login}");
    assert_eq!(number(r, "/extractFailed"), tokenless, "{how}: {r}");
    assert_eq!(number(r, "/abandoned"), tokenless, "{how}: {r}");
    assert_eq!(checks(r, "profile"), [(issued, 0), (issued, 0)], "{how}");
    assert_eq!(checks(r, "items"), [(issued, 0)], "{how}");
    assert_eq!(number(r, "/requests/ok"), ITERATIONS + 2 * issued, "{how}: {r}");
    // Per scenario: every iteration ended, completed with its token or abandoned without, and
    // each completed one has its duration.
    let user = scenario_entry(r, "user");
    assert_eq!(iterations(user), (ITERATIONS, issued, tokenless), "{how}: {user}");
    assert_eq!(number(user, "/durationSeconds/count"), issued, "{how}: {user}");
}

/// One scenario's entry in the report.
fn scenario_entry<'a>(r: &'a serde_json::Value, wanted: &str) -> &'a serde_json::Value {
    let list = r["scenarios"].as_array().unwrap_or_else(|| panic!("no scenarios in {r}"));
    list.iter().find(|s| s["name"] == wanted).unwrap_or_else(|| panic!("no scenario {wanted} in {r}"))
}

/// A scenario's iterations, as (started, completed, abandoned).
fn iterations(s: &serde_json::Value) -> (u64, u64, u64) {
    (number(s, "/iterations/started"), number(s, "/iterations/completed"), number(s, "/iterations/abandoned"))
}

#[test]
fn each_user_carries_its_own_token_and_cookie_and_a_missing_token_ends_the_iteration_over_http1_h2c_and_workers() {
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    for extra in [&[][..], &["--http2", "-p", "4"][..], &["--workers", &list][..]] {
        let app = Arc::new(FlowApp::new().without_token_every(7));
        let server = TestServer::start(Behavior::ok(10).app(app.clone()));
        let (_dir, file) = scenario_file("login.toml", server.url().trim_end_matches('/'), LOGIN);
        let out = run(&file, extra);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        assert_agrees(&support::json_report(&out), &app, &format!("{extra:?}"));
    }
}

#[test]
fn each_user_carries_its_own_token_and_cookie_over_http3_whether_extracted_or_in_its_jar() {
    let app = Arc::new(FlowApp::new().without_token_every(7));
    let server = H3TestServer::start(H3Options { app: Some(app.clone()), ..Default::default() });
    let (dir, file) = scenario_file("login.toml", server.url().trim_end_matches('/'), LOGIN);
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &server.cert().ca_pem).unwrap();
    let out = run(&file, &["--http3", "-p", "4", "--cacert", ca.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_agrees(&support::json_report(&out), &app, "h3");
    // And with the session cookie left to each user's jar.
    let app = Arc::new(FlowApp::new().without_token_every(7));
    let server = H3TestServer::start(H3Options { app: Some(app.clone()), ..Default::default() });
    let (dir, file) = scenario_file("jar.toml", server.url().trim_end_matches('/'), &jar_login());
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &server.cert().ca_pem).unwrap();
    let out = run(&file, &["--http3", "-p", "4", "--cacert", ca.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_agrees(&support::json_report(&out), &app, "h3 jar");
}

/// `LOGIN` with the session cookie left to each user's jar: no extractor takes it and no step
/// names it; the items step must carry it all the same.
fn jar_login() -> String {
    let jar = LOGIN
        .replace("    [[scenario.step.extract]]\n    var = \"sid\"\n    cookie = \"sid\"\n", "")
        .replace("headers = { cookie = \"sid={{sid}}\", x-user", "headers = { x-user");
    assert!(!jar.contains("sid"), "{jar}");
    jar
}

#[test]
fn each_users_jar_carries_the_session_cookie_its_login_set_over_http1_h2c_and_workers_and_not_when_turned_off() {
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    for extra in [&[][..], &["--http2", "-p", "4"][..], &["--workers", &list][..]] {
        let app = Arc::new(FlowApp::new().without_token_every(7));
        let server = TestServer::start(Behavior::ok(10).app(app.clone()));
        let (_dir, file) = scenario_file("jar.toml", server.url().trim_end_matches('/'), &jar_login());
        let out = run(&file, extra);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        assert_agrees(&support::json_report(&out), &app, &format!("jar {extra:?}"));
    }
    // The same with the scenario's jar off: the items step goes without the cookie, and the
    // server refuses every one.
    let off = jar_login().replacen("name = \"user\"\n", "name = \"user\"\ncookies = false\n", 1);
    let app = Arc::new(FlowApp::new().without_token_every(7));
    let server = TestServer::start(Behavior::ok(10).app(app.clone()));
    let (_dir, file) = scenario_file("off.toml", server.url().trim_end_matches('/'), &off);
    let out = run(&file, &[]);
    let r = support::json_report(&out);
    let issued = app.count("login");
    assert_eq!((app.count("items ok"), app.count("items refused")), (0, issued), "{:?}", app.counts());
    assert_eq!(checks(&r, "items"), [(0, issued)]);
}

#[test]
fn a_step_using_a_variable_no_earlier_step_extracts_is_refused_with_its_place() {
    let early = LOGIN.replacen("path = \"/login\"", "path = \"/login/{{sid}}\"", 1);
    let (_dir, file) = scenario_file("early.toml", "http://127.0.0.1:9", &early);
    let out = support::run_volley(["-n", "1", "--scenario", &file]);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("early.toml:") && stderr.contains("sid"), "{stderr}");
}

#[test]
fn a_failed_check_that_aborts_ends_its_iteration_and_the_server_never_sees_the_later_step() {
    // Every 4th request the server receives is answered 503, whichever route it is.
    let server = TestServer::start(Behavior::ok(10).status_every(4, 503));
    let scenario = r#"
[[scenario]]
name = "two"
  [[scenario.step]]
  name = "first"
  path = "/a"
    [[scenario.step.check]]
    status = 200
    on_failure = "abort"
  [[scenario.step]]
  name = "second"
  path = "/b"
"#;
    let (_dir, file) = scenario_file("abort.toml", server.url().trim_end_matches('/'), scenario);
    for extra in [&[][..], &["--http2", "-p", "4"][..]] {
        let before = server.routes();
        let out = run(&file, extra);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        let routes = server.routes_since(&before);
        let served = |route: &str| routes.get(route).copied().unwrap_or(0);
        let failed = checks(&r, "first")[0].1;
        assert!(failed > 0, "{extra:?}: some first steps got a 503: {r}");
        assert_eq!(number(name(&r, "first"), "/statusCodes/503"), failed, "{extra:?}");
        assert_eq!(served("GET /a"), ITERATIONS, "{extra:?}");
        assert_eq!(served("GET /b"), ITERATIONS - failed, "{extra:?}: an aborted iteration sends no second step");
        assert_eq!(number(name(&r, "first"), "/abandoned"), failed, "{extra:?}");
        assert_eq!(number(&r, "/abandoned"), failed, "{extra:?}");
    }
}

#[test]
fn the_login_example_runs_against_volley_serve_on_every_protocol_with_every_check_passed() {
    let cert = support::TestCert::generate();
    let config = volley_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: Some(cert.serve_tls()),
        http3: true,
        ..volley_serve::ServeConfig::default()
    };
    let tls = volley_serve::Server::start(config).unwrap();
    let plain = volley_serve::Server::start(volley_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..volley_serve::ServeConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = cert.write_ca(dir.path());
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenarios/login.toml");
    let (plain_url, tls_url) = (plain.url(), format!("https://{}", tls.local_addr()));
    let runs: [(&[&str], &volley_serve::Server); 3] = [
        (&[&plain_url], &plain),
        (&["--http2", &plain_url], &plain),
        (&["--http3", "-p", "2", "--cacert", ca.to_str().unwrap(), &tls_url], &tls),
    ];
    for (extra, server) in runs {
        let before = server.requests();
        let out = support::run_volley([&["-c", "4", "-n", "200", "-j", "--scenario", example][..], extra].concat());
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        // Each iteration: login, profile, and items' redirect and the hop it follows.
        assert_eq!(number(&r, "/requests/ok"), 800, "{extra:?}: {r}");
        assert_eq!(server.requests() - before, 800, "{extra:?}");
        assert_eq!((number(&r, "/extractFailed"), number(&r, "/abandoned")), (0, 0), "{extra:?}: {r}");
        assert_eq!(checks(&r, "profile"), [(200, 0), (200, 0)], "{extra:?}");
        let items = name(&r, "items");
        assert_eq!(number(items, "/statusCodes/302"), 200, "{extra:?}: {items}");
        assert_eq!(number(items, "/redirects"), 200, "{extra:?}: {items}");
        assert_eq!(checks(&r, "items"), [(200, 0)], "{extra:?}");
    }
}

#[test]
fn a_flows_last_step_failing_never_cuts_short_another_scenarios_iteration_on_the_same_connection() {
    // "flow" ends with a step the server always fails, whose check aborts; "plain" is no flow,
    // so on HTTP/2 its first step may go out while the flow's last is in flight.
    let server = TestServer::start(Behavior::ok(10).status_for("/a2", 500));
    let scenarios = r#"
[[scenario]]
name = "flow"
  [[scenario.step]]
  path = "/a1"
  [[scenario.step]]
  path = "/a2"
    [[scenario.step.check]]
    status = 200
    on_failure = "abort"
[[scenario]]
name = "plain"
  [[scenario.step]]
  path = "/b1"
  [[scenario.step]]
  path = "/b2"
"#;
    let (_dir, file) = scenario_file("mixed.toml", server.url().trim_end_matches('/'), scenarios);
    for extra in [&[][..], &["--http2", "-p", "2"][..]] {
        let before = server.routes();
        let out = run(&file, extra);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        let routes = server.routes_since(&before);
        let served = |route: &str| routes.get(route).copied().unwrap_or(0);
        let (a1, a2, b1, b2) = (served("GET /a1"), served("GET /a2"), served("GET /b1"), served("GET /b2"));
        assert!(a1 > 0 && b1 > 0, "{extra:?}: both scenarios drawn");
        assert_eq!((a1 + b1, a2, b2), (ITERATIONS, a1, b1), "{extra:?}: every iteration sent all its steps");
        assert_eq!(number(&r, "/abandoned"), 0, "{extra:?}: a last step leaves nothing to abandon: {r}");
        assert_eq!(number(&r, "/requests/ok"), 2 * ITERATIONS, "{extra:?}");
        // Each scenario's iterations all completed, failed last step or not; only the flow's
        // (one request at a time) have durations.
        let (flow, plain) = (scenario_entry(&r, "flow"), scenario_entry(&r, "plain"));
        assert_eq!(iterations(flow), (a1, a1, 0), "{extra:?}: {flow}");
        assert_eq!(iterations(plain), (b1, b1, 0), "{extra:?}: {plain}");
        assert_eq!(number(flow, "/durationSeconds/count"), a1, "{extra:?}: {flow}");
        assert_eq!(number(plain, "/durationSeconds/count"), 0, "{extra:?}: {plain}");
    }
}

#[test]
fn a_think_time_pauses_each_user_between_steps_and_stays_out_of_the_latency() {
    let server = TestServer::start(Behavior::ok(10));
    let scenario = r#"
[[scenario]]
name = "read"
  [[scenario.step]]
  path = "/a"
  think = "100ms"
  [[scenario.step]]
  path = "/b"
  think = { uniform = ["20ms", "40ms"] }
"#;
    let (_dir, file) = scenario_file("think.toml", server.url().trim_end_matches('/'), scenario);
    for extra in [&[][..], &["--http2", "-p", "4"][..]] {
        let before = server.routes();
        // Two users, three iterations each: at least 3 × 100 ms + 2 × 20 ms of pauses apiece.
        let out =
            support::run_volley([&["-c", "2", "-t", "1", "-n", "6", "-j", "--scenario", &file][..], extra].concat());
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        let routes = server.routes_since(&before);
        let served = |route: &str| routes.get(route).copied().unwrap_or(0);
        assert_eq!((served("GET /a"), served("GET /b")), (6, 6), "{extra:?}");
        let took = r["durationSeconds"].as_f64().expect("a duration");
        assert!(took >= 0.34, "{extra:?}: the pauses took {took} s: {r}");
        let p50 = r["latencySeconds"]["percentiles"]["p50"].as_f64().expect("a median");
        assert!(p50 < 0.02, "{extra:?}: the pause is not latency: p50 {p50} s");
        // Each answer was followed by its step's pause, in the report per step and in all.
        let paused = |of: &serde_json::Value| (number(of, "/think/pauses"), of["think"]["totalSeconds"].as_f64());
        let (a, a_total) = paused(name(&r, "GET /a"));
        let (b, b_total) = paused(name(&r, "GET /b"));
        assert_eq!((a, b), (6, 6), "{extra:?}: {r}");
        let (a_total, b_total) = (a_total.expect("a total"), b_total.expect("a total"));
        assert!((a_total - 0.6).abs() < 1e-6, "{extra:?}: six fixed pauses of 100 ms: {a_total}");
        assert!((0.12..=0.24).contains(&b_total), "{extra:?}: six of 20 to 40 ms: {b_total}");
        assert_eq!(number(&r, "/think/pauses"), 12, "{extra:?}: {r}");
        // An iteration's duration has the pause between its steps, not the one after its last.
        let read = scenario_entry(&r, "read");
        assert_eq!(iterations(read), (6, 6, 0), "{extra:?}: {read}");
        assert_eq!(number(read, "/durationSeconds/count"), 6, "{extra:?}: {read}");
        let shortest = read["durationSeconds"]["min"].as_f64().expect("a shortest");
        assert!(shortest >= 0.1, "{extra:?}: an iteration took {shortest} s, less than its 100 ms pause");
    }
}

/// The login flow with both ways in redirecting: the login is posted to an old address that
/// answers 307 (the same POST and body go on to /login, whose answer the token is extracted
/// from), and the items are asked for at /go/{token}, which answers 302 with a relative
/// reference to /items/{token} (the hop carries the token in its path and the session cookie
/// from the user's jar, which the server requires).
fn redirecting_login(redirects: &str) -> String {
    let file = jar_login()
        .replacen("name = \"user\"\n", &format!("name = \"user\"\n{redirects}"), 1)
        .replacen("path = \"/login\"", "path = \"/old/login\"", 1)
        .replacen("path = \"/items/{{token}}\"", "path = \"/go/{{token}}\"", 1);
    assert!(file.contains("/old/login") && file.contains("/go/"), "{file}");
    file
}

/// The report and the server agree on a run of `redirecting_login` that followed redirects:
/// every login and every items request took one hop, counted under its step's name, and only
/// the final answers were checked and extracted from.
fn assert_followed(r: &serde_json::Value, app: &FlowApp, how: &str) {
    let counts = app.counts();
    let (issued, tokenless) = (app.count("login"), app.count("login without token"));
    assert_eq!(app.count("login moved"), ITERATIONS, "{how}: {counts:?}");
    assert_eq!(issued + tokenless, ITERATIONS, "{how}: every moved login went on: {counts:?}");
    assert_eq!((app.count("go"), app.count("items ok"), app.count("items refused")), (issued, issued, 0), "{how}");
    let login = name(r, "login");
    assert_eq!(number(login, "/requests/ok"), 2 * ITERATIONS, "{how}: {login}");
    assert_eq!(number(login, "/statusCodes/307"), ITERATIONS, "{how}: {login}");
    assert_eq!(number(login, "/redirects"), ITERATIONS, "{how}: {login}");
    assert_eq!(number(login, "/extractFailed"), tokenless, "{how}: only final answers are extracted from");
    let items = name(r, "items");
    assert_eq!(number(items, "/requests/ok"), 2 * issued, "{how}: {items}");
    assert_eq!(number(items, "/statusCodes/302"), issued, "{how}: {items}");
    assert_eq!(number(items, "/redirects"), issued, "{how}: {items}");
    assert_eq!(checks(r, "items"), [(issued, 0)], "{how}: only final answers are checked");
    assert_eq!(number(r, "/redirects"), ITERATIONS + issued, "{how}: {r}");
    assert_eq!(number(r, "/abandoned"), tokenless, "{how}: {r}");
    assert_eq!(number(r, "/requests/ok"), 2 * ITERATIONS + 3 * issued, "{how}: {r}");
}

#[test]
fn followed_redirects_hop_with_the_method_the_status_asks_for_and_their_steps_cookies_over_http1_h2c_and_workers() {
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let file = redirecting_login("redirects = \"follow\"\n");
    for extra in [&[][..], &["--http2", "-p", "4"][..], &["--workers", &list][..]] {
        let app = Arc::new(FlowApp::new().without_token_every(7));
        let server = TestServer::start(Behavior::ok(10).app(app.clone()));
        let (_dir, path) = scenario_file("redirects.toml", server.url().trim_end_matches('/'), &file);
        let out = run(&path, extra);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        assert_followed(&support::json_report(&out), &app, &format!("{extra:?}"));
    }
}

#[test]
fn followed_redirects_hop_over_http3() {
    let app = Arc::new(FlowApp::new().without_token_every(7));
    let server = H3TestServer::start(H3Options { app: Some(app.clone()), ..Default::default() });
    let file = redirecting_login("redirects = \"follow\"\n");
    let (dir, path) = scenario_file("redirects.toml", server.url().trim_end_matches('/'), &file);
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &server.cert().ca_pem).unwrap();
    let out = run(&path, &["--http3", "-p", "4", "--cacert", ca.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_followed(&support::json_report(&out), &app, "h3");
}

#[test]
fn a_redirect_not_followed_is_the_steps_answer_and_with_redirects_error_a_failed_check_that_ends_the_iteration() {
    for (redirects, no_redirect_check) in [("", false), ("redirects = \"error\"\n", true)] {
        let app = Arc::new(FlowApp::new());
        let server = TestServer::start(Behavior::ok(10).app(app.clone()));
        let (_dir, path) =
            scenario_file("redirects.toml", server.url().trim_end_matches('/'), &redirecting_login(redirects));
        let out = run(&path, &[]);
        assert!(out.status.success(), "{redirects}: {}", describe_output(&out));
        let r = support::json_report(&out);
        assert_eq!((app.count("login moved"), app.count("login")), (ITERATIONS, 0), "{redirects}: {:?}", app.counts());
        let login = name(&r, "login");
        assert_eq!(number(login, "/statusCodes/307"), ITERATIONS, "{redirects}: {login}");
        assert_eq!(number(login, "/redirects"), 0, "{redirects}: {login}");
        // The 307 has no token to extract: every iteration ends at its login, once.
        assert_eq!(number(login, "/extractFailed"), ITERATIONS, "{redirects}: {login}");
        assert_eq!(number(&r, "/abandoned"), ITERATIONS, "{redirects}: {r}");
        let expected: &[(u64, u64)] = if no_redirect_check { &[(0, ITERATIONS)] } else { &[] };
        let got = login["checks"].as_array().map_or(0, Vec::len);
        assert_eq!(got, expected.len(), "{redirects}: {login}");
        if no_redirect_check {
            assert_eq!(checks(&r, "login"), expected, "{redirects}");
            assert_eq!(login["checks"][0]["name"], "no redirect", "{login}");
        }
    }
}

#[test]
fn redirect_settings_out_of_range_or_on_a_plain_step_are_refused_with_their_place() {
    for (change, wanted) in [
        (
            "redirects = \"follow\"\nmax_redirects = 21\n",
            "max_redirects = 21: a step follows 1 to 20 redirects in a row",
        ),
        ("redirects = \"follow\"\nmax_redirects = 0\n", "max_redirects = 0"),
        ("redirects = \"sometimes\"\n", "unknown variant `sometimes`, expected one of `manual`, `follow`, `error`"),
    ] {
        let (_dir, path) = scenario_file("bad.toml", "http://127.0.0.1:9", &redirecting_login(change));
        let out = support::run_volley(["-n", "1", "--scenario", &path]);
        assert_eq!(out.status.code(), Some(2), "{change}: {}", describe_output(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("bad.toml:") && stderr.contains(wanted), "{change}: {stderr}");
    }
}
