//! What every HTTP/3 connection of a run sends, encoded once before any load starts: our
//! control stream's opening and the request stream's frames.

use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::frame;
use super::qpack;
use crate::h2::{RequestFields, request_fields};
use crate::plan::RequestSpec;
use crate::target::Target;
use crate::template::{self, Encoded, Fill, Templating, Vocabulary};

/// What every HTTP/3 session of a run shares: encoded once, shared by reference.
#[derive(Debug)]
pub(crate) struct Config {
    /// Our control stream's bytes: its type and our SETTINGS (`frame::encode_control_stream`).
    pub control: Bytes,
    /// Every request stream's bytes before the body, one request after the other: HEADERS,
    /// then the header of the DATA frame that carries the body when there is one. The body
    /// follows, then the stream's end. A session takes its own copy when they are small
    /// (`Config::heads_for_session`), so that the threads do not share their count of
    /// references; the bodies are shared.
    heads: Bytes,
    /// Where each request's head ends in `heads`.
    head_ends: Box<[usize]>,
    bodies: Box<[Bytes]>,
    /// Per request, its template if it has slots or its user's jar may add cookies; empty when
    /// none has.
    templates: Box<[Option<Template>]>,
    /// The largest request field section, whose size a server's SETTINGS_MAX_FIELD_SECTION_SIZE
    /// limits (RFC 9114 §4.2.2 counts it decoded: names, values and 32 bytes a field).
    pub field_section_size: u64,
    /// Requests to keep in flight on each connection (-p): the streams a session opens.
    pub streams: u32,
    pub connect_timeout: Duration,
    pub request_timeout: Option<Duration>,
}

/// Heads up to this size in all are copied into every session; larger ones are shared.
const COPIED_HEADS: usize = 16 << 10;

impl Config {
    /// `requests`: each request's path (and query) and what it is, as `Requests::each` gives;
    /// `templating`: which requests' `{{…}}` are templates.
    pub(crate) fn new(
        target: &Target,
        requests: &[(&str, &RequestSpec)],
        templating: &Templating,
        streams: u32,
        connect_timeout: Duration,
        request_timeout: Option<Duration>,
    ) -> Config {
        let mut heads = Vec::new();
        let mut head_ends = Vec::with_capacity(requests.len());
        let mut bodies = Vec::with_capacity(requests.len());
        let mut field_section_size = 0;
        let mut templates = Vec::new();
        for (i, (path, spec)) in requests.iter().enumerate() {
            let fields = request_fields(target, spec);
            if templating.needs_template(i) {
                templates.resize_with(i, || None);
                templates.push(Template::of(
                    path,
                    spec,
                    &fields,
                    templating.vocabulary_of(i),
                    templating.keeps_cookies(i),
                ));
            }
            let section = qpack::encode_field_section(&spec.method, "https", &fields.authority, path, &fields.headers);
            frame::encode_request_head(&section, spec.body.len(), &mut heads);
            head_ends.push(heads.len());
            bodies.push(Bytes::from(spec.body.clone()));
            let pseudo = [(":method", spec.method.as_str()), (":scheme", "https"), (":authority", &fields.authority)];
            let size: u64 = pseudo
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .chain([":path".len() + path.len()])
                .chain(fields.headers.iter().map(|(n, v)| n.len() + v.len()))
                .map(|n| n as u64 + 32)
                .sum();
            field_section_size = field_section_size.max(size);
        }
        let mut control = Vec::with_capacity(8);
        frame::encode_control_stream(&mut control);
        Config {
            control: control.into(),
            heads: heads.into(),
            head_ends: head_ends.into(),
            bodies: bodies.into(),
            templates: templates.into(),
            field_section_size,
            streams,
            connect_timeout,
            request_timeout,
        }
    }

    /// The heads a new session writes from: its own copy when they are small.
    pub(crate) fn heads_for_session(&self) -> Bytes {
        if self.heads.len() <= COPIED_HEADS { Bytes::copy_from_slice(&self.heads) } else { self.heads.clone() }
    }

    /// Where request `request`'s head lies in the heads.
    pub(crate) fn head_range(&self, request: u32) -> std::ops::Range<usize> {
        let i = request as usize;
        let start = if i == 0 { 0 } else { self.head_ends[i - 1] };
        start..self.head_ends[i]
    }

    pub(crate) fn body(&self, request: u32) -> &Bytes {
        &self.bodies[request as usize]
    }

    /// Request `request`'s template, if it is filled from `fill` when it starts
    /// (`Fill::needed_by`).
    pub(crate) fn template(&self, request: u32, fill: &Fill<'_>) -> Option<&Template> {
        self.templates.get(request as usize).and_then(Option::as_ref).filter(|t| fill.needed_by(t.slots))
    }
}

/// A templated request's field section with holes, and its body; a body with slots goes
/// without content-length (the end of its DATA gives its length).
#[derive(Debug)]
pub(crate) struct Template {
    section: Encoded,
    body: template::Template,
    /// It has slots to fill: without, only its user's cookies make it worth filling.
    slots: bool,
}

