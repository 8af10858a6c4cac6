//! What a worker link tells the run, and what the run tells a worker: the same for the
//! in-process worker and for a remote daemon, so one loop drives both.

use volley_engine::RunControl;
use volley_worker::clock;
use volley_worker::shard::Event;

use super::clock_sync::Offset;

/// What a worker said about itself in Hello.
#[derive(Debug, Clone)]
pub(crate) struct WorkerInfo {
    pub name: String,
    pub version: String,
    pub cores: u32,
    pub kernel: String,
}

// A few events per worker per second: their size does not matter, boxing would only add noise.
#[allow(clippy::large_enum_variant)]
pub(crate) enum LinkEvent {
    Hello(WorkerInfo),
    /// The worker's clock offset is known; Start instants can be stated in its clock.
    Synced(Offset),
    Worker(Event),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Start at this instant of the controller's CLOCK_MONOTONIC (ns).
    Start {
        at: u64,
    },
    Stop,
}

/// How the run reaches one worker.
pub(crate) enum Link {
    Local(RunControl),
    Remote(tokio::sync::mpsc::UnboundedSender<Command>),
}

impl Link {
    pub(crate) fn send(&self, command: Command) {
        match self {
            Link::Local(control) => match command {
                // Same machine, same clock: no offset to apply.
                Command::Start { at } => control.start_at(clock::instant_at(at)),
                Command::Stop => control.stop(),
            },
            Link::Remote(tx) => {
                // A link whose task has ended has already said why.
                let _ = tx.send(command);
            }
        }
    }
}
