#!/usr/bin/env bash
# bench/h1.sh — HTTP/1.1 client comparison on this machine: volley vs wrk vs h2load.
#
# One local nginx (1 worker, pinned to BENCH_SERVER_CPU) answers "hello, world!\n" on
# 127.0.0.1; each client runs pinned to BENCH_CLIENT_CPU with 1 thread for a fixed duration,
# wrapped in GNU time for CPU time and peak RSS. Medians over the runs are printed as a
# markdown table and saved, with the raw rows as CSV, under bench/results/.
# See bench/README.md.
#
# Environment:
#   BENCH_SECONDS=5         duration of each client run
#   BENCH_CONNS="50 256"    connection counts
#   BENCH_RUNS=5            repetitions (tools are interleaved within each repetition)
#   BENCH_CLIENT_CPU=0      CPU the clients are pinned to
#   BENCH_SERVER_CPU=1      CPU nginx is pinned to
#   VOLLEY=./target/release/volley
#   BENCH_NO_BUILD=1        do not run `cargo build --release` for the default VOLLEY
#   BENCH_NO_INSTALL=1      do not apt-get install missing tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
LIB=$ROOT/bench/lib/benchlib.py
NAME=h1

S=${BENCH_SECONDS:-5}
RUNS=${BENCH_RUNS:-5}
read -r -a CONNS <<<"${BENCH_CONNS:-50 256}"
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-1}
VOLLEY_DEFAULT=./target/release/volley
VOLLEY=${VOLLEY:-$VOLLEY_DEFAULT}
TIME_FMT='%U %S %M' # user s, sys s, max RSS KiB
KILL_AFTER=5        # timeout -k: SIGKILL this long after the SIGTERM

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$ROOT/bench/lib/common.sh"

# ---------------------------------------------------------------------------------------
# Protocols and tools. To add a protocol P (e.g. h2):
#   1. add it to PROTOS and list its tools in TOOLS_P;
#   2. define listen_P PORT (the nginx `listen` line; each protocol gets its own port);
#   3. define cmd_P_TOOL CONNS SECONDS URL for each tool, setting the CMD array.
# Each tool's output is parsed by bench/lib/benchlib.py (PARSERS, keyed by tool name),
# independently of the protocol.
PROTOS=(h1)
# shellcheck disable=SC2034 # read through a nameref, TOOLS_$proto
TOOLS_h1=(volley wrk h2load)

listen_h1() { echo "listen 127.0.0.1:$1;"; }

cmd_h1_volley() { CMD=("$VOLLEY" -z "${2}s" -c "$1" -t 1 -j "$3"); }
cmd_h1_wrk() { CMD=(wrk -t1 -c "$1" -d "${2}s" "$3"); }
cmd_h1_h2load() { CMD=(h2load --h1 -t1 -c "$1" -D "$2" "$3"); }

# Later, for example:
#   PROTOS=(h1 h2); TOOLS_h2=(volley h2load)
#   listen_h2() { echo "listen 127.0.0.1:$1 http2;"; }   # h2c, prior knowledge
#   cmd_h2_volley() { CMD=("$VOLLEY" --http2 -z "${2}s" -c "$1" -t 1 -j "$3"); }
#   cmd_h2_h2load() { CMD=(h2load -t1 -c "$1" -m 10 -D "$2" "$3"); }

# Optional per-tool preparation (prepare_TOOL), run once before the availability probe;
# on failure it sets UNAVAILABLE_REASON and returns non-zero.
prepare_volley() {
  if [[ $VOLLEY == "$VOLLEY_DEFAULT" && ${BENCH_NO_BUILD:-0} != 1 ]]; then
    if command -v cargo >/dev/null; then
      log "building volley: cargo build --release (log: $RAW/cargo-build.log)"
      if ! run_child timeout 1800 cargo build --release >"$RAW/cargo-build.log" 2>&1; then
        UNAVAILABLE_REASON="cargo build --release failed, see $RAW/cargo-build.log"
        return 1
      fi
    fi
  fi
  if [[ ! -x $VOLLEY ]]; then
    UNAVAILABLE_REASON="$VOLLEY not found"
    return 1
  fi
}

