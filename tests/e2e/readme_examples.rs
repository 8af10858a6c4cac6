//! End to end: every example in README.md still runs. Every line of a fenced code block that
//! starts with `$ volley ` is split as a shell would split it (quotes, and a `# comment` dropped)
//! and run for real with the built binary, so the README cannot drift from the binary: a renamed
//! or removed flag, a changed default or a usage error fails here, naming the README line. Load
//! examples run against a live server of the URL's kind started for that example alone (a hyper
//! server for `http://`: HTTP/1.1 and h2c; `volley_serve` with a test CA for `https://`: HTTP/1.1
//! and HTTP/2 by ALPN, HTTP/3 on UDP), must exit 0 with requests ok, no errors, the protocol the
//! flags ask for, the same count in the text report and in its JSON twin, and every request the
//! server counted in the report (equal to ok + errors when nothing was in flight at the end;
//! `-n` runs send exactly `-n`, 200 by default). `volley serve` examples run as a child process
//! that must answer a `volley -n 10` run (`--http3 -k` for `--http3`) and stop on Ctrl-C. Only
//! what cannot run here as written is rewritten, each rule in [`REWRITES`]: the URL's port (and a
//! host other than localhost or 127.0.0.1) becomes the live server's, `-z` over 3 s becomes
//! `-z 1s`, `-d @FILE` reads a temp file holding `{"a":1}`, `--cacert ca.pem` names the test CA,
//! `volley serve --listen` gets a free port; and every load run gets `-o json:FILE` appended, so
//! that the text report stays what the README shows and the same run's JSON is checked too. An
//! example that cannot run here at all is not rewritten into one that can: it is listed in
//! [`SKIPPED`] with why (none is, today).

use crate::support;

use std::net::{SocketAddr, UdpSocket};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use support::{
    Behavior, TestCert, TestServer, WorkerProcess, assert_valid_report, describe_output, number, run_volley,
    send_signal, volley_command, wait_until,
};
use volley_serve::{ServeConfig, Server};

/// The `$ volley ` lines README.md has today. The test fails below this, so that it cannot pass
/// by finding no examples (a changed prompt or fence); raise it when the README gains examples.
const MIN_EXAMPLES: usize = 14;

/// README examples that cannot run on this machine, by the command as written (after `$ `, before
/// its comment), with why. The test does not run them, and fails if one of them is no longer in
/// the README, so that an entry goes when its line is fixed.
const SKIPPED: &[(&str, &str)] = &[];

/// Longest a `-z` may stay as written; longer ones become [`SHORT_DURATION`].
const LONGEST_DURATION_SECS: f64 = 3.0;
const SHORT_DURATION: &str = "1s";

/// What `-d @FILE` reads instead of the README's file.
const BODY: &str = r#"{"a":1}"#;

/// What one example's rewrites need: where the live server is, and the test's own files.
struct Env {
    /// The port of the server started for this example (none for `volley serve` examples).
    port: Option<u16>,
    /// The CA that signed the TLS server's certificate, as a file.
    ca: PathBuf,
    /// A file holding [`BODY`].
    body: PathBuf,
    /// A free address (TCP and UDP) for `volley serve --listen`.
    listen: SocketAddr,
}

/// One rewrite: `apply` gets an argument and the one before it, and returns what to run instead,
/// or `None` when the rule does not apply to it.
struct Rewrite {
    name: &'static str,
    apply: fn(prev: &str, arg: &str, env: &Env) -> Option<String>,
}

