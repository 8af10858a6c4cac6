//! Packets against RFC 9001 Appendix A's samples, round trips through every space, coalesced
//! datagrams, and peer bytes that are cut short, tampered with or random.

use rustls::crypto::cipher::{AeadKey, Iv};
use rustls::quic::{DirectionalKeys, Keys, Suite};

use super::*;
use crate::test_rng::Rng;

pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("hex"), 16).expect("hex")).collect()
}

/// RFC 9001 Appendix A's client-chosen Destination Connection ID.
const RFC_DCID: [u8; 8] = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];

/// RFC 9001 A.2: the CRYPTO frame of the client's Initial, before its PADDING.
const CLIENT_CRYPTO: &str = "
060040f1010000ed0303ebf8fa56f129 39b9584a3896472ec40bb863cfd3e868
04fe3a47f06a2b69484c000004130113 02010000c000000010000e00000b6578
616d706c652e636f6dff01000100000a 00080006001d00170018001000070005
04616c706e0005000501000000000033 00260024001d00209370b2c9caa47fba
baf4559fedba753de171fa71f50f1ce1 5d43e994ec74d748002b000302030400
0d0010000e0403050306030203080408 050806002d00020101001c0002400100
3900320408ffffffffffffffff050480 00ffff07048000ffff08011001048000
75300901100f088394c8f03e51570806 048000ffff";

/// RFC 9001 A.2: the client's protected Initial.
const CLIENT_INITIAL: &str = "
c000000001088394c8f03e5157080000 449e7b9aec34d1b1c98dd7689fb8ec11
d242b123dc9bd8bab936b47d92ec356c 0bab7df5976d27cd449f63300099f399
1c260ec4c60d17b31f8429157bb35a12 82a643a8d2262cad67500cadb8e7378c
8eb7539ec4d4905fed1bee1fc8aafba1 7c750e2c7ace01e6005f80fcb7df6212
30c83711b39343fa028cea7f7fb5ff89 eac2308249a02252155e2347b63d58c5
457afd84d05dfffdb20392844ae81215 4682e9cf012f9021a6f0be17ddd0c208
4dce25ff9b06cde535d0f920a2db1bf3 62c23e596d11a4f5a6cf3948838a3aec
4e15daf8500a6ef69ec4e3feb6b1d98e 610ac8b7ec3faf6ad760b7bad1db4ba3
485e8a94dc250ae3fdb41ed15fb6a8e5 eba0fc3dd60bc8e30c5c4287e53805db
059ae0648db2f64264ed5e39be2e20d8 2df566da8dd5998ccabdae053060ae6c
7b4378e846d29f37ed7b4ea9ec5d82e7 961b7f25a9323851f681d582363aa5f8
9937f5a67258bf63ad6f1a0b1d96dbd4 faddfcefc5266ba6611722395c906556
be52afe3f565636ad1b17d508b73d874 3eeb524be22b3dcbc2c7468d54119c74
68449a13d8e3b95811a198f3491de3e7 fe942b330407abf82a4ed7c1b311663a
c69890f4157015853d91e923037c227a 33cdd5ec281ca3f79c44546b9d90ca00
f064c99e3dd97911d39fe9c5d0b23a22 9a234cb36186c4819e8b9c5927726632
291d6a418211cc2962e20fe47feb3edf 330f2c603a9d48c0fcb5699dbfe58964
25c5bac4aee82e57a85aaf4e2513e4f0 5796b07ba2ee47d80506f8d2c25e50fd
14de71e6c418559302f939b0e1abd576 f279c4b2e0feb85c1f28ff18f58891ff
ef132eef2fa09346aee33c28eb130ff2 8f5b766953334113211996d20011a198
e3fc433f9f2541010ae17c1bf202580f 6047472fb36857fe843b19f5984009dd
c324044e847a4f4a0ab34f719595de37 252d6235365e9b84392b061085349d73
203a4a13e96f5432ec0fd4a1ee65accd d5e3904df54c1da510b0ff20dcc0c77f
cb2c0e0eb605cb0504db87632cf3d8b4 dae6e705769d1de354270123cb11450e
fc60ac47683d7b8d0f811365565fd98c 4c8eb936bcab8d069fc33bd801b03ade
a2e1fbc5aa463d08ca19896d2bf59a07 1b851e6c239052172f296bfb5e724047
90a2181014f3b94a4e97d117b4381303 68cc39dbb2d198065ae3986547926cd2
162f40a29f0c3c8745c0f50fba3852e5 66d44575c29d39a03f0cda721984b6f4
40591f355e12d439ff150aab7613499d bd49adabc8676eef023b15b65bfc5ca0
6948109f23f350db82123535eb8a7433 bdabcb909271a6ecbcb58b936a88cd4e
8f2e6ff5800175f113253d8fa9ca8885 c2f552e657dc603f252e1a8e308f76f0
be79e2fb8f5d5fbbe2e30ecadd220723 c8c0aea8078cdfcb3868263ff8f09400
54da48781893a7e49ad5aff4af300cd8 04a6b6279ab3ff3afb64491c85194aab
760d58a606654f9f4400e8b38591356f bf6425aca26dc85244259ff2b19c41b9
f96f3ca9ec1dde434da7d2d392b905dd f3d1f9af93d1af5950bd493f5aa731b4
056df31bd267b6b90a079831aaf579be 0a39013137aac6d404f518cfd4684064
7e78bfe706ca4cf5e9c5453e9f7cfd2b 8b4c8d169a44e55c88d4a9a7f9474241
e221af44860018ab0856972e194cd934";

