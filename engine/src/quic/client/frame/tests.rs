use super::*;
use crate::test_rng::Rng;

/// Every frame of `payload`, or the first error.
fn parse_all(payload: &[u8]) -> Result<Vec<Frame<'_>>, FrameError> {
    Frames::new(payload).collect()
}

/// The one frame `payload` holds.
fn parse_one(payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let mut frames = Frames::new(payload);
    let frame = frames.next().expect("a frame");
    if frame.is_ok() {
        assert_eq!(frames.next(), None, "one frame in {payload:02x?}");
    }
    frame
}

fn ranges(frame: &Frame) -> Vec<(u64, u64)> {
    match frame {
        Frame::Ack(ack) => ack.ranges().collect(),
        other => panic!("not an ACK: {other:?}"),
    }
}

fn stream(id: u64, offset: u64, data: &[u8], fin: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_stream_header(&mut out, id, offset, data.len(), fin);
    assert_eq!(out.len(), stream_header_len(id, offset, data.len()));
    out.extend_from_slice(data);
    out
}

fn crypto(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_crypto_header(&mut out, offset, data.len());
    assert_eq!(out.len(), crypto_header_len(offset, data.len()));
    out.extend_from_slice(data);
    out
}

fn ack(ranges: &[(u64, u64)], delay: u64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_ack(&mut out, ranges.iter().copied(), delay);
    out
}

fn encoded(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut out);
    out
}

/// One of every frame we encode, with values at varint boundaries.
fn encoded_frames() -> Vec<Vec<u8>> {
    vec![
        ack(&[(0, 0)], 0),
        ack(&[(90, 100), (50, 60), (0, 10)], 1234),
        stream(0, 0, b"", false),
        stream(4, 0, b"GET /", true),
        stream(varint::MAX, 0x3fff_ffff, &[7; 300], false),
        crypto(0, b"client hello"),
        crypto(0x4000, &[1; 64]),
        encoded(|o| encode_reset_stream(o, 8, 0x10c, 1 << 40)),
        encoded(|o| encode_stop_sending(o, 12, 0x10c)),
        encoded(|o| encode_max_data(o, 1 << 30)),
        encoded(|o| encode_max_stream_data(o, 16, 0x3f)),
        encoded(|o| encode_max_streams(o, true, 1 << 60)),
        encoded(|o| encode_max_streams(o, false, 100)),
        encoded(|o| encode_retire_connection_id(o, 3)),
        encoded(|o| encode_path_response(o, *b"abcdefgh")),
        encoded(|o| encode_connection_close(o, false, 0x0a, b"bye")),
        encoded(|o| encode_connection_close(o, true, 0x100, b"")),
    ]
}

/// Frames we only parse, written by hand from RFC 9000 §19.
fn handwritten_frames() -> Vec<(Vec<u8>, Frame<'static>)> {
    let mut ncid = vec![0x18, 0x05, 0x02, 0x04, 0xde, 0xad, 0xbe, 0xef];
    ncid.extend_from_slice(&[0x11; 16]);
    vec![
        (
            ncid,
            Frame::NewConnectionId {
                seq: 5,
                retire_prior_to: 2,
                cid: &[0xde, 0xad, 0xbe, 0xef],
                reset_token: [0x11; 16],
            },
        ),
        (vec![0x07, 0x03, b't', b'o', b'k'], Frame::NewToken { token: b"tok" }),
        (b"\x1a12345678".to_vec(), Frame::PathChallenge(*b"12345678")),
        (vec![0x14, 0x80, 0x01, 0x00, 0x00], Frame::DataBlocked(0x1_0000)),
        (vec![0x15, 0x04, 0x44, 0x00], Frame::StreamDataBlocked { id: 4, limit: 0x400 }),
        (vec![0x16, 0x0a], Frame::StreamsBlocked { bidi: true, limit: 10 }),
        (vec![0x17, 0x03], Frame::StreamsBlocked { bidi: false, limit: 3 }),
        (
            vec![0x1c, 0x0a, 0x08, 0x02, b'n', b'o'],
            Frame::ConnectionClose { application: false, code: 0x0a, frame_type: Some(0x08), reason: b"no" },
        ),
        (
            vec![0x1d, 0x41, 0x00, 0x01, b'x'],
            Frame::ConnectionClose { application: true, code: 0x100, frame_type: None, reason: b"x" },
        ),
    ]
}

