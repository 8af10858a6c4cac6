//! `--scenario FILE`: weighted scenarios, each a sequence of steps (requests), read from a TOML
//! file into the engine's scenario mix (`Order::Scenarios`):
//!
//! ```toml
//! origin = "http://127.0.0.1:8080"
//! [defaults]
//! headers = { accept = "application/json" }
//! [[scenario]]
//! name = "browse"
//! weight = 80
//!   [[scenario.step]]
//!   name = "home"
//!   path = "/?q=1"
//! ```
//!
//! `file.rs` is the file as written, `build.rs` turns it into the mix's requests and scenarios,
//! `feeder.rs` reads a `[[feeder]]`'s data file.
//! A step is a request as a targets file's is, and is checked by the same rules
//! (`crate::targets`): method, headers, one origin a run, body files, names.

mod build;
mod error;
mod feeder;
mod file;

use std::path::Path;

use volley_engine::{Feeder, NamedRequest, Scenario, Target};

pub(crate) use error::ScenarioError;
use error::{Located, Problem, at_offset};

use crate::targets::{self, MAX_FILE_BYTES};

/// A scenario file read: the run's origin, and its requests with the scenarios that cover them.
#[derive(Debug)]
pub(crate) struct ScenarioFile {
    /// The origin every request goes to, as a target whose path is `/`.
    pub origin: Target,
    /// Scenario 0's steps in order, then scenario 1's, and so on.
    pub requests: Vec<NamedRequest>,
    /// In the file's order; each says how many of `requests` are its steps.
    pub scenarios: Vec<Scenario>,
    /// Its feeders with their rows, in the file's order.
    pub feeders: Vec<Feeder>,
}

/// Reads the scenario file at `path`. `url`, the command line's, gives the origin when the file
/// has none (and must be the file's when it has one); its feeders may hold `feeder_limit`
/// bytes of data together.
pub(crate) fn read(path: &Path, url: Option<&Target>, feeder_limit: u64) -> Result<ScenarioFile, ScenarioError> {
    let file = path.display().to_string();
    if let Some(url) = url
        && url.path_and_query != "/"
    {
        return Err(ScenarioError::UrlHasPath { url: url.to_string() });
    }
    let opened = std::fs::File::open(path).map_err(|why| ScenarioError::Unreadable { file: file.clone(), why })?;
    let bytes = match targets::read_at_most(opened, MAX_FILE_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(ScenarioError::TooLarge { file }),
        Err(why) => return Err(ScenarioError::Unreadable { file, why }),
    };
    let text = targets::utf8(&bytes).map_err(|at| Located::new(at, targets::Problem::NotUtf8).in_file(&file))?;
    // Editors on Windows start a file with a byte order mark, which TOML does not allow.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let parsed: file::File = toml::from_str(text).map_err(|e| toml_error(text, &e).in_file(&file))?;
    if parsed.scenarios.is_empty() {
        return Err(ScenarioError::NoScenario { file });
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    build::build(text, parsed, url, dir, feeder_limit).map_err(|located| located.in_file(&file))
}

/// The toml crate's error at its place in the file: a syntax error where the parser stopped, a
/// value of the wrong type or an unknown key where it starts, a missing key at its table.
fn toml_error(text: &str, e: &toml::de::Error) -> Located {
    let at = at_offset(text, e.span().map_or(0, |span| span.start));
    Located::new(at, Problem::Toml(targets::shown(e.message().trim())))
}

#[cfg(test)]
mod tests;
