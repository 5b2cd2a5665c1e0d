#!/usr/bin/env bash
# Variant selection cost: http-get and 1000-listener long-poll fan-out, with a variant on
# every key that no bench client is in (every read/wake-up runs the selection and misses)
# vs without. Two servers (A plain, B with the variant), alternating.
#   gray-bench.sh [OUT]                    # a beta for 10.255.255.1 (issue 10)
#   VARIANT=percent gray-bench.sh [OUT]    # a percent gray (a rollout held at 0.01 %, issue 36)
set -euo pipefail
T=${T:-target/release}
B=$T/nacelle-bench
OUT=${1:-/tmp/gray-bench}
# A percent gray is a rollout, and at most 100 are active: 95 http-get keys leave room for
# the fan-out runs' keys.
case "${VARIANT:-beta}" in
  beta) FLAG=(--beta-ips 10.255.255.1); KEYS=${KEYS:-100} ;;
  percent) FLAG=(--gray-percent "${PERCENT:-0.01}"); KEYS=${KEYS:-95} ;;
  *) echo "VARIANT is beta or percent" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
start() { # dir port
  rm -rf "$1"; NACELLE_WRITE_RATE_PER_IP=0 NACELLE_MAX_HELD_POLLS_PER_IP=1000000 NACELLE_HTTP_MAX_CONNECTIONS_PER_IP=1000000 "$T/nacelle" serve --data-dir "$1" --bind 127.0.0.1 --port "$2" --grpc-port $(( $2 + 1000 )) --log warn --auth off > "$1.log" 2>&1 &
  echo $!
}
PA=$(start /tmp/gb-a 38848)
PB=$(start /tmp/gb-b 38858)
trap 'kill "$PA" "$PB" 2>/dev/null || true' EXIT
sleep 2
for i in 1 2; do
  $B http-get --addr 127.0.0.1:38848 --connections 32 --duration 10 --keys "$KEYS" | tail -1 >> "$OUT/get-plain.jsonl"
  $B http-get --addr 127.0.0.1:38858 --connections 32 --duration 10 --keys "$KEYS" "${FLAG[@]}" | tail -1 >> "$OUT/get-variant.jsonl"
done
for i in 1 2; do
  $B longpoll-fanout --addr 127.0.0.1:38848 --n 1000 --rounds 5 --server-pid "$PA" | tail -1 >> "$OUT/fanout-plain.jsonl"
  $B longpoll-fanout --addr 127.0.0.1:38858 --n 1000 --rounds 5 --server-pid "$PB" "${FLAG[@]}" | tail -1 >> "$OUT/fanout-variant.jsonl"
done
