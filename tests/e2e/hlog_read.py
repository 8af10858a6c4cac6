#!/usr/bin/env python3
"""Reads a volley --hlog interval log with the `hdrhistogram` package from PyPI (HdrHistogram_py:
HdrHistogram's log format and codec written by others, not volley's code) and prints what it
found as JSON on stdout: per tag, every interval's start, length, count and max, and the count,
min, max, percentiles and recorded values (bucket, count) of all its intervals added up. tests/e2e/hlog.rs compares that with the
run's own report.

Usage: hlog_read.py FILE
"""

import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

# volley's range: 1 ns to one hour, 3 significant digits.
LOWEST, HIGHEST, DIGITS = 1, 3_600_000_000_000, 3
PERCENTILES = [10, 25, 50, 75, 90, 95, 99, 99.9, 99.99]


def main(path):
    reader = HistogramLogReader(path, HdrHistogram(LOWEST, HIGHEST, DIGITS))
    tags = {}
    while True:
        interval = reader.get_next_interval_histogram()
        if interval is None:
            break
        tag = tags.setdefault(interval.get_tag(), {"intervals": [], "sum": HdrHistogram(LOWEST, HIGHEST, DIGITS)})
        start_ms, end_ms = interval.get_start_time_stamp(), interval.get_end_time_stamp()
        tag["intervals"].append(
            {
                "start": round(start_ms / 1000.0 - reader.get_start_time_sec(), 3),
                "length": round((end_ms - start_ms) / 1000.0, 3),
                "count": interval.get_total_count(),
                "max": interval.get_max_value(),
            }
        )
        # Adding an empty interval changes nothing, but HdrHistogram_py 0.10.8's add takes the
        # empty one's min as 0 when both have the same layout (as volley's full-range ones do).
        if interval.get_total_count():
            tag["sum"].add(interval)
    out = {}
    for name, tag in tags.items():
        total = tag["sum"]
        empty = total.get_total_count() == 0
        out[name] = {
            "intervals": tag["intervals"],
            "count": total.get_total_count(),
            "min": None if empty else total.get_min_value(),
            "max": None if empty else total.get_max_value(),
            "percentiles": {str(p): total.get_value_at_percentile(p) for p in PERCENTILES} if not empty else {},
            "recorded": [[v.value_iterated_to, v.count_added_in_this_iter_step] for v in total.get_recorded_iterator()],
        }
    json.dump({"startTime": reader.get_start_time_sec(), "tags": out}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
