//! HTTP/3 end to end: the built binary (and real workers) against somebody else's HTTP/3, the
//! in-test quinn + h3 server of tests/support/h3_server.rs and `volley serve --http3`, with
//! every count checked against what the server itself answered.

use crate::support;

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::h3_server::{H3Options, H3TestServer};
use support::{TestCert, WorkerProcess, json_report, number, one_error_line, run_volley, run_volley_timeout};
use volley_serve::{ServeConfig, Server};

/// The server's CA written to a file for `--cacert`, in a directory that lives as long as it.
fn ca_file(cert: &TestCert) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = cert.write_ca(dir.path());
    (dir, path)
}

#[test]
fn an_n_run_is_answered_exactly_as_often_as_the_server_counts() {
    let server = H3TestServer::start(H3Options::default());
    let (_dir, ca) = ca_file(server.cert());
    let ca = ca.to_str().unwrap();
    let out =
        run_volley(["--http3", "-p", "8", "-c", "4", "-t", "2", "-n", "2000", "--cacert", ca, "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 2000, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(server.requests(), 2000);
    assert_eq!(server.connections(), 4);
    assert_eq!(r["protocol"], "HTTP/3");
    assert_eq!(r["statusCodes"]["200"], 2000, "{r}");
}

#[test]
fn a_timed_run_keeps_ok_within_what_the_server_saw_and_ok_plus_aborted() {
    let server = H3TestServer::start(H3Options::default());
    let (_dir, ca) = ca_file(server.cert());
    let ca = ca.to_str().unwrap();
    let out =
        run_volley(["--http3", "-p", "16", "-c", "4", "-t", "2", "-z", "1s", "--cacert", ca, "-j", &server.url()]);
    let r = json_report(&out);
    let (ok, aborted, errors) =
        (number(&r, "/requests/ok"), number(&r, "/requests/aborted"), number(&r, "/requests/errors"));
    assert_eq!(errors, 0, "{r}");
    assert!(ok > 1000, "{r}");
    // Give the server a moment to count what was in flight at the end.
    std::thread::sleep(Duration::from_millis(300));
    let seen = server.requests();
    assert!(ok <= seen && seen <= ok + aborted, "server saw {seen}; ok {ok}, aborted {aborted}");
}

#[test]
fn goaway_after_a_few_requests_sends_the_rest_again_on_new_connections_and_n_stays_exact() {
    let server = H3TestServer::start(H3Options { goaway_after: Some(5), ..H3Options::default() });
    let (_dir, ca) = ca_file(server.cert());
    let ca = ca.to_str().unwrap();
    let out = run_volley(["--http3", "-p", "4", "-c", "2", "-n", "200", "--cacert", ca, "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 200, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(server.requests(), 200);
    // At most six a connection: five, and the one its GOAWAY names, which the h3 crate's
    // server still answers (volley counts it once: it waits for the server's word on it).
    assert!(server.connections() >= 34, "{} connections", server.connections());
}

#[test]
fn large_response_headers_are_stepped_over() {
    let server = H3TestServer::start(H3Options { big_header_bytes: 20_000, ..H3Options::default() });
    let (_dir, ca) = ca_file(server.cert());
    let ca = ca.to_str().unwrap();
    let out = run_volley(["--http3", "-p", "4", "-c", "2", "-n", "100", "--cacert", ca, "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 100, "{r}");
    assert_eq!(server.requests(), 100);
    // QPACK's Huffman coding makes the 20,000 bytes of values about 15,000 on the wire.
    assert!(number(&r, "/bytesReceived") > 100 * 10_000, "{r}");
}

#[test]
fn a_counted_run_against_a_server_that_allows_no_stream_ends_with_every_request_failed() {
    let server = H3TestServer::start(H3Options { max_streams: Some(0), ..H3Options::default() });
    let (_dir, ca) = ca_file(server.cert());
    let ca = ca.to_str().unwrap();
    for (n, extra) in [("1", &["-c", "1"][..]), ("16", &["-c", "2", "-p", "4"][..])] {
        let mut args = vec!["--http3", "-n", n, "--timeout", "1s", "--connect-timeout", "1s", "--cacert", ca, "-j"];
        args.extend_from_slice(extra);
        let url = server.url();
        args.push(&url);
        let started = Instant::now();
        let out = run_volley_timeout(&args, Duration::from_secs(20));
        assert!(started.elapsed() < Duration::from_secs(10), "-n {n} took {:?}", started.elapsed());
        assert_eq!(out.status.code(), Some(1), "-n {n}: {}", support::describe_output(&out));
        let r = json_report(&out);
        assert_eq!(number(&r, "/requests/total"), n.parse::<u64>().unwrap(), "every request counted once: {r}");
        assert_eq!(number(&r, "/requests/ok"), 0, "{r}");
        let line = one_error_line(&out);
        assert!(line.contains("the server allowed no request stream on a fresh HTTP/3 connection"), "{line}");
    }
    assert_eq!(server.requests(), 0);
}

#[test]
fn a_stream_limit_below_p_is_honoured_and_reported() {
    let options = H3Options { max_streams: Some(2), delay: Duration::from_millis(5), ..H3Options::default() };
    let server = H3TestServer::start(options);
    let (_dir, ca) = ca_file(server.cert());
    let ca = ca.to_str().unwrap();
    let out = run_volley(["--http3", "-p", "8", "-c", "1", "-n", "60", "--cacert", ca, "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 60, "{r}");
    assert_eq!(server.requests(), 60);
    assert_eq!(r["streamLimit"], 2, "{r}");
    assert!(server.peak_in_flight() <= 2, "{} in flight at once", server.peak_in_flight());
    let text = run_volley(["--http3", "-p", "8", "-c", "1", "-n", "10", "--cacert", ca, &server.url()]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("allows 2 streams per connection (QUIC's MAX_STREAMS)"), "{stdout}");
}

#[test]
fn a_closed_udp_port_fails_with_one_line_long_before_the_connect_timeout() {
    // A port bound and released: nothing listens there, and the kernel answers with ICMP.
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("https://127.0.0.1:{port}/");
    let started = Instant::now();
    let out = run_volley(["--http3", "-k", "-n", "10", "--connect-timeout", "10s", &url]);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let line = one_error_line(&out);
    assert!(line.contains(&format!("nothing listens on UDP port {port}")), "{line}");
}

#[test]
fn a_port_where_nothing_answers_quic_fails_with_one_line_at_the_connect_timeout() {
    // Bound and silent: datagrams arrive and nobody answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}/", silent.local_addr().unwrap().port());
    let started = Instant::now();
    let out = run_volley(["--http3", "-k", "-n", "10", "--connect-timeout", "1s", &url]);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let line = one_error_line(&out);
    assert!(line.contains("no QUIC handshake within the connect timeout"), "{line}");
}

#[test]
fn volley_serve_http3_counts_every_request_of_an_n_run() {
    let cert = TestCert::generate();
    let config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: Some(cert.serve_tls()),
        http3: true,
        ..ServeConfig::default()
    };
    let server = Server::start(config).unwrap();
    let (_dir, ca) = ca_file(&cert);
    let url = format!("https://{}/", server.local_addr());
    let out =
        run_volley(["--http3", "-p", "10", "-c", "2", "-n", "1500", "--cacert", ca.to_str().unwrap(), "-j", &url]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 1500, "{r}");
    assert_eq!(server.requests(), 1500);
}

#[test]
fn http3_runs_split_across_three_real_workers_stay_exact() {
    let server = H3TestServer::start(H3Options::default());
    let (_dir, ca) = ca_file(server.cert());
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let out = run_volley_timeout(
        [
            "--workers",
            &list,
            "--http3",
            "-p",
            "4",
            "-c",
            "6",
            "-n",
            "3001",
            "--cacert",
            ca.to_str().unwrap(),
            "-j",
            &server.url(),
        ],
        Duration::from_secs(60),
    );
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 3001, "{r}");
    assert_eq!(server.requests(), 3001);
    assert_eq!(r["protocol"], "HTTP/3");
    assert_eq!(r["workers"].as_array().unwrap().len(), 3);
}
