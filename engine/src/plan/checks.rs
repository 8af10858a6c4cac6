//! Checks on a scenario step's responses: rules each response is held to, each counted as passed
//! or failed under its step's name. A failed check is not an error: the response came, and
//! counts as one; the check says whether it was the right one.
//!
//! Status and latency rules need only what the engine knows of every response, so they cost
//! nothing beyond the comparison. Rules on the body need the body: a session keeps the first
//! [`KEPT_BODY_BYTES`] of the responses of a step that has one, and only of those.

use std::ops::RangeInclusive;
use std::time::Duration;

/// The most checks a mix may have in all: each name's are counted on every thread and worker.
pub const MAX_CHECKS: usize = 1000;

/// The most checks on header fields and the body one step may have: a response's verdicts travel as one word.
pub const MAX_KEPT_CHECKS: usize = 64;

/// How much of a body is kept for its step's checks and extractors unless the plan says
/// otherwise (`Plan::kept_body_bytes`, `--keep-body`); what is beyond is counted, not kept, so
/// a rule on the text sees only this much (a size rule sees the whole length).
pub const KEPT_BODY_BYTES: usize = 64 * 1024;

/// The most a plan may keep of one body: every response of such a step may hold this much
/// while it is in flight.
pub const MAX_KEPT_BODY_BYTES: usize = 16 << 20;

/// The largest compiled pattern accepted: patterns come from files and from the wire.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// One check of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What the report calls it, under its step's name; steps sharing a name share the counts of
    /// checks of the same name.
    pub name: String,
    pub rule: Rule,
    /// What a failure does to the iteration.
    pub on_failure: OnFailure,
}

/// What a failed check does to its iteration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// Counted; the iteration goes on.
    #[default]
    Continue,
    /// Counted, and the iteration ends here (`abandoned`): its later steps are not sent. It
    /// makes its scenario a flow, whose users send one request at a time, so that no later
    /// step is already under way.
    Abort,
}

/// What a response must be for a check to pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Its status is one of these (each range inclusive; a single code is a range of one).
    Status(Vec<RangeInclusive<u16>>),
    /// Its latency (from due to the last byte, as the report's) is below this.
    LatencyBelow(Duration),
    /// Its body (as kept) holds these bytes.
    BodyContains(Vec<u8>),
    /// Its body (as kept) matches this pattern somewhere.
    BodyMatches(Pattern),
    /// Its body's whole length, in bytes, is in this range.
    BodySize(RangeInclusive<u64>),
    /// Its body (as kept) is JSON with a value at `pointer` (RFC 6901), equal to `equals` when
    /// that is given.
    Json { pointer: String, equals: Option<JsonValue> },
    /// It has a header field `name` (lowercase) with a value that passes `test`, if any does.
    Header { name: String, test: TextTest },
}

/// What a header value must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextTest {
    /// Anything: the field is there.
    Exists,
    Equals(Vec<u8>),
    Contains(Vec<u8>),
    Matches(Pattern),
}

impl TextTest {
    fn passes(&self, value: &[u8]) -> bool {
        match self {
            TextTest::Exists => true,
            TextTest::Equals(want) => value == want.as_slice(),
            TextTest::Contains(needle) => memchr::memmem::find(value, needle).is_some(),
            TextTest::Matches(pattern) => pattern.is_match(value),
        }
    }
}

/// What a session kept of a response, as the rules on it read it.
pub(crate) trait KeptResponse {
    /// The kept part of the body.
    fn body(&self) -> &[u8];
    /// The body's whole length.
    fn body_len(&self) -> u64;
    /// Whether a header field named `name` (lowercase) has a value that `pass` accepts.
    fn any_header(&self, name: &[u8], pass: &mut dyn FnMut(&[u8]) -> bool) -> bool;
}

/// A compiled `body_matches` pattern, compared by its text.
#[derive(Debug, Clone)]
pub struct Pattern(regex::bytes::Regex);

