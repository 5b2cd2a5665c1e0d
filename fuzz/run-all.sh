#!/usr/bin/env bash
# Runs every fuzz target for SECONDS_PER_TARGET (default 600) seconds, one at a time, on one
# core, at low priority; libFuzzer's corpus grows in corpus-run/<target> (seeded from the
# committed corpus/<target>), logs go to logs/<target>.log. Needs nightly and cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")"
secs=${SECONDS_PER_TARGET:-600}
targets=${TARGETS:-"listening_configs form grpc_frames proto_json gray_rule jwt permission"}
target_dir=${FUZZ_TARGET_DIR:-../target/fuzz}
mkdir -p logs
CARGO_INCREMENTAL=0 CARGO_BUILD_JOBS=2 nice -n 15 cargo +nightly fuzz build --target-dir "$target_dir"
for t in $targets; do
  mkdir -p "corpus-run/$t"
  cp -n corpus/"$t"/* "corpus-run/$t/"
  nice -n 15 cargo +nightly fuzz run --target-dir "$target_dir" "$t" "corpus-run/$t" -- \
    -jobs=1 -workers=1 -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    > "logs/$t.log" 2>&1 || echo "$t: exit $?" >> logs/failures.txt
  # With -jobs, libFuzzer's worker logs to fuzz-0.log; results.sh reads it from here.
  if [ -f fuzz-0.log ]; then mv fuzz-0.log "logs/$t.worker.log"; fi
done
./results.sh
