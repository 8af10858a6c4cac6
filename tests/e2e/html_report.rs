//! End to end, the HTML report: a distributed run's `-o html:FILE`, and `volley report` of its
//! saved JSON, opened in a real headless Chromium (Debian's `chromium`, which .ci/run installs)
//! with every host name unresolvable, so a page that needed the network would not draw. The
//! page's script says what it drew in `#render-check` (read with `--dump-dom`); the screenshot
//! is decoded and must show the charts' lines; the browser's log must hold no console message.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::{
    Behavior, TestServer, WorkerProcess, assert_valid_report, describe_output, in_ci, one_error_line, run_volley,
    run_with_timeout,
};

const CHARTS: [&str; 5] = ["requests", "latency", "spectrum", "setup", "statuses"];
/// The page's first line colour (uPlot's series 1), as the screenshot must show it.
const FIRST_LINE: [u8; 3] = [0x1f, 0x77, 0xb4];
const WINDOW: (u32, u32) = (1200, 3000);

/// Debian's headless Chromium, once it has shown it can open a page here.
struct Chromium {
    bin: PathBuf,
    profile: tempfile::TempDir,
}

impl Chromium {
    /// None (the test is skipped, saying why) only when Chromium is missing or cannot run; in
    /// CI, where .ci/run installs it, that fails the test instead.
    fn find() -> Option<Chromium> {
        let Some(bin) =
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().map(PathBuf::from).find(|p| p.exists())
        else {
            assert!(!in_ci(), "chromium is not installed, and CI must run the HTML report tests (.ci/run installs it)");
            eprintln!(
                "SKIPPED: chromium is not installed (apt-get install chromium): the HTML report is not checked in a browser"
            );
            return None;
        };
        let chromium = Chromium { bin, profile: tempfile::tempdir().expect("a profile directory") };
        let dir = tempfile::tempdir().expect("a temp dir");
        let probe = dir.path().join("probe.html");
        std::fs::write(&probe, "<p id=x>no</p><script>document.getElementById('x').textContent='ran'</script>")
            .unwrap();
        let out = chromium.run(&["--dump-dom"], &probe);
        if !String::from_utf8_lossy(&out.stdout).contains("ran") {
            assert!(
                !in_ci(),
                "chromium cannot run here, and CI must run the HTML report tests\n{}",
                describe_output(&out)
            );
            eprintln!(
                "SKIPPED: chromium cannot run here: the HTML report is not checked in a browser\n{}",
                describe_output(&out)
            );
            return None;
        }
        Some(chromium)
    }

    /// Opens `page` headless, with `mode` (`--dump-dom` or `--screenshot=FILE`), scripts given
    /// their time, no host name resolvable and no proxy reachable.
    fn run(&self, mode: &[&str], page: &Path) -> Output {
        let mut cmd = Command::new(&self.bin);
        cmd.args([
            "--headless",
            // Root (as CI runs) has no user namespace sandbox to give Chromium.
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            &format!("--window-size={},{}", WINDOW.0, WINDOW.1),
            &format!("--user-data-dir={}", self.profile.path().display()),
        ]);
        cmd.args(mode).arg(format!("file://{}", page.display()));
        run_with_timeout(cmd, Duration::from_secs(60))
            .unwrap_or_else(|out| panic!("chromium hung\n{}", describe_output(&out)))
    }

    /// What the page's script wrote into `#render-check`, and the console messages Chromium
    /// logged (there must be none: the page logs nothing, so any is an error or a warning).
    fn render_check(&self, page: &Path) -> (Value, Vec<String>) {
        let out = self.run(&["--dump-dom"], page);
        assert!(out.status.success(), "chromium --dump-dom failed\n{}", describe_output(&out));
        let dom = String::from_utf8_lossy(&out.stdout);
        let start =
            dom.find("<pre id=\"render-check\"").unwrap_or_else(|| panic!("no #render-check in the DOM:\n{dom}"));
        let text = &dom[start..];
        let text = &text[text.find('>').unwrap() + 1..text.find("</pre>").unwrap()];
        let text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
        let check = serde_json::from_str(&text).unwrap_or_else(|e| panic!("#render-check is not JSON ({e}): {text}"));
        (check, console_lines(&out))
    }

