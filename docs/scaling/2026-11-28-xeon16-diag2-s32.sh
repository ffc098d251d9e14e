#!/bin/bash
# Session 32, prepared for a second run on the 16-core machine (not run: the machine was withdrawn
# before it); for the next session that has one. Why the first run's misses missed:
# - read handles with and without the per-shard room word of `Pins`: .devbin/tiercache-noroom is
#   a build with 2026-11-28-pins-without-room-s32.patch applied (measurement only: without the
#   room, pinned slots are unbounded);
# - the hybrid at 16 threads with more shards (both caches), and with a page-cache disk tier
#   (tiercache alone), to tell lock contention from the device;
# - write-back at 16 threads with more shards.
# Build as for 2026-11-28-xeon16-s32.sh, then
#   git apply docs/scaling/2026-11-28-pins-without-room-s32.patch && cargo build --release -p tiercache-cli \
#     && strip --strip-debug -o .devbin/tiercache-noroom target/release/tiercache; git checkout crates/tiercache-engine/src/pins.rs
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/diag2.txt) 2>&1
B=.devbin/tiercache; S=/var/tmp/tc-d2; mkdir -p $S
ops() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["ops_per_second"]))'; }
for round in 1 2; do for t in 1 16; do for b in tiercache tiercache-noroom; do
  echo "handles $b threads $t: $(.devbin/$b bench --dram 64MiB --working-set 32MiB --read-ratio 1 --handle --threads $t --duration 1.5 --json | ops)"
done; done; done
.devbin/hybrid $S --threads 16 --disk-tier direct --disk-policy log --workload blocks --shards 32 --warmup 1.5 --seconds 2.5 --json
.devbin/hybrid $S --threads 16 --disk-tier direct --disk-policy log --workload blocks --shards 256 --warmup 1.5 --seconds 2.5 --json
.devbin/hybrid $S --threads 16 --disk-tier file --disk-policy log --workload blocks --shards 32 --warmup 1.5 --seconds 2.5 --json --tiercache-only
.devbin/hybrid $S --threads 16 --disk-tier direct --disk-policy log --workload objects --shards 128 --warmup 1.5 --seconds 2.5 --json
for sh in 256 1024 4096; do
  echo "write-back flash 16 threads, $sh shards: $($B bench --dram 64MiB --flash-path /dev/shm/tc-t --flash-size 512MiB --working-set 256MiB --read-ratio 0.9 --mode wb --force --threads 16 --shards $sh --duration 1.5 --json 2>/dev/null | ops)"
  rm -f /dev/shm/tc-t
done
echo done
