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
#   artillery    (flowh1 only) the same flow as an Artillery 2 script (from npm, into
#                bench/tools/artillery on first use): its users arrive in one phase (so one
#                worker thread runs them) and loop the flow until the run's end; the token by
#                its JSON capture, the cookie by each user's jar, the CSV row per iteration and
#                the checks by hooks of a processor (its expect plugin logs every request)
#   tsung        (flowh1 only) the same flow as a Tsung session (Debian's package), its load
#                inside the controller's Erlang VM (use_controller_vm) with one scheduler
#                (+S 1), looping the flow until the test's duration stops it
#   goose        (flowh1 only) the same flow as one Goose transaction, a small program in
#                bench/goose (built on first use into bench/tools/goose-target), its tokio
#                runtime with one worker thread
# The peers start their users over the first second (Locust, -r) or a millisecond apart (the
# others), and run with no wait between iterations. The report's ratios are volley-flow's
# (SUBJECT) over the others'.
#
# Servers: one nginx (1 worker, pinned to BENCH_SERVER_CPU) for flowh1 (plain TCP) and flowh2c
# (prior knowledge), which answers POST /login with the same JSON token and set-cookie for
# everyone and every other path with "hello, world!\n"; `volley serve --http3` for flowh3, which
# does the same (serve/src/lib.rs). Clients pinned to BENCH_CLIENT_CPU with 1 thread, as in
# bench/h1.sh; medians of interleaved runs, the driver in bench/lib/clients.sh. See
# bench/README.md.
#
# Environment:
#   BENCH_SECONDS=5                  duration of each client run
#   BENCH_POINTS="32x1"              connections × streams (a flow's user is one request at a
#                                    time, so streams above 1 buy a flow nothing)
#   BENCH_PROTOS="flowh1 flowh2c flowh3"
#   BENCH_RUNS=5                     repetitions (tools interleaved, order rotated per run)
#   BENCH_CLIENT_CPU=0 / BENCH_SERVER_CPU=1
#   VOLLEY=./target/release/volley   BENCH_NO_BUILD=1   BENCH_NO_INSTALL=1
#   LOCUST=PATH  ARTILLERY=PATH  TSUNG=PATH  GOOSE=PATH   the peers' own, instead of installing
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
TOOLS_flowh1=(volley volley-flow locust artillery tsung goose)
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

# The same flow for Artillery: its processor (the hooks: the CSV row of each iteration, the
# checks counted per name as flow.NAME.ok or flow.NAME.failed, the loop's end at the run's end)
# and a script per user count, its users arriving a millisecond apart in one phase.
write_artillery_processor() { # file
  cat >"$1" <<'EOF'
'use strict';
const fs = require('fs');

const ROWS = fs.readFileSync(process.env.FLOW_USERS, 'utf8').trim().split('\n').slice(1)
  .map((line) => line.split(','));
let next = 0;
let deadline = 0; // set by the first iteration: the run's start as the users see it

function nextUser(context, events, done) {
  if (!deadline) deadline = Date.now() + Number(process.env.FLOW_SECONDS) * 1000;
  const [user, password] = ROWS[next++ % ROWS.length];
  context.vars.user = user;
  context.vars.password = password;
  context.vars.token = '';
  return done();
}

function count(events, name, ok) {
  events.emit('counter', `flow.${name}.${ok ? 'ok' : 'failed'}`, 1);
}

// The capture has set the token, or nothing: then the iteration's other steps are skipped.
function login(req, res, context, events, done) {
  const token = context.vars.token;
  const ok = res.statusCode === 200 && typeof token === 'string' && token !== '';
  if (!ok) context.vars.token = '';
  count(events, 'login', ok);
  return done();
}

function profile(req, res, context, events, done) {
  count(events, 'profile', res.statusCode === 200 && String(res.body).includes('hello'));
  return done();
}

function items(req, res, context, events, done) {
  count(events, 'items', res.statusCode === 200);
  return done();
}

function running(context, done) {
  return done(Date.now() < deadline);
}

module.exports = { nextUser, login, profile, items, running };
EOF
}
write_artillery_script() { # file users
  cat >"$1" <<EOF
config:
  processor: "./flow.js"
  phases:
    - duration: "${2}ms"
      arrivalCount: $2
scenarios:
  - name: visit
    flow:
      - loop:
          - function: nextUser
          - post:
              url: "/login"
              json:
                user: "{{ user }}"
                password: "{{ password }}"
              capture:
                json: "\$.token"
                as: token
                strict: false
              afterResponse: login
          - get:
              url: "/profile"
              ifTrue: token
              headers:
                Authorization: "Bearer {{ token }}"
              afterResponse: profile
          - get:
              url: "/items"
              ifTrue: token
              afterResponse: items
        whileTrue: running
EOF
}

