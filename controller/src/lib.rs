//! volley's command line: parses arguments, runs the load, prints the report. Every error of
//! the command ends here, as one line on stderr and a non-zero exit.

// The JSON report's top level is one `json!` of many fields, past the macro's default depth.
#![recursion_limit = "256"]

mod cli;
mod demo;
mod duration;
mod error;
mod findmax;
mod fleet;
mod gate;
mod options;
mod output;
mod printable;
mod prometheus;
mod report;
mod scenario;
mod signals;
mod sim_fleet;
mod source_addrs;
mod targets;
mod workers_file;

use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches};

use volley_engine::RunControl;

use crate::cli::{Cli, Command, LoadArgs, WorkerArgs};
use crate::error::CliError;
use crate::gate::Verdict;
use crate::report::Report;

pub fn main() -> ExitCode {
    // The matches are kept beside the parsed flags: find-max asks them which flags were given.
    let parsed = Cli::command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|cli| (m, cli)));
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // clap's message spans several lines (usage, tips); one is what a script can read.
            let detail = e.to_string();
            let first: Vec<&str> = detail.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            let first = first.join(" ");
            eprintln!("volley: error: {} (see volley --help)", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Some(Command::FindMax(args)) => findmax::run(&args, matches.subcommand_matches("find-max")),
        Some(Command::Serve { listen, http3 }) => serve(listen, http3),
        Some(Command::Demo) => demo::run(),
        Some(Command::SimFleet(args)) => sim_fleet::run(&args),
        Some(Command::Worker(args)) => worker(&args),
        Some(Command::Merge { reports, json }) => merge(&reports, json),
        Some(Command::Report { report, output }) => html_report(&report, output.as_deref()),
        Some(Command::Compare { old, new, max_regression, json }) => {
            gate::compare(&old, &new, max_regression.as_deref(), json)
        }
        None => load(&cli.load),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("volley: error: {e}");
            e.exit_code()
        }
    }
}

fn serve(listen: std::net::SocketAddr, http3: bool) -> Result<(), CliError> {
    let mut config = volley_serve::ServeConfig { addr: listen, http3, ..Default::default() };
    if http3 {
        // Names a client on this machine would use, and the address it was told to listen on.
        let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        if !names.contains(&listen.ip().to_string()) {
            names.push(listen.ip().to_string());
        }
        config.tls = Some(volley_serve::TlsPem::self_signed(&names).map_err(|e| CliError::Serve(e.to_string()))?);
    }
    volley_serve::serve_forever(config).map_err(|e| CliError::Serve(e.to_string()))
}

fn worker(args: &WorkerArgs) -> Result<(), CliError> {
    let config = options::worker_config(args)?;
    volley_worker::serve(config).map_err(|e| CliError::Worker(e.to_string()))
}

fn merge(reports: &[std::path::PathBuf], json: bool) -> Result<(), CliError> {
    let report = report::from_saved(reports)?;
    print_report(&report, &[], json)?;
    report.outcome()
}

/// `volley report run.json -o report.html`: a saved report as a page with charts.
fn html_report(report: &std::path::Path, output: Option<&str>) -> Result<(), CliError> {
    let output = output.map(|o| o.strip_prefix("html:").unwrap_or(o));
    if output == Some("") {
        return Err(CliError::Usage("-o: the file name is missing".into()));
    }
    let page = output::html::from_saved(report)?;
    match output {
        Some(path) => {
            std::fs::write(path, page).map_err(|e| CliError::File { path: format!("-o {path}"), why: e.to_string() })
        }
        None => output::to_stdout(&page),
    }
}

/// `volley URL`: one run, on this machine or on `--workers`, reported on stdout.
fn load(args: &LoadArgs) -> Result<(), CliError> {
    run_and_report(args, None)?.outcome()
}

/// A run's report and its thresholds' verdicts.
pub(crate) struct Finished {
    pub report: Report,
    pub verdicts: Vec<Verdict>,
}

impl Finished {
    /// The exit status's reason, the most serious first: a run that could not run (1), was
    /// interrupted (130) or lost workers (3) is a broken measurement, whose verdicts cannot be
    /// trusted either way; only a complete run's failed thresholds (4) mean the target regressed.
    pub(crate) fn outcome(&self) -> Result<(), CliError> {
        self.report.outcome()?;
        let failed: Vec<String> = self.verdicts.iter().filter(|v| !v.passed).map(|v| v.failure_text()).collect();
        if failed.is_empty() { Ok(()) } else { Err(CliError::ThresholdsFailed(failed.join(", "))) }
    }
}

