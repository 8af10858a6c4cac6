#!/usr/bin/env bash
# bench/rate.sh — the open model (--rate) on this machine: does volley keep the rate it is
# asked for, how late does it send, and what does a fixed rate cost it, beside oha with -q and
# its latency correction in the same run.
#
# One local nginx (1 worker, pinned to BENCH_SERVER_CPU) answers "hello, world!\n" over
# HTTP/1.1; each client runs pinned to BENCH_CLIENT_CPU for a fixed duration under
# benchlib.py's rusage (CPU to the µs, GNU time's peak RSS).
# Rates: BENCH_RATES, where "max" stands for the highest rate one client core holds here
# (achieved within 0.5%, p99 send lateness under 200 µs), found first by bisection below what a
# closed-loop volley run with the same connections completes, each probe judged like a row.
# volley runs twice: as it comes (requests may wait up to 100 µs to leave together), and as
# volley-1ms with --max-hold 5ms (up to 1 ms, about what oha's 1 ms timer tick does).
# Per rate and tool: achieved requests/s against the rate asked, volley's p99 send lateness
# (oha does not report one), p99 latency (both corrected for coordinated omission), client CPU
# per request and peak RSS; medians over interleaved runs, printed as markdown and saved with
# the raw rows under bench/results/. Run as root, it also captures on lo how each client spaced
# its requests in one more run per rate (bench/lib/sends.py). See bench/README.md.
#
# Environment:
#   BENCH_RATES="10000 50000 max"   requests/s asked ("max": see above)
#   BENCH_SECONDS=5                  duration of each run
#   BENCH_CONNS=64                   connections (volley -c, oha -c)
#   BENCH_RUNS=5                     repetitions (tools interleaved, order rotated)
#   BENCH_CLIENT_CPU=0 / BENCH_SERVER_CPU=1
#   VOLLEY=./target/release/volley, BENCH_NO_BUILD=1, BENCH_NO_INSTALL=1 as for h1.sh
#   OHA=PATH                         the oha to measure (default: on PATH, else installed into bench/tools)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=rate
LIB=$ROOT/bench/lib/benchlib.py
S=${BENCH_SECONDS:-5}
RUNS=${BENCH_RUNS:-5}
CONNS=${BENCH_CONNS:-64}
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-1}
read -r -a RATES <<<"${BENCH_RATES:-10000 50000 max}"
VOLLEY_DEFAULT=./target/release/volley
VOLLEY=${VOLLEY:-$VOLLEY_DEFAULT}
OHA_VERSION=${BENCH_OHA_VERSION:-1.16.0}
TOOLS_ROOT=$ROOT/bench/tools

