# shellcheck shell=bash
# bench/lib/nginx_and_serve.sh — the servers of bench/mix.sh and bench/flow.sh: one nginx (1
# worker, pinned to SERVER_CPU) for the TCP protocols, each on its own port, `volley serve
# --http3` (the VOLLEY binary measured, pinned likewise) for the one protocol named H3_PROTO,
# and optionally ngtcp2's example server gtlsserver (Debian's ngtcp2-server, pinned likewise)
# for the one named NGTCP2_PROTO: an HTTP/3 server quick enough that the client's own cost
# shows, where volley serve is the bottleneck of a closed loop.
# Sourced after bench/lib/clients.sh, whose start_server, check_server, cleanup_hook,
# server_header and server_commands hooks it defines. The sourcing script sets:
#   H3_PROTO            the protocol volley serve answers (e.g. mixh3)
#   NGTCP2_PROTO        optional: the protocol gtlsserver answers, serving the files that
#                       ngtcp2_htdocs DIR (the script's) writes under DIR
#   listen_P PORT       the nginx `listen` line of each of its other protocols
#   NGINX_EXTRA         more lines for nginx's server block (after the stream limit)
#   NGINX_NOTE          what nginx answers, for the report's header
#   SERVE_NOTE          what volley serve answers, likewise
# shellcheck disable=SC2154 # PROTOS, PORTS, URLS, LIB, RESULTS, NAME, STAMP, TMP, ...: clients.sh's

SERVE_PID=
NGTCP2_PID=
start_server() {
  local proto args=()
  for proto in "${PROTOS[@]}"; do
    PORTS[$proto]=$(python3 "$LIB" free-port)
    if [[ $proto == "$H3_PROTO" || $proto == "${NGTCP2_PROTO:-}" ]]; then
      URLS[$proto]="https://127.0.0.1:${PORTS[$proto]}/"
      continue
    fi
    URLS[$proto]="http://127.0.0.1:${PORTS[$proto]}/"
    args+=("${PORTS[$proto]}" "$("listen_$proto" "${PORTS[$proto]}")")
  done
  if ((${#args[@]})); then
    NGINX_SERVER_EXTRA="http2_max_concurrent_streams 128;
${NGINX_EXTRA:-}"
    start_nginx "${args[@]}"
    cp "$TMP/nginx.conf" "$RESULTS/$NAME-$STAMP.nginx.conf"
  fi
  if [[ -n ${URLS[$H3_PROTO]:-} ]]; then
    prepare_volley || die "$UNAVAILABLE_REASON" # the server is the binary measured: built first
    SERVE_CMD=(taskset -c "$SERVER_CPU" "$VOLLEY" serve --listen "127.0.0.1:${PORTS[$H3_PROTO]}" --http3)
    "${SERVE_CMD[@]}" </dev/null >"$TMP/serve.log" 2>&1 &
    SERVE_PID=$!
    sleep 1
  fi
  [[ -z ${NGTCP2_PROTO:-} || -z ${URLS[$NGTCP2_PROTO]:-} ]] || start_ngtcp2 "${PORTS[$NGTCP2_PROTO]}"
  check_server
  log "servers (CPU $SERVER_CPU): $(for p in "${PROTOS[@]}"; do printf '%s=%s ' "$p" "${URLS[$p]}"; done)"
}
# gtlsserver with a self-signed certificate of its own, serving what ngtcp2_htdocs writes.
start_ngtcp2() { # port
  local dir=$TMP/ngtcp2
  mkdir -p "$dir/htdocs"
  ngtcp2_htdocs "$dir/htdocs"
  if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" </dev/null >"$dir/openssl.log" 2>&1; then
    cat "$dir/openssl.log" >&2
    die "openssl could not make gtlsserver's certificate"
  fi
  NGTCP2_CMD=(taskset -c "$SERVER_CPU" gtlsserver -q -d "$dir/htdocs" 127.0.0.1 "$1" "$dir/key.pem" "$dir/cert.pem")
  "${NGTCP2_CMD[@]}" </dev/null >"$dir/stdout.log" 2>"$dir/stderr.log" &
  NGTCP2_PID=$!
  sleep 1
}
check_server() {
  [[ -z ${NGINX_PID:-} ]] || check_nginx
  [[ -z $SERVE_PID ]] || kill -0 "$SERVE_PID" 2>/dev/null || die "volley serve died (see $TMP/serve.log)"
  [[ -z $NGTCP2_PID ]] || kill -0 "$NGTCP2_PID" 2>/dev/null || die "gtlsserver died (see $TMP/ngtcp2/stderr.log)"
}
cleanup_hook() {
  [[ -z $SERVE_PID ]] || stop_pid "$SERVE_PID"
  [[ -z $NGTCP2_PID ]] || stop_pid "$NGTCP2_PID"
}
server_header() {
  [[ -z ${NGINX_PID:-} ]] || echo "- nginx: $("$NGINX" -v 2>&1 | head -n1) — 1 worker, pinned to CPU $SERVER_CPU, $NGINX_NOTE; h2c: prior knowledge, http2_max_concurrent_streams 128"
  [[ -z $SERVE_PID ]] || echo "- $H3_PROTO: volley serve --http3 (the VOLLEY binary; $SERVE_NOTE), pinned to CPU $SERVER_CPU"
  [[ -z $NGTCP2_PID ]] || echo "- $NGTCP2_PROTO: ngtcp2's gtlsserver ($(dpkg-query -W -f '${Package} ${Version}' ngtcp2-server 2>/dev/null || echo "version unknown"); $NGTCP2_NOTE), pinned to CPU $SERVER_CPU"
}
server_commands() {
  [[ -z ${NGINX_PID:-} ]] || echo "$(show_cmd "${NGINX_CMD[@]}")  # config: bench/results/${NAME}-$STAMP.nginx.conf"
  [[ -z $SERVE_PID ]] || show_cmd "${SERVE_CMD[@]}"
  [[ -z $NGTCP2_PID ]] || show_cmd "${NGTCP2_CMD[@]}"
}
