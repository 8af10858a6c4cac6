//! What a worker link tells the run, and what the run tells a worker: the same for the
//! in-process worker and for a remote daemon, so one loop drives both.

use volley_engine::RunControl;
use volley_proto::v1;
use volley_worker::shard::Event;
use volley_worker::{clock, wire};

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
    /// A remote worker's interval as it came over the wire, decoded by the run's own thread as
    /// it takes it: a thousand workers' seconds arriving together then wait as a few kilobytes
    /// each, not as 0.3 MB of histograms each (decoded, they were most of a 1,000-worker run's
    /// peak memory), and the runtime that sends the heartbeats does not decode them.
    Encoded(Box<Encoded>),
    /// A remote worker's result, decoded by its link (in parallel with this thread's work on
    /// the others, so that a thousand results arriving at the end are taken in good time),
    /// holding one of the few permits that bound how many decoded results wait at once.
    Held(Event, tokio::sync::OwnedSemaphorePermit),
}

/// A worker's event in its wire form, with what decoding it needs.
pub(crate) struct Encoded {
    pub message: v1::RunEvent,
    /// The shard's names and scenarios: statistics for others are refused.
    pub bounds: wire::Bounds,
}

impl Encoded {
    pub(crate) fn decode(self) -> Result<Event, String> {
        wire::event_from_proto(self.message, self.bounds).map_err(|e| format!("unreadable event: {e}"))
    }

    /// An interval: decoded by the run's thread, not by the runtime that sends the heartbeats.
    pub(crate) fn is_interval(message: &v1::RunEvent) -> bool {
        matches!(message.event, Some(v1::run_event::Event::Interval(_)))
    }

    /// A result: decoded by its link under a permit (`LinkEvent::Held`).
    pub(crate) fn is_result(message: &v1::RunEvent) -> bool {
        matches!(message.event, Some(v1::run_event::Event::Finished(_)))
    }
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
