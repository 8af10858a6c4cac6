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
use std::path::{Path, PathBuf};

use crate::error::CliError;
use crate::gate::Verdict;
use crate::report::Report;

pub(crate) use json::{report_json, verdict as verdict_json};

/// Writes a report to stdout and flushes it. A reader that went away (`| head -1`: EPIPE, since
/// Rust ignores SIGPIPE) is no error, as for any Unix filter; any other failure (`> run.json` on a
/// full disk) is, because a CI job would otherwise go green without its report.
pub(crate) fn to_stdout(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::File { path: "stdout".into(), why: format!("the report could not be written: {e}") })
        }
        _ => Ok(()),
    }
}

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
/// `hlog` is `--hlog`'s file, which no `-o` may name either. Two names for one file, by any
/// spelling (`t2` and `./t2`, a symbolic link), are refused before any file is opened: the last
/// writer would win without a word.
pub(crate) fn open_all(specs: &[String], hlog: Option<&Path>) -> Result<Vec<Output>, CliError> {
    let mut parsed = Vec::with_capacity(specs.len());
    let mut seen: Vec<(FileIdentity, String)> = Vec::new();
    if let Some(hlog) = hlog {
        seen.push((FileIdentity::of(hlog), format!("--hlog {}", hlog.display())));
    }
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
        let identity = FileIdentity::of(&path);
        if let Some((_, other)) = seen.iter().find(|(seen, _)| *seen == identity) {
            return Err(bad(&format!("this file is named by {other} too")));
        }
        seen.push((identity, format!("-o '{spec}'")));
        parsed.push((format, path));
    }
    let mut outputs = Vec::with_capacity(parsed.len());
    for (format, path) in parsed {
        let opened = if format == Format::Jsonl {
            File::options().create(true).append(true).open(&path)
        } else {
            File::create(&path)
        };
        let file = opened.map_err(|e| CliError::File { path: format!("-o {}", path.display()), why: e.to_string() })?;
        outputs.push(Output { format, path, file });
    }
    Ok(outputs)
}

/// What makes two paths the same file: an existing file's device and inode (whatever links lead
/// to it), or, for a file not made yet, its folder resolved and its name.
#[derive(Debug, PartialEq)]
enum FileIdentity {
    Existing { device: u64, inode: u64 },
    ToBe(PathBuf),
}

impl FileIdentity {
    fn of(path: &Path) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(path) {
            return FileIdentity::Existing { device: meta.dev(), inode: meta.ino() };
        }
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        FileIdentity::ToBe(path.file_name().map_or(folder.clone(), |name| folder.join(name)))
    }
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
