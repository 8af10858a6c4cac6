use super::*;
use crate::test_rng::Rng;

/// What one expected response came to: the absolute stream offset where it ended, and it.
type Outcome = Result<(usize, Response), ScanError>;

fn ok(end: usize, status: u16, close: bool) -> Outcome {
    Ok((end, Response { status, close, retry_after: None }))
}

fn asked(end: usize, status: u16, close: bool, retry_after: RetryAfter) -> Outcome {
    Ok((end, Response { status, close, retry_after: Some(retry_after) }))
}

fn malformed(why: &'static str) -> Outcome {
    Err(ScanError::Malformed(why))
}

/// Drives a scanner the way the event loop does: `pieces` arrive in order, `start` is called
/// for each of `heads` (one per request, true for HEAD), leftovers after a response are fed
/// again, and `eof` is called when the pieces run out before every response completed.
fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, heads: &[bool]) -> Vec<Outcome> {
    let mut sc = Scanner::new();
    let mut out = Vec::new();
    let mut next = 0;
    let mut offset = 0;
    let mut total = 0;
    if let Some(&h) = heads.first() {
        sc.start(h);
        next = 1;
    }
    'pieces: for piece in pieces {
        total += piece.len();
        let mut rest = piece;
        while !rest.is_empty() {
            if out.len() == heads.len() {
                break 'pieces;
            }
            match sc.feed(rest) {
                Ok((n, Some(r))) => {
                    assert!(n <= rest.len(), "consumed {n} of {}", rest.len());
                    offset += n;
                    rest = &rest[n..];
                    out.push(Ok((offset, r)));
                    assert!(!sc.in_response());
                    if let Some(&h) = heads.get(next) {
                        sc.start(h);
                        next += 1;
                    }
                }
                Ok((n, None)) => {
                    assert_eq!(n, rest.len(), "without a response everything is consumed");
                    offset += n;
                    rest = &[];
                }
                Err(e) => {
                    out.push(Err(e));
                    // Errors stick until start.
                    assert_eq!(sc.feed(b"x"), Err(e));
                    return out;
                }
            }
        }
    }
    assert!(offset <= total);
    if out.len() < heads.len() {
        match sc.eof() {
            Ok(Some(r)) => out.push(Ok((offset, r))),
            Ok(None) => panic!("eof with a response pending returned Ok(None)"),
            Err(e) => out.push(Err(e)),
        }
    }
    out
}

struct Case {
    name: &'static str,
    input: Vec<u8>,
    heads: Vec<bool>,
    expect: Vec<Outcome>,
}

fn case(name: &'static str, input: impl Into<Vec<u8>>, heads: &[bool], expect: Vec<Outcome>) -> Case {
    Case { name, input: input.into(), heads: heads.to_vec(), expect }
}

/// A single response to a GET that ends with the input.
fn whole(name: &'static str, input: &str, status: u16, close: bool) -> Case {
    case(name, input, &[false], vec![ok(input.len(), status, close)])
}

const CL: &str = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: test\r\nCache-Control: no-cache\r\n\
                      Date: Mon, 01 Jan 2024 00:00:00 GMT\r\nTrailer-ish: x\r\n\r\nhello";
const CHUNKED: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n\
                           5;name=val\r\nhello\r\n6 ; a=b;c=\"d\"\r\n world\r\n0\r\nX-Trailer: 1\r\nChecksum: 2\r\n\r\n";
const NO_CONTENT: &str = "HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n";
const HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nContent-Type: text/html\r\n\r\n";

fn long_header_case() -> Case {
    let input = format!(
        "HTTP/1.1 200 OK\r\nContent-Security-Policy: default-src {}\r\nTransfer-Encoding-Hint{}\r\n\
             Content-Length: 2\r\n\r\nok",
        "a".repeat(1000),
        "b".repeat(600)
    );
    let len = input.len();
    case("long_uninteresting_c_and_t_headers_are_stepped_over", input, &[false], vec![ok(len, 200, false)])
}

/// A response whose head is exactly `head_len` bytes (a padding header fills it out).
fn head_of_size(head_len: usize) -> String {
    let fixed = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: \r\n\r\n".len();
    format!("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: {}\r\n\r\nok", "p".repeat(head_len - fixed))
}

