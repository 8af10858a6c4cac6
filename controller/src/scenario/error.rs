//! What can be wrong with a scenario file: the file as a whole, or something in it, said as
//! `FILE:LINE:COLUMN: what`, as a targets file's problems are.

use volley_engine::{
    MAX_CHECKS, MAX_EXTRACTORS, MAX_FEEDERS, MAX_KEPT_CHECKS, MAX_NAMES, MAX_REDIRECTS, MAX_REQUESTS, MAX_SCENARIOS,
    MAX_VARIABLES,
};

use crate::targets::{self, At, MAX_FILE_BYTES, MAX_HEADERS};

/// Why a scenario file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScenarioError {
    #[error("--scenario {file}: {why}")]
    Unreadable { file: String, why: std::io::Error },
    #[error("--scenario {file}: the file is larger than {} MiB, the most a scenario file may be", MAX_FILE_BYTES >> 20)]
    TooLarge { file: String },
    #[error("--scenario {file}: the file has no scenario: give at least one [[scenario]] with a [[scenario.step]]")]
    NoScenario { file: String },
    /// The paths are the file's: a path on the command line would be silently dropped.
    #[error(
        "--scenario: the URL {url} has a path; with a scenario file the URL gives only the origin (scheme, host, port), the paths are the file's"
    )]
    UrlHasPath { url: String },
    #[error("{file}:{line}:{column}: {problem}")]
    At { file: String, line: usize, column: usize, problem: Problem },
}

/// A problem and where it is, before the file's name is put to it.
#[derive(Debug)]
pub(super) struct Located {
    pub at: At,
    pub problem: Problem,
}

impl Located {
    pub(super) fn new(at: At, problem: impl Into<Problem>) -> Located {
        Located { at, problem: problem.into() }
    }

    pub(super) fn in_file(self, file: &str) -> ScenarioError {
        ScenarioError::At { file: file.to_string(), line: self.at.line, column: self.at.column, problem: self.problem }
    }
}

