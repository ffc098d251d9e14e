#!/bin/bash
# Read handles without the lock (this build) against the build before (base), alternating.
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
J=$O/runs.jsonl
run() { # label binary threads args...
  local label=$1 bin=$2 t=$3; shift 3
  local r; r=$(.devbin/$bin bench --threads $t --duration 1 --warmup 0.5 --json "$@" 2>$O/err.txt) || { echo "FAIL $label $t: $(tail -2 $O/err.txt)"; return; }
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({"label": sys.argv[2], "build": sys.argv[3], "threads": int(sys.argv[4]), "ops_per_second": d["ops_per_second"], "pinned_reads": d["cache"]["pinned_reads"], "unlocked_hits": d["cache"]["unlocked_hits"], "hits": d["cache"]["hits"]}))' "$r" "$label" "$bin" "$t" >> $J
  printf '%-28s %-15s %3s %s\n' "$label" $bin $t "$(tail -1 $J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["ops_per_second"]))')"
}
H="--dram 64MiB --working-set 32MiB --read-ratio 1"
for round in 1 2; do
  for t in 1 2 4 8 16; do
    run "handle zipf" tiercache $t $H --handle
    run "handle zipf" tiercache-base $t $H --handle
    run "handle uniform" tiercache $t $H --handle --dist uniform
    run "handle uniform" tiercache-base $t $H --handle --dist uniform
    run "copy zipf" tiercache $t $H
  done
done
T="--dram 64MiB --slow-path /dev/shm/tier --slow-size 512MiB --working-set 256MiB --force --backing /dev/shm/back --reuse-backing --read-ratio 1 --handle"
for t in 1 4 16; do
  run "handle over mapped reads" tiercache $t $T
  run "handle over mapped reads" tiercache-base $t $T
done
rm -f /dev/shm/tier /dev/shm/back
echo done
