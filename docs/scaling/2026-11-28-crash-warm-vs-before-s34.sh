#!/usr/bin/env bash
# The whole of #53's first part against the build before it: the build before (no background
# checkpoints, flash records written only at syncs) and this one at its defaults (records on
# the file as they change, a checkpoint a second), bench rows alternating.
set -u
OLD=${OLD:?the build before}; NEW=${NEW:?this build}
D=/work/kb
ROUNDS=${ROUNDS:-3}
declare -A cfg
cfg[flash]="--dram 0 --flash-path $D/cf --flash-size 64MiB --working-set 48MiB --read-ratio 0.9"
cfg[flash-writes]="--dram 0 --flash-path $D/cf --flash-size 64MiB --working-set 48MiB --read-ratio 0"
cfg[dram+flash]="--dram 16MiB --flash-path $D/cf --flash-size 64MiB --working-set 256MiB --read-ratio 0.9"
cfg[mapped]="--dram 0 --slow-path $D/cm --slow-size 64MiB --working-set 48MiB --read-ratio 0.9"
for r in $(seq 1 $ROUNDS); do
  for c in flash flash-writes dram+flash mapped; do
    for b in old new; do
      bin=$OLD; [ $b = new ] && bin=$NEW
      rm -f $D/cf $D/cm
      out=$($bin bench ${cfg[$c]} --threads 2 --warmup 2 --duration 4 --json 2>/dev/null)
      echo "$r $c $b $(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["ops_per_second"]))')"
    done
  done
done
