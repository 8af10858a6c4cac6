//! End to end: the built `volley` binary loading real HTTP/1.1 and HTTPS servers on loopback,
//! checked against what the servers themselves counted.

use crate::support;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{
    Behavior, RawMode, TestServer, VOLLEY_TIMEOUT, describe_output, json_report, number, run_volley, run_with_timeout,
    volley_command,
};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Bad input and failed runs say so in exactly one line on stderr.
fn assert_one_error_line(out: &std::process::Output, contains: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "expected failure, got success; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {err:?}");
    assert!(lines[0].starts_with("volley: error: "), "{err}");
    assert!(lines[0].contains(contains), "expected '{contains}' in: {err}");
}

#[test]
fn n_requests_reach_the_server_exactly_n_times() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run_volley(["-n", "1000", "-c", "10", "-t", "2", "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/total"), 1000);
    assert_eq!(number(&r, "/requests/ok"), 1000);
    assert_eq!(number(&r, "/requests/errors"), 0);
    assert_eq!(number(&r, "/statusCodes/200"), 1000);
    assert_eq!(number(&r, "/latencySeconds/count"), 1000);
    assert_eq!(server.requests(), 1000);
    assert_eq!(server.responses(), 1000);
    // Keep-alive: one connection per client connection, no more.
    assert_eq!(server.connections(), 10);
    assert_eq!(number(&r, "/connectionsMade"), 10);
}

