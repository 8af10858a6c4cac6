//! What a session keeps of a response whose step has checks on its header fields or body,
//! extractors, a cookie jar or redirects to follow, and those checks' verdicts, extractors'
//! values, the cookies it set and where it redirects.
//!
//! Only such a step's responses are kept, and only what its checks, extractors, jar and
//! redirects read: the final head's fields (names lowercased; only `set-cookie` and `location`
//! when only the jar and redirects read them),
//! and the first [`KEPT_BODY_BYTES`] of the body with its whole length. When the response is complete the session judges it
//! ([`KeptChecks::judge`]) and tells the loop the verdicts in one word and the values taken
//! ([`Event::Judged`](super::Event::Judged)), so nothing else kept ever leaves the session and
//! every other response streams through as before.

use std::sync::Arc;

use crate::plan::{Extractor, KEPT_BODY_BYTES, KeptResponse, LOCATION, ParsedJson, Rule, SET_COOKIE, Source};

/// The most bytes of header fields kept of one response; fields beyond are not kept (a head is
/// 64 KiB at most on HTTP/1.1).
const KEPT_FIELD_BYTES: usize = 64 * 1024;

/// One request's checks on what is kept, in the order of its checks (bit `j` of a verdict is
/// the `j`th of them), its extractors, and which fields its jar and redirects read.
#[derive(Debug)]
pub(crate) struct KeptChecks {
    rules: Box<[Rule]>,
    extractors: Box<[Extraction]>,
    /// Which header fields are kept.
    headers: Fields,
    body: bool,
    /// How much of a body is kept, when it is.
    body_bound: usize,
}

/// Which header fields of a response are kept: all of them (a check or extractor reads
/// them), or only `set-cookie` (for a jar) and `location` (for redirects to follow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    pub all: bool,
    pub set_cookie: bool,
    pub location: bool,
}

impl Fields {
    /// None of them.
    pub(crate) const NONE: Fields = Fields { all: false, set_cookie: false, location: false };

    /// Whether field `name` is kept.
    fn keeps(&self, name: &[u8]) -> bool {
        self.all
            || (self.set_cookie && name.eq_ignore_ascii_case(SET_COOKIE))
            || (self.location && name.eq_ignore_ascii_case(LOCATION))
    }

    fn any(&self) -> bool {
        self.all || self.set_cookie || self.location
    }
}

/// An extractor as a session runs it: into which variable, from where, and whether the value
/// goes into a path (so it may hold no blank).
#[derive(Debug)]
struct Extraction {
    var: u16,
    from: Source,
    in_path: bool,
}

/// What a response gave its user: each extractor's variable and its value (None when it found
/// none), in the extractors' order, the values of its `set-cookie` fields when its jar takes
/// them, and its `location` when its redirects are followed. Empty (no allocation) without
/// extractors, cookies or a location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Extracted {
    pub values: Vec<(u16, Option<Vec<u8>>)>,
    pub set_cookies: Vec<Vec<u8>>,
    pub location: Option<Vec<u8>>,
}

/// Per request, its checks on what is kept if it has any; empty when no request has one.
pub(crate) type KeptCheckTable = Arc<[Option<KeptChecks>]>;

/// The checks of `request` on what is kept, if it has any.
#[inline]
pub(crate) fn kept_checks(table: &KeptCheckTable, request: u32) -> Option<&KeptChecks> {
    table.get(request as usize).and_then(Option::as_ref)
}

/// The verdicts on `kept`, what was kept of the response to `request`, and the values its
/// extractors took; none when the request has no checks on what is kept, or they have nothing
/// to say ([`KeptChecks::judge`]). What HTTP/1.1, HTTP/2 and HTTP/3 each send as their
/// `Judged` event.
pub(crate) fn judge(table: &KeptCheckTable, request: u32, kept: &Kept) -> Option<(u64, Extracted)> {
    kept_checks(table, request)?.judge(kept)
}

