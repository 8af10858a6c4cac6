//! `-o FORMAT:FILE`: the report written to files for CI, besides what stdout shows. Every file is
//! opened before the load starts, so a path that cannot be written fails the command at once
//! rather than after the run.

mod csv;
pub(crate) mod hlog;
pub(crate) mod html;
mod json;
mod junit;
mod markdown;

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::error::CliError;
use crate::gate::Verdict;
use crate::report::Report;

pub(crate) use json::{report_json, verdict as verdict_json};

/// The formats `-o` writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    /// The `-j` report.
    Json,
    /// The `-j` report on one line, appended: one line per run, for sweeps.
    Jsonl,
    /// The per-second series.
    Csv,
    /// One testcase per threshold, and one for the run itself.
    Junit,
    /// A Markdown summary, for CI step summaries.
    Markdown,
    /// A self-contained page with charts.
    Html,
}

const FORMATS: &str = "json, jsonl, csv, junit, md, html";

/// One `-o`, its file already open.
pub(crate) struct Output {
    format: Format,
    path: PathBuf,
    file: File,
}

/// Parses every `-o FORMAT:FILE` and opens the files (jsonl appends, the others replace).
pub(crate) fn open_all(specs: &[String]) -> Result<Vec<Output>, CliError> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut outputs = Vec::with_capacity(specs.len());
    for spec in specs {
        let bad = |why: &str| CliError::Usage(format!("-o '{spec}': {why}"));
        let (format, path) = spec.split_once(':').ok_or_else(|| bad("expected FORMAT:FILE, e.g. junit:gates.xml"))?;
        let format = match format.to_ascii_lowercase().as_str() {
            "json" => Format::Json,
            "jsonl" => Format::Jsonl,
            "csv" => Format::Csv,
            "junit" => Format::Junit,
            "md" | "markdown" => Format::Markdown,
            "html" => Format::Html,
            _ => return Err(bad(&format!("unknown format '{format}' (known: {FORMATS})"))),
        };
        if path.is_empty() {
            return Err(bad("the file name is missing"));
        }
        let path = PathBuf::from(path);
        if seen.contains(&path) {
            return Err(bad("this file is named by another -o too"));
        }
        let opened = if format == Format::Jsonl {
            File::options().create(true).append(true).open(&path)
        } else {
            File::create(&path)
        };
        let file = opened.map_err(|e| CliError::File { path: format!("-o {}", path.display()), why: e.to_string() })?;
        seen.push(path.clone());
        outputs.push(Output { format, path, file });
    }
    Ok(outputs)
}

/// Writes the report in every format asked for; the first file that fails is the error.
pub(crate) fn write_all(outputs: Vec<Output>, report: &Report, verdicts: &[Verdict]) -> Result<(), CliError> {
    for mut output in outputs {
        let text = match output.format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(&report_json(report, verdicts)).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Jsonl => {
                let mut s = serde_json::to_string(&report_json(report, verdicts)).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Csv => csv::series(report),
            Format::Junit => junit::testsuites(report, verdicts),
            Format::Markdown => markdown::summary(report, verdicts),
            Format::Html => html::page(&report_json(report, verdicts))
                .map_err(|e| CliError::File { path: format!("-o {}", output.path.display()), why: e.to_string() })?,
        };
        output
            .file
            .write_all(text.as_bytes())
            .and_then(|()| output.file.flush())
            .map_err(|e| CliError::File { path: format!("-o {}", output.path.display()), why: e.to_string() })?;
    }
    Ok(())
}