/// RFC 9001 A.3: the server's Initial payload (ACK and CRYPTO, no PADDING).
const SERVER_PAYLOAD: &str = "
02000000000600405a020000560303ee fce7f7b37ba1d1632e96677825ddf739
88cfc79825df566dc5430b9a045a1200 130100002e00330024001d00209d3c94
0d89690b84d08a60993c144eca684d10 81287c834d5311bcf32bb9da1a002b00
020304";

/// RFC 9001 A.3: the server's protected Initial.
const SERVER_INITIAL: &str = "
cf000000010008f067a5502a4262b500 4075c0d95a482cd0991cd25b0aac406a
5816b6394100f37a1c69797554780bb3 8cc5a99f5ede4cf73c3ec2493a1839b3
dbcba3f6ea46c5b7684df3548e7ddeb9 c3bf9c73cc3f3bded74b562bfb19fb84
022f8ef4cdd93795d77d06edbb7aaf2f 58891850abbdca3d20398c276456cbc4
2158407dd074ee";

/// The server's view of the Initial keys `initial_keys` gives the client.
fn server_initial_keys(client_dcid: &[u8]) -> Keys {
    let suite: Suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("a QUIC suite");
    suite.keys(client_dcid, rustls::Side::Server, Version::V1)
}

/// Parses, unprotects and decrypts the packet at `at`: the span, what the header said and the
/// payload.
fn open(
    datagram: &mut [u8],
    at: usize,
    dcid_len: usize,
    keys: &DirectionalKeys,
    largest: Option<u64>,
) -> Result<(PacketSpan, Unprotected, Vec<u8>), PacketError> {
    let span = parse(datagram, at, dcid_len)?;
    let unprotected = unprotect_header(datagram, &span, &*keys.header, largest)?;
    let payload = decrypt(datagram, &span, &unprotected, &*keys.packet)?;
    Ok((span, unprotected, datagram[payload].to_vec()))
}

fn seal(out: &mut Vec<u8>, space: Space, ids: (&[u8], &[u8], &[u8]), pn: PacketNumber, frames: &[u8]) -> usize {
    seal_with(out, space, ids, pn, frames, &initial_keys(&RFC_DCID).local, None)
}

