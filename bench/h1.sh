#!/usr/bin/env bash
# bench/h1.sh — HTTP/1.1 client comparison on this machine: volley (io_uring, and --engine epoll)
# vs shb vs wrk vs h2load vs oha, over plain TCP (h1) and TLS (h1tls).
#
# One local nginx (1 worker, pinned to BENCH_SERVER_CPU) answers "hello, world!\n" on
# 127.0.0.1, one port per protocol; each client runs pinned to BENCH_CLIENT_CPU with 1 thread for a fixed duration,
# measured by benchlib.py rusage (CPU time to the µs, peak RSS). Medians over the runs are
# printed as a markdown table and saved, with the raw rows as CSV, under bench/results/.
# See bench/README.md.
#
# Environment:
#   BENCH_SECONDS=5         duration of each client run
#   BENCH_CONNS="50 256"    connection counts
#   BENCH_PROTOS="h1 h1tls" protocols: h1 (plain TCP), h1tls (TLS)
#   BENCH_RUNS=5            repetitions (tools are interleaved within each repetition)
#   BENCH_CLIENT_CPU=0      CPU the clients are pinned to
#   BENCH_SERVER_CPU=1      CPU nginx is pinned to
#   VOLLEY=./target/release/volley
#   BENCH_NO_BUILD=1        do not run `cargo build --release` for the default VOLLEY
#   BENCH_NO_INSTALL=1      do not apt-get install missing tools (nor cargo install shb)
#   SHB=PATH                the shb to measure (default: on PATH, else installed into bench/tools)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=h1
TITLE="volley HTTP/1.1 client benchmark"
read -r -a POINTS <<<"${BENCH_CONNS:-50 256}"
POINTS_DESC="connections ${POINTS[*]}"

# The driver (probe, interleaved runs, report), shared with h2.sh; it sources lib/common.sh.
# shellcheck source-path=SCRIPTDIR source=lib/clients.sh
. "$ROOT/bench/lib/clients.sh"

# ---------------------------------------------------------------------------------------
# Protocols and tools. To add a protocol P:
#   1. add it to PROTOS and list its tools in TOOLS_P;
#   2. define listen_P PORT (the nginx `listen` line; each protocol gets its own port);
#   3. define cmd_P_TOOL CONNS SECONDS URL for each tool, setting the CMD array.
# Each tool's output is parsed by bench/lib/benchlib.py (PARSERS, keyed by tool name),
# independently of the protocol. bench/h2.sh does this for HTTP/2 (h2c and TLS), with
# connections × streams points; bench/lib/clients.sh lists the hooks.
read -r -a PROTOS <<<"${BENCH_PROTOS:-h1 h1tls}"
for p in "${PROTOS[@]}"; do
  [[ $p == h1 || $p == h1tls ]] || { echo "h1.sh: BENCH_PROTOS: '$p' is not h1 or h1tls" >&2; exit 2; }
done
# shellcheck disable=SC2034 # read through a nameref, TOOLS_$proto
TOOLS_h1=(volley volley-epoll shb wrk h2load oha)
# shellcheck disable=SC2034
TOOLS_h1tls=(volley volley-epoll shb wrk h2load oha)

listen_h1() { echo "listen 127.0.0.1:$1;"; }
listen_h1tls() { echo "listen 127.0.0.1:$1 ssl;"; }
url_h1tls() { echo "https://127.0.0.1:$1/"; }
setup_server() { setup_tls_server; }
header_notes() { echo "- h1tls: $TLS_NOTE"; }

# Over TLS, volley gets -k; wrk, h2load and shb do not verify certificates.
cmd_h1_volley() { CMD=("$VOLLEY" -z "${2}s" -c "$1" -t 1 -j "$3"); }
cmd_h1_volley-epoll() { CMD=("$VOLLEY" --engine epoll -z "${2}s" -c "$1" -t 1 -j "$3"); }
cmd_h1_shb() { CMD=("$SHB" -z "${2}s" -c "$1" -t 1 -j "$3"); }
cmd_h1_wrk() { CMD=(wrk -t1 -c "$1" -d "${2}s" "$3"); }
cmd_h1_h2load() { CMD=(h2load --h1 -t1 -c "$1" -D "$2" "$3"); }
cmd_h1tls_volley() { CMD=("$VOLLEY" -z "${2}s" -c "$1" -t 1 -k -j "$3"); }
cmd_h1tls_volley-epoll() { CMD=("$VOLLEY" --engine epoll -z "${2}s" -c "$1" -t 1 -k -j "$3"); }
cmd_h1tls_shb() { cmd_h1_shb "$@"; }
cmd_h1tls_wrk() { cmd_h1_wrk "$@"; }
cmd_h1tls_h2load() { cmd_h1_h2load "$@"; }
# oha (tokio, on epoll): what runs where io_uring is blocked, beside volley's epoll engine.
cmd_h1_oha() { CMD=("$OHA" --no-tui --output-format json -c "$1" -z "${2}s" "$3"); }
cmd_h1tls_oha() { CMD=("$OHA" --insecure --no-tui --output-format json -c "$1" -z "${2}s" "$3"); }

clients_main wrk h2load:nghttp2-client /usr/bin/time:time openssl