fn cases() -> Vec<Case> {
    let pipelined2 = format!("{CL}{CHUNKED}");
    let pipelined3 = format!("{CL}{HEAD}HTTP/1.1 100 Continue\r\n\r\n{NO_CONTENT}");
    let long_reason = format!("HTTP/1.1 200 {}\r\nContent-Length: 1\r\n\r\nx", "reason ".repeat(80));
    let long_ext =
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;{}\r\nhello\r\n0\r\n\r\n", "e".repeat(500));
    let long_framing = format!("HTTP/1.1 200 OK\r\nContent-Length:{}5\r\n\r\nhello", " ".repeat(300));
    let at_limit = head_of_size(MAX_HEADER_BYTES);
    let over_limit = head_of_size(MAX_HEADER_BYTES + 1);
    let retry_503 = "HTTP/1.1 503 Service Unavailable\r\nServer: x\r\nRetry-After: 120\r\nContent-Length: 2\r\n\r\nno";
    let retry_date = "HTTP/1.1 429 Too Many Requests\r\nretry-after:Fri, 31 Dec 1999 23:59:59 GMT\r\n\
                          Content-Length: 0\r\n\r\n";
    let retry_folded = "HTTP/1.1 503 x\r\nRETRY-AFTER: 5 \r\n 7\r\nContent-Length: 0\r\n\r\n";
    let retry_long = format!("HTTP/1.1 503 x\r\nRetry-After: {}\r\nContent-Length: 1\r\n\r\nx", "9".repeat(400));
    let retry_lookalikes = "HTTP/1.1 200 OK\r\nReferrer-Policy: no-referrer\r\nRetry-After-Not: 3\r\n\
                                Retry: 4\r\nContent-Length: 0\r\n\r\n";
    let retry_then_none = format!("{retry_503}{CL}");
    let retry_interim =
        "HTTP/1.1 103 Early Hints\r\nRetry-After: 9\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    vec![
        case(
            "retry_after_seconds",
            retry_503,
            &[false],
            vec![asked(retry_503.len(), 503, false, RetryAfter::Seconds(120))],
        ),
        case("retry_after_date", retry_date, &[false], vec![asked(retry_date.len(), 429, false, RetryAfter::Date)]),
        case(
            "retry_after_folded_is_read_not_refused",
            retry_folded,
            &[false],
            vec![asked(retry_folded.len(), 503, false, RetryAfter::Seconds(5))],
        ),
        case(
            "retry_after_too_long_to_read_still_counts",
            retry_long.clone(),
            &[false],
            vec![asked(retry_long.len(), 503, false, RetryAfter::Date)],
        ),
        whole("retry_after_lookalikes_are_stepped_over", retry_lookalikes, 200, false),
        case(
            "retry_after_belongs_to_its_own_response",
            retry_then_none.clone(),
            &[false, false],
            vec![asked(retry_503.len(), 503, false, RetryAfter::Seconds(120)), ok(retry_then_none.len(), 200, false)],
        ),
        whole("retry_after_in_an_interim_head_is_not_the_final_ones", retry_interim, 200, false),
        whole("content_length_body", CL, 200, false),
        whole("chunked_with_extensions_and_trailers", CHUNKED, 200, false),
        whole(
            "chunked_with_bare_lf",
            "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2\nok\nA\n0123456789\n0\nT: 1\n\n",
            200,
            false,
        ),
        whole("close_delimited_body_ends_at_eof", "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nuntil the end", 200, true),
        whole("close_delimited_empty_body", "HTTP/1.1 200 OK\r\n\r\n", 200, true),
        case("head_response_has_no_body", HEAD, &[true], vec![ok(HEAD.len(), 200, false)]),
        whole("no_content_204_has_no_body", NO_CONTENT, 204, false),
        whole(
            "not_modified_304_ignores_content_length",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\nETag: \"x\"\r\n\r\n",
            304,
            false,
        ),
        whole(
            "continue_100_is_skipped",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
            201,
            false,
        ),
        whole(
            "early_hints_103_headers_do_not_leak_into_final",
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: close\r\n\
                 Content-Length: 50\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
            200,
            false,
        ),
        whole(
            "several_1xx_before_final",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </b.js>\r\n\r\n\
                 HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            200,
            false,
        ),
        whole("connection_close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, true),
        whole(
            "connection_close_in_list_any_case",
            "HTTP/1.1 200 OK\r\nconnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n",
            200,
            true,
        ),
        whole(
            "connection_keep_alive_on_http11_stays_open",
            "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            200,
            false,
        ),
        whole("http10_closes_by_default", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, true),
        whole(
            "http10_keep_alive_stays_open",
            "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
            200,
            false,
        ),
        whole(
            "http10_keep_alive_and_close_closes",
            "HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
            200,
            true,
        ),
        whole("http10_close_delimited", "HTTP/1.0 200 OK\r\n\r\nbody", 200, true),
        case(
            "pipelined_two_responses",
            pipelined2.as_str(),
            &[false, false],
            vec![ok(CL.len(), 200, false), ok(CL.len() + CHUNKED.len(), 200, false)],
        ),
        case(
            "pipelined_three_responses",
            pipelined3.as_str(),
            &[false, true, false],
            vec![ok(CL.len(), 200, false), ok(CL.len() + HEAD.len(), 200, false), ok(pipelined3.len(), 204, false)],
        ),
        case(
            "bytes_after_a_response_are_not_consumed",
            format!("{CL}garbage"),
            &[false],
            vec![ok(CL.len(), 200, false)],
        ),
        whole("bare_lf_line_endings", "HTTP/1.1 200 OK\nContent-Length: 2\nX: y\n\nok", 200, false),
        whole(
            "chunked_wins_over_content_length_and_closes",
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            200,
            true,
        ),
        whole(
            "chunked_not_final_reads_until_close",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            200,
            true,
        ),
        whole(
            "chunked_final_after_other_codings",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n",
            200,
            false,
        ),
        whole(
            "identical_duplicate_content_lengths",
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3, 3\r\n\r\nabc",
            200,
            false,
        ),
        whole(
            "framing_headers_any_case_with_whitespace",
            "HTTP/1.1 200 OK\r\nCONTENT-LENGTH:\t 4 \t\r\nCoNnEcTiOn :close\r\n\r\nabcd",
            200,
            true,
        ),
        whole("zero_content_length", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, false),
        whole("status_line_without_reason", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", 404, false),
        whole("status_line_with_empty_reason", "HTTP/1.1 503 \r\nContent-Length: 0\r\n\r\n", 503, false),
        whole("unusual_status_is_reported", "HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n", 999, false),
        whole("long_reason_phrase", long_reason.as_str(), 200, false),
        whole("long_chunk_extension", long_ext.as_str(), 200, false),
        whole(
            "obs_fold_on_other_header_is_stepped_over",
            "HTTP/1.1 200 OK\r\nX-Folded: a\r\n  b\r\nContent-Length: 1\r\n\r\nz",
            200,
            false,
        ),
        long_header_case(),
        whole("header_section_exactly_at_limit", at_limit.as_str(), 200, false),
        // Malformed.
        case("bad_status_line_version", "HTTP/2 200 OK\r\n\r\n", &[false], vec![Err(BAD_STATUS)]),
        case("bad_status_line_short_code", "HTTP/1.1 20 OK\r\n\r\n", &[false], vec![Err(BAD_STATUS)]),
        case("bad_status_line_long_code", "HTTP/1.1 2000 OK\r\n\r\n", &[false], vec![Err(BAD_STATUS)]),
        case("bad_status_line_lowercase", "http/1.1 200 OK\r\n\r\n", &[false], vec![Err(BAD_STATUS)]),
        case("bad_status_line_not_http", "SSH-2.0-OpenSSH_9.6\r\n", &[false], vec![Err(BAD_STATUS)]),
        case("bad_status_line_leading_crlf", "\r\nHTTP/1.1 200 OK\r\n\r\n", &[false], vec![Err(BAD_STATUS)]),
        case("bad_status_line_no_newline", "\x16\x03\x01\x00\x02\x02\x46", &[false], vec![Err(BAD_STATUS)]),
        case(
            "non_numeric_content_length",
            "HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n",
            &[false],
            vec![malformed("bad Content-Length")],
        ),
        case(
            "negative_content_length",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            &[false],
            vec![malformed("bad Content-Length")],
        ),
        case(
            "overflowing_content_length",
            "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
            &[false],
            vec![malformed("bad Content-Length")],
        ),
        case(
            "conflicting_content_lengths",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            &[false],
            vec![malformed("conflicting Content-Length values")],
        ),
        case(
            "conflicting_content_length_list",
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!",
            &[false],
            vec![malformed("conflicting Content-Length values")],
        ),
        case(
            "bad_chunk_size_not_hex",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            &[false],
            vec![Err(BAD_CHUNK)],
        ),
        case(
            "bad_chunk_size_17_digits",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000001\r\nx\r\n0\r\n\r\n",
            &[false],
            vec![Err(BAD_CHUNK)],
        ),
        case(
            "bad_chunk_size_trailing_junk",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n",
            &[false],
            vec![Err(BAD_CHUNK)],
        ),
        case(
            "bad_chunk_size_empty",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            &[false],
            vec![Err(BAD_CHUNK)],
        ),
        case(
            "chunk_data_without_crlf",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n",
            &[false],
            vec![malformed("chunk data not followed by CRLF")],
        ),
        case(
            "header_section_over_limit",
            over_limit.as_str(),
            &[false],
            vec![Err(ScanError::HeadersTooLarge(MAX_HEADER_BYTES))],
        ),
        case("framing_header_line_too_long", long_framing, &[false], vec![malformed("framing header line too long")]),
        case(
            "switching_protocols_101",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            &[false],
            vec![malformed("101 Switching Protocols without an upgrade request")],
        ),
        case(
            "bare_cr_in_header_section",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\rX\r\n\r\n",
            &[false],
            vec![malformed("bare CR in the header section")],
        ),
        case(
            "obs_fold_in_framing_header",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n 6\r\n\r\nhello!",
            &[false],
            vec![malformed("obs-fold in a framing header")],
        ),
        case(
            "transfer_encoding_in_http10",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            &[false],
            vec![malformed("Transfer-Encoding in an HTTP/1.0 response")],
        ),
        case("truncated_no_bytes", "", &[false], vec![Err(ScanError::Truncated)]),
        case("truncated_mid_status_line", "HTTP/1.1 20", &[false], vec![Err(ScanError::Truncated)]),
        case(
            "truncated_mid_headers",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServ",
            &[false],
            vec![Err(ScanError::Truncated)],
        ),
        case(
            "truncated_mid_body",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
            &[false],
            vec![Err(ScanError::Truncated)],
        ),
        case(
            "truncated_mid_chunk",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            &[false],
            vec![Err(ScanError::Truncated)],
        ),
        case(
            "truncated_before_last_chunk",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            &[false],
            vec![Err(ScanError::Truncated)],
        ),
        case(
            "truncated_mid_trailers",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n",
            &[false],
            vec![Err(ScanError::Truncated)],
        ),
        case(
            "truncated_after_100_continue",
            "HTTP/1.1 100 Continue\r\n\r\n",
            &[false],
            vec![Err(ScanError::Truncated)],
        ),
        case(
            "truncated_second_pipelined_response",
            format!("{CL}HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe"),
            &[false, false],
            vec![ok(CL.len(), 200, false), Err(ScanError::Truncated)],
        ),
    ]
}

fn check(name: &str) {
    let c = cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name}"));
    assert_eq!(drive([c.input.as_slice()], &c.heads), c.expect, "{name}");
}

