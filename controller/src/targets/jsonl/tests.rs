use super::super::Format;
use super::super::tests::{read_text, summary};

fn json(text: &str) -> Result<super::super::Targets, String> {
    read_text(text, Some(Format::Json), None)
}

fn row(name: &str, method: &str, path: &str) -> (String, String, String) {
    (name.into(), method.into(), path.into())
}

#[test]
fn each_line_is_a_target_with_header_arrays_a_base64_body_and_an_optional_name() {
    let text = r#"# users
{"method":"GET","url":"http://127.0.0.1:8080/users?page=1","header":{"Accept":["application/json"],"Cookie":["a=1","b=2"],"X-Empty":[]}}

  {"url":"http://127.0.0.1:8080/users","method":"POST","body":"eyJuYW1lIjoiYSJ9","name":"create user","header":null}
{"method":"DELETE","url":"http://127.0.0.1:8080/users/7","body":""}
"#;
    let targets = json(text).unwrap();
    assert_eq!(targets.origin.to_string(), "http://127.0.0.1:8080/");
    assert_eq!(
        summary(&targets),
        [
            row("GET /users", "GET", "/users?page=1"),
            row("create user", "POST", "/users"),
            row("DELETE /users/7", "DELETE", "/users/7")
        ]
    );
    let [get, post, delete] = &targets.requests[..] else { panic!("three targets") };
    let headers: Vec<(&str, &str)> = get.spec.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(headers, [("Accept", "application/json"), ("Cookie", "a=1"), ("Cookie", "b=2")], "in the file's order");
    assert_eq!(post.spec.body, b"{\"name\":\"a\"}");
    assert!(get.spec.body.is_empty() && delete.spec.body.is_empty());
}

#[test]
fn a_header_name_written_twice_keeps_both_its_values() {
    let targets = json(r#"{"method":"GET","url":"http://a/","header":{"X":["1"],"X":["2"]}}"#).unwrap();
    assert_eq!(targets.requests[0].spec.headers, [("X".into(), "1".into()), ("X".into(), "2".into())]);
}

#[test]
fn paths_take_the_command_lines_origin() {
    let targets = read_text(r#"{"method":"GET","url":"/a?x=1"}"#, None, Some("http://[::1]:9000")).unwrap();
    assert_eq!(targets.origin.to_string(), "http://[::1]:9000/");
    assert_eq!(summary(&targets), [row("GET /a", "GET", "/a?x=1")]);
}

#[test]
fn what_is_malformed_is_pointed_at_by_line_and_column() {
    let cases = [
        // The JSON itself: serde_json's words, at its place in the file (the end of a token).
        (r#"{"method":"GET","#, "1:16: EOF while parsing a value"),
        ("\n\n   {\"method\" \"GET\"}", "3:14: expected `:`"),
        (
            r#"{"method":"GET","url":"http://a/","headers":{}}"#,
            "1:43: unknown field `headers`, expected one of `method`, `url`, `header`, `body`, `name`",
        ),
        (r#"{"url":"http://a/"}"#, "1:19: missing field `method`"),
        (r#"[]"#, "1:2: invalid length 0, expected a target: an object with a method and a url"),
        // A value: at the value.
        (r#"{"method":"GET","url":5}"#, "1:23: invalid type: integer `5`, expected a string"),
        (r#"{"method":"G T","url":"http://a/"}"#, "1:11: ' ' cannot be in a method ('G T')"),
        (r#"{"method":"GET","url":"http://a:0/"}"#, "1:23: invalid URL 'http://a:0/': bad port"),
        (
            r#"{"method":"GET","url":"/x"}"#,
            "1:23: /x is a path, and there is no URL on the command line to give its origin",
        ),
        (
            r#"{"method":"GET","url":"http://a/","body":"a$=="}"#,
            "1:42: the body is not base64 (standard alphabet, padded): Invalid symbol 36, offset 1.",
        ),
        (r#"{"method":"GET","url":"http://a/","name":""}"#, "1:42: the name is empty"),
        (
            r#"{"method":"GET","url":"http://a/","header":{"X":"v"}}"#,
            "1:51: invalid type: string \"v\", expected a sequence",
        ),
        (r#"{"method":"GET","url":"http://a/","header":{"X A":["v"]}}"#, "1:44: 'X A' is not a header name"),
        (
            r#"{"method":"GET","url":"http://a/","header":{"X":["ok","a\r\nGET /smuggled HTTP/1.1"]}}"#,
            "1:55: the value of X holds a line break or NUL, which a header value cannot",
        ),
        (
            r#"{"method":"GET","url":"http://a/","header":{"X":["\u0000"]}}"#,
            "1:50: the value of X holds a line break or NUL, which a header value cannot",
        ),
    ];
    for (text, want) in cases {
        let e = json(text).unwrap_err();
        assert_eq!(e, format!("targets.txt:{want}"), "{text}");
    }
}

#[test]
fn a_second_origin_is_refused_at_its_url() {
    let text = "{\"method\":\"GET\",\"url\":\"http://a/\"}\n{\"method\":\"GET\", \"url\": \"http://b:81/\"}\n";
    assert_eq!(
        json(text).unwrap_err(),
        "targets.txt:2:25: http://b:81 is a second origin; a run has one (http://a:80)"
    );
}

#[test]
fn a_target_has_at_most_a_hundred_headers_of_its_own() {
    let values = |n: usize| vec!["\"v\""; n].join(",");
    let line = |n: usize| format!(r#"{{"method":"GET","url":"http://a/","header":{{"X":[{}]}}}}"#, values(n));
    assert_eq!(json(&line(100)).unwrap().requests[0].spec.headers.len(), 100);
    assert_eq!(json(&line(101)).unwrap_err(), "targets.txt:1:44: more than 100 headers in one target");
}