#[test]
fn every_encoded_frame_round_trips() {
    let cases: Vec<(Vec<u8>, Frame)> = vec![
        (encoded(encode_ping), Frame::Ping),
        (stream(4, 0, b"GET /", true), Frame::Stream { id: 4, offset: 0, data: b"GET /", fin: true }),
        (stream(8, 1 << 20, b"body", false), Frame::Stream { id: 8, offset: 1 << 20, data: b"body", fin: false }),
        (stream(0, 0, b"", false), Frame::Stream { id: 0, offset: 0, data: b"", fin: false }),
        (crypto(0x4000, b"finished"), Frame::Crypto { offset: 0x4000, data: b"finished" }),
        (
            encoded(|o| encode_reset_stream(o, 8, 0x10c, 1 << 40)),
            Frame::ResetStream { id: 8, code: 0x10c, final_size: 1 << 40 },
        ),
        (encoded(|o| encode_stop_sending(o, 12, 0x10c)), Frame::StopSending { id: 12, code: 0x10c }),
        (encoded(|o| encode_max_data(o, varint::MAX)), Frame::MaxData(varint::MAX)),
        (encoded(|o| encode_max_stream_data(o, 16, 0x40)), Frame::MaxStreamData { id: 16, max: 0x40 }),
        (encoded(|o| encode_max_streams(o, true, 1 << 60)), Frame::MaxStreams { bidi: true, max: 1 << 60 }),
        (encoded(|o| encode_max_streams(o, false, 7)), Frame::MaxStreams { bidi: false, max: 7 }),
        (encoded(|o| encode_retire_connection_id(o, 3)), Frame::RetireConnectionId { seq: 3 }),
        (encoded(|o| encode_path_response(o, *b"abcdefgh")), Frame::PathResponse(*b"abcdefgh")),
        (
            encoded(|o| encode_connection_close(o, false, 0x0a, b"bye")),
            Frame::ConnectionClose { application: false, code: 0x0a, frame_type: Some(0), reason: b"bye" },
        ),
        (
            encoded(|o| encode_connection_close(o, true, 0x100, b"")),
            Frame::ConnectionClose { application: true, code: 0x100, frame_type: None, reason: b"" },
        ),
    ];
    for (bytes, frame) in &cases {
        assert_eq!(parse_one(bytes).as_ref(), Ok(frame), "{bytes:02x?}");
    }
}

#[test]
fn an_encoded_ack_round_trips_its_ranges_and_delay() {
    let cases: [&[(u64, u64)]; 5] = [
        &[(0, 0)],
        &[(5, 5), (3, 3), (0, 1)],
        &[(1000, 2000), (900, 997), (2, 10), (0, 0)],
        &[(varint::MAX - 10, varint::MAX), (0, 1 << 40)],
        &[(100, 100)],
    ];
    for case in cases {
        let bytes = ack(case, 25);
        let frame = parse_one(&bytes).expect("ACK");
        let Frame::Ack(a) = &frame else { panic!("{frame:?}") };
        assert_eq!(a.largest, case[0].1);
        assert_eq!(a.delay, 25);
        assert_eq!(a.ranges().len(), case.len());
        assert_eq!(ranges(&frame), case);
    }
}

#[test]
fn an_ack_with_more_than_63_ranges_writes_a_two_byte_count() {
    let case: Vec<(u64, u64)> = (0..100).rev().map(|i| (i * 10, i * 10 + 3)).collect();
    let bytes = ack(&case, 0);
    assert_eq!(ranges(&parse_one(&bytes).expect("ACK")), case);
}

