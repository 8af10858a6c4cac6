//! The HTTP/2 request header blocks a run sends, encoded once before any load starts, and the
//! request fields they carry, which HTTP/3 sends too.

use super::conn::{Request, Template};
use super::hpack;
use crate::plan::RequestSpec;
use crate::target::Target;
use crate::template::{self, Templating, Vocabulary};

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

/// Every request of a run, as `Requests::each` gives them, as HTTP/2 sends them. The one
/// request indexes all its fields; a mix indexes the fields every one of its requests has
/// (the authority, say, and headers added to all), the same ones in the same order, so that
/// whichever goes first on a connection leaves the server's table as every later one expects.
///
/// `templated` says, per request, that its `{{…}}` are templates: a request with slots gets
/// blocks with holes too (its fields with slots never indexed), and a body with slots goes
/// without content-length (the end of its DATA gives its length).
pub(crate) fn encode_requests(
    target: &Target,
    requests: &[(&str, &RequestSpec)],
    templating: &Templating,
) -> Vec<Request> {
    let body = |spec: &RequestSpec| spec.body.clone().into_boxed_slice();
    let vocabulary = &templating.vocabulary;
    if let [(path, spec)] = requests
        && !templating.needs_template(0)
    {
        return vec![Request { blocks: encode_request(target, path, spec), body: body(spec), template: None }];
    }
    let all: Vec<(&str, Vec<(String, String)>)> = requests
        .iter()
        .map(|(path, spec)| {
            let f = request_fields(target, spec);
            let pseudo = [
                (":method", spec.method.as_str()),
                (":scheme", f.scheme),
                (":authority", &f.authority),
                (":path", path),
            ];
            let mut fields: Vec<(String, String)> =
                pseudo.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            fields.extend(f.headers);
            (*path, fields)
        })
        .collect();
    // The one request indexes all its fields (but those with slots), as above.
    let mut shared = match all.as_slice() {
        [(_, fields)] => fields.clone(),
        _ => shared_fields(all.iter().map(|(_, fields)| fields.as_slice())),
    };
    shared.retain(|(_, v)| !has_slots(v, vocabulary));
    all.iter()
        .zip(requests)
        .enumerate()
        .map(|(i, ((_, fields), (_, spec)))| {
            // Pseudo-header fields first, as sent; then the shared fields in their common order;
            // then the request's own. Only fields of different names change places.
            let (pseudo, regular) = fields.split_at(4);
            let is_shared = |n: &str, v: &str| shared.iter().any(|(sn, sv)| sn == n && sv == v);
            let ordered: Vec<(&str, &str)> = pseudo
                .iter()
                .chain(shared.iter().filter(|(n, _)| !n.starts_with(':')))
                .chain(regular.iter().filter(|(n, v)| !is_shared(n, v)))
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            let blocks = hpack::encode_blocks(&ordered, is_shared);
            let template = templating.needs_template(i).then(|| {
                request_template(&ordered, spec, is_shared, templating.vocabulary_of(i), templating.keeps_cookies(i))
            });
            Request { blocks, body: body(spec), template: template.flatten() }
        })
        .collect()
}

/// A request's template, if its fields or body have slots (`vocabulary`'s; none: it is not
/// templated), or `cookies` (its user's jar may add a field): `ordered` its fields as sent.
fn request_template(
    ordered: &[(&str, &str)],
    spec: &RequestSpec,
    is_shared: impl Fn(&str, &str) -> bool,
    vocabulary: Option<&Vocabulary>,
    cookies: bool,
) -> Option<Box<Template>> {
    let body =
        vocabulary.and_then(|v| template::Template::parse(&spec.body, v).ok()).filter(template::Template::has_slots);
    let slots = body.is_some() || vocabulary.is_some_and(|v| ordered.iter().any(|(_, value)| has_slots(value, v)));
    if !slots && !cookies {
        return None;
    }
    let fields: Vec<(&str, &str)> =
        ordered.iter().copied().filter(|(n, _)| body.is_none() || *n != "content-length").collect();
    Some(Box::new(Template { blocks: hpack::encode_template_blocks(&fields, is_shared, vocabulary), body, slots }))
}

/// Whether `value` has template slots.
fn has_slots(value: &str, vocabulary: &Vocabulary) -> bool {
    template::Template::parse(value.as_bytes(), vocabulary).is_ok_and(|t| t.has_slots())
}

