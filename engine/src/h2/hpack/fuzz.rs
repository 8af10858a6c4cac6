//! A bounded, deterministic fuzz run of the decoder on peer-controlled bytes: random strings
//! and mutations of valid blocks must give Ok or an HpackError, never a panic or a hang.
//! This keeps the property in every `cargo test`; a coverage-guided fuzz target is separate work.

use httlib_hpack::Encoder as TheirEncoder;

use super::Decoder;
use super::crosscheck::response_block;
use super::decoder::tests::hex;
use crate::test_rng::Rng;

fn seeds(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        "4803 3330 37c1 c0bf",
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad
         1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        "3fe1 1f20 88",
    ]
    .iter()
    .map(|h| hex(h))
    .collect();
    let mut enc = TheirEncoder::with_dynamic_size(4096);
    for _ in 0..200 {
        let status = 100 + rng.below(500) as u16;
        let (block, ..) = response_block(rng, &mut enc, status);
        if block.len() < 2000 {
            seeds.push(block);
        }
    }
    seeds
}

#[test]
fn random_and_mutated_blocks_never_panic() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let seeds = seeds(&mut rng);
    let start = std::time::Instant::now();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..20_000 {
        let seed = &seeds[rng.below(seeds.len())];
        let input: Vec<u8> = match rng.below(5) {
            0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
            1 => {
                let mut b = seed.clone();
                for _ in 0..1 + rng.below(3) {
                    if !b.is_empty() {
                        let i = rng.below(b.len());
                        b[i] ^= 1 << rng.below(8);
                    }
                }
                b
            }
            2 => {
                let mut b = seed.clone();
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = rng.next() as u8;
                }
                b
            }
            3 => seed[..rng.below(seed.len() + 1)].to_vec(),
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                let mut b = seed[..rng.below(seed.len() + 1)].to_vec();
                b.extend_from_slice(&other[rng.below(other.len() + 1)..]);
                b
            }
        };
        let mut d = Decoder::new(4096);
        if rng.chance(2) {
            // Warm the table so dynamic indices in the input can resolve.
            let _ = d.decode(&seeds[rng.below(seeds.len())]);
        }
        match d.decode(&input) {
            Ok(decoded) => {
                assert!(decoded.header_bytes <= input.len() * 8 / 5 + 4096 * 16);
                ok += 1;
            }
            Err(_) => err += 1,
        }
        assert!(d.table_size() <= 4096);
    }
    assert!(ok > 100 && err > 100, "ok {ok} err {err}");
    assert!(start.elapsed().as_secs_f64() < 10.0, "took {:?}", start.elapsed());
}
