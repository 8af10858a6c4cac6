//! Tests against a second, independent HPACK implementation (the `httlib-hpack` crate, a
//! dev-dependency only): its encoder drives our decoder through every representation,
//! Huffman or not, with the dynamic table filling, evicting and resizing; its decoder reads
//! our request blocks.

use httlib_hpack::{Decoder as TheirDecoder, Encoder as TheirEncoder};

use super::{Decoded, Decoder, encode_request};
use crate::stats::RetryAfter;
use crate::test_rng::Rng;

const NAMES: &[&str] = &[
    "content-type",
    "content-length",
    "date",
    "server",
    "cache-control",
    "etag",
    "set-cookie",
    "location",
    "vary",
    "x-request-id",
    "x-powered-by",
    "strict-transport-security",
    "alt-svc",
    "x-a",
    "accept-ranges",
    "retry-after",
];

const VALUES: &[&str] = &["text/html; charset=utf-8", "0", "1234", "nginx", "no-cache", "\"abc\"", "gzip", "bytes"];

fn value(rng: &mut Rng) -> Vec<u8> {
    match rng.below(8) {
        0..=3 => VALUES[rng.below(VALUES.len())].as_bytes().to_vec(),
        4 | 5 => (0..rng.below(40)).map(|_| b' ' + rng.below(95) as u8).collect(),
        6 => (0..rng.below(40)).map(|_| rng.next() as u8).collect(),
        // Large values: bigger than a 4096-byte table, so inserting one empties it.
        _ => (0..1000 + rng.below(6000)).map(|_| b'a' + rng.below(26) as u8).collect(),
    }
}

fn name(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(8) {
        (0..1 + rng.below(20)).map(|_| b'a' + rng.below(26) as u8).collect()
    } else {
        NAMES[rng.below(NAMES.len())].as_bytes().to_vec()
    }
}

/// Flags for their encoder: any mix of Huffman name/value, indexing, never-indexed and
/// best-format (static/dynamic table look-up); indexing is the most common, so the dynamic
/// table is used hard.
fn flags(rng: &mut Rng) -> u8 {
    let mut f = (rng.next() & 0x3) as u8;
    f |= match rng.below(4) {
        0 | 1 => TheirEncoder::WITH_INDEXING,
        2 => TheirEncoder::NEVER_INDEXED,
        _ => 0,
    };
    if rng.chance(2) {
        f |= TheirEncoder::BEST_FORMAT;
    }
    f
}

/// A header field: its name and value.
type Field = (Vec<u8>, Vec<u8>);

/// One response header block from their encoder, with the header_bytes and the Retry-After it
/// should decode to, and its fields in order.
pub(crate) fn response_block(
    rng: &mut Rng,
    enc: &mut TheirEncoder<'_>,
    status: u16,
) -> (Vec<u8>, usize, Option<RetryAfter>, Vec<Field>) {
    let mut dst = Vec::new();
    let mut bytes = 0;
    if rng.chance(10) {
        // A table size change, sometimes two (§4.2), always within the 4096 we advertise.
        let sizes = if rng.chance(3) { vec![0, rng.below(4097) as u32] } else { vec![rng.below(4097) as u32] };
        for s in sizes {
            enc.update_max_dynamic_size(s, &mut dst).unwrap();
        }
    }
    let mut fields = vec![(b":status".to_vec(), status.to_string().into_bytes())];
    for _ in 0..rng.below(12) {
        fields.push((name(rng), value(rng)));
    }
    // Pseudo-headers come first, but any position must decode the same.
    if rng.chance(20) {
        let i = rng.below(fields.len());
        fields.swap(0, i);
    }
    let mut retry_after = None;
    for (n, v) in &fields {
        bytes += n.len() + v.len();
        if n == b"retry-after" {
            // The last one counts; one too long to keep is counted as a date.
            retry_after = Some(if v.len() > 32 { RetryAfter::Date } else { RetryAfter::parse(v) });
        }
        enc.encode((n.clone(), v.clone(), flags(rng)), &mut dst).unwrap();
    }
    (dst, bytes, retry_after, fields)
}