/// Every boundary for short inputs; a spread of them (and every one near the end) for long.
fn boundaries(len: usize) -> Vec<usize> {
    if len <= 4096 {
        return (0..=len).collect();
    }
    let mut v: Vec<usize> = (0..=len).step_by(97).collect();
    v.extend(len.saturating_sub(300)..=len);
    v.extend(0..300);
    v
}

#[test]
fn content_length_body() {
    check("content_length_body");
}

#[test]
fn chunked_with_extensions_and_trailers() {
    check("chunked_with_extensions_and_trailers");
    check("chunked_with_bare_lf");
    check("long_chunk_extension");
}

#[test]
fn close_delimited_body_ends_at_eof() {
    check("close_delimited_body_ends_at_eof");
    check("close_delimited_empty_body");
    check("http10_close_delimited");
}

#[test]
fn head_response_has_no_body() {
    check("head_response_has_no_body");
}

#[test]
fn no_content_204_has_no_body() {
    check("no_content_204_has_no_body");
}

#[test]
fn not_modified_304_ignores_content_length() {
    check("not_modified_304_ignores_content_length");
}

#[test]
fn informational_1xx_are_skipped() {
    check("continue_100_is_skipped");
    check("early_hints_103_headers_do_not_leak_into_final");
    check("several_1xx_before_final");
}

