#!/usr/bin/env bash
# Proves that vendor/h2 is exactly the published `h2` crate plus Nacelle's patch
# (vendor/h2/NACELLE-PATCH.md), and makes moving to a new `h2` release mechanical.
#
#   scripts/check-vendored-h2.sh                  check (exit 1 on any drift)
#   scripts/check-vendored-h2.sh --write-patch    after editing vendor/h2's sources:
#                                                 rewrite nacelle-h2.patch from the diff
#   scripts/check-vendored-h2.sh --update 0.4.21  replace vendor/h2 with that release plus
#                                                 the patch (fails if it does not apply)
#
# The check takes the published .crate of the version in vendor/h2/Cargo.toml (from
# $NACELLE_H2_CRATE, else cargo's download cache, else https://static.crates.io), verifies
# its SHA-256 against vendor/h2/nacelle-h2.crate.sha256 (the checksum of the crates.io
# index), unpacks it, removes the files the patch lists as "Only in h2-orig", applies
# vendor/h2/nacelle-h2.patch with no fuzz, and compares the result with vendor/h2 byte for
# byte (Nacelle's own three files aside). It also regenerates the patch from the two trees
# and compares it with the committed one, so the patch file is always the whole diff.
# Needs curl (unless the .crate is cached), tar, patch, diff and sha256sum.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENDOR=$ROOT/vendor/h2
PATCH=$VENDOR/nacelle-h2.patch
SUM=$VENDOR/nacelle-h2.crate.sha256
# Nacelle's files in vendor/h2, not part of the crate.
OURS=(NACELLE-PATCH.md nacelle-h2.patch nacelle-h2.crate.sha256)

fail() {
    echo "check-vendored-h2: FAILED: $*" >&2
    exit 1
}

version_of() {
    sed -n 's/^version = "\(.*\)"$/\1/p' "$1/Cargo.toml" | head -1
}

# fetch VERSION DEST: the published h2-VERSION.crate into DEST (no checksum check here).
fetch() {
    local version=$1 dest=$2 cached
    if [ -n "${NACELLE_H2_CRATE:-}" ]; then
        cp "$NACELLE_H2_CRATE" "$dest"
        return
    fi
    cached=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"h2-$version.crate" 2>/dev/null | head -1 || true)
    if [ -n "$cached" ]; then
        cp "$cached" "$dest"
        return
    fi
    curl -sSfL --retry 3 -o "$dest" "https://static.crates.io/crates/h2/h2-$version.crate" ||
        fail "cannot download h2 $version from static.crates.io (set NACELLE_H2_CRATE to a .crate file)"
}

# The checksum crates.io's index records for h2 VERSION.
index_checksum() {
    # One JSON object per line; spacing as the index serves it.
    curl -sSf --retry 3 https://index.crates.io/2/h2 |
        grep -E "\"vers\": *\"$1\"" | sed -nE 's/.*"cksum": *"([0-9a-f]{64})".*/\1/p' | head -1 || true
}

# unpack CRATE DIR: the crate's files in DIR/h2-orig (as published) and DIR/h2 (patched).
# Returns non-zero when the patch does not apply exactly.
unpack_and_patch() {
    local crate=$1 dir=$2 f
    mkdir -p "$dir/x"
    tar -xzf "$crate" -C "$dir/x"
    mv "$dir"/x/h2-* "$dir/h2-orig"
    rmdir "$dir/x"
    cp -a "$dir/h2-orig" "$dir/h2"
    # Files the patch removes ("Only in h2-orig: NAME" lines of `diff -r`).
    while IFS= read -r f; do
        rm -rf "${dir:?}/h2/$f"
    done < <(sed -n 's/^Only in h2-orig: //p' "$PATCH")
    # Files the patch adds would be "Only in h2: NAME": there are none, and the check below
    # would report any that appeared.
    (cd "$dir/h2" && patch -p1 --fuzz=0 --forward --no-backup-if-mismatch --batch --quiet) <"$PATCH"
}

