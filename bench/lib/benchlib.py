#!/usr/bin/env python3
"""Helpers for bench/*.sh: parse client output, record CSV rows, print the summary.

Sub-commands (used by bench/h1.sh and bench/h2.sh through bench/lib/clients.sh; standard
library only):

  free-port
      Print a free TCP port on 127.0.0.1.
  rusage -o FILE -- COMMAND...
      Run COMMAND and write "USER_S SYS_S MAXRSS_KIB" to FILE, exiting with its status: the
      CPU times from wait4 to the microsecond (GNU time prints hundredths, which at HTTP/2's
      half a second of client CPU per run is 2% a step), the peak RSS from GNU time (a child
      of this Python would count Python's own memory in its maxrss, from before its exec).
  wait-http PORT SECONDS [--mode http|h2c|tls]
      Poll 127.0.0.1:PORT until GET / answers 200 "hello, world!\\n" (exit 1 on timeout):
      over HTTP/1.1 (http), HTTP/2 with prior knowledge (h2c), or HTTP/1.1 over TLS
      without verifying the certificate (tls).
  parse TOOL STDOUT_FILE
      Print "REQUESTS DURATION_SECONDS" parsed from a client's output (exit 1 with a reason).
  record --csv F --proto P --tool T --conns C [--streams M] --run R --rc N --stdout F
         --stderr F --time F
      Parse one client run and append a row to the CSV; print a one-line progress note.
  unavailable --csv F --proto P --tool T --conns C [--streams M] --reason TEXT
      Append a row saying the tool could not be run at all.
  summarize CSV
      Print the markdown table of medians and the volley ratio lines.
  rate-record --csv F --tool volley|oha --rate R --run N --rc N --stdout F --time F
      bench/rate.sh: parse one run at a fixed rate and append its row to the CSV.
  rate-summary CSV
      bench/rate.sh: the markdown table of medians per rate and tool, with the targets.
  rate-holds --rate R --stdout F
      bench/rate.sh's search for the highest rate: exit 0 if volley's run held R (achieved
      within 0.5% of it, p99 send lateness under 200 µs: issue 13's targets), else 1; one line
      on stderr either way.
  conns-record --csv F --tool T --threads N --conns C --run R --rc N --stdout F --stderr F
               --time F --command TEXT
      bench/connections.sh: one client run holding C connections; appends its peak RSS,
      whether it reported, its connect errors and requests to the CSV.
  conns-summary CSV
      bench/connections.sh: the markdown table of peak RSS per tool, threads and connections
      (medians), the memory per connection between the smallest and largest count, and the
      goal (volley's at most half of wrk's).
  soak-summary CSV REPORT_JSON
      bench/h3-soak.sh: the RSS samples minute by minute and the verdict (the last minute's
      largest RSS within 1 MB of the first minute's after the warm-up minute), with the run's
      requests from volley's JSON report.

With --streams (HTTP/2 streams per connection), the CSV gets a `streams` column after
`conns`, and the summary keys its points by connections × streams.

Requests completed means successful responses: volley `requests.total`, wrk's
"N requests" minus its "Non-2xx or 3xx responses", h2load's "N succeeded"; for bench/flow.sh's
peers (Locust, Artillery, Tsung, Goose), the requests that did not fail their status or checks.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CSV_FIELDS = [
    "proto", "tool", "conns", "run", "status", "requests", "duration_s",
    "user_s", "sys_s", "maxrss_kb", "rps", "cpu_us_per_req", "rss_mb", "note",
]
# The same with HTTP/2 streams per connection (rows recorded with --streams).
CSV_FIELDS_STREAMS = CSV_FIELDS[:3] + ["streams"] + CSV_FIELDS[3:]

SUBJECT = "volley"


class Targets:
    """The issue's targets for one protocol, checked against the medians."""

    def __init__(self, text: str, cpu_vs: dict[str, float], rps_vs: dict[str, float] | None = None,
                 rss_mb: float | None = None, rss_conns: int | None = None):
        self.text = text          # the intro line's wording
        self.cpu_vs = cpu_vs      # volley CPU/req <= factor x other tool's
        self.rps_vs = rps_vs or {}  # volley req/s >= factor x other tool's
        self.rss_mb = rss_mb      # volley peak RSS at rss_conns
        self.rss_conns = rss_conns


# Issue 11: at every point volley's client CPU per request at most shb's and its requests/s
# at least shb's; peak RSS at most 16 MB at -c 256 (HTTP/1.1) and 64 × 100 (HTTP/2).
_H2_TARGETS = Targets(f"{SUBJECT}'s client CPU per request at most shb's and 0.75 × h2load's, "
                      f"requests/s at least shb's and h2load's, peak RSS at most 16 MB at -c 64",
                      cpu_vs={"shb": 1.0, "h2load": 0.75}, rps_vs={"shb": 1.0, "h2load": 1.0},
                      rss_mb=16.0, rss_conns=64)
_H1_TEXT = (f"{SUBJECT}'s client CPU per request at most shb's, 0.8 × wrk's and 0.7 × h2load's, "
            f"requests/s at least shb's")
TARGETS = {  # keyed by the proto column
    "h1": Targets(_H1_TEXT + ", peak RSS at most 16 MB at -c 256",
                  cpu_vs={"shb": 1.0, "wrk": 0.8, "h2load": 0.7}, rps_vs={"shb": 1.0},
                  rss_mb=16.0, rss_conns=256),
    "h1tls": Targets(_H1_TEXT, cpu_vs={"shb": 1.0, "wrk": 0.8, "h2load": 0.7},
                     rps_vs={"shb": 1.0}),
    "h2c": _H2_TARGETS,
    "h2tls": _H2_TARGETS,
    # HTTP/3 (bench/h3.sh): caddy is the bottleneck there, ngtcp2's server is not.
    "h3caddy": Targets(f"{SUBJECT}'s client CPU per request at most 0.6 × oha's",
                       cpu_vs={"oha": 0.6}),
    "h3serve": Targets(f"{SUBJECT}'s client CPU per request at most 0.6 × oha's", cpu_vs={"oha": 0.6}),
    "h3ngtcp2": Targets(f"against ngtcp2's server, {SUBJECT}'s client CPU per request at most "
                        f"0.6 × oha's and shb's", cpu_vs={"oha": 0.6, "shb": 1.0}),
    # Issue 36 (bench/mix.sh, subject volley-mix): a mix of 8 targets costs at most 1.05 × a
    # single URL of the same protocol, and at most 0.6 × oha's --urls-from-file.
    "mixh1": Targets("volley-mix's client CPU per request at most 1.05 × volley's single URL and "
                      "0.6 × oha-mix's", cpu_vs={"volley": 1.05, "oha-mix": 0.6}),
    "mixh2c": Targets("volley-mix's client CPU per request at most 1.05 × volley's single URL and "
                       "0.6 × oha-mix's", cpu_vs={"volley": 1.05, "oha-mix": 0.6}),
    "mixh3": Targets("volley-mix's client CPU per request at most 1.05 × volley's single URL",
                      cpu_vs={"volley": 1.05}),
    "mixh3ngtcp2": Targets("volley-mix's client CPU per request at most 1.05 × volley's single URL",
                            cpu_vs={"volley": 1.05}),
    # Issue 37 (bench/flow.sh, subject volley-flow): the flow costs at most 1.5 × a single URL
    # of the same protocol, and (HTTP/1.1, where the peers run) at most half of the best peer's
    # (Locust, Artillery, Tsung, Goose: half of each's) and a tenth of Locust's.
    "flowh1": Targets("volley-flow's client CPU per request at most 1.5 × volley's single URL, "
                       "0.5 × the best of Locust's, Artillery's, Tsung's and Goose's, and 0.1 × "
                       "locust's", cpu_vs={"volley": 1.5, "locust": 0.1, "artillery": 0.5,
                                           "tsung": 0.5, "goose": 0.5}),
    "flowh2c": Targets("volley-flow's client CPU per request at most 1.5 × volley's single URL",
                        cpu_vs={"volley": 1.5}),
    "flowh3": Targets("volley-flow's client CPU per request at most 1.5 × volley's single URL",
                       cpu_vs={"volley": 1.5}),
}
NO_TARGETS = Targets("", cpu_vs={})


