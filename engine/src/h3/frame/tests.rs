//! The frame decoder on byte strings: every frame type, the limits, and every split.

use super::*;
use crate::h3::error::code;

/// A frame's bytes.
pub(crate) fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_head(kind, payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("hex"), 16).expect("hex")).collect()
}

/// What the decoder said, owned, with the pieces of consecutive DATA joined.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Data(Vec<u8>),
    Headers(Vec<u8>),
    Settings(Settings),
    GoAway(u64),
    CancelPush(u64),
    MaxPushId(u64),
    PushPromise,
    Http2Reserved(u64),
    Unknown(u64),
}

/// Feeds `chunks` in turn, then ends the stream.
fn decode(chunks: &[&[u8]]) -> (Vec<Seen>, Result<(), H3Error>) {
    let mut decoder = FrameDecoder::default();
    let mut seen = Vec::new();
    for chunk in chunks {
        let mut input = *chunk;
        loop {
            let frame = match decoder.next(&mut input) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => return (seen, Err(e)),
            };
            let item = match frame {
                Frame::Data(piece) => {
                    if let Some(Seen::Data(joined)) = seen.last_mut() {
                        joined.extend_from_slice(piece);
                        continue;
                    }
                    Seen::Data(piece.to_vec())
                }
                Frame::Headers(p) => Seen::Headers(p.to_vec()),
                Frame::Settings(s) => Seen::Settings(s),
                Frame::GoAway(id) => Seen::GoAway(id),
                Frame::CancelPush(id) => Seen::CancelPush(id),
                Frame::MaxPushId(id) => Seen::MaxPushId(id),
                Frame::PushPromise => Seen::PushPromise,
                Frame::Http2Reserved(k) => Seen::Http2Reserved(k),
                Frame::Unknown(k) => Seen::Unknown(k),
            };
            seen.push(item);
        }
        assert!(input.is_empty(), "the decoder leaves nothing unread");
    }
    (seen, decoder.finish())
}

fn whole(bytes: &[u8]) -> (Vec<Seen>, Result<(), H3Error>) {
    decode(&[bytes])
}

/// The result is the same whole, split at every point into two, and byte by byte.
fn same_at_every_split(bytes: &[u8]) -> (Vec<Seen>, Result<(), H3Error>) {
    let expected = whole(bytes);
    for at in 0..=bytes.len() {
        assert_eq!(decode(&[&bytes[..at], &bytes[at..]]), expected, "split at {at}");
    }
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(decode(&bytewise), expected, "byte by byte");
    expected
}

#[test]
fn data_frames_are_given_as_they_arrive_even_when_empty() {
    assert_eq!(whole(&hex("00 05 68656c6c6f")), (vec![Seen::Data(b"hello".to_vec())], Ok(())));
    assert_eq!(whole(&hex("00 00")), (vec![Seen::Data(vec![])], Ok(())));
    // A DATA frame's length in a two-byte varint.
    let mut big = hex("00 41 2c");
    big.extend_from_slice(&[b'x'; 300]);
    assert_eq!(whole(&big), (vec![Seen::Data(vec![b'x'; 300])], Ok(())));
}

#[test]
fn headers_settings_and_the_one_varint_frames_decode_whole() {
    assert_eq!(whole(&hex("01 03 0000d9")).0, [Seen::Headers(hex("0000d9"))]);
    let settings =
        Settings { qpack_max_table_capacity: 4096, max_field_section_size: Some(16_384), qpack_blocked_streams: 100 };
    // 0x01 = 4096 (2-byte varint), 0x06 = 16384 (4-byte), 0x07 = 100 (2-byte).
    assert_eq!(whole(&hex("04 0b 01 5000 06 80004000 07 4064")).0, [Seen::Settings(settings)]);
    assert_eq!(whole(&hex("04 00")).0, [Seen::Settings(Settings::default())]);
    assert_eq!(whole(&hex("07 01 04")).0, [Seen::GoAway(4)]);
    // Longer varint encodings than needed are valid.
    assert_eq!(whole(&hex("07 02 4004")).0, [Seen::GoAway(4)]);
    assert_eq!(whole(&hex("03 01 00")).0, [Seen::CancelPush(0)]);
    assert_eq!(whole(&hex("0d 01 05")).0, [Seen::MaxPushId(5)]);
}

