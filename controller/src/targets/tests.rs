use std::path::PathBuf;

use volley_engine::{MAX_BODY_BYTES, MAX_REQUESTS, RequestSpec};

use super::*;

/// A directory for one test's files.
pub(super) struct Files(tempfile::TempDir);

impl Files {
    pub(super) fn new() -> Files {
        Files(tempfile::tempdir().expect("a temporary directory"))
    }

    /// Writes `name` (under the directory, its parents made) and gives its path.
    pub(super) fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("the file's directory");
        std::fs::write(&path, bytes).expect("a test file");
        path
    }

    pub(super) fn dir(&self) -> String {
        self.0.path().display().to_string()
    }

    /// The targets file `name`, read as `--targets` reads it with `url` on the command line; an
    /// error as printed, the directory left out of its file names.
    pub(super) fn read(&self, name: &str, format: Option<Format>, url: Option<&str>) -> Result<Targets, String> {
        let url = url.map(|u| Target::parse(u).expect("a URL"));
        read(&self.0.path().join(name), format, url.as_ref())
            .map_err(|e| e.to_string().replace(&format!("{}/", self.dir()), ""))
    }
}

/// `text` as the targets file `targets.txt`, read as [`Files::read`] does.
pub(super) fn read_text(text: &str, format: Option<Format>, url: Option<&str>) -> Result<Targets, String> {
    let files = Files::new();
    files.write("targets.txt", text);
    files.read("targets.txt", format, url)
}

/// Each request as (name, method, path and query).
pub(super) fn summary(targets: &Targets) -> Vec<(String, String, String)> {
    targets.requests.iter().map(|r| (r.name.clone(), r.spec.method.clone(), r.path_and_query.clone())).collect()
}

fn request(headers: &[(&str, &str)]) -> NamedRequest {
    let headers = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    NamedRequest {
        name: "n".into(),
        path_and_query: "/".into(),
        spec: RequestSpec::new("GET", headers, Vec::new()),
        templated: false,
        checks: vec![],
        extract: vec![],
        think: None,
        cookies: false,
        follow_redirects: 0,
    }
}

fn pairs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
}

#[test]
fn the_format_is_json_lines_when_the_first_line_that_says_anything_opens_an_object() {
    assert_eq!(detect("\n# comment\n  {\"method\":\"GET\"}\n"), Format::Json);
    assert_eq!(detect("# {not this}\nGET http://a/\n"), Format::Http);
    assert_eq!(detect(""), Format::Http);
    let json = "{\"method\":\"GET\",\"url\":\"http://a/\"}\n";
    assert_eq!(summary(&read_text(json, None, None).unwrap()), [("GET /".into(), "GET".into(), "/".into())]);
    let forced = read_text(json, Some(Format::Http), None).unwrap_err();
    assert!(forced.starts_with("targets.txt:1:1: '{' cannot be in a method"), "{forced}");
}

#[test]
fn command_line_headers_go_to_every_target_unless_it_has_its_own_of_that_name() {
    let mut requests = [request(&[("accept", "text/plain")]), request(&[])];
    let extra =
        [("Accept".to_string(), "*/*".to_string()), ("Cookie".into(), "a=1".into()), ("Cookie".into(), "b=2".into())];
    add_headers(&mut requests, &extra);
    assert_eq!(pairs(&requests[0].spec.headers), [("accept", "text/plain"), ("Cookie", "a=1"), ("Cookie", "b=2")]);
    assert_eq!(pairs(&requests[1].spec.headers), [("Accept", "*/*"), ("Cookie", "a=1"), ("Cookie", "b=2")]);
}

#[test]
fn a_file_is_read_up_to_its_bound_and_refused_beyond_it() {
    assert_eq!(MAX_FILE_BYTES, 256 << 20);
    let at_bound = read_at_most(std::io::Cursor::new(vec![b'x'; 1000]), 1000).unwrap();
    assert_eq!(at_bound.map(|b| b.len()), Some(1000));
    assert_eq!(read_at_most(std::io::Cursor::new(vec![b'x'; 1001]), 1000).unwrap(), None);
    // Nothing past the bound is read: an endless file is refused too.
    assert_eq!(read_at_most(std::io::repeat(b'x'), 1000).unwrap(), None);
}

