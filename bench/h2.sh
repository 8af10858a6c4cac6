#!/usr/bin/env bash
# bench/h2.sh — HTTP/2 client comparison on this machine: volley (io_uring, and --engine epoll)
# vs shb vs h2load vs oha, over h2c (prior knowledge, plain TCP) and over TLS (ALPN h2), at
# connections × streams-per-connection points.
#
# The same setup as bench/h1.sh (bench/lib/clients.sh): one local nginx (1 worker, pinned to
# BENCH_SERVER_CPU) answers "hello, world!\n" on 127.0.0.1, now with one h2c port and one TLS
# port (a self-signed certificate made at start in the temp dir); each client runs pinned to
# BENCH_CLIENT_CPU with 1 thread for a fixed duration, measured by benchlib.py rusage (CPU
# time to the µs, peak RSS). Medians over the runs are printed as a markdown table and saved,
# with the raw rows as CSV, under bench/results/. See bench/README.md.
#
# Environment:
#   BENCH_SECONDS=5                duration of each client run
#   BENCH_POINTS="16x32 64x100"    points: CONNSxSTREAMS (h2load -c/-m, volley -c/-p)
#   BENCH_PROTOS="h2c h2tls"       protocols: h2c (plain TCP), h2tls (TLS)
#   BENCH_RUNS=5                   repetitions (tools are interleaved within each repetition)
#   BENCH_CLIENT_CPU=0             CPU the clients are pinned to
#   BENCH_SERVER_CPU=1             CPU nginx is pinned to
#   VOLLEY=./target/release/volley
#   BENCH_NO_BUILD=1               do not run `cargo build --release` for the default VOLLEY
#   BENCH_NO_INSTALL=1             do not apt-get install missing tools (nor cargo install shb)
#   SHB=PATH                       the shb to measure (default: on PATH, else installed into bench/tools)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=h2
TITLE="volley HTTP/2 client benchmark"
read -r -a POINTS <<<"${BENCH_POINTS:-16x32 64x100}"
read -r -a PROTOS <<<"${BENCH_PROTOS:-h2c h2tls}"
for p in "${POINTS[@]}"; do
  [[ $p =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "h2.sh: BENCH_POINTS: '$p' is not CONNSxSTREAMS, e.g. 16x32" >&2; exit 2; }
done
for p in "${PROTOS[@]}"; do
  [[ $p == h2c || $p == h2tls ]] || { echo "h2.sh: BENCH_PROTOS: '$p' is not h2c or h2tls" >&2; exit 2; }
done
((${#POINTS[@]} && ${#PROTOS[@]})) || { echo "h2.sh: BENCH_POINTS and BENCH_PROTOS must not be empty" >&2; exit 2; }
POINTS_DESC="connections × streams per connection ${POINTS[*]}"

# The driver (probe, interleaved runs, report), shared with h1.sh; it sources lib/common.sh.
# shellcheck source-path=SCRIPTDIR source=lib/clients.sh
. "$ROOT/bench/lib/clients.sh"

# ---------------------------------------------------------------------------------------
# Protocols and tools (hooks described in bench/lib/clients.sh). Commands get
# CONNS SECONDS URL STREAMS.
# shellcheck disable=SC2034 # read through a nameref, TOOLS_$proto
TOOLS_h2c=(volley volley-epoll shb h2load oha)
# shellcheck disable=SC2034
TOOLS_h2tls=(volley volley-epoll shb h2load oha)

listen_h2c() { echo "listen 127.0.0.1:$1 http2;"; } # nginx 1.22: h2c with prior knowledge only
listen_h2tls() { echo "listen 127.0.0.1:$1 ssl http2;"; }
url_h2tls() { echo "https://127.0.0.1:$1/"; }

# h2load speaks h2c with prior knowledge to http:// URLs and offers ALPN h2 for https://;
# it does not verify the certificate. volley gets -k (accept any certificate, like curl -k).
cmd_h2c_volley() { CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_h2c_volley-epoll() { CMD=("$VOLLEY" --engine epoll --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_h2c_h2load() { CMD=(h2load -t1 -c "$1" -m "$4" -D "$2" "$3"); }
cmd_h2tls_volley() { CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -k -j "$3"); }
cmd_h2tls_volley-epoll() { CMD=("$VOLLEY" --engine epoll --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -k -j "$3"); }
cmd_h2tls_h2load() { cmd_h2c_h2load "$@"; }
# shb trusts every certificate on https:// and keeps its default batching (--batch-*).
cmd_h2c_shb() { CMD=("$SHB" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_h2tls_shb() { cmd_h2c_shb "$@"; }
# oha (tokio, on epoll): its -c is requests in flight, -p how many share a connection.
cmd_h2c_oha() { CMD=("$OHA" --http2 --no-tui --output-format json -c "$(($1 * $4))" -p "$4" -z "${2}s" "$3"); }
cmd_h2tls_oha() {
  CMD=("$OHA" --http2 --insecure --no-tui --output-format json -c "$(($1 * $4))" -p "$4" -z "${2}s" "$3")
}

# The HTTP/2 limits (stated even where they are nginx's defaults, since the points depend on
# them): up to 128 streams per connection, and no connection closed mid-run
# (keepalive_requests 100000000 in common.sh's config counts HTTP/2 requests too since nginx
# 1.19.7). The TLS port's certificate and settings come from clients.sh (setup_tls_server).
setup_server() {
  setup_tls_server
  NGINX_SERVER_EXTRA="http2_max_concurrent_streams 128;
$NGINX_SERVER_EXTRA"
}

# What h2load's probe negotiated, from its own output: "h2c", or e.g. "h2 (TLSv1.3,
# TLS_AES_128_GCM_SHA256)". h2load would fall back to http/1.1 if nginx offered only that.
negotiated() { # proto
  local file=$RAW/probe-$1-h2load.out alpn tls cipher
  [[ -s $file ]] || return 0
  alpn=$(sed -n 's/^Application protocol: *//p' "$file")
  tls=$(sed -n 's/^TLS Protocol: *//p' "$file")
  cipher=$(sed -n 's/^Cipher: *//p' "$file")
  echo "${alpn:-?}${tls:+ ($tls${cipher:+, $cipher})}"
}

header_notes() {
  echo "- nginx HTTP/2: http2_max_concurrent_streams 128, keepalive_requests 100000000; h2c: \`listen … http2\` (prior knowledge); h2tls: \`listen … ssl http2\`, $TLS_NOTE"
  local proto n
  for proto in "${PROTOS[@]}"; do
    n=$(negotiated "$proto")
    [[ -z $n ]] || echo "- $proto: h2load's probe negotiated $n"
  done
}

clients_main h2load:nghttp2-client /usr/bin/time:time openssl