#[test]
fn a_duration_run_stops_at_its_deadline_and_accounts_for_every_request_the_server_saw() {
    let server = TestServer::start(Behavior::ok(100).delay(Duration::from_millis(2)));
    let started = Instant::now();
    let out = run_volley(["-z", "1s", "-c", "8", "-t", "1", "-j", &server.url()]);
    let took = started.elapsed();
    let r = json_report(&out);
    let secs = r["durationSeconds"].as_f64().unwrap();
    assert!((0.95..1.5).contains(&secs), "duration {secs}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(number(&r, "/requests/errors"), 0);
    let ok = number(&r, "/requests/ok");
    let aborted = number(&r, "/requests/aborted");
    assert!(ok > 100, "only {ok} ok");
    // Every request the server saw is in the report: answered ones as ok, the rest as aborted
    // (an aborted request may still have been in a socket buffer, unseen, when the run ended).
    let seen = server.requests();
    assert!((ok..=ok + aborted).contains(&seen), "server saw {seen}, report: {ok} ok + {aborted} aborted");
    assert!(aborted <= 8, "more aborted ({aborted}) than connections");
}

#[test]
fn chunked_and_large_bodies_are_read_to_their_end() {
    let server = TestServer::start(Behavior::ok(50_000).chunked(1000));
    let out = run_volley(["-n", "200", "-c", "4", "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 200);
    assert!(number(&r, "/bytesReceived") > 200 * 50_000);
    assert_eq!(server.responses(), 200);
}

#[test]
fn a_server_closing_every_third_response_is_followed_by_reconnects_without_errors() {
    let server = TestServer::start(Behavior::ok(14).close_every(3));
    let out = run_volley(["-n", "300", "-c", "4", "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 300);
    assert_eq!(number(&r, "/requests/errors"), 0);
    assert_eq!(server.requests(), 300);
    assert!(server.connections() >= 100, "{} connections", server.connections());
}

#[test]
fn disable_keepalive_opens_one_connection_per_request() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run_volley(["-n", "100", "-c", "4", "--disable-keepalive", "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 100);
    assert_eq!(server.connections(), 100);
    assert_eq!(number(&r, "/connectionsMade"), 100);
    assert_eq!(server.last_request().unwrap().header("connection"), Some("close"));
}

#[test]
fn method_headers_and_body_arrive_as_given() {
    let server = TestServer::start(Behavior::ok(2));
    let out = run_volley([
        "-n",
        "20",
        "-c",
        "2",
        "-m",
        "PUT",
        "-H",
        "X-Volley-Test: yes",
        "-H",
        "Host: example.test",
        "-d",
        "hello body",
        "-j",
        &server.url(),
    ]);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 20);
    let seen = server.last_request().unwrap();
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.header("x-volley-test"), Some("yes"));
    assert_eq!(seen.header("host"), Some("example.test"));
    assert_eq!(seen.body, b"hello body");
    assert_eq!(server.methods().get("PUT"), Some(&20));
    assert_eq!(server.request_body_bytes(), 20 * 10);
}

#[test]
fn a_request_carries_no_field_volley_adds_of_its_own() {
    // No User-Agent or Accept: the server would read them on every request, and the user did
    // not ask for them. HTTP/1.1 needs Host; HTTP/2 carries the authority as a pseudo-header.
    let server = TestServer::start(Behavior::ok(2));
    for (protocol, want) in [(None, vec!["host"]), (Some("--http2"), vec![])] {
        let mut args = vec!["-n", "3", "-c", "1", "-j"];
        args.extend(protocol);
        let out = run_volley(args.iter().copied().chain([server.url().as_str()]));
        assert_eq!(number(&json_report(&out), "/requests/ok"), 3, "{}", describe_output(&out));
        let seen = server.last_request().unwrap();
        let names: Vec<&str> = seen.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, want, "{protocol:?}: {:?}", seen.headers);
    }
    // What the user gives is sent as given.
    let out = run_volley(["-n", "1", "-H", "User-Agent: probe/1", "-j", &server.url()]);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 1, "{}", describe_output(&out));
    assert_eq!(server.last_request().unwrap().header("user-agent"), Some("probe/1"));
}

#[test]
fn data_comes_from_a_file_or_stdin_and_implies_post() {
    let server = TestServer::start(Behavior::ok(2));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.json");
    std::fs::write(&file, "{\"a\":\n1}\r\n").unwrap();
    let out = run_volley(["-n", "5", "-c", "1", "-d", &format!("@{}", file.display()), "-j", &server.url()]);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 5);
    let seen = server.last_request().unwrap();
    assert_eq!(seen.method, "POST");
    // curl's -d strips CR and LF from files.
    assert_eq!(seen.body, b"{\"a\":1}");

    let mut child = volley_command(["-n", "3", "-c", "1", "-d", "@-", "-j", &server.url()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"from stdin\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(number(&json_report(&out), "/requests/ok"), 3);
    assert_eq!(server.last_request().unwrap().body, b"from stdin");
}

#[test]
fn status_codes_are_counted_per_code_and_early_hints_are_not_a_status() {
    let server = TestServer::start(Behavior::ok(3).status(503));
    let r = json_report(&run_volley(["-n", "50", "-c", "5", "-j", &server.url()]));
    assert_eq!(number(&r, "/statusCodes/503"), 50);
    assert_eq!(number(&r, "/requests/ok"), 50);

    let hints = TestServer::start_raw(RawMode::EarlyHints { body_len: 10 });
    let r = json_report(&run_volley(["-n", "50", "-c", "5", "-j", &hints.url()]));
    assert_eq!(number(&r, "/statusCodes/200"), 50);
    assert_eq!(r["statusCodes"].as_object().unwrap().len(), 1, "{}", r["statusCodes"]);
    assert_eq!(hints.responses(), 50);
}

#[test]
fn https_request_bodies_beyond_64_kib_arrive_whole() {
    // rustls buffers 64 KiB of records by default; more must not be lost.
    let server = TestServer::start_tls(Behavior::ok(10));
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    std::fs::write(&body, vec![b'z'; 200_000]).unwrap();
    let data = format!("@{}", body.display());
    let out = run_volley(["-k", "-n", "5", "-c", "1", "-d", &data, "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 5, "{r}");
    assert_eq!(server.request_body_bytes(), 5 * 200_000);
}

#[test]
fn https_is_verified_against_cacert_and_counted() {
    let server = TestServer::start_tls(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().unwrap().write_ca(dir.path());
    let url = server.url().replace("127.0.0.1", "localhost");
    let out = run_volley(["-n", "300", "-c", "6", "--cacert", ca.to_str().unwrap(), "-j", &url]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 300);
    assert_eq!(server.requests(), 300);
    assert_eq!(number(&r, "/connectSeconds/count"), 6);
}

#[test]
fn the_bytes_reported_sent_are_the_bytes_the_server_read_over_tcp_and_over_tls() {
    // A small request leaves in a send that posts no completion, so its bytes are counted
    // when it is queued; over TLS those are its records, and the handshakes count too.
    for server in [TestServer::start(Behavior::ok(14)), TestServer::start_tls(Behavior::ok(14))] {
        let out = run_volley(["-k", "-n", "3000", "-c", "8", "-j", &server.url()]);
        let r = json_report(&out);
        assert_eq!(number(&r, "/requests/ok"), 3000, "{r}");
        assert_eq!(server.requests(), 3000);
        assert_eq!(number(&r, "/bytesSent"), server.wire_bytes_received(), "{}: {r}", server.url());
    }
}

#[test]
fn https_with_an_unknown_issuer_fails_as_tls_errors_unless_insecure() {
    let server = TestServer::start_tls(Behavior::ok(14));
    let out = run_volley(["-n", "10", "-c", "2", "-j", &server.url()]);
    assert_one_error_line(&out, "tls");
    let r = json_report(&out);
    assert_eq!(number(&r, "/errors/tls"), 2, "{r}");
    assert_eq!(server.requests(), 0);

    let out = run_volley(["-n", "10", "-c", "2", "-k", "-j", &server.url()]);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 10);
    assert_eq!(server.requests(), 10);
}

#[test]
fn a_silent_server_gives_timeout_errors_after_the_request_timeout() {
    let server = TestServer::start_raw(RawMode::Silent);
    let started = Instant::now();
    let out = run_volley(["-n", "4", "-c", "2", "--timeout", "300ms", "-j", &server.url()]);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_one_error_line(&out, "timeout");
    assert_eq!(number(&json_report(&out), "/errors/timeout"), 4);
    assert_eq!(server.requests(), 4);
}

#[test]
fn a_timed_run_that_no_response_ever_answered_exits_1_and_still_prints_its_report() {
    let server = TestServer::start_raw(RawMode::Silent);
    for json in [true, false] {
        let mut args = vec!["-z", "1s", "-c", "2", "-t", "1"];
        if json {
            args.push("-j");
        }
        let url = server.url();
        args.push(&url);
        let out = run_volley(args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert_one_error_line(&out, "no request succeeded: all 2 were still waiting");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if json {
            let r = json_report(&out);
            assert_eq!(number(&r, "/requests/ok"), 0, "{r}");
            assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
            assert_eq!(number(&r, "/requests/aborted"), 2, "{r}");
        } else {
            assert!(stdout.contains("Requests:") && stdout.contains("in flight when the run stopped"), "{stdout}");
        }
    }
    // Each run's two requests reached the server, which never answered.
    assert_eq!((server.requests(), server.responses()), (4, 0));
}

#[test]
fn broken_responses_are_counted_by_kind() {
    let garbage = TestServer::start_raw(RawMode::Garbage);
    let out = run_volley(["-n", "10", "-c", "2", "-j", &garbage.url()]);
    assert_one_error_line(&out, "protocol");
    assert_eq!(number(&json_report(&out), "/errors/protocol"), 10);

    let truncated = TestServer::start_raw(RawMode::Truncated { content_length: 100, sent: 10 });
    let out = run_volley(["-n", "10", "-c", "2", "-j", &truncated.url()]);
    assert_one_error_line(&out, "reset");
    assert_eq!(number(&json_report(&out), "/errors/reset"), 10);

    let huge = TestServer::start_raw(RawMode::HugeHeaders { size: 100_000 });
    let out = run_volley(["-n", "4", "-c", "2", "-j", &huge.url()]);
    assert_one_error_line(&out, "larger than");
    assert_eq!(number(&json_report(&out), "/errors/protocol"), 4);
}

#[test]
fn a_refused_port_is_a_connect_error_in_one_line() {
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let started = Instant::now();
    let out = run_volley(["-n", "100", "-c", "5", "-j", &url]);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_one_error_line(&out, "could not connect");
    let r = json_report(&out);
    assert!(number(&r, "/requests/connectErrors") >= 5);
    assert_eq!(number(&r, "/requests/ok"), 0);
}

#[test]
fn a_server_that_never_accepts_is_bounded_by_the_connect_timeout() {
    // A listener with a backlog of 0 that never accepts: once its queue is full the kernel
    // drops further SYNs, so those connects hang until our timeout.
    let listener = support::unaccepting_listener();
    let url = format!("http://{}/", listener.addr());
    let started = Instant::now();
    let out = run_volley(["-n", "20", "-c", "10", "--connect-timeout", "300ms", "--timeout", "1s", "-j", &url]);
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(!out.status.success());
    let r = json_report(&out);
    assert!(number(&r, "/requests/connectErrors") > 0, "{r}");
    assert!(r["errorSamples"]["connect"].as_str().unwrap().contains("timed out"), "{r}");
    assert_eq!(number(&r, "/requests/ok"), 0);
}

#[test]
fn durations_beyond_a_year_are_usage_errors_naming_the_bound_instead_of_panics() {
    let server = TestServer::start(Behavior::ok(14));
    let url = server.url();
    let cases: [&[&str]; 7] = [
        &["--timeout", "1e30"],
        &["--connect-timeout", "1e20"],
        &["-z", "1e19"],
        &["-z", "8761h"],
        &["--timeout", "99999999999999999999h"],
        &["--connect-timeout", "9000000000000000000s9000000000000000000s"],
        &["-z", "31536000.5"],
    ];
    for args in cases {
        let out = run_volley(args.iter().copied().chain([url.as_str()]));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out, "longer than the longest allowed, 365 days");
        assert!(stderr(&out).contains(args[0]), "{args:?}: the flag is not named: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
    }
    assert_eq!(server.connections(), 0, "a refused duration still loaded the server");
}

#[test]
fn bad_input_gets_one_line_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let missing_arg = format!("@{}", missing.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["not a url"], "invalid URL"),
        (vec!["ftp://127.0.0.1/"], "unsupported scheme"),
        (vec!["http://host.invalid/"], "cannot resolve"),
        (vec!["http://127.0.0.1:99999/"], "bad port"),
        (vec!["-c", "0", "http://127.0.0.1:1/"], "connections"),
        (vec!["-n", "0", "http://127.0.0.1:1/"], "requests"),
        (vec!["-t", "0", "http://127.0.0.1:1/"], "threads"),
        (vec!["-d", &missing_arg, "http://127.0.0.1:1/"], "missing.json"),
        (vec!["-n", "5", "-z", "1s", "http://127.0.0.1:1/"], "cannot be used with"),
        (vec!["-z", "soon", "http://127.0.0.1:1/"], "invalid duration"),
        (vec!["-H", "no colon", "http://127.0.0.1:1/"], "Name: Value"),
        (vec!["--http3", "http://127.0.0.1:1/"], "--http3 needs an https:// URL"),
        (vec!["--http2", "--http3", "https://127.0.0.1:1/"], "cannot be used together"),
        (vec!["-p", "8", "http://127.0.0.1:1/"], "needs --http2"),
        (vec!["--cacert", "/nonexistent/ca.pem", "https://127.0.0.1:1/"], "cacert"),
        (vec![], "required"),
    ];
    for (args, expect) in cases {
        let out = run_volley(&args);
        assert_one_error_line(&out, expect);
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
    }
}

#[test]
fn ctrl_c_prints_the_report_of_what_was_done() {
    let server = TestServer::start(Behavior::ok(14).delay(Duration::from_millis(1)));
    let child = volley_command(["-z", "30s", "-c", "4", "-j", &server.url()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "stopping took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(130));
    let r = json_report(&out);
    assert_eq!(r["interrupted"], Value::Bool(true));
    let ok = number(&r, "/requests/ok");
    let aborted = number(&r, "/requests/aborted");
    assert!(ok > 10);
    let seen = server.requests();
    assert!((ok..=ok + aborted).contains(&seen), "server saw {seen}, report: {ok} ok + {aborted} aborted: {r}");
}

#[test]
fn the_text_report_has_shb_layout() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run_volley(["-n", "100", "-c", "2", &server.url()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "URL:          ",
        "Protocol:     HTTP/1.1",
        "Threads:      ",
        "Connections:  2",
        "Requests:     100 (100 ok, 0 errors, of which 0 connect) in ",
        "Requests/sec: ",
        "Transfer:     recv ",
        "  [200] 100",
        "Latency (ms):",
        "Latency distribution:",
        "  99.99% in ",
    ] {
        assert!(text.contains(line), "missing '{line}' in:\n{text}");
    }
}

#[test]
fn histograms_in_the_json_decode_to_the_reported_counts() {
    let server = TestServer::start(Behavior::ok(14));
    let r = json_report(&run_volley(["-n", "500", "-c", "5", "-j", &server.url()]));
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(r["histograms"]["latency"].as_str().unwrap()).unwrap();
    let h = volley_engine::decode_histogram(&bytes).unwrap();
    assert_eq!(h.len(), 500);
    let p99 = r["latencySeconds"]["percentiles"]["p99"].as_f64().unwrap();
    assert_eq!(h.value_at_quantile(0.99) as f64 / 1e9, p99);
}

#[test]
fn nginx_counts_the_same_requests_as_the_report() {
    let Some(nginx) = support::Nginx::start() else { return };
    let r = json_report(&run_volley(["-n", "2000", "-c", "20", "-t", "2", "-j", &nginx.url()]));
    assert_eq!(number(&r, "/requests/ok"), 2000);
    assert_eq!(number(&r, "/statusCodes/200"), 2000);
    assert_eq!(nginx.settled_requests(), 2000);
}

#[test]
fn nginx_over_https_counts_the_same_requests_as_the_report() {
    let Some(nginx) = support::Nginx::start_with(support::NginxOptions { tls: true, ..Default::default() }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = nginx.cert().unwrap().write_ca(dir.path());
    let url = nginx.https_url().replace("127.0.0.1", "localhost");
    let r = json_report(&run_volley(["-n", "500", "-c", "10", "--cacert", ca.to_str().unwrap(), "-j", &url]));
    assert_eq!(number(&r, "/requests/ok"), 500);
    assert_eq!(nginx.settled_requests(), 500);
}

#[test]
fn demo_runs_a_real_distributed_load_test_against_the_built_in_server() {
    let out = run_volley(["demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(text.contains("Requests/sec:"), "{text}");
    assert!(text.contains("[200] "), "{text}");
    // Two workers, each with its share of the 32 connections and some requests of its own.
    let workers: Vec<&str> =
        text.lines().skip_while(|l| *l != "Workers:").skip(1).take_while(|l| l.starts_with("  ")).collect();
    assert_eq!(workers.len(), 2, "{text}");
    for line in workers {
        assert!(line.contains(" 16 conns ") && !line.contains(" 0 requests"), "{line}");
    }
    assert!(text.contains("Start skew:"), "{text}");
    // Then the same over HTTP/2 and HTTP/3.
    assert!(text.contains("Protocol:     HTTP/2, 16 streams per connection"), "{text}");
    assert!(text.contains("Protocol:     HTTP/3, 16 streams per connection"), "{text}");
    // The demo compares each report with the server's own count on stderr.
    let err = stderr(&out);
    let said = |what: &str, nth: usize| -> u64 {
        let at = err.match_indices(what).nth(nth).unwrap_or_else(|| panic!("no '{what}' #{nth} in {err}")).0;
        err[at + what.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    for part in 0..3 {
        let (served, ok) = (said("the server counted ", part), said("the report counts ", part));
        assert!(ok > 0 && ok <= served, "{err}");
    }
}

/// This process's limit on open files: (soft, hard).
fn open_file_limit() -> (u64, u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    (limit.rlim_cur, limit.rlim_max)
}

/// `volley ARGS` started with RLIMIT_NOFILE set to (soft, hard), run within the usual timeout.
fn run_volley_with_file_limit(soft: u64, hard: u64, args: &[&str]) -> std::process::Output {
    let mut cmd = volley_command(args);
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: setrlimit is async-signal-safe and touches only the child being started.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    run_with_timeout(cmd, VOLLEY_TIMEOUT)
        .unwrap_or_else(|out| panic!("volley {args:?} hung\n{}", describe_output(&out)))
}

#[test]
fn five_thousand_connections_on_one_thread_all_run_and_every_request_reaches_the_server() {
    // The server in this process holds 5000 connections too; volley raises its own limit.
    let needed = 5000 + 1000;
    let (soft, hard) = open_file_limit();
    if hard < needed {
        eprintln!("skipped: 5000 connections need {needed} open files here, and the hard limit is {hard}");
        return;
    }
    if soft < needed {
        let limit = libc::rlimit { rlim_cur: needed, rlim_max: hard };
        // SAFETY: setrlimit reads the struct it is given.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    }
    let server = TestServer::start(Behavior::ok(14));
    // More connections than one ring's queues could once be sized for (EINVAL beyond 4,080).
    let out = run_volley(["-n", "10000", "-c", "5000", "-t", "1", "-j", &server.url()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 10_000, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(number(&r, "/connectionsMade"), 5000, "{r}");
    assert_eq!((server.requests(), server.responses(), server.connections()), (10_000, 10_000, 5000));
}

#[test]
fn a_soft_file_limit_below_a_threads_connections_is_raised_and_a_hard_one_is_named_with_the_fix() {
    let (_, hard) = open_file_limit();
    if hard < 2000 {
        eprintln!("skipped: the hard limit on open files here is {hard}, below the 2000 this test needs");
        return;
    }
    let server = TestServer::start(Behavior::ok(14));
    let url = server.url();
    // A soft limit of 1024 (a common default) and 1500 connections on one thread: the thread's
    // file table would need more slots than the limit allows.
    let out = run_volley_with_file_limit(1024, hard, &["-n", "3000", "-c", "1500", "-t", "1", "-j", &url]);
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_eq!(number(&json_report(&out), "/requests/ok"), 3000);
    assert_eq!(server.requests(), 3000);

    let out = run_volley_with_file_limit(1024, 1024, &["-n", "3000", "-c", "1500", "-t", "1", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", describe_output(&out));
    assert_one_error_line(&out, "1500 connections on one thread need as many open files");
    assert!(stderr(&out).contains("ulimit -n") && stderr(&out).contains("-t"), "{}", stderr(&out));
    assert_eq!(server.requests(), 3000, "the refused run sent requests");
}

/// The heap stays in small pages: mimalloc asks for transparent huge pages on its arenas, and
/// where the kernel grants them (THP "madvise" or "always") a few hundred KB in use become
/// several MB of RSS, the footprint the report's peak memory is read against. The binary turns
/// THP off for itself before its first allocation.
#[test]
fn a_load_run_keeps_its_heap_out_of_transparent_huge_pages() {
    use std::process::Stdio;
    let server = TestServer::start(Behavior::ok(14));
    let mut child = volley_command(["-c", "64", "-t", "1", "-z", "2s", &server.url()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn volley");
    let proc_dir = format!("/proc/{}", child.id());
    std::thread::sleep(Duration::from_millis(1000));
    let status = std::fs::read_to_string(format!("{proc_dir}/status")).expect("read /proc/PID/status");
    let rollup = std::fs::read_to_string(format!("{proc_dir}/smaps_rollup")).expect("read smaps_rollup");
    let result = child.wait().expect("wait for volley");
    assert!(result.success(), "volley failed: {result:?}");
    let field = |text: &str, name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    assert!(server.requests() > 0, "the server saw no requests while the heap was looked at");
    assert_eq!(field(&status, "THP_enabled:"), Some(0), "THP still enabled for volley:\n{status}");
    assert_eq!(field(&rollup, "AnonHugePages:"), Some(0), "volley's memory in huge pages:\n{rollup}");
}

#[test]
fn ten_thousand_connections_on_one_thread_report_a_timed_run_within_half_a_second_of_its_end() {
    let tuning = support::NginxTuning { worker_connections: Some(12_000), ..Default::default() };
    let Some(nginx) = support::Nginx::start_tuned(support::NginxOptions::default(), tuning) else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let log = log.to_str().unwrap();
    let saved = dir.path().join("report.json");
    let output = format!("json:{}", saved.display());
    let out = support::run_volley_timeout(
        ["-t", "1", "-c", "10000", "-z", "3s", "--hlog", log, "-o", &output, "-j", &nginx.url()],
        Duration::from_secs(60),
    );
    let exited = std::time::SystemTime::now();
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = json_report(&out);
    let ok = number(&r, "/requests/ok");
    let aborted = number(&r, "/requests/aborted");
    assert!(ok > 10_000, "{r}");
    assert!(aborted <= 10_000, "{r}");
    let seen = nginx.settled_requests();
    assert!((ok..=ok + aborted).contains(&seen), "nginx saw {seen}, report: {ok} ok + {aborted} aborted");
    let secs = r["durationSeconds"].as_f64().unwrap();
    assert!((3.0..3.1).contains(&secs), "the load ran {secs} s of 3 s");
    // From the planned end (the start the log names, plus 3 s) to the report written: the
    // counts are final when every connection has begun to close, so the report does not wait
    // for 10,000 closes.
    let text = std::fs::read_to_string(dir.path().join("run.hlog")).unwrap();
    let start: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("#[StartTime: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no StartTime in {text}"));
    let planned_end = std::time::UNIX_EPOCH + Duration::from_secs_f64(start + 3.0);
    let written = std::fs::metadata(&saved).and_then(|m| m.modified()).unwrap();
    let late = written.duration_since(planned_end).unwrap_or_default();
    assert!(late < Duration::from_millis(500), "the report was written {late:?} after the planned end");
    // The process ends once the kernel has closed the sockets: on io_uring in the kernel's
    // workers, on epoll in the process itself, about 20 µs each over loopback (the server's
    // side included). One batch either way, not a wait on each connection in turn.
    let gone = exited.duration_since(planned_end).unwrap_or_default();
    assert!(gone < Duration::from_millis(1500), "the process ended {gone:?} after the planned end");
}
