//! End to end: `volley --http2` against real HTTP/2 servers (hyper in the test, `volley serve`,
//! remote `volley worker`s), each report checked against what the server counted.

use crate::support;

use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{Behavior, TestCert, TestServer, WorkerProcess, json_report, number, run_volley, run_volley_timeout};
use volley_serve::{ServeConfig, Server};

#[test]
fn prior_knowledge_h2c_against_hyper_counts_every_request_once() {
    let server = TestServer::start(Behavior::ok(100));
    let out = run_volley(["--http2", "-p", "8", "-c", "4", "-t", "2", "-n", "4000", "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 4000, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(number(&r, "/statusCodes/200"), 4000, "{r}");
    assert_eq!(server.requests(), 4000);
    assert_eq!(server.responses(), 4000);
    assert_eq!(server.last_request().unwrap().version, "HTTP/2.0");
    assert_eq!(number(&r, "/connectionsMade"), 4, "{r}");
    assert_eq!(server.connections(), 4);
    assert_eq!(r["protocol"], "HTTP/2");
    assert_eq!(number(&r, "/streamsPerConnection"), 8, "{r}");
    assert_eq!(number(&r, "/latencySeconds/count"), 4000, "{r}");
    assert_eq!(number(&r, "/firstByteSeconds/count"), 4000, "{r}");
}

#[test]
fn a_request_body_and_headers_reach_the_server_over_http2() {
    let server = TestServer::start(Behavior::ok(10));
    let body = "x".repeat(100_000); // beyond the default 64 KiB stream window
    let out = run_volley([
        "--http2",
        "-p",
        "4",
        "-c",
        "2",
        "-n",
        "40",
        "-H",
        "X-Trace: abc",
        "-H",
        "Host: vhost.test",
        "-d",
        &body,
        "-j",
        &server.url(),
    ]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 40, "{r}");
    assert_eq!(server.request_body_bytes(), 40 * 100_000);
    let seen = server.last_request().unwrap();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.header("x-trace"), Some("abc"));
    assert_eq!(seen.body.len(), 100_000);
}

#[test]
fn request_bodies_beyond_tls_buffers_arrive_whole_over_h2() {
    // 200 KB per request, 4 streams at once: more plaintext in one flush than rustls buffers by
    // default.
    let server = TestServer::start_tls(Behavior::ok(10));
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    std::fs::write(&body, vec![b'y'; 200_000]).unwrap();
    let data = format!("@{}", body.display());
    let out = run_volley(["--http2", "-k", "-p", "4", "-c", "1", "-n", "12", "-d", &data, "-j", &server.url()]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 12, "{r}");
    assert_eq!(server.request_body_bytes(), 12 * 200_000);
}

#[test]
fn h2_over_tls_is_negotiated_with_alpn() {
    let server = TestServer::start_tls(Behavior::ok(100));
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().unwrap().write_ca(dir.path());
    let url = server.url().replace("127.0.0.1", "localhost");
    let out =
        run_volley(["--http2", "-p", "16", "-c", "3", "-n", "3000", "--cacert", ca.to_str().unwrap(), "-j", &url]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 3000, "{r}");
    assert_eq!(server.requests(), 3000);
    assert_eq!(server.last_request().unwrap().version, "HTTP/2.0");
}

#[test]
fn a_tls_server_without_h2_is_named_as_the_cause() {
    // A TLS server whose ALPN knows only http/1.1.
    let mut config = (*TestCert::generate().server_config()).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            let config = config.clone();
            std::thread::spawn(move || {
                tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut tls = rustls::ServerConnection::new(config).unwrap();
                while tls.is_handshaking() {
                    if tls.complete_io(&mut tcp).is_err() {
                        return;
                    }
                }
                let _ = tls.complete_io(&mut tcp);
                let _ = tcp.read(&mut [0u8; 1024]);
            });
        }
    });
    let out = run_volley_timeout(
        ["--http2", "-k", "-n", "10", "-c", "2", &format!("https://{addr}/")],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not offer HTTP/2 over TLS") && stderr.contains("http/1.1"), "{stderr}\n{stdout}");
}

#[test]
fn each_stream_has_its_own_timeout_and_the_connection_goes_on() {
    let server = TestServer::start(Behavior::ok(10).delay(Duration::from_secs(3)));
    let started = Instant::now();
    let out = run_volley_timeout(
        ["--http2", "-p", "4", "-c", "1", "-n", "8", "--timeout", "300ms", "-j", &server.url()],
        Duration::from_secs(20),
    );
    let r = json_report(&out);
    assert_eq!(number(&r, "/errors/timeout"), 8, "{r}");
    assert_eq!(number(&r, "/requests/ok"), 0, "{r}");
    assert_eq!(number(&r, "/connectionsMade"), 1, "{r}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
}

#[test]
fn a_timed_run_accounts_for_every_request_the_server_saw() {
    let server = TestServer::start(Behavior::ok(100));
    let out = run_volley(["--http2", "-p", "32", "-c", "4", "-t", "2", "-z", "1s", "-j", &server.url()]);
    let r = json_report(&out);
    let (ok, aborted, errors) =
        (number(&r, "/requests/ok"), number(&r, "/requests/aborted"), number(&r, "/requests/errors"));
    assert_eq!(errors, 0, "{r}");
    assert!(ok > 1000, "{r}");
    // Give the server a moment to count what was in flight at the end.
    std::thread::sleep(Duration::from_millis(200));
    let seen = server.requests();
    assert!(ok <= seen && seen <= ok + aborted, "server saw {seen}; ok {ok}, aborted {aborted}");
}

#[test]
fn volley_serve_answers_http2_with_prior_knowledge() {
    let server = Server::start(ServeConfig { addr: "127.0.0.1:0".parse().unwrap(), ..ServeConfig::default() }).unwrap();
    let url = format!("http://{}/", server.local_addr());
    let out = run_volley(["--http2", "-p", "10", "-c", "2", "-n", "2000", "-j", &url]);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 2000, "{r}");
    assert_eq!(server.requests(), 2000);
}

#[test]
fn http2_runs_split_across_workers_stay_exact() {
    let server = TestServer::start(Behavior::ok(10));
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let workers = format!("{},{}", a.addr(), b.addr());
    let out = run_volley_timeout(
        ["--workers", &workers, "--http2", "-p", "8", "-c", "6", "-n", "3001", "-j", &server.url()],
        Duration::from_secs(60),
    );
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 3001, "{r}");
    assert_eq!(server.requests(), 3001);
    assert_eq!(server.last_request().unwrap().version, "HTTP/2.0");
    assert_eq!(r["protocol"], "HTTP/2");
    assert_eq!(r["workers"].as_array().unwrap().len(), 2);
}

#[test]
fn usage_errors_for_http2_options_exit_2() {
    for (args, expect) in [
        (&["-p", "4"][..], "-p/--parallel needs --http2"),
        (&["--http2", "-p", "0"][..], "-p/--parallel: streams per connection must be at least 1"),
        (&["--http2", "-p", "100000"][..], "-p/--parallel: 100000 streams per connection is more than the 65536"),
        (&["--http2", "--disable-keepalive"][..], "--disable-keepalive is for HTTP/1.1"),
    ] {
        let mut all = args.to_vec();
        all.push("http://127.0.0.1:9/");
        let out = run_volley(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}
