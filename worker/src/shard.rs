//! Running one shard on the engine and telling what happens, as [`Event`]s.
//!
//! This is the part of a worker that knows nothing of gRPC: the daemon forwards the events
//! into a Run stream (through `wire::event_to_proto`), and the controller's in-process worker
//! takes them directly, so a local run and a distributed one go through the same steps.

use std::time::Duration;

use volley_engine::{ErrorKind, Plan, Progress, RingSupport, RunControl, Stats, choose_engine};

use crate::clock;

/// What a shard's run tells its controller, in order: Accepted, Ready, Started, one Interval
/// per second, then Finished — or Failed at any point.
// Interval is much larger than the rest (its histograms), but only one event goes out per
// second: boxing it would cost an allocation and a less direct API for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Event {
    /// io_uring works here and the shard is about to open its connections.
    Accepted {
        threads: usize,
        connections: usize,
        ring: RingSupport,
    },
    /// Every connection was tried once; those up wait for the start.
    Ready {
        connected: u64,
        failed: u64,
    },
    /// The load began, in this machine's CLOCK_MONOTONIC nanoseconds.
    Started {
        at_nanos: u64,
    },
    /// One second of the run (second 1 covers 0 s to 1 s after the start).
    Interval {
        second: u32,
        delta: Stats,
    },
    Finished(Box<Outcome>),
    /// The shard could not run; the reason is one line.
    Failed(String),
}

/// What a finished shard measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub stats: Stats,
    /// From the start to the end of the last engine thread.
    pub duration: Duration,
    pub threads: usize,
    pub connections: usize,
    /// CPU time the engine threads used.
    pub client_cpu: Duration,
    /// Stopped before the shard was done (Stop, a lost controller, the grace deadline).
    pub interrupted: bool,
    /// The first message seen for each error kind.
    pub error_samples: Vec<(ErrorKind, String)>,
    /// HTTP/2: the lowest stream limit a server set below the streams asked for.
    pub stream_limit: Option<u32>,
    /// With a warm-up: what was counted during it, apart from `stats`.
    pub warm_up: Option<Stats>,
    /// Interrupted by the worker itself, not by its controller: why, in one line (a signal, a
    /// lost controller, the grace deadline). Set by the daemon's session, never by the engine.
    pub stopped_by: Option<String>,
}

/// Runs one shard to its end on this thread: decides its engine (Failed with io_uring's one-line
/// reason if it was asked for and is unusable), sends Accepted, runs the engine with `control` (gated: the load waits for
/// `control.start_at`), forwarding Ready, Started and each Interval, then Finished or Failed.
pub fn run_shard(plan: &Plan, control: &RunControl, sink: &mut dyn FnMut(Event)) {
    let ring = match choose_engine(plan.engine) {
        Ok(ring) => ring,
        Err(e) => return sink(Event::Failed(e.to_string())),
    };
    sink(Event::Accepted { threads: plan.threads, connections: plan.connections, ring });
    let result = volley_engine::run(plan, control, &mut |progress| {
        sink(match progress {
            Progress::Ready { connected, failed } => Event::Ready { connected, failed },
            Progress::Started { at } => Event::Started { at_nanos: clock::nanos_of(at) },
            Progress::Interval(snapshot) => Event::Interval {
                second: u32::try_from(snapshot.elapsed.as_secs()).unwrap_or(u32::MAX),
                delta: snapshot.delta,
            },
        })
    });
    sink(match result {
        Ok(r) => Event::Finished(Box::new(Outcome {
            stats: r.stats,
            duration: r.duration,
            threads: r.threads,
            connections: r.connections,
            client_cpu: r.client_cpu,
            interrupted: r.interrupted,
            error_samples: r.error_samples,
            stream_limit: r.stream_limit,
            warm_up: r.warm_up,
            stopped_by: None,
        })),
        Err(e) => Event::Failed(e.to_string()),
    });
    // The result is out; the next shard on this machine starts once the sockets are closed.
    control.wait_closed();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use volley_engine::{RequestSpec, Stop, Target};

    fn plan(url: &str, stop: Stop) -> Plan {
        let mut plan =
            Plan::new(Target::parse(url).expect("valid URL"), RequestSpec::new("GET", Vec::new(), Vec::new()), 4, stop);
        plan.threads = 2;
        plan.connect_timeout = Duration::from_secs(2);
        plan.request_timeout = Some(Duration::from_secs(5));
        plan
    }

    #[test]
    fn a_gated_shard_reports_each_step_in_order() {
        let server = volley_serve::Server::start(volley_serve::ServeConfig {
            addr: "127.0.0.1:0".parse().expect("valid address"),
            ..Default::default()
        })
        .expect("server starts");
        let control = RunControl::gated();
        let start = Instant::now() + Duration::from_millis(100);
        let mut events = Vec::new();
        run_shard(&plan(&server.url(), Stop::Requests(300)), &control, &mut |event| {
            // The controller sends Start once the connections are up.
            if matches!(event, Event::Ready { .. }) {
                control.start_at(start);
            }
            events.push(event);
        });
        let names: Vec<&str> = events
            .iter()
            .map(|e| match e {
                Event::Accepted { .. } => "accepted",
                Event::Ready { .. } => "ready",
                Event::Started { .. } => "started",
                Event::Interval { .. } => "interval",
                Event::Finished(_) => "finished",
                Event::Failed(_) => "failed",
            })
            .filter(|n| *n != "interval")
            .collect();
        assert_eq!(names, ["accepted", "ready", "started", "finished"], "{events:?}");
        assert!(matches!(events[0], Event::Accepted { threads: 2, connections: 4, .. }));
        assert!(matches!(events[1], Event::Ready { connected: 4, failed: 0 }));
        let Some(Event::Started { at_nanos }) = events.iter().find(|e| matches!(e, Event::Started { .. })) else {
            unreachable!("checked above")
        };
        let want = clock::nanos_of(start);
        assert!(*at_nanos + 5_000_000 >= want, "started {at_nanos} before the gate {want}");
        let Some(Event::Finished(outcome)) = events.last() else { unreachable!("checked above") };
        assert_eq!(outcome.stats.counters.ok, 300);
        assert_eq!(server.requests(), 300);
        assert!(!outcome.interrupted);
    }

    #[test]
    fn a_target_that_is_not_there_fails_in_one_line() {
        // A port nothing listens on: bind one, learn its number, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let control = RunControl::gated();
        let mut events = Vec::new();
        run_shard(&plan(&format!("http://127.0.0.1:{port}/"), Stop::Requests(10)), &control, &mut |event| {
            if matches!(event, Event::Ready { .. }) {
                control.start_at(Instant::now());
            }
            events.push(event);
        });
        match events.last() {
            Some(Event::Failed(reason)) => assert!(!reason.contains('\n'), "{reason}"),
            Some(Event::Finished(outcome)) => assert_eq!(outcome.stats.counters.ok, 0),
            other => panic!("ended with {other:?}"),
        }
    }
}