#[test]
fn connection_close_is_reported() {
    check("connection_close");
    check("connection_close_in_list_any_case");
    check("connection_keep_alive_on_http11_stays_open");
}

#[test]
fn http10_closes_unless_keep_alive() {
    check("http10_closes_by_default");
    check("http10_keep_alive_stays_open");
    check("http10_keep_alive_and_close_closes");
}

#[test]
fn pipelined_responses_back_to_back() {
    check("pipelined_two_responses");
    check("pipelined_three_responses");
    check("bytes_after_a_response_are_not_consumed");
}

#[test]
fn bare_lf_line_endings() {
    check("bare_lf_line_endings");
}

#[test]
fn transfer_encoding_framing() {
    check("chunked_wins_over_content_length_and_closes");
    check("chunked_not_final_reads_until_close");
    check("chunked_final_after_other_codings");
}

#[test]
fn framing_headers_read_leniently() {
    check("identical_duplicate_content_lengths");
    check("framing_headers_any_case_with_whitespace");
    check("zero_content_length");
    check("obs_fold_on_other_header_is_stepped_over");
}

#[test]
fn status_line_variants() {
    check("status_line_without_reason");
    check("status_line_with_empty_reason");
    check("unusual_status_is_reported");
    check("long_reason_phrase");
}

