//! QUIC's own settings end to end: the built binary (and real workers) against the in-test
//! quinn + h3 server, through the UDP relay of tests/support/impair.rs (here without loss),
//! which sees every datagram volley sends. `--quic-congestion standard` must reach every
//! connection, locally and on each worker: its QUIC uses the minimum MTU of 1200 bytes, where
//! the loopback default fills datagrams of 1452, so the largest datagram the relay forwarded
//! to the server says which one ran.
//!
//! Datagrams cut short (MSG_TRUNC) are counted and reported: the relay sends volley datagrams
//! larger than its receive buffers, which `VOLLEY_UDP_RECV_BUFFER` shrinks to 4096 bytes (the
//! default buffer holds the largest datagram UDP carries, so nothing a peer sends can be cut
//! short by it, which is checked too), and the report counts exactly those it sent.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use support::h3_server::{H3Options, H3TestServer};
use support::impair::{ImpairProxy, Impairment, Oversize};
use support::{
    WorkerProcess, describe_output, free_port, json_report, number, one_error_line, run_volley, run_volley_timeout,
    run_with_timeout, volley_command,
};

/// QUIC's minimum MTU, which the standard setting keeps to; the loopback one uses 1452.
const MIN_MTU: u64 = 1200;
const LOOPBACK_MTU: u64 = 1452;

const NO_LOSS: Impairment = Impairment { seed: 1, drop_per_mille: 0, reorder_per_mille: 0, oversize: None };

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

/// A receive buffer smaller than the default's whole GRO batch, so that a datagram can be
/// larger than it: 4096 bytes, of which 4048 hold the payload.
const SMALL_BUFFER: &str = "4096";

/// Eight datagrams of 8000 bytes per connection, one before every 25th of the server's, from
/// the first: well within the datagrams of 1000 requests over two connections, so each goes
/// ahead of one volley reads.
const EIGHT_OVERSIZED: Oversize = Oversize { every: 25, len: 8000, most: 8 };

/// An -n run of `n` through a relay that sends `oversize`, with `env` set on volley (a local
/// run) or on its two real workers: the JSON report and how many datagrams the relay sent.
fn run_beside_oversized_datagrams(
    server: &H3TestServer,
    oversize: Oversize,
    env: &[(&str, &str)],
    workers: bool,
    n: u64,
) -> (serde_json::Value, u64) {
    let (_dir, ca, _) = files(server);
    let relay = ImpairProxy::start(server.addr(), Impairment { oversize: Some(oversize), ..NO_LOSS });
    let before = server.requests();
    let worker_processes: Vec<WorkerProcess> = if workers {
        (0..2)
            .map(|_| {
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
                let mut cmd = volley_command(["worker", "--listen", &addr.to_string()]);
                cmd.env_remove("VOLLEY_TOKEN").envs(env.iter().copied());
                WorkerProcess::spawn(cmd, addr, None).expect("a worker")
            })
            .collect()
    } else {
        Vec::new()
    };
    let list = worker_processes.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let n_arg = n.to_string();
    let mut args = vec!["--http3", "-c", "2", "-p", "8", "-n", &n_arg, "--cacert", ca.to_str().unwrap(), "-j"];
    if workers {
        args.extend(["--workers", &list]);
    }
    let url = relay.url();
    args.push(&url);
    let mut cmd = volley_command(&args);
    if !workers {
        cmd.envs(env.iter().copied());
    }
    let out = run_with_timeout(cmd, Duration::from_secs(60))
        .unwrap_or_else(|out| panic!("timed out: {}", describe_output(&out)));
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), n, "{r}");
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert_eq!(server.requests() - before, n, "the server's count");
    (r, relay.counts().to_client.injected())
}

#[test]
fn every_datagram_larger_than_the_receive_buffer_is_counted_as_truncated_and_the_count_stays_exact() {
    let server = H3TestServer::start(H3Options::default());
    let env = [("VOLLEY_UDP_RECV_BUFFER", SMALL_BUFFER)];
    let (r, injected) = run_beside_oversized_datagrams(&server, EIGHT_OVERSIZED, &env, false, 1000);
    assert_eq!(injected, 16, "eight for each of the two connections");
    assert_eq!(number(&r, "/truncatedDatagrams"), injected, "{r}");
    assert_eq!(number(&r, "/workers/0/truncatedDatagrams"), injected, "{r}");
}

#[test]
fn datagrams_cut_short_on_real_workers_add_up_in_the_report() {
    let server = H3TestServer::start(H3Options::default());
    let env = [("VOLLEY_UDP_RECV_BUFFER", SMALL_BUFFER)];
    let (r, injected) = run_beside_oversized_datagrams(&server, EIGHT_OVERSIZED, &env, true, 1000);
    assert_eq!(injected, 16, "eight for each of the two connections");
    assert_eq!(number(&r, "/truncatedDatagrams"), injected, "{r}");
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert_eq!(number(w, "/truncatedDatagrams"), 8, "each worker has one connection: {w}");
    }
}

#[test]
fn the_largest_datagram_a_peer_can_send_is_never_cut_short_by_the_default_buffer() {
    let server = H3TestServer::start(H3Options::default());
    // IPv4's largest UDP payload.
    let largest = Oversize { len: 65_507, ..EIGHT_OVERSIZED };
    let (r, injected) = run_beside_oversized_datagrams(&server, largest, &[], false, 1000);
    assert_eq!(injected, 16);
    assert_eq!(number(&r, "/truncatedDatagrams"), 0, "{r}");
}

#[test]
fn the_text_report_says_when_datagrams_were_cut_short_and_a_bad_buffer_size_is_one_line() {
    let server = H3TestServer::start(H3Options::default());
    let (_dir, ca, _) = files(&server);
    let relay = ImpairProxy::start(server.addr(), Impairment { oversize: Some(EIGHT_OVERSIZED), ..NO_LOSS });
    let url = relay.url();
    let args = ["--http3", "-c", "1", "-p", "8", "-n", "500", "--cacert", ca.to_str().unwrap(), &url];
    let mut cmd = volley_command(args);
    cmd.env("VOLLEY_UDP_RECV_BUFFER", SMALL_BUFFER);
    let out = run_with_timeout(cmd, Duration::from_secs(60))
        .unwrap_or_else(|out| panic!("timed out: {}", describe_output(&out)));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Truncated:    8 UDP datagrams were larger than the receive buffer and were dropped by QUIC"),
        "{text}"
    );
    let mut cmd = volley_command(args);
    cmd.env("VOLLEY_UDP_RECV_BUFFER", "100");
    let out = run_with_timeout(cmd, Duration::from_secs(60))
        .unwrap_or_else(|out| panic!("timed out: {}", describe_output(&out)));
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains("VOLLEY_UDP_RECV_BUFFER='100'") && line.contains("2048 to 65600"), "{line}");
}
