#!/usr/bin/env bash
# Before/after comparison of two release builds on the scenarios a refactor must not slow
# down: http-get, grpc-query (16 connections, and 16 x 4 in flight over 200 keys),
# publish (HTTP and gRPC) and the 1 000-listener fan-outs.
# Each pass runs A then B back to back, each on a fresh server; passes alternate so that a
# drift of the host shows up as a drift in both. Usage:
#
#   crates/nacelle-bench/compare.sh A_TARGET B_TARGET [OUT_DIR] [PASSES]
#
# where *_TARGET is a directory holding `nacelle` and `nacelle-bench` (e.g. a worktree's
# target/release). The bench binary of B drives both servers. Results: OUT_DIR/<label>-<pass>.jsonl,
# the load average before each scenario in OUT_DIR/<label>-<pass>.load.
set -euo pipefail

A=$1
B=$2
OUT=${3:-target/bench-compare}
PASSES=${4:-2}
PORT=${PORT:-38848}
GPORT=$((PORT + 1000))
BENCH="$B/nacelle-bench"
mkdir -p "$OUT"
. "$(dirname "$0")/server.sh"
trap stop_server EXIT

one() {
    local label=$1 bin=$2 pass=$3
    local res="$OUT/$label-$pass.jsonl"
    : >"$res"
    start_server "$bin" "$OUT/data-$label-$pass" "$OUT/data-$label-$pass.log"
    sleep 2
    run() {
        echo "== $label pass $pass: $* ($(uptime | sed 's/.*load/load/'))" >&2
        echo "$1 $(uptime | sed 's/.*load average: //')" >>"$OUT/$label-$pass.load"
        "$BENCH" "$@" 2>&1 | tee -a "$OUT/$label-$pass.txt" | grep '^{' >>"$res" || true
    }
    run ceiling --connections 32 --duration 10
    run http-get --addr "127.0.0.1:$PORT" --connections 32 --duration 10
    run grpc-query --addr "127.0.0.1:$GPORT" --connections 16 --duration 10
    # issue 34's load: 16 connections x 4 calls in flight over 200 keys
    run grpc-query --addr "127.0.0.1:$GPORT" --connections 16 --in-flight 4 --keys 200 --duration 10
    run publish --protocol http --addr "127.0.0.1:$PORT" --keys distinct --duration 10
    run publish --protocol grpc --addr "127.0.0.1:$GPORT" --keys distinct --duration 10
    run longpoll-fanout --addr "127.0.0.1:$PORT" --n 1000 --rounds 5 --server-pid "$SERVER_PID"
    run grpc-fanout --addr "127.0.0.1:$GPORT" --n 1000 --rounds 5 --server-pid "$SERVER_PID"
    stop_server
}

for pass in $(seq 1 "$PASSES"); do
    if [ $((pass % 2)) -eq 1 ]; then
        one a "$A" "$pass"
        one b "$B" "$pass"
    else
        one b "$B" "$pass"
        one a "$A" "$pass"
    fi
done
echo "done: $OUT" >&2