impl Pattern {
    /// Compiles `text`, with a bound on the size of what it compiles to.
    pub fn new(text: &str) -> Result<Pattern, String> {
        regex::bytes::RegexBuilder::new(text)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map(Pattern)
            .map_err(|e| e.to_string().lines().last().unwrap_or("bad pattern").trim().to_string())
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub(crate) fn is_match(&self, haystack: &[u8]) -> bool {
        self.0.is_match(haystack)
    }

    /// Capture group `group` of the first match in `haystack`, if it matched and the group took
    /// part.
    pub(crate) fn captures<'h>(&self, haystack: &'h [u8], group: usize) -> Option<&'h [u8]> {
        self.0.captures(haystack)?.get(group).map(|m| m.as_bytes())
    }

    /// How many capture groups it has, the whole match (group 0) included.
    pub fn groups(&self) -> usize {
        self.0.captures_len()
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Pattern {}

/// A JSON value a check compares with.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonValue(pub serde_json::Value);

// JSON has no NaN, so its equality is an equivalence.
impl Eq for JsonValue {}

/// A JSON path as written, as an RFC 6901 pointer: one starting with `/` (or empty, the whole
/// document) is one already; otherwise it is a dot path as loadgen-rs writes it,
/// `data.items.0.id`, each segment a key or an array index.
pub fn json_pointer(path: &str) -> String {
    if path.is_empty() || path.starts_with('/') {
        return path.to_string();
    }
    path.split('.').fold(String::with_capacity(path.len() + 1), |mut out, segment| {
        out.push('/');
        out.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        out
    })
}

impl Rule {
    /// Whether the rule needs what a session keeps of a response (its header fields or its
    /// body); else its status and latency do.
    pub fn needs_kept(&self) -> bool {
        self.needs_headers() || self.needs_body()
    }

    /// Whether the rule reads the header fields.
    pub fn needs_headers(&self) -> bool {
        matches!(self, Rule::Header { .. })
    }

    /// Whether the rule reads the body.
    pub fn needs_body(&self) -> bool {
        matches!(self, Rule::BodyContains(_) | Rule::BodyMatches(_) | Rule::BodySize(_) | Rule::Json { .. })
    }

    /// Whether a response of `status` that took `latency` passes. A rule on what a session
    /// keeps is judged there, by [`Rule::passes_kept`]; here it fails.
    pub fn passes(&self, status: u16, latency: Duration) -> bool {
        match self {
            Rule::Status(ranges) => ranges.iter().any(|r| r.contains(&status)),
            Rule::LatencyBelow(bound) => latency < *bound,
            _ => false,
        }
    }

    /// Whether what was kept of a response passes; `json` is the kept body parsed as JSON,
    /// parsed at most once per response by whichever rule asks first.
    pub(crate) fn passes_kept(&self, kept: &impl KeptResponse, json: &mut ParsedJson) -> bool {
        match self {
            Rule::BodyContains(needle) => memchr::memmem::find(kept.body(), needle).is_some(),
            Rule::BodyMatches(pattern) => pattern.is_match(kept.body()),
            Rule::BodySize(range) => range.contains(&kept.body_len()),
            Rule::Json { pointer, equals } => {
                let found = json.get(kept.body()).and_then(|doc| doc.pointer(pointer));
                match (found, equals) {
                    (None, _) => false,
                    (Some(_), None) => true,
                    (Some(value), Some(JsonValue(want))) => value == want,
                }
            }
            Rule::Header { name, test } => kept.any_header(name.as_bytes(), &mut |value| test.passes(value)),
            Rule::Status(_) | Rule::LatencyBelow(_) => false,
        }
    }

    /// The name a check of this rule has unless the file gives one: `status is 200`,
    /// `status in 200-299, 304`, `latency < 200ms`.
    pub fn default_name(&self) -> String {
        match self {
            Rule::Status(ranges) => {
                let shown: Vec<String> = ranges
                    .iter()
                    .map(|r| {
                        if r.start() == r.end() { r.start().to_string() } else { format!("{}-{}", r.start(), r.end()) }
                    })
                    .collect();
                match ranges.as_slice() {
                    [one] if one.start() == one.end() => format!("status is {}", shown[0]),
                    _ => format!("status in {}", shown.join(", ")),
                }
            }
            Rule::LatencyBelow(bound) => format!("latency < {}", shown_duration(*bound)),
            Rule::BodyContains(needle) => format!("body contains {:?}", String::from_utf8_lossy(needle)),
            Rule::BodyMatches(pattern) => format!("body matches /{}/", one_line(pattern.as_str())),
            Rule::BodySize(range) if range.start() == range.end() => format!("body size is {}", range.start()),
            Rule::BodySize(range) => format!("body size in {}-{}", range.start(), range.end()),
            Rule::Json { pointer, equals: None } => format!("json {} exists", one_line(pointer)),
            Rule::Json { pointer, equals: Some(JsonValue(value)) } => {
                format!("json {} == {value}", one_line(pointer))
            }
            Rule::Header { name, test: TextTest::Exists } => format!("header {name} exists"),
            Rule::Header { name, test: TextTest::Equals(v) } => {
                format!("header {name} == {:?}", String::from_utf8_lossy(v))
            }
            Rule::Header { name, test: TextTest::Contains(v) } => {
                format!("header {name} contains {:?}", String::from_utf8_lossy(v))
            }
            Rule::Header { name, test: TextTest::Matches(p) } => {
                format!("header {name} matches /{}/", one_line(p.as_str()))
            }
        }
    }
}

/// Text as one line of a name: control characters (a pattern's newline in `(?x)` mode, say)
/// written as escapes, everything else as it is.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// A body parsed as JSON once, when a rule first asks: not parsed, parsed, or not JSON.
#[derive(Debug, Default)]
pub(crate) enum ParsedJson {
    #[default]
    NotYet,
    Document(serde_json::Value),
    NotJson,
}

impl ParsedJson {
    pub(super) fn get(&mut self, kept: &[u8]) -> Option<&serde_json::Value> {
        if matches!(self, ParsedJson::NotYet) {
            *self = match serde_json::from_slice(kept) {
                Ok(doc) => ParsedJson::Document(doc),
                Err(_) => ParsedJson::NotJson,
            };
        }
        match self {
            ParsedJson::Document(doc) => Some(doc),
            ParsedJson::NotYet | ParsedJson::NotJson => None,
        }
    }
}

/// A bound as a person writes it: `200ms`, `1.5s`, `250us`.
fn shown_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos.is_multiple_of(1_000_000_000) {
        format!("{}s", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{}us", nanos / 1_000)
    } else {
        format!("{nanos}ns")
    }
}

/// How many responses passed and failed one check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckCounts {
    pub passed: u64,
    pub failed: u64,
}

