#!/usr/bin/env bash
# bench/fleet-real.sh — 64 real `volley worker` processes on loopback against one nginx,
# driven by one controller with -n (so every request the report counts is one nginx logged),
# repeated. Each run passes when the controller exits 0, its report's ok requests equal both
# -n and the lines nginx's access log gained, no worker failed, and no worker's log says it
# lost its controller for want of a heartbeat.
#
# Environment:
#   FLEET_WORKERS=64   worker processes
#   BENCH_RUNS=5       repetitions
#   BENCH_REQUESTS=200000  -n of each run
#   BENCH_CONNS=128    -c of each run (2 per worker)
#   VOLLEY=./target/release/volley   NGINX=nginx
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${FLEET_WORKERS:-64}
RUNS=${BENCH_RUNS:-5}
REQUESTS=${BENCH_REQUESTS:-200000}
C=${BENCH_CONNS:-128}
VOLLEY=${VOLLEY:-./target/release/volley}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
LIB=$ROOT/bench/lib/benchlib.py
log() { printf '%s\n' "$*" >&2; }
[[ -x $VOLLEY ]] || { log "fleet-real.sh: $VOLLEY not found (cargo build --release)"; exit 1; }
[[ -x $NGINX ]] || { log "fleet-real.sh: nginx not found"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/volley-fleet-real.XXXXXX")
PIDS=()
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local rc=$? pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT INT TERM

PORT=$(python3 -B "$LIB" free-port)
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log $TMP/nginx/access.log;
    keepalive_requests 100000000;
    client_body_temp_path $TMP/nginx/client_body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    server {
        listen 127.0.0.1:$PORT;
        location / { return 200 "hello, world!\n"; }
    }
}
CONF
"$NGINX" -p "$TMP/nginx/" -c "$TMP/nginx.conf" </dev/null >"$TMP/nginx/stdout.log" 2>&1 &
PIDS+=($!)
python3 -B "$LIB" wait-http "$PORT" 10 --mode http || { log "nginx did not come up"; cat "$TMP/nginx/error.log" >&2; exit 1; }

ADDRS=()
for ((i = 0; i < N; i++)); do
  port=$(python3 -B "$LIB" free-port)
  "$VOLLEY" worker --listen "127.0.0.1:$port" --name "w$i" </dev/null >/dev/null 2>"$TMP/worker-$i.log" &
  PIDS+=($!)
  ADDRS+=("127.0.0.1:$port")
done
for a in "${ADDRS[@]}"; do
  python3 -B -c 'import socket,sys,time
host, port = sys.argv[1].rsplit(":", 1)
for _ in range(100):
    try:
        socket.create_connection((host, int(port)), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)' "$a" || { log "worker $a did not come up"; exit 1; }
done
log "nginx on 127.0.0.1:$PORT, $N workers up"
WORKERS=$(IFS=,; echo "${ADDRS[*]}")

echo "| run | exit | ok | nginx counted | exact | failed workers | heartbeat losses | wall s |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
passed=0
for ((r = 1; r <= RUNS; r++)); do
  before=$(wc -l <"$TMP/nginx/access.log")
  lost_before=$(cat "$TMP"/worker-*.log | grep -c "controller gone (no heartbeat" || true)
  start=$(date +%s.%N)
  rc=0
  timeout 300 "$VOLLEY" --workers "$WORKERS" -t 1 -c "$C" -n "$REQUESTS" -j "http://127.0.0.1:$PORT/" \
    >"$TMP/report-$r.json" 2>"$TMP/controller-$r.err" || rc=$?
  wall=$(python3 -c "import sys,time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start")
  sleep 0.5
  after=$(wc -l <"$TMP/nginx/access.log")
  lost=$(($(cat "$TMP"/worker-*.log | grep -c "controller gone (no heartbeat" || true) - lost_before))
  read -r ok failed < <(python3 -c 'import json,sys
try:
    r = json.load(open(sys.argv[1]))
    print(r["requests"]["ok"], sum(1 for w in r["workers"] if w.get("failure")))
except Exception:
    print(-1, -1)' "$TMP/report-$r.json")
  counted=$((after - before))
  exact=no
  [[ $ok == "$REQUESTS" && $counted == "$REQUESTS" ]] && exact=yes
  echo "| $r | $rc | $ok | $counted | $exact | $failed | $lost | $wall |"
  if ((rc == 0)) && [[ $exact == yes && $failed == 0 && $lost == 0 ]]; then
    passed=$((passed + 1))
  else
    tail -3 "$TMP/controller-$r.err" >&2
  fi
done
echo
echo "$passed of $RUNS runs passed ($N workers, -c $C, -n $REQUESTS)"
((passed == RUNS))
