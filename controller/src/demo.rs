//! `volley demo`: the whole product in one command. The built-in target and two workers on
//! loopback ports, a distributed run across them, and the merged report with its per-worker
//! breakdown.

use clap::Parser;

use crate::cli::Cli;
use crate::error::CliError;
use crate::run_and_report;

pub(crate) fn run() -> Result<(), CliError> {
    let loopback = "127.0.0.1:0".parse().expect("literal address");
    let config = volley_serve::ServeConfig { addr: loopback, ..Default::default() };
    let server = volley_serve::Server::start(config).map_err(|e| CliError::Serve(e.to_string()))?;
    let url = format!("http://{}/", server.local_addr());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| CliError::Worker(format!("cannot start a runtime: {e}")))?;
    let mut workers = Vec::new();
    for _ in 0..2 {
        let config = volley_worker::WorkerConfig::new(loopback);
        let worker = runtime.block_on(volley_worker::spawn(config)).map_err(|e| CliError::Worker(e.to_string()))?;
        workers.push(worker);
    }
    let addrs: Vec<String> = workers.iter().map(|w| w.addr().to_string()).collect();
    eprintln!(
        "volley demo: built-in server on {url}; workers on {}; 2 s of load with 32 connections split between them",
        addrs.join(" and ")
    );
    // The same flags a user would type, so the demo shares every default of a real run.
    let list = addrs.join(",");
    let cli = Cli::try_parse_from(["volley", "-z", "2s", "-c", "32", "--workers", &list, &url])
        .map_err(|e| CliError::Usage(format!("demo arguments: {e}")))?;
    let report = run_and_report(&cli.load, Some(runtime.handle()))?;
    let served = server.requests();
    let counted = report.stats.counters.ok;
    eprintln!("volley demo: the server counted {served} responses; the report counts {counted} ok");
    for worker in workers {
        let _ = runtime.block_on(worker.shutdown());
    }
    report.outcome()
}