#[test]
fn unknown_and_greasing_settings_are_ignored() {
    // 0x21 and 0x1f * 7 + 0x21 = 0x100 are reserved for greasing (RFC 9114 §7.2.4.1).
    let (seen, end) = whole(&hex("04 08 21 05 4100 4001 01 10"));
    assert_eq!(end, Ok(()));
    assert_eq!(seen, [Seen::Settings(Settings { qpack_max_table_capacity: 16, ..Settings::default() })]);
}

#[test]
fn http2_settings_and_repeated_settings_are_settings_errors() {
    for id in [0x00, 0x02, 0x03, 0x04, 0x05] {
        let e = whole(&frame(kind::SETTINGS, &[id, 0x00])).1.unwrap_err();
        assert_eq!(e, H3Error::ReservedSetting { id: u64::from(id) });
        assert_eq!(e.code(), code::H3_SETTINGS_ERROR);
    }
    let e = whole(&hex("04 04 06 01 06 02")).1.unwrap_err();
    assert_eq!(e, H3Error::DuplicateSetting { id: 6 });
    assert_eq!(e.code(), code::H3_SETTINGS_ERROR);
}

#[test]
fn a_settings_pair_cut_short_is_a_frame_error() {
    let e = whole(&hex("04 03 06 01 07")).1.unwrap_err();
    assert_eq!(e, H3Error::MalformedFrame { frame: "SETTINGS", len: 3 });
    assert_eq!(e.code(), code::H3_FRAME_ERROR);
    // A varint whose length runs past the payload.
    assert_eq!(whole(&hex("04 02 06 40")).1.unwrap_err().code(), code::H3_FRAME_ERROR);
}

#[test]
fn one_varint_frames_with_more_or_less_than_one_varint_are_frame_errors() {
    for bytes in ["07 00", "07 02 04 00", "07 02 80 00", "03 00", "0d 03 01 02 03"] {
        let e = whole(&hex(bytes)).1.unwrap_err();
        assert_eq!(e.code(), code::H3_FRAME_ERROR, "{bytes}");
        assert!(e.is_connection_error());
    }
    // Longer than any varint: refused at the header, before its payload arrives.
    assert_eq!(whole(&hex("07 09")).1.unwrap_err(), H3Error::MalformedFrame { frame: "GOAWAY", len: 9 });
}

#[test]
fn push_promise_reserved_and_unknown_types_are_reported_at_their_header_and_skipped() {
    let mut bytes = frame(kind::PUSH_PROMISE, &hex("00 0000d9"));
    for reserved in [0x02, 0x06, 0x08, 0x09] {
        bytes.extend(frame(reserved, b"ignored"));
    }
    bytes.extend(frame(0x21, b"grease"));
    // A type in an 8-byte varint: 0x1f * 1_000_000 + 0x21.
    let mut big_type = Vec::new();
    varint::encode(0x1f * 1_000_000 + 0x21, &mut big_type);
    bytes.extend_from_slice(&big_type);
    bytes.extend(hex("03 616263"));
    bytes.extend(frame(kind::DATA, b"after"));
    let (seen, end) = same_at_every_split(&bytes);
    assert_eq!(end, Ok(()));
    assert_eq!(
        seen,
        [
            Seen::PushPromise,
            Seen::Http2Reserved(0x02),
            Seen::Http2Reserved(0x06),
            Seen::Http2Reserved(0x08),
            Seen::Http2Reserved(0x09),
            Seen::Unknown(0x21),
            Seen::Unknown(0x1f * 1_000_000 + 0x21),
            Seen::Data(b"after".to_vec()),
        ]
    );
}

