#!/usr/bin/env bash
# bench/distributed.sh — distributed mode on loopback: 2 worker daemons × c/2 connections
# against one local run of c connections, the start skew, and the time from the end of the
# run to the printed report.
#
# One local nginx (1 worker, pinned to BENCH_SERVER_CPU) answers "hello, world!\n" on
# 127.0.0.1. Every client process is pinned to BENCH_CLIENT_CPU: the local volley run, both
# `volley worker` daemons and the `volley --workers` controller, so the distributed mode gets
# the same single client core as the local run. Local and distributed runs alternate; the
# medians are printed as a markdown table and saved, with every run's raw row, under
# bench/results/. See bench/README.md.
#
# Environment:
#   BENCH_SECONDS=4         duration of each run (-z)
#   BENCH_CONNS=64          total connections (the distributed run gives each worker half)
#   BENCH_RUNS=5            repetitions (one local and one distributed run each)
#   BENCH_SKEW_RUNS=9       short runs measuring the start skew with each worker on its own core
#   BENCH_CLIENT_CPU=0      CPU the clients (local run, workers, controller) are pinned to
#   BENCH_SERVER_CPU=1      CPU nginx is pinned to
#   VOLLEY=./target/release/volley
#   BENCH_NO_BUILD=1        do not run `cargo build --release` for the default VOLLEY
#   BENCH_NO_INSTALL=1      do not apt-get install missing tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
LIB=$ROOT/bench/lib/benchlib.py
NAME=distributed

S=${BENCH_SECONDS:-4}
RUNS=${BENCH_RUNS:-5}
SKEW_RUNS=${BENCH_SKEW_RUNS:-9}
C=${BENCH_CONNS:-64}
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-1}
VOLLEY_DEFAULT=./target/release/volley
VOLLEY=${VOLLEY:-$VOLLEY_DEFAULT}
NWORKERS=2

[[ $S =~ ^[1-9][0-9]*$ ]] || { echo "distributed.sh: BENCH_SECONDS must be a whole number ≥ 1" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "distributed.sh: BENCH_RUNS must be ≥ 1" >&2; exit 2; }
if ! [[ $C =~ ^[0-9]+$ ]] || ((C < NWORKERS)); then
  echo "distributed.sh: BENCH_CONNS must be a number ≥ $NWORKERS" >&2
  exit 2
fi

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$ROOT/bench/lib/common.sh"

# ---------------------------------------------------------------------------------------
# benchlib.py's distributed.sh helpers (dist_main); -B: no __pycache__ in the tree.
dlib() {
  python3 -B -c 'import sys; sys.path.insert(0, sys.argv[1]); import benchlib; sys.exit(benchlib.dist_main(sys.argv[2:]))' \
    "$ROOT/bench/lib" "$@"
}

WORKER_PIDS=()

# The worker daemons are stopped before nginx (cleanup in bench/lib/common.sh).
cleanup_hook() {
  local pid
  for pid in "${WORKER_PIDS[@]}"; do stop_pid "$pid"; done
}

build_volley() {
  if [[ $VOLLEY == "$VOLLEY_DEFAULT" && ${BENCH_NO_BUILD:-0} != 1 ]] && command -v cargo >/dev/null; then
    log "building volley: cargo build --release (log: $RAW/cargo-build.log)"
    run_child timeout 1800 cargo build --release >"$RAW/cargo-build.log" 2>&1 ||
      die "cargo build --release failed, see $RAW/cargo-build.log"
  fi
  [[ -x $VOLLEY ]] || die "$VOLLEY not found"
}

# The same server as bench/h1.sh (start_nginx in bench/lib/common.sh), on one port.
start_server() {
  PORT=$(python3 "$LIB" free-port)
  URL="http://127.0.0.1:$PORT/"
  start_nginx "$PORT" "listen 127.0.0.1:$PORT;"
  log "nginx (pid $NGINX_PID, CPU $SERVER_CPU) serving $URL"
}

