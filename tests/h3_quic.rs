//! QUIC's own settings end to end: the built binary (and real workers) against the in-test
//! quinn + h3 server, through the UDP relay of tests/support/impair.rs (here without loss),
//! which sees every datagram volley sends. `--quic-congestion standard` must reach every
//! connection, locally and on each worker: its QUIC uses the minimum MTU of 1200 bytes, where
//! the loopback default fills datagrams of 1452, so the largest datagram the relay forwarded
//! to the server says which one ran.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::h3_server::{H3Options, H3TestServer};
use support::impair::{ImpairProxy, Impairment};
use support::{WorkerProcess, json_report, number, one_error_line, run_volley, run_volley_timeout};

/// QUIC's minimum MTU, which the standard setting keeps to; the loopback one uses 1452.
const MIN_MTU: u64 = 1200;
const LOOPBACK_MTU: u64 = 1452;

const NO_LOSS: Impairment = Impairment { seed: 1, drop_per_mille: 0, reorder_per_mille: 0 };

/// The server's CA and an 8000-byte request body (so that requests fill whole datagrams),
/// written to files in a directory that lives as long as they are needed.
fn files(server: &H3TestServer) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().write_ca(dir.path());
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'b'; 8000]).unwrap();
    (dir, ca, body)
}

/// An -n run of 8000-byte POSTs through a fresh relay, with `extra` flags: its JSON report and
/// the largest datagram the relay forwarded to the server.
fn post_through_relay(server: &H3TestServer, extra: &[&str], n: u64) -> (serde_json::Value, u64) {
    let (_dir, ca, body) = files(server);
    let relay = ImpairProxy::start(server.addr(), NO_LOSS);
    let before = server.requests();
    let data = format!("@{}", body.display());
    let n_arg = n.to_string();
    let mut args = vec!["--http3", "-c", "2", "-p", "4", "-n", &n_arg, "-d", &data, "--cacert", ca.to_str().unwrap()];
    args.extend_from_slice(extra);
    let url = relay.url();
    args.extend(["-j", &url]);
    let r = json_report(&run_volley_timeout(args, Duration::from_secs(60)));
    assert_eq!(number(&r, "/requests/ok"), n, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(server.requests() - before, n, "the server's count");
    (r, relay.counts().to_server.largest())
}

#[test]
fn quic_congestion_standard_runs_every_connection_at_quics_minimum_mtu_and_the_count_stays_exact() {
    let server = H3TestServer::start(H3Options::default());
    let (r, largest) = post_through_relay(&server, &["--quic-congestion", "standard"], 400);
    assert_eq!(r["quicCongestion"], "standard", "{r}");
    assert!(largest <= MIN_MTU, "standard QUIC sent a datagram of {largest} bytes");
    // The default is the loopback setting, whose datagrams are larger: what tells them apart.
    let (r, largest) = post_through_relay(&server, &[], 400);
    assert_eq!(r["quicCongestion"], "loopback", "{r}");
    assert_eq!(largest, LOOPBACK_MTU);
}

#[test]
fn the_text_report_names_the_quic_congestion_control() {
    let server = H3TestServer::start(H3Options::default());
    let (_dir, ca, _) = files(&server);
    let out = run_volley([
        "--http3",
        "--quic-congestion",
        "standard",
        "-c",
        "1",
        "-n",
        "20",
        "--cacert",
        ca.to_str().unwrap(),
        &server.url(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Protocol:     HTTP/3, 1 stream per connection, standard congestion control"), "{text}");
    assert_eq!(server.requests(), 20);
}

#[test]
fn quic_congestion_standard_reaches_every_real_worker() {
    let server = H3TestServer::start(H3Options::default());
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let (r, largest) = post_through_relay(&server, &["--quic-congestion", "standard", "--workers", &list], 401);
    assert_eq!(r["workers"].as_array().unwrap().len(), 2, "{r}");
    for w in r["workers"].as_array().unwrap() {
        assert!(number(w, "/requests/ok") > 0, "{w}");
    }
    assert_eq!(r["quicCongestion"], "standard", "{r}");
    assert!(largest <= MIN_MTU, "a worker's QUIC sent a datagram of {largest} bytes");
}

#[test]
fn quic_congestion_without_http3_or_with_an_unknown_kind_is_a_usage_error() {
    for (args, says) in [
        (vec!["--quic-congestion", "standard", "-n", "1", "https://127.0.0.1:1/"], "--http3"),
        (vec!["--http2", "--quic-congestion", "loopback", "-n", "1", "https://127.0.0.1:1/"], "--http3"),
        (vec!["--http3", "--quic-congestion", "cubic", "-n", "1", "https://127.0.0.1:1/"], "standard"),
    ] {
        let out = run_volley(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let line = one_error_line(&out);
        assert!(line.contains("--quic-congestion") && line.contains(says), "{args:?}: {line}");
    }
}
