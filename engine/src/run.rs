//! Running a plan: spread it over threads, collect their per-second deltas, merge the result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::driver::{self, Shared, ThreadMsg, ThreadPlan};
use crate::error::EngineError;
use crate::h1;
use crate::plan::{Plan, Stop};
use crate::ring::{RingSupport, probe_io_uring};
use crate::stats::{ErrorKind, Snapshot, Stats};
use crate::tls;

/// Stops a run from outside (Ctrl-C, a controller going away). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
}

impl RunControl {
    pub fn new() -> Self {
        RunControl::default()
    }

    /// Asks every engine thread to stop; they notice within 100 ms and return their statistics.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// What a finished run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub stats: Stats,
    /// From the start of load to the end of the last thread.
    pub duration: Duration,
    pub threads: usize,
    pub connections: usize,
    /// Stopped from outside before the plan was done.
    pub interrupted: bool,
    pub ring: RingSupport,
    /// CPU time the engine threads used, to tell a saturated client from a slow server.
    pub client_cpu: Duration,
    /// The first message seen for each error kind, to say *why* next to the counts.
    pub error_samples: Vec<(ErrorKind, String)>,
}

/// Runs `plan` to its end, calling `on_interval` once per second with that second's delta.
pub fn run(
    plan: &Plan,
    control: &RunControl,
    on_interval: &mut dyn FnMut(&Snapshot),
) -> Result<RunResult, EngineError> {
    if plan.connections == 0 {
        return Err(EngineError::Plan("connections must be at least 1"));
    }
    if plan.threads == 0 {
        return Err(EngineError::Plan("threads must be at least 1"));
    }
    if plan.stop == Stop::Requests(0) {
        return Err(EngineError::Plan("requests must be at least 1"));
    }
    let ring = probe_io_uring()?;
    let addr = plan.target.resolve()?[0];
    let tls = if plan.target.is_tls() {
        Some((tls::client_config(&plan.tls, &[b"http/1.1"])?, tls::server_name(&plan.target.host)?))
    } else {
        None
    };
    let threads = plan.threads.min(plan.connections);
    let shared = Arc::new(Shared {
        addr,
        sockaddr: driver::encode_sockaddr(&addr),
        request: h1::encode_request(&plan.target, &plan.request, !plan.keepalive),
        head: plan.request.is_head(),
        tls,
        connect_timeout: plan.connect_timeout,
        request_timeout: plan.request_timeout,
        keepalive: plan.keepalive,
        min_wait: ring.min_wait,
    });

    let (tx, rx) = mpsc::channel::<ThreadMsg>();
    let start = Instant::now();
    let deadline = match plan.stop {
        Stop::Duration(d) => Some(start + d),
        Stop::Requests(_) => None,
    };
    let mut handles = Vec::with_capacity(threads);
    for index in 0..threads {
        let thread_plan = ThreadPlan {
            index,
            connections: share(plan.connections as u64, threads, index) as usize,
            budget: match plan.stop {
                Stop::Requests(n) => Some(share(n, threads, index)),
                Stop::Duration(_) => None,
            },
            start,
            deadline,
            stop: control.stop.clone(),
            tx: tx.clone(),
        };
        let shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("volley-engine-{index}"))
            .spawn(move || driver::run_thread(shared, thread_plan))
            .map_err(|e| EngineError::Thread(e.to_string()))?;
        handles.push(handle);
    }
    drop(tx);

    let mut collector = Collector::new(threads);
    for msg in rx {
        collector.take(msg, on_interval);
    }
    let duration = collector.end.unwrap_or_else(Instant::now).saturating_duration_since(start);
    for handle in handles {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(EngineError::Thread(e.to_string())),
            Err(_) => return Err(EngineError::Thread("an engine thread panicked".into())),
        }
    }
    Ok(RunResult {
        stats: collector.total,
        duration,
        threads,
        connections: plan.connections,
        interrupted: control.is_stopped(),
        ring,
        client_cpu: collector.cpu,
        error_samples: collector.error_samples,
    })
}

/// Thread `index`'s share of `total` split over `parts`: the remainder goes to the first ones,
/// so the shares add up to exactly `total`.
fn share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((index as u64) < total % parts)
}

/// Merges thread messages: per-second deltas into snapshots, everything into the total.
struct Collector {
    /// Per thread: the last tick it reported, and whether it is done.
    last_tick: Vec<u32>,
    done: Vec<bool>,
    /// Per tick: the merged delta of the threads that reported it.
    pending: std::collections::BTreeMap<u32, Stats>,
    total: Stats,
    error_samples: Vec<(ErrorKind, String)>,
    end: Option<Instant>,
    cpu: Duration,
}

impl Collector {
    fn new(threads: usize) -> Self {
        Collector {
            last_tick: vec![0; threads],
            done: vec![false; threads],
            pending: Default::default(),
            total: Stats::new(),
            error_samples: Vec::new(),
            end: None,
            cpu: Duration::ZERO,
        }
    }

    fn take(&mut self, msg: ThreadMsg, on_interval: &mut dyn FnMut(&Snapshot)) {
        match msg {
            ThreadMsg::Interval { thread, tick, delta } => {
                self.total.merge(&delta);
                self.last_tick[thread] = tick;
                self.pending.entry(tick).or_default().merge(&delta);
            }
            ThreadMsg::Done { thread, rest, error_samples, ended, cpu } => {
                self.total.merge(&rest);
                self.cpu += cpu;
                self.done[thread] = true;
                self.end = Some(self.end.map_or(ended, |e| e.max(ended)));
                for (kind, text) in error_samples {
                    if !self.error_samples.iter().any(|(k, _)| *k == kind) {
                        self.error_samples.push((kind, text));
                    }
                }
            }
        }
        // A tick is complete once every thread has reported it or is done (a thread's Done
        // comes after all of its ticks, so a done thread will not report it later).
        while let Some(entry) = self.pending.first_entry() {
            let tick = *entry.key();
            if (0..self.done.len()).any(|t| !self.done[t] && self.last_tick[t] < tick) {
                break;
            }
            let delta = entry.remove();
            on_interval(&Snapshot { elapsed: Duration::from_secs(u64::from(tick)), delta });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_add_up_to_the_total() {
        for (total, parts) in [(200u64, 3usize), (1, 4), (7, 7), (1000, 16)] {
            let sum: u64 = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(sum, total);
            let max = (0..parts).map(|i| share(total, parts, i)).max().unwrap();
            let min = (0..parts).map(|i| share(total, parts, i)).min().unwrap();
            assert!(max - min <= 1);
        }
    }
}
