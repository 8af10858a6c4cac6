//! A response stream and the server's unidirectional streams on byte strings: what each
//! frame sequence means, fed whole, at every split point and byte by byte.

use super::H3Error;
use super::error::code;
use super::frame::tests::{frame, hex};
use super::frame::{Settings, kind};
use super::qpack::HeadCache;
use super::response::{Response, ResponseStream};
use super::uni::{ControlEvent, SeenStreams, UniStream};
use crate::stats::RetryAfter;

/// A HEADERS frame with this field section.
pub(crate) fn headers(section: &str) -> Vec<u8> {
    frame(kind::HEADERS, &hex(section))
}

pub(crate) fn data(body: &[u8]) -> Vec<u8> {
    frame(kind::DATA, body)
}

/// `:status 200`, as indexed static entry 25.
pub(crate) const OK: &str = "0000 d9";

/// Feeds `chunks` to a fresh response reader, then ends the stream.
pub(crate) fn read_response(chunks: &[&[u8]]) -> Result<Response, H3Error> {
    let mut stream = ResponseStream::default();
    let mut heads = HeadCache::default();
    for chunk in chunks {
        stream.receive(chunk, &mut heads)?;
    }
    stream.finish()
}

/// The outcome is the same whole, at every split into two, into three around the middle, and
/// byte by byte.
fn response_at_every_split(bytes: &[u8]) -> Result<Response, H3Error> {
    let expected = read_response(&[bytes]);
    for at in 0..=bytes.len() {
        assert_eq!(read_response(&[&bytes[..at], &bytes[at..]]), expected, "split at {at}");
        let mid = (at + bytes.len()) / 2;
        assert_eq!(read_response(&[&bytes[..at], &bytes[at..mid], &bytes[mid..]]), expected, "split at {at}, {mid}");
    }
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(read_response(&bytewise), expected, "byte by byte");
    expected
}

fn concat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn a_response_gives_its_status_and_body_length_at_every_split() {
    let bytes = concat(&[headers(OK), data(b"hello, world!\n")]);
    assert_eq!(response_at_every_split(&bytes), Ok(Response { status: 200, body_bytes: 14, retry_after: None }));
}

/// The body kept of `bytes` fed in two pieces split at `at`.
fn kept_at(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut stream = ResponseStream::default();
    let rules = [crate::plan::Rule::BodySize(0..=u64::MAX)];
    let checks = crate::session::KeptChecks::of(rules.iter(), &[], &[], &[], crate::session::Fields::NONE)
        .expect("a rule on the body");
    stream.keep(crate::session::Kept::default(), &checks);
    let mut heads = HeadCache::default();
    stream.receive(&bytes[..at], &mut heads).expect("a good response");
    stream.receive(&bytes[at..], &mut heads).expect("a good response");
    stream.finish().expect("whole");
    crate::plan::KeptResponse::body(&stream.take_kept().expect("kept")).to_vec()
}

#[test]
fn a_jars_response_is_kept_only_when_its_final_head_has_a_set_cookie() {
    use crate::session::{Fields, KeptChecks};
    let jar = Fields { set_cookie: true, ..Fields::NONE };
    let checks = KeptChecks::of(std::iter::empty(), &[], &[], &[], jar).expect("a jar reads set-cookie");
    let only = checks.only_fields().expect("a jar reads only fields");
    let read = |parts: &[Vec<u8>]| {
        let mut stream = ResponseStream::default();
        stream.keep_only(only);
        let mut heads = HeadCache::default();
        stream.receive(&concat(parts), &mut heads).expect("a good response");
        stream.finish().expect("whole");
        stream.take_kept()
    };
    assert!(read(&[headers(OK), data(b"hi")]).is_none(), "no set-cookie: nothing kept, nothing to judge");
    // set-cookie by static reference (14) in a 103's head is not the final head's.
    let early = headers("0000 ff00 5e 03 613d30");
    assert!(read(&[early.clone(), headers(OK), data(b"hi")]).is_none());
    let kept = read(&[early, headers("0000 d9 5e 03 613d31"), data(b"hi")]).expect("the final head has a set-cookie");
    let (_, extracted) = checks.judge(&kept).expect("a verdict");
    assert_eq!(extracted.set_cookies, [b"a=1".to_vec()]);
    assert_eq!(crate::plan::KeptResponse::body(&kept), b"", "the body is not kept for a jar");
    // A rule on the body reads more than fields: its response is kept from the start.
    let rules = [crate::plan::Rule::BodySize(0..=u64::MAX)];
    assert!(KeptChecks::of(rules.iter(), &[], &[], &[], jar).expect("a rule").only_fields().is_none());
}

