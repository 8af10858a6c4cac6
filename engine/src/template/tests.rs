use super::*;

/// Values of a request; `states` are the generators of `random_int` and of UUIDs.
fn fill(states: &mut [u64; 2]) -> Fill<'_> {
    let [rng, unique] = states;
    Fill { vu: 7, iteration: 41, worker: 2, thread: 1, rng, unique, rows: None, vars: &[], cookie: &[] }
}

fn rendered(text: &str, rng: &mut [u64; 2]) -> String {
    let template = Template::parse(text.as_bytes(), &Vocabulary::default()).expect("a template");
    let mut out = Vec::new();
    template.render(&mut fill(rng), &mut out);
    String::from_utf8(out).expect("text")
}

#[test]
fn slots_are_filled_from_the_request_and_text_around_them_stays_as_it_is() {
    let mut rng = [1, 1];
    assert_eq!(rendered("/u/{{vu}}/i/{{ iteration }}?w={{worker}}&t={{thread}}", &mut rng), "/u/7/i/41?w=2&t=1");
    assert_eq!(rendered("no slots {here} }}", &mut rng), "no slots {here} }}");
    assert_eq!(rendered("{{vu}}{{vu}}", &mut rng), "77");
    assert!(!Template::parse(b"plain", &Vocabulary::default()).unwrap().has_slots());
}

#[test]
fn random_int_stays_within_its_bounds_and_the_same_seed_draws_the_same_numbers() {
    let (mut a, mut b) = ([0x1234_5678, 3], [0x1234_5678, 4]);
    let draws: Vec<i64> = (0..2000).map(|_| rendered("{{random_int -3 3}}", &mut a).parse().unwrap()).collect();
    assert!(draws.iter().all(|d| (-3..=3).contains(d)), "{draws:?}");
    for v in -3..=3 {
        assert!(draws.contains(&v), "{v} never drawn in 2000");
    }
    let again: Vec<i64> = (0..2000).map(|_| rendered("{{random_int -3 3}}", &mut b).parse().unwrap()).collect();
    assert_eq!(draws, again);
    assert_eq!(rendered("{{random_int 5 5}}", &mut a), "5");
    let wide = rendered(&format!("{{{{random_int {} {}}}}}", i64::MIN, i64::MAX), &mut a);
    assert!(wide.parse::<i64>().is_ok(), "{wide}");
    // A span of 2⁶⁴ - 1, the widest short of all of i64, and one near the top.
    for (low, high) in [(i64::MIN + 1, i64::MAX), (i64::MAX - 1, i64::MAX)] {
        let drawn: i64 = rendered(&format!("{{{{random_int {low} {high}}}}}"), &mut a).parse().unwrap();
        assert!((low..=high).contains(&drawn), "{drawn} outside {low}..={high}");
    }
}