# The diff of DIR/h2-orig → DIR/h2 in the committed form: Nacelle's files left out and no
# timestamps in the file headers, so that it is reproducible.
make_patch() {
    local dir=$1 excl=() f
    for f in "${OURS[@]}"; do excl+=(-x "$f"); done
    (cd "$dir" && LC_ALL=C diff -ru "${excl[@]}" h2-orig h2 || true) |
        sed -E -e 's/^((---|\+\+\+) [^\t]+)\t.*$/\1/' -e 's/^diff -ru( -x [^ ]+)* /diff -ru /'
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

case "${1:-check}" in
check)
    version=$(version_of "$VENDOR")
    [ -n "$version" ] || fail "no version in vendor/h2/Cargo.toml"
    [ -f "$SUM" ] || fail "vendor/h2/nacelle-h2.crate.sha256 is missing"
    grep -q " h2-$version.crate\$" "$SUM" || fail "nacelle-h2.crate.sha256 is not for h2 $version"
    fetch "$version" "$WORK/h2-$version.crate"
    (cd "$WORK" && sha256sum --quiet -c "$SUM") ||
        fail "h2-$version.crate does not have the checksum recorded in vendor/h2/nacelle-h2.crate.sha256"
    unpack_and_patch "$WORK/h2-$version.crate" "$WORK" ||
        fail "nacelle-h2.patch does not apply exactly to h2 $version"
    for f in "${OURS[@]}"; do
        [ -e "$VENDOR/$f" ] || fail "vendor/h2/$f is missing"
    done
    excl=()
    for f in "${OURS[@]}"; do excl+=(-x "$f"); done
    if ! LC_ALL=C diff -r --no-dereference "${excl[@]}" "$WORK/h2" "$VENDOR" >"$WORK/drift"; then
        cat "$WORK/drift" >&2
        fail "vendor/h2 is not h2 $version plus nacelle-h2.patch (the differences are above)"
    fi
    make_patch "$WORK" >"$WORK/regenerated.patch"
    if ! cmp -s "$WORK/regenerated.patch" "$PATCH"; then
        diff -u "$PATCH" "$WORK/regenerated.patch" >&2 || true
        fail "nacelle-h2.patch is not the whole diff in its committed form: run scripts/check-vendored-h2.sh --write-patch"
    fi
    echo "check-vendored-h2: vendor/h2 is h2 $version (sha256 $(cut -d' ' -f1 "$SUM")) plus nacelle-h2.patch"
    ;;
--write-patch)
    version=$(version_of "$VENDOR")
    fetch "$version" "$WORK/h2-$version.crate"
    (cd "$WORK" && sha256sum --quiet -c "$SUM") || fail "checksum mismatch for h2-$version.crate"
    mkdir -p "$WORK/x"
    tar -xzf "$WORK/h2-$version.crate" -C "$WORK/x"
    mv "$WORK"/x/h2-* "$WORK/h2-orig"
    cp -a "$VENDOR" "$WORK/h2"
    make_patch "$WORK" >"$WORK/new.patch"
    cp "$WORK/new.patch" "$PATCH"
    echo "check-vendored-h2: wrote vendor/h2/nacelle-h2.patch ($(grep -c '^diff ' "$PATCH") files); now run the check"
    ;;
--update)
    version=${2:?usage: check-vendored-h2.sh --update VERSION}
    sum=$(index_checksum "$version")
    [ -n "$sum" ] || fail "h2 $version is not in the crates.io index"
    fetch "$version" "$WORK/h2-$version.crate"
    echo "$sum  h2-$version.crate" >"$WORK/new.sha256"
    (cd "$WORK" && sha256sum --quiet -c new.sha256) ||
        fail "the downloaded h2-$version.crate does not match the index's checksum $sum"
    unpack_and_patch "$WORK/h2-$version.crate" "$WORK" ||
        fail "nacelle-h2.patch does not apply to h2 $version with no fuzz: port it by hand in a copy, then --write-patch"
    for f in "${OURS[@]}"; do
        [ "$f" = nacelle-h2.crate.sha256 ] || cp "$VENDOR/$f" "$WORK/h2/$f"
    done
    cp "$WORK/new.sha256" "$WORK/h2/nacelle-h2.crate.sha256"
    # The same changes, with the new release's line numbers and context.
    make_patch "$WORK" >"$WORK/new.patch"
    cp "$WORK/new.patch" "$WORK/h2/nacelle-h2.patch"
    rm -rf "$VENDOR"
    cp -a "$WORK/h2" "$VENDOR"
    echo "check-vendored-h2: vendor/h2 is now h2 $version plus the patch; update NACELLE-PATCH.md's version, run the check, cargo update -p h2, and the gRPC tests"
    ;;
*)
    echo "usage: $0 [check | --write-patch | --update VERSION]" >&2
    exit 2
    ;;
esac
