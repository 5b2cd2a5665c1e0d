#!/usr/bin/env bash
# Runs the Rust SDK (nacelle-client) against r-nacos, an independent Nacos-protocol server:
# get, publish (type, CAS, tag), remove, listen (the first value of a new key), bind,
# namespace listing, login and watch_group. Prints PASS/FAIL per item; exits non-zero on a
# failure. Not run in CI (it needs the r-nacos binary).
#
#   scripts/rnacos-client-check.sh            # r-nacos from $RNACOS or PATH
#   RNACOS=/path/to/rnacos scripts/rnacos-client-check.sh
#
# Install r-nacos with:  cargo install rnacos --version '^0.8'
set -euo pipefail

cd "$(dirname "$0")/.."

RNACOS_BIN="${RNACOS:-$(command -v rnacos || true)}"
if [[ -z "$RNACOS_BIN" || ! -x "$RNACOS_BIN" ]]; then
    echo "r-nacos not found: set RNACOS=/path/to/rnacos or put rnacos on PATH" >&2
    echo "(install it with: cargo install rnacos --version '^0.8')" >&2
    exit 2
fi

# A free port P such that P+1000 (gRPC) and P+2000 (console) are free too.
free_port() {
    python3 - <<'PY'
import socket
for _ in range(200):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p + 2000 > 65535:
        continue
    ok = True
    for q in (p + 1000, p + 2000):
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        finally:
            t.close()
    if ok:
        print(p); break
PY
}

HTTP_PORT="$(free_port)"
[[ -n "$HTTP_PORT" ]] || { echo "no free port found" >&2; exit 2; }
WORK="$(mktemp -d)"
PASSWORD="check-$RANDOM-$RANDOM"
RNACOS_PID=""
cleanup() {
    if [[ -n "$RNACOS_PID" ]]; then
        kill "$RNACOS_PID" 2>/dev/null || true
        wait "$RNACOS_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "r-nacos: $RNACOS_BIN ($("$RNACOS_BIN" --version 2>/dev/null || echo 'version unknown'))"
echo "ports: HTTP $HTTP_PORT, gRPC $((HTTP_PORT + 1000)), console $((HTTP_PORT + 2000)); data $WORK"
(
    cd "$WORK"
    env RNACOS_HTTP_PORT="$HTTP_PORT" \
        RNACOS_GRPC_PORT="$((HTTP_PORT + 1000))" \
        RNACOS_HTTP_CONSOLE_PORT="$((HTTP_PORT + 2000))" \
        RNACOS_RAFT_NODE_ADDR="127.0.0.1:$((HTTP_PORT + 1000))" \
        RNACOS_SDK_HOST=127.0.0.1 \
        RNACOS_CONSOLE_HOST=127.0.0.1 \
        RNACOS_DATA_DIR="$WORK/data" \
        RNACOS_ENABLE_OPEN_API_AUTH=true \
        RNACOS_INIT_ADMIN_USERNAME=admin \
        RNACOS_INIT_ADMIN_PASSWORD="$PASSWORD" \
        "$RNACOS_BIN"
) >"$WORK/rnacos.log" 2>&1 &
RNACOS_PID=$!

# Ready once a login answers with a token (r-nacos reads the query string; the admin user
# is created once its store is up, which can take a few seconds).
ready=""
for _ in $(seq 1 150); do
    if curl -fsS -X POST "http://127.0.0.1:$HTTP_PORT/nacos/v1/auth/login?username=admin&password=$PASSWORD" \
        2>/dev/null | grep -q accessToken; then
        ready=yes
        break
    fi
    if ! kill -0 "$RNACOS_PID" 2>/dev/null; then
        echo "r-nacos exited:" >&2
        cat "$WORK/rnacos.log" >&2
        exit 2
    fi
    sleep 0.2
done
if [[ -z "$ready" ]]; then
    echo "r-nacos did not accept the admin login within 30 s:" >&2
    tail -n 40 "$WORK/rnacos.log" >&2
    exit 2
fi

export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
status=0
RNACOS_CHECK_SERVER="127.0.0.1:$HTTP_PORT" \
RNACOS_CHECK_USER=admin \
RNACOS_CHECK_PASSWORD="$PASSWORD" \
    cargo run -q -p nacelle-client --example rnacos_check || status=$?
if [[ $status -ne 0 ]]; then
    echo "--- r-nacos log (last 40 lines) ---"
    tail -n 40 "$WORK/rnacos.log"
fi
exit "$status"
