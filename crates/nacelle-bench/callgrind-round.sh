#!/usr/bin/env bash
# Instruction counts of one fan-out round (docs/benchmarks.md, "the bracket"): the server
# runs under callgrind; its counters are zeroed at the bench's "round 2: publishing" marker
# (one second before the publish) and dumped DUMP_DELAY seconds after "round 2: answered",
# so the dump holds round 2's release (long polls) or pushes and acks (gRPC) and little
# else. Usage:
#
#   crates/nacelle-bench/callgrind-round.sh TARGET OUT_DIR [longpoll|grpc] [N]
#
# TARGET holds `nacelle` and `nacelle-bench` (e.g. target/release). Prints the dump's
# events divided by N (per released poll or per push); the dump is OUT_DIR/cg.PID.1, for
# `callgrind_annotate --inclusive=yes`. PAUSE (ms, default 15000) is the bench's pause
# around each publish: under callgrind every poll must reach the server before it.
# DUMP_DELAY (s, default 0.2) already takes in every ack of a push; a delay of a second or
# more also takes in the bench closing its connections after the last round.
set -euo pipefail

TARGET=$1
OUT=$2
KIND=${3:-longpoll}
N=${4:-1000}
PORT=${PORT:-18848}
GPORT=$((PORT + 1000))
rm -rf "$OUT"
mkdir -p "$OUT"
. "$(dirname "$0")/server.sh"
SERVER_WRAPPER=(valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$OUT/cg.%p")
READY_TRIES=600 start_server "$TARGET" "$OUT/data" "$OUT/server.log"
trap stop_server EXIT
case $KIND in
    longpoll) ADDR=127.0.0.1:$PORT ;;
    grpc) ADDR=127.0.0.1:$GPORT ;;
    *) echo "longpoll or grpc, not $KIND" >&2; exit 2 ;;
esac
# The markers drive callgrind_control; the bench's JSON goes to OUT/bench.json.
"$TARGET/nacelle-bench" "$KIND-fanout" --addr "$ADDR" --n "$N" --rounds 2 \
    --pause-ms "${PAUSE:-15000}" 2> >(while read -r line; do
        echo "$line" >>"$OUT/bench.err"
        case "$line" in
            *"round 2: publishing"*) callgrind_control -z "$SERVER_PID" >/dev/null ;;
            *"round 2: answered"*)
                sleep "${DUMP_DELAY:-0.2}"
                callgrind_control -d "$SERVER_PID" >/dev/null
                ;;
        esac
    done) >"$OUT/bench.json"
sleep 2
stop_server
dump=$(ls "$OUT"/cg.*.1)
awk -v n="$N" '/^events:/ { for (i = 2; i <= NF; i++) ev[i] = $i }
     /^(summary|totals):/ { for (i = 2; i <= NF; i++) printf "%s %.0f  ", ev[i], $i / n; print "" }' \
    "$dump" | head -1
echo "dump: $dump"