impl Template {
    /// Its slots name `vocabulary`'s (none: not templated); `cookies`: its user's jar may add a
    /// field, so it is a template even without slots.
    fn of(
        path: &str,
        spec: &RequestSpec,
        fields: &RequestFields,
        vocabulary: Option<&Vocabulary>,
        cookies: bool,
    ) -> Option<Template> {
        let body = vocabulary
            .and_then(|v| template::Template::parse(&spec.body, v).ok())
            .unwrap_or_else(|| template::Template::text(&spec.body));
        let headers: Vec<(String, String)> =
            fields.headers.iter().filter(|(n, _)| !body.has_slots() || n != "content-length").cloned().collect();
        let section =
            qpack::encode_section_template(&spec.method, "https", &fields.authority, path, &headers, vocabulary);
        let slots = section.has_holes() || body.has_slots();
        (slots || cookies).then_some(Template { section, body, slots })
    }

    /// The request stream's bytes, its slots filled: HEADERS, then DATA with the body.
    pub(crate) fn render(&self, fill: &mut Fill<'_>, into: &mut Filled) -> Bytes {
        let Filled { section, scratch, arena } = into;
        section.clear();
        self.section.render(fill, section);
        if !fill.cookie.is_empty() {
            qpack::cookie(section, fill.cookie);
        }
        scratch.clear();
        self.body.render(fill, scratch);
        // The frames go straight into the arena: the section is copied once.
        let len = section.len() + scratch.len() + 2 * MAX_FRAME_HEAD;
        if arena.capacity() < len {
            arena.reserve(len.max(ARENA));
        }
        frame::encode_request_head(section, scratch.len(), arena);
        arena.extend_from_slice(scratch);
        arena.split().freeze()
    }
}

/// Where a session fills its templated requests: buffers kept from one request to the next,
/// and an arena each request's bytes are cut from. A `Bytes` of its own cost a request two
/// allocations (its buffer, and its count of references once the stream shared it); cut from
/// the arena, requests share one count, and the arena's memory is taken up again once the
/// requests cut from it are gone.
#[derive(Debug, Default)]
pub(crate) struct Filled {
    section: Vec<u8>,
    scratch: Vec<u8>,
    arena: BytesMut,
}

/// The arena's size: a hundred or so small requests.
const ARENA: usize = 16 * 1024;

