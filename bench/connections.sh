#!/usr/bin/env bash
# bench/connections.sh — memory per connection: the peak RSS of volley, wrk, shb and oha each
# holding 5,000 and 15,000 HTTP/1.1 connections to one local nginx, with 1 and 2 threads, and
# what a connection costs each of them (the slope between the two sizes).
#
# One nginx (1 worker, pinned to BENCH_SERVER_CPU, worker_connections above the largest count)
# answers "hello, world!\n" on 127.0.0.1. Each client runs BENCH_SECONDS under GNU time
# (bench/lib/benchlib.py rusage), pinned to BENCH_CLIENT_CPU with 1 thread and to
# BENCH_CLIENT_CPUS_2 with 2. The open-file limit bounds the counts (each connection is a
# descriptor, in the client and in nginx): 15,000 fits under 20,000, and one source address
# reaches nginx's one port through the default local port range (28,232), TIME_WAIT reused on
# loopback (net.ipv4.tcp_tw_reuse=2). A run counts only if it reports: volley and shb their
# JSON, wrk its summary, oha its JSON. See bench/README.md.
#
# Environment:
#   BENCH_CONNS="5000 15000"   connection counts (the per-connection cost is the slope between
#                              the first and the last)
#   BENCH_THREADS="1 2"        client threads
#   BENCH_TOOLS="volley wrk shb oha"
#   BENCH_SECONDS=3            duration of each client run
#   BENCH_RUNS=1               repetitions (the table shows medians)
#   BENCH_CLIENT_CPU=0         CPU a 1-thread client is pinned to
#   BENCH_CLIENT_CPUS_2=0,1    CPUs a 2-thread client is pinned to (this machine has two)
#   BENCH_SERVER_CPU=1         CPU nginx is pinned to
#   VOLLEY=./target/release/volley   BENCH_NO_BUILD=1   BENCH_NO_INSTALL=1
#   SHB=PATH  OHA=PATH         default: on PATH (e.g. /root/.cargo/bin), else cargo install
#                              into bench/tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=connections
LIB=$ROOT/bench/lib/benchlib.py
read -r -a CONNS <<<"${BENCH_CONNS:-5000 15000}"
read -r -a THREADS <<<"${BENCH_THREADS:-1 2}"
read -r -a TOOLS <<<"${BENCH_TOOLS:-volley wrk shb oha}"
SECONDS_PER_RUN=${BENCH_SECONDS:-3}
RUNS=${BENCH_RUNS:-1}
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
CLIENT_CPUS_2=${BENCH_CLIENT_CPUS_2:-0,1}
SERVER_CPU=${BENCH_SERVER_CPU:-1}
VOLLEY=${VOLLEY:-$ROOT/target/release/volley}

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$ROOT/bench/lib/common.sh"

for t in "${TOOLS[@]}"; do
  [[ $t =~ ^(volley|wrk|shb|oha)$ ]] || { echo "connections.sh: BENCH_TOOLS: '$t' is not volley, wrk, shb or oha" >&2; exit 2; }
done
for n in "${CONNS[@]}" "${THREADS[@]}" "$SECONDS_PER_RUN" "$RUNS"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "connections.sh: '$n' is not a whole number above 0" >&2; exit 2; }
done

most=0
for n in "${CONNS[@]}"; do ((n > most)) && most=$n; done
limit=$(ulimit -n)
((most + 64 <= limit)) || die "$most connections need as many open files; ulimit -n is $limit"

ensure_packages wrk /usr/bin/time:time
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
check_cpus

# A tool on PATH, or installed with cargo into bench/tools when allowed.
find_cargo_tool() { # var crate
  local -n path=$1
  [[ -n ${path:-} ]] && return 0
  if command -v "$2" >/dev/null; then
    path=$(command -v "$2")
  elif [[ -x $ROOT/bench/tools/bin/$2 ]]; then
    path=$ROOT/bench/tools/bin/$2
  elif [[ ${BENCH_NO_INSTALL:-0} != 1 ]]; then
    log "installing $2 into bench/tools"
    cargo install --quiet --root "$ROOT/bench/tools" "$2" >&2
    path=$ROOT/bench/tools/bin/$2
  fi
}
SHB=${SHB:-}
OHA=${OHA:-}
[[ " ${TOOLS[*]} " != *" shb "* ]] || find_cargo_tool SHB shb
[[ " ${TOOLS[*]} " != *" oha "* ]] || find_cargo_tool OHA oha

if [[ $VOLLEY == "$ROOT/target/release/volley" && ${BENCH_NO_BUILD:-0} != 1 ]]; then
  cargo build --release --quiet >&2
fi
[[ -x $VOLLEY ]] || die "no volley at $VOLLEY"

# nginx holds every connection of the largest run at once, and takes a burst of connects.
NGINX_WORKER_CONNECTIONS=$((most + 1024))
port=$(python3 "$LIB" free-port)
start_nginx "$port" "listen 127.0.0.1:$port backlog=4096;"
URL="http://127.0.0.1:$port/"

# Each tool with C connections and T threads for S seconds, its report where the parser reads it.
cmd_volley() { CMD=("$VOLLEY" -z "${3}s" -c "$1" -t "$2" -j "$URL"); }
cmd_wrk() { CMD=(wrk -t "$2" -c "$1" -d "${3}s" "$URL"); }
cmd_shb() { CMD=("$SHB" -z "${3}s" -c "$1" -t "$2" -j "$URL"); }
cmd_oha() { CMD=("$OHA" -z "${3}s" -c "$1" --worker-threads "$2" --no-tui --output-format json "$URL"); }

new_results RESULTS csv
CSV=$RESULTS/$NAME-$STAMP.csv
for run in $(seq "$RUNS"); do
  for threads in "${THREADS[@]}"; do
    cpus=$CLIENT_CPU
    ((threads == 1)) || cpus=$CLIENT_CPUS_2
    for conns in "${CONNS[@]}"; do
      for tool in "${TOOLS[@]}"; do
        check_nginx
        "cmd_$tool" "$conns" "$threads" "$SECONDS_PER_RUN"
        out=$TMP/$tool-$threads-$conns.out
        rc=0
        run_child timeout -k 5 $((SECONDS_PER_RUN + 60)) \
          python3 "$LIB" rusage -o "$TMP/time" -- taskset -c "$cpus" "${CMD[@]}" >"$out" 2>"$TMP/stderr" || rc=$?
        python3 "$LIB" conns-record --csv "$CSV" --tool "$tool" --threads "$threads" --conns "$conns" \
          --run "$run" --rc "$rc" --stdout "$out" --stderr "$TMP/stderr" --time "$TMP/time" \
          --command "$(show_cmd taskset -c "$cpus" "${CMD[@]}")"
      done
    done
  done
done

REPORT=$RESULTS/$NAME-$STAMP.md
{
  echo "# volley memory per connection"
  echo
  echo "- $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs; nginx 1 worker on CPU $SERVER_CPU; clients on CPU $CLIENT_CPU (1 thread) or $CLIENT_CPUS_2 (2 threads); ${SECONDS_PER_RUN}s per run, $RUNS run(s)"
  echo "- volley $("$VOLLEY" --version | awk '{print $2}'), wrk $(wrk -v 2>&1 | awk 'NR==1{print $2}'), shb (it prints no version), oha ${OHA:+$("$OHA" --version 2>/dev/null | awk '{print $2}')}"
  echo
  python3 "$LIB" conns-summary "$CSV"
} | tee "$REPORT"
log "saved $REPORT and $CSV"
