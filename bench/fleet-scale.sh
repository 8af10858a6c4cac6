#!/usr/bin/env bash
# bench/fleet-scale.sh — the controller against a simulated fleet: K workers served from one
# `volley sim-fleet` process (the real worker gRPC service and wire encoding, a synthetic
# engine that sends no load), driven by one `volley --workers @FILE -c K -z SECONDS` per K.
# Prints, per K, the start skew (median and max of the workers' start offsets), the
# controller's CPU (average cores over its whole life, and seconds) and peak RSS, the time
# from the planned end to the controller's exit with its report written, the JSON report's
# size, and whether its merged totals equal what the synthetic engines produced (requests,
# statuses, bytes, connections, the latency histogram's count, max and percentiles).
#
# Environment:
#   FLEET_SIZES="100 1000 5000"   the K to measure
#   BENCH_SECONDS=60              duration of each run (-z)
#   VOLLEY=./target/release/volley
#   BENCH_NO_BUILD=1              do not run `cargo build --release` for the default VOLLEY
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SIZES=${FLEET_SIZES:-100 1000 5000}
S=${BENCH_SECONDS:-60}
VOLLEY_DEFAULT=./target/release/volley
VOLLEY=${VOLLEY:-$VOLLEY_DEFAULT}
LIB=$ROOT/bench/lib/fleet_scale.py
[[ $S =~ ^[1-9][0-9]*$ ]] || { echo "fleet-scale.sh: BENCH_SECONDS must be a whole number ≥ 1" >&2; exit 2; }

log() { printf '%s\n' "$*" >&2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/volley-fleet-scale.XXXXXX")
SIM_PID=
# SIM_PID is /usr/bin/time's: the simulated fleet is its child, which ends on SIGTERM, and then
# time writes what it used.
stop_sim() {
  pkill -TERM -P "$SIM_PID" 2>/dev/null || kill -TERM "$SIM_PID" 2>/dev/null
  wait "$SIM_PID" 2>/dev/null || true
}
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local rc=$?
  if [[ -n $SIM_PID ]]; then
    stop_sim
  fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT INT TERM

if [[ $VOLLEY == "$VOLLEY_DEFAULT" && ${BENCH_NO_BUILD:-0} != 1 ]] && command -v cargo >/dev/null; then
  log "building volley: cargo build --release"
  cargo build --release >"$TMP/cargo-build.log" 2>&1 || { log "cargo build failed:"; tail -20 "$TMP/cargo-build.log" >&2; exit 1; }
fi
[[ -x $VOLLEY ]] || { log "fleet-scale.sh: $VOLLEY not found"; exit 1; }

python3 -B "$LIB" header
status=0
for k in $SIZES; do
  dir=$TMP/k$k
  mkdir -p "$dir"
  # Under /usr/bin/time, so a failed run can say what the simulated fleet's CPU was.
  /usr/bin/time -o "$dir/sim.times" -f "%e %U %S %M" \
    "$VOLLEY" sim-fleet --workers "$k" --workers-file "$dir/workers.txt" >"$dir/produced.jsonl" 2>"$dir/sim.err" &
  SIM_PID=$!
  for _ in $(seq 1200); do
    [[ -f $dir/workers.txt ]] && break
    kill -0 "$SIM_PID" 2>/dev/null || break
    sleep 0.1
  done
  [[ -f $dir/workers.txt ]] || { log "sim-fleet for $k workers did not start:"; cat "$dir/sim.err" >&2; exit 1; }
  # Bounded: the run's length plus set-up and the controller's own grace periods.
  rc=0
  timeout $((S + 180)) /usr/bin/time -o "$dir/times" -f "%e %U %S %M" \
    "$VOLLEY" --workers "@$dir/workers.txt" -c "$k" -t 1 -z "${S}s" -o "json:$dir/report.json" \
    http://127.0.0.1:9/ >"$dir/report.txt" 2>"$dir/controller.err" || rc=$?
  ended=$(date +%s.%N)
  # The sim-fleet prints its line as the last shard ends; give it a moment if it trails.
  for _ in $(seq 50); do [[ -s $dir/produced.jsonl ]] && break; sleep 0.1; done
  stop_sim
  SIM_PID=
  if ((rc != 0)) || [[ ! -f $dir/report.json ]]; then
    log "controller for $k workers exited $rc:"
    tail -c 600 "$dir/controller.err" >&2
    python3 -B "$LIB" failed "$k" "$S" "$dir/report.json" "$dir/times" "$dir/sim.times" || true
    status=1
    continue
  fi
  python3 -B "$LIB" row "$k" "$S" "$dir/report.json" "$dir/produced.jsonl" "$dir/times" "$ended" || status=1
done
exit "$status"
