//! `volley demo`: the built-in target on a loopback port and a short real load test against
//! it, so a first run shows a full report with no other setup.

use clap::Parser;

use crate::cli::Cli;
use crate::error::CliError;
use crate::run_and_report;

pub(crate) fn run() -> Result<(), CliError> {
    let config =
        volley_serve::ServeConfig { addr: "127.0.0.1:0".parse().expect("literal address"), ..Default::default() };
    let server = volley_serve::Server::start(config).map_err(|e| CliError::Serve(e.to_string()))?;
    let url = format!("http://{}/", server.local_addr());
    eprintln!("volley demo: built-in server on {url}; 2 s of load with 32 connections");
    // The same flags a user would type, so the demo shares every default of a real run.
    let cli = Cli::try_parse_from(["volley", "-z", "2s", "-c", "32", &url])
        .map_err(|e| CliError::Usage(format!("demo arguments: {e}")))?;
    let report = run_and_report(&cli.load)?;
    let served = server.requests();
    let counted = report.stats.counters.ok;
    eprintln!("volley demo: the server counted {served} responses; the report counts {counted} ok");
    report.outcome()
}