    /// The page as a person sees it: RGBA pixels, width, height.
    fn screenshot(&self, page: &Path, into: &Path) -> (Vec<u8>, u32, u32) {
        let out = self.run(&[&format!("--screenshot={}", into.display())], page);
        assert!(out.status.success(), "chromium --screenshot failed\n{}", describe_output(&out));
        let console = console_lines(&out);
        assert!(console.is_empty(), "console messages while taking the screenshot:\n{}", console.join("\n"));
        let mut decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(into).expect("the screenshot")));
        decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = decoder.read_info().expect("a PNG");
        let mut pixels = vec![0; reader.output_buffer_size().expect("a sane PNG")];
        let info = reader.next_frame(&mut pixels).expect("the PNG's pixels");
        pixels.truncate(info.buffer_size());
        let rgba = match info.color_type {
            png::ColorType::Rgba => pixels,
            png::ColorType::Rgb => pixels.chunks(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect(),
            other => panic!("unexpected screenshot colour type {other:?}"),
        };
        (rgba, info.width, info.height)
    }
}

fn console_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect()
}

/// The chart data the page carries, by chart id.
fn page_data(html: &str) -> BTreeMap<String, Value> {
    let marker = "<script type=\"application/json\" id=\"report-data\">";
    let start = html.find(marker).expect("the page's data") + marker.len();
    let end = start + html[start..].find("</script>").expect("the end of the page's data");
    let data: Value = serde_json::from_str(&html[start..end]).expect("the page's data is JSON");
    data["charts"]
        .as_array()
        .expect("charts")
        .iter()
        .map(|c| (c["id"].as_str().unwrap().to_string(), c.clone()))
        .collect()
}

fn series<'a>(chart: &'a Value, label: &str) -> &'a Value {
    chart["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no series '{label}' in chart {}: {:?}", chart["id"], labels(chart)))
}

fn labels(chart: &Value) -> Vec<String> {
    chart["series"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap().to_string()).collect()
}

fn values(series: &Value) -> Vec<Option<f64>> {
    series["values"].as_array().unwrap().iter().map(Value::as_f64).collect()
}

/// Every chart in `expect_drawn` drew its lines; the others say why they are empty.
fn assert_rendered(check: &Value, console: &[String], expect_drawn: &[&str]) {
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));
    assert_eq!(check["done"], true, "the page's script did not finish: {check}");
    assert_eq!(check["errors"], serde_json::json!([]), "script errors: {check}");
    let charts = check["charts"].as_array().expect("charts");
    let ids: Vec<&str> = charts.iter().map(|c| c["id"].as_str().unwrap()).collect();
    // A mix's page has the names' chart last.
    let expected: Vec<&str> =
        CHARTS.into_iter().chain(expect_drawn.iter().copied().filter(|id| *id == "names")).collect();
    assert_eq!(ids, expected, "{check}");
    for c in charts {
        let id = c["id"].as_str().unwrap();
        if expect_drawn.contains(&id) {
            assert_eq!(c["drawn"], true, "{id} was not drawn: {c}");
            assert!(c["empty"].is_null(), "{id} says it is empty: {c}");
            assert!(c["points"].as_u64().unwrap() >= 2, "{id} has no data points: {c}");
            // A line across a 1,100-pixel chart paints over a thousand pixels; axes and grid
            // are grey and do not count.
            assert!(c["painted"].as_u64().unwrap() > 300, "{id} painted no lines: {c}");
        } else {
            assert!(c["empty"].as_str().is_some_and(|why| !why.is_empty()), "{id} should say why it is empty: {c}");
        }
    }
}

fn near(a: [u8; 3], b: &[u8]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(*y) < 24)
}

