#!/usr/bin/env bash
# bench/flow.sh — what a flow costs the client: the login flow of loadgen-rs's docs (POST /login
# with a feeder row, a JSON token extracted, GET /profile with `Authorization: Bearer {{token}}`
# and two checks, GET /items with the session cookie its login set, from each user's cookie jar)
# against one static URL of the same protocol, per request.
#
# Tools, per protocol:
#   volley       one static URL (the baseline)
#   volley-flow  --scenario with the flow: three steps, a CSV feeder (mode cycle) in the login's
#                body, a JSON extractor, each user's cookie jar (the session cookie), three
#                checks (status, body_contains, status); its users send one request at a time
#                (a flow), as every scenario tool's do
#   locust       (flowh1 only) the same flow as a Locust FastHttpUser (from PyPI, into a venv in
#                bench/tools/locust on first use), one process, its users waiting 0 between
#                iterations; Locust's client speaks HTTP/1.1 only
# The report's ratios are volley-flow's (SUBJECT) over the others'.
#
# Servers: one nginx (1 worker, pinned to BENCH_SERVER_CPU) for flowh1 (plain TCP) and flowh2c
# (prior knowledge), which answers POST /login with the same JSON token and set-cookie for
# everyone and every other path with "hello, world!\n"; `volley serve --http3` for flowh3, which
# does the same (serve/src/lib.rs). Clients pinned to BENCH_CLIENT_CPU with 1 thread, as in
# bench/h1.sh; medians of interleaved runs, the driver in bench/lib/clients.sh. See
# bench/README.md. Of the issue's peers, Locust is measured; Artillery, Tsung and Goose are not
# yet.
#
# Environment:
#   BENCH_SECONDS=5                  duration of each client run
#   BENCH_POINTS="32x1"              connections × streams (a flow's user is one request at a
#                                    time, so streams above 1 buy a flow nothing)
#   BENCH_PROTOS="flowh1 flowh2c flowh3"
#   BENCH_RUNS=5                     repetitions (tools interleaved, order rotated per run)
#   BENCH_CLIENT_CPU=0 / BENCH_SERVER_CPU=1
#   VOLLEY=./target/release/volley   BENCH_NO_BUILD=1   BENCH_NO_INSTALL=1
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=flow
TITLE="volley flow benchmark"
SUBJECT=volley-flow
read -r -a POINTS <<<"${BENCH_POINTS:-32x1}"
read -r -a PROTOS <<<"${BENCH_PROTOS:-flowh1 flowh2c flowh3}"
for p in "${POINTS[@]}"; do
  [[ $p =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "flow.sh: BENCH_POINTS: '$p' is not CONNSxSTREAMS, e.g. 32x1" >&2; exit 2; }
done
for p in "${PROTOS[@]}"; do
  [[ $p == flowh1 || $p == flowh2c || $p == flowh3 ]] || { echo "flow.sh: BENCH_PROTOS: '$p' is not flowh1, flowh2c or flowh3" >&2; exit 2; }
done
((${#POINTS[@]} && ${#PROTOS[@]})) || { echo "flow.sh: BENCH_POINTS and BENCH_PROTOS must not be empty" >&2; exit 2; }
POINTS_DESC="connections × streams per connection ${POINTS[*]} (HTTP/1.1: connections only)"

# shellcheck source-path=SCRIPTDIR source=lib/clients.sh
. "$ROOT/bench/lib/clients.sh"

# shellcheck disable=SC2034 # read through a nameref, TOOLS_$proto
TOOLS_flowh1=(volley volley-flow locust)
# shellcheck disable=SC2034
TOOLS_flowh2c=(volley volley-flow)
# shellcheck disable=SC2034
TOOLS_flowh3=(volley volley-flow)

# What the server answers POST /login with: the same for everyone (volley serve's, too).
LOGIN_BODY='{"token":"volley-demo-token","user":"demo"}'
LOGIN_COOKIE='sid=volley-demo-session; Path=/; HttpOnly'

# The flow, at URL's origin, with a 1,000-row CSV feeder of users beside it.
write_flow() { # url file
  local origin=${1%/} csv=${2%.toml}.csv
  python3 - "$csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("user,password\n")
    for i in range(1000):
        f.write(f"user-{i:04d},secret-{i:04d}\n")
PY
  cat >"$2" <<EOF
origin = "$origin"
[[feeder]]
name = "users"
file = "$csv"
[[scenario]]
name = "visit"
  [[scenario.step]]
  name = "login"
  method = "POST"
  path = "/login"
  headers = { Content-Type = "application/json" }
  body = '{"user":"{{users.user}}","password":"{{users.password}}"}'
    [[scenario.step.extract]]
    var = "token"
    json = "token"
  [[scenario.step]]
  name = "profile"
  path = "/profile"
  headers = { Authorization = "Bearer {{token}}" }
    [[scenario.step.check]]
    status = 200
    [[scenario.step.check]]
    body_contains = "hello"
  [[scenario.step]]
  name = "items"
  path = "/items"
    [[scenario.step.check]]
    status = 200
EOF
}

# The same flow for Locust: a FastHttpUser walking the same CSV in turn (as mode cycle does),
# with the same extraction and checks (a failed check marks the request failed).
write_locustfile() { # file
  cat >"$1" <<'EOF'
import csv
import itertools
import os

from locust import FastHttpUser, constant, task

with open(os.environ["FLOW_USERS"], newline="") as f:
    NEXT = itertools.cycle(list(csv.DictReader(f)))


class Visit(FastHttpUser):
    wait_time = constant(0)

    @task
    def flow(self):
        row = next(NEXT)
        body = {"user": row["user"], "password": row["password"]}
        with self.client.post("/login", json=body, name="login", catch_response=True) as r:
            try:
                token = r.json()["token"]
            except Exception:
                r.failure("no token")
                return
        auth = {"Authorization": f"Bearer {token}"}
        with self.client.get("/profile", headers=auth, name="profile", catch_response=True) as r:
            if r.status_code != 200 or "hello" not in r.text:
                r.failure("check")
        with self.client.get("/items", name="items", catch_response=True) as r:
            if r.status_code != 200:
                r.failure("check")
EOF
}

# Locust, pinned, into a venv of its own on first use. LOCUST overrides it.
LOCUST_VERSION=${BENCH_LOCUST_VERSION:-2.47.0}
prepare_locust() {
  LOCUST=${LOCUST:-$ROOT/bench/tools/locust/bin/locust}
  if [[ ! -x $LOCUST && ${BENCH_NO_INSTALL:-0} != 1 ]]; then
    log "installing locust $LOCUST_VERSION into bench/tools/locust (log: $RAW/locust-install.log)"
    if ! { python3 -m venv "$ROOT/bench/tools/locust" &&
      run_child timeout 1800 "$ROOT/bench/tools/locust/bin/pip" install "locust==$LOCUST_VERSION"; } \
      >"$RAW/locust-install.log" 2>&1; then
      UNAVAILABLE_REASON="pip install locust failed, see $RAW/locust-install.log"
      return 1
    fi
  fi
  if [[ ! -x $LOCUST ]]; then
    UNAVAILABLE_REASON="locust not found (pip install locust, or set LOCUST=PATH)"
    return 1
  fi
}

flow_for() { # url: sets FLOW_FILE
  FLOW_FILE=$TMP/flow-$(printf '%s' "$1" | tr -c 'a-zA-Z0-9' _).toml
  [[ -s $FLOW_FILE ]] || write_flow "$1" "$FLOW_FILE"
}

# Commands get CONNS SECONDS URL STREAMS.
cmd_flowh1_volley() { CMD=("$VOLLEY" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_flowh1_volley-flow() { flow_for "$3"; CMD=("$VOLLEY" -c "$1" -t 1 -z "${2}s" -j --scenario "$FLOW_FILE"); }
cmd_flowh1_locust() {
  flow_for "$3"
  local file=$TMP/locustfile.py
  [[ -s $file ]] || write_locustfile "$file"
  CMD=(env FLOW_USERS="${FLOW_FILE%.toml}.csv" "$LOCUST" -f "$file" --headless -u "$1" -r "$1" -t "${2}s"
    --host "${3%/}" --json --only-summary --loglevel WARNING)
}
cmd_flowh2c_volley() { CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_flowh2c_volley-flow() {
  flow_for "$3"
  CMD=("$VOLLEY" --http2 -p "$4" -c "$1" -t 1 -z "${2}s" -j --scenario "$FLOW_FILE")
}
cmd_flowh3_volley() { CMD=("$VOLLEY" --http3 -k -p "$4" -c "$1" -t 1 -z "${2}s" -j "$3"); }
cmd_flowh3_volley-flow() {
  flow_for "$3"
  CMD=("$VOLLEY" --http3 -k -p "$4" -c "$1" -t 1 -z "${2}s" -j --scenario "$FLOW_FILE")
}

# ---------------------------------------------------------------------------------------
# nginx for the TCP protocols (with the login), `volley serve --http3` for HTTP/3.
listen_flowh1() { echo "listen 127.0.0.1:$1;"; }
listen_flowh2c() { echo "listen 127.0.0.1:$1 http2;"; }
# shellcheck source-path=SCRIPTDIR source=lib/nginx_and_serve.sh
. "$ROOT/bench/lib/nginx_and_serve.sh"
H3_PROTO=flowh3
NGINX_EXTRA="location = /login { default_type application/json; add_header Set-Cookie '$LOGIN_COOKIE'; return 200 '$LOGIN_BODY'; }"
NGINX_NOTE="POST /login answered with one JSON token and set-cookie, 200 \"hello, world!\" on every other path"
SERVE_NOTE="the same login"
header_notes() {
  echo "- the flow: POST /login (a CSV feeder's row in the JSON body; the token extracted from the JSON answer, the sid kept by each user's cookie jar), GET /profile (Authorization: Bearer {{token}}; status and body_contains checks), GET /items (the jar's Cookie: sid=…; a status check); each user one request at a time"
}

clients_main /usr/bin/time:time
