//! `volley demo`: the whole product in one command. The built-in target and two workers on
//! loopback ports, four distributed runs across them (HTTP/1.1, then HTTP/2 on the same port,
//! then HTTP/3 on a second built-in server with a self-signed certificate, then a mix of four
//! named requests from a targets file), and for each the merged report with its per-worker
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
    // HTTP/3 needs TLS: a second server, its certificate made now (the runs take -k).
    let tls =
        volley_serve::TlsPem::self_signed(&["127.0.0.1".to_string()]).map_err(|e| CliError::Serve(e.to_string()))?;
    let config = volley_serve::ServeConfig { addr: loopback, tls: Some(tls), http3: true, ..Default::default() };
    let quic_server = volley_serve::Server::start(config).map_err(|e| CliError::Serve(e.to_string()))?;
    let quic_url = format!("https://{}/", quic_server.local_addr());
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
    eprintln!("volley demo: built-in servers on {url} and {quic_url} (HTTP/3); workers on {}", addrs.join(" and "));
    let list = addrs.join(",");
    // The mix's targets file, in the temp directory for the demo's length.
    let targets = std::env::temp_dir().join(format!("volley-demo-{}.http", std::process::id()));
    std::fs::write(&targets, DEMO_TARGETS).map_err(|e| CliError::Serve(format!("{}: {e}", targets.display())))?;
    let targets = RemovedOnDrop(targets);
    let targets_path = targets.0.to_string_lossy().into_owned();
    let parts: [(&str, &volley_serve::Server, &str, &[&str]); 4] = [
        ("HTTP/1.1, 2 s with 32 connections split between the workers", &server, &url, &["-c", "32"]),
        (
            "HTTP/2 on the same port (h2c, prior knowledge), 2 s with 8 connections × 16 streams",
            &server,
            &url,
            &["-c", "8", "--http2", "-p", "16"],
        ),
        (
            "HTTP/3 (QUIC, self-signed certificate, hence -k), 2 s with 8 connections × 16 streams",
            &quic_server,
            &quic_url,
            &["-c", "8", "--http3", "-p", "16", "-k"],
        ),
        (
            "a mix of four requests under three names (--targets), 2 s with 16 connections: each name reported apart",
            &server,
            &url,
            &["-c", "16", "--targets", &targets_path],
        ),
    ];
    let mut outcome = Ok(());
    for (what, server, url, flags) in parts {
        eprintln!("\nvolley demo: {what}");
        // The same flags a user would type, so the demo shares every default of a real run.
        let mut args = vec!["volley", "-z", "2s", "--workers", &list];
        args.extend_from_slice(flags);
        args.push(url);
        let cli = Cli::try_parse_from(args).map_err(|e| CliError::Usage(format!("demo arguments: {e}")))?;
        let before = server.requests();
        let report = run_and_report(&cli.load, Some(runtime.handle()))?.report;
        let served = server.requests() - before;
        let counted = report.stats.counters.ok;
        eprintln!("volley demo: the server counted {served} responses; the report counts {counted} ok");
        if outcome.is_ok() {
            outcome = report.outcome();
        }
    }
    for worker in workers {
        let _ = runtime.block_on(worker.shutdown());
    }
    outcome
}

/// A file that goes when the demo does, however it ends.
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The demo's mix: paths only, the origin being the built-in server's URL.
const DEMO_TARGETS: &str = "\
# name: list items
GET /items?page=1

# name: list items
GET /items?page=2

# name: item
GET /items/42

# name: create item
POST /items
Content-Type: application/json
";