fn seal_with(
    out: &mut Vec<u8>,
    space: Space,
    (dcid, scid, token): (&[u8], &[u8], &[u8]),
    pn: PacketNumber,
    frames: &[u8],
    keys: &DirectionalKeys,
    pad_to: Option<usize>,
) -> usize {
    let builder = begin(out, space, dcid, scid, token, pn, false);
    out.extend_from_slice(frames);
    finish(out, builder, &*keys.header, &*keys.packet, pad_to).expect("seal")
}

#[test]
fn rfc_9001_a2_client_initial_is_sealed_byte_for_byte() {
    let keys = initial_keys(&RFC_DCID);
    let mut out = Vec::with_capacity(1500);
    let builder = begin(&mut out, Space::Initial, &RFC_DCID, &[], &[], PacketNumber { full: 2, len: 4 }, false);
    assert_eq!(builder.payload_start(), 22);
    out.extend_from_slice(&hex(CLIENT_CRYPTO));
    let len = finish(&mut out, builder, &*keys.local.header, &*keys.local.packet, Some(1200)).expect("seal");
    let expected = hex(CLIENT_INITIAL);
    assert_eq!(expected.len(), 1200);
    assert_eq!(len, 1200);
    assert_eq!(out[..32], expected[..32], "header and the start of the payload");
    assert_eq!(out[1184..], expected[1184..], "tag");
    assert_eq!(out, expected);
}

#[test]
fn rfc_9001_a2_client_initial_opens_on_the_server() {
    let server = server_initial_keys(&RFC_DCID);
    let mut datagram = hex(CLIENT_INITIAL);
    let (span, unprotected, payload) = open(&mut datagram, 0, 0, &server.remote, None).expect("open");
    assert_eq!(span.kind, Kind::Initial);
    assert_eq!(span.header(&datagram), Header::Initial { dcid: &RFC_DCID, scid: &[], token: &[] });
    assert_eq!((span.pn_offset, span.end), (18, 1200));
    assert_eq!(unprotected, Unprotected { pn: 2, pn_len: 4, key_phase: false });
    let crypto = hex(CLIENT_CRYPTO);
    assert_eq!(payload.len(), 1162);
    assert_eq!(payload[..crypto.len()], crypto[..]);
    assert!(payload[crypto.len()..].iter().all(|&b| b == 0), "PADDING");
    assert_eq!(datagram[..22], hex("c300000001088394c8f03e5157080000449e00000002")[..], "the header in the clear");
}

#[test]
fn rfc_9001_a3_server_initial_opens_on_the_client() {
    let client = initial_keys(&RFC_DCID);
    let mut datagram = hex(SERVER_INITIAL);
    let (span, unprotected, payload) = open(&mut datagram, 0, 8, &client.remote, None).expect("open");
    assert_eq!(span.header(&datagram), Header::Initial { dcid: &[], scid: &hex("f067a5502a4262b5"), token: &[] });
    assert_eq!(span.end, datagram.len());
    assert_eq!(unprotected, Unprotected { pn: 1, pn_len: 2, key_phase: false });
    assert_eq!(payload, hex(SERVER_PAYLOAD));
}

#[test]
fn rfc_9001_a3_server_initial_is_sealed_byte_for_byte() {
    let server = server_initial_keys(&RFC_DCID);
    let mut out = Vec::new();
    let scid = hex("f067a5502a4262b5");
    let pn = PacketNumber { full: 1, len: 2 };
    seal_with(&mut out, Space::Initial, (&[], &scid, &[]), pn, &hex(SERVER_PAYLOAD), &server.local, None);
    assert_eq!(out, hex(SERVER_INITIAL));
}

