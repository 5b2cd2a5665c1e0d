#!/bin/bash
# Prints the results of run-all.sh as the table in docs/security.md (Fuzzing), from
# libFuzzer's worker logs (logs/<target>.worker.log) and the artifacts it left.
cd "$(dirname "$0")"
echo "| target | seconds | runs | runs/s | edges (cov) | features (ft) | corpus | crashes, hangs, OOMs |"
echo "|---|---|---|---|---|---|---|---|"
for t in listening_configs form grpc_frames proto_json gray_rule jwt permission; do
  f=logs/$t.worker.log
  [ -f "$f" ] || continue
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' $f | awk '{print $2}')
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' $f | awk '{print $2}')
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' $f | awk '{print $5}')
  last=$(grep -E '(DONE|pulse|NEW|REDUCE) +cov:' $f | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | awk '{print $2}')
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | awk '{print $2}')
  corp=$(echo "$last" | grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' | awk '{print $2}')
  bad=$(ls artifacts/$t 2>/dev/null | grep -cE '^(crash|timeout|oom|leak|slow-unit)-')
  echo "| \`$t\` | ${secs:-running} | ${runs:-?} | ${eps:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${bad} |"
done