#[test]
fn long_uninteresting_headers_are_stepped_over() {
    check("long_uninteresting_c_and_t_headers_are_stepped_over");
}

#[test]
fn bad_status_line_is_malformed() {
    for name in [
        "bad_status_line_version",
        "bad_status_line_short_code",
        "bad_status_line_long_code",
        "bad_status_line_lowercase",
        "bad_status_line_not_http",
        "bad_status_line_leading_crlf",
        "bad_status_line_no_newline",
    ] {
        check(name);
    }
    for line in [
        "HTTP/1.1 099 Low",
        "HTTP/1.1 2OO OK",
        "HTTP/1.1  200 OK",
        "HTTP/1.1 200\rOK",
        "HTTP/1.1\t200 OK",
        "HTTP/1. 200 OK",
        "HTTP/1.1",
        "",
    ] {
        let input = format!("{line}\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(drive([input.as_bytes()], &[false]), vec![Err(BAD_STATUS)], "{line:?}");
    }
}

#[test]
fn bad_content_length_is_malformed() {
    check("non_numeric_content_length");
    check("negative_content_length");
    check("overflowing_content_length");
    for value in ["", "+5", "0x10", "5 5", "5,", ",5", "1e3"] {
        let input = format!("HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n");
        assert_eq!(drive([input.as_bytes()], &[false]), vec![malformed("bad Content-Length")], "{value:?}");
    }
}

#[test]
fn conflicting_content_lengths_are_malformed() {
    check("conflicting_content_lengths");
    check("conflicting_content_length_list");
}

#[test]
fn bad_content_length_is_ignored_under_transfer_encoding() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_eq!(drive([&input[..]], &[false]), vec![ok(input.len(), 200, true)]);
}

#[test]
fn bad_chunk_size_is_malformed() {
    check("bad_chunk_size_not_hex");
    check("bad_chunk_size_17_digits");
    check("bad_chunk_size_trailing_junk");
    check("bad_chunk_size_empty");
    check("chunk_data_without_crlf");
    // Sixteen digits is the most allowed and fits a u64.
    assert_eq!(parse_chunk_size(b"ffffffffffffffff", true), Ok(u64::MAX));
    assert_eq!(parse_chunk_size(b"0000000000000010;x", true), Ok(16));
    assert_eq!(parse_chunk_size(b"ffffffffffffffff0", true), Err(BAD_CHUNK));
    assert_eq!(parse_chunk_size(b"-5", true), Err(BAD_CHUNK));
}

