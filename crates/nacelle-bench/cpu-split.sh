#!/usr/bin/env bash
# User and kernel CPU of the fan-out rounds, per released poll or push (docs/benchmarks.md,
# "Issue 15, eleventh session"): the server and the bench run as in `rnacos-fanout.sh`; at
# the bench's "round K: publishing" marker (one second before the publish, with
# --pause-ms) and at its "round K: answered" marker the server's and the bench's `utime`
# and `stime` are read from /proc/PID/stat, for rounds 2 to ROUNDS (round 1 warms up; the
# bench runs one round more, unmeasured).
# The figures are the sums over those rounds divided by N × (ROUNDS − 1). Usage:
#
#   crates/nacelle-bench/cpu-split.sh TARGET OUT_DIR [longpoll|grpc] [N] [ROUNDS]
#
# TARGET holds `nacelle` and `nacelle-bench`. RNACOS=BIN measures r-nacos instead of
# Nacelle (started by `rnacos.sh`). The clock ticks of /proc are 10 ms:
# with 10 000 listeners a round is 15-20 ticks of each process, so use N = 10000 and five
# rounds or more for a split within a few per cent.
set -euo pipefail

TARGET=$1
OUT=$2
KIND=${3:-grpc}
N=${4:-10000}
ROUNDS=${5:-6}
PORT=${PORT:-18848}
GPORT=$((PORT + 1000))
rm -rf "$OUT"
mkdir -p "$OUT"
. "$(dirname "$0")/server.sh"
. "$(dirname "$0")/rnacos.sh"
if [ -n "${RNACOS:-}" ]; then
    RPORT=$PORT RGPORT=$GPORT start_rnacos "$OUT/rnacos" "$OUT/server.log"
    SERVER_PID=$RNACOS_PID
else
    start_server "$TARGET" "$OUT/data" "$OUT/server.log"
fi
trap stop_server EXIT
case $KIND in
    longpoll) ADDR=127.0.0.1:$PORT ;;
    grpc) ADDR=127.0.0.1:$GPORT ;;
    *) echo "longpoll or grpc, not $KIND" >&2; exit 2 ;;
esac
sleep 1
# utime and stime (fields 14 and 15; the command name in field 2 has no spaces here).
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# One round more than measured: the bench may exit as soon as its last round is answered,
# before its marker is read, so the last round only keeps it alive.
last=$((ROUNDS + 1))
"$TARGET/nacelle-bench" "$KIND-fanout" --addr "$ADDR" --n "$N" --rounds "$last" \
    --pause-ms 3000 2> >(while read -r line; do
        echo "$line" >>"$OUT/bench.err"
        bench=$(cat "$OUT/bench.pid" 2>/dev/null || true)
        case "$line" in
            *"round 1: "* | *"round $last: "*) ;;
            *": publishing"*) echo "start $(ticks "$SERVER_PID") $(ticks "$bench")" >>"$OUT/ticks" ;;
            *": answered"*) echo "end $(ticks "$SERVER_PID") $(ticks "$bench")" >>"$OUT/ticks" ;;
        esac
    done) >"$OUT/bench.json" &
echo $! >"$OUT/bench.pid"
wait $!
sleep 1
stop_server
hz=$(getconf CLK_TCK)
awk -v n="$N" -v hz="$hz" '
    $1 == "start" { su = $2; ss = $3; bu = $4; bs = $5 }
    $1 == "end" { SU += $2 - su; SS += $3 - ss; BU += $4 - bu; BS += $5 - bs; r++ }
    END {
        if (r == 0) { print "no round measured"; exit 1 }
        us = 1e6 / hz / (n * r)
        printf "rounds %d; per item, µs: server user %.1f kernel %.1f; bench user %.1f kernel %.1f\n",
            r, SU * us, SS * us, BU * us, BS * us
    }' "$OUT/ticks"