#[test]
fn rfc_9001_a5_chacha20_short_header() {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("a QUIC suite");
    let bytes32 = |s| <[u8; 32]>::try_from(hex(s)).expect("32 bytes");
    let keys = DirectionalKeys {
        header: suite.quic.header_protection_key(AeadKey::from(bytes32(
            "25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4",
        ))),
        packet: suite.quic.packet_key(
            AeadKey::from(bytes32("c6d98ff3441c3fe1b2182094f69caa2ed4b716b65488960a7a984979fb23e1c8")),
            Iv::new(<[u8; 12]>::try_from(hex("e0459b3474bdd0e44a41c144")).expect("12 bytes")),
        ),
    };
    const PN: u64 = 654_360_564;
    // 3 bytes, as in the RFC: the peer acknowledged more than 2^15 packets ago.
    let pn = PacketNumber::new(PN, Some(PN - 40_000));
    assert_eq!(pn.len, 3);
    let mut out = Vec::new();
    assert_eq!(seal_with(&mut out, Space::Data, (&[], &[], &[]), pn, &[0x01], &keys, None), 21);
    assert_eq!(out, hex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb"));

    let (span, unprotected, payload) = open(&mut out, 0, 0, &keys, Some(PN - 1)).expect("open");
    assert_eq!(span.kind, Kind::Short);
    assert_eq!(unprotected, Unprotected { pn: PN, pn_len: 3, key_phase: false });
    assert_eq!(payload, [0x01]);
}

#[test]
fn rfc_9000_a3_packet_number_decoding() {
    assert_eq!(decode_packet_number(0x9b32, 2, Some(0xa82f_30ea)), 0xa82f_9b32);
    // Nothing received yet: the truncation is the number.
    assert_eq!(decode_packet_number(0, 1, None), 0);
    assert_eq!(decode_packet_number(0x7f, 1, None), 0x7f);
    // Just past a window edge either way.
    assert_eq!(decode_packet_number(0x01, 1, Some(0xff)), 0x101);
    assert_eq!(decode_packet_number(0xff, 1, Some(0x100)), 0xff);
    // Never below zero, never past 2^62.
    assert_eq!(decode_packet_number(0xff, 1, Some(0)), 0xff);
    let top = (1u64 << 62) - 1;
    assert_eq!(decode_packet_number(0x00, 1, Some(top - 1)), top - 0xff);
}

#[test]
fn rfc_9000_a2_packet_number_encoding() {
    let pn = PacketNumber::new(0xac_5c02, Some(0xab_e8b3));
    assert_eq!(pn.len, 2);
    assert_eq!(pn.truncated()[2..], [0x5c, 0x02]);
    let pn = PacketNumber::new(0xac_e8fe, Some(0xab_e8b3));
    assert_eq!(pn.len, 3);
    assert_eq!(pn.truncated()[1..], [0xac, 0xe8, 0xfe]);
    assert_eq!(PacketNumber::new(0, None).len, 1);
    assert_eq!(PacketNumber::new(127, None).len, 1);
    assert_eq!(PacketNumber::new(128, None).len, 2);
    assert_eq!(PacketNumber::new(1 << 40, None).len, 4);
    assert_eq!(PacketNumber::new(1000, Some(1000 - 128)).len, 1);
    assert_eq!(PacketNumber::new(1000, Some(1000 - 129)).len, 2);
}

#[test]
fn truncated_packet_numbers_decode_to_the_full_one_whatever_the_receiver_has_seen() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for _ in 0..100_000 {
        let mut full = rng.next() >> (2 + rng.below(62));
        let gap_bits = rng.below(31);
        let acked = match full {
            0 => None,
            _ if rng.chance(4) => None,
            _ => Some(full - 1 - (rng.below(1 << gap_bits) as u64).min(full - 1)),
        };
        if acked.is_none() {
            // With nothing acknowledged, 4 bytes carry packet numbers below 2^31 only.
            full %= 1 << 31;
        }
        let pn = PacketNumber::new(full, acked);
        let truncated = u64::from(u32::from_be_bytes(pn.truncated())) & ((1u64 << (8 * pn.len)) - 1);
        // The receiver has seen at least what it acknowledged, and not `full` yet.
        let largest = acked.map(|acked| acked + rng.below((full - acked) as usize) as u64);
        assert_eq!(
            decode_packet_number(truncated, pn.len, largest),
            full,
            "{pn:?} acked {acked:?} largest {largest:?}"
        );
    }
}

