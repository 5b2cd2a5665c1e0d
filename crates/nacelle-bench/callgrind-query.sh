#!/usr/bin/env bash
# Instruction counts of a gRPC query (docs/benchmarks.md, "gRPC query, issue 34"): the
# server runs under callgrind; its counters are zeroed at the bench's "grpc-query:
# measuring" marker (after the seeding, the handshakes and the warm-up second) and dumped
# at "grpc-query: answered N calls", so the dump holds N answered ConfigQueryRequests and
# little else. Usage:
#
#   crates/nacelle-bench/callgrind-query.sh SERVER_DIR BENCH_DIR OUT_DIR [DURATION_S]
#
# SERVER_DIR holds the `nacelle` to profile, BENCH_DIR the `nacelle-bench` that drives it
# (the same bench for two builds). The load is the issue's: 16 connections x 4 in flight,
# 200 keys of 1 KiB. Prints the dump's events divided by N (per query); the dump is
# OUT_DIR/cg.PID.1, for `callgrind_annotate --inclusive=yes`.
set -euo pipefail

SERVER=$1
BENCH=$2
OUT=$3
DURATION=${4:-20}
PORT=${PORT:-18848}
GPORT=$((PORT + 1000))
rm -rf "$OUT"
mkdir -p "$OUT"
. "$(dirname "$0")/server.sh"
SERVER_WRAPPER=(valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p")
READY_TRIES=600 start_server "$SERVER" "$OUT/data" "$OUT/server.log"
trap stop_server EXIT
"$BENCH/nacelle-bench" grpc-query --addr "127.0.0.1:$GPORT" --connections 16 --in-flight 4 \
    --keys 200 --duration "$DURATION" 2> >(while read -r line; do
        echo "$line" >>"$OUT/bench.err"
        case "$line" in
            *"grpc-query: measuring"*) callgrind_control -z "$SERVER_PID" >/dev/null ;;
            *"grpc-query: answered"*)
                callgrind_control -d "$SERVER_PID" >/dev/null
                echo "${line##*answered }" >"$OUT/calls"
                ;;
        esac
    done) >"$OUT/bench.json"
sleep 2
stop_server
n=$(awk '{ print $1 }' "$OUT/calls")
dump=$(ls "$OUT"/cg.*.1)
awk -v n="$n" '/^events:/ { for (i = 2; i <= NF; i++) ev[i] = $i }
     /^(summary|totals):/ { for (i = 2; i <= NF; i++) printf "%s %.0f  ", ev[i], $i / n; print "" }' \
    "$dump" | head -1
echo "calls: $n; dump: $dump"
