//! End to end: `volley --http3` against two HTTP/3 servers from Debian packages, each with QUIC,
//! HTTP/3 and QPACK of its own (see tests/support/h3_servers.rs): caddy (quic-go) and ngtcp2's
//! example server gtlsserver (ngtcp2, nghttp3, GnuTLS). Every report is checked against what the
//! server itself counted: caddy's access log, gtlsserver's line per response.
//!
//! Without a server installed its tests say so and pass; under CI they must run (.ci/run
//! installs both).

use crate::support;

use std::time::Duration;

use support::h3_servers::{Caddy, GtlsOptions, Gtlsserver, H3Server};
use support::{describe_output, json_report, number, run_volley_timeout};

/// Runs volley `--http3` with `args` against `server`, trusting its CA; the JSON report.
fn volley(server: &dyn H3Server, args: &[&str]) -> serde_json::Value {
    let ca = server.cert().write_ca(server.dir());
    let mut all = vec!["--http3", "-j", "--cacert", ca.to_str().unwrap()];
    all.extend_from_slice(args);
    let url = server.url();
    all.push(&url);
    let out = run_volley_timeout(&all, Duration::from_secs(60));
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/errors"), 0, "{}: {r}\n{}", server.name(), server.output());
    assert_eq!(r["protocol"], "HTTP/3", "{}: {r}", server.name());
    r
}

/// The servers that are installed (a note on stderr for each that is not; under CI, a panic).
fn each_server() -> Vec<Box<dyn H3Server>> {
    let mut servers: Vec<Box<dyn H3Server>> = Vec::new();
    if let Some(caddy) = Caddy::start() {
        servers.push(Box::new(caddy));
    }
    if let Some(gtls) = Gtlsserver::start(GtlsOptions::default()) {
        servers.push(Box::new(gtls));
    }
    servers
}

#[test]
fn every_server_counts_exactly_what_an_n_run_reports() {
    for server in each_server() {
        let name = server.name();
        let mut total = 0;
        for (c, p, n) in [("1", "1", 200), ("4", "16", 3000)] {
            let r = volley(&*server, &["-c", c, "-p", p, "-t", "1", "-n", &n.to_string()]);
            total += n;
            assert_eq!(number(&r, "/requests/ok"), n, "{name} -c {c} -p {p}: {r}");
            assert_eq!(r["statusCodes"]["200"], n, "{name}: {r}");
            assert_eq!(number(&r, "/connectionsMade"), c.parse::<u64>().unwrap(), "{name}: {r}");
            assert_eq!(server.settled_requests(), total, "{name} -c {c} -p {p}");
        }
    }
}

#[test]
fn every_server_sees_between_ok_and_ok_plus_aborted_of_a_timed_run() {
    for server in each_server() {
        let name = server.name();
        let r = volley(&*server, &["-c", "4", "-p", "8", "-t", "1", "-z", "1s"]);
        let (ok, aborted) = (number(&r, "/requests/ok"), number(&r, "/requests/aborted"));
        assert!(ok > 200, "{name}: {r}");
        let seen = server.settled_requests();
        assert!(ok <= seen && seen <= ok + aborted, "{name} saw {seen}; ok {ok}, aborted {aborted}");
    }
}

#[test]
fn gtlsservers_stream_limit_below_p_is_honoured_and_reported() {
    let Some(server) = Gtlsserver::start(GtlsOptions { max_streams: Some(4), ..GtlsOptions::default() }) else {
        return;
    };
    let r = volley(&server, &["-c", "2", "-p", "32", "-n", "1000"]);
    assert_eq!(number(&r, "/requests/ok"), 1000, "{r}");
    assert_eq!(r["streamLimit"], 4, "{r}");
    assert_eq!(server.settled_requests(), 1000);
}

#[test]
fn an_n_run_stays_exact_against_gtlsserver_losing_datagrams_of_its_own() {
    // ngtcp2's own loss, 2% of what it sends and of what it receives, on top of volley's repair.
    let Some(server) = Gtlsserver::start(GtlsOptions { loss: Some(0.02), ..GtlsOptions::default() }) else {
        return;
    };
    let r = volley(&server, &["-c", "2", "-p", "8", "-n", "1000"]);
    assert_eq!(number(&r, "/requests/ok"), 1000, "{r}");
    assert_eq!(server.settled_requests(), 1000);
}

#[test]
fn request_bodies_caddy_does_not_read_are_stopped_and_an_n_run_stays_exact() {
    let Some(caddy) = Caddy::start() else { return };
    // caddy answers without reading the body, and its quic-go asks volley to stop sending it.
    let body = caddy.dir().join("body.bin");
    std::fs::write(&body, vec![b'b'; 1 << 20]).unwrap();
    let data = format!("@{}", body.display());
    let r = volley(&caddy, &["-c", "2", "-p", "4", "-n", "40", "--timeout", "5s", "-d", &data]);
    assert_eq!(number(&r, "/requests/ok"), 40, "{r}");
    assert_eq!(caddy.settled_requests(), 40);
    assert!(caddy.log_lines().iter().all(|line| line["request"]["method"] == "POST"));
    // Far less than the 40 MiB of bodies went out: each stopped body was cut short.
    assert!(number(&r, "/bytesSent") < 20 << 20, "{r}");
}

#[test]
fn a_server_that_needs_a_host_name_gets_a_hint_when_the_url_names_an_address() {
    let Some(caddy) = Caddy::start_for_host("localhost") else { return };
    let url = caddy.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let out = run_volley_timeout(
        ["--http3", "-k", "-n", "2", "-c", "1", "--connect-timeout", "3s", &url],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("alert"), "{stderr}");
    assert!(stderr.contains("no server name (SNI) was sent"), "the hint is missing: {stderr}");
    assert_eq!(caddy.requests(), 0, "{}", caddy.output());
}
