use super::*;

/// Bytes from the RFC's hex dumps (whitespace ignored).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

fn table(d: &Decoder) -> Vec<(String, String)> {
    d.table_entries()
}

fn entries(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

fn int(bytes: &[u8], prefix: u32) -> Result<usize, HpackError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let v = r.integer(prefix)?;
    assert_eq!(r.pos, bytes.len());
    Ok(v)
}

#[test]
fn c1_integers() {
    assert_eq!(int(&[0x0a], 5), Ok(10)); // C.1.1
    assert_eq!(int(&[0x1f, 0x9a, 0x0a], 5), Ok(1337)); // C.1.2
    assert_eq!(int(&[0xff, 0x9a, 0x0a], 5), Ok(1337)); // bits above the prefix are not ours
    assert_eq!(int(&[0x2a], 8), Ok(42)); // C.1.3
    assert_eq!(int(&[0x1f, 0x00], 5), Ok(31));
    assert_eq!(int(&[0x1f, 0xe0, 0xff, 0xff, 0xff, 0x0f], 5), Ok(u32::MAX as usize));
}

fn sum(list: &[(&str, &str)]) -> usize {
    list.iter().map(|(n, v)| n.len() + v.len()).sum()
}

/// nginx 1.22's first two response blocks on a connection whose SETTINGS said
/// HEADER_TABLE_SIZE 0: a size update to 0, then `server`, `date`, `content-type` and
/// `content-length` as literals with incremental indexing, every time.
const NGINX_FIRST: &str =
    "20887689aa6355e580ae212e1f6196df697e940054be52282009c5022b8dbf704da98b46ff5f87497ca58ae819aa5c023134";
const NGINX_NEXT: &str =
    "887689aa6355e580ae212e1f6196df697e940054be52282009c5022b8dbf704e298b46ff5f87497ca58ae819aa5c023134";

#[test]
fn literals_with_indexing_into_a_table_of_no_room_read_the_same_and_keep_nothing() {
    let mut none = Decoder::new(4096);
    none.set_max_table_size(0);
    let mut room = Decoder::new(4096);
    // The same fields into a table with room: what the decoder must read either way.
    let with_room = room.decode(&hex(NGINX_NEXT)).unwrap();
    assert_eq!(room.table_entries().len(), 4);
    for block in [NGINX_FIRST, NGINX_NEXT, NGINX_NEXT] {
        let got = none.decode(&hex(block)).unwrap();
        assert_eq!(got.status, Some(200));
        assert_eq!(got.header_bytes, with_room.header_bytes);
        assert!(none.table_entries().is_empty());
        assert_eq!(none.table_size(), 0);
    }
    // A status other than the static table's comes as a literal with indexing of name 8,
    // here Huffman-coded "404"; a bad pad in any field still fails the block.
    let mut coded = Vec::new();
    huffman::encode(b"404", &mut coded);
    let mut status = hex("48");
    status.push(0x80 | coded.len() as u8);
    status.extend_from_slice(&coded);
    assert_eq!(none.decode(&status).unwrap().status, Some(404));
    let mut bad_pad = hex("5f");
    bad_pad.extend_from_slice(&[0x81, 0x00]);
    assert!(matches!(none.decode(&bad_pad), Err(HpackError::HuffmanPadding)));
    assert!(none.table_entries().is_empty());
}

#[test]
fn a_value_validated_before_is_known_by_its_bytes_and_a_changed_one_is_checked_again() {
    let mut d = Decoder::new(0);
    let field = |value: &[u8]| {
        let mut coded = Vec::new();
        huffman::encode(value, &mut coded);
        // server (static 54), literal without indexing, Huffman value.
        let mut block = vec![0x0f, 54 - 15];
        block.push(0x80 | coded.len() as u8);
        block.extend_from_slice(&coded);
        block
    };
    let nginx = field(b"nginx/1.22.1");
    for _ in 0..3 {
        assert_eq!(d.decode(&nginx).unwrap().header_bytes, 6 + 12);
    }
    assert_eq!(d.decode(&field(b"h2o")).unwrap().header_bytes, 6 + 3);
    // The same length as the value remembered, one byte changed to an invalid pad.
    let mut broken = nginx.clone();
    *broken.last_mut().unwrap() &= 0xfe;
    assert_eq!(d.decode(&nginx).unwrap().header_bytes, 6 + 12);
    assert!(d.decode(&broken).is_err());
    assert_eq!(d.decode(&nginx).unwrap().header_bytes, 6 + 12);
}

