use super::super::Format;
use super::super::tests::{Files, read_text, summary};

fn http(text: &str) -> Result<super::super::Targets, String> {
    read_text(text, Some(Format::Http), None)
}

fn row(name: &str, method: &str, path: &str) -> (String, String, String) {
    (name.into(), method.into(), path.into())
}

#[test]
fn targets_are_a_request_line_headers_and_a_body_file_separated_by_blank_lines() {
    let files = Files::new();
    files.write("bodies/user.json", b"{\"name\":\"a\"}\r\n\x00binary");
    files.write(
        "targets.http",
        "# users, by page\n\
         GET http://127.0.0.1:8080/users?page=1\n\
         Accept: application/json\n\
         X-Time:  12:30 \n\
         \n\
         \n\
         POST http://127.0.0.1:8080/users\n\
         Content-Type: application/json\n\
         @bodies/user.json\n\
         \n\
         DELETE http://127.0.0.1:8080/users/7",
    );
    let targets = files.read("targets.http", None, None).unwrap();
    assert_eq!(targets.origin.to_string(), "http://127.0.0.1:8080/");
    assert_eq!(
        summary(&targets),
        [
            row("GET /users", "GET", "/users?page=1"),
            row("POST /users", "POST", "/users"),
            row("DELETE /users/7", "DELETE", "/users/7")
        ]
    );
    let [get, post, delete] = &targets.requests[..] else { panic!("three targets") };
    let headers = |r: &volley_engine::NamedRequest| r.spec.headers.clone();
    assert_eq!(headers(get), [("Accept".into(), "application/json".into()), ("X-Time".into(), "12:30".into())]);
    assert_eq!(post.spec.body, b"{\"name\":\"a\"}\r\n\x00binary", "a body file is sent as it is");
    assert!(get.spec.body.is_empty() && delete.spec.body.is_empty() && headers(delete).is_empty());
}

#[test]
fn a_body_file_is_found_beside_the_targets_file_unless_its_path_is_absolute() {
    let files = Files::new();
    files.write("api/body.txt", "beside");
    let absolute = files.write("elsewhere/body.txt", "absolute");
    files
        .write("api/targets.http", format!("PUT http://a/1\n@body.txt\n\nPUT http://a/2\n@ {} \n", absolute.display()));
    let targets = files.read("api/targets.http", None, None).unwrap();
    let bodies: Vec<&[u8]> = targets.requests.iter().map(|r| r.spec.body.as_slice()).collect();
    assert_eq!(bodies, [&b"beside"[..], b"absolute"]);
}

#[test]
fn a_name_comment_directly_above_a_request_line_names_it_and_no_other_comment_does() {
    let text = "# name: list\n\
                GET http://a/users?page=1\n\
                # name: not a header\n\
                Accept: */*\n\
                \n\
                # name: too far\n\
                \n\
                GET http://a/users?page=2\n\
                \n\
                # name: too far too\n\
                # an ordinary comment\n\
                GET http://a/items\n\
                \n\
                #name:list\n\
                GET http://a/users?page=3\n";
    let targets = http(text).unwrap();
    assert_eq!(
        summary(&targets),
        [
            row("list", "GET", "/users?page=1"),
            row("GET /users", "GET", "/users?page=2"),
            row("GET /items", "GET", "/items"),
            row("list", "GET", "/users?page=3"),
        ]
    );
    assert_eq!(
        targets.requests[0].spec.headers,
        [("Accept".into(), "*/*".into())],
        "a comment within a target is skipped"
    );
}

#[test]
fn paths_take_the_command_lines_origin_and_crlf_files_read_as_lf_ones() {
    let targets =
        read_text("GET /a?x=1\r\nX-A: 1\r\n\r\nHEAD /b\r\n", None, Some("https://example.com:8443/")).unwrap();
    assert_eq!(targets.origin.to_string(), "https://example.com:8443/");
    assert_eq!(summary(&targets), [row("GET /a", "GET", "/a?x=1"), row("HEAD /b", "HEAD", "/b")]);
    assert_eq!(targets.requests[0].spec.headers, [("X-A".into(), "1".into())]);
}

#[test]
fn what_is_malformed_is_pointed_at_by_line_and_column() {
    let cases = [
        ("GET\n", "1:4: expected 'METHOD URL', such as 'GET http://127.0.0.1:8080/'"),
        ("  GET http://a/ HTTP/1.1\n", "1:17: expected 'METHOD URL', such as 'GET http://127.0.0.1:8080/'"),
        ("G(T http://a/\n", "1:2: '(' cannot be in a method ('G(T')"),
        ("\n\nGET http://a:99999/\n", "3:5: invalid URL 'http://a:99999/': bad port"),
        ("GET   example.com/\n", "1:7: invalid URL 'example.com/': no scheme (http:// or https://)"),
        ("GET /x\n", "1:5: /x is a path, and there is no URL on the command line to give its origin"),
        ("GET http://a/\nAccept */*\n", "2:1: expected a header 'Name: value', a body '@FILE' or a blank line"),
        ("GET http://a/\nX A: b\n", "2:1: 'X A' is not a header name"),
        ("GET http://a/\n: b\n", "2:1: '' is not a header name"),
        ("GET http://a/\nX-A: a\rb\n", "2:6: the value of X-A holds a line break or NUL, which a header value cannot"),
        ("GET http://a/\nX-A:\0\n", "2:5: the value of X-A holds a line break or NUL, which a header value cannot"),
        ("GET http://a/\n@\n", "2:1: '@' without a file: give @PATH"),
        ("GET http://a/\n@b\nX-A: 1\n", "3:1: a target ends after its body: a blank line must come first"),
        ("GET http://a/\nGET http://a/b\n", "2:1: 'GET http' is not a header name"),
    ];
    for (text, want) in cases {
        let e = http(text).unwrap_err();
        assert_eq!(e, format!("targets.txt:{want}"), "{text:?}");
    }
}

#[test]
fn a_second_origin_is_refused_where_its_url_starts() {
    let text = "GET http://a/\n\n# name: b\nGET http://A:80/b\n\nPOST http://a/c\n\nGET http://b:81/d\n";
    assert_eq!(http(text).unwrap_err(), "targets.txt:8:5: http://b:81 is a second origin; a run has one (http://a:80)");
    let e = read_text("GET /x\n\nGET https://a/y\n", None, Some("http://a")).unwrap_err();
    assert_eq!(
        e,
        "targets.txt:3:5: https://a:443 is not the origin of the command line's URL (http://a:80); a run has one"
    );
}

#[test]
fn a_missing_body_file_is_named_where_the_target_asks_for_it() {
    let files = Files::new();
    files.write("targets.http", "GET http://a/\n\nPOST http://a/\nContent-Type: text/plain\n@missing.json\n");
    let e = files.read("targets.http", None, None).unwrap_err();
    assert_eq!(e, "targets.http:5:1: the body file missing.json: No such file or directory (os error 2)");
}

#[test]
fn a_target_has_at_most_a_hundred_headers_of_its_own() {
    let mut text = "GET http://a/\n".to_string();
    for n in 0..100 {
        text.push_str(&format!("X-{n}: v\n"));
    }
    assert_eq!(http(&text).unwrap().requests[0].spec.headers.len(), 100);
    text.push_str("X-100: v\n");
    assert_eq!(http(&text).unwrap_err(), "targets.txt:102:1: more than 100 headers in one target");
}
