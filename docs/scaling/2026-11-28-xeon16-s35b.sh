#!/bin/bash
# Session 35's second run on the 16-core machine, after 2026-11-28-xeon16-s35.sh: what holds
# the hybrid at 16 threads, and the hits' profile.
# - a kernel call graph of the hybrid at 16 threads (tiercache alone): whose locks
#   `osq_lock` and `rwsem_spin_on_owner` (19% of the machine in the first run) are;
# - main's hybrid against a build whose tier files are allocated when created (fallocate, so a
#   direct write into the tier is an overwrite, taking the inode's lock shared), alternating;
# - both caches with the backing file read and written with direct I/O (`--backing-io direct`,
#   new in that build) at 1, 4 and 16 threads;
# - a flat profile of DRAM copy-out hits at 16 threads, and the hits' rows again.
# Binaries, built on the 2-core machine and packed in .devbin/bins2.tar.xz:
#   hybrid-main (main at e596aa5), hybrid-new (with the allocation and --backing-io),
#   tiercache (main at e596aa5); perf as for the first run.
set -u
tar xJf .devbin/bins2.tar.xz -C .devbin || exit 1
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
B=.devbin/tiercache
nproc; grep -m1 "model name" /proc/cpuinfo; grep -m1 -E "^model\s" /proc/cpuinfo
S=/var/tmp/tc-s35b; mkdir -p $S
start=$(date +%s)
since() { echo "-- $1 ($(( $(date +%s) - start )) s in)"; }
mkdir -p /tmp/perf && tar xJf .devbin/perf.tar.xz -C /tmp/perf
P="env LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf"
H16="--threads 16 --disk-tier direct --disk-policy log --workload blocks --warmup 1.5 --seconds 2.5 --json"

since "call graph"
$P record -F 999 -e cpu-clock -a -g -o /tmp/cg.data -- .devbin/hybrid-main $S $H16 --tiercache-only 2>/dev/null
{ echo "## hybrid, blocks, log, 16 threads, tiercache alone: kernel callers of the spinning";
  for s in osq_lock rwsem_spin_on_owner __pv_queued_spin_lock_slowpath ext4_block_write_begin; do
    $P report -i /tmp/cg.data --stdio --no-children --sort symbol -S $s -G --percent-limit 0.3 2>/dev/null | grep -v "^#" | grep -v "^$" | head -60
  done; } > $O/callers.txt

since "allocated tier files, alternating"
for round in 1 2; do
  for b in hybrid-main hybrid-new; do
    echo "$b round $round: $(.devbin/$b $S $H16 --tiercache-only 2>/dev/null)" | tee -a $O/hybrid.jsonl
  done
done

since "backing with direct I/O"
.devbin/hybrid-new $S --threads 1,4,16 --disk-tier direct --disk-policy log --workload blocks \
  --backing-io direct --warmup 1.5 --seconds 2.5 --json | tee -a $O/hybrid.jsonl
.devbin/hybrid-new $S --threads 16 --disk-tier direct --disk-policy log --workload blocks \
  --warmup 1.5 --seconds 2.5 --json | sed 's/^{/{"build":"hybrid-new",/' | tee -a $O/hybrid.jsonl

since "hits profile"
$P record -F 1999 -e cpu-clock -o /tmp/hits.data -- $B bench --dram 64MiB --working-set 32MiB \
  --read-ratio 1 --threads 16 --duration 1.5
$P record -F 1999 -e cpu-clock -o /tmp/raw.data -- $B bench --raw --working-set 32MiB \
  --read-ratio 1 --threads 16 --duration 1.5
{ echo "## DRAM copy-out hits, 16 threads"; $P report -i /tmp/hits.data --stdio --no-children --sort dso,symbol --percent-limit 0.4 2>/dev/null | grep -v "^#" | grep -v "^$";
  echo "## raw copies, 16 threads"; $P report -i /tmp/raw.data --stdio --no-children --sort dso,symbol --percent-limit 0.4 2>/dev/null | grep -v "^#" | grep -v "^$"; } > $O/perf-hits.txt

since hits
python3 scripts/bench_hits.py --binary $B --repeat 3 --duration 1.5 --threads 1,4,16 \
  --slow-path /dev/shm/tc-hits --json $O/hits.json
since done
