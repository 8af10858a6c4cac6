//! Encodes the HTTP/1.1 requests a run sends, once each, before any load starts: as bytes, or
//! for a request with templates, as bytes around the holes its slots fill per request.

use crate::plan::RequestSpec;
use crate::target::Target;
use crate::template::{self, Encoded, Fill, Framing, Out, Vocabulary};

/// The request's bytes: request line, headers, blank line and body.
///
/// Host gets a default unless the user gave one; no other field is added that the user did not
/// ask for (a default User-Agent or Accept would cost the server work on every request, and
/// `-H` adds them when wanted). Content-Length is always ours (a user-supplied one is dropped,
/// since a wrong one would desynchronise the connection). With `close`, `Connection: close`
/// asks the server to end the connection after its response.
/// `path` (with its query) goes to `target`'s origin.
pub(crate) fn encode_request(target: &Target, path: &str, spec: &RequestSpec, close: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + spec.body.len());
    write_head(&mut out, target, path, spec);
    if has_content_length(spec) {
        header(&mut out, "Content-Length", &spec.body.len().to_string());
    }
    out.extend_from_slice(ending(close));
    out.extend_from_slice(&spec.body);
    out
}

/// A request with templates, as `encode_request` would write it with its slots filled, or one
/// whose user's jar may add a Cookie field.
#[derive(Debug)]
pub(crate) struct Template {
    /// Request line, Host and the user's fields.
    head: Encoded,
    /// It has slots to fill: without, only cookies make it worth filling.
    pub slots: bool,
    content_length: bool,
    /// `Connection: close` when asked, and the blank line.
    ending: &'static [u8],
    body: template::Template,
}

/// The request's template, if its path, a field's value or its body has slots, or `cookies`
/// (its user's jar may add a field). Its slots may name `vocabulary`'s feeder columns; without
/// one it is not templated, and written as it is.
pub(crate) fn encode_template(
    target: &Target,
    path: &str,
    spec: &RequestSpec,
    close: bool,
    vocabulary: Option<&Vocabulary>,
    cookies: bool,
) -> Option<Template> {
    let mut head = Encoded::for_templates(vocabulary);
    write_head(&mut head, target, path, spec);
    let body = vocabulary
        .and_then(|v| template::Template::parse(&spec.body, v).ok())
        .unwrap_or_else(|| template::Template::text(&spec.body));
    let slots = head.has_holes() || body.has_slots();
    if !slots && !cookies {
        return None;
    }
    Some(Template { head, slots, content_length: has_content_length(spec), ending: ending(close), body })
}

impl Template {
    /// Appends the request, its slots filled and its user's cookies added; `body` is a buffer
    /// the caller reuses.
    pub(crate) fn render(&self, fill: &mut Fill<'_>, out: &mut Vec<u8>, body: &mut Vec<u8>) {
        // The body first: its length goes before it.
        body.clear();
        self.body.render(fill, body);
        self.head.render(fill, out);
        if self.content_length {
            out.extend_from_slice(b"Content-Length: ");
            template::decimal(out, body.len() as u64);
            out.extend_from_slice(b"\r\n");
        }
        if !fill.cookie.is_empty() {
            out.extend_from_slice(b"Cookie: ");
            out.extend_from_slice(fill.cookie);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(self.ending);
        out.extend_from_slice(body);
    }
}

/// Request line, Host unless the user gave one, and the user's fields but Content-Length and
/// Connection.
fn write_head(out: &mut impl Out, target: &Target, path: &str, spec: &RequestSpec) {
    out.bytes(spec.method.as_bytes());
    out.push(b' ');
    out.value(path, Framing::Raw, |out| out.extend_from_slice(path.as_bytes()));
    out.bytes(b" HTTP/1.1\r\n");
    let has = |name: &str| spec.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("host") {
        header(out, "Host", &target.authority());
    }
    for (name, value) in &spec.headers {
        if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("connection") {
            continue;
        }
        header(out, name, value);
    }
}

fn has_content_length(spec: &RequestSpec) -> bool {
    !spec.body.is_empty() || spec.method_expects_body()
}

fn ending(close: bool) -> &'static [u8] {
    if close { b"Connection: close\r\n\r\n" } else { b"\r\n" }
}