/// Every change made to a README example before it runs; nothing else is changed. The rules are
/// tried in order on each argument and the first that applies wins.
const REWRITES: &[Rewrite] = &[
    // The README's addresses (127.0.0.1:8080, localhost:8443, 127.0.0.1:18081) are nobody's on
    // this machine: the port becomes the port of the server started for this example, which the
    // scheme chose. Scheme and path stay, and so does a loopback host as written (`localhost`
    // matters: it is the name `--cacert` checks the certificate against); any other host would
    // become 127.0.0.1, where the servers listen.
    Rewrite { name: "the URL's port → the live server's", apply: |_, arg, env| rewrite_url(arg, env) },
    // Runs of 10 s and 30 s would make the test slow for nothing a second does not show; 3 s
    // (the Output example) and less run as written.
    Rewrite {
        name: "-z over 3s → -z 1s",
        apply: |prev, arg, _| {
            let long = matches!(prev, "-z" | "--duration")
                && seconds(arg).unwrap_or_else(|| panic!("-z {arg}: not a duration this test reads"))
                    > LONGEST_DURATION_SECS;
            long.then(|| SHORT_DURATION.to_string())
        },
    },
    // The README's body.json is not in the repository: a temp file holding {"a":1} instead.
    // (`@-`, stdin, would stay; the runs' stdin is closed.)
    Rewrite {
        name: "-d @FILE → a temp file holding {\"a\":1}",
        apply: |prev, arg, env| {
            (matches!(prev, "-d" | "--data") && arg.starts_with('@') && arg != "@-")
                .then(|| format!("@{}", env.body.display()))
        },
    },
    // The README's ca.pem is the reader's own CA: the test CA that signed the TLS server's
    // certificate instead.
    Rewrite {
        name: "--cacert FILE → the test CA",
        apply: |prev, _, env| (prev == "--cacert").then(|| env.ca.display().to_string()),
    },
    // 127.0.0.1:8080 and :8443 may be taken on this machine (or by another test): a port free
    // for TCP and UDP instead.
    Rewrite {
        name: "volley serve --listen ADDR → 127.0.0.1:a free port",
        apply: |prev, _, env| (prev == "--listen").then(|| env.listen.to_string()),
    },
];

/// Appended to every load run: the same run's report as JSON, while stdout keeps the text report
/// the README shows.
const JSON_COPY: &str = "-o json:FILE";

/// A `$ volley ` line of README.md.
struct Example {
    /// 1-based line number in README.md.
    line: usize,
    /// The line as written.
    text: String,
    /// The command: the line without `$ ` and its comment, trimmed.
    command: String,
    /// Its arguments after `volley`, split as a shell would.
    args: Vec<String>,
}

impl Example {
    fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|a| a == flag)
    }

    /// The value after `flag`, if the example gives one.
    fn value(&self, flag: &str) -> Option<&str> {
        self.args.windows(2).find(|w| w[0] == flag).map(|w| w[1].as_str())
    }
}

/// Every `$ volley ` line inside a fenced code block of README.md.
fn readme_examples() -> Vec<Example> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut in_fence = false;
    let mut examples = Vec::new();
    for (i, text) in readme.lines().enumerate() {
        if text.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let Some(command) = text.strip_prefix("$ ").filter(|c| in_fence && c.starts_with("volley ")) else {
            continue;
        };
        let words = shell_words(command).unwrap_or_else(|e| panic!("README.md:{}: `{text}`: {e}", i + 1));
        let command = command.split(" #").next().unwrap_or(command).trim().to_string();
        examples.push(Example { line: i + 1, text: text.to_string(), command, args: words[1..].to_vec() });
    }
    examples
}

/// Splits `line` into words as sh does, for what README examples use: blanks separate words,
/// `'...'` is literal, `"..."` is literal but for `\"`, `\\`, `\$` and `` \` ``, a backslash
/// outside quotes escapes the next character, and an unquoted `#` starting a word begins a
/// comment that runs to the end of the line. No expansions (`$X`, globs, `~`).
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.extend(word.take()),
            '#' if word.is_none() => break,
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => w.extend(['\\', c]),
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("a backslash at the end of the line (continued lines are not read)".into()),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// `10s`, `1m30s`, `500ms`, `2h` in seconds.
fn seconds(duration: &str) -> Option<f64> {
    let (mut total, mut rest) = (0.0, duration);
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        total += value
            * match &rest[..unit] {
                "ms" => 0.001,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return None,
            };
        rest = &rest[unit..];
    }
    Some(total)
}

/// `scheme://HOST:PORT/path` with the live server's port, a host other than localhost and
/// 127.0.0.1 made 127.0.0.1; `None` for an argument that is no URL.
fn rewrite_url(arg: &str, env: &Env) -> Option<String> {
    let (scheme, rest) = arg.split_once("://").filter(|(s, _)| matches!(*s, "http" | "https"))?;
    let port = env.port.expect("a URL in an example that has no server");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
    let host = if matches!(host, "localhost" | "127.0.0.1") { host } else { "127.0.0.1" };
    Some(format!("{scheme}://{host}:{port}{path}"))
}

/// `args` as one line a shell would split back into them (for messages).
fn shown(args: &[String]) -> String {
    let quote = |a: &String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:@=,+%".contains(c)) {
            a.clone()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    args.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// `args` with every rewrite applied, and the names of the rules that changed something.
fn rewrite(args: &[String], env: &Env) -> (Vec<String>, Vec<&'static str>) {
    let mut applied = Vec::new();
    let mut out = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let prev = if i == 0 { "" } else { args[i - 1].as_str() };
        match REWRITES.iter().find_map(|rule| (rule.apply)(prev, arg, env).map(|new| (rule.name, new))) {
            Some((name, new)) if new != *arg => {
                applied.push(name);
                out.push(new);
            }
            _ => out.push(arg.clone()),
        }
    }
    (out, applied)
}

