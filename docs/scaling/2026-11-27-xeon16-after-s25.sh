#!/bin/bash
# The scaling table at 1, 4 and 16 threads with this build (tier stores, ordered write-back).
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
mkdir -p /var/tmp/tc-scaling
python3 scripts/bench_scaling.py --threads 1,4,16 --binary .devbin/tiercache --foyer .devbin \
  --duration 1 --repeat 1 --out $O/scaling --disk-dir /var/tmp/tc-scaling 2>&1 | tee $O/log.txt
