#!/usr/bin/env bash
# Notices when crates/nacelle/link-order.txt (the code layout of optimised builds,
# docs/benchmarks.md "Idle RSS by code layout") has drifted from the code: what it orders
# against what a build of `nacelle` defines.
#
#   scripts/check-link-order.sh [BINARY] [MIN_PERCENT]
#
# BINARY defaults to target/debug/nacelle (what `cargo test -p nacelle` builds); any
# build of the server will do. At least MIN_PERCENT (default 98) of the listed names must
# be defined by BINARY once their hash (`17h…E`), ThinLTO suffix (`.llvm.N`) and C compiler
# clone suffixes (`.isra.N`, `.constprop.N`, `.part.N`, `.cold`) are left out: that is how
# build.rs's fallback section matches them in a build whose hashes differ (another
# feature set, profile or toolchain, a `cargo update`, an edited crate), so it is what
# keeps the layout packed. Below it, the functions a server runs have been renamed,
# moved or removed since the list was made, and idle RSS creeps back towards the 20 MiB
# of the compiler's order. The share of exact names (hash and all, what `.text.nacelle_run`
# takes) is printed for an optimised build laid out by the list; it falls with every
# edit and is not checked. Either way the fix is `scripts/link-order.sh`. Needs nm.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/debug/nacelle}
LIST=$ROOT/crates/nacelle/link-order.txt
[ -x "$BIN" ] || { echo "check-link-order: no binary at $BIN (build it first)" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
grep -v '^#' "$LIST" | sed '/^[[:space:]]*$/d' >"$WORK/listed"
nm --defined-only "$BIN" | awk 'NF >= 3 { print $3 }' | sort -u >"$WORK/defined"
listed=$(wc -l <"$WORK/listed")

min=${2:-98}
strip() {
    sed -E -e 's/\.llvm\.[0-9]+$//' -e 's/17h[0-9a-f]{16}E/17hE/g' \
        -e 's/(\.(isra|constprop|part|cold|lto_priv)(\.[0-9]+)?)+$//'
}
strip <"$WORK/defined" | sort -u >"$WORK/defined.loose"
paste -d' ' "$WORK/listed" <(strip <"$WORK/listed") |
    awk 'NR == FNR { have[$0] = 1; next } !($2 in have) { print $1 }' \
        "$WORK/defined.loose" - >"$WORK/missing"
if readelf -SW "$BIN" 2>/dev/null | grep -qF '.text.nacelle_run'; then
    exact=$(grep -Fxf "$WORK/defined" "$WORK/listed" | wc -l)
    echo "check-link-order: $exact of $listed listed names defined exactly (a laid-out build; not checked)"
fi
missing=$(wc -l <"$WORK/missing")
found=$((listed - missing))
percent=$((100 * found / listed))
echo "check-link-order: $found of $listed listed functions found in $BIN without hash and suffixes ($percent %, at least $min % required)"
if [ "$percent" -lt "$min" ]; then
    echo "check-link-order: FAILED: link-order.txt has drifted from the code; regenerate it with scripts/link-order.sh. First missing names:" >&2
    head -20 "$WORK/missing" >&2
    exit 1
fi
