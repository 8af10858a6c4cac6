//! A scenario file as written: the TOML's tables and keys, each value with its span in the file
//! (`Spanned`) so that what is wrong in it is pointed at. Unknown keys are refused, so that a
//! misspelt one (`header`, `steps`) is not silently ignored. What the values mean is checked by
//! `build.rs`; only what TOML's types say (a string, a whole number) is checked here.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    /// The run's origin, when the command line gives none (or the same).
    #[serde(default)]
    pub origin: Option<Spanned<String>>,
    #[serde(default)]
    pub defaults: Option<Defaults>,
    /// `[[scenario]]`, in the file's order: the mix's order.
    #[serde(default, rename = "scenario")]
    pub scenarios: Vec<Spanned<ScenarioTable>>,
    /// `[[feeder]]`: test data for the steps' templates.
    #[serde(default, rename = "feeder")]
    pub feeders: Vec<Spanned<FeederTable>>,
}

/// One `[[feeder]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FeederTable {
    /// What slots call it by: `{{NAME.COLUMN}}`.
    pub name: Spanned<String>,
    /// Relative to the scenario file's directory unless absolute.
    pub file: Spanned<String>,
    /// `shard`, `cycle` (the default) or `random`.
    #[serde(default)]
    pub mode: Option<Spanned<String>>,
    /// `csv` or `jsonl`; by default, the file's extension.
    #[serde(default)]
    pub format: Option<Spanned<String>>,
}

/// `[defaults]`: what every step has unless it says otherwise.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Defaults {
    #[serde(default)]
    pub headers: Option<Spanned<Headers>>,
}

/// One `[[scenario]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScenarioTable {
    pub name: Spanned<String>,
    #[serde(default)]
    pub weight: Option<Spanned<Weight>>,
    /// Its users keep cookies (the default): what answers set goes back with later requests.
    #[serde(default)]
    pub cookies: Option<bool>,
    /// What its steps do with a redirect, unless a step says: `manual` by default.
    #[serde(default)]
    pub redirects: Option<Redirects>,
    /// With `follow`: how many redirects in a row a step follows (10 by default).
    #[serde(default)]
    pub max_redirects: Option<Spanned<u64>>,
    /// Each of its users starts an iteration every this long (a duration): the cadence of a
    /// real-time client. None: each starts the next when the last is done.
    #[serde(default)]
    pub pacing: Option<Spanned<String>>,
    /// `[[scenario.step]]`, sent in this order.
    #[serde(default, rename = "step")]
    pub steps: Vec<Spanned<Step>>,
}

/// One `[[scenario.step]]`: a request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Step {
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub method: Option<Spanned<String>>,
    /// A path and query, or an absolute URL of the run's origin.
    pub path: Spanned<String>,
    #[serde(default)]
    pub headers: Option<Spanned<Headers>>,
    #[serde(default)]
    pub body: Option<Spanned<String>>,
    /// Relative to the scenario file's directory unless absolute.
    #[serde(default)]
    pub body_file: Option<Spanned<String>>,
    /// `{{…}}` in the path, header values and body are templates (the default); false sends
    /// them as written (a binary body, say).
    #[serde(default)]
    pub template: Option<bool>,
    /// `[[scenario.step.check]]`: what each response must be.
    #[serde(default, rename = "check")]
    pub checks: Vec<Spanned<CheckTable>>,
    /// `[[scenario.step.extract]]`: values each response gives later steps' templates.
    #[serde(default, rename = "extract")]
    pub extractors: Vec<Spanned<ExtractTable>>,
    /// The pause after each answer: a duration ("2s"), or `{ uniform = ["1s", "3s"] }`, or
    /// `{ exponential = "2s" }` (its mean).
    #[serde(default)]
    pub think: Option<Spanned<toml::Value>>,
    /// Its user's cookie jar goes with it; by default, its scenario's `cookies`.
    #[serde(default)]
    pub cookies: Option<bool>,
    /// What it does with a redirect; by default, its scenario's.
    #[serde(default)]
    pub redirects: Option<Redirects>,
    /// With `follow`: how many redirects in a row it follows; by default, its scenario's.
    #[serde(default)]
    pub max_redirects: Option<Spanned<u64>>,
}

/// What a step does with an answer that redirects (a 3xx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Redirects {
    /// The redirect is its answer, checked as any other: what volley did before redirects
    /// could be followed, and what wrk and h2load do.
    Manual,
    /// A hop to its `Location` follows on the same connection, up to `max_redirects` in a row.
    Follow,
    /// A redirect fails the step: a check named "no redirect" that ends the iteration.
    Error,
}