#[test]
fn oversized_header_section() {
    check("header_section_exactly_at_limit");
    check("header_section_over_limit");
    check("framing_header_line_too_long");
}

#[test]
fn truncated_response_at_eof() {
    for name in [
        "truncated_no_bytes",
        "truncated_mid_status_line",
        "truncated_mid_headers",
        "truncated_mid_body",
        "truncated_mid_chunk",
        "truncated_before_last_chunk",
        "truncated_mid_trailers",
        "truncated_after_100_continue",
        "truncated_second_pipelined_response",
    ] {
        check(name);
    }
}

#[test]
fn retry_after_is_read_in_every_form_and_only_for_its_own_response() {
    for name in [
        "retry_after_seconds",
        "retry_after_date",
        "retry_after_folded_is_read_not_refused",
        "retry_after_too_long_to_read_still_counts",
        "retry_after_lookalikes_are_stepped_over",
        "retry_after_belongs_to_its_own_response",
        "retry_after_in_an_interim_head_is_not_the_final_ones",
    ] {
        check(name);
    }
}

#[test]
fn switching_protocols_101_is_malformed() {
    check("switching_protocols_101");
}

#[test]
fn other_malformed_heads() {
    check("bare_cr_in_header_section");
    check("obs_fold_in_framing_header");
    check("transfer_encoding_in_http10");
}

#[test]
fn every_case_is_checked_by_a_named_test() {
    // Keeps the table and the named tests above from drifting apart.
    let src = include_str!("tests.rs");
    for c in cases() {
        assert!(src.matches(&format!("\"{}\"", c.name)).count() >= 2, "{} is not checked", c.name);
    }
}

#[test]
fn every_case_split_at_every_boundary_matches_whole() {
    for c in cases() {
        let whole = drive([c.input.as_slice()], &c.heads);
        assert_eq!(whole, c.expect, "{}", c.name);
        for k in boundaries(c.input.len()) {
            let (a, b) = c.input.split_at(k);
            assert_eq!(drive([a, b], &c.heads), whole, "{} split at {k}", c.name);
        }
    }
}

#[test]
fn every_case_fed_one_byte_at_a_time_matches_whole() {
    for c in cases() {
        let whole = drive([c.input.as_slice()], &c.heads);
        assert_eq!(drive(c.input.chunks(1), &c.heads), whole, "{}", c.name);
    }
}

