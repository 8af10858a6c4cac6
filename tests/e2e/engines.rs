//! End to end: the epoll engine, and `--engine auto` where io_uring is blocked as a container's
//! default seccomp profile blocks it (`support::without_io_uring`): auto falls back to epoll
//! and says so in one line, locally and on a worker; io_uring asked for by name is refused in
//! one line; every protocol runs on epoll with exact counts against real servers. (The other
//! modules run on epoll too in CI's engine matrix, with VOLLEY_ENGINE=epoll: see .ci/run.)

use crate::support;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::h3_server::{H3Options, H3TestServer};
use support::{
    Behavior, TestServer, WorkerProcess, assert_success, controller_command, describe_output, free_port, json_report,
    number, one_error_line, run_within, volley_command, without_io_uring,
};

const RUN_TIMEOUT: Duration = Duration::from_secs(40);

/// `volley ARGS` with no engine from the test's own environment (the matrix's VOLLEY_ENGINE).
fn volley(args: &[&str]) -> Command {
    let mut cmd = volley_command(args);
    cmd.env_remove("VOLLEY_ENGINE");
    cmd
}

fn run(cmd: Command) -> Output {
    run_within(cmd, RUN_TIMEOUT)
}

fn engine(report: &Value) -> &str {
    report["ioUring"]["engine"].as_str().unwrap_or_else(|| panic!("no engine in {report}"))
}

#[test]
fn auto_falls_back_to_epoll_where_io_uring_is_blocked_says_so_in_one_line_and_counts_exactly() {
    let server = TestServer::start(Behavior::ok(14));
    let mut cmd = volley(&["-n", "2000", "-c", "8", "-t", "2", "-j", &server.url()]);
    without_io_uring(&mut cmd);
    let out = run(cmd);
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line, once for the run (not per thread): {err:?}");
    assert!(lines[0].contains("running on epoll, not io_uring") && lines[0].contains("seccomp"), "{err}");
    assert!(lines[0].contains("CPU per request"), "says what it costs: {err}");
    let r = json_report(&out);
    assert_eq!(engine(&r), "epoll");
    assert!(r["ioUring"]["fallback"].as_str().is_some_and(|why| why.contains("seccomp")), "{r}");
    assert_eq!(number(&r, "/requests/ok"), 2000);
    assert_eq!(number(&r, "/requests/errors"), 0);
    assert_eq!(server.requests(), 2000, "the server's own count");
    assert_eq!(server.connections(), 8);
}