impl KeptChecks {
    /// A request's checks on what is kept, from all its rules, its extractors (`variables`:
    /// the plan's, in order; `in_path`: per variable, some step's path uses it) and the fields
    /// its jar and redirects read (`reads`: `set_cookie` and `location`); none when it has none
    /// of them.
    pub(crate) fn of<'a>(
        rules: impl Iterator<Item = &'a Rule>,
        extractors: &[Extractor],
        variables: &[String],
        in_path: &[bool],
        reads: Fields,
    ) -> Option<KeptChecks> {
        let rules: Box<[Rule]> = rules.filter(|r| r.needs_kept()).cloned().collect();
        let extractors: Box<[Extraction]> = extractors
            .iter()
            .filter_map(|e| {
                let var = variables.iter().position(|v| *v == e.var)?;
                let in_path = in_path.get(var).copied().unwrap_or(false);
                Some(Extraction { var: u16::try_from(var).ok()?, from: e.from.clone(), in_path })
            })
            .collect();
        let all = rules.iter().any(Rule::needs_headers) || extractors.iter().any(|e| e.from.needs_headers());
        let headers = Fields { all, ..reads };
        let body = rules.iter().any(Rule::needs_body) || extractors.iter().any(|e| e.from.needs_body());
        (!rules.is_empty() || !extractors.is_empty() || reads.any()).then_some(KeptChecks {
            rules,
            extractors,
            headers,
            body,
            body_bound: KEPT_BODY_BYTES,
        })
    }

    /// The same, keeping at most `bound` bytes of a body (the plan's `kept_body_bytes`).
    pub(crate) fn keeping_bodies_up_to(mut self, bound: usize) -> KeptChecks {
        self.body_bound = bound;
        self
    }

    /// Whether its rules, jar or redirects read the header fields: a session keeps them only
    /// then.
    pub(crate) fn wants_headers(&self) -> bool {
        self.headers.any()
    }

    /// Whether only its jar reads the header fields, and only `set-cookie` is kept of them.
    pub(crate) fn only_set_cookie(&self) -> bool {
        self.headers == Fields { set_cookie: true, ..Fields::NONE }
    }

    /// The fields a jar or redirects read, when that is all these checks read (no rule, no
    /// extractor): a response without those fields then has nothing to judge, and need not
    /// be kept at all until its head shows one of them.
    pub(crate) fn only_fields(&self) -> Option<Fields> {
        (self.rules.is_empty() && self.extractors.is_empty() && !self.body && !self.headers.all).then_some(self.headers)
    }

    /// `kept`, empty, ready for a response to the request: it keeps the body only if a rule
    /// reads it, and only the fields something reads.
    pub(crate) fn prepare(&self, kept: &mut Kept) {
        kept.clear();
        kept.body_bound = if self.body { self.body_bound } else { 0 };
        kept.fields_kept = self.headers;
    }

    /// The verdicts on a complete response (bit `j` set when check `j` failed), what its
    /// extractors took, and the cookies it set. The body is parsed as JSON at most once. None
    /// when there is nothing to say: no rules, no extractors and no field kept (only a jar or
    /// redirects read the head, and it had neither field), as for most responses of a scenario
    /// with a jar; judging those cost a mix over HTTP/3 about 2% of its CPU.
    pub(crate) fn judge(&self, kept: &Kept) -> Option<(u64, Extracted)> {
        if self.rules.is_empty() && self.extractors.is_empty() && kept.lines.is_empty() {
            return None;
        }
        let mut json = ParsedJson::default();
        let failed = self
            .rules
            .iter()
            .enumerate()
            .fold(0, |failed, (j, rule)| if rule.passes_kept(kept, &mut json) { failed } else { failed | 1 << j });
        let values = self.extractors.iter().map(|e| (e.var, e.from.extract(kept, &mut json, e.in_path))).collect();
        let mut set_cookies = Vec::new();
        if self.headers.set_cookie {
            kept.any_header(SET_COOKIE, &mut |value| {
                set_cookies.push(value.to_vec());
                false
            });
        }
        let mut location = None;
        if self.headers.location {
            kept.any_header(LOCATION, &mut |value| {
                location = Some(value.to_vec());
                true
            });
        }
        Some((failed, Extracted { values, set_cookies, location }))
    }
}

/// What is kept of a response: its header fields, the kept part of its body and the body's
/// whole length.
#[derive(Debug)]
pub(crate) struct Kept {
    body: Vec<u8>,
    len: u64,
    /// How much of the body is kept: 0 when nothing reads it.
    body_bound: usize,
    fields_kept: Fields,
    /// Names (lowercased) and values of the fields, one after another.
    fields: Vec<u8>,
    /// Per field: where its name starts, where its value starts and where it ends, in `fields`.
    lines: Vec<(u32, u32, u32)>,
}

