//! One accepted run: the engine on a thread of its own, its events into the response stream,
//! and the controller's commands — Start, Heartbeat, Stop — from the request stream.
//!
//! A run must never outlive its controller's interest in it: it stops when the request stream
//! ends or breaks, when no command arrives for [`WATCHDOG`] and a [`SECOND_LOOK`] (the
//! controller sends a heartbeat every 200 ms), when the response stream is dropped, and, for a timed shard, at its end plus
//! [`GRACE`] whatever else happens. A run the worker stops itself says why in its Finished
//! (`stopped_by`), so that its controller does not take it for a Stop of its own.

use std::future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Status, Streaming};
use tracing::{info, warn};
use volley_engine::{Plan, RunControl, Stop};
use volley_proto::v1::{self, run_command::Command};

use crate::metrics::Exporter;
use crate::shard::Event;
use crate::state::{Busy, State, StopCause};
use crate::{clock, wire};

/// Silence from the controller for this long means it is gone (it beats every 200 ms), once a
/// second look ([`SECOND_LOOK`]) finds nothing either.
pub(crate) const WATCHDOG: Duration = Duration::from_millis(750);

/// How long the watchdog looks again before it stops the run. A worker that the kernel did not
/// run for a while (a machine with more busy threads than cores, a stopped process) wakes with
/// its timer due and the controller's beats unread in the socket, and may see the timer first;
/// looking again lets the connection read them. The controller is then given up on after at
/// most `WATCHDOG` + `SECOND_LOOK` (1 s) of real silence, and at once when its connection
/// breaks, as it does when its process dies.
pub(crate) const SECOND_LOOK: Duration = Duration::from_millis(250);

/// How far past its planned end a timed shard may run before the worker stops it itself.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

type EventSender = mpsc::UnboundedSender<Result<v1::RunEvent, Status>>;

/// Starts the engine for `plan` and the task that follows the controller's commands; returns
/// the stream of events. `busy` is held until the engine is done.
pub(crate) fn start(
    plan: Plan,
    control: RunControl,
    cause: StopCause,
    commands: Streaming<v1::RunCommand>,
    busy: Busy,
    state: &State,
) -> Result<UnboundedReceiverStream<Result<v1::RunEvent, Status>>, Status> {
    // Unbounded: the engine thread must never wait on the network, and it sends a handful of
    // events per second at most.
    let (tx, rx) = mpsc::unbounded_channel();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let timed = match plan.stop {
        Stop::Duration(d) => Some(d),
        Stop::Requests(_) => None,
    };
    let engine_tx = tx.clone();
    let engine_control = control.clone();
    let engine_cause = cause.clone();
    let metrics = state.metrics.clone();
    let runner = state.runner.clone();
    // Set just before the run's last event (Finished or Failed) goes out: once the controller
    // has it, it closes the run's streams, and that close is the run's end, not a controller
    // gone mid-run (which is what it read as when it came before the engine thread ended).
    let over = Arc::new(AtomicBool::new(false));
    let engine_over = over.clone();
    // The engine blocks its thread for the whole run, so it gets its own, not a runtime's.
    std::thread::Builder::new()
        .name("volley-shard".to_string())
        .spawn(move || {
            let _done = done_tx;
            let mut busy = Some(busy);
            runner.run(&plan, &engine_control, &mut |mut event| {
                if let Event::Finished(outcome) = &mut event
                    && outcome.interrupted
                {
                    // None when the controller's Stop ended it: it knows why.
                    outcome.stopped_by = engine_cause.get();
                }
                if let Some(metrics) = &metrics {
                    observe(metrics, &plan, &event);
                }
                if matches!(event, Event::Finished(_) | Event::Failed(_)) {
                    log_end(&event);
                    // Free the worker before the controller hears the end, so that a run it
                    // starts right after is not refused as busy.
                    busy = None;
                    engine_over.store(true, Ordering::Release);
                }
                if engine_tx.send(Ok(wire::event_to_proto(event))).is_err() {
                    engine_control.stop();
                }
            });
            drop(busy);
        })
        .map_err(|e| Status::internal(format!("volley worker: cannot start the engine thread: {e}")))?;
    tokio::spawn(follow_commands(commands, Run { control, cause, over }, timed, tx, done_rx));
    Ok(UnboundedReceiverStream::new(rx))
}

