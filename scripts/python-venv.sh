#!/usr/bin/env bash
# Creates (once) a Python virtualenv that the client compatibility tests use, with a real Nacos
# Python client installed from PyPI:
#   - `nacos-sdk-python==1.0.0` (HTTP v1 long polling; the default), in target/py-venv;
#   - `nacos-sdk-python==2.0.9` (its `v2.nacos` API speaks gRPC through grpcio), in
#     target/py-venv-2.0.9 — any other version gets target/py-venv-VERSION likewise.
#
#   scripts/python-venv.sh [VENV_DIR] [VERSION]
#
# VERSION: the second argument, else 1.0.0.
# VENV_DIR: the first argument (an empty one means the default), else $NACELLE_PY_VENV for
# version 1.0.0 only, else the default above.
#
# Idempotent and safe to run concurrently (a lock file per venv serialises installs). Prints
# the path of the venv's python on its last line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
PACKAGE="nacos-sdk-python"
DEFAULT_VERSION="1.0.0"
VERSION="${2:-$DEFAULT_VERSION}"
if [ "$VERSION" = "$DEFAULT_VERSION" ]; then
    VENV="${1:-${NACELLE_PY_VENV:-$ROOT/target/py-venv}}"
else
    VENV="${1:-$ROOT/target/py-venv-$VERSION}"
fi
# What must import: 1.x has the `nacos` module only; 2.x adds the gRPC client `v2.nacos`.
case "$VERSION" in
    1.*) MODULES="nacos" ;;
    *) MODULES="nacos v2.nacos" ;;
esac

installed() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" - "$PACKAGE" "$VERSION" $MODULES >/dev/null 2>&1 <<'PY'
import importlib, importlib.metadata, sys
assert importlib.metadata.version(sys.argv[1]) == sys.argv[2]
for module in sys.argv[3:]:
    importlib.import_module(module)
PY
}

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9

if ! installed; then
    echo "creating $VENV with $PACKAGE==$VERSION" >&2
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$PACKAGE==$VERSION" >&2
    installed || { echo "$PACKAGE==$VERSION did not install into $VENV" >&2; exit 1; }
fi
echo "$VENV/bin/python"