/// The fields every request has with the same value, in the first request's order; a name
/// any request has more than once is left out, since only fields of different names may change
/// places.
fn shared_fields<'a>(mut requests: impl Iterator<Item = &'a [(String, String)]>) -> Vec<(String, String)> {
    let once = |fields: &[(String, String)], name: &str| fields.iter().filter(|(n, _)| n == name).count() == 1;
    let Some(first) = requests.next() else { return Vec::new() };
    let mut shared: Vec<(String, String)> = first.iter().filter(|(n, _)| once(first, n)).cloned().collect();
    for fields in requests {
        shared.retain(|(n, v)| once(fields, n) && fields.iter().any(|(fn_, fv)| fn_ == n && fv == v));
    }
    shared
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

    /// `block` as a second HPACK implementation reads it on connection `theirs`, its fields
    /// sorted (only fields of different names may change places).
    fn read_sorted(theirs: &mut httlib_hpack::Decoder<'_>, block: &[u8]) -> Vec<(String, String)> {
        let mut buf = block.to_vec();
        let mut fields = Vec::new();
        theirs.decode(&mut buf, &mut fields).expect("a valid header block");
        let text = |b: Vec<u8>| String::from_utf8(b).expect("ASCII");
        let mut fields: Vec<(String, String)> = fields.into_iter().map(|(n, v, _)| (text(n), text(v))).collect();
        fields.sort();
        fields
    }

    #[test]
    fn a_mix_indexes_the_fields_all_its_requests_share_so_any_may_go_first_on_a_connection() {
        let target = Target::parse("http://127.0.0.1:8080/").expect("valid url");
        let h = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let specs = [
            RequestSpec::new("GET", h(&[("X-Run", "7"), ("Accept", "text/html"), ("x-own", "a")]), vec![]),
            RequestSpec::new("POST", h(&[("x-own", "b"), ("X-Run", "7"), ("Accept", "text/html")]), b"{}".to_vec()),
            // Two cookies: a name twice is never moved, so never shared.
            RequestSpec::new(
                "GET",
                h(&[("Accept", "text/html"), ("x-run", "7"), ("cookie", "a"), ("cookie", "b")]),
                vec![],
            ),
        ];
        let paths = ["/a", "/b?c=d", "/e"];
        let list: Vec<(&str, &RequestSpec)> = paths.iter().copied().zip(specs.iter()).collect();
        let requests = encode_requests(&target, &list, &Templating::default());
        // The authority, x-run and accept are indexed: the same entries, the same room.
        let size = requests[0].blocks.table_size;
        assert_eq!(size, [(10, 14), (5, 1), (6, 9)].iter().map(|(n, v)| n + v + 32).sum::<usize>());
        assert!(requests.iter().all(|r| r.blocks.table_size == size));
        // Each request's fields, as the plain block says them, are the user's (sorted: only
        // fields of different names moved).
        let plain: Vec<_> = requests
            .iter()
            .map(|r| read_sorted(&mut httlib_hpack::Decoder::with_dynamic_size(4096), &r.blocks.plain))
            .collect();
        for (i, fields) in plain.iter().enumerate() {
            let mut want: Vec<(String, String)> = request_fields(&target, &specs[i]).headers;
            want.extend(
                [
                    (":method", specs[i].method.as_str()),
                    (":scheme", "http"),
                    (":authority", "127.0.0.1:8080"),
                    (":path", paths[i]),
                ]
                .map(|(n, v)| (n.to_string(), v.to_string())),
            );
            want.sort();
            assert_eq!(*fields, want, "request {i}");
        }
        // Whichever goes first, every later block on the connection reads as its plain one.
        for first in 0..3 {
            let mut connection = httlib_hpack::Decoder::with_dynamic_size(4096);
            assert_eq!(read_sorted(&mut connection, &requests[first].blocks.first), plain[first]);
            for i in [2, 0, 1, 1, 2] {
                assert_eq!(read_sorted(&mut connection, &requests[i].blocks.indexed), plain[i], "{i} after {first}");
            }
        }
        assert!(requests[0].blocks.indexed.len() < requests[0].blocks.plain.len() / 2);
    }

    #[test]
    fn a_templated_request_fills_its_holes_in_every_block_and_leaves_the_shared_table_as_the_others_do() {
        let target = Target::parse("http://127.0.0.1:8080/").expect("valid url");
        let h = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let specs = [
            RequestSpec::new("GET", h(&[("x-run", "7"), ("x-user", "u{{vu}}")]), vec![]),
            RequestSpec::new("POST", h(&[("x-run", "7"), ("x-user", "u{{vu}}")]), b"{\"it\":{{iteration}}}".to_vec()),
        ];
        let list: Vec<(&str, &RequestSpec)> = vec![("/a/{{vu}}", &specs[0]), ("/b", &specs[1])];
        let requests =
            encode_requests(&target, &list, &Templating { templated: vec![true, true], ..Templating::default() });
        let mut rng = 1;
        let mut unique = 1;
        let mut fill = crate::template::Fill::of_user(31, 4, &mut rng, &mut unique);
        let mut out = Vec::new();
        let mut filled = |block: &crate::template::Encoded| {
            out.clear();
            block.render(&mut fill, &mut out);
            out.clone()
        };
        let t: Vec<&Template> = requests.iter().map(|r| r.template.as_deref().expect("slots")).collect();
        // The same entries (authority and x-run; never a value with slots) for both.
        assert_eq!(requests[0].blocks.table_size, requests[1].blocks.table_size);
        let want = |method: &str, path: &str| {
            let mut f: Vec<(String, String)> = [
                (":method", method),
                (":scheme", "http"),
                (":authority", "127.0.0.1:8080"),
                (":path", path),
                ("x-run", "7"),
                ("x-user", "u31"),
            ]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
            f.sort();
            f
        };
        let plain = read_sorted(&mut httlib_hpack::Decoder::with_dynamic_size(4096), &filled(&t[1].blocks.plain));
        // The filled body has slots: its length is the DATA's, not a content-length.
        assert_eq!(plain, want("POST", "/b"));
        for first in 0..2 {
            let mut connection = httlib_hpack::Decoder::with_dynamic_size(4096);
            assert_eq!(
                read_sorted(&mut connection, &filled(&t[first].blocks.first)),
                want(&specs[first].method, ["/a/31", "/b"][first])
            );
            for i in [1 - first, first, 1 - first] {
                assert_eq!(
                    read_sorted(&mut connection, &filled(&t[i].blocks.indexed)),
                    want(&specs[i].method, ["/a/31", "/b"][i])
                );
            }
        }
        assert!(t[0].body.is_none() && t[1].body.is_some());
    }
}