#[test]
fn c2_1_literal_with_indexing() {
    let mut d = Decoder::new(4096);
    let got = d.decode(&hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")).unwrap();
    assert_eq!(got, Decoded { status: None, header_bytes: sum(&[("custom-key", "custom-header")]), retry_after: None });
    assert_eq!(table(&d), entries(&[("custom-key", "custom-header")]));
    assert_eq!(d.table_size(), 55);
}

#[test]
fn c2_2_literal_without_indexing() {
    let mut d = Decoder::new(4096);
    let got = d.decode(&hex("040c 2f73 616d 706c 652f 7061 7468")).unwrap();
    assert_eq!(got, Decoded { status: None, header_bytes: sum(&[(":path", "/sample/path")]), retry_after: None });
    assert!(table(&d).is_empty());
}

#[test]
fn c2_3_literal_never_indexed() {
    let mut d = Decoder::new(4096);
    let got = d.decode(&hex("1008 7061 7373 776f 7264 0673 6563 7265 74")).unwrap();
    assert_eq!(got, Decoded { status: None, header_bytes: sum(&[("password", "secret")]), retry_after: None });
    assert!(table(&d).is_empty());
}

#[test]
fn c2_4_indexed() {
    let mut d = Decoder::new(4096);
    let got = d.decode(&hex("82")).unwrap();
    assert_eq!(got, Decoded { status: None, header_bytes: sum(&[(":method", "GET")]), retry_after: None });
    assert!(table(&d).is_empty());
}

const REQ1: &[(&str, &str)] =
    &[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let want_tables = [
        (vec![(":authority", "www.example.com")], 57),
        (vec![("cache-control", "no-cache"), (":authority", "www.example.com")], 110),
        (vec![("custom-key", "custom-value"), ("cache-control", "no-cache"), (":authority", "www.example.com")], 164),
    ];
    for ((block, list), (want, size)) in blocks.iter().zip([REQ1, REQ2, REQ3]).zip(want_tables) {
        let got = d.decode(&hex(block)).unwrap();
        assert_eq!(got, Decoded { status: None, header_bytes: sum(list), retry_after: None });
        assert_eq!(table(&d), entries(&want));
        assert_eq!(d.table_size(), size);
    }
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let lists: [&[(&str, &str)]; 3] = [
        &[(":status", "302"), ("cache-control", "private"), ("date", DATE1), ("location", LOC)],
        &[(":status", "307"), ("cache-control", "private"), ("date", DATE1), ("location", LOC)],
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", DATE2),
            ("location", LOC),
            ("content-encoding", "gzip"),
            ("set-cookie", COOKIE),
        ],
    ];
    let want_tables = [
        (vec![("location", LOC), ("date", DATE1), ("cache-control", "private"), (":status", "302")], 222),
        (vec![(":status", "307"), ("location", LOC), ("date", DATE1), ("cache-control", "private")], 222),
        (vec![("set-cookie", COOKIE), ("content-encoding", "gzip"), ("date", DATE2)], 215),
    ];
    for (((block, list), status), (want, size)) in blocks.iter().zip(lists).zip([302, 307, 200]).zip(want_tables) {
        let got = d.decode(&hex(block)).unwrap();
        assert_eq!(got, Decoded { status: Some(status), header_bytes: sum(list), retry_after: None });
        assert_eq!(table(&d), entries(&want));
        assert_eq!(d.table_size(), size);
    }
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32
             3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970
             7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61
             6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad
             1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2
             e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

fn err(block: &[u8]) -> HpackError {
    Decoder::new(4096).decode(block).unwrap_err()
}

#[test]
fn rejects_index_zero() {
    assert_eq!(err(&[0x80]), HpackError::IndexZero);
}

#[test]
fn rejects_index_out_of_range() {
    // 62 is the first dynamic index; the table is empty.
    assert_eq!(err(&[0xbe]), HpackError::IndexOutOfRange { index: 62, len: 61 });
    // A literal's indexed name too.
    assert_eq!(err(&[0x0f, 0x30, 0x00]), HpackError::IndexOutOfRange { index: 63, len: 61 });
    assert_eq!(err(&[0x7f, 0x01, 0x00]), HpackError::IndexOutOfRange { index: 64, len: 61 });
}

#[test]
fn rejects_integer_overflow() {
    // Index 127 + 2^35: too long an encoding.
    assert_eq!(err(&[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), HpackError::IntegerOverflow);
    // Above u32::MAX in five continuation bytes.
    assert_eq!(err(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), HpackError::IntegerOverflow);
    // Overlong zero padding is refused the same way, not looped on.
    let mut long = vec![0xff];
    long.extend(std::iter::repeat_n(0x80, 1000));
    long.push(0);
    assert_eq!(err(&long), HpackError::IntegerOverflow);
}

#[test]
fn rejects_huffman_eos() {
    // Literal, new name "a", Huffman value of 4 bytes of ones (contains EOS).
    assert_eq!(err(&[0x00, 0x01, b'a', 0x84, 0xff, 0xff, 0xff, 0xff]), HpackError::HuffmanEos);
}

#[test]
fn rejects_huffman_padding_too_long() {
    // '0' (00000) + 111 then a whole byte of ones: 11 bits of padding.
    assert_eq!(err(&[0x00, 0x01, b'a', 0x82, 0x07, 0xff]), HpackError::HuffmanPadding);
}

#[test]
fn rejects_huffman_padding_not_ones() {
    // '0' (00000) then 000.
    assert_eq!(err(&[0x00, 0x01, b'a', 0x81, 0x00]), HpackError::HuffmanPadding);
    // The same in a name, in an indexed insertion.
    assert_eq!(err(&[0x40, 0x81, 0x00, 0x00]), HpackError::HuffmanPadding);
}

#[test]
fn rejects_size_update_above_max() {
    // 4097 > 4096: 0x3f then 4097 - 31 = 4066 = 0xe2 0x1f.
    assert_eq!(err(&[0x3f, 0xe2, 0x1f]), HpackError::SizeUpdateTooLarge { size: 4097, max: 4096 });
    let mut d = Decoder::new(4096);
    d.set_max_table_size(0);
    assert_eq!(d.decode(&[0x21]), Err(HpackError::SizeUpdateTooLarge { size: 1, max: 0 }));
    assert_eq!(d.decode(&[0x20, 0x88]).unwrap().status, Some(200));
}

#[test]
fn rejects_size_update_after_a_field() {
    assert_eq!(err(&[0x88, 0x20]), HpackError::SizeUpdateNotAtStart);
    // Two at the start are fine (§4.2: a lowered then raised limit).
    let mut d = Decoder::new(4096);
    assert_eq!(d.decode(&[0x20, 0x3f, 0xe1, 0x1f, 0x88]).unwrap().status, Some(200));
}

#[test]
fn rejects_truncated() {
    for block in [
        &[0xff][..],               // integer continuation missing
        &[0x40],                   // no name
        &[0x40, 0x03, b'a', b'b'], // name cut short
        &[0x40, 0x01, b'a'],       // no value
        &[0x0f, 0x1f, 0x05, b'x'], // value cut short (location)
        &[0x48, 0x83, 0x64],       // Huffman value cut short
    ] {
        assert_eq!(err(block), HpackError::Truncated, "{block:02x?}");
    }
}

#[test]
fn rejects_status_not_three_digits_from_100() {
    for block in [
        &[0x48, 0x02, b'2', b'0'][..],                                 // too short
        &[0x48, 0x03, b'0', b'0', b'0'],                               // below 100
        &[0x48, 0x04, b'2', b'0', b'0', b'0'],                         // too long
        &[0x08, 0x03, b'2', b'0', b'x'],                               // not a digit, without indexing
        &[0x00, 0x07, b':', b's', b't', b'a', b't', b'u', b's', 0x00], // literal name, empty
    ] {
        assert_eq!(err(block), HpackError::BadStatus, "{block:02x?}");
    }
}

#[test]
fn rejects_duplicate_status() {
    assert_eq!(err(&[0x88, 0x8d]), HpackError::DuplicateStatus);
}

#[test]
fn status_from_every_representation() {
    let mut d = Decoder::new(4096);
    assert_eq!(d.decode(&[0x8d]).unwrap(), Decoded { status: Some(404), header_bytes: 10, retry_after: None });
    assert_eq!(d.decode(&[0x08, 0x03, b'1', b'0', b'3']).unwrap().status, Some(103));
    // Huffman-coded literal name ":status" and value "302".
    let mut block = vec![0x00];
    let mut name = Vec::new();
    huffman::encode(b":status", &mut name);
    block.push(0x80 | name.len() as u8);
    block.extend_from_slice(&name);
    block.extend_from_slice(&[0x82, 0x64, 0x02]);
    assert_eq!(d.decode(&block).unwrap(), Decoded { status: Some(302), header_bytes: 10, retry_after: None });
    // Inserted, then indexed from the dynamic table.
    assert_eq!(d.decode(&[0x48, 0x03, b'4', b'2', b'9']).unwrap().status, Some(429));
    assert_eq!(d.decode(&[0xbe]).unwrap().status, Some(429));
    // Trailers: no status.
    assert_eq!(d.decode(&[]).unwrap(), Decoded { status: None, header_bytes: 0, retry_after: None });
}

#[test]
fn retry_after_from_every_representation() {
    let mut d = Decoder::new(4096);
    let retry = |d: &mut Decoder, block: &[u8]| d.decode(block).unwrap().retry_after;
    // Static index 53 is retry-after with an empty value: not delay-seconds.
    assert_eq!(retry(&mut d, &[0x88, 0x80 | 53]), Some(RetryAfter::Date));
    // Its name by index, the value a plain literal, without and never indexed.
    assert_eq!(retry(&mut d, &[0x88, 0x0f, 53 - 15, 0x03, b'1', b'2', b'0']), Some(RetryAfter::Seconds(120)));
    assert_eq!(retry(&mut d, &[0x88, 0x1f, 53 - 15, 0x01, b'7']), Some(RetryAfter::Seconds(7)));
    // Huffman-coded value and Huffman-coded literal name.
    let mut block = vec![0x88, 0x00];
    let (mut name, mut value) = (Vec::new(), Vec::new());
    huffman::encode(b"retry-after", &mut name);
    huffman::encode(b"Fri, 31 Dec 1999 23:59:59 GMT", &mut value);
    block.push(0x80 | name.len() as u8);
    block.extend_from_slice(&name);
    block.push(0x80 | value.len() as u8);
    block.extend_from_slice(&value);
    assert_eq!(retry(&mut d, &block), Some(RetryAfter::Date));
    // Inserted into the dynamic table, then indexed from it (index 62).
    assert_eq!(retry(&mut d, &[0x88, 0x40 | 53, 0x02, b'4', b'5']), Some(RetryAfter::Seconds(45)));
    assert_eq!(retry(&mut d, &[0x88, 0xbe]), Some(RetryAfter::Seconds(45)));
    // Into a table that holds nothing (prefix of 6 bits, as nginx sends under our size 0).
    let mut none = Decoder::new(4096);
    none.set_max_table_size(0);
    assert_eq!(retry(&mut none, &[0x20, 0x88, 0x40 | 53, 0x02, b'3', b'0']), Some(RetryAfter::Seconds(30)));
    // Too long to keep: counted as a date. Two in a block: the last one.
    let mut long = vec![0x88, 0x0f, 53 - 15, 40];
    long.extend_from_slice(&[b'9'; 40]);
    assert_eq!(retry(&mut d, &long), Some(RetryAfter::Date));
    assert_eq!(
        retry(&mut d, &[0x88, 0x0f, 53 - 15, 0x01, b'1', 0x0f, 53 - 15, 0x01, b'2']),
        Some(RetryAfter::Seconds(2))
    );
    // Names that only look like it, and a block without it.
    assert_eq!(retry(&mut d, &[0x88, 0x00, 0x05, b'r', b'e', b't', b'r', b'y', 0x01, b'1']), None);
    assert_eq!(
        retry(
            &mut d,
            &[0x88, 0x00, 0x0c, b'r', b'e', b't', b'r', b'y', b'-', b'a', b'f', b't', b'e', b'r', b's', 0x01, b'1']
        ),
        None
    );
    assert_eq!(retry(&mut d, &[0x88]), None);
}

#[test]
fn a_lowered_limit_shrinks_the_table_when_the_peer_says_so() {
    let mut d = Decoder::new(4096);
    d.decode(&hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")).unwrap();
    assert_eq!(d.table_size(), 55);
    d.set_max_table_size(0);
    // A peer that has not (yet) sent its size update still indexes into its old table.
    assert_eq!(d.decode(&[0xbe]).unwrap().header_bytes, "custom-keycustom-header".len());
    assert_eq!(d.table_size(), 55);
    // Its size update empties it.
    d.decode(&[0x20]).unwrap();
    assert_eq!(d.table_size(), 0);
    assert_eq!(d.decode(&[0xbe]), Err(HpackError::IndexOutOfRange { index: 62, len: 61 }));
}

#[test]
fn a_repeated_block_reads_as_walking_it_would_whatever_came_between() {
    // Blocks that keep the table empty, and ones that size it, fill it and point into it.
    let blocks = [
        NGINX_FIRST,
        NGINX_NEXT,
        "88",
        "8d",
        "880f260135",
        "3fe11f 4001 7801 62 88",
        "88be",
        "2088",
        "40 0178 0163 88",
        "0f2681",
        "",
    ]
    .map(hex);
    let mut remembering = Decoder::new(4096);
    let mut walking = Decoder::new(4096);
    let mut rng = crate::test_rng::Rng(0x5eed_b10c);
    for step in 0..2000 {
        let block = &blocks[rng.below(blocks.len())];
        let want = walking.decode_fields(block, None);
        assert_eq!(remembering.decode(block), want, "step {step}, block {block:02x?}");
        assert_eq!(remembering.table_entries(), walking.table_entries(), "step {step}");
        if want.is_err() {
            // A failed block ends the connection; start both afresh.
            remembering = Decoder::new(4096);
            walking = Decoder::new(4096);
        }
    }
}

#[test]
fn set_cookie_values_are_handed_over_and_a_repeated_block_without_one_is_known_by_its_bytes() {
    use crate::h2::hpack::encoder::literal;
    // :status 200 (indexed), then literals without indexing; the table stays empty.
    let block = |cookies: &[&str]| {
        let mut b = vec![0x88];
        literal(&mut b, "content-type", "text/plain");
        for c in cookies {
            literal(&mut b, "set-cookie", c);
        }
        b
    };
    let mut d = Decoder::new(4096);
    let mut got: Vec<Vec<u8>> = Vec::new();
    let with = block(&["a=1; Path=/", "b=2"]);
    let decoded = d.decode_set_cookies(&with, &mut |v| got.push(v.to_vec())).expect("decodes");
    assert_eq!(decoded.status, Some(200));
    assert_eq!(got, [b"a=1; Path=/".to_vec(), b"b=2".to_vec()]);
    // The same block again is walked again: its cookies come every time.
    got.clear();
    d.decode_set_cookies(&with, &mut |v| got.push(v.to_vec())).expect("decodes");
    assert_eq!(got.len(), 2);
    // A block without one, twice: nothing handed over, the same result as `decode`.
    let without = block(&[]);
    for _ in 0..2 {
        let decoded = d.decode_set_cookies(&without, &mut |_| panic!("no set-cookie here")).expect("decodes");
        assert_eq!(decoded, Decoder::new(4096).decode(&without).expect("decodes"));
    }
    // After a plain decode of it, whether it has one is unknown again: walked, and still none.
    d.decode(&without).expect("decodes");
    d.decode_set_cookies(&without, &mut |_| panic!("no set-cookie here")).expect("decodes");
    d.decode(&with).expect("decodes");
    got.clear();
    d.decode_set_cookies(&with, &mut |v| got.push(v.to_vec())).expect("decodes");
    assert_eq!(got.len(), 2, "a cached plain decode never hides a cookie");
}
