//! volley's command line: parses arguments, runs the load, prints the report. Every error of
//! the command ends here, as one line on stderr and a non-zero exit.

mod cli;
mod demo;
mod error;
mod options;
mod report;
mod signals;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use volley_engine::RunControl;

use crate::cli::{Cli, Command, LoadArgs};
use crate::error::CliError;
use crate::report::Report;

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
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
        Some(Command::Serve { listen }) => serve(listen),
        Some(Command::Demo) => demo::run(),
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

fn serve(listen: std::net::SocketAddr) -> Result<(), CliError> {
    let config = volley_serve::ServeConfig { addr: listen, ..Default::default() };
    volley_serve::serve_forever(config).map_err(|e| CliError::Serve(e.to_string()))
}

/// `volley URL`: one run on this machine, reported on stdout.
fn load(args: &LoadArgs) -> Result<(), CliError> {
    run_and_report(args)?.outcome()
}

/// Runs the load the arguments describe (Ctrl-C stops it) and prints its report.
pub(crate) fn run_and_report(args: &LoadArgs) -> Result<Report, CliError> {
    let plan = options::build_plan(args)?;
    let control = RunControl::new();
    signals::stop_on_ctrl_c(&control);
    let result = volley_engine::run(&plan, &control, &mut |_| {})?;
    let report = Report::from_run(plan.target.to_string(), result);
    print_report(&report, args.json);
    Ok(report)
}

pub(crate) fn print_report(report: &Report, json: bool) {
    let text = if json {
        let mut s = serde_json::to_string_pretty(&report::to_json(report)).unwrap_or_default();
        s.push('\n');
        s
    } else {
        report::to_text(report)
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a panic.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
