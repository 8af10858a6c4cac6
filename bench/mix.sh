#!/usr/bin/env bash
# bench/mix.sh — what a request mix costs the client: a targets file of 8 requests (GETs with
# different paths, queries and headers, one POST with a 1 KB body) against one URL of the same
# protocol, and the same 8 URLs through oha's --urls-from-file.
#
# Tools, per protocol:
#   volley      one URL (the baseline)
#   volley-mix  --targets with the 8 requests, taken in turn by each connection
#   volley-tmpl --scenario with the same 8 requests as the steps of one scenario, with templates
#               ({{vu}}, {{iteration}}, {{random_int}}, {{uuid}}) in paths, headers and the body
#   volley-feed --scenario of one templated request: two columns of a 10,000-row CSV feeder
#               (mode cycle) in its path and a header, and a {{random_int}} in its query
#   oha-mix     oha --urls-from-file with the 8 URLs (oha sends GETs only, without the headers;
#               HTTP/1.1 and h2c)
# The report's ratios are volley-mix's (SUBJECT) over the others'.
#
# Servers: one nginx (1 worker, pinned to BENCH_SERVER_CPU) for mixh1 (plain TCP) and mixh2c
# (prior knowledge), answering 200 "hello, world!\n" on every path; `volley serve --http3` for
# mixh3 (every path too); ngtcp2's gtlsserver for mixh3ngtcp2, serving files for the mix's
# paths (the 8 requests' and every path the templates and the feeder make), quick enough that
# the client, not the server, is what a closed loop measures there (volley serve, answering
# the larger requests slower, made the client's cost per request a count of its wake-ups).
# No path of the mix is a folder of gtlsserver's (which would answer it with a 308 and its
# location): every request gets the URL's answer, 200 "hello, world!\n", so the ratios are
# what sending the mix costs, not what reading redirects does.
# Clients pinned to BENCH_CLIENT_CPU with 1 thread, as in bench/h1.sh; medians of interleaved
# runs, the driver in bench/lib/clients.sh. See bench/README.md.
#
# Environment:
#   BENCH_SECONDS=5                  duration of each client run
#   BENCH_POINTS="32x16"             connections × streams (streams for h2c and h3 only)
#   BENCH_PROTOS="mixh1 mixh2c mixh3 mixh3ngtcp2"
#   BENCH_RUNS=5                     repetitions (tools interleaved, order rotated per run)
#   BENCH_CLIENT_CPU=0 / BENCH_SERVER_CPU=1
#   BENCH_CLIENT_QUOTA=PCT           hold each client to PCT% of its CPU (a CFS quota, as root),
#                                    so that it sets the pace (bench/lib/clients.sh)
#   VOLLEY=./target/release/volley   BENCH_NO_BUILD=1   BENCH_NO_INSTALL=1
#   OHA=PATH                         the oha to measure (default: on PATH, else bench/tools)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=mix
TITLE="volley request mix benchmark"
SUBJECT=volley-mix
read -r -a POINTS <<<"${BENCH_POINTS:-32x16}"
read -r -a PROTOS <<<"${BENCH_PROTOS:-mixh1 mixh2c mixh3 mixh3ngtcp2}"
for p in "${POINTS[@]}"; do
  [[ $p =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "mix.sh: BENCH_POINTS: '$p' is not CONNSxSTREAMS, e.g. 32x16" >&2; exit 2; }
done
for p in "${PROTOS[@]}"; do
  [[ $p == mixh1 || $p == mixh2c || $p == mixh3 || $p == mixh3ngtcp2 ]] ||
    { echo "mix.sh: BENCH_PROTOS: '$p' is not mixh1, mixh2c, mixh3 or mixh3ngtcp2" >&2; exit 2; }
done
((${#POINTS[@]} && ${#PROTOS[@]})) || { echo "mix.sh: BENCH_POINTS and BENCH_PROTOS must not be empty" >&2; exit 2; }
POINTS_DESC="connections × streams per connection ${POINTS[*]} (HTTP/1.1: connections only)"

# shellcheck source-path=SCRIPTDIR source=lib/clients.sh
. "$ROOT/bench/lib/clients.sh"

# shellcheck disable=SC2034 # read through a nameref, TOOLS_$proto
TOOLS_mixh1=(volley volley-mix volley-tmpl volley-feed oha-mix)
# shellcheck disable=SC2034
TOOLS_mixh2c=(volley volley-mix volley-tmpl volley-feed oha-mix)
# shellcheck disable=SC2034
TOOLS_mixh3=(volley volley-mix volley-tmpl volley-feed)
# shellcheck disable=SC2034
TOOLS_mixh3ngtcp2=(volley volley-mix volley-tmpl volley-feed)

# The 8 requests, at URL's origin: a targets file for volley, a URL list for oha.
write_targets() { # url file
  local origin=${1%/} body=$TMP/mix-body.bin
  head -c 1000 /dev/zero | tr '\0' x >"$body"
  cat >"$2" <<EOF
GET $origin/

# name: list
GET $origin/catalog?page=1
Accept: application/json

GET $origin/items/42
Accept: application/json
X-Request-Id: bench

GET $origin/search?q=volley&limit=10
Accept: application/json

GET $origin/static/app.js
Accept-Encoding: identity

GET $origin/users/7/orders
Authorization: Bearer bench-token

GET $origin/health

POST $origin/orders
Content-Type: application/octet-stream
@$body
EOF
}
write_urls() { # url file
  local origin=${1%/}
  printf '%s\n' "$origin/" "$origin/catalog?page=1" "$origin/items/42" "$origin/search?q=volley&limit=10" \
    "$origin/static/app.js" "$origin/users/7/orders" "$origin/health" "$origin/orders" >"$2"
}

# The same 8 requests as the steps of one scenario, with templates in paths, headers and the
# body: what filling slots per request costs beside sending requests encoded once.
write_scenario() { # url file
  local origin=${1%/} pad
  pad=$(head -c 960 /dev/zero | tr '\0' x)
  cat >"$2" <<EOF
origin = "$origin"
[[scenario]]
name = "all"
  [[scenario.step]]
  path = "/"
  [[scenario.step]]
  name = "list"
  path = "/catalog?page={{iteration}}"
  headers = { Accept = "application/json" }
  [[scenario.step]]
  path = "/items/{{random_int 1 1000}}"
  headers = { Accept = "application/json", X-Request-Id = "{{uuid}}" }
  [[scenario.step]]
  path = "/search?q=volley&limit=10"
  headers = { Accept = "application/json" }
  [[scenario.step]]
  path = "/static/app.js"
  headers = { Accept-Encoding = "identity" }
  [[scenario.step]]
  path = "/users/{{vu}}/orders"
  headers = { Authorization = "Bearer bench-token" }
  [[scenario.step]]
  path = "/health"
  [[scenario.step]]
  method = "POST"
  path = "/orders"
  headers = { Content-Type = "application/octet-stream" }
  body = "{{uuid}}$pad"
EOF
}

write_feed_scenario() { # url file: one templated request fed from a CSV beside it
  local origin=${1%/} csv=${2%.toml}.csv
  python3 - "$csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("id,user\n")
    for i in range(10000):
        f.write(f"{i:05d},user-{i:05d}\n")
PY
  cat >"$2" <<EOF
origin = "$origin"
[[feeder]]
name = "items"
file = "$csv"
[[scenario]]
name = "item"
  [[scenario.step]]
  path = "/items/{{items.id}}?q={{random_int 1 1000}}"
  headers = { X-User = "{{items.user}}" }
EOF
}

feed_for() { # url: sets FEED_FILE
  FEED_FILE=$TMP/feed-$(printf '%s' "$1" | tr -c 'a-zA-Z0-9' _).toml
  [[ -s $FEED_FILE ]] || write_feed_scenario "$1" "$FEED_FILE"
}

scenario_for() { # url: sets SCENARIO_FILE
  SCENARIO_FILE=$TMP/scenario-$(printf '%s' "$1" | tr -c 'a-zA-Z0-9' _).toml
  [[ -s $SCENARIO_FILE ]] || write_scenario "$1" "$SCENARIO_FILE"
}

targets_for() { # url: sets TARGETS_FILE (one per URL, written once)
  TARGETS_FILE=$TMP/targets-$(printf '%s' "$1" | tr -c 'a-zA-Z0-9' _).txt
  [[ -s $TARGETS_FILE ]] || write_targets "$1" "$TARGETS_FILE"
}
urls_for() { # url: sets URLS_FILE
  URLS_FILE=$TMP/urls-$(printf '%s' "$1" | tr -c 'a-zA-Z0-9' _).txt
  [[ -s $URLS_FILE ]] || write_urls "$1" "$URLS_FILE"
}

# Commands get CONNS SECONDS URL STREAMS.
cmd_mixh1_volley() { CMD=("$VOLLEY" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_mixh1_volley-mix() { targets_for "$3"; CMD=("$VOLLEY" -c "$1" -t 1 -z "${2}s" -j --targets "$TARGETS_FILE"); }
cmd_mixh1_volley-tmpl() { scenario_for "$3"; CMD=("$VOLLEY" -c "$1" -t 1 -z "${2}s" -j --scenario "$SCENARIO_FILE"); }
cmd_mixh1_volley-feed() { feed_for "$3"; CMD=("$VOLLEY" -c "$1" -t 1 -z "${2}s" -j --scenario "$FEED_FILE"); }
cmd_mixh1_oha-mix() { urls_for "$3"; CMD=("$OHA" --no-tui --output-format json -c "$1" -z "${2}s" --urls-from-file "$URLS_FILE"); }
cmd_mixh2c_volley() { CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_mixh2c_volley-mix() {
  targets_for "$3"
  CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j --targets "$TARGETS_FILE")
}
cmd_mixh2c_volley-tmpl() {
  scenario_for "$3"
  CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j --scenario "$SCENARIO_FILE")
}
cmd_mixh2c_volley-feed() {
  feed_for "$3"
  CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j --scenario "$FEED_FILE")
}
# oha's -c is requests in flight, -p how many share a connection.
cmd_mixh2c_oha-mix() {
  urls_for "$3"
  CMD=("$OHA" --http2 --no-tui --output-format json -c "$(($1 * $4))" -p "$4" -z "${2}s" --urls-from-file "$URLS_FILE")
}
cmd_mixh3_volley() { CMD=("$VOLLEY" --http3 -k -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_mixh3_volley-mix() {
  targets_for "$3"
  CMD=("$VOLLEY" --http3 -k -p "$4" -c "$1" -t 1 -z "${2}s" -j --targets "$TARGETS_FILE")
}

cmd_mixh3_volley-feed() {
  feed_for "$3"
  CMD=("$VOLLEY" --http3 -k -p "$4" -c "$1" -t 1 -z "${2}s" -j --scenario "$FEED_FILE")
}

cmd_mixh3_volley-tmpl() {
  scenario_for "$3"
  CMD=("$VOLLEY" --http3 -k -p "$4" -c "$1" -t 1 -z "${2}s" -j --scenario "$SCENARIO_FILE")
}

cmd_mixh3ngtcp2_volley() { cmd_mixh3_volley "$@"; }
cmd_mixh3ngtcp2_volley-mix() { cmd_mixh3_volley-mix "$@"; }
cmd_mixh3ngtcp2_volley-tmpl() { cmd_mixh3_volley-tmpl "$@"; }
cmd_mixh3ngtcp2_volley-feed() { cmd_mixh3_volley-feed "$@"; }

prepare_oha-mix() { prepare_oha; }

# gtlsserver's files: "hello, world!\n" at every path the mix, the templates ({{random_int 1
# 1000}} items, {{vu}}'s users) and the feeder (10,000 items) ask for, none of them a folder.
ngtcp2_htdocs() { # dir
  python3 - "$1" <<'PY'
import os
import sys

root = sys.argv[1]
paths = ["index.html", "catalog", "search", "static/app.js", "health", "orders"]
paths += [f"items/{i}" for i in range(1, 1001)]
paths += [f"items/{i:05d}" for i in range(10000)]
paths += [f"users/{vu}/orders" for vu in range(4096)]
for path in paths:
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write("hello, world!\n")
PY
}

# ---------------------------------------------------------------------------------------
# nginx for the TCP protocols, `volley serve --http3` for HTTP/3.
listen_mixh1() { echo "listen 127.0.0.1:$1;"; }
listen_mixh2c() { echo "listen 127.0.0.1:$1 http2;"; }
# shellcheck source-path=SCRIPTDIR source=lib/nginx_and_serve.sh
. "$ROOT/bench/lib/nginx_and_serve.sh"
H3_PROTO=mixh3
NGTCP2_PROTO=mixh3ngtcp2
NGTCP2_NOTE="the mix's paths as files, each answered 200"
NGINX_NOTE="200 on every path"
SERVE_NOTE="every path answered"
header_notes() {
  echo "- the mix: 8 requests to one origin (7 GETs of different paths, queries and headers; 1 POST of 1,000 bytes), one targets file (volley-mix), scenario file with templates in 4 paths, 1 header and the body (volley-tmpl) or URL list (oha-mix, GETs only, no headers)"
}

clients_main /usr/bin/time:time
