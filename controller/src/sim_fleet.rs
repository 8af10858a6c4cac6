//! `volley sim-fleet` (hidden): K worker daemons served from this one process, each the real
//! gRPC service with its watchdog and the real wire encoding, whose shards are run by the
//! synthetic engine (`volley_worker::synthetic`): no load is sent. It exists to measure a
//! controller against a thousand workers on one machine (bench/fleet-scale.sh, and the
//! simulated-fleet end-to-end test).
//!
//! The workers' addresses go to a workers file (`--workers @FILE`), written whole once every
//! worker listens. When the last run under way ends, one JSON line on stdout says what the
//! synthetic engines produced, summed: the truth a controller's merged report must equal.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use volley_engine::Stats;
use volley_worker::shard::Event;
use volley_worker::{ShardRunner, WorkerConfig, synthetic};

use crate::error::CliError;
use crate::report::PERCENTILES;

/// What the command line asks of a simulated fleet.
#[derive(Debug, clap::Args)]
pub(crate) struct SimFleetArgs {
    /// How many workers to serve.
    #[arg(long, default_value_t = 100)]
    pub workers: u16,
    /// The address every worker listens on (loopback: no token is needed).
    #[arg(long, default_value = "127.0.0.1")]
    pub listen: IpAddr,
    /// Worker i listens on this port plus i [default: ports the system picks].
    #[arg(long)]
    pub port_base: Option<u16>,
    /// Where to write the workers' addresses, a HOST:PORT a line.
    #[arg(long, value_name = "FILE")]
    pub workers_file: PathBuf,
}

/// The runs under way across the simulated workers, and what they produced so far.
#[derive(Default)]
struct Tally {
    running: usize,
    finished: usize,
    /// When the first worker of the run started, for the time from the planned end to the
    /// report.
    started: Option<SystemTime>,
    sum: Stats,
}

pub(crate) fn run(args: &SimFleetArgs) -> Result<(), CliError> {
    if !args.listen.is_loopback() {
        return Err(CliError::Usage("sim-fleet: --listen must be a loopback address".into()));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("volley-sim-fleet")
        .enable_all()
        .build()
        .map_err(|e| CliError::Worker(format!("sim-fleet: cannot start its runtime: {e}")))?;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let runner = counting_runner(tally);
    runtime.block_on(async {
        let mut workers = Vec::with_capacity(usize::from(args.workers));
        for i in 0..args.workers {
            let port = args.port_base.map_or(Ok(0), |base| {
                base.checked_add(i)
                    .ok_or_else(|| CliError::Usage(format!("sim-fleet: --port-base {base} + {i} is past 65535")))
            })?;
            let mut config = WorkerConfig::new(SocketAddr::new(args.listen, port));
            config.name = Some(format!("sim-{i}"));
            config.runner = runner.clone();
            let worker = volley_worker::spawn(config).await.map_err(|e| CliError::Worker(format!("sim-fleet: {e}")))?;
            workers.push(worker);
        }
        let addresses: Vec<String> = workers.iter().map(|w| w.addr().to_string()).collect();
        write_whole(&args.workers_file, &addresses)?;
        eprintln!(
            "volley sim-fleet: {} workers listening, addresses in {}",
            workers.len(),
            args.workers_file.display()
        );
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(|e| CliError::Worker(e.to_string()))?;
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    })
}

/// The synthetic runner, with each run's Accepted and Finished counted into `tally`.
fn counting_runner(tally: Arc<Mutex<Tally>>) -> ShardRunner {
    ShardRunner::new("synthetic", move |plan, control, sink| {
        synthetic::run_synthetic_shard(plan, control, &mut |event| {
            match &event {
                Event::Accepted { .. } => tally.lock().unwrap_or_else(PoisonError::into_inner).running += 1,
                Event::Started { .. } => {
                    tally.lock().unwrap_or_else(PoisonError::into_inner).started.get_or_insert_with(SystemTime::now);
                }
                Event::Finished(outcome) => {
                    let mut t = tally.lock().unwrap_or_else(PoisonError::into_inner);
                    t.sum.merge(&outcome.stats);
                    t.finished += 1;
                    t.running = t.running.saturating_sub(1);
                    if t.running == 0 {
                        // Every shard of the controller's run is done (they all start together,
                        // so all were accepted before any finished): one line for the run.
                        println!("{}", produced(t.finished, t.started, &t.sum));
                        *t = Tally::default();
                    }
                }
                _ => {}
            }
            sink(event);
        });
    })
}

/// What the workers produced, in the report's own terms and arithmetic (latencies in seconds,
/// the same percentiles), so that a script compares them for equality.
fn produced(workers: usize, started: Option<SystemTime>, s: &Stats) -> Value {
    let c = &s.counters;
    let lat = &s.histograms.latency;
    let secs = |nanos: u64| nanos as f64 / 1e9;
    let percentiles: serde_json::Map<String, Value> =
        PERCENTILES.iter().map(|(label, q)| (format!("p{label}"), json!(secs(lat.value_at_quantile(*q))))).collect();
    json!({
        "workers": workers,
        "startedAtUnixSeconds": started.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_secs_f64()),
        "requests": { "total": c.total(), "ok": c.ok, "errors": c.errors() },
        "statusCodes": c.statuses().map(|(code, n)| (code.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "bytesSent": c.bytes_sent,
        "bytesReceived": c.bytes_received,
        "connectionsMade": c.connects,
        "latencySeconds": { "count": lat.len(), "min": secs(lat.min()), "max": secs(lat.max()), "percentiles": percentiles },
    })
}

/// Writes the addresses to a file beside `path`, then renames it there: a script waiting for
/// the file never reads half of it.
fn write_whole(path: &Path, addresses: &[String]) -> Result<(), CliError> {
    let file_error = |e: std::io::Error| CliError::File { path: path.display().to_string(), why: e.to_string() };
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let mut text = addresses.join("\n");
    text.push('\n');
    std::fs::write(&partial, text).map_err(file_error)?;
    std::fs::rename(&partial, path).map_err(file_error)
}