#[test]
fn uuids_are_version_4_and_differ_on_every_use() {
    let mut rng = [99, 99];
    let (a, b) = (rendered("{{uuid}}", &mut rng), rendered("{{uuid}}", &mut rng));
    assert_ne!(a, b);
    for u in [&a, &b] {
        let groups: Vec<&str> = u.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{u}");
        assert!(u.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{u}");
        assert_eq!(&groups[2][..1], "4", "{u}");
        assert!("89ab".contains(&groups[3][..1]), "{u}");
    }
}

#[test]
fn unix_ms_is_the_clock_at_encoding() {
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let mut rng = [1, 1];
    let ms: u64 = rendered("{{unix_ms}}", &mut rng).parse().unwrap();
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!((before..=after).contains(&ms), "{before} {ms} {after}");
}

use std::time::{SystemTime, UNIX_EPOCH};

#[test]
fn a_malformed_or_unknown_slot_is_an_error_at_its_offset() {
    let cases: [(&str, usize, &str); 7] = [
        ("/a/{{vu", 3, "without a closing"),
        ("ok {{nope}}", 3, "`{{nope}}` names nothing volley knows (it knows vu, iteration"),
        ("{{}}", 0, "names nothing"),
        ("x{{random_int 5 1}}", 1, "random_int takes two whole numbers"),
        ("{{random_int 1}}", 0, "random_int takes two whole numbers"),
        ("{{random_int a b}}", 0, "random_int takes two whole numbers"),
        ("{{vu 3}}", 0, "vu takes no arguments"),
    ];
    for (text, offset, says) in cases {
        let e = Template::parse(text.as_bytes(), &Vocabulary::default()).expect_err(text);
        assert_eq!(e.offset, offset, "{text}: {e}");
        assert!(e.to_string().contains(says), "{text}: {e}");
    }
}

#[test]
fn a_template_prints_as_it_would_be_written() {
    let t = Template::parse(b"/a/{{ vu }}/{{random_int 1  9}}", &Vocabulary::default()).unwrap();
    assert_eq!(t.to_string(), "/a/{{vu}}/{{random_int 1 9}}");
}

#[test]
fn an_encoded_hole_is_framed_as_the_protocol_frames_a_string() {
    let mut encoded = Encoded::new(&Vocabulary::default());
    encoded.bytes(b"\x04");
    encoded.value("/{{vu}}", Framing::Literal, |_| unreachable!("a value with slots is a hole"));
    encoded.value("plain", Framing::Literal, |out| out.extend_from_slice(b"\x05plain"));
    let long = format!("{}{{{{iteration}}}}", "x".repeat(130));
    encoded.value(&long, Framing::Literal, |_| unreachable!());
    encoded.value("{{thread}}", Framing::Raw, |_| unreachable!());
    assert!(encoded.has_holes());
    let (mut out, mut rng) = (Vec::new(), [1, 1]);
    encoded.render(&mut fill(&mut rng), &mut out);
    let mut expected = b"\x04\x02/7\x05plain".to_vec();
    // 132 bytes: 127 in the prefix, then 5.
    expected.extend_from_slice(&[0x7f, 5]);
    expected.extend_from_slice(format!("{}41", "x".repeat(130)).as_bytes());
    expected.push(b'1');
    assert_eq!(out, expected);

    let mut plain = Encoded::default();
    plain.value("{{ not a template", Framing::Raw, |out| out.extend_from_slice(b"as is"));
    assert!(!plain.has_holes());
}

#[test]
fn a_filled_holes_length_takes_as_many_bytes_as_rfc_7541_gives_it_at_every_boundary() {
    // `{{vu}}` fills as "7": each value is `len - 1` bytes of x and then the 7.
    for len in [1, 126, 127, 128, 254, 255, 256, 16_510, 16_511, 70_000] {
        let mut encoded = Encoded::new(&Vocabulary::default());
        encoded.bytes(b"\x04");
        encoded.value(&format!("{}{{{{vu}}}}", "x".repeat(len - 1)), Framing::Literal, |_| unreachable!());
        encoded.bytes(b"\x05");
        let (mut out, mut rng) = (Vec::new(), [1, 1]);
        encoded.render(&mut fill(&mut rng), &mut out);
        // RFC 7541 §5.1, read back: a 7-bit prefix, then 7 bits a byte while the top bit is set.
        assert_eq!(out[0], 0x04);
        let (mut n, mut at) = (usize::from(out[1] & 0x7f), 2);
        if n == 0x7f {
            let mut shift = 0;
            loop {
                let b = out[at];
                at += 1;
                n += usize::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
        }
        assert_eq!(n, len, "length {len}");
        let mut value = "x".repeat(len - 1).into_bytes();
        value.push(b'7');
        assert_eq!(&out[at..at + len], value.as_slice(), "length {len}");
        assert_eq!(&out[at + len..], b"\x05", "length {len}");
    }
}

#[test]
fn a_variable_is_filled_with_the_users_value_and_an_unknown_name_is_refused() {
    let vocabulary = Vocabulary::default().with_variables(["token".to_string(), "id".to_string()]);
    let template = Template::parse(b"Bearer {{token}} for {{ id }}", &vocabulary).expect("a template");
    assert_eq!(template.variables().collect::<Vec<_>>(), [0, 1]);
    let vars = [b"t-9".to_vec(), b"42".to_vec()];
    let mut states = [1, 1];
    let mut values = Fill { vars: &vars, ..fill(&mut states) };
    let mut out = Vec::new();
    template.render(&mut values, &mut out);
    assert_eq!(out, b"Bearer t-9 for 42");
    let unknown = Template::parse(b"{{tokn}}", &vocabulary).expect_err("not a variable");
    assert!(unknown.what.contains("variables an extractor sets"), "{}", unknown.what);
}

#[test]
fn every_built_in_name_is_a_slot_the_parser_knows() {
    for name in BUILT_IN_NAMES {
        let text = if name == "random_int" { format!("{{{{{name} 1 2}}}}") } else { format!("{{{{{name}}}}}") };
        let parsed = Template::parse(text.as_bytes(), &Vocabulary::default());
        assert!(parsed.is_ok_and(|t| t.has_slots()), "{name}");
    }
}