[[ $S =~ ^[1-9][0-9]*$ ]] || { echo "rate.sh: BENCH_SECONDS must be a whole number ≥ 1" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "rate.sh: BENCH_RUNS must be a whole number ≥ 1" >&2; exit 2; }
[[ $CONNS =~ ^[1-9][0-9]*$ ]] || { echo "rate.sh: BENCH_CONNS must be a whole number ≥ 1" >&2; exit 2; }
((${#RATES[@]})) || { echo "rate.sh: BENCH_RATES must not be empty" >&2; exit 2; }
for r in "${RATES[@]}"; do
  [[ $r == max || $r =~ ^[1-9][0-9]*$ ]] || { echo "rate.sh: BENCH_RATES: '$r' is not a rate (requests/s) or max" >&2; exit 2; }
done

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$ROOT/bench/lib/common.sh"

ensure_packages /usr/bin/time:time
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
check_cpus
if [[ $VOLLEY == "$VOLLEY_DEFAULT" && ${BENCH_NO_BUILD:-0} != 1 ]] && command -v cargo >/dev/null; then
  log "building volley: cargo build --release"
  run_child timeout 1800 cargo build --release >&2 || die "cargo build --release failed"
fi
[[ -x $VOLLEY ]] || die "$VOLLEY not found"
OHA=${OHA:-$(command -v oha || echo "$TOOLS_ROOT/bin/oha")}
if [[ ! -x $OHA && ${BENCH_NO_INSTALL:-0} != 1 ]] && command -v cargo >/dev/null; then
  # With http3, as bench/h3.sh installs it into the same folder: either script finds the other's.
  log "installing oha $OHA_VERSION: cargo install oha --features http3 --root $TOOLS_ROOT"
  run_child timeout 3600 cargo install --locked --version "$OHA_VERSION" --features http3 --root "$TOOLS_ROOT" oha >&2 ||
    die "cargo install oha failed"
  OHA=$TOOLS_ROOT/bin/oha
fi
[[ -x $OHA ]] || die "oha not found (cargo install oha, or set OHA=PATH)"

new_results RESULTS csv
CSV=$RESULTS/$NAME-$STAMP.csv
RAW=$RESULTS/$NAME-$STAMP.raw
mkdir -p "$RAW"
PORT=$(python3 "$LIB" free-port)
URL="http://127.0.0.1:$PORT/"
start_nginx "$PORT" "listen 127.0.0.1:$PORT;"
cp "$TMP/nginx.conf" "$RESULTS/$NAME-$STAMP.nginx.conf"

# Sets CMD for one run of TOOL at RATE, for SECONDS (default: BENCH_SECONDS).
cmd_of() { # tool rate [seconds]
  local d=${3:-$S}s
  case $1 in
  volley) CMD=("$VOLLEY" --rate "$2" -c "$CONNS" -t 1 -z "$d" -j "$URL") ;;
  # A fifth of the hold is the send slack: requests may wait up to 1 ms to leave together,
  # about as a client waking once per 1 ms timer tick sends them.
  volley-1ms) CMD=("$VOLLEY" --rate "$2" -c "$CONNS" -t 1 --max-hold 5ms -z "$d" -j "$URL") ;;
  oha) CMD=("$OHA" -q "$2" --latency-correction -c "$CONNS" -z "$d" --no-tui --output-format json "$URL") ;;
  esac
}

run_one() { # tool rate run
  local base=$RAW/$1-r$2-$3 rc=0
  cmd_of "$1" "$2"
  check_nginx
  run_child timeout -k 5 $((S + 20)) python3 "$LIB" rusage -o "$base.time" -- \
    taskset -c "$CLIENT_CPU" "${CMD[@]}" </dev/null >"$base.out" 2>"$base.err" || rc=$?
  python3 "$LIB" rate-record --csv "$CSV" --tool "$1" --rate "$2" --run "$3" --rc "$rc" \
    --stdout "$base.out" --time "$base.time"
}

# "max": the highest rate volley holds here (achieved within 0.5%, p99 send lateness under
# 200 µs), to 1000s: bisected between a tenth of what a closed-loop run with the same connections
# completes and all of it. A probe is judged as the measured rows are: RUNS runs of S seconds, and
# the rate holds when most of them hold (one stall of this host fails a single run; 3 s probes
# held rates whose 5 s runs then missed the lateness goal).
MAX=
for r in "${RATES[@]}"; do
  [[ $r == max ]] || continue
  run_child timeout 60 taskset -c "$CLIENT_CPU" "$VOLLEY" -c "$CONNS" -t 1 -z "${S}s" -j "$URL" \
    </dev/null >"$RAW/closed.json" 2>"$RAW/closed.err" || die "the closed-loop run failed (see $RAW/closed.err)"
  CLOSED=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["requestsPerSec"]))' "$RAW/closed.json")
  log "closed loop: $CLOSED requests/s; searching for the highest rate held"
  LO=$((CLOSED / 10 / 1000 * 1000)) HI=$((CLOSED / 1000 * 1000))
  NEED=$((RUNS / 2 + 1))
  while ((HI - LO > 1000 && HI - LO > CLOSED / 50)); do
    MID=$(((LO + HI) / 2 / 1000 * 1000))
    held=0
    for ((probe = 1; probe <= RUNS; probe++)); do
      check_nginx
      run_child timeout -k 5 $((S + 20)) taskset -c "$CLIENT_CPU" "$VOLLEY" --rate "$MID" -c "$CONNS" -t 1 -z "${S}s" -j "$URL" \
        </dev/null >"$RAW/probe-$MID-$probe.json" 2>"$RAW/probe-$MID-$probe.err" || true
      if python3 "$LIB" rate-holds --rate "$MID" --stdout "$RAW/probe-$MID-$probe.json"; then held=$((held + 1)); fi
      ((held >= NEED || held + RUNS - probe < NEED)) && break
    done
    log "probe $MID/s: held in $held of $probe"
    if ((held >= NEED)); then LO=$MID; else HI=$MID; fi
  done
  MAX=$LO
  log "max rate $MAX"
  break
