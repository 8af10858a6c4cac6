//! Extractors: values a scenario step takes from its responses into variables of the virtual
//! user (the connection slot) that sent it, for later steps' templates (`{{token}}`).
//!
//! They read what a session keeps of a response, as the checks on header fields and the body
//! do. An extraction that finds nothing fails, and with it the iteration: a later step is never
//! sent with an empty or stale value.

use super::checks::{KeptResponse, ParsedJson, Pattern};
use crate::template::BUILT_IN_NAMES;

/// The field a jar takes its cookies from. Every part that looks for the fields a jar and
/// redirects read (the decoders' fast paths, what a response keeps) names them from here.
pub(crate) const SET_COOKIE: &[u8] = b"set-cookie";

/// The most extractors one step may have.
pub const MAX_EXTRACTORS: usize = 16;

/// The most variables a mix may have: each virtual user holds a value of each.
pub const MAX_VARIABLES: usize = 64;

/// The longest value an extraction takes; a longer one fails it, rather than be cut.
pub const MAX_VALUE_BYTES: usize = 8 * 1024;

/// One extractor of a step: what it takes, and the variable it goes into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extractor {
    /// The variable's name, as later templates write it (`{{token}}`).
    pub var: String,
    pub from: Source,
}

/// Where in a response an extractor finds its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The JSON value at `pointer` (RFC 6901): a string's text, any other value's JSON.
    Json { pointer: String },
    /// The first value of header field `name` (lowercase).
    Header { name: String },
    /// Capture group `group` of the first match of `pattern` in the body (0: the whole match).
    Regex { pattern: Pattern, group: usize },
    /// The value of cookie `name` as a `set-cookie` field of the response sets it.
    Cookie { name: String },
}

impl Source {
    /// Whether it reads the header fields.
    pub(crate) fn needs_headers(&self) -> bool {
        matches!(self, Source::Header { .. } | Source::Cookie { .. })
    }

    /// Whether it reads the body.
    pub(crate) fn needs_body(&self) -> bool {
        matches!(self, Source::Json { .. } | Source::Regex { .. })
    }

    /// What it takes from a kept response, if anything: the value must be visible text (no
    /// control bytes), at most [`MAX_VALUE_BYTES`], and without blanks when `in_path` (it goes
    /// into a path), so that it cannot break the request it is written into.
    pub(crate) fn extract(&self, kept: &impl KeptResponse, json: &mut ParsedJson, in_path: bool) -> Option<Vec<u8>> {
        let value = match self {
            Source::Json { pointer } => match json.get(kept.body())?.pointer(pointer)? {
                serde_json::Value::String(text) => text.as_bytes().to_vec(),
                other => other.to_string().into_bytes(),
            },
            Source::Header { name } => {
                let mut found = None;
                kept.any_header(name.as_bytes(), &mut |value| {
                    found = Some(value.to_vec());
                    true
                });
                found?
            }
            Source::Regex { pattern, group } => pattern.captures(kept.body(), *group)?.to_vec(),
            Source::Cookie { name } => {
                let mut found = None;
                kept.any_header(SET_COOKIE, &mut |value| {
                    found = cookie_value(value, name.as_bytes()).map(<[u8]>::to_vec);
                    found.is_some()
                });
                found?
            }
        };
        let safe = value.len() <= MAX_VALUE_BYTES
            && !value.iter().any(|&b| b < b' ' && b != b'\t' || b == 0x7f || in_path && (b == b' ' || b == b'\t'));
        safe.then_some(value)
    }
}

/// The value a `set-cookie` field gives cookie `name`, if it names that cookie: the text between
/// `name=` and the first `;` (RFC 6265 §5.2), blanks around it trimmed, and unquoted.
fn cookie_value<'a>(field: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let pair = field.split(|&b| b == b';').next()?;
    let eq = pair.iter().position(|&b| b == b'=')?;
    let (key, value) = (pair[..eq].trim_ascii(), pair[eq + 1..].trim_ascii());
    if key != name {
        return None;
    }
    Some(value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")).unwrap_or(value))
}

