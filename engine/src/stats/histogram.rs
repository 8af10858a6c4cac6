//! The one histogram shape every part of volley uses, and its wire form: HdrHistogram V2
//! with DEFLATE, so that reports from any worker merge exactly.
//!
//! Decoding takes bytes from other machines and from files, so it never allocates more than the
//! histogram's own header says it can need: a V2 header states the payload's length and the
//! bounds from which the counts array, and so the payload's largest honest size, follow. The
//! hdrhistogram crate allocates whatever length is declared before reading it (a 60-byte
//! V2+DEFLATE input could make it allocate 4 GiB), so the header is checked here first and the
//! payload inflated through a bounded reader.

use std::borrow::Cow;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// 1 ns to one hour at 3 significant digits. Values beyond an hour are clamped and counted.
const LOWEST: u64 = 1;
pub(crate) const HIGHEST: u64 = 3_600_000_000_000;
const SIGFIG: u8 = 3;
/// The top of the bucket [`HIGHEST`] falls in (2,048 × 2³¹ ns): what a histogram of volley's
/// range can hold, and so the largest value a decoded histogram may bring.
const TOP: u64 = (1 << 42) - 1;
/// Where a histogram's counts start: one bucket of single-nanosecond resolution. The counts
/// grow (by whole buckets, never changing a value's place) to cover the largest value recorded
/// or added, up to [`HIGHEST`]: a histogram of the whole range is 264 KiB, and most cover a
/// few milliseconds (an empty one, such as most seconds' connect times, 16 KiB). A run keeps
/// several of them (each thread's current second, totals, every second's merge in transit).
const INITIAL_HIGHEST: u64 = 2_047;

/// The V2 encodings' first four bytes (HdrHistogram's cookies, 0x10 being the word size).
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// Cookie, payload length, normalizing offset, digits, lowest, highest, integer-to-double ratio.
const V2_HEADER_LEN: usize = 40;
/// V2 writes each count (or run of zeros) as a zig-zag LEB128 number of at most 9 bytes.
const MAX_BYTES_PER_COUNT: u64 = 9;
/// No histogram volley takes may hold more counts than one of 3 digits over the whole u64 range
/// (56,320 counts, 440 KiB; volley's own have 33,792): enough for any histogram it writes, or
/// one of other bounds whose samples fit in volley's, and small enough to decode anything.
const MAX_COUNTS: u64 = 56_320;

/// An empty histogram of volley's shape: 1 ns resolution at the bottom, 3 significant digits,
/// sized to what it holds (see [`INITIAL_HIGHEST`]); values above [`HIGHEST`] must be clamped
/// before they are recorded ([`crate::Stats::record`] does).
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(LOWEST, INITIAL_HIGHEST, SIGFIG).expect("constant bounds are valid");
    h.auto(true);
    h
}

#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram does not decode: {0}")]
    Decode(String),
    #[error("histogram has other bounds than volley's (1 ns to 1 h, 3 digits)")]
    Bounds,
    #[error(
        "histogram bounds ({lowest} to {highest}, {digits} digits) need {counts} counts, more than the {MAX_COUNTS} accepted"
    )]
    TooManyCounts { lowest: u64, highest: u64, digits: u32, counts: u64 },
    #[error("histogram declares a payload of {declared} bytes, more than the {most} its bounds can need")]
    PayloadTooLarge { declared: u64, most: u64 },
}

/// Encodes as HdrHistogram V2 + DEFLATE, declaring volley's whole range (1 ns to 1 h) however
/// far the counts have grown: a reader that decodes it into a histogram of fixed bounds can
/// still add any other of volley's to it. The payload holds counts up to the last one that is
/// not zero either way, so this costs nothing.
pub fn encode_histogram(h: &Histogram<u64>) -> Vec<u8> {
    let mut plain = Vec::new();
    V2Serializer::new().serialize(h, &mut plain).expect("writing to a Vec cannot fail");
    if h.high() < HIGHEST {
        plain[24..32].copy_from_slice(&HIGHEST.to_be_bytes());
    }
    let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
    z.write_all(&plain).expect("writing to a Vec cannot fail");
    let deflated = z.finish().expect("writing to a Vec cannot fail");
    let mut out = Vec::with_capacity(8 + deflated.len());
    out.extend_from_slice(&V2_DEFLATE_COOKIE.to_be_bytes());
    out.extend_from_slice(&(deflated.len() as u32).to_be_bytes());
    out.extend_from_slice(&deflated);
    out
}

