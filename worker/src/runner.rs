//! What runs a shard once the daemon has admitted it: the engine ([`ShardRunner::engine`]), or
//! for measuring a controller against thousands of workers on one machine, a stand-in that
//! produces statistics without sending load (`synthetic.rs`). The daemon's gRPC service, its
//! watchdog and the wire encoding are the same either way.

use std::fmt;
use std::sync::Arc;

use volley_engine::{Plan, RunControl};

use crate::shard::{self, Event};

type Run = dyn Fn(&Plan, &RunControl, &mut dyn FnMut(Event)) + Send + Sync;

/// Runs one shard on the calling thread to its end, telling each [`Event`] in order, as
/// [`shard::run_shard`] does.
#[derive(Clone)]
pub struct ShardRunner {
    run: Arc<Run>,
    name: &'static str,
}

impl ShardRunner {
    /// The engine: real load.
    pub fn engine() -> ShardRunner {
        ShardRunner { run: Arc::new(shard::run_shard), name: "engine" }
    }

    /// Any other runner, named for logs.
    pub fn new(
        name: &'static str,
        run: impl Fn(&Plan, &RunControl, &mut dyn FnMut(Event)) + Send + Sync + 'static,
    ) -> Self {
        ShardRunner { run: Arc::new(run), name }
    }

    pub(crate) fn run(&self, plan: &Plan, control: &RunControl, sink: &mut dyn FnMut(Event)) {
        (self.run)(plan, control, sink);
    }
}

impl Default for ShardRunner {
    fn default() -> Self {
        ShardRunner::engine()
    }
}

impl fmt::Debug for ShardRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}