#[test]
fn an_ack_with_several_ranges_yields_them_largest_first() {
    // Largest 100, delay 2, 2 more ranges, first range 5 (95..=100); gap 3, length 4
    // (largest 95 - 3 - 2 = 90, 86..=90); gap 0, length 0 (largest 86 - 0 - 2 = 84, 84..=84).
    let bytes = [0x02, 0x40, 0x64, 0x02, 0x02, 0x05, 0x03, 0x04, 0x00, 0x00];
    let frame = parse_one(&bytes).expect("ACK");
    assert_eq!(ranges(&frame), [(95, 100), (86, 90), (84, 84)]);
    let Frame::Ack(a) = frame else { unreachable!() };
    assert_eq!((a.largest, a.delay), (100, 2));
}

#[test]
fn an_ecn_ack_parses_its_counts_and_drops_them() {
    let bytes = [0x03, 0x0a, 0x00, 0x01, 0x02, 0x01, 0x01, 0x05, 0x06, 0x40, 0x07, 0x01];
    let mut frames = Frames::new(&bytes);
    let frame = frames.next().expect("a frame").expect("ACK_ECN");
    assert_eq!(ranges(&frame), [(8, 10), (4, 5)]);
    assert_eq!(frames.next(), Some(Ok(Frame::Ping)));
    assert_eq!(frames.next(), None);
}

#[test]
fn an_ack_range_below_packet_zero_is_malformed() {
    // First range larger than the largest packet number.
    assert_eq!(parse_one(&[0x02, 0x03, 0x00, 0x00, 0x04]), Err(FrameError::Malformed("ACK")));
    // A gap reaching below 0: smallest 2, gap 1 gives largest 2 - 1 - 2 < 0.
    assert_eq!(parse_one(&[0x02, 0x03, 0x00, 0x01, 0x01, 0x01, 0x00]), Err(FrameError::Malformed("ACK")));
    // A range reaching below 0: smallest 2, gap 0 gives largest 0, then length 1.
    assert_eq!(parse_one(&[0x02, 0x03, 0x00, 0x01, 0x01, 0x00, 0x01]), Err(FrameError::Malformed("ACK")));
    // Down to exactly packet 0 is fine.
    assert_eq!(ranges(&parse_one(&[0x02, 0x03, 0x00, 0x01, 0x01, 0x00, 0x00]).expect("ACK")), [(2, 3), (0, 0)]);
}

#[test]
fn an_ack_claiming_more_ranges_than_it_holds_is_truncated() {
    assert_eq!(parse_one(&[0x02, 0x40, 0x64, 0x00, 0xbf, 0xff, 0xff, 0xff, 0x00]), Err(FrameError::Truncated));
}

#[test]
fn frames_we_only_parse_read_from_their_bytes() {
    for (bytes, frame) in handwritten_frames() {
        assert_eq!(parse_one(&bytes), Ok(frame), "{bytes:02x?}");
    }
    assert_eq!(parse_one(&[0x1e]), Ok(Frame::HandshakeDone));
}

#[test]
fn a_run_of_padding_is_one_frame() {
    let mut payload = encoded(|o| encode_padding(o, 5));
    assert_eq!(payload, [0; 5]);
    encode_ping(&mut payload);
    encode_padding(&mut payload, 1200);
    assert_eq!(parse_all(&payload), Ok(vec![Frame::Padding, Frame::Ping, Frame::Padding]));
}

#[test]
fn a_stream_frame_without_len_takes_the_rest_of_the_packet() {
    // OFF and FIN, no LEN: id 4, offset 0x100, then everything left.
    let bytes = [0x0d, 0x04, 0x41, 0x00, b'a', b'b', 0x00, 0x01];
    assert_eq!(parse_all(&bytes), Ok(vec![Frame::Stream { id: 4, offset: 0x100, data: b"ab\x00\x01", fin: true }]));
    assert_eq!(parse_all(&[0x08, 0x00]), Ok(vec![Frame::Stream { id: 0, offset: 0, data: b"", fin: false }]));
}

#[test]
fn a_stream_frame_past_the_largest_offset_is_malformed() {
    let mut bytes = vec![0x0e, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, b'x'];
    assert_eq!(parse_one(&bytes), Err(FrameError::Malformed("STREAM")));
    // Ending exactly at 2^62 - 1 is allowed.
    bytes.truncate(bytes.len() - 2);
    bytes.push(0x00);
    assert_eq!(parse_one(&bytes), Ok(Frame::Stream { id: 0, offset: varint::MAX, data: b"", fin: false }));
    let crypto_past = [0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, b'x'];
    assert_eq!(parse_one(&crypto_past), Err(FrameError::Malformed("CRYPTO")));
}

