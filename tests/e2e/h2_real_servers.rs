//! End to end: `volley --http2` against three independent HTTP/2 servers from Debian packages
//! (nginx, lighttpd, h2o; see tests/support/h2_servers.rs), over h2c and TLS, each report checked
//! against the server's own access log: nginx sending GOAWAY after a few requests, and every
//! server sending responses whose 48 KiB of headers need CONTINUATION frames.

use crate::support;

use std::time::Duration;

use support::h2_servers::{H2Options, H2Server, start_each};
use support::{Nginx, json_report, number, run_volley_timeout};

fn volley(server: &dyn H2Server, args: &[&str], url: &str) -> serde_json::Value {
    let mut all = vec!["--http2", "-t", "1", "-j"];
    all.extend_from_slice(args);
    all.push(url);
    let out = run_volley_timeout(&all, Duration::from_secs(60));
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/errors"), 0, "{}: {r}\n{}", server.name(), server.error_log());
    r
}

/// Every logged request was HTTP/2.
fn assert_all_http2(server: &dyn H2Server) {
    for line in server.log_lines() {
        assert!(line.contains(" HTTP/2"), "{}: not HTTP/2: {line}", server.name());
    }
}

#[test]
fn every_server_counts_exactly_what_volley_reports_over_h2c_and_tls() {
    for server in start_each(&H2Options::both()) {
        let name = server.name();
        let r = volley(&*server, &["-n", "3000", "-c", "4", "-p", "16"], &server.h2c_url());
        assert_eq!(number(&r, "/requests/ok"), 3000, "{name}: {r}");
        assert_eq!(server.settled_requests(), 3000, "{name}");
        // lighttpd allows 8 streams per connection: fewer than asked, and the report says so.
        if let Some(limit) = r["streamLimit"].as_u64() {
            assert!(limit < 16, "{name}: {r}");
            assert!(r["warnings"].to_string().contains(&format!("allows {limit} streams")), "{name}: {r}");
        }

        let ca = server.cert().expect("a TLS listener").write_ca(server.dir());
        let r = volley(
            &*server,
            &["-n", "2000", "-c", "3", "-p", "8", "--cacert", ca.to_str().unwrap()],
            &server.https_url(),
        );
        assert_eq!(number(&r, "/requests/ok"), 2000, "{name}: {r}");
        assert_eq!(number(&r, "/connectionsMade"), 3, "{name}: {r}");
        assert_eq!(server.settled_requests(), 5000, "{name}");
        assert_all_http2(&*server);
    }
}

#[test]
fn lighttpds_stream_limit_is_reported() {
    for server in start_each(&H2Options::h2c()).into_iter().filter(|s| s.name() == "lighttpd") {
        let r = volley(&*server, &["-n", "500", "-c", "2", "-p", "32"], &server.h2c_url());
        assert_eq!(number(&r, "/requests/ok"), 500, "{r}");
        assert_eq!(number(&r, "/streamLimit"), 8, "{r}");
        assert_eq!(server.settled_requests(), 500);
    }
}

#[test]
fn nginx_goaway_after_five_requests_is_followed_by_new_connections_and_an_exact_count() {
    let Some(nginx) = Nginx::start_h2(H2Options { goaway_after: Some(5), ..H2Options::h2c() }) else { return };
    // 8 streams in flight against 5 answered per connection: the rest are left unanswered by
    // each GOAWAY and must be sent again on the next connection.
    let r = volley(&nginx, &["-n", "500", "-c", "2", "-p", "8"], &nginx.h2c_url());
    assert_eq!(number(&r, "/requests/ok"), 500, "{r}");
    assert_eq!(nginx.settled_requests(), 500);
    assert!(number(&r, "/connectionsMade") >= 100, "{r}");
    assert!(number(&r, "/requests/refused") > 0, "{r}");
    assert!(r["warnings"].to_string().contains("declined"), "{r}");
}

#[test]
fn every_server_sends_48_kib_of_headers_over_continuation_and_volley_reads_them() {
    let options = H2Options { big_header_bytes: Some(48 * 1024), ..H2Options::both() };
    for server in start_each(&options) {
        let name = server.name();
        let r = volley(&*server, &["-n", "300", "-c", "2", "-p", "4"], &server.h2c_url());
        assert_eq!(number(&r, "/requests/ok"), 300, "{name}: {r}");
        assert!(number(&r, "/bytesReceived") > 300 * 48 * 1024, "{name}: {r}");
        let r = volley(&*server, &["-n", "300", "-c", "2", "-p", "4", "-k"], &server.https_url());
        assert_eq!(number(&r, "/requests/ok"), 300, "{name}: {r}");
        assert_eq!(server.settled_requests(), 600, "{name}");
    }
}
