use super::*;

const MAX: u32 = DEFAULT_MAX_FRAME_SIZE;

fn one(bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let (f, n) = decode(bytes, MAX)?.expect("whole frame");
    assert_eq!(n, bytes.len());
    Ok(f)
}

fn all(bytes: &[u8]) -> Vec<Frame<'_>> {
    let mut v = Vec::new();
    let mut at = 0;
    while let Some((f, n)) = decode(&bytes[at..], MAX).unwrap() {
        v.push(f);
        at += n;
    }
    assert_eq!(at, bytes.len());
    v
}

/// One of every frame type, in wire form, with what it decodes to.
fn sample() -> Vec<u8> {
    let mut out = Vec::new();
    encode_settings(&mut out, &[(setting::MAX_CONCURRENT_STREAMS, 100), (setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
    encode_settings_ack(&mut out);
    encode_headers(&mut out, 1, b"\x88", false, MAX);
    encode_data(&mut out, 1, b"hello", true, MAX);
    encode_frame(&mut out, kind::PRIORITY, 0, 3, &[0x80, 0, 0, 1, 15]);
    encode_rst_stream(&mut out, 3, code::CANCEL);
    encode_frame(&mut out, kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2, 0x82]);
    encode_ping(&mut out, false, *b"12345678");
    encode_ping(&mut out, true, *b"abcdefgh");
    encode_goaway(&mut out, 7, code::NO_ERROR, b"bye");
    encode_window_update(&mut out, 0, 1000);
    encode_window_update(&mut out, 5, 7);
    encode_frame(&mut out, kind::HEADERS, 0, 5, b"ab");
    encode_frame(&mut out, kind::CONTINUATION, flag::END_HEADERS, 5, b"cd");
    encode_frame(&mut out, 0xfa, 0xff, 9, b"whatever");
    out
}

#[test]
fn every_frame_type_round_trips() {
    let bytes = sample();
    let frames = all(&bytes);
    let settings: Vec<_> = match frames[0] {
        Frame::Settings { ack: false, params } => params.iter().collect(),
        f => panic!("{f:?}"),
    };
    assert_eq!(settings, [(setting::MAX_CONCURRENT_STREAMS, 100), (setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
    let expect = [
        Frame::Settings { ack: true, params: SettingsParams(&[]) },
        Frame::Headers { stream: 1, block: b"\x88", end_stream: false, end_headers: true, priority: None },
        Frame::Data { stream: 1, data: b"hello", end_stream: true, flow_len: 5 },
        Frame::Priority { stream: 3, priority: Priority { dependency: 1, exclusive: true, weight: 15 } },
        Frame::RstStream { stream: 3, code: code::CANCEL },
        Frame::PushPromise { stream: 1, promised: 2, block: b"\x82", end_headers: true },
        Frame::Ping { ack: false, data: *b"12345678" },
        Frame::Ping { ack: true, data: *b"abcdefgh" },
        Frame::GoAway { last_stream_id: 7, code: code::NO_ERROR, debug: b"bye" },
        Frame::WindowUpdate { stream: 0, increment: 1000 },
        Frame::WindowUpdate { stream: 5, increment: 7 },
        Frame::Headers { stream: 5, block: b"ab", end_stream: false, end_headers: false, priority: None },
        Frame::Continuation { stream: 5, block: b"cd", end_headers: true },
        Frame::Unknown { kind: 0xfa, stream: 9 },
    ];
    assert_eq!(&frames[1..], &expect);
}

#[test]
fn every_split_decodes_the_same() {
    let bytes = sample();
    let whole = all(&bytes);
    // Feed the stream in two reads split at every byte boundary, buffering like a connection.
    for split in 0..=bytes.len() {
        let mut got = Vec::new();
        let mut buf = Vec::new();
        for part in [&bytes[..split], &bytes[split..]] {
            buf.extend_from_slice(part);
            let mut at = 0;
            while let Some((f, n)) = decode(&buf[at..], MAX).unwrap() {
                got.push(format!("{f:?}"));
                at += n;
            }
            buf.drain(..at);
        }
        assert!(buf.is_empty(), "split {split}");
        let want: Vec<_> = whole.iter().map(|f| format!("{f:?}")).collect();
        assert_eq!(got, want, "split {split}");
    }
}

#[test]
fn padding_is_stripped() {
    let mut out = Vec::new();
    encode_frame(&mut out, kind::DATA, flag::PADDED | flag::END_STREAM, 1, b"\x03abc\0\0\0");
    assert_eq!(one(&out), Ok(Frame::Data { stream: 1, data: b"abc", end_stream: true, flow_len: 7 }));
    out.clear();
    // Padding that leaves nothing is fine.
    encode_frame(&mut out, kind::DATA, flag::PADDED, 1, b"\x02\0\0");
    assert_eq!(one(&out), Ok(Frame::Data { stream: 1, data: b"", end_stream: false, flow_len: 3 }));
    out.clear();
    encode_frame(
        &mut out,
        kind::HEADERS,
        flag::PADDED | flag::PRIORITY | flag::END_HEADERS,
        1,
        b"\x01\0\0\0\x03\x10\x88\0",
    );
    let priority = Some(Priority { dependency: 3, exclusive: false, weight: 16 });
    assert_eq!(
        one(&out),
        Ok(Frame::Headers { stream: 1, block: b"\x88", end_stream: false, end_headers: true, priority })
    );
    out.clear();
    encode_frame(&mut out, kind::PUSH_PROMISE, flag::PADDED, 1, b"\x01\0\0\0\x04\x82\0");
    assert_eq!(one(&out), Ok(Frame::PushPromise { stream: 1, promised: 4, block: b"\x82", end_headers: false }));
}

#[test]
fn malformed_frames_give_their_errors() {
    let mut out = Vec::new();
    let mut case = |kind: u8, flags: u8, stream: u32, payload: &[u8]| {
        out.clear();
        encode_frame(&mut out, kind, flags, stream, payload);
        one(&out).err()
    };
    let bad_len = |kind, len| Some(FrameError::BadLength { kind, len });
    assert_eq!(case(kind::DATA, 0, 1, &[0; 16_385]), Some(FrameError::TooLarge { len: 16_385, max: MAX }));
    assert_eq!(
        case(kind::DATA, flag::PADDED, 1, b"\x04abc"),
        Some(FrameError::BadPadding { kind: "DATA", pad: 4, len: 4 })
    );
    assert_eq!(case(kind::DATA, flag::PADDED, 1, b""), Some(FrameError::BadPadding { kind: "DATA", pad: 0, len: 0 }));
    assert_eq!(
        case(kind::HEADERS, flag::PADDED, 1, b"\x05ab"),
        Some(FrameError::BadPadding { kind: "HEADERS", pad: 5, len: 3 })
    );
    assert_eq!(case(kind::HEADERS, flag::PRIORITY, 1, b"\0\0\0"), bad_len("HEADERS", 3));
    assert_eq!(case(kind::PING, 0, 0, b"1234567"), bad_len("PING", 7));
    assert_eq!(case(kind::PING, 0, 0, b"123456789"), bad_len("PING", 9));
    assert_eq!(case(kind::WINDOW_UPDATE, 0, 1, b"\0\0\x01"), bad_len("WINDOW_UPDATE", 3));
    assert_eq!(case(kind::WINDOW_UPDATE, 0, 1, b"\0\0\0\0"), Some(FrameError::ZeroIncrement));
    assert_eq!(case(kind::RST_STREAM, 0, 1, b"\0\0\0\0\0"), bad_len("RST_STREAM", 5));
    assert_eq!(case(kind::SETTINGS, 0, 0, b"\0\x01\0\0\0"), bad_len("SETTINGS", 5));
    assert_eq!(case(kind::SETTINGS, flag::ACK, 0, b"\0\x01\0\0\0\0"), bad_len("SETTINGS", 6));
    assert_eq!(case(kind::PRIORITY, 0, 1, b"\0\0\0\0"), bad_len("PRIORITY", 4));
    assert_eq!(case(kind::PRIORITY, 0, 1, b"\0\0\0\0\0\0"), bad_len("PRIORITY", 6));
    assert_eq!(case(kind::GOAWAY, 0, 0, b"\0\0\0\0\0\0\0"), bad_len("GOAWAY", 7));
    assert_eq!(case(kind::PUSH_PROMISE, 0, 1, b"\0\0\0"), bad_len("PUSH_PROMISE", 3));
    for (kind, name) in [
        (kind::DATA, "DATA"),
        (kind::HEADERS, "HEADERS"),
        (kind::PRIORITY, "PRIORITY"),
        (kind::RST_STREAM, "RST_STREAM"),
        (kind::PUSH_PROMISE, "PUSH_PROMISE"),
        (kind::CONTINUATION, "CONTINUATION"),
    ] {
        assert_eq!(case(kind, 0, 0, b"\0\0\0\0\0"), Some(FrameError::StreamZero { kind: name }));
    }
    for (kind, name, payload) in [
        (kind::SETTINGS, "SETTINGS", &b""[..]),
        (kind::PING, "PING", b"12345678"),
        (kind::GOAWAY, "GOAWAY", b"\0\0\0\0\0\0\0\0"),
    ] {
        assert_eq!(case(kind, 0, 3, payload), Some(FrameError::NotStreamZero { kind: name, stream: 3 }));
    }
}

#[test]
fn too_large_is_refused_from_the_header_alone() {
    let mut out = Vec::new();
    write_head(&mut out, 20_000, kind::DATA, 0, 1);
    assert_eq!(decode(&out, MAX), Err(FrameError::TooLarge { len: 20_000, max: MAX }));
    assert_eq!(decode(&out[..8], MAX), Ok(None));
    assert!(decode(&out, 20_000).unwrap().is_none());
}

#[test]
fn headers_and_data_split_at_the_peer_frame_size() {
    let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    let mut out = Vec::new();
    encode_headers(&mut out, 3, &block, true, MAX);
    let frames = all(&out);
    assert_eq!(frames.len(), 3);
    let mut joined = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        match *f {
            Frame::Headers { stream: 3, block, end_stream: true, end_headers: false, .. } if i == 0 => {
                joined.extend_from_slice(block)
            }
            Frame::Continuation { stream: 3, block, end_headers } if i > 0 => {
                assert_eq!(end_headers, i == 2);
                joined.extend_from_slice(block)
            }
            f => panic!("{f:?}"),
        }
    }
    assert_eq!(joined, block);

    out.clear();
    encode_data(&mut out, 5, &block, true, MAX);
    let frames = all(&out);
    assert_eq!(frames.len(), 3);
    let mut joined = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let Frame::Data { stream: 5, data, end_stream, .. } = *f else { panic!("{f:?}") };
        assert!(data.len() <= MAX as usize);
        assert_eq!(end_stream, i == 2);
        joined.extend_from_slice(data);
    }
    assert_eq!(joined, block);

    out.clear();
    encode_data(&mut out, 5, b"", true, MAX);
    assert_eq!(all(&out), [Frame::Data { stream: 5, data: b"", end_stream: true, flow_len: 0 }]);
    out.clear();
    encode_data(&mut out, 5, b"", false, MAX);
    assert!(out.is_empty());
    encode_headers(&mut out, 1, b"", false, MAX);
    assert_eq!(
        all(&out),
        [Frame::Headers { stream: 1, block: b"", end_stream: false, end_headers: true, priority: None }]
    );
}

#[test]
fn preface_then_settings() {
    let mut out = Vec::new();
    encode_preface(&mut out, &[(setting::ENABLE_PUSH, 0)]);
    assert_eq!(&out[..24], PREFACE);
    assert_eq!(&out[24..], b"\0\0\x06\x04\0\0\0\0\0\0\x02\0\0\0\0");
}

#[test]
fn reserved_bit_is_ignored() {
    let bytes = b"\0\0\x04\x08\0\x80\0\0\x01\x80\0\0\x05";
    assert_eq!(one(bytes), Ok(Frame::WindowUpdate { stream: 1, increment: 5 }));
}

/// Peer-controlled bytes, random and mutated from valid frames, cut anywhere: every decode
/// gives a frame that consumed at least its header and no more than was there, "not yet",
/// or an error, never a panic. Bounded and seeded, so it runs in every `cargo test`.
#[test]
fn fuzz_random_and_mutated_frames() {
    let mut rng = crate::test_rng::Rng(0x51_7cc1_b727_220a);
    let base = sample();
    for round in 0..30_000 {
        let mut bytes = if round % 4 == 0 {
            (0..rng.below(200)).map(|_| rng.next() as u8).collect()
        } else {
            let mut b = base.clone();
            for _ in 0..1 + rng.below(6) {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            b
        };
        bytes.truncate(rng.below(bytes.len() + 1));
        let max = if rng.chance(2) { MAX } else { MAX_FRAME_SIZE_LIMIT };
        let mut at = 0;
        while let Ok(Some((_, n))) = decode(&bytes[at..], max) {
            assert!(n >= HEADER_LEN && at + n <= bytes.len(), "round {round}: {n} at {at} of {}", bytes.len());
            at += n;
        }
    }
}
