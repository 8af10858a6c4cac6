use std::io::Write;
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::ZlibEncoder;

use super::*;

/// A plain V2 header with these fields (normalizing offset 0, integer-to-double ratio 1).
fn v2_header(payload_len: u32, digits: u32, lowest: u64, highest: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(V2_HEADER_LEN);
    h.extend_from_slice(&V2_COOKIE.to_be_bytes());
    h.extend_from_slice(&payload_len.to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes());
    h.extend_from_slice(&digits.to_be_bytes());
    h.extend_from_slice(&lowest.to_be_bytes());
    h.extend_from_slice(&highest.to_be_bytes());
    h.extend_from_slice(&1f64.to_be_bytes());
    h
}

/// `plain` wrapped as V2 + DEFLATE.
fn deflated(plain: &[u8]) -> Vec<u8> {
    let mut z = ZlibEncoder::new(Vec::new(), Compression::best());
    z.write_all(plain).unwrap();
    let z = z.finish().unwrap();
    let mut out = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
    out.extend_from_slice(&(z.len() as u32).to_be_bytes());
    out.extend_from_slice(&z);
    out
}

#[test]
fn a_histogram_survives_encode_and_decode() {
    let mut h = new_histogram();
    for v in [1u64, 999, 1_000_000, 77_777_777, HIGHEST] {
        h.record_n(v, v % 7 + 1).unwrap();
    }
    let back = decode_histogram(&encode_histogram(&h)).unwrap();
    assert_eq!(back, h);
}

#[test]
fn garbage_does_not_decode() {
    assert!(decode_histogram(b"not a histogram").is_err());
    assert!(decode_histogram(&[]).is_err());
}

#[test]
fn a_small_deflated_histogram_declaring_gigabytes_is_refused_at_once() {
    let bomb = deflated(&v2_header(u32::MAX, 3, LOWEST, HIGHEST));
    assert!(bomb.len() < 64, "{} bytes", bomb.len());
    let started = Instant::now();
    let err = decode_histogram(&bomb).expect_err("a 4 GiB payload from 60 bytes");
    assert!(matches!(err, HistogramError::PayloadTooLarge { declared: 4_294_967_295, most: 304_128 }), "{err}");
    assert!(started.elapsed() < Duration::from_millis(100), "took {:?}", started.elapsed());
    assert!(err.to_string().contains("4294967295"), "{err}");
}

#[test]
fn a_plain_histogram_declaring_more_than_it_carries_is_refused() {
    let err = decode_histogram(&v2_header(u32::MAX, 3, LOWEST, HIGHEST)).expect_err("4 GiB declared");
    assert!(matches!(err, HistogramError::PayloadTooLarge { .. }), "{err}");
    // Within the bounds' limit, but the bytes are not there.
    let err = decode_histogram(&v2_header(1000, 3, LOWEST, HIGHEST)).expect_err("1000 bytes declared, 0 sent");
    assert!(matches!(err, HistogramError::Decode(_)), "{err}");
    let err = decode_histogram(&deflated(&v2_header(1000, 3, LOWEST, HIGHEST))).expect_err("the same, deflated");
    assert!(matches!(err, HistogramError::Decode(_)), "{err}");
}

#[test]
fn bounds_that_need_a_huge_counts_array_are_refused() {
    // 5 digits over the whole u64 range: 6 million counts, 48 MB before a single sample.
    let err = decode_histogram(&deflated(&v2_header(10, 5, 1, u64::MAX))).expect_err("too wide");
    assert!(matches!(err, HistogramError::TooManyCounts { .. }), "{err}");
    let err = decode_histogram(&deflated(&v2_header(10, 9, 1, u64::MAX))).expect_err("9 digits");
    assert!(matches!(err, HistogramError::Decode(_)), "{err}");
    let err = decode_histogram(&deflated(&v2_header(10, 3, 0, 100))).expect_err("lowest 0");
    assert!(matches!(err, HistogramError::Decode(_)), "{err}");
}

#[test]
fn the_counts_bound_is_hdrhistograms_own_layout() {
    for (lowest, highest, digits) in
        [(1, HIGHEST, 3), (1, u64::MAX, 3), (1, 2, 0), (1000, 10_000_000, 2), (7, 1 << 40, 5), (1 << 20, u64::MAX, 1)]
    {
        let h = Histogram::<u64>::new_with_bounds(lowest, highest, digits as u8).unwrap();
        assert_eq!(
            counts_len(lowest, highest, digits),
            Some(h.distinct_values() as u64),
            "{lowest} {highest} {digits}"
        );
    }
    assert_eq!(counts_len(1, u64::MAX, 3), Some(MAX_COUNTS));
}

#[test]
fn a_histogram_with_every_count_large_still_decodes() {
    // The largest payload volley's own bounds can produce: every count set, none small.
    let mut h = new_histogram();
    h.record(HIGHEST).unwrap();
    let values: Vec<u64> = h.iter_all().map(|v| v.value_iterated_to()).collect();
    for v in values {
        h.record_n(v, 1 << 60).unwrap();
    }
    let back = decode_histogram(&encode_histogram(&h)).unwrap();
    assert_eq!(back, h);
}