/// A port free for both TCP and UDP on 127.0.0.1 a moment ago (`volley serve --http3` binds both).
fn free_tcp_and_udp_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = tcp.local_addr().expect("local_addr").port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The server a load example runs against, by its URL's scheme.
enum Target {
    /// `http://`: hyper in the test (HTTP/1.1, h2c by prior knowledge), counting request heads
    /// received and remembering what the last request carried.
    Plain(TestServer),
    /// `https://`: volley's own server with a test CA's certificate (for `localhost` and
    /// 127.0.0.1), HTTP/1.1 and HTTP/2 by ALPN on TCP and HTTP/3 on UDP at the same port,
    /// counting the requests it answered over every protocol.
    Tls(Server, TestCert),
}

impl Target {
    fn start(scheme: &str) -> Target {
        match scheme {
            "http" => Target::Plain(TestServer::start(Behavior::ok(14))),
            "https" => {
                let cert = TestCert::generate();
                // The UDP socket takes the TCP listener's port, which may be someone's already.
                for _ in 0..10 {
                    let config = ServeConfig {
                        addr: ([127, 0, 0, 1], 0).into(),
                        tls: Some(cert.serve_tls()),
                        http3: true,
                        ..ServeConfig::default()
                    };
                    if let Ok(server) = Server::start(config) {
                        return Target::Tls(server, cert);
                    }
                }
                panic!("volley_serve with TLS and HTTP/3 did not start in 10 tries");
            }
            other => panic!("no server for a {other}:// URL"),
        }
    }

    fn port(&self) -> u16 {
        match self {
            Target::Plain(server) => server.addr().port(),
            Target::Tls(server, _) => server.local_addr().port(),
        }
    }

    /// The requests the server counted so far.
    fn requests(&self) -> u64 {
        match self {
            Target::Plain(server) => server.requests(),
            Target::Tls(server, _) => server.requests(),
        }
    }
}

/// The protocol the report must name for these flags.
fn protocol(example: &Example) -> &'static str {
    if example.has("--http3") {
        "HTTP/3"
    } else if example.has("--http2") {
        "HTTP/2"
    } else {
        "HTTP/1.1"
    }
}

/// Runs `args` (a load run) with [`JSON_COPY`] appended and checks it: exit 0, the protocol
/// `expect_protocol`, ok requests and no errors, the same ok count in the text report and the
/// JSON one. Returns the JSON report.
fn run_and_check(args: &[String], dir: &Path, expect_protocol: &str) -> serde_json::Value {
    let json = dir.join("report.json");
    let _ = std::fs::remove_file(&json);
    let mut args = args.to_vec();
    args.extend(["-o".to_string(), format!("json:{}", json.display())]);
    // run_volley kills a run still going after support::VOLLEY_TIMEOUT (60 s) and fails.
    let out = run_volley(&args);
    let context = || format!("volley {}\n{}", shown(&args), describe_output(&out));
    assert!(out.status.success(), "exited with {}: {}", out.status, context());
    let text = String::from_utf8_lossy(&out.stdout);
    let text_ok = text_ok_count(&out).unwrap_or_else(|| panic!("no `Requests: N (N ok, ...` line: {}", context()));
    let named = text.lines().find_map(|l| l.strip_prefix("Protocol:")).map(|p| p.trim_start().split(',').next());
    assert_eq!(named.flatten(), Some(expect_protocol), "not {expect_protocol}: {}", context());

    let written = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{}: {e}: {}", json.display(), context()));
    let r: serde_json::Value = serde_json::from_str(&written).unwrap_or_else(|e| panic!("{e}: {}", context()));
    assert_valid_report(&r);
    let ok = number(&r, "/requests/ok");
    assert!(ok > 0, "no request ok: {}", context());
    assert_eq!(number(&r, "/requests/errors"), 0, "errors: {}", context());
    assert_eq!(number(&r, "/statusCodes/200"), ok, "{r}");
    assert_eq!(text_ok, ok, "the text report says {text_ok} ok, its JSON {ok}: {}", context());
    assert_eq!(r["protocol"], expect_protocol, "{r}");
    r
}

/// N in the text report's `Requests:     T (N ok, ...` line.
fn text_ok_count(out: &Output) -> Option<u64> {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("Requests:"))?;
    line.split_once('(')?.1.split_once(" ok")?.0.parse().ok()
}