#[test]
fn stream_limits_past_2_to_the_60_are_malformed() {
    let too_many = [0xd0, 0, 0, 0, 0, 0, 0, 1];
    for (ty, name) in
        [(0x12, "MAX_STREAMS"), (0x13, "MAX_STREAMS"), (0x16, "STREAMS_BLOCKED"), (0x17, "STREAMS_BLOCKED")]
    {
        let mut bytes = vec![ty];
        bytes.extend_from_slice(&too_many);
        assert_eq!(parse_one(&bytes), Err(FrameError::Malformed(name)));
    }
}

#[test]
fn a_new_connection_id_of_bad_length_or_retiring_ahead_is_malformed() {
    let frame = |seq: u8, retire: u8, len: u8| {
        let mut bytes = vec![0x18, seq, retire, len];
        bytes.extend(std::iter::repeat_n(0xcc, usize::from(len) + 16));
        bytes
    };
    for bytes in [frame(1, 0, 0), frame(1, 0, 21), frame(1, 2, 8)] {
        assert_eq!(parse_one(&bytes), Err(FrameError::Malformed("NEW_CONNECTION_ID")), "{bytes:02x?}");
    }
    assert!(matches!(parse_one(&frame(1, 1, 20)), Ok(Frame::NewConnectionId { cid, .. }) if cid.len() == 20));
}

#[test]
fn an_empty_new_token_is_malformed() {
    assert_eq!(parse_one(&[0x07, 0x00]), Err(FrameError::Malformed("NEW_TOKEN")));
}

#[test]
fn unknown_and_datagram_frame_types_are_errors_and_end_the_payload() {
    for bytes in [&[0x30, 0x00][..], &[0x31, 0x01, 0xaa], &[0x1f], &[0x40, 0x30], &[0x80, 0x00, 0x12, 0x34]] {
        let mut frames = Frames::new(bytes);
        let err = frames.next().expect("a frame").expect_err("unknown");
        assert!(matches!(err, FrameError::UnknownType(_)), "{err:?}");
        assert_eq!(frames.next(), None);
    }
    assert_eq!(parse_one(&[0x80, 0x00, 0x12, 0x34]), Err(FrameError::UnknownType(0x1234)));
    assert_eq!(FrameError::UnknownType(0x30).to_string(), "unknown frame type 0x30");
}

#[test]
fn a_known_type_in_a_longer_varint_is_read() {
    assert_eq!(parse_all(&[0x40, 0x01, 0x80, 0x00, 0x00, 0x1e]), Ok(vec![Frame::Ping, Frame::HandshakeDone]));
}

#[test]
fn every_frame_error_closes_with_frame_encoding_error() {
    for err in [FrameError::Truncated, FrameError::UnknownType(0x30), FrameError::Malformed("ACK")] {
        assert_eq!(err.code(), 0x07);
    }
}

#[test]
fn every_truncation_of_every_frame_is_truncated() {
    let frames = encoded_frames().into_iter().chain(handwritten_frames().into_iter().map(|(bytes, _)| bytes));
    for bytes in frames {
        assert!(parse_one(&bytes).is_ok(), "{bytes:02x?}");
        for cut in 1..bytes.len() {
            let mut frames = Frames::new(&bytes[..cut]);
            assert_eq!(frames.next(), Some(Err(FrameError::Truncated)), "{:02x?}", &bytes[..cut]);
            assert_eq!(frames.next(), None);
        }
    }
}

#[test]
fn several_frames_in_one_payload_come_in_order() {
    let mut payload = ack(&[(7, 9), (1, 3)], 10);
    encode_max_data(&mut payload, 1 << 20);
    payload.extend(stream(0, 10, b"hello", false));
    payload.extend(crypto(5, b"fin"));
    encode_ping(&mut payload);
    payload.extend(stream(4, 0, b"world", true));
    encode_padding(&mut payload, 3);
    let frames = parse_all(&payload).expect("valid");
    assert_eq!(frames.len(), 7);
    assert_eq!(ranges(&frames[0]), [(7, 9), (1, 3)]);
    assert_eq!(
        frames[1..],
        [
            Frame::MaxData(1 << 20),
            Frame::Stream { id: 0, offset: 10, data: b"hello", fin: false },
            Frame::Crypto { offset: 5, data: b"fin" },
            Frame::Ping,
            Frame::Stream { id: 4, offset: 0, data: b"world", fin: true },
            Frame::Padding,
        ]
    );
}

