//! `--prometheus ADDR`: the live numbers of this process's runs as OpenMetrics text at
//! `/metrics`, for a Prometheus server to scrape while the load goes on.
//!
//! The controller feeds it each second merged over all workers, a worker daemon each second of
//! its own shards, and both the run's final totals at its end (the final partial second and
//! the requests in flight at a deadline are only in those). Everything is derived from the
//! same per-second intervals the report is built from: nothing is measured twice.
//!
//! - `buckets.rs`: the histogram's fixed bounds, and why.
//! - `tally.rs`: cumulative counts; `exposition.rs`: them as OpenMetrics text.
//! - `server.rs`: the HTTP responder, on a thread of its own.

mod buckets;
mod exposition;
mod server;
mod tally;
#[cfg(test)]
mod tests;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::oneshot;
use volley_engine::Stats;

use exposition::{Gauges, render};
use tally::Tally;

/// Why the metrics cannot be served. One line each.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--prometheus: cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("--prometheus: cannot start the metrics server: {0}")]
    Start(io::Error),
}

/// The metrics endpoint and what it shows. Serving stops when it is dropped.
pub struct Exporter {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Exporter {
    /// Binds `addr` (port 0 picks one) and serves from a thread of its own. The address is
    /// bound before this returns, so a bad one is known before any load starts.
    pub fn start(addr: SocketAddr) -> Result<Exporter, MetricsError> {
        let listener = std::net::TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
        let bound = listener.local_addr().map_err(|source| MetricsError::Bind { addr, source })?;
        listener.set_nonblocking(true).map_err(MetricsError::Start)?;
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(MetricsError::Start)?;
        let shared = Arc::new(Shared::new());
        let (stop, stopped) = oneshot::channel();
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("volley-metrics".into())
            .spawn(move || runtime.block_on(server::serve(listener, serving, stopped)))
            .map_err(MetricsError::Start)?;
        Ok(Exporter { addr: bound, shared, stop: Some(stop), thread: Some(thread) })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A run's load has begun; `names` are its mix's names by index (empty without a mix),
    /// each counted under a `name` label besides the run's series, and `checks` each name's
    /// checks' names (`Requests::check_names`), counted under a `check` label.
    pub fn run_started(&self, names: Vec<String>, checks: Vec<Vec<String>>) {
        self.shared.update(|live| {
            live.gauges = Gauges { running: true, ..Gauges::default() };
            live.names = names;
            live.checks = checks;
        });
    }

    /// One complete second of the run (for the controller, merged over every worker).
    pub fn second(&self, delta: &Stats) {
        let latency = &delta.histograms.latency;
        // Little's law over one second: the mean number in flight is the time they spent, summed.
        let in_flight = if latency.is_empty() { 0.0 } else { latency.mean() * latency.len() as f64 / 1e9 };
        let rate = delta.counters.total();
        self.shared.update(|live| {
            live.run = live.run.plus(&Tally::of(delta, &live.names, &live.checks));
            live.gauges = Gauges { running: true, rate, in_flight };
        });
    }

    /// The run ended with these totals (for the controller, the report's merged ones): the
    /// counters become them, never less than what its seconds already showed.
    pub fn run_finished(&self, totals: &Stats) {
        self.shared.update(|live| {
            let tally = Tally::of(totals, &live.names, &live.checks);
            live.base = live.base.plus(&live.run.at_least(&tally));
            live.end_run();
        });
    }

    /// The run failed: what its seconds showed stays counted.
    pub fn run_failed(&self) {
        self.shared.update(|live| {
            live.base = live.base.plus(&live.run);
            live.end_run();
        });
    }

    /// The page a scrape gets now.
    #[cfg(test)]
    pub(crate) fn page(&self) -> Arc<str> {
        self.shared.page()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the server thread and the feeding side share.
pub(crate) struct Shared {
    live: Mutex<Live>,
}

impl Shared {
    fn new() -> Shared {
        let live = Live::default();
        let page = render(&live.base, &live.gauges, live.runs).into();
        Shared { live: Mutex::new(Live { page, ..live }) }
    }

    /// Changes the numbers and renders the page once, so a scrape only copies a pointer.
    fn update(&self, change: impl FnOnce(&mut Live)) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut live);
        live.page = render(&live.base.plus(&live.run), &live.gauges, live.runs).into();
    }

    pub(crate) fn page(&self) -> Arc<str> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).page.clone()
    }
}

#[derive(Default)]
struct Live {
    /// Runs that ended.
    base: Tally,
    /// The run in progress, from its seconds.
    run: Tally,
    gauges: Gauges,
    runs: u64,
    page: Arc<str>,
    /// The run in progress's names, by index.
    names: Vec<String>,
    /// Each of `names`' checks' names, by index.
    checks: Vec<Vec<String>>,
}

impl Live {
    fn end_run(&mut self) {
        self.run = Tally::default();
        self.names = Vec::new();
        self.checks = Vec::new();
        self.gauges = Gauges::default();
        self.runs += 1;
    }
}