/// Runs a load example (`volley [FLAGS] URL`) against a live server of its URL's kind.
fn run_load_example(example: &Example) {
    let urls: Vec<&String> = example.args.iter().filter(|a| a.contains("://")).collect();
    assert_eq!(urls.len(), 1, "expected one URL in {:?}", example.args);
    let scheme = urls[0].split_once("://").unwrap().0;
    let target = Target::start(scheme);
    let dir = tempfile::tempdir().expect("a temp dir");
    let body = dir.path().join("body.json");
    std::fs::write(&body, BODY).unwrap();
    let ca = match &target {
        Target::Tls(_, cert) => cert.write_ca(dir.path()),
        Target::Plain(_) => dir.path().join("no-ca.pem"),
    };
    let env = Env { port: Some(target.port()), ca, body, listen: ([127, 0, 0, 1], 0).into() };
    let (args, applied) = rewrite(&example.args, &env);
    eprintln!(
        "README.md:{}: {}\n  ran as: volley {} {JSON_COPY}\n  rewrites: {applied:?}",
        example.line,
        example.text,
        shown(&args)
    );

    let r = run_and_check(&args, dir.path(), protocol(example));
    let (ok, errors, aborted) =
        (number(&r, "/requests/ok"), number(&r, "/requests/errors"), number(&r, "/requests/aborted"));
    // Every request the server counted is in the report: answered ones as ok (or errors), and
    // those in flight when a timed run stopped as aborted (one may have reached the server).
    let seen = target.requests();
    assert!(
        (ok + errors..=ok + errors + aborted).contains(&seen),
        "the server counted {seen} requests, the report {ok} ok + {errors} errors (+ {aborted} aborted): {r}"
    );
    if example.value("-z").is_none() && example.value("--duration").is_none() {
        // -n sends exactly N, 200 when not given; with a scenario file, N iterations.
        let n = example.value("-n").or(example.value("--requests")).map_or(200, |n| n.parse().unwrap());
        let counted = if example.has("--scenario") { "/iterations" } else { "/requests/total" };
        assert_eq!(number(&r, counted), n, "{r}");
        assert_eq!(aborted, 0, "{r}");
    }
    if let Target::Plain(server) = &target {
        // What the example asks to send is what the server received.
        let seen = server.last_request().expect("a request");
        let data = example.has("-d") || example.has("--data");
        let method = example.value("-m").or(example.value("--method")).unwrap_or(if data { "POST" } else { "GET" });
        let methods = match (example.value("--targets"), example.value("--scenario")) {
            // A targets file's requests: its methods, and each of its names in the report.
            (Some(file), _) => {
                let names = r["names"].as_array().map_or(0, Vec::len);
                assert!(names > 0, "a targets run without names: {r}");
                targets_methods(file)
            }
            // A scenario file's steps: likewise.
            (None, Some(file)) => {
                let names = r["names"].as_array().map_or(0, Vec::len);
                assert!(names > 0, "a scenario run without names: {r}");
                scenario_methods(file)
            }
            (None, None) => vec![method.to_string()],
        };
        assert_eq!(server.methods().keys().cloned().collect::<Vec<_>>(), methods, "methods received");
        if data {
            assert_eq!(String::from_utf8_lossy(&seen.body), BODY, "the body received");
        }
        for w in example.args.windows(2).filter(|w| w[0] == "-H" || w[0] == "--header") {
            let (name, value) = w[1].split_once(':').expect("-H NAME: VALUE");
            assert_eq!(seen.header(name), Some(value.trim()), "header {name} received: {:?}", seen.headers);
        }
        if example.has("--disable-keepalive") {
            assert_eq!(server.connections(), ok + errors, "not a connection per request: {r}");
        }
    }
}

