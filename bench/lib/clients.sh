# shellcheck shell=bash
# bench/lib/clients.sh — the client comparison that bench/h1.sh and bench/h2.sh run: one
# local nginx (bench/lib/common.sh), each client pinned to CLIENT_CPU with 1 thread for a
# fixed duration under benchlib.py's rusage (CPU times to the µs, GNU time's peak RSS),
# repetitions interleaved, medians printed as a markdown report and saved with the raw rows
# under bench/results/. See bench/README.md.
#
# The sourcing script sets ROOT, NAME (it is bench/$NAME.sh), TITLE (the report heading),
# POINTS (the measured points: "C" connections, or "CxM" connections × M HTTP/2 streams per
# connection) and POINTS_DESC (how the header names them), then sources this file and
# defines, for each protocol P it lists in PROTOS:
#   TOOLS_P                       the tools measured for P, in order (e.g. (volley h2load));
#   listen_P PORT                 the nginx `listen` line (each protocol gets its own port);
#   url_P PORT                    optional: the URL, default http://127.0.0.1:PORT/;
#   cmd_P_TOOL CONNS SECONDS URL [STREAMS]
#                                 sets the CMD array for one run (STREAMS only with CxM points).
# SUBJECT, if set, is the tool the report's ratios are of (default volley).
# Optional hooks: setup_server (runs before nginx starts, e.g. to set NGINX_SERVER_EXTRA),
# header_notes (more "- ..." lines for the report header), and prepare_TOOL (run once before
# the tool's availability probe; on failure it sets UNAVAILABLE_REASON and returns non-zero).
# A script measuring against servers other than nginx (bench/h3.sh) redefines start_server
# (it sets URLS), check_server, server_header (the header's server lines) and
# server_commands (the servers' command lines, one a line).
# Then it calls clients_main with the ensure_packages specs of its tools.
# Each tool's output is parsed by bench/lib/benchlib.py (PARSERS, keyed by tool name),
# independently of the protocol.
# shellcheck disable=SC2154 # ROOT, NAME, TITLE, POINTS, POINTS_DESC, PROTOS: set by the script

LIB=$ROOT/bench/lib/benchlib.py
S=${BENCH_SECONDS:-5}
RUNS=${BENCH_RUNS:-5}
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-1}
# Percent of its CPU a client may use (10 to 99), or empty: no limit. See client_quota.
CLIENT_QUOTA=${BENCH_CLIENT_QUOTA:-}
VOLLEY_DEFAULT=./target/release/volley
VOLLEY=${VOLLEY:-$VOLLEY_DEFAULT}
KILL_AFTER=5        # timeout -k: SIGKILL this long after the SIGTERM

# shellcheck source-path=SCRIPTDIR source-path=SCRIPTDIR/lib source=common.sh # checked alone or from bench/*.sh
. "$ROOT/bench/lib/common.sh"