fn header(out: &mut impl Out, name: &str, value: &str) {
    out.bytes(name.as_bytes());
    out.bytes(b": ");
    out.value(value, Framing::Raw, |out| out.extend_from_slice(value.as_bytes()));
    out.bytes(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://example.test:8080/a/b?c=d").expect("valid url")
    }

    #[test]
    fn a_get_carries_host_and_nothing_the_user_did_not_ask_for() {
        let spec = RequestSpec::new("GET", vec![], vec![]);
        let bytes = encode_request(&target(), "/a/b?c=d", &spec, false);
        assert_eq!(String::from_utf8(bytes).unwrap(), "GET /a/b?c=d HTTP/1.1\r\nHost: example.test:8080\r\n\r\n");
    }

    #[test]
    fn user_headers_replace_defaults_and_content_length_is_ours() {
        let spec = RequestSpec::new(
            "POST",
            vec![("host".into(), "other".into()), ("Content-Length".into(), "999".into()), ("X-A".into(), "1".into())],
            b"hello".to_vec(),
        );
        let text = String::from_utf8(encode_request(&target(), "/a/b?c=d", &spec, true)).unwrap();
        assert!(text.starts_with("POST /a/b?c=d HTTP/1.1\r\n"));
        assert!(text.contains("host: other\r\n"));
        assert!(!text.contains("Host: example.test"));
        assert!(!text.contains("999"));
        assert!(text.contains("X-A: 1\r\n"));
        assert!(text.ends_with("Content-Length: 5\r\nConnection: close\r\n\r\nhello"));
    }

    #[test]
    fn empty_post_still_says_content_length_zero() {
        let spec = RequestSpec::new("POST", vec![], vec![]);
        let text = String::from_utf8(encode_request(&target(), "/a/b?c=d", &spec, false)).unwrap();
        assert!(text.contains("Content-Length: 0\r\n"));
    }

    fn filled(template: &Template) -> String {
        filled_with_cookie(template, b"")
    }

    /// The request `template` writes for user 12's fourth iteration, its jar giving `cookie`.
    fn filled_with_cookie(template: &Template, cookie: &[u8]) -> String {
        let mut rng = 1;
        let mut unique = 1;
        let mut fill = Fill { cookie, ..Fill::of_user(12, 3, &mut rng, &mut unique) };
        let (mut out, mut body) = (Vec::new(), Vec::new());
        template.render(&mut fill, &mut out, &mut body);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_template_is_the_request_encode_request_writes_with_its_slots_filled() {
        let spec = RequestSpec::new(
            "POST",
            vec![("x-user".into(), "u{{vu}}".into()), ("Content-Length".into(), "1".into())],
            br#"{"vu":{{vu}},"i":{{iteration}}}"#.to_vec(),
        );
        for close in [false, true] {
            let template = encode_template(
                &target(),
                "/a/{{vu}}?i={{iteration}}",
                &spec,
                close,
                Some(&Vocabulary::default()),
                false,
            )
            .expect("slots");
            let plain = RequestSpec::new(
                "POST",
                vec![("x-user".into(), "u12".into()), ("Content-Length".into(), "1".into())],
                br#"{"vu":12,"i":3}"#.to_vec(),
            );
            assert_eq!(
                filled(&template),
                String::from_utf8(encode_request(&target(), "/a/12?i=3", &plain, close)).unwrap()
            );
        }
    }

    #[test]
    fn a_request_without_slots_has_no_template() {
        let spec = RequestSpec::new("GET", vec![("x".into(), "{not one}".into())], b"{}".to_vec());
        assert!(encode_template(&target(), "/a", &spec, false, Some(&Vocabulary::default()), false).is_none());
        let body_only = RequestSpec::new("PUT", vec![], b"{{uuid}}".to_vec());
        let text = filled(
            &encode_template(&target(), "/a", &body_only, false, Some(&Vocabulary::default()), false)
                .expect("a body slot"),
        );
        assert!(text.contains("Content-Length: 36\r\n\r\n") && text.len() > 36, "{text}");
    }

    #[test]
    fn a_request_whose_jar_is_on_is_written_as_it_is_with_its_users_cookies_before_the_blank_line() {
        let spec = RequestSpec::new("POST", vec![("x".into(), "{{vu}}".into())], b"ab".to_vec());
        for close in [false, true] {
            let template = encode_template(&target(), "/a", &spec, close, None, true).expect("a jar");
            assert!(!template.slots, "not templated: {{{{vu}}}} is text");
            assert_eq!(filled(&template), String::from_utf8(encode_request(&target(), "/a", &spec, close)).unwrap());
            let ending = if close { "Connection: close\r\n\r\n" } else { "\r\n" };
            let text = filled_with_cookie(&template, b"sid=1; a=b");
            assert!(text.contains("x: {{vu}}\r\n"), "{text}");
            assert!(text.ends_with(&format!("Content-Length: 2\r\nCookie: sid=1; a=b\r\n{ending}ab")), "{text}");
        }
    }
}
