//! HTTP/3 through loss and reordering: the built binary against the in-test quinn + h3 server
//! through the UDP impairment proxy of tests/support/impair.rs, which drops 2% of datagrams in
//! each direction and reorders 2% (tc netem is not available here). QUIC repairs what is lost,
//! and volley must still count every request exactly once: an `-n` run's ok is its -n, and
//! the server answered exactly that many.

use crate::support;

use std::time::Duration;

use support::h3_server::{H3Options, H3TestServer};
use support::impair::{ImpairProxy, Impairment};
use support::{json_report, number, run_volley_timeout};

/// Shapes of -n runs: connections, streams per connection, threads, requests.
const SHAPES: [(u32, u32, u32, u64); 3] = [(1, 1, 1, 300), (4, 8, 2, 2000), (2, 32, 1, 2000)];

#[test]
fn n_runs_through_loss_and_reordering_are_answered_exactly_as_often_as_the_server_counts() {
    let server = H3TestServer::start(H3Options::default());
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().write_ca(dir.path());
    let ca = ca.to_str().unwrap();
    for (i, (c, p, t, n)) in SHAPES.into_iter().enumerate() {
        let proxy = ImpairProxy::start(server.addr(), Impairment { seed: 7 + i as u64, ..Impairment::default() });
        let before = server.requests();
        let (c, p, t, n_arg) = (c.to_string(), p.to_string(), t.to_string(), n.to_string());
        let args = ["--http3", "-c", &c, "-p", &p, "-t", &t, "-n", &n_arg, "--cacert", ca, "-j", &proxy.url()];
        let out = run_volley_timeout(args, Duration::from_secs(60));
        let r = json_report(&out);
        let shape = format!("-c {c} -p {p} -t {t} -n {n}");
        assert_eq!(number(&r, "/requests/ok"), n, "{shape}: {r}");
        assert_eq!(number(&r, "/requests/errors"), 0, "{shape}: {r}");
        assert_eq!(server.requests() - before, n, "{shape}: the server's count");
        let counts = proxy.counts();
        for (way, lane) in [("to the server", &counts.to_server), ("to volley", &counts.to_client)] {
            assert!(lane.dropped() > 0, "{shape}: nothing dropped {way}: {counts:?}");
            assert!(lane.reordered() > 0, "{shape}: nothing reordered {way}: {counts:?}");
        }
        assert_eq!(counts.clients.load(std::sync::atomic::Ordering::SeqCst), c.parse::<u64>().unwrap(), "{shape}");
    }
}

#[test]
fn a_timed_run_through_loss_keeps_ok_within_what_the_server_saw_and_ok_plus_aborted() {
    let server = H3TestServer::start(H3Options::default());
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().write_ca(dir.path());
    let proxy = ImpairProxy::start(server.addr(), Impairment::default());
    let args = ["--http3", "-c", "4", "-p", "16", "-z", "1s", "--cacert", ca.to_str().unwrap(), "-j", &proxy.url()];
    let out = run_volley_timeout(args, Duration::from_secs(30));
    let r = json_report(&out);
    let (ok, aborted) = (number(&r, "/requests/ok"), number(&r, "/requests/aborted"));
    assert_eq!(number(&r, "/requests/errors"), 0, "{r}");
    assert!(ok > 500, "{r}");
    // What was in flight at the end may still reach the server, late through the proxy.
    std::thread::sleep(Duration::from_millis(300));
    let seen = server.requests();
    assert!(ok <= seen && seen <= ok + aborted, "server saw {seen}; ok {ok}, aborted {aborted}");
    assert!(proxy.counts().to_server.dropped() > 0 && proxy.counts().to_client.dropped() > 0);
}