impl CheckCounts {
    /// Adds `other`'s, saturating: a worker's counts are checked against its ok responses
    /// before they are merged, so only a lie could reach the top.
    pub fn merge(&mut self, other: &CheckCounts) {
        self.passed = self.passed.saturating_add(other.passed);
        self.failed = self.failed.saturating_add(other.failed);
    }

    /// Responses judged, saturating.
    pub fn total(&self) -> u64 {
        self.passed.saturating_add(self.failed)
    }

    /// The share of judged responses that passed, from 0 to 1; none when nothing was judged,
    /// rather than a share a `checks>X%` gate would pass.
    pub fn share_passed(&self) -> Option<f64> {
        match self.total() {
            0 => None,
            total => Some(self.passed as f64 / total as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_rule_passes_codes_in_any_of_its_ranges_and_no_other() {
        let rule = Rule::Status(vec![200..=299, 304..=304]);
        let ms = Duration::from_millis(1);
        for status in [200, 204, 299, 304] {
            assert!(rule.passes(status, ms), "{status}");
        }
        for status in [199, 300, 303, 305, 404, 500] {
            assert!(!rule.passes(status, ms), "{status}");
        }
    }

    #[test]
    fn a_latency_rule_passes_only_below_its_bound() {
        let rule = Rule::LatencyBelow(Duration::from_millis(200));
        assert!(rule.passes(200, Duration::from_micros(199_999)));
        assert!(!rule.passes(200, Duration::from_millis(200)));
        assert!(!rule.passes(200, Duration::from_secs(3)));
    }

    #[test]
    fn default_names_say_the_rule() {
        assert_eq!(Rule::Status(vec![200..=200]).default_name(), "status is 200");
        assert_eq!(Rule::Status(vec![200..=299, 304..=304]).default_name(), "status in 200-299, 304");
        assert_eq!(Rule::Status(vec![201..=201, 202..=202]).default_name(), "status in 201, 202");
        assert_eq!(Rule::LatencyBelow(Duration::from_millis(200)).default_name(), "latency < 200ms");
        assert_eq!(Rule::LatencyBelow(Duration::from_micros(1500)).default_name(), "latency < 1500us");
        assert_eq!(Rule::LatencyBelow(Duration::from_secs(2)).default_name(), "latency < 2s");
    }

    /// A response as a test writes it: the kept body, its length, and header fields.
    struct Seen<'a>(&'a [u8], u64, &'a [(&'a str, &'a str)]);

    impl KeptResponse for Seen<'_> {
        fn body(&self) -> &[u8] {
            self.0
        }
        fn body_len(&self) -> u64 {
            self.1
        }
        fn any_header(&self, name: &[u8], pass: &mut dyn FnMut(&[u8]) -> bool) -> bool {
            self.2.iter().any(|(n, v)| n.as_bytes() == name && pass(v.as_bytes()))
        }
    }

    fn body(rule: &Rule, kept: &[u8], len: u64) -> bool {
        rule.passes_kept(&Seen(kept, len, &[]), &mut ParsedJson::default())
    }

    #[test]
    fn header_rules_pass_when_any_field_of_the_name_does() {
        let fields = [("content-type", "application/json"), ("set-cookie", "a=1"), ("set-cookie", "sid=x9")];
        let header = |name: &str, test: TextTest| {
            Rule::Header { name: name.into(), test }.passes_kept(&Seen(b"", 0, &fields), &mut ParsedJson::default())
        };
        assert!(header("content-type", TextTest::Exists));
        assert!(!header("location", TextTest::Exists));
        assert!(header("content-type", TextTest::Equals(b"application/json".to_vec())));
        assert!(!header("content-type", TextTest::Equals(b"application/JSON".to_vec())));
        assert!(header("content-type", TextTest::Contains(b"json".to_vec())));
        assert!(header("set-cookie", TextTest::Matches(Pattern::new("^sid=[a-z0-9]+$").expect("pattern"))));
        assert!(!header("set-cookie", TextTest::Matches(Pattern::new("^b=").expect("pattern"))));
        let named = |test| Rule::Header { name: "content-type".into(), test }.default_name();
        assert_eq!(named(TextTest::Exists), "header content-type exists");
        assert_eq!(named(TextTest::Equals(b"a".to_vec())), r#"header content-type == "a""#);
        assert_eq!(named(TextTest::Contains(b"json".to_vec())), r#"header content-type contains "json""#);
        assert_eq!(named(TextTest::Matches(Pattern::new("j.*").expect("p"))), "header content-type matches /j.*/");
        // A name is one line of plain text, whatever the rule holds: workers refuse others.
        let spread = Rule::BodyMatches(Pattern::new("(?x) a\n\tb").expect("pattern")).default_name();
        assert!(!spread.chars().any(char::is_control), "{spread}");
        let pointer = Rule::Json { pointer: "/a\u{7}".into(), equals: None }.default_name();
        assert!(!pointer.chars().any(char::is_control), "{pointer}");
    }

    #[test]
    fn body_rules_look_at_what_was_kept_and_the_size_rule_at_the_whole_length() {
        let doc = br#"{"data":{"items":[{"id":7,"tag":"a/b"}]},"token":"t-1"}"#;
        assert!(body(&Rule::BodyContains(b"t-1".to_vec()), doc, 60));
        assert!(!body(&Rule::BodyContains(b"t-2".to_vec()), doc, 60));
        let pattern = Pattern::new(r#""token":"t-\d+""#).expect("pattern");
        assert!(body(&Rule::BodyMatches(pattern.clone()), doc, 60));
        assert!(!body(&Rule::BodyMatches(pattern), b"{}", 2));
        assert!(body(&Rule::BodySize(1..=100), b"", 100), "the length, not what was kept");
        assert!(!body(&Rule::BodySize(1..=100), doc, 101));
        let json = |path: &str, equals: Option<serde_json::Value>| Rule::Json {
            pointer: json_pointer(path),
            equals: equals.map(JsonValue),
        };
        assert!(body(&json("data.items.0.id", None), doc, 60));
        assert!(body(&json("/data/items/0/id", Some(serde_json::json!(7))), doc, 60));
        assert!(!body(&json("data.items.0.id", Some(serde_json::json!("7"))), doc, 60), "7 is not \"7\"");
        assert!(body(&json("data.items.0.tag", Some(serde_json::json!("a/b"))), doc, 60));
        assert!(!body(&json("data.items.1", None), doc, 60));
        assert!(!body(&json("token", None), &doc[..30], 60), "a body cut short is not JSON");
        assert!(!body(&json("", None), b"\x00\xff binary", 9));
    }

    #[test]
    fn the_json_of_a_body_is_parsed_once_for_all_its_rules() {
        let mut parsed = ParsedJson::default();
        let rule = Rule::Json { pointer: "/a".into(), equals: None };
        assert!(rule.passes_kept(&Seen(br#"{"a":1}"#, 7, &[]), &mut parsed));
        // The same response's next rule reads the parsed document, not the bytes.
        assert!(rule.passes_kept(&Seen(b"", 7, &[]), &mut parsed));
    }

    #[test]
    fn dot_paths_become_pointers_and_pointers_stay() {
        assert_eq!(json_pointer("data.items.0.id"), "/data/items/0/id");
        assert_eq!(json_pointer("a/b.c~d"), "/a~1b/c~0d");
        assert_eq!(json_pointer("/data/0"), "/data/0");
        assert_eq!(json_pointer(""), "");
    }

    #[test]
    fn a_pattern_too_large_to_compile_is_refused_with_a_reason() {
        assert!(Pattern::new("(").is_err());
        let err = Pattern::new(r"\w{1000}\w{1000}\w{1000}").expect_err("too large");
        assert!(err.contains("exceed"), "{err}");
    }

    #[test]
    fn body_rules_have_default_names() {
        assert_eq!(Rule::BodyContains(b"ok".to_vec()).default_name(), r#"body contains "ok""#);
        assert_eq!(Rule::BodyMatches(Pattern::new("a+").expect("pattern")).default_name(), "body matches /a+/");
        assert_eq!(Rule::BodySize(1..=4096).default_name(), "body size in 1-4096");
        assert_eq!(Rule::BodySize(0..=0).default_name(), "body size is 0");
        let id = Rule::Json { pointer: "/id".into(), equals: Some(JsonValue(serde_json::json!("x"))) };
        assert_eq!(id.default_name(), r#"json /id == "x""#);
        assert_eq!(Rule::Json { pointer: "/id".into(), equals: None }.default_name(), "json /id exists");
    }

    #[test]
    fn counts_merge_by_adding() {
        let mut a = CheckCounts { passed: 3, failed: 1 };
        a.merge(&CheckCounts { passed: 2, failed: 5 });
        assert_eq!(a, CheckCounts { passed: 5, failed: 6 });
        assert_eq!(a.total(), 11);
    }

    #[test]
    fn the_share_passed_is_none_until_something_is_judged() {
        assert_eq!(CheckCounts::default().share_passed(), None);
        assert_eq!(CheckCounts { passed: 3, failed: 1 }.share_passed(), Some(0.75));
        assert_eq!(CheckCounts { passed: 0, failed: 2 }.share_passed(), Some(0.0));
    }
}
