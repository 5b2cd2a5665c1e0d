#!/usr/bin/env bash
# Proves that the console's committed code-editor bundle,
# crates/nacelle-console/assets/editor.bundle.js (embedded in the binary, so `cargo build`
# needs no Node.js), is exactly what crates/nacelle-console/editor-src builds from its
# package-lock.json: `npm ci` there, esbuild (pinned in the lockfile) builds the bundle to a
# temporary file, and the two are compared byte for byte.
#
#   scripts/check-console-bundle.sh           check (exit 1 when they differ)
#   scripts/check-console-bundle.sh --write   after changing editor-src (index.js, a
#                                             package version): rebuild the committed bundle
#
# esbuild's output depends only on its inputs and version: no dates, and the minified
# bundle holds no file paths (build.mjs), so the check does not depend on where the
# repository is. Needs node and npm (the npm registry, or npm's cache, for `npm ci`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=$ROOT/crates/nacelle-console/editor-src
BUNDLE=$ROOT/crates/nacelle-console/assets/editor.bundle.js

(cd "$SRC" && npm ci --no-audit --no-fund --loglevel=error)
if [ "${1:-}" = --write ]; then
    node "$SRC/build.mjs" "$BUNDLE"
    echo "check-console-bundle: wrote $BUNDLE ($(wc -c <"$BUNDLE") bytes, $(gzip -9c "$BUNDLE" | wc -c) gzipped)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$SRC/build.mjs" "$tmp/editor.bundle.js"
if ! cmp -s "$tmp/editor.bundle.js" "$BUNDLE"; then
    echo "check-console-bundle: FAILED: $BUNDLE is not what editor-src and its package-lock.json build" >&2
    echo "  (rebuild it with scripts/check-console-bundle.sh --write, and commit it)" >&2
    cmp "$tmp/editor.bundle.js" "$BUNDLE" >&2 || true
    exit 1
fi
echo "check-console-bundle: ok, editor.bundle.js is the build of editor-src ($(wc -c <"$BUNDLE") bytes, $(gzip -9c "$BUNDLE" | wc -c) gzipped)"