/// A frame's type and length, each a variable-length integer of at most 8 bytes.
const MAX_FRAME_HEAD: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::frame::{Frame, FrameDecoder};
    use crate::h3::qpack::field_lines;

    fn one(target: &Target, spec: &RequestSpec, streams: u32, connect: Duration, timeout: Option<Duration>) -> Config {
        Config::new(
            target,
            &[(target.path_and_query.as_str(), spec)],
            &Templating::default(),
            streams,
            connect,
            timeout,
        )
    }

    /// Decodes a request stream's bytes (head, body) as a server would: its fields and body.
    fn read_request(config: &Config, request: u32) -> (Vec<(String, String)>, Vec<u8>) {
        let mut stream = config.heads[config.head_range(request)].to_vec();
        stream.extend_from_slice(config.body(request));
        read_stream(&stream)
    }

    /// Decodes one request stream's bytes as a server would: its fields and body.
    fn read_stream(stream: &[u8]) -> (Vec<(String, String)>, Vec<u8>) {
        let mut input = stream;
        let mut frames = FrameDecoder::default();
        let (mut fields, mut body) = (Vec::new(), Vec::new());
        while let Some(frame) = frames.next(&mut input).expect("valid frames") {
            match frame {
                Frame::Headers(section) => {
                    for line in field_lines(section).expect("static-only section") {
                        let line = line.expect("valid field line");
                        let text = |s: crate::h3::qpack::Str<'_>| {
                            String::from_utf8(s.to_vec().expect("valid string")).expect("ASCII")
                        };
                        fields.push((text(line.name), text(line.value)));
                    }
                }
                Frame::Data(piece) => body.extend_from_slice(piece),
                other => panic!("unexpected {other:?}"),
            }
        }
        frames.finish().expect("ends between frames");
        (fields, body)
    }

    #[test]
    fn templated_requests_cut_from_one_arena_each_keep_their_own_bytes_past_the_arenas_size() {
        let target = Target::parse("https://example.test/").expect("valid url");
        let spec = RequestSpec::new("POST", vec![("x-vu".into(), "{{vu}}".into())], b"it={{iteration}}".to_vec());
        let templating = Templating { templated: vec![true], ..Templating::default() };
        let config = Config::new(&target, &[("/i/{{iteration}}", &spec)], &templating, 1, Duration::from_secs(1), None);
        let (mut rng, mut unique) = (1, 1);
        let template = config.template(0, &Fill::of_user(7, 0, &mut 1, &mut 1)).expect("slots");
        let mut into = Filled::default();
        // Kept alive all at once: 1,000 requests of ~60 bytes are several arenas' worth.
        let rendered: Vec<Bytes> = (0..1000u64)
            .map(|iteration| {
                let mut fill = Fill::of_user(7, iteration, &mut rng, &mut unique);
                template.render(&mut fill, &mut into)
            })
            .collect();
        for (iteration, bytes) in rendered.iter().enumerate() {
            let (fields, body) = read_stream(bytes);
            assert_eq!(fields[3], (":path".into(), format!("/i/{iteration}")), "request {iteration}");
            assert!(fields.contains(&("x-vu".into(), "7".into())));
            assert_eq!(body, format!("it={iteration}").into_bytes());
        }
    }

    #[test]
    fn a_get_carries_the_pseudo_headers_only_and_no_data_frame() {
        let target = Target::parse("https://example.test:8443/a?b=c").expect("valid url");
        let config = one(&target, &RequestSpec::new("GET", vec![], vec![]), 1, Duration::from_secs(1), None);
        let (fields, body) = read_request(&config, 0);
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [":method", ":scheme", ":authority", ":path"]);
        assert_eq!(fields[0].1, "GET");
        assert_eq!(fields[1].1, "https");
        assert_eq!(fields[2].1, "example.test:8443");
        assert_eq!(fields[3].1, "/a?b=c");
        assert!(body.is_empty());
        // HEADERS only: its type, its length, the section.
        assert_eq!(config.heads[0], 0x01);
        assert_eq!(config.heads[1] as usize, config.heads.len() - 2);
    }

    #[test]
    fn a_post_carries_host_as_authority_its_content_length_and_its_body_in_one_data_frame() {
        let target = Target::parse("https://127.0.0.1:8443/").expect("valid url");
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
        let config = one(&target, &spec, 4, Duration::from_secs(2), Some(Duration::from_secs(3)));
        assert_eq!(
            (config.streams, config.connect_timeout, config.request_timeout),
            (4, Duration::from_secs(2), Some(Duration::from_secs(3)))
        );
        let (fields, body) = read_request(&config, 0);
        assert!(fields.contains(&(":authority".into(), "vhost.test".into())));
        assert!(fields.contains(&(":method".into(), "POST".into())));
        assert!(fields.contains(&("x-trace".into(), "1".into())));
        assert!(fields.contains(&("content-length".into(), "5".into())));
        assert!(!fields.iter().any(|(n, _)| n == "connection" || n == "host"));
        assert_eq!(body, b"hello");
        // The DATA frame's header ends the head: type 0, length 5.
        assert_eq!(config.heads[config.heads.len() - 2..], [0x00, 0x05]);
        let decoded: u64 = fields.iter().map(|(n, v)| (n.len() + v.len() + 32) as u64).sum();
        assert_eq!(config.field_section_size, decoded);
    }

    #[test]
    fn huffman_literals_make_a_plain_get_a_19_byte_headers_frame() {
        // ARCHITECTURE.md quotes this size.
        let target = Target::parse("https://127.0.0.1:8443/").expect("valid url");
        let config = one(&target, &RequestSpec::new("GET", vec![], vec![]), 1, Duration::from_secs(1), None);
        assert_eq!(config.heads.len(), 19);
    }

    #[test]
    fn the_control_stream_is_its_type_and_settings_with_no_dynamic_table() {
        let target = Target::parse("https://127.0.0.1:8443/").expect("valid url");
        let config = one(&target, &RequestSpec::new("GET", vec![], vec![]), 1, Duration::from_secs(1), None);
        // Type 0x00; SETTINGS (0x04) of 4 bytes: QPACK_MAX_TABLE_CAPACITY (0x01) 0,
        // QPACK_BLOCKED_STREAMS (0x07) 0.
        assert_eq!(&config.control[..], [0x00, 0x04, 0x04, 0x01, 0x00, 0x07, 0x00]);
    }
}

#[cfg(test)]
mod mix_tests {
    use super::*;
    use crate::h3::frame::{Frame, FrameDecoder};
    use crate::h3::qpack::field_lines;

    #[test]
    fn each_request_of_a_mix_has_its_own_head_and_body_and_the_largest_section_is_the_limit() {
        let target = Target::parse("https://127.0.0.1:8443/").expect("valid url");
        let get = RequestSpec::new("GET", vec![("x-long".into(), "v".repeat(100))], vec![]);
        let post = RequestSpec::new("POST", vec![], b"body".to_vec());
        let config = Config::new(
            &target,
            &[("/a", &get), ("/b?c", &post)],
            &Templating::default(),
            1,
            Duration::from_secs(1),
            None,
        );
        let mut paths = Vec::new();
        for request in 0..2 {
            let head = &config.heads[config.head_range(request)];
            let mut input = head;
            let mut frames = FrameDecoder::default();
            while let Some(frame) = frames.next(&mut input).expect("valid frames") {
                if let Frame::Headers(section) = frame {
                    for line in field_lines(section).expect("static-only section") {
                        let line = line.expect("valid field line");
                        let name = line.name.to_vec().expect("valid");
                        if name == b":path" {
                            paths.push(String::from_utf8(line.value.to_vec().expect("valid")).expect("ASCII"));
                        }
                    }
                }
            }
        }
        assert_eq!(paths, ["/a", "/b?c"]);
        assert!(config.body(0).is_empty());
        assert_eq!(&config.body(1)[..], b"body");
        // The GET's section, with its long header, is the larger.
        assert!(config.field_section_size > 100 + 32 * 5);
    }
}
