#!/usr/bin/env bash
# bench/feeder-memory.sh — what a large feeder costs in memory: the peak RSS of a local run, of
# a controller and of one worker, each with a BENCH_ROWS-row CSV feeder (two columns, about
# 100 bytes a row: ~100 MB at a million rows) and without one, running the same scenario of one
# step against `volley serve` on loopback. The goal (issue 36): a worker's RSS grows by at most
# about 1.2x the feeder's data (one copy, shared by its threads); the controller holds one copy
# plus the chunks in flight.
#
# Peak RSS is the kernel's VmHWM (/proc/PID/status) for the daemons and GNU time's maximum
# resident set size for the command-line runs. Memory, not time: the numbers hold on a busy
# machine too.
#
# Environment:
#   BENCH_ROWS=1000000        rows of the feeder
#   BENCH_MODE=cycle          the feeder's mode (cycle or random: every worker holds every row;
#                             shard would give one worker of one all of them as well)
#   VOLLEY=./target/release/volley
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VOLLEY=${VOLLEY:-$ROOT/target/release/volley}
ROWS=${BENCH_ROWS:-1000000}
MODE=${BENCH_MODE:-cycle}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
hwm_mb() { awk '/VmHWM/ {printf "%.1f\n", $2/1024}' "/proc/$1/status"; }

python3 - "$WORK/users.csv" "$ROWS" <<'PY'
import sys
path, rows = sys.argv[1], int(sys.argv[2])
pad = "x" * 80
with open(path, "w") as f:
    f.write("id,payload\n")
    for i in range(rows):
        f.write(f"u{i:09d},{pad}{i:09d}\n")
PY
DATA=$(python3 -c "import os; print(os.path.getsize('$WORK/users.csv'))")

SERVE_PORT=$(free_port)
"$VOLLEY" serve --listen "127.0.0.1:$SERVE_PORT" >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5

scenario() { # $1: file, $2: with feeder (1/0)
    {
        echo "origin = \"http://127.0.0.1:$SERVE_PORT\""
        if [ "$2" = 1 ]; then
            printf '[[feeder]]\nname = "users"\nfile = "%s"\nmode = "%s"\n' "$WORK/users.csv" "$MODE"
            printf '[[scenario]]\nname = "s"\n  [[scenario.step]]\n  path = "/u/{{users.id}}"\n  headers = { x-p = "{{users.payload}}" }\n'
        else
            printf '[[scenario]]\nname = "s"\n  [[scenario.step]]\n  path = "/u/u000000001"\n  headers = { x-p = "%s" }\n' "$(printf 'x%.0s' {1..89})"
        fi
    } >"$1"
}
scenario "$WORK/with.toml" 1
scenario "$WORK/without.toml" 0

local_rss() { # peak RSS (MB) of a local run of $1
    /usr/bin/time -f '%M' -o "$WORK/time" "$VOLLEY" --scenario "$1" -n 20000 -c 4 -t 2 -j >/dev/null
    awk '{printf "%.1f\n", $1/1024}' "$WORK/time"
}

distributed_rss() { # "controller worker" peak RSS (MB) of a run of $1 through one worker
    local port pid
    port=$(free_port)
    "$VOLLEY" worker --listen "127.0.0.1:$port" >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    sleep 0.5
    /usr/bin/time -f '%M' -o "$WORK/time" "$VOLLEY" --workers "127.0.0.1:$port" --scenario "$1" -n 20000 -c 4 -t 2 -j >/dev/null
    echo "$(awk '{printf "%.1f", $1/1024}' "$WORK/time") $(hwm_mb "$pid")"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

read -r L0 < <(local_rss "$WORK/without.toml")
read -r L1 < <(local_rss "$WORK/with.toml")
read -r C0 W0 < <(distributed_rss "$WORK/without.toml")
read -r C1 W1 < <(distributed_rss "$WORK/with.toml")

MB=$(python3 -c "print(f'{$DATA/1048576:.1f}')")
ratio() { python3 -c "print(f'{($2-$1)/($DATA/1048576):.2f}')"; }
echo "feeder: $ROWS rows, $MB MiB of CSV, mode $MODE"
echo
echo "| process | without feeder (MB) | with feeder (MB) | added / feeder size |"
echo "|---|---|---|---|"
echo "| local run (-t 2) | $L0 | $L1 | $(ratio "$L0" "$L1") |"
echo "| controller | $C0 | $C1 | $(ratio "$C0" "$C1") |"
echo "| worker (-t 2) | $W0 | $W1 | $(ratio "$W0" "$W1") |"