#[test]
fn only_padding_ack_and_connection_close_are_not_ack_eliciting() {
    let payload = ack(&[(0, 0)], 0);
    let ack = parse_one(&payload).expect("ACK");
    let close = Frame::ConnectionClose { application: true, code: 0, frame_type: None, reason: b"" };
    for frame in [Frame::Padding, ack, close] {
        assert!(!is_ack_eliciting(&frame), "{frame:?}");
    }
    for (_, frame) in handwritten_frames().into_iter().filter(|(_, f)| !matches!(f, Frame::ConnectionClose { .. })) {
        assert!(is_ack_eliciting(&frame), "{frame:?}");
    }
    for frame in
        [Frame::Ping, Frame::HandshakeDone, Frame::MaxData(1), Frame::Stream { id: 0, offset: 0, data: b"", fin: true }]
    {
        assert!(is_ack_eliciting(&frame), "{frame:?}");
    }
}

/// Parses `payload` to its end, checking what holds for any input: the walk ends, stops after
/// an error, and every ACK's ranges descend from its largest without going below 0.
fn check_any(payload: &[u8]) {
    let mut frames = Frames::new(payload);
    let mut steps = 0;
    while let Some(frame) = frames.next() {
        steps += 1;
        // Every frame takes at least a byte.
        assert!(steps <= payload.len(), "{payload:02x?}");
        match frame {
            Err(_) => {
                assert_eq!(frames.next(), None);
                break;
            }
            Ok(Frame::Ack(a)) => {
                let expected = a.ranges().len();
                let mut above = u128::from(a.largest) + 2;
                let mut n = 0;
                for (smallest, largest) in a.ranges() {
                    assert!(smallest <= largest && u128::from(largest) + 2 <= above, "{payload:02x?}");
                    above = u128::from(smallest);
                    n += 1;
                }
                assert_eq!(n, expected);
            }
            Ok(_) => {}
        }
    }
}

/// A random valid payload of several frames.
fn random_payload(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let pool = encoded_frames();
    let handwritten = handwritten_frames();
    for _ in 0..1 + rng.below(6) {
        match rng.below(4) {
            0 => {
                let mut largest = rng.next() >> (2 + rng.below(62));
                let mut ranges = Vec::new();
                for _ in 0..1 + rng.below(5) {
                    let smallest = largest.saturating_sub(rng.below(20) as u64);
                    ranges.push((smallest, largest));
                    let Some(next) = smallest.checked_sub(2 + rng.below(30) as u64) else { break };
                    largest = next;
                }
                encode_ack(&mut out, ranges, rng.below(1 << 14) as u64);
            }
            1 => {
                out.extend(stream(rng.below(1000) as u64, rng.next() >> 40, &vec![0xab; rng.below(100)], rng.chance(2)))
            }
            2 => out.extend(&pool[rng.below(pool.len())]),
            _ => out.extend(&handwritten[rng.below(handwritten.len())].0),
        }
    }
    out
}

#[test]
fn random_and_mutated_payloads_never_panic_and_end() {
    let mut rng = Rng(0x0f2a_3e11_c0de_f00d);
    for _ in 0..4000 {
        let len = rng.below(64);
        let noise: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check_any(&noise);

        let mut payload = random_payload(&mut rng);
        assert!(parse_all(&payload).is_ok(), "{payload:02x?}");
        check_any(&payload);
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(payload.len());
            match rng.below(4) {
                0 => payload[at] = rng.next() as u8,
                1 => payload[at] ^= 1 << rng.below(8),
                2 => payload.truncate(at),
                _ => payload.insert(at, rng.next() as u8),
            }
            if payload.is_empty() {
                break;
            }
        }
        check_any(&payload);
    }
}
