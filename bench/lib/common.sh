# shellcheck shell=bash
# bench/lib/common.sh — shared by the bench scripts (h1.sh, h2.sh, distributed.sh): logging, the
# temp dir and the cleanup on exit, run_child, installing missing packages, CPU checks, and
# the local nginx they measure against. See bench/README.md.
#
# The sourcing script sets NAME (it is bench/$NAME.sh; die names it), LIB
# (bench/lib/benchlib.py), CLIENT_CPU and SERVER_CPU, and NGINX before start_nginx.
# Sourcing creates $TMP and sets the EXIT/INT/TERM traps. A script that starts more
# processes defines cleanup_hook to stop them: cleanup calls it after stopping CHILD_PID
# and before stopping nginx.
# shellcheck disable=SC2154 # NAME, LIB, CLIENT_CPU, SERVER_CPU, NGINX: set by the script

log() { printf '%s\n' "$*" >&2; }
# Print a command line so that it can be pasted back into a shell.
show_cmd() {
  local a out=()
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=("$a"); else out+=("'${a//\'/\'\\\'\'}'"); fi
  done
  echo "${out[*]}"
}
die() {
  log "$NAME.sh: $*"
  exit 1
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/volley-bench.XXXXXX")
NGINX_PID=
CHILD_PID=
POLICY_RC_CREATED=
CLIENT_CGROUP= # a CPU cgroup of this run's own (bench/lib/clients.sh's BENCH_CLIENT_QUOTA)

stop_pid() { # pid: TERM, up to 5 s, then KILL
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

cleanup() {
  local rc=$?
  set +e
  if [[ -n $CHILD_PID ]]; then
    kill -TERM "$CHILD_PID" 2>/dev/null # e.g. a `timeout`: it forwards the signal to its command
    wait "$CHILD_PID" 2>/dev/null
  fi
  if declare -F cleanup_hook >/dev/null; then cleanup_hook; fi
  if [[ -n $NGINX_PID ]]; then
    local workers
    workers=$(pgrep -P "$NGINX_PID" 2>/dev/null)
    stop_pid "$NGINX_PID"
    # shellcheck disable=SC2086
    [[ -z $workers ]] || kill -KILL $workers 2>/dev/null
  fi
  [[ -n $POLICY_RC_CREATED ]] && rm -f /usr/sbin/policy-rc.d
  [[ -z $CLIENT_CGROUP ]] || rmdir "$CLIENT_CGROUP" 2>/dev/null
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs "$@" in the background and waits for it, so that INT/TERM reach the traps at once
# (cleanup then kills CHILD_PID). Returns the command's exit status.
run_child() {
  local rc=0
  "$@" &
  CHILD_PID=$!
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=
  return "$rc"
}

as_root() {
  if [[ $(id -u) == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "need root to run: $*"
  fi
}

# Installs with apt-get what is missing of nginx, taskset, python3 and the script's own
# needs, given as NEED[:PACKAGE]: NEED is a command, or an absolute path that must be
# executable; PACKAGE defaults to NEED. E.g. ensure_packages wrk h2load:nghttp2-client
ensure_packages() {
  local missing=() spec need
  command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
  for spec in "$@"; do
    need=${spec%%:*}
    if [[ $need == /* ]]; then
      [[ -x $need ]] || missing+=("${spec#*:}")
    else
      command -v "$need" >/dev/null || missing+=("${spec#*:}")
    fi
  done
  command -v taskset >/dev/null || missing+=(util-linux)
  command -v python3 >/dev/null || missing+=(python3)
  ((${#missing[@]})) || return 0
  [[ ${BENCH_NO_INSTALL:-0} != 1 ]] || die "missing packages: ${missing[*]} (BENCH_NO_INSTALL=1)"
  log "installing: ${missing[*]}"
  # Keep the nginx package from starting the system-wide service on port 80.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod +x /usr/sbin/policy-rc.d
    POLICY_RC_CREATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
  if [[ -n $POLICY_RC_CREATED ]]; then
    as_root rm -f /usr/sbin/policy-rc.d
    POLICY_RC_CREATED=
  fi
}

check_cpus() {
  local cpu
  for cpu in "$CLIENT_CPU" "$SERVER_CPU"; do
    taskset -c "$cpu" true 2>/dev/null || die "cannot pin to CPU $cpu (nproc: $(nproc))"
  done
  [[ $CLIENT_CPU != "$SERVER_CPU" ]] || log "warning: client and server share CPU $CLIENT_CPU"
}

# The server every bench script measures against: nginx, 1 worker process pinned to
# SERVER_CPU, "hello, world!\n". Arguments: PORT LISTEN pairs, LISTEN being the nginx
# `listen` line for PORT (e.g. "listen 127.0.0.1:$port;"). NGINX_SERVER_EXTRA, if set, holds
# more directives for the server block, one a line (e.g. ssl_certificate);
# NGINX_WORKER_CONNECTIONS, if set, the connections its worker holds at once (8192). Writes
# $TMP/nginx.conf, sets NGINX_CMD and NGINX_PID, and waits until every PORT answers: over
# HTTP/1.1, over TLS if LISTEN has `ssl`, or HTTP/2 with prior knowledge if it has `http2`
# without `ssl`.
start_nginx() { # port listen [port listen]...
  local conf=$TMP/nginx.conf listens="" ports=() modes=() line i
  local re_ssl='[[:space:]]ssl[[:space:];]' re_http2='[[:space:]]http2[[:space:];]'
  while (($# >= 2)); do
    ports+=("$1")
    listens+="        $2"$'\n'
    if [[ $2 =~ $re_ssl ]]; then
      modes+=(tls)
    elif [[ $2 =~ $re_http2 ]]; then
      modes+=(h2c)
    else
      modes+=(http)
    fi
    shift 2
  done
  while IFS= read -r line; do
    [[ -z $line ]] || listens+="        $line"$'\n'
  done <<<"${NGINX_SERVER_EXTRA:-}"
  mkdir -p "$TMP/nginx"
  cat >"$conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 65536;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events {
    worker_connections ${NGINX_WORKER_CONNECTIONS:-8192};
}
http {
    access_log off;
    default_type text/plain;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    client_body_temp_path $TMP/nginx/client_body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    server {
${listens}        location / {
            return 200 "hello, world!\n";
        }
    }
}
EOF
  NGINX_CMD=(taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP/nginx/" -c "$conf" -e "$TMP/nginx/error.log")
  "${NGINX_CMD[@]}" </dev/null >"$TMP/nginx/stdout.log" 2>&1 &
  NGINX_PID=$!
  for i in "${!ports[@]}"; do
    if ! python3 "$LIB" wait-http "${ports[$i]}" 10 --mode "${modes[$i]}"; then
      cat "$TMP/nginx/stdout.log" "$TMP/nginx/error.log" >&2 2>/dev/null || true
      die "nginx did not come up"
    fi
  done
}

check_nginx() { kill -0 "$NGINX_PID" 2>/dev/null || die "nginx died (see $TMP/nginx/error.log)"; }

# Sets STAMP so that bench/results/NAME-STAMP.EXT does not exist yet, and the variable named
# by the first argument to the results folder (made if missing).
new_results() { # var ext
  local -n dir=$1
  dir=$ROOT/bench/results
  mkdir -p "$dir"
  STAMP=$(date +%Y%m%d-%H%M%S)
  [[ ! -e $dir/$NAME-$STAMP.$2 ]] || STAMP+="-$$"
}
