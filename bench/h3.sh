#!/usr/bin/env bash
# bench/h3.sh — HTTP/3 client comparison on this machine: volley (io_uring, and --engine epoll)
# vs shb vs oha (built with its http3 feature), against three QUIC servers on loopback: caddy (quic-go; the server is the
# bottleneck there), ngtcp2's example server gtlsserver (ngtcp2 + nghttp3 + GnuTLS, quick
# enough that a client's own cost shows), and `volley serve --http3` (quinn + h3: the one
# server oha 1.16's HTTP/3 completes runs against here; against the other two it hangs after
# its first response).
#
# The same driver as bench/h1.sh and bench/h2.sh (bench/lib/clients.sh): each server pinned to
# BENCH_SERVER_CPU, each client pinned to BENCH_CLIENT_CPU with 1 thread for a fixed duration,
# measured by benchlib.py rusage (CPU time to the µs, peak RSS); medians over interleaved
# runs, printed as a markdown table and saved with the raw rows under bench/results/. See
# bench/README.md.
#
# Environment:
#   BENCH_SECONDS=5                 duration of each client run
#   BENCH_POINTS="16x32"            points: CONNSxSTREAMS (volley -c/-p, shb -c/-p, oha -c C*S -p S)
#   BENCH_PROTOS="h3ngtcp2 h3caddy h3serve"
#                                   servers: h3ngtcp2 (gtlsserver), h3caddy (caddy),
#                                   h3serve (volley serve --http3, the VOLLEY binary)
#   BENCH_RUNS=5                    repetitions (tools are interleaved within each repetition)
#   BENCH_CLIENT_CPU=0 / BENCH_SERVER_CPU=1
#   VOLLEY=./target/release/volley
#   BENCH_NO_BUILD=1                do not run `cargo build --release` for the default VOLLEY
#   BENCH_NO_INSTALL=1              do not install missing tools (apt-get, cargo install)
#   SHB=PATH / OHA=PATH             the shb / oha to measure (default: on PATH, else installed
#                                   into bench/tools; oha must have been built with http3)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=h3
TITLE="volley HTTP/3 client benchmark"
read -r -a POINTS <<<"${BENCH_POINTS:-16x32}"
read -r -a PROTOS <<<"${BENCH_PROTOS:-h3ngtcp2 h3caddy h3serve}"
for p in "${POINTS[@]}"; do
  [[ $p =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "h3.sh: BENCH_POINTS: '$p' is not CONNSxSTREAMS, e.g. 16x32" >&2; exit 2; }
done
for p in "${PROTOS[@]}"; do
  [[ $p == h3ngtcp2 || $p == h3caddy || $p == h3serve ]] || { echo "h3.sh: BENCH_PROTOS: '$p' is not h3ngtcp2, h3caddy or h3serve" >&2; exit 2; }
done
((${#POINTS[@]} && ${#PROTOS[@]})) || { echo "h3.sh: BENCH_POINTS and BENCH_PROTOS must not be empty" >&2; exit 2; }
POINTS_DESC="connections × streams per connection ${POINTS[*]}"

# shellcheck source-path=SCRIPTDIR source=lib/clients.sh
. "$ROOT/bench/lib/clients.sh"

# shellcheck disable=SC2034 # read through a nameref, TOOLS_$proto
TOOLS_h3ngtcp2=(volley volley-epoll shb oha)
# shellcheck disable=SC2034
TOOLS_h3caddy=(volley volley-epoll shb oha)
# shellcheck disable=SC2034
TOOLS_h3serve=(volley volley-epoll shb oha)

# Commands get CONNS SECONDS URL STREAMS. Every client trusts any certificate (volley -k).
cmd_h3ngtcp2_volley() { CMD=("$VOLLEY" --http3 -p "$4" -c "$1" -t 1 -z "${2}s" -k -j "$3"); }
cmd_h3caddy_volley() { cmd_h3ngtcp2_volley "$@"; }
cmd_h3serve_volley() { cmd_h3ngtcp2_volley "$@"; }
cmd_h3ngtcp2_volley-epoll() { CMD=("$VOLLEY" --engine epoll --http3 -p "$4" -c "$1" -t 1 -z "${2}s" -k -j "$3"); }
cmd_h3caddy_volley-epoll() { cmd_h3ngtcp2_volley-epoll "$@"; }
cmd_h3serve_volley-epoll() { cmd_h3ngtcp2_volley-epoll "$@"; }
cmd_h3ngtcp2_shb() { CMD=("$SHB" --http3 -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_h3caddy_shb() { cmd_h3ngtcp2_shb "$@"; }
cmd_h3serve_shb() { cmd_h3ngtcp2_shb "$@"; }
# oha's -c is concurrent requests, -p how many of them share a connection; its runtime takes
# the one CPU it is pinned to.
cmd_h3ngtcp2_oha() {
  CMD=("$OHA" --http-version 3 --insecure --no-tui --output-format json -c "$(($1 * $4))" -p "$4" -z "${2}s" "$3")
}
cmd_h3caddy_oha() { cmd_h3ngtcp2_oha "$@"; }
cmd_h3serve_oha() { cmd_h3ngtcp2_oha "$@"; }

# ---------------------------------------------------------------------------------------
# The servers: both answer "hello, world!\n" to GET / over HTTP/3 with the self-signed
# certificate clients.sh makes (TLS 1.3; QUIC allows nothing else).
declare -A SERVER_PIDS SERVER_CMDS

start_h3ngtcp2() { # port
  local dir=$TMP/ngtcp2
  mkdir -p "$dir/htdocs"
  printf 'hello, world!\n' >"$dir/htdocs/index.html"
  SERVER_CMDS[h3ngtcp2]="taskset -c $SERVER_CPU gtlsserver -q -d $dir/htdocs 127.0.0.1 $1 $TMP/tls/key.pem $TMP/tls/cert.pem"
  # shellcheck disable=SC2086 # the command line above, split on spaces (no spaces in TMP)
  ${SERVER_CMDS[h3ngtcp2]} </dev/null >"$dir/stdout.log" 2>"$dir/stderr.log" &
  SERVER_PIDS[h3ngtcp2]=$!
  URLS[h3ngtcp2]="https://127.0.0.1:$1/"
}

start_h3caddy() { # port
  local dir=$TMP/caddy
  mkdir -p "$dir"
  cat >"$dir/Caddyfile" <<EOF
{
	admin off
	auto_https off
	# Clients send no SNI to an IP address; without this caddy has no certificate to offer.
	default_sni 127.0.0.1
	skip_install_trust
	log {
		output discard
	}
	servers {
		protocols h3
	}
}
https://127.0.0.1:$1 {
	tls $TMP/tls/cert.pem $TMP/tls/key.pem
	respond "hello, world!
" 200
}
EOF
  cp "$dir/Caddyfile" "$RESULTS/$NAME-$STAMP.Caddyfile"
  SERVER_CMDS[h3caddy]="taskset -c $SERVER_CPU caddy run --adapter caddyfile --config $dir/Caddyfile"
  # caddy keeps its state under XDG folders: the temp dir's, not the user's.
  # shellcheck disable=SC2086
  XDG_DATA_HOME=$dir/data XDG_CONFIG_HOME=$dir/config GOMAXPROCS=1 ${SERVER_CMDS[h3caddy]} \
    </dev/null >"$dir/stdout.log" 2>"$dir/stderr.log" &
  SERVER_PIDS[h3caddy]=$!
  URLS[h3caddy]="https://127.0.0.1:$1/"
}

start_h3serve() { # port
  local dir=$TMP/serve
  mkdir -p "$dir"
  prepare_volley || die "$UNAVAILABLE_REASON" # the server is the binary measured: built first
  SERVER_CMDS[h3serve]="taskset -c $SERVER_CPU $VOLLEY serve --listen 127.0.0.1:$1 --http3"
  # shellcheck disable=SC2086
  ${SERVER_CMDS[h3serve]} </dev/null >"$dir/stdout.log" 2>"$dir/stderr.log" &
  SERVER_PIDS[h3serve]=$!
  URLS[h3serve]="https://127.0.0.1:$1/"
}

start_server() {
  setup_tls_server
  local proto port
  for proto in "${PROTOS[@]}"; do
    port=$(python3 "$LIB" free-port)
    "start_$proto" "$port"
  done
  # QUIC has no connect to wait for: give the servers a moment, then the probes tell.
  sleep 1
  check_server
  log "servers (CPU $SERVER_CPU): $(for p in "${PROTOS[@]}"; do printf '%s=%s ' "$p" "${URLS[$p]}"; done)"
}

check_server() {
  local proto
  for proto in "${PROTOS[@]}"; do
    if ! kill -0 "${SERVER_PIDS[$proto]}" 2>/dev/null; then
      cat "$TMP"/*/stderr.log >&2 2>/dev/null || true
      die "the $proto server died"
    fi
  done
}

cleanup_hook() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do stop_pid "$pid"; done
}

server_header() {
  local proto
  for proto in "${PROTOS[@]}"; do
    case $proto in
    h3ngtcp2) echo "- h3ngtcp2: gtlsserver (Debian ngtcp2-server $(dpkg-query -W -f '${Version}' ngtcp2-server 2>/dev/null || echo '?')), pinned to CPU $SERVER_CPU, serving a 14-byte index.html" ;;
    h3serve) echo "- h3serve: volley serve --http3 (quinn + h3 on tokio, self-signed certificate), pinned to CPU $SERVER_CPU" ;;
    h3caddy) echo "- h3caddy: $(caddy version 2>/dev/null | head -n1 || echo caddy) with GOMAXPROCS=1, pinned to CPU $SERVER_CPU, HTTP/3 only, \`respond\` 14 bytes, logs discarded" ;;
    esac
  done
  echo "- TLS: $TLS_NOTE (QUIC's TLS 1.3; the servers choose the suite)"
}

server_commands() {
  local proto
  for proto in "${PROTOS[@]}"; do echo "${SERVER_CMDS[$proto]}"; done
}

clients_main gtlsserver:ngtcp2-server caddy /usr/bin/time:time openssl