#[test]
fn lifecycle_in_response_eof_and_restart() {
    let mut sc = Scanner::default();
    assert!(!sc.in_response());
    assert_eq!(sc.feed(b""), Ok((0, None)));
    assert!(!sc.in_response());
    assert_eq!(sc.feed(b"HTTP/1.1 100 Continue\r\n\r\n"), Ok((25, None)));
    assert!(sc.in_response(), "an interim response starts the exchange");
    assert_eq!(sc.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n"), Ok((38, None)));
    assert!(sc.in_response());
    assert_eq!(sc.feed(b"xHTTP"), Ok((1, Some(Response { status: 200, close: false, retry_after: None }))));
    assert!(!sc.in_response());
    // Complete: nothing more is consumed until start, and a close now is not a truncation.
    assert_eq!(sc.feed(b"HTTP"), Ok((0, None)));
    assert_eq!(sc.eof(), Ok(None));

    sc.start(false);
    assert!(!sc.in_response());
    assert_eq!(sc.eof(), Err(ScanError::Truncated));
    assert!(!sc.in_response(), "no byte of a response was seen");

    sc.start(false);
    assert_eq!(sc.feed(b"HTTP/1.1 200 OK\r\n\r\nsome"), Ok((23, None)));
    assert_eq!(sc.eof(), Ok(Some(Response { status: 200, close: true, retry_after: None })));
    assert_eq!(sc.eof(), Ok(None));

    sc.start(true);
    assert_eq!(sc.feed(b"nonsense\r\n"), Err(BAD_STATUS));
    assert!(sc.in_response());
    assert_eq!(sc.feed(b"HTTP/1.1 200 OK\r\n\r\n"), Err(BAD_STATUS), "errors stick");
    assert_eq!(sc.eof(), Err(BAD_STATUS));
    sc.start(true);
    assert_eq!(
        sc.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"),
        Ok((38, Some(Response { status: 200, close: false, retry_after: None })))
    );
}

#[test]
fn eof_truncation_leaves_scanner_failed() {
    let mut sc = Scanner::new();
    assert_eq!(sc.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"), Ok((40, None)));
    assert_eq!(sc.eof(), Err(ScanError::Truncated));
    assert_eq!(sc.feed(b"cde"), Err(ScanError::Truncated));
}

#[test]
fn huge_content_length_is_counted_not_buffered() {
    let mut sc = Scanner::new();
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n";
    assert_eq!(sc.feed(head), Ok((head.len(), None)));
    let block = [0u8; 4096];
    for _ in 0..100 {
        assert_eq!(sc.feed(&block), Ok((block.len(), None)));
    }
    assert_eq!(sc.eof(), Err(ScanError::Truncated));
}

/// Pieces of HTTP likely to take the scanner deep into its states when strung together.
const TOKENS: &[&str] = &[
    "HTTP/1.1 200 OK\r\n",
    "HTTP/1.0 200 OK\n",
    "HTTP/1.1 100 Continue\r\n\r\n",
    "HTTP/1.1 204 \r\n",
    "HTTP/1.1 ",
    "Content-Length: ",
    "content-length:",
    "Transfer-Encoding: chunked\r\n",
    "Transfer-Encoding: ",
    "Connection: close\r\n",
    "Connection: keep-alive\r\n",
    "Cache-Control: x\r\n",
    "T",
    "c",
    "chunked",
    "\r\n",
    "\n",
    "\r",
    ":",
    ";",
    ",",
    " ",
    "\t",
    "0",
    "5",
    "12",
    "ffffffffffffffff",
    "hello",
    "\r\n\r\n",
    "0\r\n\r\n",
];

fn random_input(rng: &mut Rng, corpus: &[Case]) -> Vec<u8> {
    match rng.below(3) {
        0 => (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
        1 => {
            let mut v = Vec::new();
            // Mostly start like a response, so the heads and bodies get exercised too.
            if rng.below(4) != 0 {
                v.extend_from_slice(TOKENS[rng.below(4)].as_bytes());
            }
            for _ in 0..rng.below(40) {
                if rng.below(8) == 0 {
                    v.push(rng.next() as u8);
                } else {
                    v.extend_from_slice(TOKENS[rng.below(TOKENS.len())].as_bytes());
                }
            }
            v
        }
        _ => {
            let mut v = corpus[rng.below(corpus.len())].input.clone();
            for _ in 0..=rng.below(4) {
                let at = rng.below(v.len() + 1);
                match rng.below(5) {
                    0 if at < v.len() => v[at] = rng.next() as u8,
                    1 if at < v.len() => {
                        v.remove(at);
                    }
                    2 => v.insert(at, b"\r\n:;0 ,"[rng.below(7)]),
                    3 => v.truncate(at),
                    _ => {
                        let end = (at + rng.below(16)).min(v.len());
                        let dup = v[at..end].to_vec();
                        v.splice(at..at, dup);
                    }
                }
            }
            v
        }
    }
}

fn random_pieces<'a>(rng: &mut Rng, input: &'a [u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let cap = if rng.below(2) == 0 { 8 } else { 300 };
        let n = 1 + rng.below(rest.len().min(cap));
        let (a, b) = rest.split_at(n);
        pieces.push(a);
        rest = b;
    }
    pieces
}

#[test]
fn fuzz_random_inputs_in_random_splits_never_panic_and_agree() {
    let corpus: Vec<Case> = cases().into_iter().filter(|c| c.input.len() < 4096).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..30_000 {
        let input = random_input(&mut rng, &corpus);
        let heads: Vec<bool> = (0..3).map(|_| rng.below(4) == 0).collect();
        // `drive` asserts consumed never exceeds what was fed.
        let whole = drive([input.as_slice()], &heads);
        for _ in 0..3 {
            let pieces = random_pieces(&mut rng, &input);
            assert_eq!(drive(pieces, &heads), whole, "input {:?}", String::from_utf8_lossy(&input));
        }
        if let Some(Ok((end, _))) = whole.last() {
            assert!(*end <= input.len());
        }
    }
}
