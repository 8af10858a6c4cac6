//! End to end: the built `volley` binary against real servers (in-test hyper, quinn + h3 and raw
//! TCP servers, nginx, lighttpd, h2o, caddy, gtlsserver) and real `volley worker` processes,
//! each run checked against what the servers themselves counted.
//!
//! One test binary, a module per subject: every binary links the whole dependency tree with
//! thin LTO, and one link instead of two dozen is most of CI's time saved. The tests whose
//! verdict is a measured time live in tests/timing, which runs them one at a time.

#[path = "../support/mod.rs"]
mod support;

mod abort_on_fail;
mod baseline;
mod checks;
mod distributed;
mod engines;
mod feeders;
mod flows;
mod gates;
mod h1_awkward_peers;
mod h1_load;
mod h2_awkward_peers;
mod h2_load;
mod h2_real_servers;
mod h2_servers_smoke;
mod h3_impaired;
mod h3_load;
mod h3_quic;
mod h3_real_servers;
mod h3_servers_smoke;
mod hlog;
mod hostile_workers;
mod html_report;
mod mix;
mod name_outputs;
mod pacing;
mod progress;
mod prometheus;
mod readme_examples;
mod report_outputs;
mod retry_after;
mod scenario_input;
mod serve;
mod sim_fleet;
mod source_addrs;
mod targets;
mod templates;
mod tls_certificates;
mod worker_limits;
