//! Deterministic fuzzing of the HTTP/3 stream readers on peer-controlled bytes, inside `cargo
//! test`: random and mutated response and control streams, fed at random splits, must give the
//! same outcome as when fed whole (Ok or the same typed error), and never panic or hang.

use super::H3Error;
use super::frame::kind;
use super::frame::tests::frame;
use super::response::Response;
use super::streams_tests::read_response;
use super::uni::{ControlEvent, SeenStreams, UniStream};
use crate::quic::varint;
use crate::test_rng::Rng;

/// A random valid-looking response: informational heads, a final status, body frames, unknown
/// frames, maybe trailers.
fn response(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    // `:status` by a static name reference, or as a literal name.
    let status_section = |literal_name: bool, status: u16| {
        let mut s =
            if literal_name { b"\x00\x00\x27\x00:status\x03".to_vec() } else { vec![0x00, 0x00, 0x5f, 0x09, 0x03] };
        s.extend_from_slice(status.to_string().as_bytes());
        s
    };
    for _ in 0..rng.below(3) {
        // 1xx but 101, which HTTP/3 forbids.
        let status = 102 + rng.below(98) as u16;
        out.extend(frame(kind::HEADERS, &status_section(rng.chance(2), status)));
    }
    if rng.chance(3) {
        out.extend(frame(0x21 + 0x1f * rng.below(100) as u64, &vec![0xab; rng.below(20)]));
    }
    let status = 200 + rng.below(400) as u16;
    out.extend(frame(kind::HEADERS, &status_section(rng.chance(2), status)));
    for _ in 0..rng.below(4) {
        out.extend(frame(kind::DATA, &vec![b'd'; rng.below(300)]));
    }
    if rng.chance(3) {
        out.extend(frame(kind::HEADERS, &[0x00, 0x00, 0x23, b'a', b'b', b'c', 0x01, b'x']));
    }
    out
}

fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    match rng.below(5) {
        0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
        1 => {
            let mut b = seed.to_vec();
            for _ in 0..1 + rng.below(3) {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
            }
            b
        }
        2 => {
            let mut b = seed.to_vec();
            if !b.is_empty() {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            b
        }
        3 => seed[..rng.below(seed.len() + 1)].to_vec(),
        _ => {
            let mut b = seed[..rng.below(seed.len() + 1)].to_vec();
            b.extend_from_slice(&other[rng.below(other.len() + 1)..]);
            b
        }
    }
}

/// `bytes` cut at up to four random points.
fn random_split<'a>(rng: &mut Rng, bytes: &'a [u8]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        pieces.push(&bytes[from..cut]);
        from = cut;
    }
    pieces
}

#[test]
fn random_and_mutated_responses_read_the_same_however_split() {
    let mut rng = Rng(0x5eed_0f47_7300_0001);
    let seeds: Vec<Vec<u8>> = (0..300).map(|_| response(&mut rng)).collect();
    for seed in &seeds {
        assert!(read_response(&[seed]).is_ok(), "seeds are valid: {seed:02x?}");
    }
    let start = std::time::Instant::now();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..10_000 {
        let (seed, other) = (&seeds[rng.below(seeds.len())], &seeds[rng.below(seeds.len())]);
        let input = mutate(&mut rng, seed, other);
        let whole: Result<Response, H3Error> = read_response(&[&input]);
        let pieces = random_split(&mut rng, &input);
        assert_eq!(read_response(&pieces), whole, "{input:02x?} as {pieces:02x?}");
        if let Ok(response) = whole {
            assert!(response.body_bytes <= input.len() as u64);
            ok += 1;
        } else {
            err += 1;
        }
    }
    assert!(ok > 100 && err > 100, "ok {ok} err {err}");
    assert!(start.elapsed().as_secs_f64() < 10.0, "took {:?}", start.elapsed());
}

/// A control stream: its type, SETTINGS, GOAWAYs and unknown frames.
fn control(rng: &mut Rng) -> Vec<u8> {
    let mut out = vec![0x00];
    let mut settings = Vec::new();
    for (id, value) in [(0x01, rng.below(5000)), (0x06, rng.below(1 << 20)), (0x21, 7)] {
        if rng.chance(2) {
            varint::encode(id, &mut settings);
            varint::encode(value as u64, &mut settings);
        }
    }
    out.extend(frame(kind::SETTINGS, &settings));
    let mut id = 4 * rng.below(1000) as u64;
    for _ in 0..rng.below(4) {
        let mut payload = Vec::new();
        varint::encode(id, &mut payload);
        out.extend(frame(kind::GOAWAY, &payload));
        id -= 4 * rng.below(id as usize / 4 + 1) as u64;
        if rng.chance(2) {
            out.extend(frame(0x21, &vec![0; rng.below(10)]));
        }
    }
    out
}

fn read_uni(chunks: &[&[u8]]) -> (Vec<ControlEvent>, Result<(), H3Error>) {
    let mut stream = UniStream::default();
    let mut seen = SeenStreams::default();
    let mut events = Vec::new();
    for chunk in chunks {
        if let Err(e) = stream.receive(&mut seen, chunk, &mut events) {
            return (events, Err(e));
        }
    }
    (events, Ok(()))
}

#[test]
fn random_and_mutated_unidirectional_streams_read_the_same_however_split() {
    let mut rng = Rng(0x5eed_0f47_7300_0002);
    let seeds: Vec<Vec<u8>> = (0..200).map(|_| control(&mut rng)).collect();
    for seed in &seeds {
        assert_eq!(read_uni(&[seed]).1, Ok(()), "seeds are valid: {seed:02x?}");
    }
    let start = std::time::Instant::now();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..10_000 {
        let (seed, other) = (&seeds[rng.below(seeds.len())], &seeds[rng.below(seeds.len())]);
        let input = mutate(&mut rng, seed, other);
        let whole = read_uni(&[&input]);
        let pieces = random_split(&mut rng, &input);
        assert_eq!(read_uni(&pieces), whole, "{input:02x?} as {pieces:02x?}");
        if whole.1.is_ok() { ok += 1 } else { err += 1 }
    }
    assert!(ok > 100 && err > 100, "ok {ok} err {err}");
    assert!(start.elapsed().as_secs_f64() < 10.0, "took {:?}", start.elapsed());
}