#[test]
fn every_space_round_trips_with_and_without_padding() {
    let client = initial_keys(&RFC_DCID);
    let server = server_initial_keys(&RFC_DCID);
    let dcid = hex("0102030405060708090a0b0c");
    let scid = hex("a1a2a3a4");
    let token = hex("7777777777");
    for space in [Space::Initial, Space::Handshake, Space::Data] {
        for pad_to in [None, Some(1200), Some(1452)] {
            for frames_len in [1, 2, 3, 40, 1000] {
                for (full, acked) in [(0, None), (3, Some(1)), (70_000, Some(1)), (1 << 33, Some((1 << 33) - 5))] {
                    let frames: Vec<u8> = (0..frames_len).map(|i| (i % 251) as u8 + 1).collect();
                    let mut out = Vec::with_capacity(4096);
                    out.extend_from_slice(b"earlier datagram");
                    let at = out.len();
                    let ptr = out.as_ptr();
                    let pn = PacketNumber::new(full, acked);
                    let builder = begin(&mut out, space, &dcid, &scid, &token, pn, space == Space::Data);
                    assert!(builder.room(&out, 1452) >= frames_len);
                    out.extend_from_slice(&frames);
                    let len =
                        finish(&mut out, builder, &*client.local.header, &*client.local.packet, pad_to).expect("seal");
                    assert_eq!(out.as_ptr(), ptr, "no allocation with capacity to spare");
                    assert_eq!(len, out.len() - at);
                    if let Some(pad_to) = pad_to {
                        assert_eq!(len, pad_to);
                    }

                    let case = format!("{space:?} {pad_to:?} {frames_len} {pn:?}");
                    let (span, unprotected, payload) =
                        open(&mut out, at, dcid.len(), &server.remote, acked).unwrap_or_else(|e| panic!("{case}: {e}"));
                    assert_eq!(span.kind.space(), Some(space), "{case}");
                    assert_eq!(span.end, out.len(), "{case}");
                    assert_eq!(unprotected.pn, full, "{case}");
                    assert_eq!(unprotected.pn_len, pn.len, "{case}");
                    assert_eq!(unprotected.key_phase, space == Space::Data, "{case}");
                    assert_eq!(payload[..frames_len], frames[..], "{case}");
                    assert!(payload[frames_len..].iter().all(|&b| b == 0), "{case}: PADDING");
                    assert_eq!(span.dcid.of(&out), dcid, "{case}");
                    let expected = match space {
                        Space::Initial => Header::Initial { dcid: &dcid, scid: &scid, token: &token },
                        Space::Handshake => Header::Handshake { dcid: &dcid, scid: &scid },
                        Space::Data => Header::Short { dcid: &dcid },
                    };
                    assert_eq!(span.header(&out), expected, "{case}");
                }
            }
        }
    }
}

#[test]
fn room_fills_a_packet_exactly() {
    let keys = initial_keys(&RFC_DCID);
    for space in [Space::Initial, Space::Handshake, Space::Data] {
        for max in [60, 1200, 1452] {
            let mut out = Vec::new();
            let builder = begin(&mut out, space, &[7; 8], &[9; 8], &[], PacketNumber::new(5, Some(3)), false);
            let room = builder.room(&out, max);
            out.resize(out.len() + room, 0x01);
            assert_eq!(builder.room(&out, max), 0);
            let len = finish(&mut out, builder, &*keys.local.header, &*keys.local.packet, None).expect("seal");
            assert_eq!(len, max, "{space:?}");
        }
    }
    // A long header's 2-byte Length caps a packet at 16383 bytes past it.
    let mut out = Vec::new();
    let builder = begin(&mut out, Space::Handshake, &[], &[], &[], PacketNumber::new(0, None), false);
    assert_eq!(builder.room(&out, 65_000), MAX_LENGTH - 1 - TAG_LEN);
}

