//! The in-process worker: the same shard runner a worker daemon uses, on a thread of this
//! process, so a local run goes through the same planning, merge and report as a distributed one.

use std::sync::mpsc::Sender;

use volley_engine::{Plan, RunControl};
use volley_worker::shard::{Event, run_shard};

use super::clock_sync::Offset;
use super::link::{Link, LinkEvent};

pub(crate) fn start(index: usize, plan: Plan, events: Sender<(usize, LinkEvent)>) -> Link {
    let control = RunControl::gated();
    let engine_control = control.clone();
    let failed = events.clone();
    let spawned = std::thread::Builder::new().name("volley-local-worker".into()).spawn(move || {
        let _ = events.send((index, LinkEvent::Synced(Offset::default())));
        run_shard(&plan, &engine_control, &mut |event| {
            let _ = events.send((index, LinkEvent::Worker(event)));
        });
    });
    if let Err(e) = spawned {
        let _ = failed.send((index, LinkEvent::Worker(Event::Failed(format!("cannot start a thread: {e}")))));
    }
    Link::Local(control)
}
