#!/usr/bin/env bash
# Runs every nacelle-bench scenario against release builds, as documented in
# docs/benchmarks.md. Usage (from the repository root, after
# `cargo build --release -p nacelle -p nacelle-bench`):
#
#   crates/nacelle-bench/run-all.sh [OUT_DIR]
#
# Environment: PORT (HTTP port, default 38848; gRPC is PORT+1000), TARGET (default
# target/release), CONNS_N (connections scenario, default 19900), HOLD (seconds, default 40).
# Each scenario's output goes to OUT_DIR/<name>.txt; its JSON lines are collected in
# OUT_DIR/results.jsonl, with the load average before each scenario in OUT_DIR/load.txt.
set -euo pipefail

OUT=${1:-target/bench-results}
PORT=${PORT:-38848}
GPORT=$((PORT + 1000))
TARGET=${TARGET:-target/release}
CONNS_N=${CONNS_N:-19900}
HOLD=${HOLD:-40}
BENCH="$TARGET/nacelle-bench"
mkdir -p "$OUT"
: >"$OUT/results.jsonl"
: >"$OUT/load.txt"
. "$(dirname "$0")/server.sh"
trap stop_server EXIT

rss_mib() {
    awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"
}

run() {
    local name=$1
    shift
    echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"
    echo "== $name: $*" >&2
    if ! "$BENCH" "$@" 2>&1 | tee "$OUT/$name.txt" | grep '^{' >>"$OUT/results.jsonl"; then
        echo "$name failed (see $OUT/$name.txt)" >&2
    fi
}

start_server "$TARGET" "$OUT/data-main" "$OUT/server-main.log"
sleep 5
echo "{\"scenario\":\"idle\",\"server_rss_mib\":$(rss_mib "$SERVER_PID")}" | tee -a "$OUT/results.jsonl"

run ceiling-1 ceiling --connections 32 --duration 10
run http-get-1 http-get --addr "127.0.0.1:$PORT" --connections 32 --duration 10
run ceiling-2 ceiling --connections 32 --duration 10
run http-get-2 http-get --addr "127.0.0.1:$PORT" --connections 32 --duration 10
run grpc-query grpc-query --addr "127.0.0.1:$GPORT" --connections 16 --duration 10
run grpc-query-4 grpc-query --addr "127.0.0.1:$GPORT" --connections 16 --in-flight 4 --duration 10
run publish-http-distinct publish --protocol http --addr "127.0.0.1:$PORT" --keys distinct --duration 10
run publish-http-hot publish --protocol http --addr "127.0.0.1:$PORT" --keys hot --duration 10
run publish-grpc-distinct publish --protocol grpc --addr "127.0.0.1:$GPORT" --keys distinct --duration 10
run publish-grpc-hot publish --protocol grpc --addr "127.0.0.1:$GPORT" --keys hot --duration 10
run longpoll-1000 longpoll-fanout --addr "127.0.0.1:$PORT" --n 1000 --rounds 5 --server-pid "$SERVER_PID"
run longpoll-10000 longpoll-fanout --addr "127.0.0.1:$PORT" --n 10000 --rounds 5 --server-pid "$SERVER_PID"
run grpc-fanout-1000 grpc-fanout --addr "127.0.0.1:$GPORT" --n 1000 --rounds 5 --server-pid "$SERVER_PID"
run grpc-fanout-10000 grpc-fanout --addr "127.0.0.1:$GPORT" --n 10000 --rounds 5 --server-pid "$SERVER_PID"
# The machine's fan-out floor at the same sizes (raw TCP, its own server process).
run fanout-ceiling-1000 fanout-ceiling --n 1000 --rounds 5
run fanout-ceiling-10000 fanout-ceiling --n 10000 --rounds 5
stop_server

# Connections on a fresh server: its RSS before is that of an idle server.
start_server "$TARGET" "$OUT/data-conns" "$OUT/server-conns.log"
sleep 2
run connections connections --addr "127.0.0.1:$GPORT" --n "$CONNS_N" --hold "$HOLD" --server-pid "$SERVER_PID"
stop_server

run startup startup --bin "$TARGET/nacelle" --configs 100000 --size 1024 --dir "$OUT/startup"
echo "done: $OUT/results.jsonl" >&2