#[test]
fn a_tiny_payload_is_padded_for_the_sample() {
    let server = server_initial_keys(&RFC_DCID);
    for space in [Space::Initial, Space::Handshake, Space::Data] {
        let mut out = Vec::new();
        // One byte of packet number and one of frames: 2 PADDING bytes make the sample.
        let len = seal(&mut out, space, (&[1, 2], &[], &[]), PacketNumber::new(0, None), &[0x01]);
        let (span, _, payload) = open(&mut out, 0, 2, &server.remote, None).expect("open");
        assert_eq!(payload, [0x01, 0, 0]);
        assert_eq!(len, span.pn_offset + 1 + 3 + TAG_LEN);
    }
}

#[test]
fn coalesced_packets_parse_in_order() {
    let client = initial_keys(&RFC_DCID);
    let server = server_initial_keys(&RFC_DCID);
    let dcid = [0xd0; 8];
    let mut datagram = Vec::new();
    seal(&mut datagram, Space::Initial, (&dcid, &[0x5c; 4], &[]), PacketNumber::new(0, None), b"\x06initial");
    seal(&mut datagram, Space::Handshake, (&dcid, &[0x5c; 4], &[]), PacketNumber::new(1, None), b"\x06handshake");
    seal_with(
        &mut datagram,
        Space::Data,
        (&dcid, &[], &[]),
        PacketNumber::new(2, None),
        b"\x08short",
        &client.local,
        Some(300),
    );
    let mut at = 0;
    let mut seen = Vec::new();
    while at < datagram.len() {
        let (span, unprotected, payload) = open(&mut datagram, at, dcid.len(), &server.remote, None).expect("open");
        seen.push((
            span.kind,
            unprotected.pn,
            payload[..payload.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)].to_vec(),
        ));
        at = span.end;
    }
    assert_eq!(
        seen,
        [
            (Kind::Initial, 0, b"\x06initial".to_vec()),
            (Kind::Handshake, 1, b"\x06handshake".to_vec()),
            (Kind::Short, 2, b"\x08short".to_vec()),
        ]
    );
}

/// One datagram of every kind we seal, each on its own.
fn sealed_packets() -> Vec<Vec<u8>> {
    [Space::Initial, Space::Handshake, Space::Data]
        .into_iter()
        .map(|space| {
            let mut out = Vec::new();
            seal(&mut out, space, (&[0xd0; 8], &[0x5c; 4], b"tok"), PacketNumber::new(300, Some(290)), b"\x01frames");
            out
        })
        .collect()
}

#[test]
fn every_truncation_of_a_packet_is_an_error() {
    let server = server_initial_keys(&RFC_DCID);
    for packet in sealed_packets() {
        assert!(open(&mut packet.clone(), 0, 8, &server.remote, Some(290)).is_ok());
        for cut in 0..packet.len() {
            let mut short = packet[..cut].to_vec();
            assert!(open(&mut short, 0, 8, &server.remote, Some(290)).is_err(), "cut at {cut} of {packet:02x?}");
        }
    }
}

#[test]
fn a_tampered_byte_fails() {
    let server = server_initial_keys(&RFC_DCID);
    for packet in sealed_packets() {
        for at in 0..packet.len() {
            for flip in [0x01, 0x80] {
                let mut tampered = packet.clone();
                tampered[at] ^= flip;
                let opened = open(&mut tampered, 0, 8, &server.remote, Some(290));
                assert!(opened.is_err(), "byte {at} ^ {flip:#x} of {packet:02x?}: {opened:?}");
            }
        }
    }
}