#[test]
fn a_distributed_runs_html_report_draws_every_chart_per_worker_with_its_thresholds_offline() {
    let Some(chromium) = Chromium::find() else { return };
    // Every 10th answer is a 500: the status chart has two codes, the 5xx threshold a line
    // (20%, clear of the 10% the client sees give or take the requests in flight at the end).
    let server = TestServer::start(Behavior::ok(14).delay(Duration::from_millis(1)).status_every(10, 500));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let dir = tempfile::tempdir().unwrap();
    let (html, json, again) = (dir.path().join("run.html"), dir.path().join("run.json"), dir.path().join("again.html"));
    let addresses = format!("{},{}", workers[0].address(), workers[1].address());
    let thresholds = ["p99<1s", "p50<1ns", "rps>1", "error_rate<50%", "status_5xx<=20%", "connect_p99<1s", "mean<1s"];
    let mut args: Vec<String> = vec!["--workers".into(), addresses, "-z".into(), "3s".into(), "-c".into(), "4".into()];
    args.extend(["-t", "1", "-o"].map(String::from));
    args.push(format!("html:{}", html.display()));
    args.push("-o".into());
    args.push(format!("json:{}", json.display()));
    for t in thresholds {
        args.extend(["--threshold".to_string(), t.to_string()]);
    }
    args.push(server.url());
    let out = run_volley(&args);
    // p50<1ns fails, the rest hold.
    assert_eq!(out.status.code(), Some(4), "{}", describe_output(&out));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_valid_report(&report);

    // One path: the page `volley report` makes from the saved JSON is the page the run wrote.
    let out = run_volley(["report".as_ref(), json.as_os_str(), "-o".as_ref(), again.as_os_str()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page, std::fs::read_to_string(&again).unwrap(), "volley report drew another page than the run");
    assert!(page.len() < 150_000, "the page is {} bytes", page.len());
    for external in ["src=\"http", "href=\"http", "src='http", "@import", "url(http"] {
        assert!(!page.contains(external), "the page loads something from outside: {external}");
    }

    // What the charts were given: per-worker lines that add up to the run's, thresholds where
    // they apply, and the spectrum read at the thresholds' own percentiles.
    let charts = page_data(&page);
    let requests = &charts["requests"];
    let all = values(series(requests, "all workers"));
    let per_worker: Vec<Vec<Option<f64>>> = report["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let address = w["address"].as_str().unwrap();
            let s =
                requests["series"].as_array().unwrap().iter().find(|s| s["label"].as_str().unwrap().contains(address));
            values(s.unwrap_or_else(|| panic!("no line for worker {address}: {:?}", labels(requests))))
        })
        .collect();
    assert!(all.len() >= 3, "{} seconds drawn for a 3 s run", all.len());
    for (i, total) in all.iter().enumerate() {
        let sum: f64 = per_worker.iter().filter_map(|w| w[i]).sum();
        assert_eq!(Some(sum), *total, "second {i}: the workers' lines do not add up to the run's");
    }
    assert_eq!(values(series(requests, "rps>1 (pass)")), vec![Some(1.0); all.len()]);
    let latency = &charts["latency"];
    for label in ["p50", "p90", "p99", "max", "p99<1s (pass)", "p50<1ns (FAIL)", "mean<1s (pass)"] {
        series(latency, label);
    }
    let spectrum = &charts["spectrum"];
    let marker = values(series(spectrum, "p99<1s (pass)"));
    let at = marker.iter().position(Option::is_some).expect("the p99 marker");
    assert_eq!(marker[at], Some(1000.0));
    let p99 = values(series(spectrum, "all workers"))[at].unwrap();
    let reported = report["latencySeconds"]["percentiles"]["p99"].as_f64().unwrap() * 1e3;
    assert!((p99 - reported).abs() <= reported * 1e-9, "the spectrum's p99 {p99} ms is not the report's {reported} ms");
    assert!(spectrum["xs"][at].as_f64().unwrap() > 1.99, "the p99 marker is not at 99%: {}", spectrum["xs"][at]);
    series(&charts["setup"], "connect_p99<1s (pass)");
    let statuses = &charts["statuses"];
    let fives: f64 = values(series(statuses, "500")).iter().flatten().sum();
    assert!(fives > 0.0 && fives <= number_f(&report, "/statusCodes/500"), "500s per second: {fives}");
    series(statuses, "200");
    series(statuses, "error_rate<50% (pass)");
    series(statuses, "status_5xx<=20% (pass)");

    // What the browser drew.
    let (check, console) = chromium.render_check(&html);
    assert_rendered(&check, &console, &CHARTS);
    let (rgba, width, height) = chromium.screenshot(&html, &dir.path().join("shot.png"));
    assert_eq!((width, height), WINDOW);
    let pixels = rgba.chunks(4);
    let not_white = pixels.clone().filter(|p| p[..3].iter().any(|c| *c < 235)).count();
    let line = pixels.filter(|p| near(FIRST_LINE, p)).count();
    let total = (width * height) as usize;
    assert!(not_white * 50 > total, "the screenshot is nearly blank: {not_white} of {total} pixels are not white");
    assert!(line > 2_000, "the screenshot shows {line} pixels of the charts' first line colour");
}

fn number_f(report: &Value, pointer: &str) -> f64 {
    report.pointer(pointer).and_then(Value::as_f64).unwrap_or_else(|| panic!("{pointer} is not a number in {report}"))
}

