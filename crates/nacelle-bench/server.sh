# Sourced by run-all.sh, compare.sh and scripts/link-order.sh: start and stop one
# `nacelle serve` on a fresh data directory, on $PORT (HTTP) and $GPORT (gRPC), waiting for
# readiness (up to $READY_TRIES × 0.1 s, default 100).
# start_server BIN_DIR DATA_DIR LOG_FILE  → sets SERVER_PID
# stop_server                             → stops it (safe to call twice)
# SERVER_WRAPPER (an array, empty by default) is put before the binary, e.g. valgrind.
SERVER_PID=""
SERVER_WRAPPER=()

start_server() {
    local bin=$1 dir=$2 log=$3
    rm -rf "$dir"
    mkdir -p "$dir"
    # Without authentication: these figures are the server's own; auth-bench.sh measures
    # what a token check adds.
    # The benchmarks drive one server from one address far past the abuse limits a
    # deployment wants (docs/security.md, Limits); variables, so older binaries that
    # compare.sh runs ignore them.
    # Builds from before authentication (e.g. b5f0d57) have no --auth flag and no auth.
    local auth=()
    if "$bin/nacelle" serve --help 2>/dev/null | grep -q -- '--auth <'; then
        auth=(--auth off)
    fi
    NACELLE_WRITE_RATE_PER_IP=0 NACELLE_MAX_HELD_POLLS_PER_IP=1000000 \
    NACELLE_HTTP_MAX_CONNECTIONS_PER_IP=1000000 \
    ${SERVER_WRAPPER[@]+"${SERVER_WRAPPER[@]}"} "$bin/nacelle" serve --data-dir "$dir" --bind 127.0.0.1 --port "$PORT" \
        --grpc-port "$GPORT" --log warn ${auth[@]+"${auth[@]}"} >"$log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 "${READY_TRIES:-100}"); do
        if curl -sf "http://127.0.0.1:$PORT/nacos/v1/console/health/readiness" >/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "server did not become ready" >&2
    exit 1
}

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