# The worker daemons, started once for all runs. taskset execs volley, so $! is the daemon.
start_workers() {
  local i port
  WORKER_ADDRS=()
  WORKER_LOGS=()
  WORKER_CMDS=()
  for ((i = 1; i <= NWORKERS; i++)); do
    port=$(python3 "$LIB" free-port)
    local cmd=(taskset -c "$CLIENT_CPU" "$VOLLEY" worker --listen "127.0.0.1:$port")
    "${cmd[@]}" </dev/null >/dev/null 2>"$RAW/worker-$i.log" &
    WORKER_PIDS+=($!)
    WORKER_ADDRS+=("127.0.0.1:$port")
    WORKER_LOGS+=("$RAW/worker-$i.log")
    WORKER_CMDS+=("$(show_cmd "${cmd[@]}") 2>worker-$i.log &")
  done
  for ((i = 0; i < NWORKERS; i++)); do
    if ! dlib wait-port "${WORKER_ADDRS[$i]##*:}" 10; then
      cat "${WORKER_LOGS[$i]}" >&2 || true
      die "worker $((i + 1)) did not come up"
    fi
  done
  log "workers (CPU $CLIENT_CPU): $(for i in "${!WORKER_ADDRS[@]}"; do printf '%s (pid %s) ' "${WORKER_ADDRS[$i]}" "${WORKER_PIDS[$i]}"; done)"
}

check_alive() {
  check_nginx
  local i
  for i in "${!WORKER_PIDS[@]}"; do
    kill -0 "${WORKER_PIDS[$i]}" 2>/dev/null || die "worker ${WORKER_ADDRS[$i]} died (see ${WORKER_LOGS[$i]})"
  done
}

# The local run has as many engine threads as the workers together (one each), so the ratio
# is what distribution costs (processes, gRPC, merging), not what a second thread on the one
# client core costs.
cmd_local() { # conns seconds
  CMD=(taskset -c "$CLIENT_CPU" "$VOLLEY" -t "$NWORKERS" -c "$1" -z "${2}s" -j "$URL")
}
cmd_distributed() { # conns seconds
  local IFS=,
  CMD=(taskset -c "$CLIENT_CPU" "$VOLLEY" --workers "${WORKER_ADDRS[*]}" -t 1 -c "$1" -z "${2}s" -j "$URL")
}

# One run of one mode; appends its row to $JSONL. Extra args (e.g. --probe) go to `run`.
measure() { # mode conns seconds run-label [extra...]
  local mode=$1 conns=$2 secs=$3 label=$4
  shift 4
  local base=$RAW/$mode-$label wargs=() i
  check_alive
  "cmd_$mode" "$conns" "$secs"
  if [[ $mode == distributed ]]; then
    for i in "${!WORKER_PIDS[@]}"; do
      wargs+=(--worker-pid "${WORKER_PIDS[$i]}" --worker-log "${WORKER_LOGS[$i]}")
    done
  fi
  local jsonl=$JSONL run=${label#r}
  [[ $label == r* ]] || { jsonl=$RAW/probes.jsonl; run=0; }
  run_child dlib run --mode "$mode" --run "$run" --jsonl "$jsonl" --out "$base.out" \
    --err "$base.err" --timeout "$((secs + 30))" --seconds "$secs" "${wargs[@]}" "$@" -- "${CMD[@]}"
}

# Start skew with each worker on a core of its own. In the throughput runs both workers share
# the client core, so at the start instant one of them waits for the other's time slice: that
# measures the scheduler, not volley. At the start instant nginx is idle, so here worker i gets
# CPU i (taskset re-pins every thread of the running daemon), then the client core again.
skew_phase() {
  local i k out ms ncpu
  ncpu=$(nproc)
  for i in "${!WORKER_PIDS[@]}"; do taskset -a -p -c "$((i % ncpu))" "${WORKER_PIDS[$i]}" >/dev/null; done
  SKEWS=()
  local IFS=,
  for ((k = 1; k <= SKEW_RUNS; k++)); do
    check_alive
    out=$(taskset -c "$CLIENT_CPU" "$VOLLEY" --workers "${WORKER_ADDRS[*]}" -t 1 -c 8 -n 2000 -j "$URL" 2>>"$RAW/skew.err") ||
      die "skew run $k failed (see $RAW/skew.err)"
    ms=$(python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["startSkewSeconds"] * 1e3))' <<<"$out")
    SKEWS+=("$ms")
  done
  unset IFS
  for i in "${!WORKER_PIDS[@]}"; do taskset -a -p -c "$CLIENT_CPU" "${WORKER_PIDS[$i]}" >/dev/null; done
}