#[test]
fn a_file_that_cannot_be_read_or_lists_nothing_is_named() {
    let files = Files::new();
    let e = files.read("missing.txt", None, None).unwrap_err();
    assert_eq!(e, "--targets missing.txt: No such file or directory (os error 2)");
    files.write("empty.txt", "");
    assert_eq!(files.read("empty.txt", None, None).unwrap_err(), "--targets empty.txt: the file lists no targets");
    files.write("comments.txt", "# nothing\n\n   \n# here\n");
    assert_eq!(
        files.read("comments.txt", None, None).unwrap_err(),
        "--targets comments.txt: the file lists no targets"
    );
}

#[test]
fn text_that_is_not_utf8_is_pointed_at() {
    let files = Files::new();
    files.write("targets.txt", b"GET http://a/\nX-A: \xff\n");
    assert_eq!(files.read("targets.txt", None, None).unwrap_err(), "targets.txt:2:6: the file is not UTF-8 text");
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_first_line() {
    let targets = read_text("\u{feff}GET http://a/x\n", None, None).unwrap();
    assert_eq!(summary(&targets), [("GET /x".into(), "GET".into(), "/x".into())]);
}

#[test]
fn the_command_lines_url_gives_only_the_origin() {
    let targets = read_text("GET /x\n", None, Some("http://a:81")).unwrap();
    assert_eq!(targets.origin.to_string(), "http://a:81/");
    let e = read_text("GET /x\n", None, Some("http://a:81/api")).unwrap_err();
    assert!(e.starts_with("--targets: the URL http://a:81/api has a path;"), "{e}");
}

#[test]
fn more_targets_than_a_mix_may_list_are_refused_at_the_first_too_many() {
    let text = "GET http://a/x\n\n".repeat(MAX_REQUESTS + 1);
    let e = read_text(&text, None, None).unwrap_err();
    let line = 2 * MAX_REQUESTS + 1;
    assert_eq!(e, format!("targets.txt:{line}:1: more than the {MAX_REQUESTS} targets a run may list"));
}

#[test]
fn bodies_beyond_a_runs_limit_are_refused_at_the_body_that_passes_it() {
    let files = Files::new();
    files.write("half.bin", vec![0u8; MAX_BODY_BYTES / 2 + 1]);
    files.write("targets.txt", "POST http://a/\n@half.bin\n\nPOST http://a/\n@half.bin\n");
    let e = files.read("targets.txt", None, None).unwrap_err();
    assert_eq!(e, "targets.txt:5:1: the bodies come to more than 64 MiB, the most a run's requests may carry");
}

#[test]
fn names_given_in_the_file_are_neither_empty_nor_control_characters() {
    let e = read_text("# name:   \nGET http://a/\n", None, None).unwrap_err();
    assert_eq!(e, "targets.txt:1:11: the name is empty");
    let e = read_text("# name: a\u{1b}[2Jb\nGET http://a/\n", None, None).unwrap_err();
    assert_eq!(e, "targets.txt:1:9: the name 'a\\u{1b}[2Jb' holds control characters");
}

#[test]
fn the_example_files_in_both_formats_are_the_same_mix() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/targets");
    let http = read(&examples.join("api.http"), None, None).expect("examples/targets/api.http");
    let json = read(&examples.join("api.jsonl"), None, None).expect("examples/targets/api.jsonl");
    assert_eq!(http.origin.to_string(), "http://127.0.0.1:8080/", "volley serve's default address");
    assert_eq!(http.origin, json.origin);
    assert_eq!(http.requests, json.requests);
    // paths.http is the same mix with paths, for the command line's URL to give the origin.
    let url = Target::parse("http://127.0.0.1:8080").expect("a URL");
    let paths = read(&examples.join("paths.http"), None, Some(&url)).expect("examples/targets/paths.http");
    assert_eq!(paths.origin, http.origin);
    assert_eq!(paths.requests, http.requests);
    let names: Vec<&str> = http.requests.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["list users", "list users", "GET /users/42", "POST /users"]);
    assert_eq!(http.requests[3].spec.body, br#"{"name":"Ada","email":"ada@example.com"}"#);
}
