//! A run across workers: split the plan, reach every worker, start them all at one instant,
//! merge their seconds into one progress line and keep their results for the report.
//!
//! A local run is a fleet of one in-process worker, so both take this path. Nothing a worker
//! sends is taken on trust (`checks.rs`), and no worker can keep the run waiting: one that stops
//! reporting, falls behind or does not answer a Stop is failed, and what its intervals said
//! until then is kept for the report. So is one that ends its shard early when nobody here
//! asked it to (its daemon was signalled, it lost the heartbeat): that is not this run's Ctrl-C.
//!
//! Those decisions are `machine.rs`'s, a state machine with no I/O; this file is its driver:
//! it opens the links, feeds the machine their events, Ctrl-C and the time, and carries out
//! what it answers (commands to workers, the progress line, `--prometheus`, `--hlog`).

mod checks;
mod clock_sync;
mod compact;
mod link;
mod local;
mod machine;
mod progress;
mod remote;
mod results;
mod series;
mod split;
mod worker_series;

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use volley_engine::{Plan, RunControl, Stop};
use volley_worker::clock::now_nanos;
use volley_worker::metrics::Exporter;

pub(crate) use link::WorkerInfo;
pub(crate) use remote::Access;
pub(crate) use results::{FleetRun, FlowCounts, Second};
#[cfg(test)]
pub(crate) use series::Label;
pub(crate) use series::Profile;
pub(crate) use split::{Destination, Part, parts, split};
pub(crate) use worker_series::SeriesBudget;

use crate::gate::Watch;
use crate::output::hlog::IntervalLog;
use link::{Link, LinkEvent};
use machine::{Action, Fleet, Member, Now};
use progress::ProgressLine;
use results::WorkerRun;

/// How long the driver waits for a link event before it looks at Ctrl-C and the deadlines
/// again: the latency of a Ctrl-C, and the resolution of every deadline.
const POLL: Duration = Duration::from_millis(20);

/// Where a shard runs.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    Local,
    /// A `volley worker` at `address` (HOST:PORT), with the source addresses the workers
    /// file gives it (None: the plan's, from `--source-addr`).
    Remote {
        address: String,
        source_addrs: Option<Vec<std::net::IpAddr>>,
    },
}

/// Who follows a run as it goes, besides the progress line.
#[derive(Default)]
pub(crate) struct Followers<'a> {
    /// `--prometheus`: told of the start, and given each second merged over the workers as soon
    /// as every live one sent it.
    pub live: Option<&'a Exporter>,
    /// `--abort-on-fail`: every interval goes to it as it arrives, and when it says a threshold
    /// can no longer pass every worker is stopped.
    pub watch: Option<&'a mut Watch>,
    /// `--hlog`: told when the load starts, and given each second merged over the workers.
    pub hlog: Option<&'a mut IntervalLog>,
}

/// Runs every part where it goes, all starting together, told to `followers` as it goes.
pub(crate) fn run(
    parts: Vec<Part>,
    access: &Access,
    runtime: Option<&tokio::runtime::Handle>,
    interrupt: &RunControl,
    followers: Followers<'_>,
) -> FleetRun {
    let Followers { live, watch, mut hlog } = followers;
    let (tx, rx) = mpsc::channel::<(usize, LinkEvent)>();
    let Some(first) = parts.first() else {
        return FleetRun::default();
    };
    let stop = first.plan.stop;
    let connect_timeout = first.plan.connect_timeout;
    // The mix's names by index, for the live metrics' `name` and `check` labels.
    let labels = MixLabels { names: first.plan.requests.names(), checks: first.plan.requests.check_names() };
    let shards: Vec<&Plan> = parts.iter().map(|p| &p.plan).collect();
    let profile = Profile::new(&shards);
    let results = std::sync::Arc::new(tokio::sync::Semaphore::new(remote::RESULTS_IN_FLIGHT));
    let mut members = Vec::with_capacity(shards.len());
    let mut links = Vec::with_capacity(shards.len());
    for (index, Part { plan: shard, to }) in parts.into_iter().enumerate() {
        let end = match shard.stop {
            Stop::Duration(d) => d,
            Stop::Requests(_) => Duration::ZERO,
        };
        let mut report = WorkerRun {
            connections: shard.connections,
            rate: profile.asked_rate(Some(index), end),
            ..Default::default()
        };
        let budget = checks::budget(&shard);
        let remote = matches!(to, Destination::Remote { .. });
        let feeders = shard.feeders.clone();
        let link = match to {
            Destination::Local => {
                report.address = "local".into();
                local::start(index, shard, tx.clone())
            }
            Destination::Remote { address, shard, threads, limit } => {
                report.address = address.clone();
                let (cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
                let part = remote::Shard { shard: *shard, threads, limit, feeders };
                match runtime {
                    Some(rt) => {
                        rt.spawn(remote::drive(
                            index,
                            address,
                            access.clone(),
                            part,
                            tx.clone(),
                            cmd_rx,
                            results.clone(),
                        ));
                    }
                    None => report.failure = Some("no runtime for remote workers".into()),
                }
                Link::Remote(cmd_tx)
            }
        };
        members.push(Member { report, budget, remote });
        links.push(link);
    }
    drop(tx);

    let mut fleet = Fleet::new(Instant::now(), stop, connect_timeout, profile, members, watch);
    let mut progress = ProgressLine::new();
    let mut ticked: Option<Instant> = None;
    loop {
        if interrupt.is_stopped() {
            fleet.interrupt(now());
        }
        // Deadlines are looked at every POLL, not on every event: a tick visits every worker,
        // and at 1,000 workers every event a tick made the loop quadratic in workers.
        if ticked.is_none_or(|t| t.elapsed() >= POLL) {
            fleet.on_tick(now());
            ticked = Some(Instant::now());
        }
        carry_out(&mut fleet, &links, &mut progress, live.map(|l| (l, &labels)), hlog.as_deref_mut());
        if fleet.is_done() {
            break;
        }
        match rx.recv_timeout(POLL) {
            Ok((i, event)) => fleet.on_event(now(), i, event),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => fleet.links_ended(),
        }
        carry_out(&mut fleet, &links, &mut progress, live.map(|l| (l, &labels)), hlog.as_deref_mut());
    }
    progress.clear();
    fleet.finish()
}

/// Both clocks, read together for the machine.
fn now() -> Now {
    Now { at: Instant::now(), nanos: now_nanos() }
}

/// A mix's names, and each one's checks' names, by index: the live metrics' labels.
struct MixLabels {
    names: Vec<String>,
    checks: Vec<Vec<String>>,
}
/// Does what the machine asked, in its order.
fn carry_out(
    fleet: &mut Fleet<'_>,
    links: &[Link],
    progress: &mut ProgressLine,
    live: Option<(&Exporter, &MixLabels)>,
    mut hlog: Option<&mut IntervalLog>,
) {
    while let Some(action) = fleet.poll_action() {
        match action {
            Action::Send { worker, command } => links[worker].send(command),
            Action::Started { margin } => {
                if let Some((live, labels)) = live {
                    live.run_started(labels.names.clone(), labels.checks.clone());
                }
                if let Some(hlog) = hlog.as_deref_mut() {
                    hlog.started(SystemTime::now() + margin);
                }
            }
            Action::Second { second, delta, live: workers } => {
                progress.interval(second, &delta, workers);
                if let Some((live, _)) = live {
                    live.second(&delta);
                }
                if let Some(hlog) = hlog.as_deref_mut() {
                    hlog.second(second, &delta);
                }
            }
        }
    }
}