impl Default for Kept {
    fn default() -> Self {
        Kept {
            body: Vec::new(),
            len: 0,
            body_bound: KEPT_BODY_BYTES,
            fields_kept: Fields { all: true, ..Fields::NONE },
            fields: Vec::new(),
            lines: Vec::new(),
        }
    }
}

impl Kept {
    /// Empty, keeping only `fields` of a head and nothing of the body: what [`KeptChecks::only_fields`]
    /// reads.
    pub(crate) fn of_fields(fields: Fields) -> Kept {
        Kept { body_bound: 0, fields_kept: fields, ..Kept::default() }
    }

    /// The next bytes of the body: counted, and kept while there is room.
    #[inline]
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.len = self.len.saturating_add(bytes.len() as u64);
        let room = self.body_bound.saturating_sub(self.body.len());
        if room > 0 {
            self.body.extend_from_slice(bytes.get(..room).unwrap_or(bytes));
        }
    }

    /// Whether a field named `name` would be kept: a decoder need not decode the value of one
    /// that is not.
    pub(crate) fn keeps_field(&self, name: &[u8]) -> bool {
        self.fields_kept.keeps(name)
    }

    /// Whether every field is kept (a check or extractor reads them), not only those a jar
    /// and redirects read.
    pub(crate) fn keeps_every_field(&self) -> bool {
        self.fields_kept.all
    }

    /// A header field of the final head, kept while there is room.
    pub(crate) fn push_field(&mut self, name: &[u8], value: &[u8]) {
        if !self.fields_kept.keeps(name) || self.fields.len() + name.len() + value.len() > KEPT_FIELD_BYTES {
            return;
        }
        let start = self.fields.len() as u32;
        self.fields.extend(name.iter().map(u8::to_ascii_lowercase));
        let value_start = self.fields.len() as u32;
        self.fields.extend_from_slice(value);
        self.lines.push((start, value_start, self.fields.len() as u32));
    }

    /// Forgets the fields kept: an informational head's, before the final one.
    pub(crate) fn clear_fields(&mut self) {
        self.fields.clear();
        self.lines.clear();
    }

    /// Empty again, keeping the memory for the next response.
    pub(crate) fn clear(&mut self) {
        self.body.clear();
        self.len = 0;
        self.clear_fields();
    }
}

impl KeptResponse for Kept {
    fn body(&self) -> &[u8] {
        &self.body
    }

    fn body_len(&self) -> u64 {
        self.len
    }

    fn any_header(&self, name: &[u8], pass: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        let field = |&(at, value, end): &(u32, u32, u32)| {
            (self.fields.get(at as usize..value as usize), self.fields.get(value as usize..end as usize))
        };
        self.lines.iter().map(field).any(|f| matches!(f, (Some(n), Some(v)) if n == name && pass(v)))
    }
}

/// Spare kept responses per connection.
const SPARES: usize = 4;

/// The most memory a spare keeps for its body and for its fields.
const SPARE_CAPACITY: usize = 16 * 1024;

/// Kept bodies no response is using, so that a connection's responses reuse their memory.
#[derive(Debug, Default)]
pub(crate) struct SpareKept(Vec<Kept>);

impl SpareKept {
    /// An empty one.
    pub(crate) fn take(&mut self) -> Kept {
        self.0.pop().unwrap_or_default()
    }

