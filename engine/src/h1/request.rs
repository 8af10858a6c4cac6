//! Encodes the HTTP/1.1 requests a run sends, once each, before any load starts.

use crate::plan::RequestSpec;
use crate::target::Target;

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
    out.extend_from_slice(spec.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let has = |name: &str| spec.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("host") {
        header(&mut out, "Host", &target.authority());
    }
    for (name, value) in &spec.headers {
        if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("connection") {
            continue;
        }
        header(&mut out, name, value);
    }
    if !spec.body.is_empty() || spec.method_expects_body() {
        header(&mut out, "Content-Length", &spec.body.len().to_string());
    }
    if close {
        header(&mut out, "Connection", "close");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&spec.body);
    out
}

fn header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
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
}
