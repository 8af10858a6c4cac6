//! Shared helpers for the end-to-end tests in tests/e2e and tests/timing (each has `mod support;`).
//!
//! Everything here makes real servers on loopback and real processes, so a test checks the built
//! `volley` binary against somebody else's HTTP implementation and against what that server
//! itself counted:
//!
//! - [`TestServer`]: an in-test server on its own tokio runtime. [`TestServer::start`] is hyper
//!   (HTTP/1.1, and h2c by prior knowledge on the same port) with configurable [`Behavior`]:
//!   body size, chunked bodies, a delay, `Connection: close` every K responses, and a status or
//!   a delay for every K-th request it receives (a controlled error rate and latency tail), or a
//!   status with `Retry-After` (counted per status and value by the server); a known capacity
//!   (a token bucket answering 503 beyond X requests/s, or latency growing past a knee at X).
//!   [`TestServer::start_tls`] is the same over TLS with a fresh test CA ([`TestCert`]).
//!   [`TestServer::start_raw`] speaks HTTP/1.1 by hand over TCP for what hyper will not do
//!   ([`RawMode`]: garbage, truncated bodies, huge headers, silence, 103 Early Hints).
//! - [`Nginx`]: a real nginx in a temp dir, counting requests through its access log.
//! - [`fake_worker`]: a fake `volley worker` speaking the real gRPC protocol, scripted per test,
//!   to play hostile and broken workers against the real controller.
//! - [`h2_servers`]: real lighttpd and h2o HTTP/2 servers in the same manner, and nginx started
//!   from the same [`h2_servers::H2Options`] (GOAWAY after N requests, CONTINUATION-sized headers).
//! - [`h3_server::H3TestServer`]: quinn + h3 on loopback UDP with [`h3_server::H3Options`]
//!   (GOAWAY after N requests, large response headers, a low stream limit, a delay), counting
//!   what it answered and the most requests it had in flight; [`H3Client`]: a blocking quinn +
//!   h3 client to check HTTP/3 servers with.
//! - [`h3_servers`]: real HTTP/3 servers from Debian packages, caddy (quic-go) and ngtcp2's
//!   `gtlsserver` (ngtcp2, nghttp3, GnuTLS), each counting what it answered in its own words.
//! - [`impair::ImpairProxy`]: a UDP proxy that drops and reorders a seeded share of datagrams
//!   each way, counting what it did (tc netem is not available here).
//! - [`volley_bin`], [`run_volley`]: run the built binary with a timeout, so a hang fails the
//!   test instead of hanging CI; [`json_report`] and [`number`] read its `-j` report, and
//!   every JSON report a test reads is checked against the published schema/report.schema.json
//!   ([`assert_valid_report`]); [`run_with_peak_rss`] also gives a process's peak memory.
//! - [`TestCert`]: a CA and a `localhost`/`127.0.0.1` certificate made with rcgen at test time,
//!   or a self-signed one made by the `openssl` command ([`TestCert::openssl_self_signed`]).
//! - [`send_request`], [`read_response`]: a tiny blocking HTTP/1.1 client to poke servers with.
//!
//! - [`dns::DnsServer`]: a few-line DNS server answering one name with several A records, for
//!   a resolver pointed at it (in a network namespace of the test's own).
//! - [`Prometheus`]: a real Prometheus server scraping the targets a test names, queried over
//!   its HTTP API.
//! - [`Namespaces`]: network namespaces a test makes and deletes, [`volley_in`] one of them.
//! - [`without_io_uring`]: a child's io_uring blocked by a seccomp filter, as a container
//!   runtime's default profile blocks it.
//! - [`unaccepting_listener`]: connects that hang; [`WorkerProcess`] and [`BackgroundProcess`]:
//!   daemons and controllers to signal mid-run.
//!
//! One file per concern: `volley.rs`, `certs.rs`, `client.rs`, `test_server.rs`, `nginx.rs`,
//! `h2_servers.rs`, `h3_server.rs`, `h3_servers.rs`, `h3_client.rs`, `impair.rs`, `fake_worker.rs`,
//! `listener.rs`, `netns.rs`, `processes.rs`, `prometheus.rs`. Both test binaries (tests/e2e and
//! tests/timing) include it, and each uses only part of it, hence the `allow(dead_code)`.
#![allow(dead_code)]

mod certs;
mod client;
pub mod dns;
pub mod fake_worker;
mod flow_app;
pub mod h2_servers;
mod h3_client;
pub mod h3_server;
pub mod h3_servers;
pub mod impair;
mod listener;
mod netns;
mod nginx;
mod processes;
mod prometheus;
mod seccomp;
mod test_server;
mod volley;

// Each test binary uses only some of these.
#[allow(unused_imports)]
pub use {
    certs::*, client::*, flow_app::*, h3_client::*, listener::*, netns::*, nginx::*, processes::*, prometheus::*,
    seccomp::*, test_server::*, volley::*,
};