/// Runs the load the arguments describe (Ctrl-C stops it), prints its report and writes the
/// `-o` files. Remote workers are driven from `runtime`, or from a runtime made for the purpose.
pub(crate) fn run_and_report(args: &LoadArgs, runtime: Option<&tokio::runtime::Handle>) -> Result<Finished, CliError> {
    // Bad thresholds and unwritable outputs are found before any load starts.
    let thresholds = gate::parse_all(&args.thresholds)?;
    let baseline_reports = match args.gates.baselines.as_slice() {
        [] => None,
        paths => Some(gate::baseline::load(paths, "--baseline")?),
    };
    let regression = gate::baseline::parse_regression(args.gates.max_regression.as_deref())?;
    let grace = match &args.gates.abort_grace {
        Some(grace) => Some(options::parse_duration(grace, "--abort-grace")?),
        None => args.gates.abort_on_fail.then_some(std::time::Duration::ZERO),
    };
    let outputs = output::open_all(&args.outputs, args.hlog.as_deref())?;
    let mut hlog = args.hlog.as_deref().map(output::hlog::IntervalLog::create).transpose()?;
    let plan = options::build_plan(args)?;
    // The plan knows the mix's names: a threshold of a name it lacks is refused before any load.
    let summary = report::PlanSummary::of(&plan);
    gate::check_names(&thresholds, &summary.names, "--threshold")?;
    // Built once the run's names are known: each name both the baselines and this run have is
    // compared on its own too.
    let baseline = match &baseline_reports {
        None => None,
        Some(reports) => {
            let names = gate::baseline::shared_names(&summary.names, &[reports]);
            let compared = gate::baseline::with_names(&gate::baseline::metrics(&thresholds), &names);
            let paths = &args.gates.baselines;
            Some(gate::baseline::thresholds(reports, paths, &compared, regression, "--baseline")?)
        }
    };
    let mut watch = grace.map(|grace| gate::Watch::new(&thresholds, grace, &summary.names));
    if let Some(log) = &mut hlog {
        log.names(&summary.names);
        log.scenarios(&summary.scenarios.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
    }
    if let Some(warning) = options::rate_warning(&plan) {
        eprintln!("volley: warning: {warning}");
    }
    let endpoint = prometheus::start(args)?;
    let live = endpoint.as_ref().map(|e| &e.exporter);
    let interrupt = RunControl::new();
    signals::stop_on_ctrl_c(&interrupt);
    // The plan goes to the workers; the report keeps what it says of the run (`summary`), the
    // mix's names too.
    let fleet = if args.workers.is_empty() {
        let followers = fleet::Followers { live, watch: watch.as_mut(), hlog: hlog.as_mut() };
        let parts = vec![fleet::Part { plan, to: fleet::Destination::Local }];
        fleet::run(parts, &fleet::Access::default(), None, &interrupt, followers)
    } else {
        let places = options::worker_places(&workers_file::expand(&args.workers)?)?;
        let access = options::worker_access(args)?;
        let threads = args.threads.map(|t| usize::try_from(t).unwrap_or(usize::MAX));
        let parts = fleet::parts(fleet::split(&plan, places.len())?, places, threads)?;
        let own;
        let handle = match runtime {
            Some(handle) => handle,
            None => {
                own = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .map_err(|e| CliError::Worker(format!("cannot start the controller's runtime: {e}")))?;
                own.handle()
            }
        };
        let followers = fleet::Followers { live, watch: watch.as_mut(), hlog: hlog.as_mut() };
        fleet::run(parts, &access, Some(handle), &interrupt, followers)
    };
    let stopped_by_user = fleet.interrupted;
    let mut report = Report::from_fleet(summary, fleet);
    let mut verdicts = gate::judge(&thresholds, &report);
    if let Some(baseline) = &baseline {
        verdicts.extend(gate::baseline::judge(baseline, std::slice::from_ref(&report)));
    }
    if let Some(breach) = watch.and_then(gate::Watch::breach) {
        // Stopped for a threshold, not interrupted: the run's verdict is that threshold's (4).
        report.interrupted = stopped_by_user;
        gate::mark_aborted(&mut verdicts, &breach);
        report.aborted = Some(breach);
    }
    if let Some(live) = live {
        // The exporter and the interval log count every second, the warm-up's too.
        live.run_finished(&report.everything());
    }
    // Its last interval is what the report's totals hold beyond the seconds logged.
    let whole =
        report.duration + report.warm_up.as_ref().map_or(Duration::ZERO, |w| Duration::from_secs(w.seconds.into()));
    let logged = hlog.map_or(Ok(()), |log| log.finish(&report.everything(), whole));
    if !report.workers.iter().any(crate::report::WorkerLine::has_numbers) {
        // Nothing ran anywhere: the reason is the whole story on stderr, but a CI job still
        // finds its files, saying so.
        let written = output::write_all(outputs, &report, &verdicts);
        report.outcome()?;
        written?;
        logged?;
        return Ok(Finished { report, verdicts });
    }
    let printed = print_report(&report, &verdicts, args.json);
    let written = output::write_all(outputs, &report, &verdicts);
    if let Some(endpoint) = endpoint {
        endpoint.linger(&interrupt);
    }
    printed?;
    written?;
    logged?;
    Ok(Finished { report, verdicts })
}

pub(crate) fn print_report(report: &Report, verdicts: &[Verdict], json: bool) -> Result<(), CliError> {
    let text = if json {
        let mut s = serde_json::to_string_pretty(&output::report_json(report, verdicts)).unwrap_or_default();
        s.push('\n');
        s
    } else {
        let mut s = report::to_text(report);
        s.push_str(&gate::to_text(verdicts));
        s
    };
    output::to_stdout(&text)
}