done
ASKED=()
for r in "${RATES[@]}"; do ASKED+=("${r/max/$MAX}"); done

TOOLS=(volley volley-1ms oha)
for ((run = 1; run <= RUNS; run++)); do
  log "run $run/$RUNS"
  for rate in "${ASKED[@]}"; do
    for ((i = 0; i < ${#TOOLS[@]}; i++)); do
      run_one "${TOOLS[$(((i + run - 1) % ${#TOOLS[@]}))]}" "$rate" "$run"
    done
  done
done

# How evenly each client spaces its requests: one more run per rate and tool, not measured for
# CPU, with the requests' departures captured on lo (bench/lib/sends.py; needs root).
SPACING=()
if [[ $(id -u) == 0 ]]; then
  for rate in "${ASKED[@]}"; do
    for tool in "${TOOLS[@]}"; do
      base=$RAW/$tool-r$rate-spacing
      cmd_of "$tool" "$rate" 3
      check_nginx
      python3 "$ROOT/bench/lib/sends.py" record "$PORT" 4 "$base.stamps" &
      sniffer=$!
      sleep 0.5
      run_child timeout -k 5 30 taskset -c "$CLIENT_CPU" "${CMD[@]}" </dev/null >"$base.out" 2>"$base.err" || true
      wait "$sniffer" || true
      SPACING+=("$(python3 "$ROOT/bench/lib/sends.py" summary "$tool" "$rate" "$base.stamps")")
    done
  done
fi

REPORT=$RESULTS/$NAME-$STAMP.md
{
  echo "# volley open-model benchmark — $STAMP"
  echo
  echo "- machine: nproc $(nproc), kernel $(uname -r)"
  echo "- nginx: $("$NGINX" -v 2>&1 | head -n1) — 1 worker, pinned to CPU $SERVER_CPU, HTTP/1.1"
  echo "- $("$OHA" --version 2>&1 | head -n1); volley: $("$VOLLEY" --version 2>&1 | head -n1)"
  echo "- each run: ${S} s, -c $CONNS, client pinned to CPU $CLIENT_CPU (volley -t 1), runs $RUNS interleaved; medians below${MAX:+; max = $MAX/s}"
  echo
  echo '```'
  for tool in "${TOOLS[@]}"; do
    cmd_of "$tool" RATE
    show_cmd python3 bench/lib/benchlib.py rusage -o FILE -- taskset -c "$CLIENT_CPU" "${CMD[@]}"
  done
  echo '```'
  echo
  python3 "$LIB" rate-summary "$CSV"
  if ((${#SPACING[@]})); then
    echo
    echo "How the requests left (one more 3 s run each, captured on lo; a bunch: requests less than half the even spacing apart):"
    echo
    echo "| rate asked | tool | requests | requests per bunch (mean) | gap p50 µs | gap p99 µs |"
    echo "|--:|---|--:|--:|--:|--:|"
    printf '%s\n' "${SPACING[@]}"
  fi
} | tee "$REPORT"
log "report: $REPORT"
