//! Running one step: the plan the load flags describe, at the step's rate (or, with a paced
//! scenario, its number of users) for the step's length, through the same fleet path as
//! `volley --rate R -z D` (or `volley -c N -z D`), locally or split over `--workers`, into the
//! same report.

use std::time::Duration;

use volley_engine::{Load, Plan, RunControl, Stop};

use super::searched::Searched;
use crate::cli::LoadArgs;
use crate::error::CliError;
use crate::fleet::{self, Access, Place};
use crate::report::{PlanSummary, Report};
use crate::{options, workers_file};

pub(crate) struct Runner {
    plan: Plan,
    searched: Searched,
    places: Vec<Place>,
    access: Access,
    /// `-t`: each step's threads are decided from it (or the machine's cores) at its rate.
    threads: Option<u64>,
    /// Remote workers are driven from here; none for a local search.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Runner {
    /// Checks the load flags and the workers before any step, as `volley URL` does before its
    /// run: a bad flag or worker list is a usage error before any load.
    pub(crate) fn new(args: &LoadArgs) -> Result<Runner, CliError> {
        let plan = options::build_plan(args)?;
        let searched = Searched::of(&plan);
        let threads = args.threads;
        if args.workers.is_empty() {
            let (places, access) = (vec![Place::Local], Access::default());
            return Ok(Runner { plan, searched, places, access, threads, runtime: None });
        }
        let places = options::worker_places(&workers_file::expand(&args.workers)?)?;
        let access = options::worker_access(args)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| CliError::Worker(format!("cannot start the controller's runtime: {e}")))?;
        Ok(Runner { plan, searched, places, access, threads, runtime: Some(runtime) })
    }

    /// The mix's names, which a per-name --slo must be one of.
    pub(crate) fn names(&self) -> Vec<String> {
        PlanSummary::of(&self.plan).names
    }

    /// How many places share each step's rate.
    pub(crate) fn workers(&self) -> usize {
        self.places.len()
    }

    /// What the steps vary: the rate, or a paced scenario's users.
    pub(crate) fn searched(&self) -> Searched {
        self.searched
    }

    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The whole plan of a step at `level` (a rate, or users) for `length`, checked against
    /// the engine's limits.
    pub(crate) fn step_plan(&self, level: u64, length: Duration) -> Result<Plan, CliError> {
        let mut plan = self.plan.clone();
        match self.searched {
            Searched::Rate => plan.load = Load::rate(level),
            Searched::Users => {
                plan.load = Load::closed();
                plan.connections = usize::try_from(level).unwrap_or(usize::MAX);
            }
        }
        plan.stop = Stop::Duration(length);
        plan.threads = plan.threads_for(options::local_threads(self.threads));
        options::check(&plan)?;
        Ok(plan)
    }

    /// Each place's share of a step at `level` for `length`, ready to send; a usage error
    /// when the step breaks a limit, cannot be split over the workers (fewer connections than
    /// workers) or is too large for a worker's message.
    pub(crate) fn shards(&self, level: u64, length: Duration) -> Result<Vec<fleet::Part>, CliError> {
        let plan = self.step_plan(level, length)?;
        let shards = match self.places.as_slice() {
            [Place::Local] => vec![plan],
            places => fleet::split(&plan, places.len())?,
        };
        let threads = self.threads.map(|t| usize::try_from(t).unwrap_or(usize::MAX));
        fleet::parts(shards, self.places.clone(), threads)
    }

    /// One step at `level` for `length`; `interrupt` (Ctrl-C) stops it.
    pub(crate) fn run(&self, level: u64, length: Duration, interrupt: &RunControl) -> Result<Report, CliError> {
        let shards = self.shards(level, length)?;
        let handle = self.runtime.as_ref().map(|r| r.handle());
        let followers = fleet::Followers::default();
        let run = fleet::run(shards, &self.access, handle, interrupt, followers);
        Ok(Report::from_fleet(PlanSummary::of(&self.plan), run))
    }
}
