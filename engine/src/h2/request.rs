//! The HTTP/2 request header blocks a run sends, encoded once before any load starts, and the
//! request fields they carry, which HTTP/3 sends too.

use super::conn::Request;
use super::hpack;
use crate::plan::RequestSpec;
use crate::target::Target;

/// Header fields HTTP/2 and HTTP/3 forbid (RFC 9113 §8.2.2, RFC 9114 §4.2); `host` becomes
/// `:authority`.
const CONNECTION_SPECIFIC: [&str; 6] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"];

/// The request's fields as HTTP/2 and HTTP/3 send them, the same request `h1::encode_request`
/// writes: the user's fields and what the protocol needs (content-length ours), no defaults,
/// names lowercased as both require, connection-specific fields dropped, and a user's `Host`
/// as the authority.
pub(crate) struct RequestFields {
    pub scheme: &'static str,
    pub authority: String,
    /// Every field but the pseudo-header fields, in order.
    pub headers: Vec<(String, String)>,
}

pub(crate) fn request_fields(target: &Target, spec: &RequestSpec) -> RequestFields {
    let authority = spec
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or_else(|| target.authority(), |(_, v)| v.clone());
    let mut headers: Vec<(String, String)> = Vec::with_capacity(spec.headers.len() + 1);
    for (name, value) in &spec.headers {
        let name = name.to_ascii_lowercase();
        if name == "host" || name == "content-length" || CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        headers.push((name, value.clone()));
    }
    if !spec.body.is_empty() || spec.method_expects_body() {
        headers.push(("content-length".into(), spec.body.len().to_string()));
    }
    let scheme = if target.is_tls() { "https" } else { "http" };
    RequestFields { scheme, authority, headers }
}

/// A request's header blocks (see `request_fields`), `path` (with its query) at `target`'s
/// origin.
pub(crate) fn encode_request(target: &Target, path: &str, spec: &RequestSpec) -> hpack::RequestBlocks {
    let fields = request_fields(target, spec);
    hpack::encode_request_blocks(&spec.method, fields.scheme, &fields.authority, path, &fields.headers)
}

/// Every request of a run, as `Requests::each` gives them, as HTTP/2 sends them.
pub(crate) fn encode_requests(target: &Target, requests: &[(&str, &RequestSpec)]) -> Vec<Request> {
    requests
        .iter()
        .map(|(path, spec)| Request {
            blocks: encode_request(target, path, spec),
            body: spec.body.clone().into_boxed_slice(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks as a second HPACK implementation reads them: the plain block on its own, and
    /// the first and indexed blocks in turn on one connection. All three must say the same.
    fn decoded(blocks: &hpack::RequestBlocks) -> Vec<(String, String)> {
        let read = |theirs: &mut httlib_hpack::Decoder<'_>, block: &[u8]| {
            let mut buf = block.to_vec();
            let mut fields = Vec::new();
            theirs.decode(&mut buf, &mut fields).expect("a valid header block");
            let text = |b: Vec<u8>| String::from_utf8(b).expect("ASCII");
            fields.into_iter().map(|(n, v, _)| (text(n), text(v))).collect::<Vec<_>>()
        };
        let plain = read(&mut httlib_hpack::Decoder::with_dynamic_size(4096), &blocks.plain);
        let mut connection = httlib_hpack::Decoder::with_dynamic_size(4096);
        assert_eq!(read(&mut connection, &blocks.first), plain);
        assert_eq!(read(&mut connection, &blocks.indexed), plain);
        assert_eq!(read(&mut connection, &blocks.indexed), plain);
        plain
    }

    #[test]
    fn a_get_carries_the_pseudo_headers_and_nothing_the_user_did_not_ask_for() {
        let target = Target::parse("https://example.test:8443/a?b=c").expect("valid url");
        let fields = decoded(&encode_request(&target, "/a?b=c", &RequestSpec::new("GET", vec![], vec![])));
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [":method", ":scheme", ":authority", ":path"]);
        assert_eq!(fields[1].1, "https");
        assert_eq!(fields[2].1, "example.test:8443");
        assert_eq!(fields[3].1, "/a?b=c");
    }

    #[test]
    fn host_becomes_authority_and_connection_headers_are_dropped() {
        let target = Target::parse("http://127.0.0.1:8080/").expect("valid url");
        let spec = RequestSpec::new(
            "POST",
            vec![
                ("Host".into(), "vhost.test".into()),
                ("Connection".into(), "close".into()),
                ("Content-Length".into(), "999".into()),
                ("X-Trace".into(), "1".into()),
            ],
            b"hello".to_vec(),
        );
        let fields = decoded(&encode_request(&target, "/", &spec));
        assert!(fields.contains(&(":authority".into(), "vhost.test".into())));
        assert!(fields.contains(&("x-trace".into(), "1".into())));
        assert!(fields.contains(&("content-length".into(), "5".into())));
        assert!(!fields.iter().any(|(n, _)| n == "connection" || n == "host"));
        assert!(!fields.iter().any(|(_, v)| v == "999"));
    }
}