# ---------------------------------------------------------------------------------------
declare -A PORTS URLS

# Each protocol gets its own port on the one nginx.
start_server() {
  local proto args=()
  for proto in "${PROTOS[@]}"; do
    PORTS[$proto]=$(python3 "$LIB" free-port)
    URLS[$proto]="http://127.0.0.1:${PORTS[$proto]}/"
    args+=("${PORTS[$proto]}" "$("listen_$proto" "${PORTS[$proto]}")")
  done
  start_nginx "${args[@]}"
  log "nginx (pid $NGINX_PID, CPU $SERVER_CPU) serving $(for p in "${PROTOS[@]}"; do printf '%s=%s ' "$p" "${URLS[$p]}"; done)"
}

# The full command line of one measured client run (sets CMD, then wraps it).
wrapped_cmd() { # proto tool conns seconds timefile
  "cmd_$1_$2" "$3" "$4" "${URLS[$1]}"
  WRAPPED=(timeout -k "$KILL_AFTER" "$(($4 + 20))"
    /usr/bin/time -f "$TIME_FMT" -o "$5"
    taskset -c "$CLIENT_CPU" "${CMD[@]}")
}

# Runs one measured client run and appends its row to the CSV.
measure() { # proto tool conns run
  local proto=$1 tool=$2 conns=$3 run=$4 rc=0
  local base=$RAW/$proto-$tool-c$conns-r$run
  check_nginx
  wrapped_cmd "$proto" "$tool" "$conns" "$S" "$base.time"
  run_child "${WRAPPED[@]}" </dev/null >"$base.out" 2>"$base.err" || rc=$?
  python3 "$LIB" record --csv "$CSV" --proto "$proto" --tool "$tool" --conns "$conns" \
    --run "$run" --rc "$rc" --stdout "$base.out" --stderr "$base.err" --time "$base.time"
}

# A 1 s, 1-connection run: does the tool work at all against this server?
probe() { # proto tool
  local proto=$1 tool=$2 rc=0 base=$RAW/probe-$1-$2 parsed
  "cmd_${proto}_$tool" 1 1 "${URLS[$proto]}"
  run_child timeout -k "$KILL_AFTER" 20 taskset -c "$CLIENT_CPU" "${CMD[@]}" </dev/null \
    >"$base.out" 2>"$base.err" || rc=$?
  if ((rc != 0)); then
    local first
    first=$(grep -m1 . "$base.err" || grep -m1 . "$base.out" || true)
    UNAVAILABLE_REASON="probe \`${CMD[*]}\` exited $rc${first:+: ${first:0:160}}"
    return 1
  fi
  if ! parsed=$(python3 "$LIB" parse "$tool" "$base.out" 2>&1); then
    UNAVAILABLE_REASON="probe \`${CMD[*]}\` $parsed"
    return 1
  fi
  if [[ ${parsed%% *} == 0 ]]; then
    UNAVAILABLE_REASON="probe \`${CMD[*]}\` completed no requests"
    return 1
  fi
}

declare -A AVAILABLE # "proto tool" -> 1

check_tools() {
  local proto tool prepared=" "
  for proto in "${PROTOS[@]}"; do
    local -n tools="TOOLS_$proto"
    for tool in "${tools[@]}"; do
      UNAVAILABLE_REASON=
      if [[ $prepared != *" $tool "* ]] && declare -F "prepare_$tool" >/dev/null; then
        prepared+="$tool "
        if ! "prepare_$tool"; then
          PREPARE_FAILED[$tool]=$UNAVAILABLE_REASON
        fi
      fi
      if [[ -n ${PREPARE_FAILED[$tool]:-} ]]; then
        UNAVAILABLE_REASON=${PREPARE_FAILED[$tool]}
      elif probe "$proto" "$tool"; then
        AVAILABLE["$proto $tool"]=1
        continue
      fi
      local note="$tool: not available ($UNAVAILABLE_REASON)"
      ((${#PROTOS[@]} == 1)) || note+=" [$proto]"
      log "$note"
      UNAVAILABLE_NOTES+=("$note")
      local c
      for c in "${CONNS[@]}"; do
        python3 "$LIB" unavailable --csv "$CSV" --proto "$proto" --tool "$tool" --conns "$c" \
          --reason "$UNAVAILABLE_REASON"
      done
    done
    unset -n tools
  done
}
declare -A PREPARE_FAILED
UNAVAILABLE_NOTES=()

version_of() { # tool
  case $1 in
  volley)
    local v
    v=$(timeout 5 "$VOLLEY" --version 2>&1 </dev/null) && [[ -n $v ]] || v="unknown (--version failed)"
    echo "$VOLLEY: ${v%%$'\n'*}"
    ;;
  wrk) wrk --version 2>&1 </dev/null | head -n1 || true ;;
  h2load) h2load --version 2>&1 </dev/null | head -n1 || true ;;
  *) echo "?" ;;
  esac
}

