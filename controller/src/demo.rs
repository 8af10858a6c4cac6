//! `volley demo`: the built-in target on a loopback port and a short real load test against
//! it, so a first run shows a full report with no other setup.

use std::time::Duration;

use volley_engine::{Plan, RequestSpec, RunControl, Stop, Target, TlsOptions};

use crate::error::CliError;
use crate::report::Report;
use crate::{options, print_report, signals};

pub(crate) fn run() -> Result<(), CliError> {
    let config =
        volley_serve::ServeConfig { addr: "127.0.0.1:0".parse().expect("literal address"), ..Default::default() };
    let server = volley_serve::Server::start(config).map_err(|e| CliError::Serve(e.to_string()))?;
    let url = format!("http://{}/", server.local_addr());
    eprintln!("volley demo: built-in server on {url}; 2 s of load with 32 connections");
    let plan = Plan {
        target: Target::parse(&url)?,
        request: RequestSpec::new("GET", vec![], vec![]),
        connections: 32,
        threads: options::physical_cores().clamp(1, 2),
        stop: Stop::Duration(Duration::from_secs(2)),
        connect_timeout: Duration::from_secs(5),
        request_timeout: None,
        keepalive: true,
        tls: TlsOptions::default(),
    };
    let control = RunControl::new();
    signals::stop_on_ctrl_c(&control);
    let result = volley_engine::run(&plan, &control, &mut |_| {})?;
    let served = server.requests();
    let report = Report::from_run(url, result);
    print_report(&report, false);
    let counted = report.stats.counters.ok;
    eprintln!("volley demo: the server counted {served} responses; the report counts {counted} ok");
    report.outcome()
}