#[test]
fn a_histogram_of_other_bounds_decodes_into_volleys() {
    let mut other = Histogram::<u64>::new_with_bounds(1000, 10_000_000, 2).unwrap();
    for v in [1000u64, 5_000, 77_000, 9_999_999] {
        other.record(v).unwrap();
    }
    let mut plain = Vec::new();
    hdrhistogram::serialization::V2Serializer::new().serialize(&other, &mut plain).unwrap();
    for bytes in [plain, encode_histogram(&other)] {
        let back = decode_histogram(&bytes).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!((back.low(), back.sigfig(), back.is_auto_resize()), (LOWEST, SIGFIG, true));
        // Two digits: the largest sample is known to within 1%.
        assert!(back.max().abs_diff(9_999_999) < 100_000, "max {}", back.max());
    }
}

#[test]
fn a_histogram_grows_to_what_it_holds_and_keeps_every_value_in_place() {
    let mut fixed = Histogram::<u64>::new_with_bounds(LOWEST, HIGHEST, SIGFIG).unwrap();
    let mut grown = new_histogram();
    assert!(grown.distinct_values() <= 2048, "an empty histogram holds one bucket");
    for v in [1u64, 999, 2_048, 50_000, 1_234_567, 20_000_000] {
        fixed.record(v).unwrap();
        grown.record(v).unwrap();
    }
    // 20 ms needs 15 of the 33 buckets an hour takes.
    assert!(grown.distinct_values() < fixed.distinct_values() / 2, "{}", grown.distinct_values());
    for q in [0.0, 0.2, 0.5, 0.8, 1.0] {
        assert_eq!(grown.value_at_quantile(q), fixed.value_at_quantile(q), "q={q}");
    }
    // Merging either way gives the same as recording everything in one.
    let mut merged = new_histogram();
    merged.add(&fixed).unwrap();
    merged.add(&grown).unwrap();
    let mut both = fixed.clone();
    both.add(&grown).unwrap();
    assert_eq!(merged.len(), 12);
    for q in [0.0, 0.5, 1.0] {
        assert_eq!(merged.value_at_quantile(q), both.value_at_quantile(q), "q={q}");
    }
}

#[test]
fn a_histogram_holding_values_beyond_an_hour_is_refused() {
    let mut other = Histogram::<u64>::new_with_bounds(1, 1 << 50, 3).unwrap();
    other.record(HIGHEST * 2).unwrap();
    assert!(matches!(decode_histogram(&encode_histogram(&other)), Err(HistogramError::Bounds)));
}

#[test]
fn an_encoded_histogram_declares_the_whole_range_so_fixed_bounds_readers_can_add_to_it() {
    let mut small = new_histogram();
    small.record(5_000).unwrap();
    let mut large = new_histogram();
    large.record(3_000_000_000_000).unwrap();
    // Decoded by the crate itself (as another reader would), not by decode_histogram.
    let read = |h: &Histogram<u64>| -> Histogram<u64> {
        Deserializer::new().deserialize(&mut &encode_histogram(h)[..]).unwrap()
    };
    let mut sum = read(&small);
    assert!(!sum.is_auto_resize());
    assert_eq!(sum.high(), HIGHEST);
    sum.add(read(&large)).unwrap();
    assert_eq!(sum.len(), 2);
}

#[test]
fn volleys_own_histograms_decode_directly_to_what_the_crates_deserializer_reads() {
    let mut rng = crate::test_rng::Rng(0x5eed);
    for round in 0..60u64 {
        let mut h = new_histogram();
        for _ in 0..round * 41 {
            let magnitude = rng.next() % 42;
            let value = (1 + rng.next() % (1u64 << magnitude)).min(HIGHEST);
            h.record_n(value, 1 + rng.next() % 1_000).unwrap();
        }
        let bytes = encode_histogram(&h);
        let plain = plain_v2(&bytes).unwrap();
        let general: Histogram<u64> = Deserializer::new().deserialize(&mut &plain[..]).unwrap();
        let direct = decode_histogram(&bytes).unwrap();
        assert_eq!(direct, h, "round {round}");
        assert_eq!((direct.len(), direct.min(), direct.max()), (general.len(), general.min(), general.max()));
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(direct.value_at_quantile(q), general.value_at_quantile(q), "round {round}, q {q}");
        }
    }
}

#[test]
fn counts_past_volleys_range_in_its_own_shape_are_refused() {
    // A run of zeros to the end of the counts, then one count: an index no histogram has.
    let mut payload = Vec::new();
    let zeros = (MAX_COUNTS as i64 + 5) * 2 - 1; // zig-zag of -(MAX_COUNTS + 5)
    let mut z = zeros as u64;
    while z >= 0x80 {
        payload.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    payload.push(z as u8);
    payload.push(2); // zig-zag of 1
    let mut plain = v2_header(payload.len() as u32, 3, LOWEST, HIGHEST);
    plain.extend_from_slice(&payload);
    assert!(matches!(decode_histogram(&plain), Err(HistogramError::Bounds)));
}
