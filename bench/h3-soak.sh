#!/usr/bin/env bash
# bench/h3-soak.sh — is volley's memory flat over a long HTTP/3 run? One volley --http3 run of
# BENCH_SOAK_SECONDS against a local QUIC server, its resident set sampled every
# BENCH_SOAK_EVERY seconds from /proc. The verdict compares the last minute with the first
# minute after the warm-up (the first minute): flat when the last minute's largest RSS is
# within 1 MB of the first's. The samples (CSV) and a markdown report go under bench/results/.
# See bench/README.md.
#
# Environment:
#   BENCH_SOAK_SECONDS=600     length of the run (at least 180: warm-up, first and last minute)
#   BENCH_SOAK_EVERY=10        seconds between RSS samples
#   BENCH_SOAK_POINT=16x32     CONNSxSTREAMS (volley -c/-p)
#   BENCH_SOAK_RATE=           optional: volley --rate R (requests/s) instead of a closed loop,
#                              e.g. to leave a shared machine some CPU
#   BENCH_SOAK_SERVER=ngtcp2   ngtcp2 (gtlsserver, Debian ngtcp2-server) or serve (volley serve --http3)
#   BENCH_CLIENT_CPU=0 / BENCH_SERVER_CPU=1
#   VOLLEY=./target/release/volley, BENCH_NO_BUILD=1, BENCH_NO_INSTALL=1 as for the other scripts
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=h3-soak
LIB=$ROOT/bench/lib/benchlib.py
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-1}
SECONDS_TOTAL=${BENCH_SOAK_SECONDS:-600}
EVERY=${BENCH_SOAK_EVERY:-10}
POINT=${BENCH_SOAK_POINT:-16x32}
RATE=${BENCH_SOAK_RATE:-}
SERVER=${BENCH_SOAK_SERVER:-ngtcp2}
VOLLEY_DEFAULT=./target/release/volley
VOLLEY=${VOLLEY:-$VOLLEY_DEFAULT}

[[ $SECONDS_TOTAL =~ ^[0-9]+$ ]] && ((SECONDS_TOTAL >= 180)) ||
  { echo "h3-soak.sh: BENCH_SOAK_SECONDS must be a whole number ≥ 180" >&2; exit 2; }
[[ $EVERY =~ ^[1-9][0-9]*$ ]] && ((EVERY <= 60)) ||
  { echo "h3-soak.sh: BENCH_SOAK_EVERY must be a whole number from 1 to 60" >&2; exit 2; }
[[ $POINT =~ ^([1-9][0-9]*)x([1-9][0-9]*)$ ]] ||
  { echo "h3-soak.sh: BENCH_SOAK_POINT: '$POINT' is not CONNSxSTREAMS, e.g. 16x32" >&2; exit 2; }
CONNS=${BASH_REMATCH[1]}
STREAMS=${BASH_REMATCH[2]}
[[ -z $RATE || $RATE =~ ^[1-9][0-9]*$ ]] || { echo "h3-soak.sh: BENCH_SOAK_RATE must be a whole number ≥ 1" >&2; exit 2; }
[[ $SERVER == ngtcp2 || $SERVER == serve ]] || { echo "h3-soak.sh: BENCH_SOAK_SERVER must be ngtcp2 or serve" >&2; exit 2; }

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$ROOT/bench/lib/common.sh"

SERVER_PID=
VOLLEY_PID=
cleanup_hook() {
  [[ -z $VOLLEY_PID ]] || stop_pid "$VOLLEY_PID"
  [[ -z $SERVER_PID ]] || stop_pid "$SERVER_PID"
}

needs=(/usr/bin/time:time openssl)
[[ $SERVER != ngtcp2 ]] || needs+=(gtlsserver:ngtcp2-server)
ensure_packages "${needs[@]}"
check_cpus
if [[ $VOLLEY == "$VOLLEY_DEFAULT" && ${BENCH_NO_BUILD:-0} != 1 ]] && command -v cargo >/dev/null; then
  log "building volley: cargo build --release"
  run_child timeout 1800 cargo build --release >&2 || die "cargo build --release failed"
fi
[[ -x $VOLLEY ]] || die "$VOLLEY not found"

new_results RESULTS csv
CSV=$RESULTS/$NAME-$STAMP.csv
REPORT=$RESULTS/$NAME-$STAMP.md
PORT=$(python3 "$LIB" free-port)
URL="https://127.0.0.1:$PORT/"

case $SERVER in
ngtcp2)
  mkdir -p "$TMP/htdocs"
  printf 'hello, world!\n' >"$TMP/htdocs/index.html"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" </dev/null >"$TMP/openssl.log" 2>&1 ||
    die "openssl could not make the self-signed certificate"
  SERVER_CMD=(taskset -c "$SERVER_CPU" gtlsserver -q -d "$TMP/htdocs" 127.0.0.1 "$PORT" "$TMP/key.pem" "$TMP/cert.pem")
  ;;
serve) SERVER_CMD=(taskset -c "$SERVER_CPU" "$VOLLEY" serve --listen "127.0.0.1:$PORT" --http3) ;;
esac
"${SERVER_CMD[@]}" </dev/null >"$TMP/server.out" 2>"$TMP/server.err" &
SERVER_PID=$!
sleep 1
kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/server.err" >&2; die "the server did not start"; }

CMD=("$VOLLEY" --http3 -k -c "$CONNS" -p "$STREAMS" -t 1 -z "${SECONDS_TOTAL}s" -j)
[[ -z $RATE ]] || CMD+=(--rate "$RATE")
CMD+=("$URL")
log "soak: $(show_cmd taskset -c "$CLIENT_CPU" "${CMD[@]}") for $SECONDS_TOTAL s, RSS every $EVERY s"
taskset -c "$CLIENT_CPU" "${CMD[@]}" </dev/null >"$TMP/volley.json" 2>"$TMP/volley.err" &
VOLLEY_PID=$!

echo "seconds,rss_kib" >"$CSV"
start=$(date +%s.%N)
next=$EVERY
while kill -0 "$VOLLEY_PID" 2>/dev/null; do
  now=$(date +%s.%N)
  wait_s=$(python3 -c "print(max(0.0, $start + $next - $now))")
  sleep "$wait_s"
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$VOLLEY_PID/status" 2>/dev/null) || break
  [[ -n $rss ]] || break
  echo "$next,$rss" >>"$CSV"
  ((next % 60 != 0)) || log "  $next s: RSS $((rss / 1024)) MB"
  next=$((next + EVERY))
done
rc=0
wait "$VOLLEY_PID" || rc=$?
VOLLEY_PID=
((rc == 0)) || { cat "$TMP/volley.err" >&2; die "volley exited $rc"; }

{
  echo "# volley HTTP/3 soak — $STAMP"
  echo
  echo "- machine: nproc $(nproc), kernel $(uname -r)"
  echo "- server: $(show_cmd "${SERVER_CMD[@]}")"
  echo "- client: $(show_cmd taskset -c "$CLIENT_CPU" "${CMD[@]}")"
  echo "- RSS (VmRSS) sampled every $EVERY s: bench/results/$NAME-$STAMP.csv"
  echo
  python3 "$LIB" soak-summary "$CSV" "$TMP/volley.json"
} | tee "$REPORT"
log "report: $REPORT"