#[test]
fn a_kept_body_is_the_data_frames_payloads_only_at_every_split() {
    let bytes = concat(&[
        headers("0000 d8"),
        headers(OK),
        data(b"hello, "),
        frame(0x21, b"not the body"),
        data(b""),
        data(b"world!"),
        headers("0000 2361626303646566"),
    ]);
    for at in 0..=bytes.len() {
        assert_eq!(kept_at(&bytes, at), b"hello, world!", "split at {at}");
    }
    assert_eq!(read_response(&[&bytes]).map(|r| r.body_bytes), Ok(13));
}

#[test]
fn informational_responses_unknown_frames_several_data_frames_and_trailers_are_read() {
    let bytes = concat(&[
        frame(0x21, b"grease"),
        // 103 Early Hints, then 100 Continue, before the final 404.
        headers("0000 d8"),
        headers("0000 ff00"),
        frame(0x1f * 9 + 0x21, b""),
        headers("0000 db 5f4d 03 616263"),
        data(&[b'a'; 1000]),
        frame(0x21, &[0; 40]),
        data(b""),
        data(&[b'b'; 70]),
        // Trailers: a literal-name field.
        headers("0000 2361626303646566"),
        frame(0x21, b"after the trailers"),
    ]);
    assert_eq!(response_at_every_split(&bytes), Ok(Response { status: 404, body_bytes: 1070, retry_after: None }));
}

#[test]
fn the_final_responses_retry_after_is_kept_and_an_informational_ones_is_not() {
    // 103 with retry-after: 7 (name "retry-after" plain, value "7"), then 503 (static 28)
    // with retry-after: 30, at every split.
    let bytes = concat(&[
        headers("0000 ff00 2704 72657472792d6166746572 01 37"),
        headers("0000 dc 2704 72657472792d6166746572 02 3330"),
        data(b"busy"),
    ]);
    let want = Response { status: 503, body_bytes: 4, retry_after: Some(RetryAfter::Seconds(30)) };
    assert_eq!(response_at_every_split(&bytes), Ok(want));
    let bytes = concat(&[headers("0000 ff00 2704 72657472792d6166746572 01 37"), headers(OK)]);
    assert_eq!(response_at_every_split(&bytes), Ok(Response { status: 200, body_bytes: 0, retry_after: None }));
}

#[test]
fn status_and_body_are_known_before_the_end() {
    let mut stream = ResponseStream::default();
    let mut heads = HeadCache::default();
    let bytes = concat(&[headers(OK), data(&[0; 10])]);
    stream.receive(&bytes[..3], &mut heads).expect("valid");
    assert_eq!(stream.status(), None);
    stream.receive(&bytes[3..9], &mut heads).expect("valid");
    assert_eq!(stream.status(), Some(200));
    assert_eq!(stream.body_bytes(), 2);
    stream.receive(&bytes[9..], &mut heads).expect("valid");
    assert_eq!(stream.body_bytes(), 10);
}

