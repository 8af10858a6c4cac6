"""bench/fleet-scale.sh's arithmetic: one run's row from the controller's JSON report, the
simulated fleet's line of what its synthetic engines produced, /usr/bin/time's numbers and the
instant the controller exited.

    python3 fleet_scale.py row K SECONDS REPORT PRODUCED TIMES ENDED
    python3 fleet_scale.py failed K SECONDS REPORT TIMES SIM_TIMES
    python3 fleet_scale.py header

A run that fails (the controller exits non-zero) gets a row all the same: why its workers failed,
counted by reason, and the CPU the controller and the simulated fleet used, which is what says
whether K fits on this machine.
"""

import json
import os
import statistics
import sys

COLUMNS = [
    "workers", "seconds", "skew median ms", "skew max ms", "controller CPU (cores, avg)",
    "CPU s", "peak RSS MB", "end to report s", "report MB", "totals exact", "per-worker series",
]


def header():
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "|".join("---:" for _ in COLUMNS) + "|")


def exact(report, produced):
    """Every total the synthetic engines produced, as the merged report has it."""
    checks = [
        report["requests"]["total"] == produced["requests"]["total"],
        report["requests"]["ok"] == produced["requests"]["ok"],
        report["requests"]["errors"] == produced["requests"]["errors"],
        report["statusCodes"] == produced["statusCodes"],
        report["bytesSent"] == produced["bytesSent"],
        report["bytesReceived"] == produced["bytesReceived"],
        report["connectionsMade"] == produced["connectionsMade"],
        report["latencySeconds"]["count"] == produced["latencySeconds"]["count"],
        report["latencySeconds"]["max"] == produced["latencySeconds"]["max"],
        report["latencySeconds"]["percentiles"] == produced["latencySeconds"]["percentiles"],
    ]
    return all(checks)


def row(k, seconds, report_path, produced_path, times_path, ended):
    with open(report_path) as f:
        report = json.load(f)
    with open(produced_path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    produced = lines[-1] if lines else None
    elapsed, user, system, rss_kb = (float(x) for x in open(times_path).read().split()[-4:])
    offsets = [abs(w["startOffsetSeconds"]) for w in report["workers"] if w.get("startOffsetSeconds") is not None]
    skew_median = statistics.median(offsets) * 1e3 if offsets else float("nan")
    skew_max = report.get("startSkewSeconds") or 0.0
    cpu = user + system
    end_to_report = float("nan")
    if produced and produced.get("startedAtUnixSeconds"):
        end_to_report = float(ended) - (produced["startedAtUnixSeconds"] + float(seconds))
    size_mb = os.path.getsize(report_path) / 1e6
    kept = report.get("workerSeries") or {}
    series = f'{kept.get("detailed", "all")} full, {kept.get("summarised", 0)} summarised' 
    ok = "yes" if produced and exact(report, produced) else "NO"
    cells = [
        k, seconds, f"{skew_median:.2f}", f"{skew_max * 1e3:.2f}", f"{cpu / elapsed:.2f}", f"{cpu:.1f}",
        f"{rss_kb / 1024:.0f}", f"{end_to_report:.2f}", f"{size_mb:.2f}", ok, series,
    ]
    print("| " + " | ".join(str(c) for c in cells) + " |")
    return 0 if ok == "yes" else 1


def reason(failure):
    """A worker's failure without what differs from one worker to the next."""
    for known in ("no heartbeat", "sent nothing for", "connection broke", "no result by the end", "not ready within"):
        if known in failure:
            return known
    return failure[:60]


def failed(k, seconds, report_path, times_path, sim_times_path):
    """A failed run's row: its workers' failures by reason and both processes' CPU."""
    def cpu(path):
        try:
            elapsed, user, system, rss_kb = (float(x) for x in open(path).read().split()[-4:])
        except (OSError, ValueError):
            return None
        return elapsed, user + system, rss_kb
    reasons = {}
    try:
        with open(report_path) as f:
            report = json.load(f)
        for w in report["workers"]:
            if w.get("failure"):
                key = reason(w["failure"])
                reasons[key] = reasons.get(key, 0) + 1
        ran = f'{report.get("durationSeconds", 0):.1f}'
    except (OSError, ValueError, KeyError):
        ran = "?"
    why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])) or "no report"
    controller, sim = cpu(times_path), cpu(sim_times_path)
    cores = lambda t: f"{t[1] / t[0]:.2f}" if t and t[0] > 0 else "?"
    cells = [
        k, seconds, "-", "-", cores(controller), f"{controller[1]:.1f}" if controller else "?",
        f"{controller[2] / 1024:.0f}" if controller else "?", "-", "-",
        f"FAILED after {ran} s: {why}; simulated fleet {cores(sim)} cores", "-",
    ]
    print("| " + " | ".join(str(c) for c in cells) + " |")
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "header":
        header()
        sys.exit(0)
    if sys.argv[1] == "failed":
        sys.exit(failed(*sys.argv[2:7]))
    sys.exit(row(*sys.argv[2:9]))
