//! `volley find-max`: a capacity search. Each step is a real open-model run at one rate for
//! `--step-duration`, through the same fleet path as `volley --rate R -z D` (locally or over
//! `--workers`); a step holds when every `--slo` holds on its merged report and the client kept
//! the cadence (sent at least 99% of the rate). The rate doubles from `--start` while steps
//! hold, then bisects between the highest that held and the lowest that failed until they are
//! within `--precision`; `--max-rate` and `--max-steps` bound it, and Ctrl-C stops it with what
//! it found so far. With a paced scenario the search counts users instead of a rate
//! (`searched.rs`): each step runs that many users for the step, and keeps the cadence when
//! they started 99% of the slots that came due.
//!
//! `search.rs` is the policy (no I/O), `searched.rs` what it varies, `runner.rs` runs a step,
//! `step.rs` judges one, `settings.rs` checks the flags, `text.rs` and `json.rs` print the
//! result, `ending.rs` says how it ended and with which exit status.

mod args;
mod ending;
mod json;
mod runner;
mod search;
mod searched;
mod settings;
mod step;
mod text;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::ArgMatches;
use volley_engine::RunControl;

use crate::cli::FindMaxArgs;

use crate::error::CliError;
use crate::signals;
use ending::{Ending, Found};
use runner::Runner;
use search::{Next, Search};
use searched::Searched;
use settings::Settings;
use step::{Step, StepOutcome};
use text::Header;

/// Runs the search the arguments describe and prints it; `matches` are find-max's own, to
/// refuse load flags given on the command line that a search sets itself.
pub(crate) fn run(args: &FindMaxArgs, matches: Option<&ArgMatches>) -> Result<(), CliError> {
    if let Some(matches) = matches {
        args::refuse_load_only_flags(matches)?;
    }
    let runner = Runner::new(&args.load)?;
    let searched = runner.searched();
    let settings = Settings::parse(args, searched)?;
    let mut file = json_file(&args.load.outputs)?;
    crate::gate::check_names(&settings.slos, &runner.names(), "--slo")?;
    let workers = runner.workers();
    if settings.start < workers as u64 {
        let each = match searched {
            Searched::Rate => "each sends whole requests per second",
            Searched::Users => "each runs whole users",
        };
        return Err(CliError::Usage(format!(
            "--start ({}) must be at least the number of workers ({workers}): {each}",
            settings.start
        )));
    }
    // The first and the last step's rates bound every other's, all checked before any load:
    // the first whole (its split over the workers, and each worker's message, whose size the
    // rate does not change), the last against the plan's limits, without encoding its shards.
    runner.shards(settings.start, settings.step)?;
    runner.step_plan(settings.max, settings.step)?;
    let interrupt = RunControl::new();
    signals::stop_on_ctrl_c(&interrupt);
    let (steps, found) = run_steps(&runner, &settings, &interrupt);

    let plan = runner.plan();
    let url = plan.target.to_string();
    let protocol = crate::report::HttpVersion::of(plan.protocol).label();
    let header = Header { url: &url, protocol, connections: plan.connections, workers, settings: &settings };
    let json = (args.load.json || file.is_some()).then(|| {
        let mut s = serde_json::to_string_pretty(&json::to_json(&header, &steps, &found)).unwrap_or_default();
        s.push('\n');
        s
    });
    let shown = match (&json, args.load.json) {
        (Some(json), true) => json.clone(),
        _ => text::to_text(&header, &steps, &found),
    };
    let printed = crate::output::to_stdout(&shown);
    if let (Some((path, file)), Some(json)) = (file.as_mut(), &json) {
        file.write_all(json.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| CliError::File { path: format!("-o {}", path.display()), why: e.to_string() })?;
    }
    printed?;
    let first_failure = steps.first().filter(|s| s.outcome == StepOutcome::Failed).map(|s| {
        let mut why: Vec<String> = s.note.iter().cloned().collect();
        why.extend(s.failures());
        why.join("; ")
    });
    found.outcome(settings.searched, first_failure)
}

/// Steps until the search concludes, Ctrl-C, or a step that cannot be judged.
fn run_steps(runner: &Runner, settings: &Settings, interrupt: &RunControl) -> (Vec<Step>, Found) {
    let mut search = Search::new(settings.start, settings.max, settings.max_steps, settings.precision);
    let mut steps: Vec<Step> = Vec::new();
    let live = std::io::stderr().is_terminal();
    let ending = loop {
        let level = match search.next() {
            Next::Run(level) => level,
            Next::Done(conclusion) => break Ending::Concluded(conclusion),
        };
        if !steps.is_empty() && !pause(settings.pause, interrupt) {
            break Ending::Interrupted;
        }
        let report = match runner.run(level, settings.step, interrupt) {
            Ok(report) => report,
            Err(e) => break Ending::CouldNotRun(e.to_string()),
        };
        if !report.workers.iter().any(crate::report::WorkerLine::has_numbers) {
            break Ending::CouldNotRun(report.failure().unwrap_or_else(|| "no worker could run".into()));
        }
        let step = Step::judge(settings.searched, level, &report, &settings.slos);
        if live {
            let verdict = match step.outcome {
                StepOutcome::Held => "pass".to_string(),
                StepOutcome::Failed => format!("FAIL {}", step.failures().join("; ")),
                StepOutcome::Interrupted => "interrupted".into(),
                StepOutcome::Incomplete => "incomplete".into(),
            };
            let at = settings.searched.short(level);
            eprintln!("\r\x1b[Kfind-max: step {} at {at}: {verdict}", steps.len() + 1);
        }
        let outcome = step.outcome;
        let note = step.note.clone();
        steps.push(step);
        match outcome {
            StepOutcome::Held => search.record(level, true),
            StepOutcome::Failed => search.record(level, false),
            StepOutcome::Interrupted => break Ending::Interrupted,
            StepOutcome::Incomplete => break Ending::Incomplete(note.unwrap_or_else(|| "a worker failed".into())),
        }
    };
    let found = Found::new(ending, &search);
    (steps, found)
}

/// Waits `length` between steps; false when Ctrl-C came meanwhile (or before).
fn pause(length: Duration, interrupt: &RunControl) -> bool {
    let until = Instant::now() + length;
    loop {
        if interrupt.is_stopped() {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// `-o json:FILE`, opened before any load; a search writes no other format.
fn json_file(outputs: &[String]) -> Result<Option<(PathBuf, std::fs::File)>, CliError> {
    match outputs {
        [] => Ok(None),
        [one] => {
            let path = one
                .split_once(':')
                .filter(|(format, path)| format.eq_ignore_ascii_case("json") && !path.is_empty())
                .map(|(_, path)| PathBuf::from(path))
                .ok_or_else(|| {
                    CliError::Usage(format!("-o '{one}': find-max writes only json:FILE (the search as JSON)"))
                })?;
            let file = std::fs::File::create(&path)
                .map_err(|e| CliError::File { path: format!("-o {}", path.display()), why: e.to_string() })?;
            Ok(Some((path, file)))
        }
        _ => Err(CliError::Usage("find-max takes one -o json:FILE".into())),
    }
}
