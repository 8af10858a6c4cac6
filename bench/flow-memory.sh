#!/usr/bin/env bash
# bench/flow-memory.sh — what a virtual user of a flow costs in memory: the peak RSS of a local
# run of BENCH_USERS connections, each a user of examples/scenarios/login.toml (a JSON token
# extracted and carried in a later step, a session cookie in its jar, three checks), against the same run of one
# static URL, both against `volley serve` on loopback. The goal (issue 37): at most 4 KB a user
# beyond its connection. Prints each run's peak RSS (GNU time's maximum resident set size) and
# the difference per user, for BENCH_RUNS interleaved pairs. Memory, not time: the numbers hold
# on a busy machine too.
#
# Environment:
#   BENCH_USERS=10000   connections (each a virtual user); needs as many open files
#   BENCH_RUNS=2        pairs of runs
#   BENCH_SECONDS=4     length of each run
#   VOLLEY=./target/release/volley
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VOLLEY=${VOLLEY:-$ROOT/target/release/volley}
USERS=${BENCH_USERS:-10000}
RUNS=${BENCH_RUNS:-2}
SECONDS_EACH=${BENCH_SECONDS:-4}
WORK=$(mktemp -d)
SERVE_PID=
cleanup() {
  [[ -z $SERVE_PID ]] || kill "$SERVE_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 1 "$VOLLEY" serve --listen "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
sleep 1

peak_kb() { # kind: one run, its peak RSS in KB; fails unless every connection came up without errors
  local kind=$1 args
  if [[ $kind == static ]]; then
    args=("http://127.0.0.1:$PORT/")
  else
    args=(--scenario "$ROOT/examples/scenarios/login.toml" "http://127.0.0.1:$PORT")
  fi
  /usr/bin/time -f %M -o "$WORK/rss" taskset -c 0 "$VOLLEY" -c "$USERS" -t 1 -z "${SECONDS_EACH}s" -j "${args[@]}" \
    >"$WORK/$kind.json" 2>"$WORK/$kind.err"
  python3 - "$WORK/$kind.json" "$USERS" <<'PY' >&2
import json, sys
r = json.load(open(sys.argv[1]))
connects, errors = r["connectSeconds"]["count"], r["requests"]["errors"]
if connects != int(sys.argv[2]) or errors:
    sys.exit(f"flow-memory.sh: {connects} connections came up, {errors} errors")
PY
  tail -n 1 "$WORK/rss"
}

echo "| run | static URL (KB) | flow (KB) | flow − static, per user (KB) |"
echo "|---|--:|--:|--:|"
for run in $(seq "$RUNS"); do
  static=$(peak_kb static)
  flow=$(peak_kb flow)
  per_user=$(python3 -c "print(f'{($flow - $static) / $USERS:.2f}')")
  echo "| $run | $static | $flow | $per_user |"
done