#[test]
fn a_failed_decryption_leaves_the_other_packets_of_the_datagram_alone() {
    let server = server_initial_keys(&RFC_DCID);
    let mut datagram = Vec::new();
    seal(&mut datagram, Space::Initial, (&[1; 4], &[2; 4], &[]), PacketNumber::new(0, None), b"\x06first");
    let second = datagram.len();
    seal(&mut datagram, Space::Handshake, (&[1; 4], &[2; 4], &[]), PacketNumber::new(0, None), b"\x06second");
    datagram[second - 1] ^= 1;
    let received = datagram.clone();
    assert_eq!(open(&mut datagram, 0, 4, &server.remote, None).map(|_| ()), Err(PacketError::Decrypt));
    assert_eq!(datagram[second - TAG_LEN..], received[second - TAG_LEN..], "the tag, for a stateless reset check");
    let span = parse(&datagram, 0, 4).expect("the header is still readable");
    assert_eq!(span.end, second);
    let (_, _, payload) = open(&mut datagram, second, 4, &server.remote, None).expect("open");
    assert_eq!(payload[..7], *b"\x06second");
}

#[test]
fn reserved_bits_are_a_protocol_violation_once_authenticated() {
    let client = initial_keys(&RFC_DCID);
    let server = server_initial_keys(&RFC_DCID);
    for (space, bits) in [(Space::Initial, 0x0c), (Space::Handshake, 0x04), (Space::Data, 0x10)] {
        let mut out = Vec::new();
        let builder = begin(&mut out, space, &[3; 4], &[4; 4], &[], PacketNumber::new(0, None), false);
        out[0] |= bits;
        out.push(0x01);
        finish(&mut out, builder, &*client.local.header, &*client.local.packet, None).expect("seal");
        let error = open(&mut out, 0, 4, &server.remote, None).map(|_| ()).expect_err("reserved bits");
        assert_eq!(error, PacketError::ReservedBits);
        assert_eq!(error.code(), Some(PROTOCOL_VIOLATION));
    }
}

#[test]
fn retry_version_negotiation_and_other_versions_parse_without_keys() {
    // RFC 9001 A.4's Retry.
    let retry = hex("ff000000010008f067a5502a4262b574 6f6b656e04a265ba2eff4d829058fb3f 0f2496ba");
    let span = parse(&retry, 0, 8).expect("retry");
    assert_eq!(span.end, retry.len());
    assert_eq!(
        span.header(&retry),
        Header::Retry {
            scid: &hex("f067a5502a4262b5"),
            token: b"token",
            integrity_tag: &hex("04a265ba2eff4d829058fb3f0f2496ba"),
        }
    );
    assert_eq!(parse(&retry[..retry.len() - 6], 0, 8), Err(PacketError::MalformedRetry));

    let vn = hex("80 00000000 04 01020304 02 0506 00000001 1a2a3a4a");
    let span = parse(&vn, 0, 4).expect("version negotiation");
    let Header::VersionNegotiation { dcid, scid, versions } = span.header(&vn) else {
        panic!("{span:?}");
    };
    assert_eq!((dcid, scid), (&[1, 2, 3, 4][..], &[5, 6][..]));
    assert_eq!(versions.collect::<Vec<_>>(), [1, 0x1a2a_3a4a]);
    assert_eq!(parse(&vn[..vn.len() - 1], 0, 4), Err(PacketError::MalformedVersionNegotiation { len: 7 }));
    assert_eq!(parse(&vn[..vn.len() - 8], 0, 4), Err(PacketError::MalformedVersionNegotiation { len: 0 }));

    let other = hex("c0 6b3343cf 01 aa 00 0000");
    let span = parse(&other, 0, 1).expect("other version");
    assert_eq!(span.header(&other), Header::UnsupportedVersion(0x6b33_43cf));
    assert_eq!(span.end, other.len());
    let server = server_initial_keys(&RFC_DCID);
    let mut copy = other.clone();
    assert_eq!(
        unprotect_header(&mut copy, &span, &*server.remote.header, None),
        Err(PacketError::NotProtected { kind: Kind::UnsupportedVersion(0x6b33_43cf) })
    );
}

