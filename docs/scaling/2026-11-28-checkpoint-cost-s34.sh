#!/usr/bin/env bash
# Background checkpoints' cost: bench rows with --sync-interval 0 and 1s, alternating.
set -u
BIN=${BIN:-/work/main/target/release/tiercache}
D=/work/kb
ROUNDS=${ROUNDS:-3}
declare -A cfg
cfg[flash]="--dram 0 --flash-path $D/cf --flash-size 64MiB --working-set 48MiB --read-ratio 0.9"
cfg[dram+flash]="--dram 16MiB --flash-path $D/cf --flash-size 64MiB --working-set 256MiB --read-ratio 0.9"
cfg[mapped]="--dram 0 --slow-path $D/cm --slow-size 64MiB --working-set 48MiB --read-ratio 0.9"
for r in $(seq 1 $ROUNDS); do
  for c in flash dram+flash mapped; do
    for si in ${INTERVALS:-0 1s}; do
      rm -f $D/cf $D/cm
      out=$($BIN bench ${cfg[$c]} --threads 2 --warmup 2 --duration 4 --sync-interval $si --json 2>/dev/null)
      echo "$r $c $si $(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["ops_per_second"]), j["cache"]["checkpoints"])')"
    done
  done
done