/// Whether `name` may name a variable: a letter or `_` first, then letters, digits and `_`,
/// and not one of the templates' built-ins.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !BUILT_IN_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response as a session keeps it: a body and header fields.
    struct Response<'a> {
        body: &'a [u8],
        fields: &'a [(&'a [u8], &'a [u8])],
    }

    impl KeptResponse for Response<'_> {
        fn body(&self) -> &[u8] {
            self.body
        }

        fn body_len(&self) -> u64 {
            self.body.len() as u64
        }

        fn any_header(&self, name: &[u8], pass: &mut dyn FnMut(&[u8]) -> bool) -> bool {
            self.fields.iter().any(|(n, v)| *n == name && pass(v))
        }
    }

    fn take(source: &Source, body: &[u8], fields: &[(&[u8], &[u8])]) -> Option<Vec<u8>> {
        source.extract(&Response { body, fields }, &mut ParsedJson::default(), false)
    }

    #[test]
    fn a_json_string_gives_its_text_and_other_values_their_json() {
        let body = br#"{"token":"t-1","n":7,"user":{"id":[1,2]},"no":null}"#;
        let json = |p: &str| take(&Source::Json { pointer: p.into() }, body, &[]);
        assert_eq!(json("/token").as_deref(), Some(&b"t-1"[..]));
        assert_eq!(json("/n").as_deref(), Some(&b"7"[..]));
        assert_eq!(json("/user/id").as_deref(), Some(&b"[1,2]"[..]));
        assert_eq!(json("/no").as_deref(), Some(&b"null"[..]));
        assert_eq!(json("/missing"), None);
        assert_eq!(take(&Source::Json { pointer: "/token".into() }, b"not json", &[]), None);
    }

    #[test]
    fn a_header_gives_its_first_value_and_a_cookie_its_value_from_set_cookie() {
        let fields: &[(&[u8], &[u8])] = &[
            (b"x-id", b"first"),
            (b"x-id", b"second"),
            (b"set-cookie", b"theme=dark; Path=/"),
            (b"set-cookie", b" session = \"s-42\" ; HttpOnly; Secure"),
        ];
        assert_eq!(take(&Source::Header { name: "x-id".into() }, b"", fields).as_deref(), Some(&b"first"[..]));
        assert_eq!(take(&Source::Header { name: "x-none".into() }, b"", fields), None);
        let cookie = |name: &str| take(&Source::Cookie { name: name.into() }, b"", fields);
        assert_eq!(cookie("session").as_deref(), Some(&b"s-42"[..]));
        assert_eq!(cookie("theme").as_deref(), Some(&b"dark"[..]));
        assert_eq!(cookie("Path"), None, "an attribute is not a cookie");
    }

    #[test]
    fn a_regex_gives_its_group_of_the_first_match_and_fails_without_one() {
        let source = |group| Source::Regex { pattern: Pattern::new(r"id=(\d+)").expect("pattern"), group };
        let body = b"\x00\xff binary id=17 then id=18";
        assert_eq!(take(&source(1), body, &[]).as_deref(), Some(&b"17"[..]));
        assert_eq!(take(&source(0), body, &[]).as_deref(), Some(&b"id=17"[..]));
        assert_eq!(take(&source(1), b"no id here", &[]), None);
        let optional = Source::Regex { pattern: Pattern::new(r"a(b)?").expect("pattern"), group: 1 };
        assert_eq!(take(&optional, b"a", &[]), None, "a group that took part in no match gives nothing");
    }

    #[test]
    fn a_value_that_could_break_a_request_fails_the_extraction() {
        let json = Source::Json { pointer: "/v".into() };
        assert_eq!(take(&json, br#"{"v":"a\r\nx-evil: 1"}"#, &[]), None);
        assert_eq!(take(&json, br#"{"v":"a b"}"#, &[]).as_deref(), Some(&b"a b"[..]));
        let kept = Response { body: br#"{"v":"a b"}"#, fields: &[] };
        assert_eq!(json.extract(&kept, &mut ParsedJson::default(), true), None, "a blank cannot go into a path");
        let long = format!(r#"{{"v":"{}"}}"#, "x".repeat(MAX_VALUE_BYTES + 1));
        assert_eq!(take(&json, long.as_bytes(), &[]), None);
    }

    #[test]
    fn variable_names_are_identifiers_other_than_the_built_ins() {
        assert!(is_variable_name("token"));
        assert!(is_variable_name("_t2"));
        for bad in ["", "2fa", "a-b", "a.b", "vu", "uuid", "to ken"] {
            assert!(!is_variable_name(bad), "{bad:?}");
        }
    }
}
