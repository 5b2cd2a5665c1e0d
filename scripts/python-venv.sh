#!/usr/bin/env bash
# Creates (once) a Python virtualenv that the client compatibility tests use, with a real Nacos
# Python package installed from PyPI:
#   - `nacos-sdk-python==1.0.0` (HTTP v1 long polling; the default), in target/py-venv;
#   - `nacos-sdk-python==2.0.9` (its `v2.nacos` API speaks gRPC through grpcio), in
#     target/py-venv-2.0.9 — any other version gets target/py-venv-VERSION likewise;
#   - another PACKAGE, e.g. the Nacos 3 operator SDK `nacos-maintainer-sdk-python==0.5.3`
#     (which pulls in a 3.x `nacos-sdk-python`), in target/py-venv-PACKAGE-VERSION.
#
#   scripts/python-venv.sh [VENV_DIR] [VERSION] [PACKAGE]
#
# PACKAGE: the third argument, else nacos-sdk-python.
# VERSION: the second argument, else 1.0.0 (for nacos-sdk-python; another PACKAGE needs one).
# VENV_DIR: the first argument (an empty one means the default), else $NACELLE_PY_VENV for
# nacos-sdk-python 1.0.0 only, else the default above.
#
# Idempotent and safe to run concurrently (a lock file per venv serialises installs). Prints
# the path of the venv's python on its last line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
DEFAULT_PACKAGE="nacos-sdk-python"
PACKAGE="${3:-$DEFAULT_PACKAGE}"
DEFAULT_VERSION="1.0.0"
if [ "$PACKAGE" = "$DEFAULT_PACKAGE" ]; then
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
else
    VERSION="${2:?a version of $PACKAGE is needed: scripts/python-venv.sh VENV_DIR VERSION PACKAGE}"
    VENV="${1:-$ROOT/target/py-venv-$PACKAGE-$VERSION}"
    case "$PACKAGE" in
        # The operator SDK (`maintainer`) on the 3.x client it depends on (`v2.nacos`).
        nacos-maintainer-sdk-python) MODULES="maintainer.ai.nacos_ai_maintainer_service v2.nacos" ;;
        *) MODULES="" ;;
    esac
fi

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