#[test]
fn a_report_without_seconds_draws_its_distributions_and_says_why_the_time_charts_are_empty() {
    let Some(chromium) = Chromium::find() else { return };
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for file in [&a, &b] {
        let out = run_volley(["-n", "300", "-c", "4", "-o", &format!("json:{}", file.display()), &server.url()]);
        assert!(out.status.success(), "{}", describe_output(&out));
    }
    // `volley merge` keeps the histograms but has no seconds to merge.
    let out = run_volley(["merge".as_ref(), "-j".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let merged = dir.path().join("merged.json");
    std::fs::write(&merged, &out.stdout).unwrap();
    let html = dir.path().join("merged.html");
    let out =
        run_volley(["report".as_ref(), merged.as_os_str(), "-o".as_ref(), format!("html:{}", html.display()).as_ref()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let (check, console) = chromium.render_check(&html);
    assert_rendered(&check, &console, &["spectrum", "setup"]);
}

#[test]
fn volley_report_refuses_a_missing_file_or_one_that_is_no_volley_report_in_one_line_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    // A real report whose histogram was damaged.
    let server = TestServer::start(Behavior::ok(14));
    let good = dir.path().join("good.json");
    let out = run_volley(["-n", "50", "-c", "2", "-o", &format!("json:{}", good.display()), &server.url()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let mut damaged: Value = serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    damaged["histograms"]["latency"] = Value::String("AAAA".into());
    let cases = [
        (dir.path().join("missing.json"), "No such file"),
        (write("text.json", "hello"), "not a volley JSON report"),
        (
            write("other.json", r#"{"name": "some other tool", "results": []}"#),
            "not a volley JSON report (missing field `url`",
        ),
        (write("damaged.json", &damaged.to_string()), "unreadable histogram: histograms.latency"),
    ];
    for (input, says) in cases {
        let out = run_volley(["report".as_ref(), input.as_os_str(), "-o".as_ref(), page.as_os_str()]);
        assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.starts_with("volley: error: ") && line.contains(&*input.to_string_lossy()), "{line}");
        assert!(line.contains(says), "expected '{says}' in: {line}");
        assert!(!page.exists(), "a page was written for {}", input.display());
    }
    let out = run_volley(["report".as_ref(), good.as_os_str(), "-o".as_ref(), "html:".as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    assert_eq!(one_error_line(&out), "volley: error: -o: the file name is missing");
}

#[test]
fn a_mixs_html_report_has_a_table_and_a_latency_distribution_per_name_with_their_thresholds() {
    let Some(chromium) = Chromium::find() else { return };
    let server = TestServer::start(Behavior::ok(14).status_for("/missing", 404));
    let (dir, targets) = crate::name_outputs::targets_file(&server.url());
    let (html, json) = (dir.path().join("run.html"), dir.path().join("run.json"));
    let out = run_volley([
        "--targets",
        &targets,
        "-z",
        "2s",
        "-c",
        "3",
        "--threshold",
        "list:p99<1s",
        "--threshold",
        "\"create item\":p50<1ns",
        "-o",
        &format!("html:{}", html.display()),
        "-o",
        &format!("json:{}", json.display()),
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", describe_output(&out));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    let table = page.split_once("<h2>Names</h2>").expect("a names table").1.split_once("</table>").unwrap().0;
    for name in crate::name_outputs::NAMES {
        assert!(table.contains(&format!("<tr><td><code>{name}</code></td>")), "{name}: {table}");
    }
    let charts = page_data(&page);
    let names = &charts["names"];
    // A line per name, the busiest first (here they are about even), then the names' markers.
    let mut drawn = labels(names);
    drawn[..3].sort();
    assert_eq!(
        drawn,
        ["create item", "list", "missing", "list:p99<1s (pass)", "\"create item\":p50<1ns (FAIL)"].map(String::from)
    );
    // The marker sits at p99 of list's own line, which reads list's merged p99.
    let marker = values(series(names, "list:p99<1s (pass)"));
    let at = marker.iter().position(Option::is_some).expect("the p99 marker");
    let list = report["names"].as_array().unwrap().iter().find(|n| n["name"] == "list").unwrap();
    let reported = list["latencySeconds"]["percentiles"]["p99"].as_f64().unwrap() * 1e3;
    let drawn = values(series(names, "list"))[at].unwrap();
    assert!((drawn - reported).abs() <= reported * 1e-9, "list's p99 drawn {drawn} ms, reported {reported} ms");
    assert!(!labels(&charts["spectrum"]).iter().any(|l| l.contains("list:")), "a name's threshold on the run's chart");
    let (check, console) = chromium.render_check(&html);
    assert_rendered(&check, &console, &["requests", "latency", "spectrum", "setup", "statuses", "names"]);
}
