#!/usr/bin/env python3
"""bench/ab.py: two or more client builds side by side, interleaved, against a server you started.

    bench/ab.py RUNS 'ARGS' NAME=BINARY [NAME=BINARY ...]

Each round runs every BINARY once with ARGS (which must make it print a volley- or shb-style
JSON report, -j, and bound the run, -z or -n), pinned to CPU $AB_CPU (default 0), one after
the other; the rounds interleave the builds so that a host's drift hits them alike. It prints,
per build, the medians of client CPU per request (user + system, and user alone, from the
child's rusage over the requests its report counted ok), requests/s and peak RSS, and every
run's CPU per request so the spread shows. See bench/README.md.
"""
import json
import os
import shlex
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from benchlib import run_measured  # noqa: E402


def run(binary, args, cpu):
    # timeout waits for the client, so the client's rusage is inside timeout's; the peak RSS
    # is GNU time's (see benchlib.run_measured).
    cmd = ["timeout", "-k", "5", "600", "taskset", "-c", cpu, binary] + args
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code, usage, rss_kb, _ = run_measured(cmd, stdout=out, stderr=err)
        if code not in (0, 4):  # 4: a threshold failed, the report still stands
            err.seek(0)
            why = err.read().decode(errors="replace").strip()[:300]
            raise RuntimeError(f"{binary} exited with {code}: {why}")
        out.seek(0)
        out = out.read()
    report = json.loads(out)
    ok = report["requests"]["ok"]
    if ok == 0:
        raise RuntimeError(f"{binary} completed no request")
    return (
        (usage.ru_utime + usage.ru_stime) * 1e6 / ok,
        usage.ru_utime * 1e6 / ok,
        ok / report["durationSeconds"],
        rss_kb / 1024,
    )


def main():
    if len(sys.argv) < 4 or not sys.argv[1].isdigit():
        sys.exit("usage: bench/ab.py RUNS 'ARGS' NAME=BINARY [NAME=BINARY ...]")
    runs, args = int(sys.argv[1]), shlex.split(sys.argv[2])
    builds = [b.split("=", 1) for b in sys.argv[3:]]
    if any(len(b) != 2 for b in builds):
        sys.exit("ab.py: each build is NAME=BINARY")
    cpu = os.environ.get("AB_CPU", "0")
    rows = {name: [] for name, _ in builds}
    for _ in range(runs):
        for name, binary in builds:
            try:
                rows[name].append(run(binary, args, cpu))
            except (RuntimeError, ValueError, KeyError) as e:
                sys.exit(f"ab.py: {name}: {e}")
    for name, _ in builds:
        v = rows[name]
        med = lambda k: statistics.median(x[k] for x in v)
        every = " ".join(f"{x[0]:.2f}" for x in v)
        print(f"{name:10} cpu {med(0):6.2f} us/req (user {med(1):5.2f})  {med(2) / 1000:7.1f} k req/s  rss {med(3):5.1f} MB   runs: {every}")


if __name__ == "__main__":
    main()