#[test]
fn headers_beyond_the_limit_are_refused_at_their_header_as_a_stream_error() {
    let mut bytes = Vec::new();
    encode_head(kind::HEADERS, MAX_HEADERS_LEN as u64 + 1, &mut bytes);
    let e = whole(&bytes).1.unwrap_err();
    assert_eq!(e, H3Error::HeadersTooLarge { len: MAX_HEADERS_LEN as u64 + 1, max: MAX_HEADERS_LEN });
    assert_eq!(e.code(), code::H3_EXCESSIVE_LOAD);
    assert!(!e.is_connection_error());
    let mut bytes = Vec::new();
    encode_head(kind::SETTINGS, MAX_SETTINGS_LEN as u64 + 1, &mut bytes);
    let e = whole(&bytes).1.unwrap_err();
    assert_eq!(e.code(), code::H3_EXCESSIVE_LOAD);
    assert!(e.is_connection_error());
}

#[test]
fn a_stream_ending_inside_a_frame_or_its_header_is_a_frame_error() {
    for bytes in ["00 05 6865", "01 03 00", "04", "07 01", "21 03 61", "40"] {
        let (_, end) = whole(&hex(bytes));
        assert_eq!(end, Err(H3Error::TruncatedFrame), "{bytes}");
        assert_eq!(H3Error::TruncatedFrame.code(), code::H3_FRAME_ERROR);
    }
    assert_eq!(whole(&[]).1, Ok(()));
}

#[test]
fn every_frame_kind_in_a_row_decodes_the_same_at_every_split() {
    let mut bytes = Vec::new();
    bytes.extend(frame(kind::SETTINGS, &hex("01 00 07 00 06 4400")));
    bytes.extend(frame(kind::HEADERS, &hex("0000 d9 5f09 03 323031")));
    bytes.extend(frame(kind::DATA, &[7u8; 100]));
    bytes.extend(frame(0x21, &[1, 2, 3]));
    bytes.extend(frame(kind::DATA, b""));
    bytes.extend(frame(kind::GOAWAY, &hex("4004")));
    bytes.extend(frame(kind::CANCEL_PUSH, &hex("01")));
    bytes.extend(frame(kind::MAX_PUSH_ID, &hex("02")));
    bytes.extend(frame(kind::HEADERS, &hex("0000")));
    let (seen, end) = same_at_every_split(&bytes);
    assert_eq!(end, Ok(()));
    assert_eq!(seen.len(), 9, "{seen:?}");
    assert_eq!(seen[2], Seen::Data(vec![7u8; 100]));
}

#[test]
fn a_whole_frame_in_one_piece_is_borrowed_and_a_split_one_gathered() {
    let bytes = frame(kind::HEADERS, &hex("0000 d9"));
    let mut decoder = FrameDecoder::default();
    let mut input = bytes.as_slice();
    let Ok(Some(Frame::Headers(section))) = decoder.next(&mut input) else { panic!("whole HEADERS") };
    assert!(std::ptr::eq(section.as_ptr(), bytes[2..].as_ptr()), "borrowed from the input");
    let mut first = &bytes[..3];
    assert_eq!(decoder.next(&mut first), Ok(None));
    let mut rest = &bytes[3..];
    assert_eq!(decoder.next(&mut rest), Ok(Some(Frame::Headers(&hex("0000 d9")))));
}

#[test]
fn our_control_stream_and_request_head_are_the_expected_bytes() {
    let mut control = Vec::new();
    encode_control_stream(&mut control);
    assert_eq!(control, hex("00 04 04 01 00 07 00"));
    let mut head = Vec::new();
    encode_request_head(&hex("0000 d1 d7 c1"), 0, &mut head);
    assert_eq!(head, hex("01 05 0000 d1 d7 c1"));
    let mut head = Vec::new();
    encode_request_head(&hex("0000 d1"), 70_000, &mut head);
    // DATA of 70,000 bytes: a 4-byte varint length.
    assert_eq!(head, hex("01 03 0000 d1 00 80011170"));
}