# A point is "C" or "CxM": sets P_CONNS and P_STREAMS (empty for "C").
split_point() {
  P_CONNS=${1%%x*}
  P_STREAMS=
  [[ $1 != *x* ]] || P_STREAMS=${1#*x}
}

prepare_volley() {
  if [[ $VOLLEY == "$VOLLEY_DEFAULT" && ${BENCH_NO_BUILD:-0} != 1 ]]; then
    if command -v cargo >/dev/null; then
      log "building volley: cargo build --release (log: $RAW/cargo-build.log)"
      if ! run_child timeout 1800 cargo build --release >"$RAW/cargo-build.log" 2>&1; then
        UNAVAILABLE_REASON="cargo build --release failed, see $RAW/cargo-build.log"
        return 1
      fi
    fi
  fi
  if [[ ! -x $VOLLEY ]]; then
    UNAVAILABLE_REASON="$VOLLEY not found"
    return 1
  fi
}

# shb, the io_uring benchmarker volley is measured against: the one on PATH, else the one
# `cargo install` puts into bench/tools (git-ignored) on first use. SHB overrides both.
SHB_VERSION=${BENCH_SHB_VERSION:-0.6.0}
SHB_ROOT=$ROOT/bench/tools
prepare_shb() {
  if [[ -z ${SHB:-} ]]; then
    SHB=$(command -v shb || echo "$SHB_ROOT/bin/shb")
  fi
  if [[ ! -x $SHB && ${BENCH_NO_INSTALL:-0} != 1 ]] && command -v cargo >/dev/null; then
    log "installing shb $SHB_VERSION: cargo install shb --root $SHB_ROOT (log: $RAW/shb-install.log)"
    if ! run_child timeout 1800 cargo install --locked --version "$SHB_VERSION" --root "$SHB_ROOT" shb \
      >"$RAW/shb-install.log" 2>&1; then
      UNAVAILABLE_REASON="cargo install shb failed, see $RAW/shb-install.log"
      return 1
    fi
    SHB=$SHB_ROOT/bin/shb
  fi
  if [[ ! -x $SHB ]]; then
    UNAVAILABLE_REASON="shb not found (cargo install shb, or set SHB=PATH)"
    return 1
  fi
}

# oha, from crates.io with its http3 feature, into bench/tools (git-ignored) on first use.
OHA_VERSION=${BENCH_OHA_VERSION:-1.16.0}
prepare_oha() {
  if [[ -z ${OHA:-} ]]; then
    # bench/tools' own first: it has HTTP/3, which one on PATH may lack.
    OHA=$SHB_ROOT/bin/oha
    [[ -x $OHA ]] || OHA=$(command -v oha || echo "$OHA")
  fi
  if [[ ! -x $OHA && ${BENCH_NO_INSTALL:-0} != 1 ]] && command -v cargo >/dev/null; then
    log "installing oha $OHA_VERSION with http3: cargo install oha --features http3 --root $SHB_ROOT (log: $RAW/oha-install.log)"
    if ! run_child timeout 3600 cargo install --locked --version "$OHA_VERSION" --features http3 \
      --root "$SHB_ROOT" oha >"$RAW/oha-install.log" 2>&1; then
      UNAVAILABLE_REASON="cargo install oha failed, see $RAW/oha-install.log"
      return 1
    fi
  fi
  if [[ ! -x $OHA ]]; then
    UNAVAILABLE_REASON="oha not found (cargo install oha --features http3, or set OHA=PATH)"
    return 1
  fi
}

# TLS ports (h1tls, h2tls): a self-signed ECDSA certificate made in the temp dir, TLS 1.3
# with one cipher suite, so that every client pays for the same cipher.
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_NOTE="self-signed ECDSA P-256 certificate, TLS 1.3 with $TLS_SUITE only"
setup_tls_server() {
  local tls=$TMP/tls
  mkdir -p "$tls"
  if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$tls/key.pem" -out "$tls/cert.pem" </dev/null >"$tls/openssl.log" 2>&1; then
    cat "$tls/openssl.log" >&2
    die "openssl could not make the self-signed certificate"
  fi
  NGINX_SERVER_EXTRA="ssl_certificate $tls/cert.pem;
ssl_certificate_key $tls/key.pem;
ssl_protocols TLSv1.3;
ssl_conf_command Ciphersuites $TLS_SUITE;"
}

# ---------------------------------------------------------------------------------------
declare -A PORTS URLS

# Each protocol gets its own port on the one nginx.
start_server() {
  local proto args=()
  for proto in "${PROTOS[@]}"; do
    PORTS[$proto]=$(python3 "$LIB" free-port)
    if declare -F "url_$proto" >/dev/null; then
      URLS[$proto]=$("url_$proto" "${PORTS[$proto]}")
    else
      URLS[$proto]="http://127.0.0.1:${PORTS[$proto]}/"
    fi
    args+=("${PORTS[$proto]}" "$("listen_$proto" "${PORTS[$proto]}")")
  done
  start_nginx "${args[@]}"
  cp "$TMP/nginx.conf" "$RESULTS/$NAME-$STAMP.nginx.conf"
  log "nginx (pid $NGINX_PID, CPU $SERVER_CPU) serving $(for p in "${PROTOS[@]}"; do printf '%s=%s ' "$p" "${URLS[$p]}"; done)"
}
check_server() { check_nginx; }
server_header() { echo "- nginx: $("$NGINX" -v 2>&1 | head -n1) — 1 worker, pinned to CPU $SERVER_CPU"; }
server_commands() { echo "$(show_cmd "${NGINX_CMD[@]}")  # config: bench/results/${NAME}-$STAMP.nginx.conf"; }

# BENCH_CLIENT_QUOTA=PCT holds each client to PCT% of its CPU with a CFS quota (a cgroup of
# the run's own, 10 ms periods), so that the client, not the server, sets a closed loop's
# pace. On two cores no server on the other core outpaces volley, and at a server's pace a
# client's cost per request is mostly its wake-ups (bench/README.md). A row whose client CPU %
# stays below PCT was still at the server's pace. Sets CLIENT_CGROUP and QUOTA_PREFIX.
QUOTA_PREFIX=()
client_quota() {
  [[ -n $CLIENT_QUOTA ]] || return 0
  [[ $CLIENT_QUOTA =~ ^[1-9][0-9]$ ]] ||
    die "BENCH_CLIENT_QUOTA: '$CLIENT_QUOTA' is not a percentage from 10 to 99 (the kernel's least quota is 1 ms of a 10 ms period)"
  local period=10000 quota=$((CLIENT_QUOTA * 100)) base=/sys/fs/cgroup
  if [[ -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then # cgroup v1
    CLIENT_CGROUP=/sys/fs/cgroup/cpu/volley-bench-$$
    mkdir "$CLIENT_CGROUP" || die "cannot make the client's cgroup $CLIENT_CGROUP"
    if ! { echo "$period" >"$CLIENT_CGROUP/cpu.cfs_period_us" && echo "$quota" >"$CLIENT_CGROUP/cpu.cfs_quota_us"; }; then
      die "cannot set the client's CPU quota in $CLIENT_CGROUP"
    fi
  elif grep -qw cpu "$base/cgroup.controllers" 2>/dev/null; then # v2
    grep -qw cpu "$base/cgroup.subtree_control" || echo +cpu >"$base/cgroup.subtree_control" ||
      die "cannot enable the cpu controller under $base"
    CLIENT_CGROUP=$base/volley-bench-$$
    mkdir "$CLIENT_CGROUP" || die "cannot make the client's cgroup $CLIENT_CGROUP"
    echo "$quota $period" >"$CLIENT_CGROUP/cpu.max" || die "cannot set the client's CPU quota in $CLIENT_CGROUP"
  else
    die "BENCH_CLIENT_QUOTA needs a writable cgroup cpu controller (as root)"
  fi
  # The shell joins the cgroup and becomes the client: its children are in it too.
  # shellcheck disable=SC2016 # $$, $0 and $@ are that shell's
  QUOTA_PREFIX=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CLIENT_CGROUP")
}

# The full command line of one measured client run (sets CMD, then wraps it).
wrapped_cmd() { # proto tool point seconds timefile
  split_point "$3"
  "cmd_$1_$2" "$P_CONNS" "$4" "${URLS[$1]}" ${P_STREAMS:+"$P_STREAMS"}
  WRAPPED=(timeout -k "$KILL_AFTER" "$(($4 + 20))"
    python3 "$LIB" rusage -o "$5" --
    "${QUOTA_PREFIX[@]}" taskset -c "$CLIENT_CPU" "${CMD[@]}")
}

# Runs one measured client run and appends its row to the CSV.
measure() { # proto tool point run
  local proto=$1 tool=$2 point=$3 run=$4 rc=0
  split_point "$point"
  local conns=$P_CONNS streams=$P_STREAMS
  local base=$RAW/$proto-$tool-c$conns${streams:+-m$streams}-r$run
  check_server
  wrapped_cmd "$proto" "$tool" "$point" "$S" "$base.time"
  run_child "${WRAPPED[@]}" </dev/null >"$base.out" 2>"$base.err" || rc=$?
  python3 "$LIB" record --csv "$CSV" --proto "$proto" --tool "$tool" --conns "$conns" \
    ${streams:+--streams "$streams"} \
    --run "$run" --rc "$rc" --stdout "$base.out" --stderr "$base.err" --time "$base.time"
}

# A 1 s run with 1 connection (and 1 stream): does the tool work at all against this server?
probe() { # proto tool
  local proto=$1 tool=$2 rc=0 base=$RAW/probe-$1-$2 parsed
  split_point "${POINTS[0]}"
  "cmd_${proto}_$tool" 1 1 "${URLS[$proto]}" ${P_STREAMS:+1}
  run_child timeout -k "$KILL_AFTER" 20 taskset -c "$CLIENT_CPU" "${CMD[@]}" </dev/null \
    >"$base.out" 2>"$base.err" || rc=$?
  if ((rc != 0)); then
    local first
    first=$(grep -m1 . "$base.err" || grep -m1 . "$base.out" || true)
    local how="exited $rc"
    ((rc != 124)) || how="did not end within 20 s"
    UNAVAILABLE_REASON="probe \`${CMD[*]}\` $how${first:+: ${first:0:160}}"
    return 1
  fi
  if ! parsed=$(python3 "$LIB" parse "$tool" "$base.out" 2>&1); then
    UNAVAILABLE_REASON="probe \`${CMD[*]}\` $parsed"
    return 1
  fi
  if [[ ${parsed%% *} == 0 ]]; then
    UNAVAILABLE_REASON="probe \`${CMD[*]}\` completed no requests"
    return 1
  fi
}

declare -A AVAILABLE # "proto tool" -> 1

check_tools() {
  local proto tool prepared=" "
  for proto in "${PROTOS[@]}"; do
    local -n tools="TOOLS_$proto"
    for tool in "${tools[@]}"; do
      UNAVAILABLE_REASON=
      if [[ $prepared != *" $tool "* ]] && declare -F "prepare_$tool" >/dev/null; then
        prepared+="$tool "
        if ! "prepare_$tool"; then
          PREPARE_FAILED[$tool]=$UNAVAILABLE_REASON
        fi
      fi
      if [[ -n ${PREPARE_FAILED[$tool]:-} ]]; then
        UNAVAILABLE_REASON=${PREPARE_FAILED[$tool]}
      elif probe "$proto" "$tool"; then
        AVAILABLE["$proto $tool"]=1
        continue
      fi
      local note="$tool: not available ($UNAVAILABLE_REASON)"
      ((${#PROTOS[@]} == 1)) || note+=" [$proto]"
      log "$note"
      UNAVAILABLE_NOTES+=("$note")
      local point
      for point in "${POINTS[@]}"; do
        split_point "$point"
        python3 "$LIB" unavailable --csv "$CSV" --proto "$proto" --tool "$tool" \
          --conns "$P_CONNS" ${P_STREAMS:+--streams "$P_STREAMS"} --reason "$UNAVAILABLE_REASON"
      done
    done
    unset -n tools
  done
}
declare -A PREPARE_FAILED
UNAVAILABLE_NOTES=()

# Every tool of every protocol, once, in the order first listed.
all_tools() {
  local proto tool seen=" "
  for proto in "${PROTOS[@]}"; do
    local -n tools="TOOLS_$proto"
    for tool in "${tools[@]}"; do
      [[ $seen == *" $tool "* ]] || { seen+="$tool "; echo "$tool"; }
    done
    unset -n tools
  done
}

version_of() { # tool
  case $1 in
  volley | volley-*)
    local v
    v=$(timeout 5 "$VOLLEY" --version 2>&1 </dev/null) && [[ -n $v ]] || v="unknown (--version failed)"
    echo "$VOLLEY: ${v%%$'\n'*}"
    ;;
  wrk) wrk --version 2>&1 </dev/null | head -n1 || true ;;
  h2load) h2load --version 2>&1 </dev/null | head -n1 || true ;;
  oha | oha-*) echo "$OHA: $("$OHA" --version 2>&1 </dev/null | head -n1 || true)" ;;
  shb) # shb has no --version; cargo's install records have it
    local v
    v=$(grep -ho '"shb [0-9][^ ]*' "$(dirname "$(dirname "$SHB")")/.crates.toml" ~/.cargo/.crates.toml 2>/dev/null | head -n1)
    echo "$SHB: ${v:+${v#\"}}"
    ;;
  locust) echo "${LOCUST:-locust}: $("${LOCUST:-locust}" --version 2>&1 </dev/null | head -n1 || true)" ;;
  artillery) # --version prints a banner, then "Artillery: X"
    echo "${ARTILLERY:-artillery}: Artillery $(timeout 30 "${ARTILLERY:-artillery}" --version 2>&1 </dev/null |
      sed -n 's/^Artillery: *//p' | head -n1 || true), Node $(node --version 2>&1 || true)"
    ;;
  tsung)
    local otp
    otp=$(timeout 20 erl -noshell -eval 'io:format("~s", [erlang:system_info(otp_release)]), halt().' 2>&1 </dev/null || true)
    echo "${TSUNG:-tsung}: $("${TSUNG:-tsung}" -v 2>&1 </dev/null | head -n1 || true), Erlang/OTP $otp"
    ;;
  goose) # bench/goose's program; the crate's version from its lock file
    local v
    v=$(grep -A1 '^name = "goose"$' "$ROOT/bench/goose/Cargo.lock" 2>/dev/null | sed -n 's/^version = "\(.*\)"/\1/p')
    echo "${GOOSE:-goose-flow}: goose ${v:-?} (bench/goose/Cargo.lock)"
    ;;
  *) echo "?" ;;
  esac
}