/// One `[[scenario.step.extract]]`: the variable it sets, and one place it takes the value
/// from (`json`, `header`, `regex` or `cookie`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExtractTable {
    /// What later steps' templates call it: `{{var}}`.
    pub var: Spanned<String>,
    /// The body's JSON value here: an RFC 6901 pointer ("/data/token") or a dot path ("data.token").
    #[serde(default)]
    pub json: Option<Spanned<String>>,
    /// The first value of this header field (any case).
    #[serde(default)]
    pub header: Option<Spanned<String>>,
    /// A pattern (Rust's regex syntax) whose first match in the body gives the value.
    #[serde(default)]
    pub regex: Option<Spanned<String>>,
    /// With `regex`: which capture group; by default 1 if the pattern has one, else the match.
    #[serde(default)]
    pub group: Option<Spanned<u64>>,
    /// The value of the cookie of this name that a `set-cookie` field of the response sets.
    #[serde(default)]
    pub cookie: Option<Spanned<String>>,
}

/// One `[[scenario.step.check]]`: one rule, and optionally a name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckTable {
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    /// A code (200), a class ("2xx"), a range ("200-299"), or an array of them.
    #[serde(default)]
    pub status: Option<Spanned<toml::Value>>,
    /// A duration ("200ms").
    #[serde(default)]
    pub latency_below: Option<Spanned<String>>,
    /// Text the body holds.
    #[serde(default)]
    pub body_contains: Option<Spanned<String>>,
    /// A pattern (Rust's regex syntax) the body matches.
    #[serde(default)]
    pub body_matches: Option<Spanned<String>>,
    /// The body's length in bytes: a number, or a range ("1-4096").
    #[serde(default)]
    pub body_size: Option<Spanned<toml::Value>>,
    /// A JSON value the body has: an RFC 6901 pointer ("/data/0/id") or a dot path ("data.0.id").
    #[serde(default)]
    pub json: Option<Spanned<String>>,
    /// A header field the response has (any case): with `equals`, `contains` or `matches` its
    /// value must pass that too.
    #[serde(default)]
    pub header: Option<Spanned<String>>,
    /// With `json`: what the value must equal; with `header`, the text the value must be.
    #[serde(default)]
    pub equals: Option<Spanned<toml::Value>>,
    /// With `header`: text the value holds.
    #[serde(default)]
    pub contains: Option<Spanned<String>>,
    /// With `header`: a pattern the value matches.
    #[serde(default)]
    pub matches: Option<Spanned<String>>,
    /// What a failure does: "continue" (the default) or "abort" the iteration.
    #[serde(default)]
    pub on_failure: Option<Spanned<String>>,
}

/// A scenario's weight: its share of iterations. Checked as it is read, so that 0, -1 or 1.5 is
/// pointed at with what a weight may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Weight(pub u32);

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(WeightVisitor)
    }
}

struct WeightVisitor;

impl Visitor<'_> for WeightVisitor {
    type Value = Weight;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a weight: a whole number from 1 to {}", u32::MAX)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Weight, E> {
        match u32::try_from(v) {
            Ok(w) if w >= 1 => Ok(Weight(w)),
            _ => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Weight, E> {
        match u32::try_from(v) {
            Ok(w) if w >= 1 => Ok(Weight(w)),
            _ => Err(E::invalid_value(de::Unexpected::Unsigned(v), &self)),
        }
    }
}

/// A header table's names, each with its values, in the order written (`preserve_order`): a
/// value is a string, or an array of strings for a header sent several times.
#[derive(Debug, Default)]
pub(super) struct Headers(pub Vec<(Spanned<String>, Vec<Spanned<String>>)>);

impl<'de> Deserialize<'de> for Headers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeadersVisitor)
    }
}

struct HeadersVisitor;

impl<'de> Visitor<'de> for HeadersVisitor {
    type Value = Headers;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a table of header names, each with a string or an array of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Headers, A::Error> {
        let mut headers = Vec::new();
        while let Some(name) = map.next_key::<Spanned<String>>()? {
            let HeaderValues(values) = map.next_value()?;
            headers.push((name, values));
        }
        Ok(Headers(headers))
    }
}

/// One header's values: a string is one.
struct HeaderValues(Vec<Spanned<String>>);

impl<'de> Deserialize<'de> for HeaderValues {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Spanned around the whole, so that a lone string keeps its place too.
        let values = Spanned::<OneOrMany>::deserialize(deserializer)?;
        let span = values.span();
        Ok(HeaderValues(match values.into_inner() {
            OneOrMany::One(value) => vec![Spanned::new(span, value)],
            OneOrMany::Many(values) => values,
        }))
    }
}

enum OneOrMany {
    One(String),
    Many(Vec<Spanned<String>>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OneOrManyVisitor)
    }
}

struct OneOrManyVisitor;

impl<'de> Visitor<'de> for OneOrManyVisitor {
    type Value = OneOrMany;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a header value: a string, or an array of strings")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
        Ok(OneOrMany::One(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<OneOrMany, E> {
        Ok(OneOrMany::One(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element()? {
            values.push(value);
        }
        Ok(OneOrMany::Many(values))
    }
}