# The same flow for Tsung: a session looping it, the CSV's rows (without its header) taken in
# turn from the controller's file server, the token by a JSONPath variable (a login without
# it skips the rest of the iteration), the cookie kept by Tsung's session. A failed check is a
# `nomatch`; each step is a transaction, for its count. The test's duration ends the users.
write_tsung_config() { # file url users seconds users_csv dtd
  local hostport=${2#*://}
  hostport=${hostport%%/*}
  cat >"$1" <<EOF
<?xml version="1.0"?>
<!DOCTYPE tsung SYSTEM "$6">
<tsung loglevel="warning">
  <clients>
    <!-- maxusers above the users: at maxusers Tsung would start another VM -->
    <client host="localhost" use_controller_vm="true" maxusers="$(($3 + 1))"/>
  </clients>
  <servers>
    <server host="${hostport%:*}" port="${hostport##*:}" type="tcp"/>
  </servers>
  <load duration="$4" unit="second">
    <arrivalphase phase="1" duration="$4" unit="second">
      <users maxnumber="$3" arrivalrate="1000" unit="second"/>
    </arrivalphase>
  </load>
  <options>
    <option name="file_server" id="users" value="$5"/>
  </options>
  <sessions>
    <session name="visit" probability="100" type="ts_http">
      <for from="1" to="2000000000" incr="1" var="i">
        <setdynvars sourcetype="file" fileid="users" delimiter="," order="iter">
          <var name="user"/>
          <var name="password"/>
        </setdynvars>
        <setdynvars sourcetype="value" value="">
          <var name="token"/>
        </setdynvars>
        <transaction name="login">
          <request subst="true">
            <match do="continue" when="nomatch">"token"</match>
            <dyn_variable name="token" jsonpath="token"/>
            <http url="/login" method="POST" content_type="application/json"
                  contents="{&quot;user&quot;:&quot;%%_user%%&quot;,&quot;password&quot;:&quot;%%_password%%&quot;}"/>
          </request>
        </transaction>
        <if var="token" neq="">
          <transaction name="profile">
            <request subst="true">
              <match do="continue" when="nomatch">hello</match>
              <http url="/profile" method="GET">
                <http_header name="Authorization" value="Bearer %%_token%%"/>
              </http>
            </request>
          </transaction>
          <transaction name="items">
            <request>
              <http url="/items" method="GET"/>
            </request>
          </transaction>
        </if>
      </for>
    </session>
  </sessions>
</tsung>
EOF
}

# Artillery, pinned, into bench/tools/artillery on first use. ARTILLERY overrides it. 2.0.21 is
# the last 2.x whose Node is Debian's (18; later ones want 22).
ARTILLERY_VERSION=${BENCH_ARTILLERY_VERSION:-2.0.21}
prepare_artillery() {
  ARTILLERY=${ARTILLERY:-$ROOT/bench/tools/artillery/node_modules/.bin/artillery}
  if [[ ! -x $ARTILLERY && ${BENCH_NO_INSTALL:-0} != 1 ]]; then
    log "installing artillery $ARTILLERY_VERSION into bench/tools/artillery (log: $RAW/artillery-install.log)"
    # No browser for its Playwright engine: the flow is HTTP only.
    if ! run_child env PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 1800 \
      npm install --prefix "$ROOT/bench/tools/artillery" "artillery@$ARTILLERY_VERSION" \
      >"$RAW/artillery-install.log" 2>&1; then
      UNAVAILABLE_REASON="npm install artillery failed, see $RAW/artillery-install.log"
      return 1
    fi
  fi
  if [[ ! -x $ARTILLERY ]]; then
    UNAVAILABLE_REASON="artillery not found (npm install artillery, or set ARTILLERY=PATH)"
    return 1
  fi
}

# Tsung, Debian's (installed by clients_main). TSUNG overrides it. Its Erlang node registers
# with epmd, which erl starts as a daemon if none runs: cleanup_hook stops it again then.
EPMD_STOP=
prepare_tsung() {
  TSUNG=${TSUNG:-/usr/bin/tsung}
  if [[ ! -x $TSUNG ]]; then
    UNAVAILABLE_REASON="tsung not found (apt-get install tsung, or set TSUNG=PATH)"
    return 1
  fi
  TSUNG_DTD=$(cd "$(dirname "$(readlink -f "$TSUNG")")/.." && pwd)/share/tsung/tsung-1.0.dtd
  if [[ ! -r $TSUNG_DTD ]]; then
    UNAVAILABLE_REASON="Tsung's DTD not found at $TSUNG_DTD"
    return 1
  fi
  if command -v epmd >/dev/null && ! epmd -names >/dev/null 2>&1; then EPMD_STOP=1; fi
}

# Goose: bench/goose, built with cargo into bench/tools/goose-target (a no-op when up to date).
# GOOSE overrides it.
GOOSE_TARGET=$ROOT/bench/tools/goose-target
prepare_goose() {
  if [[ -z ${GOOSE:-} ]]; then
    GOOSE=$GOOSE_TARGET/release/goose-flow
    if [[ ${BENCH_NO_INSTALL:-0} != 1 ]] && command -v cargo >/dev/null; then
      log "building bench/goose into bench/tools/goose-target (log: $RAW/goose-install.log)"
      if ! run_child timeout 3600 cargo build --release --locked --manifest-path "$ROOT/bench/goose/Cargo.toml" \
        --target-dir "$GOOSE_TARGET" >"$RAW/goose-install.log" 2>&1; then
        UNAVAILABLE_REASON="cargo build of bench/goose failed, see $RAW/goose-install.log"
        return 1
      fi
    fi
  fi
  if [[ ! -x $GOOSE ]]; then
    UNAVAILABLE_REASON="$GOOSE not found (cargo build --release --manifest-path bench/goose/Cargo.toml, or set GOOSE=PATH)"
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
# Artillery's console output goes to stderr, its JSON report (written at its end) to stdout.
# Its telemetry sends an event even when disabled, unless it runs as a cloud worker (WORKER_ID,
# which a local run reads nowhere else): without that, each run would end by waiting for a DNS
# answer for the telemetry's host.
cmd_flowh1_artillery() {
  flow_for "$3"
  local dir=$TMP/artillery script
  script=$dir/flow-c$1.yml
  mkdir -p "$dir"
  [[ -s $dir/flow.js ]] || write_artillery_processor "$dir/flow.js"
  [[ -s $script ]] || write_artillery_script "$script" "$1"
  # shellcheck disable=SC2016 # sh -c's own arguments
  CMD=(env ARTILLERY_DISABLE_TELEMETRY=true WORKER_ID=flow.sh FLOW_USERS="${FLOW_FILE%.toml}.csv" FLOW_SECONDS="$2"
    sh -c 'rm -f "$3" && "$1" run --target "$2" --output "$3" "$4" >&2 && cat "$3"' artillery
    "$ARTILLERY" "${3%/}" "$dir/report.json" "$script")
}
# Tsung writes its statistics to stdout (-m -), without its web dashboard (-n) or warm-up
# (-w 0); its last line is the test's duration, which its users ran for (Tsung prints no
# start time of its own).
cmd_flowh1_tsung() {
  flow_for "$3"
  local dir=$TMP/tsung config
  config=$dir/flow-c$1-s$2.xml
  mkdir -p "$dir"
  [[ -s $dir/users.csv ]] || tail -n +2 "${FLOW_FILE%.toml}.csv" >"$dir/users.csv"
  write_tsung_config "$config" "$3" "$1" "$2" "$dir/users.csv" "$TSUNG_DTD" # the URL's port in it
  # shellcheck disable=SC2016 # sh -c's own arguments
  CMD=(env ERL_FLAGS="+S 1" sh -c '"$1" -f "$2" -l "$3" -n -w 0 -m - start && echo "load duration: $4 s"' tsung
    "$TSUNG" "$config" "$dir/log" "$2")
}
cmd_flowh1_goose() {
  flow_for "$3"
  CMD=(env FLOW_USERS="${FLOW_FILE%.toml}.csv" "$GOOSE" --host "${3%/}" --users "$1" --increase-rate 1000
    --run-time "${2}s" --quiet)
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
# nginx_and_serve.sh's, and epmd stopped if a Tsung run started it (epmd -kill refuses while
# any Erlang node is registered).
cleanup_hook() {
  [[ -z $SERVE_PID ]] || stop_pid "$SERVE_PID"
  [[ -z $EPMD_STOP ]] || epmd -kill >/dev/null 2>&1 || true
}
header_notes() {
  echo "- the flow: POST /login (a CSV feeder's row in the JSON body; the token extracted from the JSON answer, the sid kept by each user's cookie jar), GET /profile (Authorization: Bearer {{token}}; status and body_contains checks), GET /items (the jar's Cookie: sid=…; a status check); each user one request at a time"
  if [[ " ${PROTOS[*]} " == *" flowh1 "* ]]; then
    echo "- the peers' requests: those that did not fail, over the three names; their span: Locust's first request's start to its last one's end, Artillery's first to last metric, Tsung's test duration, Goose's first to last test-plan step"
  fi
}

# The peers of flowh1 from Debian: Tsung, and npm for Artillery.
PACKAGES=(/usr/bin/time:time)
[[ " ${PROTOS[*]} " != *" flowh1 "* ]] || PACKAGES+=("${TSUNG:-/usr/bin/tsung}:tsung" npm)
clients_main "${PACKAGES[@]}"
