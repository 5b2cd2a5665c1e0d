#!/usr/bin/env bash
# Three (NODES) Nacelle nodes on one database, clients spread over all of them (issue 38,
# item 4; docs/benchmarks.md, "Issue 38: three nodes on one database"). Usage:
#
#   crates/nacelle-bench/cluster-bench.sh TARGET [OUT_DIR] [GRPC_PER_NODE] [POLLS_PER_NODE]
#
# TARGET holds `nacelle` and `nacelle-bench` (e.g. target/release). The database is a
# throwaway PostgreSQL (and MariaDB) from scripts/test-databases.sh, unless DB_URL names
# one (a database the nodes may create tables in). Defaults: 1 000 gRPC listeners and
# 1 000 long polls per node (3 000 of each over 3 nodes), 5 rounds, then the follower
# phase (10 publishes/s on node 1 for 20 s). Results: OUT_DIR/results.jsonl.
set -euo pipefail
TARGET=$1
OUT=${2:-target/bench-cluster}
GRPC_PER_NODE=${3:-1000}
POLLS_PER_NODE=${4:-1000}
NODES=${NODES:-3}
ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

db_dir=""
pids=()
cleanup() {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  if [ -n "$db_dir" ]; then bash "$ROOT/scripts/test-databases.sh" stop "$db_dir" || true; fi
}
trap cleanup EXIT
if [ -z "${DB_URL:-}" ]; then
  eval "$(bash "$ROOT/scripts/test-databases.sh" start)"
  db_dir=$NACELLE_TEST_DB_DIR
  name="nacelle_bench_$$"
  psql "$NACELLE_TEST_POSTGRES_URL/postgres" -qc "CREATE DATABASE $name" >/dev/null
  DB_URL="$NACELLE_TEST_POSTGRES_URL/$name"
fi

# HTTP ports 18848, 18858, …; gRPC +1000; the cluster port is HTTP + 1001.
members=""
for i in $(seq 0 $((NODES - 1))); do
  members+="${members:+,}127.0.0.1:$((18848 + 10 * i))"
done
http=""; grpc=""; pidlist=""
for i in $(seq 0 $((NODES - 1))); do
  port=$((18848 + 10 * i))
  dir="$OUT/node$i"; rm -rf "$dir"; mkdir -p "$dir"
  NACELLE_WRITE_RATE_PER_IP=0 NACELLE_MAX_HELD_POLLS_PER_IP=1000000 \
  NACELLE_HTTP_MAX_CONNECTIONS_PER_IP=1000000 \
  "$TARGET/nacelle" serve --data-dir "$dir" --bind 127.0.0.1 --port "$port" \
    --grpc-port $((port + 1000)) --db "$DB_URL" --members "$members" \
    --cluster-secret bench-cluster-secret-0123456789 --auth off --log warn \
    >"$dir.log" 2>&1 &
  pids+=($!)
  http+="${http:+,}127.0.0.1:$port"; grpc+="${grpc:+,}127.0.0.1:$((port + 1000))"
  pidlist+="${pidlist:+,}$!"
done
for i in $(seq 0 $((NODES - 1))); do
  port=$((18848 + 10 * i))
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$port/nacos/v1/console/health/readiness" >/dev/null && break
    sleep 0.1
  done
done
"$TARGET/nacelle-bench" cluster-fanout --http "$http" --grpc "$grpc" --pids "$pidlist" \
  --grpc-per-node "$GRPC_PER_NODE" --polls-per-node "$POLLS_PER_NODE" --rounds "$ROUNDS" \
  | tee -a "$OUT/results.jsonl"