class ParseError(Exception):
    pass


# --------------------------------------------------------------------------- parsing

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(value: str, unit: str) -> float:
    if unit not in _UNITS:
        raise ParseError(f"unknown time unit {unit!r}")
    return float(value) * _UNITS[unit]


def parse_wrk(text: str) -> tuple[int, float]:
    m = re.search(r"(\d+) requests in ([\d.]+)(us|µs|ms|s|m|h),", text)
    if not m:
        raise ParseError('no "N requests in Xs" line in wrk output')
    requests = int(m.group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
    if bad:
        requests -= int(bad.group(1))
    return requests, _duration(m.group(2), m.group(3))


def parse_h2load(text: str) -> tuple[int, float]:
    m = re.search(
        r"requests:\s*(\d+) total,\s*(\d+) started,\s*(\d+) done,\s*(\d+) succeeded", text)
    if not m:
        raise ParseError('no "requests: N total, ... N succeeded" line in h2load output')
    d = re.search(r"finished in ([\d.]+)(us|µs|ms|s|m|h)", text)
    if not d:
        raise ParseError('no "finished in Xs" line in h2load output')
    return int(m.group(4)), _duration(d.group(1), d.group(2))


def parse_volley(text: str) -> tuple[int, float]:
    text = text.strip()
    if not text:
        raise ParseError("printed no JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        # Tolerate a banner before/after the document: take the outermost {...}.
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ParseError("output is not JSON: " + text.splitlines()[0][:120])
        try:
            doc = json.loads(text[start:end + 1])
        except json.JSONDecodeError as e:
            raise ParseError(f"output is not valid JSON ({e})")
    try:
        total = doc["requests"]["total"]
        duration = doc["durationSeconds"]
    except (KeyError, TypeError):
        raise ParseError("JSON lacks requests.total or durationSeconds")
    if not isinstance(total, int) or isinstance(total, bool):
        raise ParseError(f"requests.total is not an integer: {total!r}")
    return total, float(duration)


def parse_shb(text: str) -> tuple[int, float]:
    """shb -j: requests.ok (successful answers) and durationSeconds."""
    try:
        doc = json.loads(text.strip())
        return int(doc["requests"]["ok"]), float(doc["durationSeconds"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ParseError(f"output is not shb's JSON report ({e})")


def parse_oha(text: str) -> tuple[int, float]:
    """oha --output-format json: the 2xx answers of statusCodeDistribution, and summary.total
    (the run's seconds)."""
    try:
        doc = json.loads(text.strip())
        ok = sum(int(n) for code, n in doc["statusCodeDistribution"].items() if code.startswith("2"))
        return ok, float(doc["summary"]["total"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ParseError(f"output is not oha's JSON report ({e})")


def parse_locust(text: str) -> tuple[int, float]:
    """locust --json: the requests that did not fail, over every name, and the span from the
    first request's start to the last one's end."""
    try:
        start = text.find("[")
        entries = json.loads(text[start:]) if start >= 0 else None
        if not isinstance(entries, list) or not entries:
            raise ParseError("no stats in locust's --json output")
        ok = sum(int(e["num_requests"]) - int(e["num_failures"]) for e in entries)
        span = max(float(e["last_request_timestamp"]) for e in entries) - min(float(e["start_time"]) for e in entries)
        return ok, span
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ParseError(f"output is not locust's --json stats ({e})")


def parse_artillery(text: str) -> tuple[int, float]:
    """artillery run --output, the report printed after it: the requests that passed their
    checks, over every name (the counters flow.NAME.ok of bench/flow.sh's hooks), and the span
    from its first metric to its last."""
    try:
        start = text.find("{")
        doc = json.loads(text[start:]) if start >= 0 else None
        if not isinstance(doc, dict) or "aggregate" not in doc:
            raise ParseError("no JSON report from artillery")
        agg = doc["aggregate"]
        flow = {k: int(v) for k, v in agg["counters"].items() if k.startswith("flow.")}
        if not flow:
            raise ParseError("artillery's report has no flow.NAME counters (did its hooks run?)")
        ok = sum(v for k, v in flow.items() if k.endswith(".ok"))
        return ok, (float(agg["lastMetricAt"]) - float(agg["firstMetricAt"])) / 1000
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ParseError(f"output is not artillery's JSON report ({e})")


def parse_tsung(text: str) -> tuple[int, float]:
    """tsung -m - (its statistics, dump by dump), then bench/flow.sh's "load duration: S s": the
    requests completed less the failed checks (nomatch) and the answers of another status than
    200, summed over the dumps, and the test's duration (its users ran from its start to it;
    Tsung prints no start time). Not its 200s: it counts a status when the head arrives, so
    those of the requests still under way at the end are in it."""
    if "EndMonitor" not in text:
        raise ParseError("no EndMonitor line: tsung did not end its statistics")
    d = re.search(r"^load duration: ([\d.]+) s$", text, re.M)
    if not d:
        raise ParseError('no "load duration: S s" line after tsung\'s output')
    sums: dict[str, int] = {}
    for m in re.finditer(r"^stats: (\S+) (\d+)", text, re.M):  # the first number: this dump's
        sums[m.group(1)] = sums.get(m.group(1), 0) + int(m.group(2))
    if not any(k.startswith("tr_") for k in sums):
        raise ParseError("no transactions (tr_login, ...) in tsung's statistics")
    other_status = sum(n for k, n in sums.items() if k.isdigit() and k != "200")
    return sums.get("request", 0) - sums.get("nomatch", 0) - other_status, float(d.group(1))


def parse_goose(text: str) -> tuple[int, float]:
    """bench/goose's last line, {"goose": ..., "requests": {NAME: {"ok", "failed"}}, "seconds"}:
    the requests that did not fail, over every name, and the seconds from the first step of
    Goose's test plan to its last."""
    for line in reversed(text.splitlines()):
        if line.startswith("{") and '"goose"' in line:
            try:
                doc = json.loads(line)
                names = doc["requests"]
                if not names:
                    raise ParseError("bench/goose's summary has no requests")
                return sum(int(n["ok"]) for n in names.values()), float(doc["seconds"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
                raise ParseError(f"bench/goose's summary line is not valid ({e})")
    raise ParseError("no summary line from bench/goose's program")


PARSERS = {"wrk": parse_wrk, "h2load": parse_h2load, "shb": parse_shb, "oha": parse_oha,
           "volley": parse_volley,
           # bench/h1.sh, h2.sh, h3.sh: volley on its epoll engine (--engine epoll).
           "volley-epoll": parse_volley,
           # bench/mix.sh: a targets file's mix through volley, and the same URLs through oha.
           "volley-mix": parse_volley, "volley-tmpl": parse_volley, "volley-feed": parse_volley, "oha-mix": parse_oha,
           # bench/flow.sh: the login flow of loadgen-rs's docs.
           "volley-flow": parse_volley,
           # bench/flow.sh's peers: the same flow as a Locust FastHttpUser, an Artillery
           # script, a Tsung session and a Goose transaction.
           "locust": parse_locust, "artillery": parse_artillery, "tsung": parse_tsung,
           "goose": parse_goose}


def parse_time_file(path: str) -> tuple[float, float, int]:
    """GNU time -f '%U %S %M': the last line; a 'Command exited...' line may precede it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except FileNotFoundError:
        raise ParseError("GNU time wrote no output")
    for line in reversed(lines):
        parts = line.split()
        if len(parts) == 3:
            try:
                return float(parts[0]), float(parts[1]), int(parts[2])
            except ValueError:
                continue
    raise ParseError("could not read GNU time output: " + " | ".join(lines)[:120])


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


# --------------------------------------------------------------------------- commands

def cmd_free_port(_args) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])
    return 0


def _get_h1(port: int, tls: bool) -> tuple[int, bytes]:
    if tls:
        import ssl
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=1,
                                           context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/")
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _get_h2c(port: int) -> tuple[int, bytes]:
    """GET / over HTTP/2 with prior knowledge: just enough of RFC 9113 for one request."""
    def frame(ftype: int, flags: int, stream: int, payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + \
            stream.to_bytes(4, "big") + payload

    authority = f"127.0.0.1:{port}".encode()
    # HPACK: indexed :method GET, :scheme http, :path /; literal :authority (name index 1)
    block = bytes([0x82, 0x86, 0x84, 0x01, len(authority)]) + authority
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(0x4, 0, 0, b"")
                  + frame(0x1, 0x5, 1, block))  # HEADERS, END_STREAM | END_HEADERS
        buf, status, body = b"", None, b""
        while True:
            while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                chunk = s.recv(65536)
                if not chunk:
                    raise OSError("connection closed before the response ended")
                buf += chunk
            n = int.from_bytes(buf[:3], "big")
            ftype, flags = buf[3], buf[4]
            stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            payload, buf = buf[9:9 + n], buf[9 + n:]
            if ftype == 0x7:  # GOAWAY
                raise OSError("server sent GOAWAY")
            if stream != 1:
                continue
            if ftype == 0x3:  # RST_STREAM
                raise OSError("server reset the stream")
            if ftype == 0x1:  # HEADERS: nginx sends :status 200 as static index 8
                status = 200 if payload[:1] == b"\x88" else -1
            elif ftype == 0x0:  # DATA (nginx does not pad)
                body += payload
            if flags & 0x1:  # END_STREAM
                return status if status is not None else -1, body


def cmd_wait_http(args) -> int:
    deadline = time.monotonic() + args.seconds
    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            if args.mode == "h2c":
                status, body = _get_h2c(args.port)
            else:
                status, body = _get_h1(args.port, args.mode == "tls")
            if status == 200 and body == b"hello, world!\n":
                return 0
            last = f"status {status}, body {body[:40]!r}"
        except OSError as e:
            last = str(e)
        time.sleep(0.1)
    print(f"server on 127.0.0.1:{args.port} not ready: {last}", file=sys.stderr)
    return 1


def cmd_parse(args) -> int:
    try:
        requests, duration = PARSERS[args.tool](_read(args.file))
    except ParseError as e:
        print(e, file=sys.stderr)
        return 1
    print(requests, duration)
    return 0


def _append(csv_path: str, row: dict) -> None:
    fields = CSV_FIELDS_STREAMS if "streams" in row else CSV_FIELDS
    new = not os.path.exists(csv_path) or os.path.getsize(csv_path) == 0
    with open(csv_path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in fields})


def _point_row(args) -> dict:
    row = {"proto": args.proto, "tool": args.tool, "conns": args.conns}
    if args.streams is not None:
        row["streams"] = args.streams
    return row


def _point_label(conns, streams) -> str:
    """'-c 50', or '-c 16 -m 32' with streams per connection."""
    return f"-c {conns}" + (f" -m {streams}" if streams else "")


def cmd_record(args) -> int:
    row = _point_row(args)
    row["run"] = args.run
    out, err = _read(args.stdout), _read(args.stderr)
    try:
        user, sys_, maxrss = parse_time_file(args.time)
        row.update(user_s=f"{user:.6f}", sys_s=f"{sys_:.6f}", maxrss_kb=maxrss,
                   rss_mb=f"{maxrss / 1024:.2f}")
    except ParseError as e:
        user = sys_ = None
        row["note"] = str(e)
    status, note = "ok", ""
    if args.rc in (124, 137):
        status, note = "failed", f"timed out (exit {args.rc})"
    elif args.rc != 0:
        status, note = "failed", f"exit {args.rc}: " + (_first_line(err) or _first_line(out))
    if status == "ok":
        try:
            requests, duration = PARSERS[args.tool](out)
            row.update(requests=requests, duration_s=f"{duration:.3f}")
            if requests <= 0:
                status, note = "failed", "completed no requests"
            elif duration <= 0:
                status, note = "failed", "reported a zero duration"
            elif user is None:
                status, note = "failed", row["note"]
            else:
                row["rps"] = f"{requests / duration:.1f}"
                row["cpu_us_per_req"] = f"{(user + sys_) * 1e6 / requests:.3f}"
        except ParseError as e:
            status, note = "failed", str(e)
    row["status"] = status
    if note:
        row["note"] = note
    _append(args.csv, row)
    if args.streams is None:
        point = f"{args.proto} {args.tool:7s} -c {args.conns:<4}"
    else:
        point = f"{args.proto:5s} {args.tool:7s} -c {args.conns:<4} -m {args.streams:<4}"
    if status == "ok":
        print(f"  {point} run {args.run}: "
              f"{float(row['rps']):>10.0f} req/s  {float(row['cpu_us_per_req']):7.2f} CPU us/req  "
              f"{float(row['rss_mb']):6.1f} MB", file=sys.stderr)
    else:
        print(f"  {point} run {args.run}: FAILED ({note})", file=sys.stderr)
    return 0


def cmd_unavailable(args) -> int:
    row = _point_row(args)
    row.update(run=0, status="unavailable", note=args.reason)
    _append(args.csv, row)
    return 0


# --------------------------------------------------------------------------- summary

def _fmt(v: float | None, digits: int) -> str:
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _verdict(value: float | None, limit: float, at_least: bool = False) -> str:
    if value is None:
        return "n/a"
    return "PASS" if (value >= limit if at_least else value <= limit) else "FAIL"


def _paired(mine: list[dict], theirs: list[dict], key: str) -> list[float]:
    """The ratios mine / theirs of `key`, run by run: runs with the same number ran back to
    back (the tools are interleaved), so each ratio sees one stretch of the host's load."""
    by_run = {r["run"]: float(r[key]) for r in theirs if float(r[key]) > 0}
    return [float(r[key]) / by_run[r["run"]] for r in mine if r["run"] in by_run]


def _sign_p(n: int, k: int) -> float:
    """P(at least k of n) for a fair coin: how likely k or more of n pairs would meet a target
    by chance alone, were each pair a coin's toss."""
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n


def _noise(ratios: list[float], limit: float, at_least: bool = False) -> str:
    """How the target fares run by run, and whether that is beyond the noise. A one-sided
    sign test on the pairs: met in so many of them that a coin would do as well less than
    one time in twenty is beyond the noise, either way; anything between is within it. With
    5 pairs only "every run" or "no run" is beyond it; with 9, 8 of 9 is too."""
    if not ratios:
        return ""
    n = len(ratios)
    met = sum(1 for r in ratios if (r >= limit if at_least else r <= limit))
    spread = f"runs {min(ratios):.2f}–{max(ratios):.2f}, median {statistics.median(ratios):.2f}"
    count = "every run" if met == n else "no run" if met == 0 else f"{met} of {n}"
    p_met, p_missed = _sign_p(n, met), _sign_p(n, n - met)
    if p_met < 0.05:
        return f"; {spread}, met in {count}: beyond noise (sign test p {p_met:.3f})"
    if p_missed < 0.05:
        return f"; {spread}, met in {count}: missed beyond noise (sign test p {p_missed:.3f})"
    return f"; {spread}, met in {count}: within noise"


def cmd_summarize(args) -> int:
    subject = args.subject
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    has_streams = any(r.get("streams") for r in rows)

    # cells keyed by (proto, tool, conns, streams) in first-seen order; streams is 0 without
    cells: dict[tuple[str, str, int, int], list[dict]] = {}
    for r in rows:
        cells.setdefault((r["proto"], r["tool"], int(r["conns"]), int(r.get("streams") or 0)),
                         []).append(r)

    med: dict[tuple[str, str, int, int], dict] = {}
    ok_rows: dict[tuple[str, str, int, int], list[dict]] = {}
    point_col = "conns × streams" if has_streams else "conns"
    print(f"| proto | tool | {point_col} | req/s | CPU µs/req | peak RSS MB | client CPU % "
          f"| runs ok |")
    print("|---|---|--:|--:|--:|--:|--:|---|")
    order = [subject] + [t for t in PARSERS if t != subject]
    for key in sorted(cells, key=lambda k: (k[0], k[2], k[3], order.index(k[1])
                                            if k[1] in order else 99, k[1])):
        proto, tool, conns, streams = key
        point = f"{conns} × {streams}" if has_streams else f"{conns}"
        rs = cells[key]
        ok = ok_rows[key] = [r for r in rs if r["status"] == "ok"]
        attempted = [r for r in rs if r["status"] != "unavailable"]
        if ok:
            m = {
                "rps": statistics.median(float(r["rps"]) for r in ok),
                "cpu": statistics.median(float(r["cpu_us_per_req"]) for r in ok),
                "rss": statistics.median(float(r["rss_mb"]) for r in ok),
                # client CPU busy share: ~100% means the client was the bottleneck
                "busy": statistics.median(
                    100 * (float(r["user_s"]) + float(r["sys_s"])) / float(r["duration_s"])
                    for r in ok),
            }
            med[key] = m
            failed = [r for r in attempted if r["status"] != "ok"]
            runs = f"{len(ok)}/{len(attempted)}"
            if failed:
                runs += f" (failed: {failed[0]['note']})"
            print(f"| {proto} | {tool} | {point} | {_fmt(m['rps'], 0)} | {_fmt(m['cpu'], 2)} "
                  f"| {_fmt(m['rss'], 1)} | {_fmt(m['busy'], 0)} | {runs} |")
        elif not attempted:
            print(f"| {proto} | {tool} | {point} | not available | – | – | – | "
                  f"0 ({rs[0]['note']}) |")
        else:
            print(f"| {proto} | {tool} | {point} | failed | – | – | – | "
                  f"0/{len(attempted)} ({attempted[0]['note']}) |")

    protos = sorted({k[0] for k in cells})
    texts = []
    for proto in protos:
        text = TARGETS.get(proto, NO_TARGETS).text
        if text and text not in texts:
            texts.append(text)
    print()
    print(f"Ratios of medians, {subject} / other"
          + (f" (targets from the issue: {'; '.join(texts)})" if texts else "") + ". "
          "Beside each target, the ratios of the runs that ran back to back, and whether a "
          "sign test over them puts the target met or missed beyond this machine's "
          "run-to-run noise:")
    print()
    for proto in protos:
        targets = TARGETS.get(proto, NO_TARGETS)
        for conns, streams in sorted({(k[2], k[3]) for k in cells if k[0] == proto}):
            label = f"{proto} {_point_label(conns, streams)}"
            mine = med.get((proto, subject, conns, streams))
            if mine is None:
                print(f"- {label}: n/a, {subject} has no successful runs here")
                continue
            parts = []
            for other in [t for t in PARSERS if t != subject]:
                if (proto, other, conns, streams) not in cells:
                    continue
                theirs = med.get((proto, other, conns, streams))
                g = (lambda m, k: m[k] if m else None)
                cpu = _ratio(g(mine, "cpu"), g(theirs, "cpu"))
                rps = _ratio(g(mine, "rps"), g(theirs, "rps"))
                rss = _ratio(g(mine, "rss"), g(theirs, "rss"))
                mine_ok = ok_rows[(proto, subject, conns, streams)]
                theirs_ok = ok_rows[(proto, other, conns, streams)]
                pairs_cpu = _paired(mine_ok, theirs_ok, "cpu_us_per_req")
                pairs_rps = _paired(mine_ok, theirs_ok, "rps")
                limit = targets.cpu_vs.get(other)
                target = (f" (target ≤ {limit}: {_verdict(cpu, limit)}"
                          f"{_noise(pairs_cpu, limit)})" if limit else "")
                floor = targets.rps_vs.get(other)
                rps_target = (f" (target ≥ {floor:g}: {_verdict(rps, floor, at_least=True)}"
                              f"{_noise(pairs_rps, floor, at_least=True)})" if floor else "")
                parts.append(f"vs {other}: CPU/req {_fmt(cpu, 2)}{target}, "
                             f"req/s {_fmt(rps, 2)}{rps_target}, RSS {_fmt(rss, 2)}")
            line = f"- {label}: " + ("; ".join(parts) if parts else "no other tool")
            if targets.rss_mb is not None and conns == targets.rss_conns:
                rss_mb = mine["rss"]
                line += (f"; {subject} peak RSS {_fmt(rss_mb, 1)} MB "
                         f"(target ≤ {targets.rss_mb:g} MB: {_verdict(rss_mb, targets.rss_mb)})")
            print(line)
        if targets.rss_mb is not None and not any(
                k[0] == proto and k[2] == targets.rss_conns for k in cells):
            print(f"- RSS target not checked: -c {targets.rss_conns} was not among the points")
    return 0


RATE_FIELDS = ["tool", "rate", "run", "status", "note", "ok", "duration_s", "achieved",
               "lateness_p99_s", "latency_p99_s", "user_s", "sys_s", "rss_mb", "cpu_us_per_req"]


def _rate_parse(tool: str, text: str) -> dict:
    """A fixed-rate run's numbers: responses ok, seconds, p99 latency (corrected for
    coordinated omission by both tools) and, for volley, the p99 send lateness."""
    doc = json.loads(text.strip())
    if tool.startswith("volley"):
        lateness = ((doc.get("schedule") or {}).get("latenessSeconds") or {}).get("percentiles", {})
        return {"ok": int(doc["requests"]["ok"]), "duration_s": float(doc["durationSeconds"]),
                "latency_p99_s": doc["latencySeconds"]["percentiles"]["p99"],
                "lateness_p99_s": lateness.get("p99")}
    ok = sum(int(n) for code, n in doc["statusCodeDistribution"].items() if code.startswith("2"))
    return {"ok": ok, "duration_s": float(doc["summary"]["total"]),
            "latency_p99_s": doc["latencyPercentiles"]["p99"], "lateness_p99_s": None}


def cmd_rate_record(args) -> int:
    row = {"tool": args.tool, "rate": args.rate, "run": args.run, "status": "ok", "note": ""}
    try:
        with open(args.stdout, encoding="utf-8", errors="replace") as f:
            row.update(_rate_parse(args.tool, f.read()))
        user, sys_s, rss_kib = parse_time_file(args.time)
        row.update(user_s=user, sys_s=sys_s, rss_mb=f"{rss_kib / 1024:.1f}")
        row["achieved"] = f"{row['ok'] / row['duration_s']:.1f}"
        row["cpu_us_per_req"] = f"{(user + sys_s) * 1e6 / row['ok']:.3f}" if row["ok"] else ""
        if args.rc != 0 or not row["ok"]:
            row.update(status="failed", note=f"exit {args.rc}, {row['ok']} ok")
    except (OSError, ValueError, KeyError, TypeError, ParseError) as e:
        row.update(status="failed", note=f"exit {args.rc}: unreadable output ({e})")
    new = not os.path.exists(args.csv)
    with open(args.csv, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=RATE_FIELDS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow(row)
    if row["status"] == "ok":
        late = row["lateness_p99_s"]
        print(f"  {args.tool:6s} rate {args.rate:>7d} run {args.run}: {float(row['achieved']):>9.0f}/s"
              f"  p99 {row['latency_p99_s'] * 1e3:7.3f} ms"
              + (f"  lateness p99 {late * 1e6:6.0f} µs" if late is not None else "")
              + f"  {row['cpu_us_per_req']} CPU µs/req", file=sys.stderr)
    else:
        print(f"  {args.tool:6s} rate {args.rate} run {args.run}: FAILED ({row['note']})", file=sys.stderr)
    return 0


def cmd_rate_holds(args) -> int:
    try:
        with open(args.stdout, encoding="utf-8", errors="replace") as f:
            run = _rate_parse("volley", f.read())
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"  probe {args.rate}/s: unreadable output ({e}): does not hold", file=sys.stderr)
        return 1
    ratio = run["ok"] / run["duration_s"] / args.rate if run["duration_s"] else 0.0
    late = run["lateness_p99_s"]
    holds = ratio >= 0.995 and late is not None and late < 200e-6
    late_text = f"{late * 1e6:.0f} µs" if late is not None else "none"
    print(f"  probe {args.rate}/s: achieved/asked {ratio:.4f}, p99 lateness {late_text}: "
          f"{'holds' if holds else 'does not hold'}", file=sys.stderr)
    return 0 if holds else 1


def cmd_rate_summary(args) -> int:
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    cells: dict[tuple[int, str], list[dict]] = {}
    for r in rows:
        cells.setdefault((int(r["rate"]), r["tool"]), []).append(r)
    med = lambda rs, k: statistics.median(float(r[k]) for r in rs if r[k] not in ("", None))  # noqa: E731
    print("| rate asked | tool | achieved/s | achieved / asked | p99 send lateness µs | p99 latency ms "
          "| CPU µs/req | peak RSS MB | runs |")
    print("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
    verdicts = []
    for (rate, tool) in sorted(cells, key=lambda k: (k[0], {SUBJECT: 0, f"{SUBJECT}-1ms": 1}.get(k[1], 2))):
        rs = cells[(rate, tool)]
        achieved = med(rs, "achieved")
        late = [r for r in rs if r["lateness_p99_s"]]
        late_us = med(late, "lateness_p99_s") * 1e6 if late else None
        cpu = med(rs, "cpu_us_per_req")
        print(f"| {rate:,} | {tool} | {achieved:,.0f} | {achieved / rate:.4f} | "
              f"{'–' if late_us is None else f'{late_us:.0f}'} | {med(rs, 'latency_p99_s') * 1e3:.3f} | "
              f"{cpu:.2f} | {med(rs, 'rss_mb'):.1f} | {len(rs)} |")
        theirs = cells.get((rate, "oha"))
        oha_cpu = med(theirs, "cpu_us_per_req") if theirs else None
        if tool == f"{SUBJECT}-1ms" and oha_cpu:
            verdicts.append(f"- {rate:,}/s with requests bunched up to 1 ms: CPU/req {cpu / oha_cpu:.2f} × oha's")
        if tool == SUBJECT:
            verdicts.append(
                f"- {rate:,}/s: achieved within 0.5% {_verdict(abs(achieved / rate - 1), 0.005)}, "
                f"p99 lateness under 200 µs {_verdict(late_us, 200)}, CPU/req below oha's "
                f"{_verdict(None if oha_cpu is None else cpu / oha_cpu, 1.0)}"
                + (f" ({cpu / oha_cpu:.2f} × oha's)" if oha_cpu else ""))
    print()
    print(f"Targets (issue 13), {SUBJECT}:")
    print()
    for v in verdicts:
        print(v)
    return 0


def cmd_soak_summary(args) -> int:
    with open(args.csv, newline="", encoding="utf-8") as f:
        samples = [(int(r["seconds"]), int(r["rss_kib"])) for r in csv.DictReader(f)]
    with open(args.report, encoding="utf-8") as f:
        report = json.load(f)
    last_second = max((t for t, _ in samples), default=0)
    minutes: dict[int, list[int]] = {}
    for t, kib in samples:
        minutes.setdefault((t - 1) // 60, []).append(kib)
    print("| minute | samples | RSS MB min | RSS MB max |")
    print("|--:|--:|--:|--:|")
    for m in sorted(minutes):
        v = minutes[m]
        print(f"| {m + 1} | {len(v)} | {min(v) / 1024:.1f} | {max(v) / 1024:.1f} |")
    print()
    requests = report.get("requests", {})
    print(f"Requests: {requests.get('ok', 0):,} ok, {requests.get('errors', 0):,} errors in "
          f"{report.get('durationSeconds', 0):.0f} s ({report.get('requestsPerSec', 0):,.0f}/s).")
    # Minute 1 is the warm-up; minute 2 the first after it; the last full minute ends the run.
    last = (last_second - 1) // 60
    if 1 not in minutes or last <= 1:
        print("Verdict: n/a (the run is too short for a first and a last minute after the warm-up)")
        return 0
    first_max, last_max = max(minutes[1]), max(minutes[last])
    grew = (last_max - first_max) / 1024
    verdict = "PASS" if grew <= 1.0 else "FAIL"
    print(f"Verdict: the last minute's largest RSS is {last_max / 1024:.1f} MB, {grew:+.2f} MB from "
          f"the first minute after the warm-up ({first_max / 1024:.1f} MB): "
          f"{verdict} (flat: within 1 MB)")
    return 0


def run_measured(cmd: list[str], stdout=None, stderr=None):
    """Runs `cmd` under GNU time and returns its exit code (128 + N for signal N), its rusage
    from wait4 (CPU to the microsecond, where GNU time prints hundredths), its peak RSS in KiB
    from GNU time (0 if GNU time wrote none), and any other lines GNU time wrote (such as
    "Command exited with non-zero status N"). GNU time, not this Python, is the command's
    parent for the RSS: a process's maxrss counts the memory it had before its exec, so a child
    of Python would report at least Python's own."""
    with tempfile.NamedTemporaryFile(mode="r", encoding="utf-8", errors="replace") as rss:
        child = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd,
                                 stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        lines = [ln.strip() for ln in rss if ln.strip()]
    code = os.waitstatus_to_exitcode(status)
    maxrss = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    return (code if code >= 0 else 128 - code), usage, maxrss, lines[:-1] if maxrss else lines


def cmd_rusage(args) -> int:
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        print("rusage: no command", file=sys.stderr)
        return 2
    code, usage, maxrss, notes = run_measured(cmd)
    with open(args.o, "w", encoding="utf-8") as f:
        # GNU time's own lines go first, as GNU time itself would write them.
        for line in notes:
            print(line, file=f)
        print(f"{usage.ru_utime:.6f} {usage.ru_stime:.6f} {maxrss}", file=f)
    return code



# --------------------------------------------------------------------------- connections.sh

CONNS_FIELDS = ["tool", "threads", "conns", "run", "rc", "reported", "requests", "seconds",
                "connect_errors", "rss_kib", "note", "command"]


def _connect_errors(tool: str, text: str):
    """Connections the tool says it could not open, where its report says so (None: unknown)."""
    try:
        if tool == "volley":
            return int(json.loads(text.strip())["errors"]["connect"])
        if tool == "shb":
            return int(json.loads(text.strip())["requests"]["connectErrors"])
        if tool == "wrk":
            m = re.search(r"Socket errors: connect (\d+)", text)
            return int(m.group(1)) if m else 0
        if tool == "oha":
            doc = json.loads(text.strip())
            dist = doc.get("errorDistribution") or {}
            return sum(int(n) for err, n in dist.items() if "connect" in err.lower())
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return None


def cmd_conns_record(args) -> int:
    text = _read(args.stdout)
    row = {"tool": args.tool, "threads": args.threads, "conns": args.conns, "run": args.run,
           "rc": args.rc, "reported": 0, "requests": "", "seconds": "", "connect_errors": "",
           "rss_kib": "", "note": "", "command": args.command}
    try:
        _, _, rss = parse_time_file(args.time)
        row["rss_kib"] = rss
    except ParseError as e:
        row["note"] = str(e)
    try:
        requests, seconds = PARSERS[args.tool](text)
        row.update(reported=1, requests=requests, seconds=f"{seconds:.3f}")
    except ParseError as e:
        row["note"] = (row["note"] + "; " if row["note"] else "") + f"no report: {e}; " + \
            _first_line(_read(args.stderr))
    errors = _connect_errors(args.tool, text)
    row["connect_errors"] = "" if errors is None else errors
    new = not os.path.exists(args.csv)
    with open(args.csv, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CONNS_FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    rss_mb = f"{row['rss_kib'] / 1024:.1f} MB" if row["rss_kib"] != "" else "no RSS"
    print(f"{args.tool} -t {args.threads} -c {args.conns} run {args.run}: rc {args.rc}, {rss_mb}, "
          f"{'report' if row['reported'] else 'NO REPORT'}, connect errors {'?' if errors is None else errors}"
          + (f" ({row['note']})" if row["note"] else ""), file=sys.stderr)
    return 0


def cmd_conns_summary(args) -> int:
    with open(args.csv, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    tools = list(dict.fromkeys(r["tool"] for r in rows))
    threads = sorted({int(r["threads"]) for r in rows})
    conns = sorted({int(r["conns"]) for r in rows})

    def runs(tool, t, c):
        return [r for r in rows if r["tool"] == tool and int(r["threads"]) == t and int(r["conns"]) == c]

    def median_rss(tool, t, c):
        vals = [int(r["rss_kib"]) for r in runs(tool, t, c) if r["rss_kib"] != ""]
        return statistics.median(vals) if vals else None

    print("| tool | threads | connections | peak RSS MB | KiB per connection | reported | connect errors | req/s |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for t in threads:
        for c in conns:
            for tool in tools:
                rs = runs(tool, t, c)
                if not rs:
                    continue
                rss = median_rss(tool, t, c)
                reported = sum(int(r["reported"]) for r in rs)
                errs = [r["connect_errors"] for r in rs]
                rps = [int(r["requests"]) / float(r["seconds"]) for r in rs
                       if r["requests"] and r["seconds"] and float(r["seconds"]) > 0]
                print(f"| {tool} | {t} | {c:,} | {_fmt(rss / 1024 if rss else None, 1)} | "
                      f"{_fmt(rss / c if rss else None, 2)} | {reported}/{len(rs)} | {'/'.join(e if e != '' else '?' for e in errs)} | "
                      f"{_fmt(statistics.median(rps) if rps else None, 0)} |")
    if len(conns) < 2:
        return 0
    lo, hi = conns[0], conns[-1]
    print()
    print(f"Memory per connection, (RSS at {hi:,} − RSS at {lo:,}) / {hi - lo:,}, in KiB:")
    print()
    print("| threads | " + " | ".join(tools) + " | volley / wrk | goal ≤ 0.5 |")
    print("|---:|" + "---:|" * len(tools) + "---:|---|")
    for t in threads:
        per = {}
        for tool in tools:
            a, b = median_rss(tool, t, lo), median_rss(tool, t, hi)
            per[tool] = (b - a) / (hi - lo) if a is not None and b is not None else None
        ratio = _ratio(per.get("volley"), per.get("wrk"))
        every_report = all(int(r["reported"]) for r in rows if r["tool"] == "volley" and int(r["threads"]) == t)
        verdict = "n/a" if ratio is None else ("PASS" if ratio <= 0.5 and every_report else "FAIL")
        if ratio is not None and not every_report:
            verdict += " (a volley run did not report)"
        print(f"| {t} | " + " | ".join(_fmt(per[tool], 2) for tool in tools)
              + f" | {_fmt(ratio, 2)} | {verdict} |")
    return 0

def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    sub.add_parser("free-port").set_defaults(fn=cmd_free_port)

    s = sub.add_parser("rusage")
    s.add_argument("-o", required=True)
    s.add_argument("command", nargs=argparse.REMAINDER)
    s.set_defaults(fn=cmd_rusage)

    s = sub.add_parser("wait-http")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
    s.add_argument("--mode", choices=["http", "h2c", "tls"], default="http")
    s.set_defaults(fn=cmd_wait_http)

    s = sub.add_parser("parse")
    s.add_argument("tool", choices=list(PARSERS))
    s.add_argument("file")
    s.set_defaults(fn=cmd_parse)

    s = sub.add_parser("record")
    for name in ("csv", "proto", "stdout", "stderr", "time"):
        s.add_argument("--" + name, required=True)
    s.add_argument("--tool", required=True, choices=list(PARSERS))
    s.add_argument("--conns", required=True, type=int)
    s.add_argument("--streams", type=int)
    s.add_argument("--run", required=True, type=int)
    s.add_argument("--rc", required=True, type=int)
    s.set_defaults(fn=cmd_record)

    s = sub.add_parser("conns-record")
    for name in ("csv", "stdout", "stderr", "time", "command"):
        s.add_argument("--" + name, required=True)
    s.add_argument("--tool", required=True, choices=["volley", "wrk", "shb", "oha"])
    for name in ("threads", "conns", "run", "rc"):
        s.add_argument("--" + name, required=True, type=int)
    s.set_defaults(fn=cmd_conns_record)

    s = sub.add_parser("conns-summary")
    s.add_argument("csv")
    s.set_defaults(fn=cmd_conns_summary)

    s = sub.add_parser("unavailable")
    for name in ("csv", "proto", "tool", "reason"):
        s.add_argument("--" + name, required=True)
    s.add_argument("--conns", required=True, type=int)
    s.add_argument("--streams", type=int)
    s.set_defaults(fn=cmd_unavailable)

    s = sub.add_parser("summarize")
    s.add_argument("csv")
    s.add_argument("--subject", default=SUBJECT, help="the tool the ratios are of (default volley)")
    s.set_defaults(fn=cmd_summarize)

    s = sub.add_parser("rate-record")
    for name in ("csv", "stdout", "time"):
        s.add_argument("--" + name, required=True)
    s.add_argument("--tool", required=True, choices=["volley", "volley-1ms", "oha"])
    for name in ("rate", "run", "rc"):
        s.add_argument("--" + name, required=True, type=int)
    s.set_defaults(fn=cmd_rate_record)

    s = sub.add_parser("rate-summary")
    s.add_argument("csv")
    s.set_defaults(fn=cmd_rate_summary)

    s = sub.add_parser("rate-holds")
    s.add_argument("--rate", required=True, type=int)
    s.add_argument("--stdout", required=True)
    s.set_defaults(fn=cmd_rate_holds)

    s = sub.add_parser("soak-summary")
    s.add_argument("csv")
    s.add_argument("report")
    s.set_defaults(fn=cmd_soak_summary)

    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# =========================================================================== distributed.sh
# Used by bench/distributed.sh, which imports this module and calls dist_main(argv):
#
#   wait-port PORT SECONDS
#       Wait until 127.0.0.1:PORT accepts a TCP connection (exit 1 on timeout).
#   run --mode local|distributed --run R --jsonl F --out F --err F --timeout S
#       [--worker-pid PID --worker-log F ...] -- CMD...
#       Run one measured client command, append one JSON row to F (see dist_run_row).
#   summarize --jsonl F --json-out F
#       Print the markdown table and target lines; write the raw rows and medians as JSON.
#
# How the numbers are taken (all from outside volley, except what its -j report states):
#   - req/s, run duration, start skew and the per-worker split come from the controller's
#     JSON report (requestsPerSec, durationSeconds, startSkewSeconds, workers[]).
#   - client CPU: the local run's and the controller's own (user+sys) from wait4() rusage;
#     each worker daemon's from /proc/PID/stat utime+stime, read before the run and again
#     DIST_CPU_SETTLE seconds after the controller exits (so its wind-down is counted).
#   - report latency: the wall-clock instant the controller's stdout closed (report printed,
#     process exiting) minus the planned end of the run. The planned end is the start instant
#     plus the -z duration; the start instant is read from the workers' "start set in_ms=N"
#     log lines (line timestamp + N ms; N is truncated to whole ms, so the start comes out
#     up to 1 ms early and the latency up to 1 ms long). Also kept: the same instant minus
#     the latest "run finished" line, which a worker logs when its shard has wound down, just
#     before it sends its result (result transfer -> merge -> printed report only).
#     All clocks are this host's CLOCK_REALTIME (tracing's timestamps are µs).
#   - overhead: launch-to-stdout-EOF minus durationSeconds: process start, worker
#     connect + clock sync, opening the connections, start margin, and the report. It bounds
#     the report latency from above and needs no worker logs.

DIST_CPU_SETTLE = 0.2
DIST_TARGET_RPS_RATIO = 0.95      # distributed req/s >= 0.95 x local
DIST_TARGET_SKEW_S = 1e-3         # start skew under 1 ms on one host
DIST_TARGET_REPORT_S = 0.300      # end of run -> printed report under 300 ms

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACING_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z")


def _proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process, all its threads, in seconds."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    # after "pid (comm) ": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    # cmajflt utime stime ...
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tracing_epoch(line: str) -> float | None:
    """The UTC timestamp that starts a tracing_subscriber fmt line, as epoch seconds."""
    m = _TRACING_TS.match(_ANSI.sub("", line))
    if not m:
        return None
    import calendar
    secs = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    return secs + (float(m.group(2)) if m.group(2) else 0.0)


def _new_log_lines(path: str, offset: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return []
    return [_ANSI.sub("", ln) for ln in data.decode("utf-8", "replace").splitlines()]


def _run_bounded(cmd: list[str], out_path: str, err_path: str, timeout: float):
    """Runs cmd; returns (rc, stdout bytes, t_launch, t_eof, rusage). Wall times are epoch."""
    import selectors
    import subprocess
    with open(err_path, "wb") as err:
        t_launch = time.time()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    deadline = time.monotonic() + timeout
    chunks, timed_out = [], False
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    fd = p.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            p.kill()
            break
        if not sel.select(left):
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    t_eof = time.time()
    sel.close()
    p.stdout.close()
    _, status, rusage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    rc = 124 if timed_out else p.returncode
    out = b"".join(chunks)
    with open(out_path, "wb") as f:
        f.write(out)
    return rc, out, t_launch, t_eof, rusage


def dist_run_row(args) -> dict:
    row = {"mode": args.mode, "run": args.run, "status": "ok", "note": ""}
    pids = args.worker_pid or []
    logs = args.worker_log or []
    cpu_before = [_proc_cpu_seconds(p) for p in pids]
    offsets = []
    for path in logs:
        try:
            offsets.append(os.path.getsize(path))
        except OSError:
            offsets.append(0)
    rc, out, t_launch, t_eof, ru = _run_bounded(args.cmd, args.out, args.err, args.timeout)
    if pids:
        time.sleep(DIST_CPU_SETTLE)
    cpu_after = [_proc_cpu_seconds(p) for p in pids]
    row.update(rc=rc, launch_to_eof_s=t_eof - t_launch,
               controller_cpu_s=ru.ru_utime + ru.ru_stime)

    def fail(note: str) -> dict:
        row["status"] = "failed"
        row["note"] = row["note"] or note
        return row

    worker_cpu = []
    for pid, a, b in zip(pids, cpu_before, cpu_after):
        if a is None or b is None:
            return fail(f"worker pid {pid} is gone")
        worker_cpu.append(round(b - a, 6))
    row["worker_cpu_s"] = worker_cpu
    row["client_cpu_s"] = row["controller_cpu_s"] + sum(worker_cpu)

    # The workers' "run finished" lines for this run (logged before the result is sent).
    finished, starts = [], []
    for path, off in zip(logs, offsets):
        lines = _new_log_lines(path, off)
        stamps = [_tracing_epoch(ln) for ln in lines if "run finished" in ln]
        stamps = [s for s in stamps if s is not None]
        finished.append(stamps[-1] if stamps else None)
        start = None
        for ln in lines:
            m = re.search(r"start set\s+in_ms=(\d+)", ln)
            ts = _tracing_epoch(ln) if m else None
            if ts is not None:
                start = ts + int(m.group(1)) / 1e3
        starts.append(start)
    row["worker_finished_epoch"] = finished
    row["worker_start_epoch"] = starts

    if rc == 124:
        return fail(f"timed out after {args.timeout:g} s")
    if rc != 0:
        err = _first_line(_read(args.err)) or _first_line(out.decode("utf-8", "replace"))
        return fail(f"exit {rc}: {err}")
    try:
        text = out.decode("utf-8", "replace")
        requests, duration = parse_volley(text)
        doc = json.loads(text[text.find("{"):text.rfind("}") + 1])  # parse_volley checked it
    except (ParseError, json.JSONDecodeError) as e:
        return fail(str(e))
    row.update(requests=requests, duration_s=duration,
               rps=doc.get("requestsPerSec") or (requests / duration if duration else 0),
               errors=doc.get("errors"),
               start_skew_s=doc.get("startSkewSeconds"),
               overhead_s=(t_eof - t_launch) - duration)
    workers = doc.get("workers") or []
    row["workers"] = [{k: w.get(k) for k in ("address", "connections", "threads", "requestsPerSec",
                                             "startOffsetSeconds", "durationSeconds",
                                             "clientCpuSeconds", "failure")} for w in workers]
    if requests <= 0:
        return fail("completed no requests")
    if duration <= 0:
        return fail("reported a zero duration")
    row["cpu_us_per_req"] = row["client_cpu_s"] * 1e6 / requests
    row["client_cpu_pct"] = 100 * row["client_cpu_s"] / duration
    if args.mode == "distributed":
        bad = [f"{w.get('address')}: {w.get('failure')}" for w in workers if w.get("failure")]
        if bad:
            return fail("worker failed: " + "; ".join(bad))
        if len(workers) != len(pids):
            return fail(f"report lists {len(workers)} workers, expected {len(pids)}")
        if row["start_skew_s"] is None:
            return fail("report has no startSkewSeconds")
        if any(f is None for f in finished) or any(x is None for x in starts):
            row["note"] = "no 'start set'/'run finished' line in a worker log: report latency n/a"
        else:
            row["planned_end_epoch"] = max(starts) + args.seconds
            row["report_latency_s"] = t_eof - row["planned_end_epoch"]
            row["finished_to_report_s"] = t_eof - max(finished)
    return row


def _dist_cmd_run(args) -> int:
    row = dist_run_row(args)
    with open(args.jsonl, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    if row["status"] == "ok":
        extra = ""
        if row["mode"] == "distributed":
            rl = row.get("report_latency_s")
            extra = (f"  skew {row['start_skew_s'] * 1e3:6.3f} ms  report "
                     + (f"{rl * 1e3:5.0f} ms" if rl is not None else "  n/a"))
        print(f"  {row['mode']:11s} run {row['run']}: {row['rps']:>9.0f} req/s  "
              f"{row['cpu_us_per_req']:6.2f} CPU us/req  overhead {row['overhead_s'] * 1e3:5.0f} ms"
              f"{extra}", file=sys.stderr)
    else:
        print(f"  {row['mode']:11s} run {row['run']}: FAILED ({row['note']})", file=sys.stderr)
    return 0 if row["status"] == "ok" or not args.probe else 1


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _pass(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _dist_cmd_summarize(args) -> int:
    with open(args.jsonl, encoding="utf-8") as f:
        rows = [json.loads(ln) for ln in f if ln.strip()]
    modes = ["local", "distributed"]
    ok = {m: [r for r in rows if r["mode"] == m and r["status"] == "ok"] for m in modes}
    tried = {m: [r for r in rows if r["mode"] == m] for m in modes}
    med = {}
    for m in modes:
        rs = ok[m]
        med[m] = {
            "rps": _median(r["rps"] for r in rs),
            "cpu_us_per_req": _median(r["cpu_us_per_req"] for r in rs),
            "client_cpu_pct": _median(r["client_cpu_pct"] for r in rs),
            "overhead_ms": _median(r["overhead_s"] * 1e3 for r in rs),
            "skew_ms": _median(r.get("start_skew_s") and r["start_skew_s"] * 1e3 for r in rs),
            "skew_max_ms": max((r["start_skew_s"] * 1e3 for r in rs
                                if r.get("start_skew_s") is not None), default=None),
            "report_ms": _median(r.get("report_latency_s") and r["report_latency_s"] * 1e3
                                 for r in rs),
            "report_max_ms": max((r["report_latency_s"] * 1e3 for r in rs
                                  if r.get("report_latency_s") is not None), default=None),
            "finished_to_report_ms": _median(r.get("finished_to_report_s")
                                             and r["finished_to_report_s"] * 1e3 for r in rs),
            "runs_ok": len(rs), "runs": len(tried[m]),
        }

    def cell(v, digits):
        return _fmt(v, digits) if v is not None else "–"

    print("| mode | req/s | client CPU µs/req | client CPU % | start skew ms (median / max) "
          "| end of run → report ms (median / max) | launch→report minus run, ms | runs ok |")
    print("|---|--:|--:|--:|--:|--:|--:|---|")
    for m in modes:
        d = med[m]
        failed = [r for r in tried[m] if r["status"] != "ok"]
        runs = f"{d['runs_ok']}/{d['runs']}" + (f" (failed: {failed[0]['note']})" if failed else "")
        if m == "distributed":
            skew = f"{cell(d['skew_ms'], 3)} / {cell(d['skew_max_ms'], 3)}"
            rep = f"{cell(d['report_ms'], 0)} / {cell(d['report_max_ms'], 0)}"
        else:
            skew = rep = "–"
        print(f"| {m} | {cell(d['rps'], 0)} | {cell(d['cpu_us_per_req'], 2)} "
              f"| {cell(d['client_cpu_pct'], 0)} | {skew} | {rep} | {cell(d['overhead_ms'], 0)} "
              f"| {runs} |")
    print()

    # Worker split and CPU split of the distributed runs.
    if ok["distributed"]:
        addrs = [w["address"] for w in ok["distributed"][0]["workers"]]
        parts = []
        for i, a in enumerate(addrs):
            rps = _median(r["workers"][i].get("requestsPerSec") for r in ok["distributed"]
                          if len(r["workers"]) > i)
            cpu = _median(r["worker_cpu_s"][i] for r in ok["distributed"]
                          if len(r["worker_cpu_s"]) > i)
            parts.append(f"{a} {cell(rps, 0)} req/s, {cell(cpu, 2)} CPU s")
        ctl = _median(r["controller_cpu_s"] for r in ok["distributed"])
        print(f"Distributed split (medians): {'; '.join(parts)}; controller {cell(ctl, 3)} CPU s.")
        print()

    lr, dr = med["local"]["rps"], med["distributed"]["rps"]
    ratio = _ratio(dr, lr)
    paired = _paired(ok["distributed"], ok["local"], "rps")
    print("Targets from the issue:")
    print()
    line = (f"- req/s, distributed / local: {cell(ratio, 3)} "
            f"(target ≥ {DIST_TARGET_RPS_RATIO}: "
            f"{_pass(None if ratio is None else ratio >= DIST_TARGET_RPS_RATIO)})")
    if paired:
        line += (f"; per-run pairs: median {statistics.median(paired):.3f}, "
                 f"range {min(paired):.3f}–{max(paired):.3f}")
    print(line)
    d = med["distributed"]
    skew_ok = None if d["skew_max_ms"] is None else d["skew_max_ms"] < DIST_TARGET_SKEW_S * 1e3
    print(f"- start skew: median {cell(d['skew_ms'], 3)} ms, max {cell(d['skew_max_ms'], 3)} ms "
          f"(target < {DIST_TARGET_SKEW_S * 1e3:g} ms in every run: {_pass(skew_ok)})")
    reps = [r["report_latency_s"] * 1e3 for r in ok["distributed"]
            if r.get("report_latency_s") is not None]
    rep_ok = None if d["report_ms"] is None else d["report_ms"] < DIST_TARGET_REPORT_S * 1e3
    over = sum(1 for v in reps if v >= DIST_TARGET_REPORT_S * 1e3)
    print(f"- end of run → printed report: median {cell(d['report_ms'], 0)} ms, max "
          f"{cell(d['report_max_ms'], 0)} ms (target < {DIST_TARGET_REPORT_S * 1e3:g} ms: "
          f"{_pass(rep_ok)} on the median, {over} of {len(reps)} runs at or over); of that, "
          f"median {cell(d['finished_to_report_ms'], 0)} ms pass after the last worker logged "
          f"\"run finished\" (the rest is the shards winding down)")
    print(f"- upper bound without worker logs: launch → report minus the run's duration, median "
          f"{cell(d['overhead_ms'], 0)} ms (local run: {cell(med['local']['overhead_ms'], 0)} ms); "
          f"this also holds connecting, clock sync, opening connections and the start margin")

    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"meta": json.loads(args.meta) if args.meta else {}, "medians": med,
                       "ratio_rps": ratio, "paired_ratios": paired, "runs": rows}, f, indent=1)
            f.write("\n")
    return 0


def _dist_cmd_wait_port(args) -> int:
    deadline = time.monotonic() + args.seconds
    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", args.port), timeout=1):
                return 0
        except OSError as e:
            last = str(e)
        time.sleep(0.05)
    print(f"nothing accepts on 127.0.0.1:{args.port}: {last}", file=sys.stderr)
    return 1


def dist_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="benchlib dist")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("wait-port")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
    s.set_defaults(fn=_dist_cmd_wait_port)
    s = sub.add_parser("run")
    s.add_argument("--mode", required=True, choices=["local", "distributed"])
    s.add_argument("--run", required=True, type=int)
    for name in ("jsonl", "out", "err"):
        s.add_argument("--" + name, required=True)
    s.add_argument("--timeout", required=True, type=float)
    s.add_argument("--seconds", required=True, type=float, help="the run's -z duration")
    s.add_argument("--worker-pid", type=int, action="append")
    s.add_argument("--worker-log", action="append")
    s.add_argument("--probe", action="store_true", help="exit 1 if the run failed")
    s.add_argument("cmd", nargs="+")
    s.set_defaults(fn=_dist_cmd_run)
    s = sub.add_parser("summarize")
    s.add_argument("--jsonl", required=True)
    s.add_argument("--json-out")
    s.add_argument("--meta", help="JSON object stored under 'meta' in --json-out")
    s.set_defaults(fn=_dist_cmd_summarize)
    args = p.parse_args(argv)
    return args.fn(args)
