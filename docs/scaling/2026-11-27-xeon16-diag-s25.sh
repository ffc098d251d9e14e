#!/bin/bash
# 16-core diagnostics for the scaling issue: where read handles and tiered rows stop.
set -u
B=$PWD/.devbin/tiercache
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
{ nproc; grep -m1 "model name" /proc/cpuinfo; grep -m1 "cpu family" /proc/cpuinfo; grep -m1 "^model\s" /proc/cpuinfo; uname -r; free -g | head -2; df -h /dev/shm /tmp | cat; command -v perf; } > $O/machine.txt
cat $O/machine.txt
J=$O/runs.jsonl
run() { # label threads args...
  local label=$1 t=$2; shift 2
  local r; r=$($B bench --threads $t --duration 1 --warmup 0.5 --json "$@" 2>$O/err.txt) || { echo "FAIL $label $t: $(tail -2 $O/err.txt)"; return; }
  echo "{\"label\":\"$label\",\"threads\":$t,\"result\":$r}" >> $J
  printf '%-40s %3s %s\n' "$label" $t "$(echo "$r" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["ops_per_second"]))')"
}
H="--dram 64MiB --working-set 32MiB --read-ratio 1"
for t in 1 2 4 8 16; do
  run "handle zipf lru" $t $H --handle
  run "handle uniform lru" $t $H --handle --dist uniform
  run "handle zipf lru 4096 shards" $t $H --handle --shards 4096
  run "handle zipf clock" $t $H --handle --policy clock
  run "copy zipf lru" $t $H
  run "copy zipf lru locked-hits" $t $H --locked-hits
done
TT="--slow-path /dev/shm/tier --slow-size 512MiB --working-set 256MiB --force --backing /dev/shm/back --reuse-backing"; T="--dram 64MiB $TT --read-ratio 0.9"
for t in 1 4 16; do
  run "mapped wt tmpfs-backing" $t $T
  run "mapped wt tmpfs-backing reads-only" $t --dram 64MiB $TT --read-ratio 1
  run "mapped wt tmpfs-backing locked-hits" $t $T --locked-hits
  run "mapped wb tmpfs-backing" $t $T --mode wb
  run "mapped raw" $t $TT --read-ratio 0.9 --raw
done
FF="--flash-path /dev/shm/fl --flash-size 512MiB --working-set 256MiB --force --backing /dev/shm/back --reuse-backing"; F="--dram 64MiB $FF --read-ratio 0.9"
for t in 1 4 16; do
  run "flash wt tmpfs-backing" $t $F
  run "flash wt tmpfs-backing reads-only" $t --dram 64MiB $FF --read-ratio 1
  run "flash raw" $t $FF --read-ratio 0.9 --raw
done
if command -v perf >/dev/null; then
  perf record -F 999 -g -o /tmp/p1.data -- $B bench --threads 16 --duration 2 --warmup 0.5 $H --handle >/dev/null 2>&1
  perf report -i /tmp/p1.data --stdio --no-children --sort symbol -g none --percent-limit 0.3 2>/dev/null | head -300 > $O/perf-handle16.txt
  perf record -F 999 -g -o /tmp/p2.data -- $B bench --threads 16 --duration 2 --warmup 0.5 $T >/dev/null 2>&1
  perf report -i /tmp/p2.data --stdio --no-children --sort symbol -g none --percent-limit 0.3 2>/dev/null | head -300 > $O/perf-mapped16.txt
  perf record -F 999 -g -o /tmp/p3.data -- $B bench --threads 16 --duration 2 --warmup 0.5 $F >/dev/null 2>&1
  perf report -i /tmp/p3.data --stdio --no-children --sort symbol -g none --percent-limit 0.3 2>/dev/null | head -300 > $O/perf-flash16.txt
fi
rm -f /dev/shm/tier /dev/shm/back /dev/shm/fl
echo done