print_header() {
  local cpu_model proto tool point
  cpu_model=$(grep -m1 -E '^(model name|Model name|cpu model)' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
  [[ -n $cpu_model ]] || cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1)
  echo "# $TITLE — $STAMP"
  echo
  echo "- machine: nproc $(nproc), CPU ${cpu_model:-unknown}, kernel $(uname -r)"
  server_header
  if declare -F header_notes >/dev/null; then header_notes; fi
  for tool in $(all_tools); do
    [[ " ${!AVAILABLE[*]} " == *" $tool "* ]] || continue # unavailable: noted below
    echo "- $tool: $(version_of "$tool" | tr -d '\r')"
  done
  for note in "${UNAVAILABLE_NOTES[@]}"; do echo "- $note"; done
  echo "- each point: ${S} s, 1 client thread pinned to CPU $CLIENT_CPU, $POINTS_DESC, runs $RUNS (tools interleaved, order rotated per run); medians below"
  [[ -z $CLIENT_CGROUP ]] ||
    echo "- each client held to ${CLIENT_QUOTA}% of CPU $CLIENT_CPU by a CFS quota (BENCH_CLIENT_QUOTA; cgroup $CLIENT_CGROUP, 10 ms periods), so that the client sets the pace: a row whose client CPU % is below ${CLIENT_QUOTA} was at the server's"
  echo "- CPU µs/req = client (user+sys) time (wait4, µs) × 1e6 / requests completed; peak RSS = GNU time %M"
  echo
  echo "Commands (\`FILE\` is the per-run CPU time and peak RSS under $RAW_REL/, see \`benchlib.py rusage\`):"
  echo
  echo '```'
  server_commands
  for proto in "${PROTOS[@]}"; do
    local -n tools="TOOLS_$proto"
    for tool in "${tools[@]}"; do
      for point in "${POINTS[@]}"; do
        wrapped_cmd "$proto" "$tool" "$point" "$S" FILE
        show_cmd "${WRAPPED[@]}"
      done
    done
    unset -n tools
  done
  echo '```'
  echo
}

