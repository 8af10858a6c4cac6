#!/usr/bin/env python3
"""Helpers for bench/*.sh: parse client output, record CSV rows, print the summary.

Sub-commands (all used by bench/h1.sh; standard library only):

  free-port
      Print a free TCP port on 127.0.0.1.
  wait-http PORT SECONDS
      Poll http://127.0.0.1:PORT/ until it answers 200 "hello, world!\\n" (exit 1 on timeout).
  parse TOOL STDOUT_FILE
      Print "REQUESTS DURATION_SECONDS" parsed from a client's output (exit 1 with a reason).
  record --csv F --proto P --tool T --conns C --run R --rc N --stdout F --stderr F --time F
      Parse one client run and append a row to the CSV; print a one-line progress note.
  unavailable --csv F --proto P --tool T --conns C --reason TEXT
      Append a row saying the tool could not be run at all.
  summarize CSV
      Print the markdown table of medians and the volley ratio lines.

Requests completed means successful responses: volley `requests.total`, wrk's
"N requests" minus its "Non-2xx or 3xx responses", h2load's "N succeeded".
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import re
import socket
import statistics
import sys
import time

CSV_FIELDS = [
    "proto", "tool", "conns", "run", "status", "requests", "duration_s",
    "user_s", "sys_s", "maxrss_kb", "rps", "cpu_us_per_req", "rss_mb", "note",
]

# Targets from the issue, checked against the medians.
TARGET_CPU_VS = {"wrk": 0.8, "h2load": 0.7}   # volley CPU/req <= factor x other tool's
TARGET_RSS_MB = 16.0                          # volley peak RSS at TARGET_RSS_CONNS
TARGET_RSS_CONNS = 256
SUBJECT = "volley"


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


PARSERS = {"wrk": parse_wrk, "h2load": parse_h2load, "volley": parse_volley}


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


def cmd_wait_http(args) -> int:
    deadline = time.monotonic() + args.seconds
    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=1)
            conn.request("GET", "/")
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            if resp.status == 200 and body == b"hello, world!\n":
                return 0
            last = f"status {resp.status}, body {body[:40]!r}"
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
    new = not os.path.exists(csv_path) or os.path.getsize(csv_path) == 0
    with open(csv_path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in CSV_FIELDS})


def cmd_record(args) -> int:
    row = {"proto": args.proto, "tool": args.tool, "conns": args.conns, "run": args.run}
    out, err = _read(args.stdout), _read(args.stderr)
    try:
        user, sys_, maxrss = parse_time_file(args.time)
        row.update(user_s=f"{user:.2f}", sys_s=f"{sys_:.2f}", maxrss_kb=maxrss,
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
    if status == "ok":
        print(f"  {args.proto} {args.tool:7s} -c {args.conns:<4} run {args.run}: "
              f"{float(row['rps']):>10.0f} req/s  {float(row['cpu_us_per_req']):7.2f} CPU us/req  "
              f"{float(row['rss_mb']):6.1f} MB", file=sys.stderr)
    else:
        print(f"  {args.proto} {args.tool:7s} -c {args.conns:<4} run {args.run}: FAILED ({note})",
              file=sys.stderr)
    return 0


def cmd_unavailable(args) -> int:
    _append(args.csv, {"proto": args.proto, "tool": args.tool, "conns": args.conns, "run": 0,
                       "status": "unavailable", "note": args.reason})
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


def _verdict(value: float | None, limit: float) -> str:
    if value is None:
        return "n/a"
    return "PASS" if value <= limit else "FAIL"


def cmd_summarize(args) -> int:
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))

    # cells keyed by (proto, tool, conns) in first-seen order
    cells: dict[tuple[str, str, int], list[dict]] = {}
    for r in rows:
        cells.setdefault((r["proto"], r["tool"], int(r["conns"])), []).append(r)

    med: dict[tuple[str, str, int], dict] = {}
    print("| proto | tool | conns | req/s | CPU µs/req | peak RSS MB | client CPU % | runs ok |")
    print("|---|---|--:|--:|--:|--:|--:|---|")
    order = [SUBJECT] + [t for t in PARSERS if t != SUBJECT]
    for key in sorted(cells, key=lambda k: (k[0], k[2], order.index(k[1])
                                            if k[1] in order else 99, k[1])):
        proto, tool, conns = key
        rs = cells[key]
        ok = [r for r in rs if r["status"] == "ok"]
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
            print(f"| {proto} | {tool} | {conns} | {_fmt(m['rps'], 0)} | {_fmt(m['cpu'], 2)} "
                  f"| {_fmt(m['rss'], 1)} | {_fmt(m['busy'], 0)} | {runs} |")
        elif not attempted:
            print(f"| {proto} | {tool} | {conns} | not available | – | – | – | "
                  f"0 ({rs[0]['note']}) |")
        else:
            print(f"| {proto} | {tool} | {conns} | failed | – | – | – | "
                  f"0/{len(attempted)} ({attempted[0]['note']}) |")

    print()
    print(f"Ratios of medians, {SUBJECT} / other (targets from the issue: {SUBJECT}'s client CPU "
          f"per request at most 0.8 × wrk's and 0.7 × h2load's, peak RSS at most "
          f"{TARGET_RSS_MB:g} MB at -c {TARGET_RSS_CONNS}):")
    print()
    protos = sorted({k[0] for k in cells})
    for proto in protos:
        for conns in sorted({k[2] for k in cells if k[0] == proto}):
            mine = med.get((proto, SUBJECT, conns))
            if mine is None:
                print(f"- {proto} -c {conns}: n/a, {SUBJECT} has no successful runs here")
                continue
            parts = []
            for other in [t for t in PARSERS if t != SUBJECT]:
                if (proto, other, conns) not in cells:
                    continue
                theirs = med.get((proto, other, conns))
                g = (lambda m, k: m[k] if m else None)
                cpu = _ratio(g(mine, "cpu"), g(theirs, "cpu"))
                rps = _ratio(g(mine, "rps"), g(theirs, "rps"))
                rss = _ratio(g(mine, "rss"), g(theirs, "rss"))
                limit = TARGET_CPU_VS.get(other)
                target = f" (target ≤ {limit}: {_verdict(cpu, limit)})" if limit else ""
                parts.append(f"vs {other}: CPU/req {_fmt(cpu, 2)}{target}, "
                             f"req/s {_fmt(rps, 2)}, RSS {_fmt(rss, 2)}")
            line = f"- {proto} -c {conns}: " + ("; ".join(parts) if parts else "no other tool")
            if conns == TARGET_RSS_CONNS:
                rss_mb = mine["rss"]
                line += (f"; {SUBJECT} peak RSS {_fmt(rss_mb, 1)} MB "
                         f"(target ≤ {TARGET_RSS_MB:g} MB: {_verdict(rss_mb, TARGET_RSS_MB)})")
            print(line)
    if not any(k[2] == TARGET_RSS_CONNS for k in cells):
        print(f"- RSS target not checked: -c {TARGET_RSS_CONNS} was not among the points")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    sub.add_parser("free-port").set_defaults(fn=cmd_free_port)

    s = sub.add_parser("wait-http")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
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
    s.add_argument("--run", required=True, type=int)
    s.add_argument("--rc", required=True, type=int)
    s.set_defaults(fn=cmd_record)

    s = sub.add_parser("unavailable")
    for name in ("csv", "proto", "tool", "reason"):
        s.add_argument("--" + name, required=True)
    s.add_argument("--conns", required=True, type=int)
    s.set_defaults(fn=cmd_unavailable)

    s = sub.add_parser("summarize")
    s.add_argument("csv")
    s.set_defaults(fn=cmd_summarize)

    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
