#!/bin/bash
# Session 32, on the lent 16-core machine: every row of the sixteen-cores issue (#56) at 1, 4 and
# 16 threads, each beside its baseline in the same run. Build here first:
#   cargo build --release -p tiercache-cli && strip --strip-debug -o .devbin/tiercache target/release/tiercache
#   (cd bench/foyer-compare && cargo build --release --bins)
#   strip --strip-debug -o .devbin/hybrid bench/foyer-compare/target/release/hybrid
# then run with carry [".devbin"] and a limit of about 480 s. Figures land in $OUT:
#   hits.json       DRAM and mapped hits against raw copies (bench_hits.py, default hit rule)
#   handles.jsonl   read handles on DRAM, all hits
#   tiered.jsonl    DRAM 64 MiB over a mapped and over a flash tier: reads only, and write-back
#   hybrid.jsonl    DRAM + direct-I/O disk tier against foyer's hybrid cache: blocks (log, lru),
#                   objects (log), two rounds each, foyer and tiercache alternating
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
B=.devbin/tiercache
nproc; grep -m1 "model name" /proc/cpuinfo; uname -r; df -T /var/tmp /dev/shm | tail -2
SCRATCH=/var/tmp/tc-s32; mkdir -p $SCRATCH
start=$(date +%s)
since() { echo "-- $1 ($(( $(date +%s) - start )) s in)"; }

since hits
python3 scripts/bench_hits.py --binary $B --repeat 3 --duration 1.5 --threads 1,4,16 \
  --slow-path /dev/shm/tc-hits --json $O/hits.json

since handles
for round in 1 2; do
  for t in 1 4 16; do
    r=$($B bench --dram 64MiB --working-set 32MiB --read-ratio 1 --handle \
          --threads $t --duration 1.5 --json) || continue
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({"figure": "DRAM read handles", "threads": int(sys.argv[2]), "ops_per_second": d["ops_per_second"]}))' "$r" $t | tee -a $O/handles.jsonl
  done
done

since tiered
# DRAM 64 MiB over a 512 MiB tier on /dev/shm, Zipf 0.9 over 256 MiB: reads only (write-through,
# all reads), and write-back (90% reads; written blocks kept dirty on the tier, written back in
# device order).
for round in 1 2; do
  for tier in mapped flash; do
    case $tier in
      mapped) T="--slow-path /dev/shm/tc-tier --slow-size 512MiB";;
      flash) T="--flash-path /dev/shm/tc-tier --flash-size 512MiB";;
    esac
    for mode in reads write-back; do
      case $mode in
        reads) M="--read-ratio 1";;
        write-back) M="--read-ratio 0.9 --mode wb";;
      esac
      for t in 1 4 16; do
        r=$($B bench --dram 64MiB $T --working-set 256MiB $M --force --threads $t \
              --duration 1.5 --json) || { echo "failed: $tier $mode $t"; continue; }
        python3 -c 'import json,sys; d=json.loads(sys.argv[1]); c=d.get("cache") or {}; print(json.dumps({"figure": "DRAM 64 MiB over " + sys.argv[2] + ", " + sys.argv[3], "threads": int(sys.argv[4]), "ops_per_second": d["ops_per_second"], "hit_ratio": d.get("hit_ratio"), "writes_dropped": c.get("writes_dropped")}))' "$r" $tier $mode $t | tee -a $O/tiered.jsonl
      done
    done
    rm -f /dev/shm/tc-tier
  done
done

since hybrid
.devbin/hybrid $SCRATCH --threads 1,4,16 --disk-tier direct --disk-policy log,lru \
  --workload blocks --rounds 2 --warmup 1.5 --seconds 2.5 --json | tee -a $O/hybrid.jsonl
.devbin/hybrid $SCRATCH --threads 1,4,16 --disk-tier direct --disk-policy log \
  --workload objects --rounds 2 --warmup 1.5 --seconds 2.5 --json | tee -a $O/hybrid.jsonl
since done