    /// Back for another response. A connection keeps at most a few, each at most
    /// [`SPARE_CAPACITY`] of body and of fields, so that idle spares of large responses do not
    /// hold their memory (a response being kept holds what it needs).
    pub(crate) fn give(&mut self, mut kept: Kept) {
        if self.0.len() < SPARES {
            kept.clear();
            kept.body.shrink_to(SPARE_CAPACITY);
            kept.fields.shrink_to(SPARE_CAPACITY);
            self.0.push(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{KeptResponse, Pattern};

    const JAR: Fields = Fields { set_cookie: true, ..Fields::NONE };

    #[test]
    fn a_body_is_kept_up_to_the_bound_and_counted_whole() {
        let mut kept = Kept::default();
        let chunk = vec![b'x'; 40_000];
        kept.push(&chunk);
        kept.push(&chunk);
        assert_eq!(kept.body().len(), KEPT_BODY_BYTES);
        assert_eq!(kept.body_len(), 80_000);
        kept.clear();
        assert_eq!((kept.body().len(), kept.body_len()), (0, 0));
    }

    #[test]
    fn verdicts_set_the_bit_of_each_failed_check_on_the_body_only() {
        let rules = [
            Rule::Status(vec![200..=200]),
            Rule::BodyContains(b"token".to_vec()),
            Rule::BodySize(0..=3),
            Rule::Json { pointer: "/token".into(), equals: None },
            Rule::BodyMatches(Pattern::new("^\\{").expect("pattern")),
        ];
        let checks = KeptChecks::of(rules.iter(), &[], &[], &[], Fields::NONE).expect("rules on the body");
        let mut kept = Kept::default();
        kept.push(br#"{"token":"#);
        kept.push(br#""t"}"#);
        // The size (bit 1) fails; contains, the JSON value and the pattern pass.
        assert_eq!(checks.judge(&kept).expect("a verdict"), (0b0010, Extracted::default()));
        assert!(KeptChecks::of(rules[..1].iter(), &[], &[], &[], Fields::NONE).is_none());
    }

    #[test]
    fn a_plan_may_keep_more_or_less_of_a_body_than_the_default() {
        let rules = [Rule::BodyContains(b"end".to_vec())];
        let body = [vec![b'x'; KEPT_BODY_BYTES], b"end".to_vec()].concat();
        for (bound, passes) in [(KEPT_BODY_BYTES, false), (KEPT_BODY_BYTES + 3, true), (10, false)] {
            let checks =
                KeptChecks::of(rules.iter(), &[], &[], &[], Fields::NONE).expect("a rule").keeping_bodies_up_to(bound);
            let mut kept = Kept::default();
            checks.prepare(&mut kept);
            kept.push(&body[..1000]);
            kept.push(&body[1000..]);
            assert_eq!(kept.body().len(), bound.min(body.len()));
            assert_eq!(kept.body_len(), body.len() as u64, "counted whole");
            assert_eq!(checks.judge(&kept).expect("a verdict").0 == 0, passes, "kept {bound}");
        }
    }

    #[test]
    fn a_jar_alone_keeps_only_the_set_cookie_fields_and_takes_each_of_their_values() {
        let checks = KeptChecks::of([].iter(), &[], &[], &[], JAR).expect("a jar");
        assert!(checks.wants_headers());
        let mut kept = Kept::default();
        checks.prepare(&mut kept);
        kept.push_field(b"Content-Type", b"text/plain");
        kept.push_field(b"Set-Cookie", b"a=1; Path=/");
        kept.push_field(b"set-cookie", b"b=2");
        kept.push(b"body");
        assert!(!kept.any_header(b"content-type", &mut |_| true), "nothing reads it");
        assert!(kept.body().is_empty(), "nor the body");
        let (failed, extracted) = checks.judge(&kept).expect("a verdict");
        assert_eq!(failed, 0);
        assert_eq!(extracted.set_cookies, vec![b"a=1; Path=/".to_vec(), b"b=2".to_vec()]);
        assert!(KeptChecks::of([].iter(), &[], &[], &[], Fields::NONE).is_none());
        // With a check on the fields too, all are kept.
        let rules = [Rule::Header { name: "content-type".into(), test: crate::plan::TextTest::Exists }];
        let both = KeptChecks::of(rules.iter(), &[], &[], &[], JAR).expect("a rule and a jar");
        both.prepare(&mut kept);
        kept.push_field(b"Content-Type", b"text/plain");
        kept.push_field(b"Set-Cookie", b"a=1");
        assert_eq!(
            both.judge(&kept).expect("a verdict"),
            (0, Extracted { set_cookies: vec![b"a=1".to_vec()], ..Extracted::default() })
        );
    }

    #[test]
    fn redirects_to_follow_keep_the_location_beside_the_jars_cookies_and_nothing_else() {
        let reads = Fields { set_cookie: true, location: true, ..Fields::NONE };
        let checks = KeptChecks::of([].iter(), &[], &[], &[], reads).expect("a jar and redirects");
        assert!(checks.wants_headers() && !checks.only_set_cookie());
        let mut kept = Kept::default();
        checks.prepare(&mut kept);
        kept.push_field(b"Content-Type", b"text/plain");
        kept.push_field(b"Location", b"/home");
        kept.push_field(b"Set-Cookie", b"sid=1");
        kept.push_field(b"location", b"/second");
        assert!(!kept.any_header(b"content-type", &mut |_| true));
        let (_, extracted) = checks.judge(&kept).expect("a verdict");
        assert_eq!(extracted.location.as_deref(), Some(&b"/home"[..]), "the first location");
        assert_eq!(extracted.set_cookies, vec![b"sid=1".to_vec()]);
        let location = KeptChecks::of([].iter(), &[], &[], &[], Fields { location: true, ..Fields::NONE });
        let (_, extracted) = location.expect("redirects").judge(&kept).expect("a verdict");
        assert!(extracted.set_cookies.is_empty(), "no jar, no cookies");
        kept.clear_fields();
        assert_eq!(checks.judge(&kept), None, "no rule, no extractor and no field kept: nothing to say");
    }

    #[test]
    fn checks_see_the_same_body_however_it_was_split() {
        let body = br#"{"data":{"items":[{"id":7}]},"pad":"........"}"#;
        let rules = [
            Rule::BodyContains(b"\"id\":7".to_vec()),
            Rule::Json { pointer: "/data/items/0/id".into(), equals: Some(crate::plan::JsonValue(7.into())) },
            Rule::BodySize(46..=46),
        ];
        let checks = KeptChecks::of(rules.iter(), &[], &[], &[], Fields::NONE).expect("rules");
        for a in 0..=body.len() {
            for b in a..=body.len() {
                let mut kept = Kept::default();
                kept.push(&body[..a]);
                kept.push(&body[a..b]);
                kept.push(&body[b..]);
                assert_eq!(checks.judge(&kept).expect("a verdict").0, 0, "split at {a} and {b}");
            }
        }
    }

    #[test]
    fn extractors_take_the_same_values_however_the_body_was_split_and_fail_beyond_the_bound() {
        let body = br#"{"data":{"token":"abc.def"},"pad":"xxxxxxxx"}"#;
        let extractors = [
            Extractor { var: "token".into(), from: Source::Json { pointer: "/data/token".into() } },
            Extractor {
                var: "pad".into(),
                from: Source::Regex { pattern: Pattern::new(r#""pad":"(x+)""#).expect("pattern"), group: 1 },
            },
        ];
        let variables = ["pad".to_string(), "token".to_string()];
        let checks =
            KeptChecks::of([].iter(), &extractors, &variables, &[false, false], Fields::NONE).expect("extractors");
        for a in 0..=body.len() {
            let mut kept = Kept::default();
            checks.prepare(&mut kept);
            kept.push(&body[..a]);
            kept.push(&body[a..]);
            let (failed, extracted) = checks.judge(&kept).expect("a verdict");
            assert_eq!(failed, 0);
            assert_eq!(
                extracted.values,
                vec![(1, Some(b"abc.def".to_vec())), (0, Some(b"xxxxxxxx".to_vec()))],
                "split at {a}"
            );
        }
        // A value past the kept bound is not there to take: the extraction fails.
        let mut kept = Kept::default();
        checks.prepare(&mut kept);
        kept.push(&vec![b' '; KEPT_BODY_BYTES]);
        kept.push(br#"{"data":{"token":"late"}}"#);
        assert_eq!(checks.judge(&kept).expect("a verdict").1.values, vec![(1, None), (0, None)]);
    }

    #[test]
    fn a_step_with_only_extractors_on_headers_keeps_its_fields_and_no_body() {
        let extractors = [Extractor { var: "sid".into(), from: Source::Cookie { name: "sid".into() } }];
        let checks =
            KeptChecks::of([].iter(), &extractors, &["sid".to_string()], &[true], Fields::NONE).expect("extractor");
        assert!(checks.wants_headers());
        let mut kept = Kept::default();
        checks.prepare(&mut kept);
        kept.push(b"body");
        kept.push_field(b"Set-Cookie", b"sid=s 1; Path=/");
        assert_eq!(kept.body(), b"");
        assert_eq!(checks.judge(&kept).expect("a verdict").1.values, vec![(0, None)], "a blank may not go into a path");
        kept.clear_fields();
        kept.push_field(b"Set-Cookie", b"sid=s1; Path=/");
        assert_eq!(checks.judge(&kept).expect("a verdict").1.values, vec![(0, Some(b"s1".to_vec()))]);
    }

    #[test]
    fn spare_bodies_come_back_empty() {
        let mut spare = SpareKept::default();
        let mut kept = spare.take();
        kept.push(b"abc");
        spare.give(kept);
        let again = spare.take();
        assert_eq!((again.body(), again.body_len()), (&b""[..], 0));
    }
}