# ---------------------------------------------------------------------------------------
clients_main() { # ensure_packages specs of the tools
  ensure_packages "$@"
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  check_cpus
  client_quota

  new_results RESULTS csv
  CSV=$RESULTS/$NAME-$STAMP.csv
  RAW=$RESULTS/$NAME-$STAMP.raw
  RAW_REL=bench/results/$NAME-$STAMP.raw
  mkdir -p "$RAW"

  if declare -F setup_server >/dev/null; then setup_server; fi
  start_server
  check_tools

  local run proto tool point i n
  for ((run = 1; run <= RUNS; run++)); do
    log "run $run/$RUNS"
    for proto in "${PROTOS[@]}"; do
      local -n tools="TOOLS_$proto"
      n=${#tools[@]}
      for point in "${POINTS[@]}"; do
        for ((i = 0; i < n; i++)); do
          tool=${tools[$(((i + run - 1) % n))]} # rotate the order each run
          [[ -n ${AVAILABLE["$proto $tool"]:-} ]] || continue
          measure "$proto" "$tool" "$point" "$run"
        done
      done
      unset -n tools
    done
  done

  local report=$RESULTS/$NAME-$STAMP.md
  {
    print_header
    python3 "$LIB" summarize --subject "${SUBJECT:-volley}" "$CSV"
    echo
    echo "Raw rows: bench/results/$NAME-$STAMP.csv"
  } | tee "$report"
  log "report: $report"
}
