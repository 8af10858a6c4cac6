//! The one histogram shape every part of volley uses, and its wire form: HdrHistogram V2
//! with DEFLATE, so that reports from any worker merge exactly.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// 1 ns to one hour at 3 significant digits. Values beyond an hour are clamped and counted.
const LOWEST: u64 = 1;
const HIGHEST: u64 = 3_600_000_000_000;
const SIGFIG: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST, HIGHEST, SIGFIG).expect("constant bounds are valid")
}

#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram does not decode: {0}")]
    Decode(String),
    #[error("histogram has other bounds than volley's (1 ns to 1 h, 3 digits)")]
    Bounds,
}

/// Encodes as HdrHistogram V2 + DEFLATE.
pub fn encode_histogram(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// Decodes V2 or V2 + DEFLATE, and copies it into volley's bounds so it merges with the rest.
pub fn decode_histogram(bytes: &[u8]) -> Result<Histogram<u64>, HistogramError> {
    let decoded: Histogram<u64> =
        Deserializer::new().deserialize(&mut &bytes[..]).map_err(|e| HistogramError::Decode(format!("{e:?}")))?;
    let mut h = new_histogram();
    h.add(&decoded).map_err(|_| HistogramError::Bounds)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