#[test]
fn collecting_hands_over_every_field_of_their_responses_and_keeps_the_table_in_step() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for connection in 0..10 {
        let mut enc = TheirEncoder::with_dynamic_size(4096);
        let mut dec = Decoder::new(4096);
        for block_no in 0..300 {
            let (block, bytes, retry_after, fields) = response_block(&mut rng, &mut enc, 200);
            // Every other block collected, so that both ways share one table.
            if block_no % 2 == 0 {
                assert_eq!(dec.decode(&block).map(|d| d.header_bytes), Ok(bytes));
                continue;
            }
            let mut got = Vec::new();
            let decoded = dec.decode_collecting(&block, &mut |n, v| got.push((n.to_vec(), v.to_vec())));
            assert_eq!(
                decoded,
                Ok(Decoded { status: Some(200), header_bytes: bytes, retry_after }),
                "connection {connection} block {block_no}"
            );
            assert_eq!(got, fields, "connection {connection} block {block_no}");
        }
    }
}

#[test]
fn decodes_their_responses() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Evidence that the run used the table: entries held at once, and blocks after which the
    // table had shrunk (evictions or size updates).
    let (mut most_entries, mut shrinks) = (0, 0);
    // Blocks that carried retry-after as seconds and as anything else.
    let (mut seconds, mut dates) = (0, 0);
    for connection in 0..20 {
        let mut enc = TheirEncoder::with_dynamic_size(4096);
        let mut dec = Decoder::new(4096);
        let mut last_len = 0;
        for block_no in 0..500 {
            let status = 100 + rng.below(500) as u16;
            let (block, bytes, retry_after, _) = response_block(&mut rng, &mut enc, status);
            seconds += usize::from(matches!(retry_after, Some(RetryAfter::Seconds(_))));
            dates += usize::from(retry_after == Some(RetryAfter::Date));
            let got = dec.decode(&block);
            assert_eq!(
                got,
                Ok(Decoded { status: Some(status), header_bytes: bytes, retry_after }),
                "connection {connection} block {block_no}: {block:02x?}"
            );
            assert!(dec.table_size() <= 4096);
            let len = dec.table_entries().len();
            shrinks += usize::from(len < last_len);
            most_entries = most_entries.max(len);
            last_len = len;
        }
    }
    assert!(most_entries > 20 && shrinks > 500, "most entries {most_entries}, shrinks {shrinks}");
    assert!(seconds > 100 && dates > 100, "retry-after as seconds {seconds}, as dates {dates}");
}

/// method, scheme, authority, path, headers.
type Request = (&'static str, &'static str, &'static str, &'static str, Vec<(String, String)>);

#[test]
fn their_decoder_reads_our_requests() {
    let mut rng = Rng(42);
    let cases: Vec<Request> = vec![
        ("GET", "http", "localhost:8080", "/", vec![]),
        ("POST", "https", "example.com", "/index.html", vec![("content-type".into(), "application/json".into())]),
        (
            "DELETE",
            "https",
            "[::1]:443",
            "/a/b?c=d",
            vec![
                ("accept-encoding".into(), "gzip, deflate".into()),
                ("user-agent".into(), "volley/0.1.0".into()),
                ("accept".into(), "*/*".into()),
                ("x-long".into(), "y".repeat(5000)),
                ("x-empty".into(), String::new()),
            ],
        ),
    ];
    let mut all = cases;
    for _ in 0..200 {
        let headers = (0..rng.below(10))
            .map(|_| {
                let n = String::from_utf8(name(&mut rng)).unwrap();
                let v: String = (0..rng.below(300)).map(|_| (b' ' + rng.below(95) as u8) as char).collect();
                (n, v)
            })
            .collect();
        all.push(("GET", "https", "h.example:8443", "/p", headers));
    }
    for (method, scheme, authority, path, headers) in all {
        let block = encode_request(method, scheme, authority, path, &headers);
        let mut theirs = TheirDecoder::with_dynamic_size(4096);
        let mut buf = block.clone();
        let mut got = Vec::new();
        theirs.decode(&mut buf, &mut got).unwrap();
        let got: Vec<(Vec<u8>, Vec<u8>)> = got.into_iter().map(|(n, v, _)| (n, v)).collect();
        let mut want = vec![
            (b":method".to_vec(), method.as_bytes().to_vec()),
            (b":scheme".to_vec(), scheme.as_bytes().to_vec()),
            (b":authority".to_vec(), authority.as_bytes().to_vec()),
            (b":path".to_vec(), path.as_bytes().to_vec()),
        ];
        want.extend(headers.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())));
        assert_eq!(got, want);
        // Nothing indexed: the block means the same on every stream.
        let mut ours = Decoder::new(4096);
        ours.decode(&block).unwrap();
        assert!(ours.table_entries().is_empty());
    }
}