print_header() {
  local cpu_model proto tool c
  cpu_model=$(grep -m1 -E '^(model name|Model name|cpu model)' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
  [[ -n $cpu_model ]] || cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1)
  echo "# volley HTTP/1.1 client benchmark — $STAMP"
  echo
  echo "- machine: nproc $(nproc), CPU ${cpu_model:-unknown}, kernel $(uname -r)"
  echo "- nginx: $("$NGINX" -v 2>&1 | head -n1) — 1 worker, pinned to CPU $SERVER_CPU"
  for tool in volley wrk h2load; do
    [[ " ${!AVAILABLE[*]} " == *" $tool "* ]] || continue # unavailable: noted below
    echo "- $tool: $(version_of "$tool" | tr -d '\r')"
  done
  for note in "${UNAVAILABLE_NOTES[@]}"; do echo "- $note"; done
  echo "- each point: ${S} s, 1 client thread pinned to CPU $CLIENT_CPU, connections ${CONNS[*]}, runs $RUNS (tools interleaved, order rotated per run); medians below"
  echo "- CPU µs/req = client (user+sys) time × 1e6 / requests completed; peak RSS = GNU time %M"
  echo
  echo "Commands (\`FILE\` is the per-run GNU time output under $RAW_REL/):"
  echo
  echo '```'
  echo "$(show_cmd "${NGINX_CMD[@]}")  # config: bench/results/${NAME}-$STAMP.nginx.conf"
  for proto in "${PROTOS[@]}"; do
    local -n tools="TOOLS_$proto"
    for tool in "${tools[@]}"; do
      for c in "${CONNS[@]}"; do
        wrapped_cmd "$proto" "$tool" "$c" "$S" FILE
        show_cmd "${WRAPPED[@]}"
      done
    done
    unset -n tools
  done
  echo '```'
  echo
}

# ---------------------------------------------------------------------------------------
main() {
  ensure_packages wrk h2load:nghttp2-client /usr/bin/time:time
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  check_cpus

  STAMP=$(date +%Y%m%d-%H%M%S)
  local results=$ROOT/bench/results
  mkdir -p "$results"
  [[ ! -e $results/$NAME-$STAMP.csv ]] || STAMP+="-$$"
  CSV=$results/$NAME-$STAMP.csv
  RAW=$results/$NAME-$STAMP.raw
  RAW_REL=bench/results/$NAME-$STAMP.raw
  mkdir -p "$RAW"

  start_server
  cp "$TMP/nginx.conf" "$results/$NAME-$STAMP.nginx.conf"
  check_tools

  local run proto tool c i n
  for ((run = 1; run <= RUNS; run++)); do
    log "run $run/$RUNS"
    for proto in "${PROTOS[@]}"; do
      local -n tools="TOOLS_$proto"
      n=${#tools[@]}
      for c in "${CONNS[@]}"; do
        for ((i = 0; i < n; i++)); do
          tool=${tools[$(((i + run - 1) % n))]} # rotate the order each run
          [[ -n ${AVAILABLE["$proto $tool"]:-} ]] || continue
          measure "$proto" "$tool" "$c" "$run"
        done
      done
      unset -n tools
    done
  done

  local report=$results/$NAME-$STAMP.md
  {
    print_header
    python3 "$LIB" summarize "$CSV"
    echo
    echo "Raw rows: bench/results/$NAME-$STAMP.csv"
  } | tee "$report"
  log "report: $report"
}

main "$@"
