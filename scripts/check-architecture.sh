#!/usr/bin/env bash
# Keeps ARCHITECTURE.md true: every repository path and Rust symbol it names in backticks
# must still exist. Fails (exit 1) listing each dead name with its line.
#
#   scripts/check-architecture.sh [DOC]        DOC defaults to ARCHITECTURE.md
#   VERBOSE=1 scripts/check-architecture.sh    also lists every name checked
#
# The rules, applied to each inline `code span` outside fenced ``` blocks:
#  - Not checked: a span with whitespace (a command, a phrase), one starting with `/` (a
#    URL path such as /nacos/v1/cs/configs), one containing `://` (a URL), and one with any
#    character the rules below do not allow (a pattern such as fuzz/corpus/<target>/).
#  - Path: letters, digits and `_ . / -`, with a `/` or ending in .rs, .md, .sh, .toml,
#    .sql, .json, .yaml or .yml. It must exist relative to the repository root (write
#    crates/nacelle-store/src/plan.rs, not plan.rs); a trailing `/` is a directory.
#  - Crate: `nacelle` or `nacelle-<name>` must be a directory crates/<that name>.
#  - Symbol: a path `A::b::C` (each part an identifier), a CamelCase word such as
#    `ConfigKey` (capital first letter, a lowercase letter, no `_`), or a macro `name!`;
#    a trailing `(…)` or `<…>` is left out, so `Store<B>` checks Store. A lone lowercase or
#    ALL_CAPS word is not checked (settings, columns, environment variables): name a
#    function as `Type::method` or `crate_name::function`, so that it is checked.
#    Every part must be defined in crates/**/*.rs, by a line declaring it with struct,
#    enum, trait, type, fn, mod, const, static or union (macro_rules! for a macro). Also
#    accepted: a first part that is a workspace crate (`nacelle_store`), and then the next
#    part must be defined inside that crate; a CamelCase name that is an enum variant (a
#    line starting with it, then `,` `(` `{` `=` or nothing); a lowercase part after
#    `Type::` that is a field (a line `name:` or `pub name:`). `Type::member` checks both
#    names, not that the member belongs to that type.
#    Generated names count as defined: the store's role traits (the `Name {` blocks of
#    the store_roles macro in crates/nacelle-core/src/store.rs, which define_roles turns
#    into `pub trait Name`) and protobuf messages (`message Name` in crates/*/proto/*.proto,
#    which prost turns into `struct Name`).
#  - EXTERNAL below: the few names from std and the crates we build on that the document
#    may mention.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DOC=${1:-$ROOT/ARCHITECTURE.md}
[ -f "$DOC" ] || { echo "check-architecture: no $DOC" >&2; exit 2; }
DOC_FILE=$(cd "$(dirname "$DOC")" && pwd)/$(basename "$DOC")
cd "$ROOT"
DOC=${1:-ARCHITECTURE.md} # as shown in messages
EXTERNAL=" Serialize Deserialize "

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every backtick span outside fenced blocks, as "line<TAB>span" (a span may wrap a line).
perl -0777 -ne '
  my @lines = split /\n/, $_, -1; my $fenced = 0;
  for (@lines) { if (/^\s*```/) { $fenced = !$fenced; $_ = ""; } elsif ($fenced) { $_ = ""; } }
  my $text = join "\n", @lines;
  while ($text =~ /`([^`]+)`/g) {
    my ($span, $at) = ($1, $-[0]);
    my $line = 1 + (() = substr($text, 0, $at) =~ /\n/g);
    $span =~ s/\s*\n\s*/ /g;
    print "$line\t$span\n";
  }' "$DOC_FILE" >"$work/spans"

# Every name a line of crates/ declares.
find crates -name '*.rs' -not -path '*/target/*' >"$work/files"
xargs grep -hoE '\b(struct|enum|trait|type|fn|mod|const|static|union)[[:space:]]+r?#?[A-Za-z_][A-Za-z0-9_]*' <"$work/files" |
  awk '{ sub(/^r#/, "", $2); print $2 }' >"$work/defined"
xargs grep -hoE 'macro_rules![[:space:]]*[A-Za-z_][A-Za-z0-9_]*' <"$work/files" |
  sed -E 's/macro_rules![[:space:]]*//; s/$/!/' >>"$work/defined"
# The role traits generated from store_roles! (see above).
awk '/^macro_rules! store_roles/ { on = 1 } on && /^}/ { on = 0 }
     on && /^            [A-Z][A-Za-z0-9]* \{$/ { print $1 }' \
  crates/nacelle-core/src/store.rs >>"$work/defined"
# The protobuf messages prost generates (see above).
find crates -path '*/proto/*.proto' -exec grep -hoE '^message[[:space:]]+[A-Za-z0-9_]+' {} + |
  awk '{ print $2 }' >>"$work/defined"
sort -u -o "$work/defined" "$work/defined"
# Enum variants (and anything else a line starts with), for CamelCase parts after `::`.
xargs grep -hoE '^[[:space:]]*[A-Z][A-Za-z0-9_]*[[:space:]]*([,({=]|$)' <"$work/files" |
  sed -E 's/^[[:space:]]*//; s/[[:space:]]*[,({=]?$//' | sort -u >"$work/variants"
# Struct fields, for lowercase parts after `Type::`.
xargs grep -hoE '^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?[a-z_][a-z0-9_]*[[:space:]]*:[^:]' <"$work/files" |
  sed -E 's/^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?//; s/[[:space:]]*:.*$//' | sort -u >"$work/fields"

crates=" $(cd crates && ls -d */ | tr -d / | tr '\n' ' ') "
is_defined() { grep -qxF -- "$1" "$work/defined"; }
is_variant() { grep -qxF -- "$1" "$work/variants"; }
is_field() { grep -qxF -- "$1" "$work/fields"; }
defined_in_crate() { # crate dir, name
  find "crates/$1" -name '*.rs' -print0 | xargs -0 grep -qE \
    "\\b(struct|enum|trait|type|fn|mod|const|static|union)[[:space:]]+$2\\b"
}

checked=0 dead=0
report() { # line, span, verdict (empty = alive)
  checked=$((checked + 1))
  if [ -n "$3" ]; then
    dead=$((dead + 1))
    echo "$DOC:$1: \`$2\` $3"
  elif [ -n "${VERBOSE:-}" ]; then
    echo "$DOC:$1: \`$2\` ok"
  fi
}

ident='[A-Za-z_][A-Za-z0-9_]*'
while IFS=$'\t' read -r line span; do
  case $span in
    *[[:space:]]* | /* | *://*) continue ;;
  esac
  # A path.
  if [[ $span =~ ^[A-Za-z0-9_.][A-Za-z0-9_./-]*$ ]] &&
     [[ $span == */* || $span =~ \.(rs|md|sh|toml|sql|json|yaml|yml)$ ]]; then
    if [ -e "$span" ]; then report "$line" "$span" ""; else report "$line" "$span" "does not exist"; fi
    continue
  fi
  # A crate.
  if [[ $span =~ ^nacelle(-[a-z0-9]+)*$ ]]; then
    if [[ $crates == *" $span "* ]]; then report "$line" "$span" ""; else report "$line" "$span" "is not a crate in crates/"; fi
    continue
  fi
  # A symbol.
  [[ $span =~ ^($ident(::$ident)*)(!|\(.*\)|<.*>)?$ ]] || continue
  path=${BASH_REMATCH[1]} suffix=${BASH_REMATCH[3]}
  if [ "$suffix" = "!" ]; then
    if is_defined "$path!"; then report "$line" "$span" ""; else report "$line" "$span" "is not a macro defined in crates/"; fi
    continue
  fi
  if [[ $path != *::* ]]; then
    [[ $path =~ ^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$ ]] || continue
    if [[ $EXTERNAL == *" $path "* ]] || is_defined "$path" || is_variant "$path"; then report "$line" "$span" ""
    else report "$line" "$span" "is not defined in crates/"; fi
    continue
  fi
  IFS=: read -r -a parts <<<"${path//::/:}"
  verdict="" crate_dir="" i=0
  for part in "${parts[@]}"; do
    i=$((i + 1))
    if [ "$i" = 1 ]; then
      dir=${part//_/-}
      if [[ $part =~ ^nacelle(_[a-z0-9]+)*$ && $crates == *" $dir "* ]]; then crate_dir=$dir; continue; fi
      [[ $EXTERNAL == *" $part "* ]] && continue
    elif [ -n "$crate_dir" ]; then
      defined_in_crate "$crate_dir" "$part" || { verdict="names $part, not defined in crates/$crate_dir"; break; }
      crate_dir=""; continue
    fi
    is_defined "$part" && continue
    [[ $part =~ ^[A-Z] ]] && is_variant "$part" && continue
    [[ $i -gt 1 && $part =~ ^[a-z] ]] && is_field "$part" && continue
    verdict="names $part, not defined in crates/"; break
  done
  report "$line" "$span" "$verdict"
done <"$work/spans"

# The service crate's layering (ARCHITECTURE.md, nacelle-service): the config core in
# `src/config/` imports no feature folder of the crate; features reach it, never the
# other way (the core asks them through the traits of `src/config/gates.rs`).
core_dir=crates/nacelle-service/src/config
upward=$(grep -rnE '^[^/]*crate::(audit|changes|schemas|webhooks|rollouts|services)\b' "$core_dir" || true)
if [ -n "$upward" ]; then
  echo "check-architecture: $core_dir imports a feature of the service crate:" >&2
  echo "$upward" >&2
  dead=$((dead + 1))
fi

if [ "$dead" -gt 0 ]; then
  echo "check-architecture: $dead of $checked names in $DOC no longer exist (the rules: the header of $0)"
  exit 1
fi
echo "check-architecture: $checked names in $DOC checked, all exist"