#[test]
fn io_uring_asked_for_where_it_is_blocked_is_refused_in_one_line_saying_why() {
    let server = TestServer::start(Behavior::ok(14));
    let mut cmd = volley(&["--engine", "io-uring", "-n", "10", &server.url()]);
    without_io_uring(&mut cmd);
    let out = run(cmd);
    assert!(!out.status.success(), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(line.contains("io_uring is blocked by a seccomp filter"), "{line}");
    assert_eq!(server.requests(), 0, "nothing was sent");
}

#[test]
fn an_unknown_volley_engine_is_refused_in_one_line() {
    let mut cmd = volley(&["-n", "10", "http://127.0.0.1:9/"]);
    cmd.env("VOLLEY_ENGINE", "kqueue");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(line.contains("VOLLEY_ENGINE='kqueue'") && line.contains("auto, io-uring, epoll"), "{line}");
}

#[test]
fn http1_and_http2_with_and_without_tls_run_on_epoll_with_exact_counts() {
    let plain = TestServer::start(Behavior::ok(100));
    let tls = TestServer::start_tls(Behavior::ok(100));
    let dir = tempfile::tempdir().unwrap();
    let ca = tls.cert().unwrap().write_ca(dir.path());
    let ca = ca.to_str().unwrap();
    let cases: [(&TestServer, &[&str]); 4] = [
        (&plain, &[]),
        (&plain, &["--http2", "-p", "8"]),
        (&tls, &["--cacert", ca]),
        (&tls, &["--http2", "-p", "8", "--cacert", ca]),
    ];
    let mut expected = [0u64; 2];
    for (server, flags) in cases {
        let url = server.url().replace("127.0.0.1", "localhost");
        let mut args = vec!["--engine", "epoll", "-n", "1500", "-c", "6", "-t", "2", "-j"];
        args.extend_from_slice(flags);
        args.push(&url);
        let out = run(volley(&args));
        assert_success(&out);
        let r = json_report(&out);
        assert_eq!(engine(&r), "epoll", "{flags:?}");
        assert!(r["ioUring"]["fallback"].is_null(), "asked for, not fallen back to");
        assert_eq!(number(&r, "/requests/ok"), 1500, "{flags:?}: {r}");
        assert_eq!(number(&r, "/requests/errors"), 0, "{flags:?}");
        assert_eq!(number(&r, "/connectionsMade"), 6, "{flags:?}");
        expected[usize::from(std::ptr::eq(server, &tls))] += 1500;
        assert_eq!(plain.requests(), expected[0], "{flags:?}: the plain server's own count");
        assert_eq!(tls.requests(), expected[1], "{flags:?}: the TLS server's own count");
    }
}

#[test]
fn http3_runs_on_epoll_with_exact_counts() {
    let server = H3TestServer::start(H3Options::default());
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().write_ca(dir.path());
    let url = server.url();
    let args = ["--engine", "epoll", "--http3", "-p", "8", "-c", "4", "-t", "2", "-n", "2000"];
    let mut cmd = volley(&args);
    cmd.args(["--cacert", ca.to_str().unwrap(), "-j", &url]);
    let out = run(cmd);
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(engine(&r), "epoll");
    assert_eq!(number(&r, "/requests/ok"), 2000, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0);
    assert_eq!(server.requests(), 2000, "the server's own count");
}

#[test]
fn a_worker_where_io_uring_is_blocked_runs_its_shard_on_epoll_and_the_report_names_each_workers_engine() {
    let server = TestServer::start(Behavior::ok(14));
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut cmd = volley(&["worker", "--listen", &addr.to_string()]);
    cmd.env_remove("VOLLEY_TOKEN");
    without_io_uring(&mut cmd);
    let blocked = WorkerProcess::spawn(cmd, addr, None).expect("a worker starts without io_uring");
    let free = WorkerProcess::start(&[]);
    let list = format!("{},{}", blocked.address(), free.address());
    let mut controller = controller_command(["--workers", &list, "-c", "8", "-n", "3001", "-j", &server.url()]);
    controller.env_remove("VOLLEY_ENGINE");
    let out = run(controller);
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 3001, "{r}");
    assert_eq!(server.requests(), 3001, "the server's own count");
    let workers = r["workers"].as_array().expect("workers");
    let engines: Vec<&str> = workers.iter().map(|w| w["ioUring"]["engine"].as_str().unwrap_or("none")).collect();
    assert_eq!(engines, ["epoll", "io-uring"], "{r}");
    assert!(workers[0]["ioUring"]["fallback"].as_str().is_some_and(|why| why.contains("seccomp")), "{r}");
    // The worker said it where its operator looks, once, at start-up.
    let log = blocked.log();
    assert_eq!(log.matches("running on epoll, not io_uring").count(), 1, "{log}");
    // The text report says both, and each worker's own.
    let mut text = controller_command(["--workers", &list, "-c", "4", "-n", "100", &server.url()]);
    text.env_remove("VOLLEY_ENGINE");
    let out = run(text);
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Engine:       epoll and io-uring (per worker below)"), "{stdout}");
    let line = |address: String| stdout.lines().find(|l| l.trim_start().starts_with(&address)).map(str::to_owned);
    assert!(line(blocked.address()).is_some_and(|l| l.contains("  epoll  ")), "{stdout}");
    assert!(line(free.address()).is_some_and(|l| l.contains("  io-uring  ")), "{stdout}");
}
