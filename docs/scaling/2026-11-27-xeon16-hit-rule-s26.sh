#!/bin/bash
# Prepared in session 26 (no device lent then), for the next session with the 16-core machine:
# hits and read handles with the default hit rule (epochs:32) against exact telling, same
# binary, alternating, and against raw copies. Build here first:
#   cargo build --release -p tiercache-cli && strip --strip-debug -o .devbin/tiercache target/release/tiercache
#   (cd bench/foyer-compare && cargo build --release --bin hybrid) && strip --strip-debug -o .devbin/hybrid bench/foyer-compare/target/release/hybrid
# then run with carry [".devbin"], timeout about 500 s. Session 28 added the hybrid against foyer
# with the flash tier written as a log (`--disk-policy log`) beside LRU's.
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
nproc; grep -m1 "model name" /proc/cpuinfo
# Copy-out hits on DRAM and a mapped tier (/dev/shm), cache / raw, both rules, 1-16 threads.
python3 scripts/bench_hits.py --binary .devbin/tiercache --repeat 3 --duration 1.5 \
  --threads 1,2,4,8,16 --also-rule exact --json $O/hits.json
# Read handles: 16 threads over 1, both rules.
J=$O/handles.jsonl
for round in 1 2; do
  for t in 1 4 16; do
    for rule in epochs:32 exact; do
      r=$(.devbin/tiercache bench --dram 64MiB --working-set 32MiB --read-ratio 1 --handle \
            --threads $t --duration 1 --warmup 0.5 --hit-rule $rule --json) || continue
      python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({"rule": sys.argv[2], "threads": int(sys.argv[3]), "ops_per_second": d["ops_per_second"]}))' "$r" $rule $t | tee -a $J
    done
  done
done
# The hybrid against foyer, 1/4/16 threads: the log-ordered flash tier and LRU's, 2 rounds.
for round in 1 2; do
  .devbin/hybrid /var/tmp/tc-hybrid --threads 1,4,16 --disk-tier direct --disk-policy log,lru \
    --warmup 2 --seconds 3 --json | tee -a $O/hybrid.jsonl
done
echo done