/// `--prometheus`: the worker's own view of its runs.
fn observe(metrics: &Exporter, plan: &Plan, event: &Event) {
    match event {
        Event::Started { .. } => metrics.run_started(plan.requests.names(), plan.requests.check_names()),
        Event::Interval { delta, .. } => metrics.second(delta),
        Event::Finished(outcome) => match &outcome.warm_up {
            // The exporter counts every second, the warm-up's too.
            Some(warm_up) => {
                let mut all = outcome.stats.clone();
                all.merge(warm_up);
                metrics.run_finished(&all);
            }
            None => metrics.run_finished(&outcome.stats),
        },
        Event::Failed(_) => metrics.run_failed(),
        Event::Accepted { .. } | Event::Ready { .. } => {}
    }
}

fn log_end(event: &Event) {
    match event {
        Event::Finished(outcome) => info!(
            ok = outcome.stats.counters.ok,
            errors = outcome.stats.counters.errors(),
            duration = ?outcome.duration,
            interrupted = outcome.interrupted,
            stopped_by = outcome.stopped_by.as_deref().unwrap_or(""),
            "run finished"
        ),
        Event::Failed(reason) => warn!(%reason, "run failed"),
        _ => {}
    }
}

/// The run `follow_commands` applies commands to.
struct Run {
    control: RunControl,
    cause: StopCause,
    /// Its last event is out: the controller may close the streams, and nothing is to stop.
    over: Arc<AtomicBool>,
}

impl Run {
    /// The controller went away (`why`, logged as `log`): the run is stopped, unless it is over,
    /// in which case that was the controller closing a finished run.
    fn lost(&self, log: &str, why: &str) {
        if self.over.load(Ordering::Acquire) {
            return info!("run over; the controller closed its streams");
        }
        warn!("{log}; stopping the run");
        self.cause.stop(&self.control, why);
    }
}

/// Applies the controller's commands to the run until the engine is done, stopping the run
/// when the controller goes away or the shard overruns its end (and saying so in `cause`).
async fn follow_commands(
    mut commands: Streaming<v1::RunCommand>,
    run: Run,
    timed: Option<Duration>,
    events: EventSender,
    mut done: oneshot::Receiver<()>,
) {
    let mut started = false;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let overrun = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut done => return,
            () = events.closed() => {
                return run.lost("controller gone (it stopped reading events)", "the worker lost its controller: it stopped reading events");
            }
            () = overrun => {
                warn!("the shard ran past its end plus {GRACE:?}; stopping it");
                run.cause.stop(&run.control, &format!("the shard ran past its end plus {GRACE:?} and the worker stopped it"));
                deadline = None;
            }
            next = next_command(&mut commands) => match next {
                Ok(Ok(Some(v1::RunCommand { command: Some(command) }))) => match command {
                    Command::Start(start) if !started => {
                        started = true;
                        let at = clock::instant_at(start.at_worker_nanos);
                        run.control.start_at(at);
                        deadline = timed.and_then(|d| end_of(at, d));
                        info!(in_ms = at.saturating_duration_since(Instant::now()).as_millis() as u64, "start set");
                    }
                    Command::Start(_) => warn!("a second Start ignored"),
                    Command::Heartbeat(_) => {}
                    Command::Stop(_) => {
                        info!("stop asked by the controller");
                        run.control.stop();
                    }
                    Command::Shard(_) => warn!("a second shard in one run ignored"),
                    Command::FeederRows(_) => warn!("feeder rows after the shard's were all taken ignored"),
                },
                // A message with no command is from a newer controller; it still shows life.
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => {
                    return run.lost("controller closed the run stream", "the worker lost its controller: the run stream closed");
                }
                Ok(Err(status)) => {
                    let log = format!("controller gone (the run stream broke: {})", status.message());
                    let why = format!("the worker lost its controller: the run stream broke ({})", status.message());
                    return run.lost(&log, &why);
                }
                Err(_) => {
                    let silence = WATCHDOG + SECOND_LOOK;
                    let log = format!("controller gone (no heartbeat for {silence:?})");
                    return run.lost(&log, &format!("the worker lost its controller: no heartbeat for {silence:?}"));
                }
            },
        }
    }
}

/// The controller's next command, or `Elapsed` after [`WATCHDOG`] and a [`SECOND_LOOK`] of
/// silence.
async fn next_command(
    commands: &mut Streaming<v1::RunCommand>,
) -> Result<Result<Option<v1::RunCommand>, Status>, tokio::time::error::Elapsed> {
    match tokio::time::timeout(WATCHDOG, commands.message()).await {
        Err(_) => {
            // Let the connection's task read what came while this one waited.
            tokio::task::yield_now().await;
            tokio::time::timeout(SECOND_LOOK, commands.message()).await
        }
        next => next,
    }
}

/// When a timed shard starting at `at` must be over at the latest.
fn end_of(at: Instant, duration: Duration) -> Option<tokio::time::Instant> {
    at.checked_add(duration)?.checked_add(GRACE).map(tokio::time::Instant::from_std)
}