/// Decodes V2 or V2 + DEFLATE, and copies it into volley's bounds so it merges with the rest.
pub fn decode_histogram(bytes: &[u8]) -> Result<Histogram<u64>, HistogramError> {
    let plain = plain_v2(bytes)?;
    if let Some(counts) = own_shape_counts(&plain) {
        return decode_own_shape(counts);
    }
    let decoded: Histogram<u64> =
        Deserializer::new().deserialize(&mut &plain[..]).map_err(|e| HistogramError::Decode(format!("{e:?}")))?;
    if decoded.max() > TOP {
        return Err(HistogramError::Bounds);
    }
    let mut h = new_histogram();
    h.add(&decoded).map_err(|_| HistogramError::Bounds)?;
    Ok(h)
}

/// The payload of a plain V2 histogram of volley's own shape (1 ns lowest, 3 digits, no
/// normalizing offset): every histogram volley writes. Its indices are a fresh histogram's.
fn own_shape_counts(plain: &[u8]) -> Option<&[u8]> {
    let len = be_u32(plain, 4)? as usize;
    let (offset, digits, lowest) = (be_u32(plain, 8)?, be_u32(plain, 12)?, be_u64(plain, 16)?);
    (offset == 0 && digits == u32::from(SIGFIG) && lowest == LOWEST)
        .then(|| plain.get(V2_HEADER_LEN..V2_HEADER_LEN + len))?
}

/// Reads the counts of volley's own shape straight into a histogram sized to what they hold.
/// The general path (the crate's deserializer, then `add`) builds a histogram of the declared
/// range first, 264 KiB zeroed for every histogram of every interval, and walks all its 33,792
/// counts: at 1,000 workers that was most of the controller's CPU (page faults, memset, `add`).
fn decode_own_shape(payload: &[u8]) -> Result<Histogram<u64>, HistogramError> {
    let mut counts: Vec<(u64, u64)> = Vec::new();
    let mut index: u64 = 0;
    let mut at = 0;
    while at < payload.len() {
        let (encoded, used) = read_varint(&payload[at..])?;
        at += used;
        let n = ((encoded >> 1) as i64) ^ -((encoded & 1) as i64);
        if n < 0 {
            index = index.saturating_add(n.unsigned_abs());
        } else {
            if n > 0 {
                counts.push((index, n as u64));
            }
            index += 1;
        }
        if index > MAX_COUNTS {
            return Err(HistogramError::Bounds);
        }
    }
    let mut h = new_histogram();
    // The largest first: the counts grow once, to their final size.
    for &(index, n) in counts.iter().rev() {
        let value = value_at_index(index);
        if value > TOP {
            return Err(HistogramError::Bounds);
        }
        h.record_n(value, n).map_err(|_| HistogramError::Bounds)?;
    }
    Ok(h)
}

/// The lowest value counted at `index` in a histogram of volley's shape: 2,048 sub-buckets
/// (3 digits), the first bucket whole and every later one its upper half, at 1 ns units.
fn value_at_index(index: u64) -> u64 {
    const HALF_MAGNITUDE: u32 = 10;
    const HALF: u64 = 1 << HALF_MAGNITUDE;
    let bucket = (index >> HALF_MAGNITUDE).saturating_sub(1);
    let sub_bucket = if index < HALF { index } else { (index & (HALF - 1)) + HALF };
    sub_bucket.checked_shl(bucket as u32).filter(|v| v >> bucket == sub_bucket).unwrap_or(u64::MAX)
}

/// One LEB128 number as HdrHistogram writes it: 7 bits a byte, the ninth byte whole.
fn read_varint(bytes: &[u8]) -> Result<(u64, usize), HistogramError> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Ok((value | (u64::from(b) << 56), 9));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(HistogramError::Decode("a count is cut short".into()))
}

