#!/usr/bin/env bash
# Creates (once) the Python virtualenv that the client compatibility tests use, with the real
# Nacos Python client `nacos-sdk-python==1.0.0` (HTTP v1 long polling) installed from PyPI.
#
#   scripts/python-venv.sh [VENV_DIR]     default: target/py-venv in the repository
#
# Idempotent and safe to run concurrently (a lock file serialises installs). Prints the path
# of the venv's python on its last line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${NACELLE_PY_VENV:-$ROOT/target/py-venv}}"
PYTHON="${PYTHON:-python3}"
PACKAGE="nacos-sdk-python"
VERSION="1.0.0"

installed() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" - "$PACKAGE" "$VERSION" >/dev/null 2>&1 <<'PY'
import importlib.metadata, sys
assert importlib.metadata.version(sys.argv[1]) == sys.argv[2]
import nacos  # noqa: F401
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