#[test]
fn frames_out_of_order_on_a_request_stream_are_connection_errors() {
    let cases: [(&str, Vec<u8>, &str); 8] = [
        ("DATA before HEADERS", concat(&[data(b"x"), headers(OK)]), "DATA"),
        ("DATA after a 1xx", concat(&[headers("0000 d8"), data(b"x")]), "DATA"),
        ("HEADERS after trailers", concat(&[headers(OK), headers("0000"), headers("0000")]), "HEADERS"),
        ("DATA after trailers", concat(&[headers(OK), data(b"x"), headers("0000"), data(b"y")]), "DATA"),
        ("SETTINGS", concat(&[headers(OK), frame(kind::SETTINGS, b"")]), "SETTINGS"),
        ("GOAWAY", concat(&[headers(OK), frame(kind::GOAWAY, &[0])]), "GOAWAY"),
        ("MAX_PUSH_ID", concat(&[frame(kind::MAX_PUSH_ID, &[0]), headers(OK)]), "MAX_PUSH_ID"),
        ("HTTP/2's PING", concat(&[headers(OK), frame(0x06, &[0; 8])]), "a reserved HTTP/2"),
    ];
    for (what, bytes, name) in cases {
        let e = response_at_every_split(&bytes).unwrap_err();
        assert_eq!(e, H3Error::FrameUnexpected { frame: name, stream: "request" }, "{what}");
        assert_eq!(e.code(), code::H3_FRAME_UNEXPECTED);
        assert!(e.is_connection_error());
    }
    let e = response_at_every_split(&concat(&[frame(kind::CANCEL_PUSH, &[0]), headers(OK)])).unwrap_err();
    assert_eq!(e.code(), code::H3_FRAME_UNEXPECTED);
}

#[test]
fn a_push_promise_is_an_id_error_since_we_allow_no_pushes() {
    let bytes = concat(&[headers(OK), frame(kind::PUSH_PROMISE, &hex("00 0000d9")), data(b"x")]);
    let e = response_at_every_split(&bytes).unwrap_err();
    assert_eq!(e, H3Error::Push { frame: "PUSH_PROMISE" });
    assert_eq!(e.code(), code::H3_ID_ERROR);
}

#[test]
fn a_response_cut_short_is_an_error_of_its_kind() {
    // Ending inside a frame: H3_FRAME_ERROR (RFC 9114 §7.1).
    let whole = concat(&[headers(OK), data(b"hello")]);
    let e = response_at_every_split(&whole[..whole.len() - 1]).unwrap_err();
    assert_eq!(e, H3Error::TruncatedFrame);
    assert_eq!(e.code(), code::H3_FRAME_ERROR);
    // Ending before the final headers: a malformed response, for this stream only.
    for bytes in [vec![], headers("0000 d8"), frame(0x21, b"x")] {
        let e = response_at_every_split(&bytes).unwrap_err();
        assert_eq!(e, H3Error::IncompleteResponse);
        assert_eq!(e.code(), code::H3_MESSAGE_ERROR);
        assert!(!e.is_connection_error());
    }
}

#[test]
fn malformed_headers_are_stream_errors_and_dynamic_table_use_a_connection_error() {
    let message_errors = [
        (headers("0000 5f4d 01 61"), H3Error::MissingStatus),
        (headers("0000 5f09 03 313031"), H3Error::SwitchingProtocols),
        (concat(&[headers(OK), data(b"x"), headers("0000 d9")]), H3Error::StatusInTrailers),
    ];
    for (bytes, error) in message_errors {
        assert_eq!(response_at_every_split(&bytes), Err(error));
        assert_eq!(error.code(), code::H3_MESSAGE_ERROR);
        assert!(!error.is_connection_error());
    }
    let e = response_at_every_split(&headers("0381 10 11")).unwrap_err();
    assert_eq!(e.code(), code::QPACK_DECOMPRESSION_FAILED);
    assert!(e.is_connection_error());
}

#[test]
fn large_response_headers_are_read_in_any_pieces() {
    // 300 fields of 100-byte values behind the status: a 30 KB field section.
    let mut section = hex("0000 d9");
    for i in 0..300u32 {
        // A literal name of 6 bytes, "x-hdr" and a digit, then a 100-byte value.
        section.extend(hex("2678 2d68 6472"));
        section.push(b'0' + (i % 10) as u8);
        section.extend(hex("64"));
        section.extend([b'v'; 100]);
    }
    let bytes = concat(&[frame(kind::HEADERS, &section), data(b"ok")]);
    assert!(bytes.len() > 30_000);
    let want = Ok(Response { status: 200, body_bytes: 2, retry_after: None });
    assert_eq!(read_response(&[&bytes]), want);
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(read_response(&bytewise), want);
    for size in [2, 3, 1000, 1200, 16_384] {
        let pieces: Vec<&[u8]> = bytes.chunks(size).collect();
        assert_eq!(read_response(&pieces), want, "pieces of {size}");
    }
}