/// Something in the file that is wrong. Text taken from the file is kept as `targets::shown`
/// makes it: the message is the one line on stderr, which a line break would break.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Problem {
    /// What a request's checks share with a targets file's: a method, a header, a URL and its
    /// origin, a name, a body file, the bodies' limit, UTF-8.
    #[error(transparent)]
    Request(#[from] targets::Problem),
    /// The TOML, or a value of the wrong type: the toml crate's words, without its position
    /// (which is the file's here).
    #[error("{0}")]
    Toml(String),
    #[error("the origin {origin} has a path: give only scheme, host and port, the paths are the steps'")]
    OriginHasPath { origin: String },
    #[error("'{path}' is neither a path (starting with /) nor an absolute URL (http:// or https://)")]
    NotAPath { path: String },
    #[error("{path} is a path, and neither the file's origin nor a URL on the command line gives its origin")]
    PathWithoutOrigin { path: String },
    #[error("a second scenario named '{name}' (the first is on line {first}): scenario names are distinct")]
    SecondScenario { name: String, first: usize },
    #[error("the scenario '{name}' has no steps: give it at least one [[scenario.step]]")]
    NoSteps { name: String },
    #[error("body and body_file cannot both be given: one body a step")]
    BodyAndBodyFile,
    #[error("more than {MAX_HEADERS} headers in one step, the defaults' counted")]
    TooManyHeaders,
    #[error("more than the {MAX_SCENARIOS} scenarios a run may have")]
    TooManyScenarios,
    #[error("more than the {MAX_REQUESTS} steps a run may have, over all its scenarios")]
    TooManySteps,
    #[error("more than the {MAX_NAMES} names a run may have: steps may share a name")]
    TooManyNames,
    #[error("a check has one rule: give status, latency_below, body_contains, body_matches, body_size, json or header")]
    CheckWithoutRule,
    #[error("a check has one rule, and this one gives both {first} and {second}: make them two checks")]
    CheckWithTwoRules { first: &'static str, second: &'static str },
    #[error("body_contains: give the text the body must hold")]
    CheckEmptyText,
    #[error("on_failure {what:?}: it is \"continue\" (the default) or \"abort\" (the iteration ends)")]
    CheckOnFailure { what: String },
    #[error("body_matches: {what}")]
    CheckPattern { what: String },
    #[error("body_size {what}: give a number of bytes (1024) or a range (\"1-4096\")")]
    CheckSize { what: String },
    #[error("equals goes with json or header, the value it compares")]
    CheckEqualsWithoutJson,
    #[error("{key} goes with header, the field whose value it tests")]
    CheckTestWithoutHeader { key: &'static str },
    #[error("a header check tests its value one way: give one of equals, contains and matches")]
    CheckTwoTests,
    #[error("header: '{name}' is not a field name")]
    CheckHeaderName { name: String },
    #[error("equals: a header's value is text: write it as a string")]
    CheckHeaderEquals,
    #[error("contains: give the text the value must hold")]
    CheckEmptyContains,
    #[error("matches: {what}")]
    CheckValuePattern { what: String },
    #[error("equals: {what}")]
    CheckEquals { what: String },
    #[error("status {what}: give a code (200), a class (\"2xx\"), a range (\"200-299\"), or an array of them")]
    CheckStatus { what: String },
    #[error("latency_below: {what}")]
    CheckLatency { what: String },
    #[error(
        "think {what}: give a duration (\"2s\"), {{ uniform = [\"1s\", \"3s\"] }} or {{ exponential = \"2s\" }} (its mean)"
    )]
    Think { what: String },
    #[error("pacing {what}: give a duration such as \"20ms\" (each user starts an iteration that often)")]
    Pacing { what: String },
    #[error(
        "pacing is every scenario's or none's (a user's cadence runs across the iterations it draws), and this scenario differs from the first, '{first}'"
    )]
    PacingOfSome { first: String },
    #[error("max_redirects = {given}: a step follows 1 to {MAX_REDIRECTS} redirects in a row")]
    MaxRedirects { given: u64 },
    #[error(
        "redirects = \"follow\" needs the step to be a template (its hops' paths are filled in): leave out template = false"
    )]
    FollowWithoutTemplate,
    #[error("a second check named '{name}' on this step: a step's check names are distinct")]
    SecondCheck { name: String },
    #[error("more than the {MAX_CHECKS} checks a run may have, counted once per step name")]
    TooManyChecks,
    #[error("more than the {MAX_KEPT_CHECKS} checks on header fields and the body a step may have")]
    TooManyKeptChecks,
    #[error("{what}")]
    Template { what: String },
    #[error(
        "`{{{{{var}}}}}` is used before a step extracts it: a variable is there for the steps after the one that extracts it, in the same scenario"
    )]
    VariableBeforeExtracted { var: String },
    #[error(
        "var: '{name}' cannot name a variable: a letter or `_`, then letters, digits and `_`, and not a built-in (vu, iteration, worker, thread, random_int, uuid, unix_ms)"
    )]
    VariableName { name: String },
    #[error("more than the {MAX_VARIABLES} variables a run may have, over all its steps' extractors")]
    TooManyVariables,
    #[error("more than the {MAX_EXTRACTORS} extractors a step may have")]
    TooManyExtractors,
    #[error("an extractor takes its value from one place: give json, header, regex or cookie")]
    ExtractWithoutSource,
    #[error(
        "an extractor takes its value from one place, and this one gives both {first} and {second}: make them two extractors"
    )]
    ExtractTwoSources { first: &'static str, second: &'static str },
    #[error("group goes with regex, the pattern whose capture group it takes")]
    ExtractGroupWithoutRegex,
    #[error("group {group}: the pattern /{pattern}/ has {groups} capture group(s); 0 is the whole match")]
    ExtractNoGroup { group: u64, pattern: String, groups: usize },
    #[error("regex: {what}")]
    ExtractPattern { what: String },
    #[error("{key}: '{name}' is not a {key} name")]
    ExtractName { key: &'static str, name: String },
    #[error("{file}, byte {offset}: {what} (to send the file as written, set template = false on the step)")]
    TemplateInBodyFile { file: String, offset: usize, what: String },
    #[error("a template in the origin: templates go in a step's path and query, header values and body")]
    TemplateInOrigin,
    #[error("more than the {MAX_FEEDERS} feeders a run may have")]
    TooManyFeeders,
    #[error("a second feeder named '{name}': feeder names are distinct")]
    SecondFeeder { name: String },
    #[error("a feeder's name is letters, digits, `_` and `-`: '{name}'")]
    FeederName { name: String },
    #[error("mode '{mode}': a feeder's mode is shard, cycle or random")]
    FeederMode { mode: String },
    #[error("format '{format}': a feeder's format is csv or jsonl")]
    FeederFormat { format: String },
    #[error("{file}: give format = \"csv\" or \"jsonl\": the file's name does not say which it is")]
    FeederFormatUnknown { file: String },
    #[error("{file}: {what}")]
    FeederFile { file: String, what: String },
    #[error("{file}:{line}: {what}")]
    FeederLine { file: String, line: u64, what: String },
}

/// Where byte `offset` of `text` is: columns count bytes, as a targets file's do.
pub(super) fn at_offset(text: &str, offset: usize) -> At {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    At::new(before.iter().filter(|&&b| b == b'\n').count() + 1, before.len() - line_start + 1)
}