#[test]
fn rfc_9001_a4_retry_integrity_tag_authenticates_only_under_the_original_dcid() {
    let retry = hex("ff000000010008f067a5502a4262b574 6f6b656e04a265ba2eff4d829058fb3f 0f2496ba");
    let span = parse(&retry, 0, 8).expect("retry");
    assert!(retry_integrity_is_valid(&retry, &span, &RFC_DCID));
    assert!(!retry_integrity_is_valid(&retry, &span, &RFC_DCID[..7]), "another original DCID");
    for at in [0, 9, 14, retry.len() - 1] {
        let mut tampered = retry.clone();
        tampered[at] ^= 0x01;
        let Ok(span) = parse(&tampered, 0, 8) else { continue };
        assert!(!retry_integrity_is_valid(&tampered, &span, &RFC_DCID), "byte {at} flipped");
    }
}

#[test]
fn malformed_v1_headers_are_errors() {
    // A 21-byte connection ID.
    let mut long = hex("c0 00000001 15");
    long.extend_from_slice(&[0; 21 + 1 + 1 + 1 + 30]);
    assert_eq!(parse(&long, 0, 0), Err(PacketError::ConnectionIdTooLong { len: 21 }));
    // The fixed bit clear, long and short.
    assert_eq!(parse(&hex("80 00000001 00 00 00 01 00"), 0, 0), Err(PacketError::FixedBitClear));
    assert_eq!(parse(&hex("00 0102030405"), 0, 0), Err(PacketError::FixedBitClear));
    // A Length past the datagram.
    assert_eq!(
        parse(&hex("e0 00000001 00 00 4010 00"), 0, 0),
        Err(PacketError::LengthBeyondDatagram { length: 16, room: 1 })
    );
    // Starting at or past the end.
    assert_eq!(parse(&[0x40], 1, 0), Err(PacketError::Truncated));
    assert_eq!(parse(&[0x40], 7, 0), Err(PacketError::Truncated));
}

#[test]
fn random_and_mutated_datagrams_never_panic() {
    let mut rng = Rng(0x0ddc_0ffe_e0dd_f00d);
    let server = server_initial_keys(&RFC_DCID);
    let seeds = sealed_packets();
    for round in 0..20_000 {
        let mut datagram = if round % 2 == 0 {
            let len = rng.below(200);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // Often a plausible first byte and version, so the fuzz gets past them.
            if len > 5 && rng.chance(2) {
                bytes[0] = 0xc0 | (bytes[0] & 0x3f);
                bytes[1..5].copy_from_slice(&[0, 0, 0, if rng.chance(4) { 0 } else { 1 }]);
                if len > 6 {
                    bytes[5] = (bytes[5] % 24).min((len - 6) as u8);
                }
            }
            bytes
        } else {
            let mut bytes = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next() as u8;
            }
            bytes.truncate(rng.below(bytes.len() + 1));
            bytes
        };
        let dcid_len = rng.below(21);
        let mut at = 0;
        while at < datagram.len() {
            let Ok(span) = parse(&datagram, at, dcid_len) else { break };
            assert!(span.start == at && span.pn_offset <= span.end && span.end <= datagram.len(), "{span:?}");
            assert!(span.end > at, "progress");
            let _ = span.header(&datagram);
            if let Ok(unprotected) =
                unprotect_header(&mut datagram, &span, &*server.remote.header, Some(rng.next() >> 3))
            {
                let _ = decrypt(&mut datagram, &span, &unprotected, &*server.remote.packet);
            }
            at = span.end;
        }
    }
}