// --- The server's unidirectional streams -------------------------------------------------------

/// One stream fed `chunks` in turn: the events, and the first error (of receiving, or of the
/// stream's end when `end` is set).
fn read_uni(seen: &mut SeenStreams, chunks: &[&[u8]], end: bool) -> (Vec<ControlEvent>, Result<(), H3Error>) {
    let mut stream = UniStream::default();
    let mut events = Vec::new();
    for chunk in chunks {
        if let Err(e) = stream.receive(seen, chunk, &mut events) {
            return (events, Err(e));
        }
    }
    (events, if end { stream.finish() } else { Ok(()) })
}

fn uni_at_every_split(bytes: &[u8], end: bool) -> (Vec<ControlEvent>, Result<(), H3Error>) {
    let expected = read_uni(&mut SeenStreams::default(), &[bytes], end);
    for at in 0..=bytes.len() {
        let got = read_uni(&mut SeenStreams::default(), &[&bytes[..at], &bytes[at..]], end);
        assert_eq!(got, expected, "split at {at}");
    }
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(read_uni(&mut SeenStreams::default(), &bytewise, end), expected, "byte by byte");
    expected
}

const SETTINGS: &str = "04 04 01 00 07 00";

#[test]
fn a_control_stream_gives_its_settings_and_goaways_at_every_split() {
    let bytes = concat(&[
        hex("00"),
        hex("04 05 06 4400 21 01"),
        frame(0x21, b"grease"),
        frame(kind::GOAWAY, &hex("08")),
        frame(kind::GOAWAY, &hex("4004")),
        frame(kind::GOAWAY, &hex("04")),
    ]);
    let settings = Settings { max_field_section_size: Some(0x400), ..Settings::default() };
    let (events, result) = uni_at_every_split(&bytes, false);
    assert_eq!(result, Ok(()));
    assert_eq!(
        events,
        [ControlEvent::Settings(settings), ControlEvent::GoAway(8), ControlEvent::GoAway(4), ControlEvent::GoAway(4)]
    );
}

#[test]
fn a_stream_type_in_a_longer_varint_is_still_the_control_stream() {
    let bytes = concat(&[hex("4000"), hex(SETTINGS)]);
    let (events, result) = uni_at_every_split(&bytes, false);
    assert_eq!(result, Ok(()));
    assert_eq!(events, [ControlEvent::Settings(Settings::default())]);
}

#[test]
fn the_control_stream_must_open_with_settings_and_send_them_once() {
    for first in [frame(kind::GOAWAY, &[0]), frame(0x21, b""), data(b"")] {
        let bytes = concat(&[hex("00"), first, hex(SETTINGS)]);
        let e = uni_at_every_split(&bytes, false).1.unwrap_err();
        assert_eq!(e, H3Error::MissingSettings);
        assert_eq!(e.code(), code::H3_MISSING_SETTINGS);
    }
    let bytes = concat(&[hex("00"), hex(SETTINGS), hex(SETTINGS)]);
    let e = uni_at_every_split(&bytes, false).1.unwrap_err();
    assert_eq!(e, H3Error::FrameUnexpected { frame: "SETTINGS", stream: "control" });
}

