//! What a session keeps of a response whose step has checks on its body, and their verdicts.
//!
//! Only such a step's responses are kept: the first [`KEPT_BODY_BYTES`] of the body and its
//! whole length. When the response is complete the session judges it ([`BodyChecks::judge`])
//! and tells the loop the verdicts in one word ([`Event::Judged`](super::Event::Judged)), so no
//! body ever leaves the session and every other response streams through as before.

use std::sync::Arc;

use crate::plan::{KEPT_BODY_BYTES, ParsedJson, Rule};

/// One request's checks on the body, in the order of its checks (bit `j` of a verdict is the
/// `j`th of them).
#[derive(Debug)]
pub(crate) struct BodyChecks {
    rules: Box<[Rule]>,
}

/// Per request, its checks on the body if it has any; empty when no request has one.
pub(crate) type BodyCheckTable = Arc<[Option<BodyChecks>]>;

/// The checks on the body of `request`, if it has any.
#[inline]
pub(crate) fn body_checks(table: &BodyCheckTable, request: u32) -> Option<&BodyChecks> {
    table.get(request as usize).and_then(Option::as_ref)
}

impl BodyChecks {
    /// A request's checks on the body, from all its rules; none when it has none.
    pub(crate) fn of<'a>(rules: impl Iterator<Item = &'a Rule>) -> Option<BodyChecks> {
        let rules: Box<[Rule]> = rules.filter(|r| r.is_on_body()).cloned().collect();
        (!rules.is_empty()).then_some(BodyChecks { rules })
    }

    /// The verdicts on a complete response's body: bit `j` set when check `j` failed.
    pub(crate) fn judge(&self, kept: &Kept) -> u64 {
        let mut json = ParsedJson::default();
        self.rules.iter().enumerate().fold(0, |failed, (j, rule)| {
            if rule.passes_body(kept.bytes(), kept.len, &mut json) { failed } else { failed | 1 << j }
        })
    }
}

/// The kept part of a response body, and its whole length.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    body: Vec<u8>,
    len: u64,
}

impl Kept {
    /// The next bytes of the body: counted, and kept while there is room.
    #[inline]
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.len = self.len.saturating_add(bytes.len() as u64);
        let room = KEPT_BODY_BYTES.saturating_sub(self.body.len());
        self.body.extend_from_slice(bytes.get(..room).unwrap_or(bytes));
    }

    /// Empty again, keeping the memory for the next response.
    pub(crate) fn clear(&mut self) {
        self.body.clear();
        self.len = 0;
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.body
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

/// Kept bodies no response is using, so that a connection's responses reuse their memory.
#[derive(Debug, Default)]
pub(crate) struct SpareKept(Vec<Kept>);

impl SpareKept {
    /// An empty one.
    pub(crate) fn take(&mut self) -> Kept {
        self.0.pop().unwrap_or_default()
    }

    /// Back for another response; a connection keeps at most a few.
    pub(crate) fn give(&mut self, mut kept: Kept) {
        if self.0.len() < 8 {
            kept.clear();
            self.0.push(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Pattern;

    #[test]
    fn a_body_is_kept_up_to_the_bound_and_counted_whole() {
        let mut kept = Kept::default();
        let chunk = vec![b'x'; 40_000];
        kept.push(&chunk);
        kept.push(&chunk);
        assert_eq!(kept.bytes().len(), KEPT_BODY_BYTES);
        assert_eq!(kept.len(), 80_000);
        kept.clear();
        assert_eq!((kept.bytes().len(), kept.len()), (0, 0));
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
        let checks = BodyChecks::of(rules.iter()).expect("rules on the body");
        let mut kept = Kept::default();
        kept.push(br#"{"token":"#);
        kept.push(br#""t"}"#);
        // The size (bit 1) fails; contains, the JSON value and the pattern pass.
        assert_eq!(checks.judge(&kept), 0b0010);
        assert!(BodyChecks::of(rules[..1].iter()).is_none());
    }

    #[test]
    fn checks_see_the_same_body_however_it_was_split() {
        let body = br#"{"data":{"items":[{"id":7}]},"pad":"........"}"#;
        let rules = [
            Rule::BodyContains(b"\"id\":7".to_vec()),
            Rule::Json { pointer: "/data/items/0/id".into(), equals: Some(crate::plan::JsonValue(7.into())) },
            Rule::BodySize(46..=46),
        ];
        let checks = BodyChecks::of(rules.iter()).expect("rules");
        for a in 0..=body.len() {
            for b in a..=body.len() {
                let mut kept = Kept::default();
                kept.push(&body[..a]);
                kept.push(&body[a..b]);
                kept.push(&body[b..]);
                assert_eq!(checks.judge(&kept), 0, "split at {a} and {b}");
            }
        }
    }

    #[test]
    fn spare_bodies_come_back_empty() {
        let mut spare = SpareKept::default();
        let mut kept = spare.take();
        kept.push(b"abc");
        spare.give(kept);
        let again = spare.take();
        assert_eq!((again.bytes(), again.len()), (&b""[..], 0));
    }
}