print_skew() {
  python3 - "$SKEW_RUNS" "${SKEWS[@]}" <<'PY'
import statistics, sys
runs, skews = int(sys.argv[1]), [float(x) for x in sys.argv[2:]]
med, top = statistics.median(skews), max(skews)
print(f"Start skew with each worker on its own core ({runs} runs of -c 8 -n 2000): "
      f"median {med:.3f} ms, max {top:.3f} ms (target < 1 ms: {'PASS' if top < 1 else 'FAIL'})")
PY
}

print_header() {
  local cpu_model i
  cpu_model=$(grep -m1 -E '^(model name|Model name|cpu model)' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
  echo "# volley distributed mode on loopback — $STAMP"
  echo
  echo "- machine: nproc $(nproc), CPU ${cpu_model:-unknown}, kernel $(uname -r)"
  echo "- nginx: $("$NGINX" -v 2>&1 | head -n1) — 1 worker, pinned to CPU $SERVER_CPU"
  echo "- volley: $VOLLEY: $(timeout 5 "$VOLLEY" --version 2>&1 </dev/null | head -n1 || echo unknown)"
  echo "- $RUNS runs × ${S} s, -c $C in total; local and distributed runs alternate (order swapped every run); medians below"
  echo "- fair share: every client process (the local run; both workers and the controller) is pinned to CPU $CLIENT_CPU, so the distributed mode gets the same single client core as the local run (nginx has CPU $SERVER_CPU); the local run has $NWORKERS engine threads, as many as the workers together (one each)"
  echo "- client CPU = user+sys of the local volley (wait4), or of both worker daemons (/proc/PID/stat deltas) plus the controller (wait4)"
  echo "- end of run → report = when the controller's stdout closed minus the planned end of the run (the start instant from the workers' \"start set in_ms=N\" log lines, plus ${S} s)"
  echo
  echo "Commands:"
  echo
  echo '```'
  echo "$(show_cmd "${NGINX_CMD[@]}")  # config: bench/results/$NAME-$STAMP.nginx.conf"
  for i in "${!WORKER_CMDS[@]}"; do echo "${WORKER_CMDS[$i]}"; done
  cmd_local "$C" "$S"
  show_cmd "${CMD[@]}"
  cmd_distributed "$C" "$S"
  show_cmd "${CMD[@]}"
  echo '```'
  echo
}

# ---------------------------------------------------------------------------------------
main() {
  # shellcheck disable=SC2119 # nothing beyond nginx, taskset and python3
  ensure_packages
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  check_cpus

  local results
  new_results results json
  RAW=$results/$NAME-$STAMP.raw
  JSONL=$RAW/runs.jsonl
  mkdir -p "$RAW"

  build_volley
  start_server
  cp "$TMP/nginx.conf" "$results/$NAME-$STAMP.nginx.conf"
  start_workers

  # 1 s probes: both modes must work before anything is measured.
  local mode
  for mode in local distributed; do
    measure "$mode" "$NWORKERS" 1 probe --probe >/dev/null ||
      die "the $mode probe failed: $(tail -n1 "$RAW/probes.jsonl" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("note"))' 2>/dev/null) (see $RAW/$mode-probe.*)"
  done

  local run
  for ((run = 1; run <= RUNS; run++)); do
    log "run $run/$RUNS"
    if ((run % 2)); then
      measure local "$C" "$S" "r$run"
      measure distributed "$C" "$S" "r$run"
    else
      measure distributed "$C" "$S" "r$run"
      measure local "$C" "$S" "r$run"
    fi
  done

  log "start skew: $SKEW_RUNS runs with each worker on its own core"
  skew_phase

  local report=$results/$NAME-$STAMP.md meta
  meta=$(python3 -c 'import json,sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
    stamp "$STAMP" seconds "$S" conns "$C" runs "$RUNS" workers "$NWORKERS" client_cpu "$CLIENT_CPU" \
    server_cpu "$SERVER_CPU" url "$URL" volley "$VOLLEY" nproc "$(nproc)" kernel "$(uname -r)")
  {
    print_header
    dlib summarize --jsonl "$JSONL" --json-out "$results/$NAME-$STAMP.json" --meta "$meta"
    echo
    print_skew
    echo
    echo "Raw rows: bench/results/$NAME-$STAMP.json (stdout, stderr and worker logs: bench/results/$NAME-$STAMP.raw/)"
  } | tee "$report"
  log "report: $report"
}

main "$@"