#[test]
fn request_and_push_frames_on_the_control_stream_are_refused_with_their_codes() {
    let cases = [
        (data(b"x"), code::H3_FRAME_UNEXPECTED),
        (headers(OK), code::H3_FRAME_UNEXPECTED),
        (frame(kind::PUSH_PROMISE, &hex("00 0000d9")), code::H3_FRAME_UNEXPECTED),
        // Only clients send MAX_PUSH_ID.
        (frame(kind::MAX_PUSH_ID, &[0]), code::H3_FRAME_UNEXPECTED),
        (frame(0x08, &[0; 4]), code::H3_FRAME_UNEXPECTED),
        // A push we never allowed.
        (frame(kind::CANCEL_PUSH, &[0]), code::H3_ID_ERROR),
    ];
    for (bad, error_code) in cases {
        let bytes = concat(&[hex("00"), hex(SETTINGS), bad]);
        let (events, result) = uni_at_every_split(&bytes, false);
        assert_eq!(events.len(), 1, "the SETTINGS came first");
        assert_eq!(result.unwrap_err().code(), error_code);
    }
}

#[test]
fn goaway_must_name_a_request_stream_and_never_grow() {
    let bytes = concat(&[hex("00"), hex(SETTINGS), frame(kind::GOAWAY, &hex("02"))]);
    assert_eq!(uni_at_every_split(&bytes, false).1, Err(H3Error::GoawayNotARequestStream { id: 2 }));
    let bytes = concat(&[hex("00"), hex(SETTINGS), frame(kind::GOAWAY, &hex("04")), frame(kind::GOAWAY, &hex("08"))]);
    let (events, result) = uni_at_every_split(&bytes, false);
    assert_eq!(events.last(), Some(&ControlEvent::GoAway(4)));
    let e = result.unwrap_err();
    assert_eq!(e, H3Error::GoawayIncreased { previous: 4, id: 8 });
    assert_eq!(e.code(), code::H3_ID_ERROR);
}

#[test]
fn a_push_stream_is_refused_and_qpack_and_unknown_streams_are_drained() {
    let e = uni_at_every_split(&hex("01 00 0000"), false).1.unwrap_err();
    assert_eq!(e, H3Error::PushStream);
    assert_eq!(e.code(), code::H3_ID_ERROR);
    // QPACK encoder (Set Dynamic Table Capacity 0) and decoder streams: read, nothing said.
    assert_eq!(uni_at_every_split(&hex("02 20"), false), (vec![], Ok(())));
    assert_eq!(uni_at_every_split(&hex("03 00 00"), false), (vec![], Ok(())));
    // A greasing type in a 2-byte varint (0x1f * 3 + 0x21), any bytes after it.
    assert_eq!(uni_at_every_split(&hex("407e ffff ffff 00"), true), (vec![], Ok(())));
    let mut stream = UniStream::default();
    stream.receive(&mut SeenStreams::default(), &hex("21"), &mut Vec::new()).expect("unknown type");
    assert!(stream.is_drained());
}

#[test]
fn a_second_control_or_qpack_stream_is_a_stream_creation_error() {
    for kind in ["00", "02", "03"] {
        let mut seen = SeenStreams::default();
        let opening = if kind == "00" { concat(&[hex(kind), hex(SETTINGS)]) } else { hex(kind) };
        assert_eq!(read_uni(&mut seen, &[&opening], false).1, Ok(()));
        let e = read_uni(&mut seen, &[&opening], false).1.unwrap_err();
        assert_eq!(e.code(), code::H3_STREAM_CREATION_ERROR, "stream type {kind}");
    }
    // Unknown types may come any number of times.
    let mut seen = SeenStreams::default();
    for _ in 0..3 {
        assert_eq!(read_uni(&mut seen, &[&hex("21")], true).1, Ok(()));
    }
}

#[test]
fn closing_a_critical_stream_is_an_error_and_closing_others_is_not() {
    for opening in [concat(&[hex("00"), hex(SETTINGS)]), hex("00"), hex("02"), hex("03")] {
        let e = uni_at_every_split(&opening, true).1.unwrap_err();
        assert_eq!(e.code(), code::H3_CLOSED_CRITICAL_STREAM, "{opening:02x?}");
    }
    // Ended before its type was whole: it was nothing.
    assert_eq!(read_uni(&mut SeenStreams::default(), &[&hex("40")], true).1, Ok(()));
    assert_eq!(read_uni(&mut SeenStreams::default(), &[], true).1, Ok(()));
}