/// The plain V2 form of `bytes` (inflated when it is V2 + DEFLATE), header checked and payload
/// complete, so that the deserializer allocates nothing beyond what the bounds can fill.
fn plain_v2(bytes: &[u8]) -> Result<Cow<'_, [u8]>, HistogramError> {
    let short = || HistogramError::Decode("shorter than its header says".into());
    match be_u32(bytes, 0) {
        Some(V2_COOKIE) => {
            let payload = checked_payload_len(bytes)?;
            if ((bytes.len() - V2_HEADER_LEN) as u64) < payload {
                return Err(short());
            }
            Ok(Cow::Borrowed(bytes))
        }
        Some(V2_DEFLATE_COOKIE) => {
            let deflated_len = be_u32(bytes, 4).ok_or_else(short)? as usize;
            let deflated = bytes.get(8..8 + deflated_len).ok_or_else(short)?;
            let mut inflater = ZlibDecoder::new(deflated);
            let mut plain = vec![0; V2_HEADER_LEN];
            inflater
                .read_exact(&mut plain)
                .map_err(|e| HistogramError::Decode(format!("inflating its header: {e}")))?;
            let payload = checked_payload_len(&plain)?;
            // The check above caps this at MAX_COUNTS * 9 bytes.
            plain.reserve_exact(payload as usize);
            inflater
                .take(payload)
                .read_to_end(&mut plain)
                .map_err(|e| HistogramError::Decode(format!("inflating its payload: {e}")))?;
            if ((plain.len() - V2_HEADER_LEN) as u64) < payload {
                return Err(short());
            }
            Ok(Cow::Owned(plain))
        }
        _ => Err(HistogramError::Decode("not an HdrHistogram V2 encoding".into())),
    }
}

/// The payload length a plain V2 header declares, once it is known to be no more than its
/// bounds can need and the bounds no wider than [`MAX_COUNTS`] allows.
fn checked_payload_len(header: &[u8]) -> Result<u64, HistogramError> {
    if header.len() < V2_HEADER_LEN {
        return Err(HistogramError::Decode("shorter than a V2 header".into()));
    }
    if be_u32(header, 0) != Some(V2_COOKIE) {
        return Err(HistogramError::Decode("not an HdrHistogram V2 encoding inside the DEFLATE".into()));
    }
    let field = |at| be_u32(header, at).map(u64::from).unwrap_or_default();
    let wide = |at| be_u64(header, at).unwrap_or_default();
    let (declared, digits, lowest, highest) = (field(4), field(12) as u32, wide(16), wide(24));
    let counts = counts_len(lowest, highest, digits)
        .ok_or_else(|| HistogramError::Decode(format!("impossible bounds ({lowest} to {highest}, {digits} digits)")))?;
    if counts > MAX_COUNTS {
        return Err(HistogramError::TooManyCounts { lowest, highest, digits, counts });
    }
    let most = counts * MAX_BYTES_PER_COUNT;
    if declared > most {
        return Err(HistogramError::PayloadTooLarge { declared, most });
    }
    Ok(declared)
}

/// How many counts HdrHistogram keeps for these bounds (its own layout: buckets of
/// sub-buckets, half of each bucket shared with the one below), or None for bounds it refuses.
fn counts_len(lowest: u64, highest: u64, digits: u32) -> Option<u64> {
    if !(1..=u64::MAX / 2).contains(&lowest) || highest < 2 * lowest || digits > 5 {
        return None;
    }
    // Single-unit resolution up to 2 * 10^digits, rounded up to a power of two.
    let largest_exact = 2 * 10u64.pow(digits);
    let sub_bucket_magnitude = 64 - (largest_exact - 1).leading_zeros();
    let unit_magnitude = 63 - lowest.leading_zeros();
    if unit_magnitude + sub_bucket_magnitude > 63 {
        return None;
    }
    let sub_buckets = 1u64 << sub_bucket_magnitude;
    let mut smallest_untrackable = sub_buckets << unit_magnitude;
    let mut buckets = 1;
    while smallest_untrackable <= highest {
        if smallest_untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    Some((buckets + 1) * (sub_buckets / 2))
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests;