/// Runs a `volley serve` example as a child process, checks that it answers `volley -n 10`
/// (`--http3 -k` for `--http3`, whose certificate is self-signed) and that Ctrl-C stops it.
fn run_serve_example(example: &Example) {
    let listen: SocketAddr = ([127, 0, 0, 1], free_tcp_and_udp_port()).into();
    let env = Env { port: None, ca: PathBuf::new(), body: PathBuf::new(), listen };
    let (args, applied) = rewrite(&example.args, &env);
    assert!(example.has("--listen"), "a `volley serve` example without --listen would take port 8080");
    eprintln!(
        "README.md:{}: {}\n  ran as: volley {}\n  rewrites: {applied:?}",
        example.line,
        example.text,
        shown(&args)
    );
    let mut serve = WorkerProcess::spawn(volley_command(&args), listen, None)
        .unwrap_or_else(|e| panic!("volley {} did not start: {e}", shown(&args)));
    // Listening on TCP comes a moment before the UDP socket; the line on stderr comes after both.
    assert!(
        wait_until(Duration::from_secs(10), || serve.log().contains("listening on")),
        "no `listening on` line: {}",
        serve.log()
    );
    let http3 = example.has("--http3");
    let url = format!("{}://{listen}/", if http3 { "https" } else { "http" });
    let mut check: Vec<String> = ["-n", "10"].map(String::from).to_vec();
    if http3 {
        check.extend(["--http3", "-k"].map(String::from));
    }
    check.push(url);
    eprintln!("  checked with: volley {} {JSON_COPY}", shown(&check));
    let dir = tempfile::tempdir().expect("a temp dir");
    let r = run_and_check(&check, dir.path(), if http3 { "HTTP/3" } else { "HTTP/1.1" });
    assert_eq!(number(&r, "/requests/ok"), 10, "{r}");

    send_signal(serve.pid(), libc::SIGINT);
    assert!(wait_until(Duration::from_secs(10), || !serve.is_running()), "Ctrl-C did not stop it: {}", serve.log());
}

#[test]
fn every_readme_example_runs_against_live_servers() {
    let examples = readme_examples();
    assert!(
        examples.len() >= MIN_EXAMPLES,
        "README.md has {} `$ volley ` lines in fenced blocks, expected at least {MIN_EXAMPLES}",
        examples.len()
    );
    for (command, why) in SKIPPED {
        assert!(
            examples.iter().any(|e| e.command == *command),
            "SKIPPED names `{command}` ({why}), which README.md no longer has: remove the entry"
        );
    }
    let mut failures = Vec::new();
    for example in &examples {
        if let Some((_, why)) = SKIPPED.iter().find(|(command, _)| example.command == *command) {
            eprintln!("README.md:{}: {}\n  SKIPPED: {why}", example.line, example.text);
            continue;
        }
        let ran = catch_unwind(AssertUnwindSafe(|| {
            if example.args.first().map(String::as_str) == Some("serve") {
                run_serve_example(example);
            } else {
                run_load_example(example);
            }
        }));
        if let Err(panic) = ran {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("README.md:{}: `{}`\n{why}", example.line, example.text));
        }
    }
    assert!(failures.is_empty(), "{} README example(s) failed:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn readme_examples_are_split_as_sh_splits_them() {
    let split = |s: &str| shell_words(s).unwrap();
    assert_eq!(split("volley -n 5   http://a/  # 200 requests"), ["volley", "-n", "5", "http://a/"]);
    assert_eq!(
        split("volley -m POST -H 'Content-Type: application/json' -d @body.json http://a/api"),
        ["volley", "-m", "POST", "-H", "Content-Type: application/json", "-d", "@body.json", "http://a/api"]
    );
    assert_eq!(split(r#"a "b \"c\" \n" x'y z'"#), ["a", r#"b "c" \n"#, "xy z"]);
    assert_eq!(split(r"a\ b '' c#d"), ["a b", "", "c#d"]);
    assert!(shell_words("a 'b").is_err() && shell_words("a \"b").is_err());
    assert_eq!(seconds("1m30s"), Some(90.0));
    assert_eq!(seconds("500ms"), Some(0.5));
    assert_eq!(seconds("3x"), None);
}

/// The methods a targets file (vegeta's http format) lists, sorted and once each: its request
/// lines are `METHOD URL-or-path`.
/// The methods a scenario file's steps use (GET when a step gives none), sorted, each once.
fn scenario_methods(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let doc: serde_json::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let scenarios = doc["scenario"].as_array().unwrap_or_else(|| panic!("{file}: no scenarios"));
    let steps = scenarios.iter().flat_map(|s| s["step"].as_array().into_iter().flatten());
    let mut methods: Vec<String> = steps.map(|step| step["method"].as_str().unwrap_or("GET").to_string()).collect();
    methods.sort();
    methods.dedup();
    methods
}

fn targets_methods(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut methods: Vec<String> = text
        .lines()
        .filter_map(|line| {
            let (method, rest) = line.split_once(' ')?;
            let request = !method.is_empty()
                && method.bytes().all(|b| b.is_ascii_uppercase())
                && (rest.starts_with('/') || rest.starts_with("http"));
            request.then(|| method.to_string())
        })
        .collect();
    methods.sort();
    methods.dedup();
    methods
}
