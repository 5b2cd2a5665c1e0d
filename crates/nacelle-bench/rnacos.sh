# Sourced by rnacos-fanout.sh and cpu-split.sh: start and stop one r-nacos (the peer of
# issue 15) on $RPORT (HTTP) and $RGPORT (gRPC), binary $RNACOS, waiting until it answers.
# start_rnacos DIR [LOG] → a fresh DIR (its data in DIR/db), its log in LOG (default
#                          DIR.log); sets RNACOS_PID
# stop_rnacos        → stops it (safe to call twice)
RNACOS_PID=""
start_rnacos() {
    local dir=$1 log=${2:-$1.log}
    rm -rf "$dir"
    mkdir -p "$dir"
    # r-nacos reads its settings from the environment (and a .env in its working
    # directory, so it runs in its own empty directory). No console port, no auth.
    (cd "$dir" && RNACOS_HTTP_PORT=$RPORT RNACOS_GRPC_PORT=$RGPORT RNACOS_HTTP_CONSOLE_PORT=0 \
        RNACOS_DATA_DIR="$dir/db" RUST_LOG=warn exec "$RNACOS" >"$log" 2>&1) &
    RNACOS_PID=$!
    for _ in $(seq 1 100); do
        if curl -sf "http://127.0.0.1:$RPORT/nacos/v1/cs/configs?dataId=x&group=y" -o /dev/null \
            || [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RPORT/nacos/v1/cs/configs?dataId=x&group=y")" = 404 ]; then
            return 0
        fi
        sleep 0.1
    done
    echo "r-nacos did not answer" >&2
    exit 1
}
stop_rnacos() {
    if [ -n "$RNACOS_PID" ]; then
        kill "$RNACOS_PID" 2>/dev/null || true
        wait "$RNACOS_PID" 2>/dev/null || true
        RNACOS_PID=""
    fi
}
