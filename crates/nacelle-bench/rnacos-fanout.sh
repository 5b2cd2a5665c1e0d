#!/usr/bin/env bash
# Fan-out side by side with r-nacos (issue 15): for each pass, the machine's floor
# (`fanout-ceiling`), then 1 000 (and optionally 10 000) long polls and gRPC listeners of
# one key against Nacelle and against r-nacos, the order of the two servers alternating
# per pass. Each server is started fresh per pass on its own data directory. Usage:
#
#   crates/nacelle-bench/rnacos-fanout.sh TARGET RNACOS [OUT_DIR] [PASSES] [N...]
#
# TARGET holds `nacelle` and `nacelle-bench` (e.g. target/release); RNACOS is the r-nacos
# binary (`cargo install rnacos --version '^0.8'`). Defaults: 3 passes, N = 1000. With
# BEFORE=DIR (another directory of binaries) each pass also runs that Nacelle, labelled
# `before`, so a change is measured before and after beside r-nacos in one run.
# DATA=DIR puts the servers' data directories there instead of under OUT_DIR: DATA=/dev/shm/x
# takes the disk out of the time from the publish (r-nacos 0.8 never flushes a publish to
# disk; Nacelle fsyncs the SQLite WAL before it answers and before it tells a listener, 1-4
# ms on the VM disks here; on tmpfs an fsync returns at once, so neither server pays one).
# Results: OUT_DIR/results.jsonl (one line per scenario, tagged with server and pass) and
# a summary (summary.txt), printed at the end: the medians of p50 and p99 over the passes,
# the server's and the bench's CPU per push or released poll (median and quartiles over
# the rounds), and the runs left out (pushes missing, or nothing measured).
set -euo pipefail

TARGET=$1
RNACOS=$2
OUT=${3:-target/bench-rnacos}
PASSES=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
SIZES=("$@")
[ ${#SIZES[@]} -eq 0 ] && SIZES=(1000)
# Below the ephemeral range (32768–60999 by default): with 10 000 client connections one
# of them can hold a port in that range when the next server binds it.
PORT=${PORT:-18848}
GPORT=$((PORT + 1000))
RPORT=${RPORT:-28848}
RGPORT=$((RPORT + 1000))
BENCH="$TARGET/nacelle-bench"
DATA=${DATA:-$OUT}
mkdir -p "$OUT" "$DATA"
: >"$OUT/results.jsonl"
. "$(dirname "$0")/server.sh"

. "$(dirname "$0")/rnacos.sh"

trap 'stop_server; stop_rnacos' EXIT

run() {
    local server=$1 pass=$2
    shift 2
    echo "== $server pass $pass: $*" >&2
    "$BENCH" "$@" 2>&1 | tee -a "$OUT/$server-$pass.txt" | grep '^{' \
        | sed "s/^{/{\"server\":\"$server\",\"pass\":$pass,/" >>"$OUT/results.jsonl" || true
}

nacelle_round() {
    local pass=$1 label=${2:-nacelle} bin=${3:-$TARGET}
    start_server "$bin" "$DATA/data-$label-$pass" "$OUT/data-$label-$pass.log"
    sleep 1
    echo "idle_rss_kib $(awk '/VmRSS/ {print $2}' /proc/$SERVER_PID/status)" >>"$OUT/$label-$pass.txt"
    for n in "${SIZES[@]}"; do
        run "$label" "$pass" longpoll-fanout --addr "127.0.0.1:$PORT" --n "$n" --rounds 5 --server-pid "$SERVER_PID"
        run "$label" "$pass" grpc-fanout --addr "127.0.0.1:$GPORT" --n "$n" --rounds 5 --server-pid "$SERVER_PID"
    done
    sleep 30
    echo "rss_30s_after_kib $(awk '/VmRSS/ {print $2}' /proc/$SERVER_PID/status)" >>"$OUT/$label-$pass.txt"
    stop_server
}

rnacos_round() {
    local pass=$1
    start_rnacos "$DATA/data-rnacos-$pass" "$OUT/data-rnacos-$pass.log"
    sleep 1
    for n in "${SIZES[@]}"; do
        run rnacos "$pass" longpoll-fanout --addr "127.0.0.1:$RPORT" --n "$n" --rounds 5 --server-pid "$RNACOS_PID"
        run rnacos "$pass" grpc-fanout --addr "127.0.0.1:$RGPORT" --n "$n" --rounds 5 --server-pid "$RNACOS_PID"
    done
    stop_rnacos
}

for pass in $(seq 1 "$PASSES"); do
    for n in "${SIZES[@]}"; do
        run floor "$pass" fanout-ceiling --n "$n" --rounds 5
    done
    if [ $((pass % 2)) -eq 1 ]; then
        nacelle_round "$pass"
        rnacos_round "$pass"
        [ -n "${BEFORE:-}" ] && nacelle_round "$pass" before "$BEFORE"
    else
        [ -n "${BEFORE:-}" ] && nacelle_round "$pass" before "$BEFORE"
        rnacos_round "$pass"
        nacelle_round "$pass"
    fi
done

python3 - "$OUT/results.jsonl" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
failed = {}
cpu = {}
for r in rows:
    n = r.get("polls") or r.get("listeners") or r.get("connections") or r.get("n")
    key = (r["scenario"], n, r["server"])
    lat = r.get("latency_from_publish_sent") or r.get("latency_from_trigger_sent") or {}
    # A run that lost pushes or measured nothing (a server that failed to start answers
    # nothing, or answers polls without holding them) is listed, not counted.
    if r.get("missing") or not lat.get("count"):
        failed.setdefault(key, []).append(r["pass"])
        continue
    groups.setdefault(key, []).append((lat.get("p50_ms"), lat.get("p99_ms")))
    for rnd in r.get("per_round", []):
        c = rnd.get("cpu_per_push") or rnd.get("cpu_per_poll") or {}
        cpu.setdefault(key, []).append(
            (c.get("server_cpu_us_per_item"), c.get("bench_cpu_us_per_item")))
print(f"{'scenario':<18}{'N':>7} {'server':<8} {'passes':>6} {'median p50 ms':>14} {'median p99 ms':>14}  p99 per pass")
for (scen, n, server), vals in sorted(groups.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
    p50 = statistics.median(v[0] for v in vals if v[0] is not None)
    p99 = [v[1] for v in vals if v[1] is not None]
    print(f"{scen:<18}{str(n):>7} {server:<8} {len(vals):>6} {p50:>14.1f} {statistics.median(p99):>14.1f}  {p99}")
print(f"\n{'CPU per item, µs':<26}{'N':>7} {'server':<8} {'rounds':>6} {'server (p25-p75)':>18} {'bench':>6}")
for (scen, n, server), vals in sorted(cpu.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
    srv = sorted(v[0] for v in vals if v[0] is not None)
    bench = [v[1] for v in vals if v[1] is not None]
    if not srv or not bench:
        continue
    q = lambda f: srv[min(len(srv) - 1, int(f * len(srv)))]
    band = f"{statistics.median(srv):.1f} ({q(0.25):.0f}-{q(0.75):.0f})"
    print(f"{scen:<26}{str(n):>7} {server:<8} {len(vals):>6} {band:>18} {statistics.median(bench):>6.1f}")
for (scen, n, server), passes in sorted(failed.items(), key=lambda kv: str(kv[0])):
    print(f"not counted: {scen} {n} {server}, pass(es) {passes} (missing pushes or no measurement)")
PY
