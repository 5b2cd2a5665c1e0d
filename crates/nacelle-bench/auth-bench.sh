#!/usr/bin/env bash
# What authentication costs a read: http-get and grpc-query against two servers started
# alike but for `--auth` — A with `--auth off`, B with auth on, every request carrying an
# admin token (`--access-token`; the HTTP ones as `accessToken`, the gRPC ones in
# metadata.headers) — alternating, three rounds each (docs/benchmarks.md, "Authentication").
set -euo pipefail
T=${T:-target/release}
B=$T/nacelle-bench
OUT=${1:-/tmp/auth-bench}
SECRET=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
mkdir -p "$OUT"
start() { # dir port extra…
  local dir=$1 port=$2; shift 2
  rm -rf "$dir"
  "$T/nacelle" serve --data-dir "$dir" --bind 127.0.0.1 --port "$port" \
    --grpc-port $(( port + 1000 )) --log warn "$@" > "$dir.log" 2>&1 &
  echo $!
}
PA=$(start /tmp/ab-off 38848 --auth off)
PB=$(start /tmp/ab-on 38858 --auth on --auth-token-secret "$SECRET" --admin-password bench-password)
trap 'kill "$PA" "$PB" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  TOKEN=$(curl -s -X POST 'http://127.0.0.1:38858/nacos/v1/auth/login' \
    -d username=nacos -d password=bench-password | sed -n 's/.*"accessToken":"\([^"]*\)".*/\1/p' || true)
  [ -n "$TOKEN" ] && break
  sleep 0.1
done
[ -n "$TOKEN" ] || { echo "no token from the auth-on server" >&2; exit 1; }
for i in 1 2 3; do
  $B http-get --addr 127.0.0.1:38848 --connections 32 --duration 10 | tail -1 >> "$OUT/get-off.jsonl"
  $B http-get --addr 127.0.0.1:38858 --connections 32 --duration 10 --access-token "$TOKEN" | tail -1 >> "$OUT/get-on.jsonl"
done
for i in 1 2 3; do
  $B grpc-query --addr 127.0.0.1:39848 --connections 16 --duration 10 | tail -1 >> "$OUT/query-off.jsonl"
  $B grpc-query --addr 127.0.0.1:39858 --connections 16 --duration 10 --access-token "$TOKEN" | tail -1 >> "$OUT/query-on.jsonl"
done
for f in "$OUT"/*.jsonl; do
  echo "$(basename "$f" .jsonl): $(sed -n 's/.*"qps":\([0-9.]*\).*/\1/p' "$f" | tr '\n' ' ')"
done
